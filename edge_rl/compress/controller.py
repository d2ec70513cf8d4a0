"""GST's reward-aware sparsity controller (Lee et al. 2021): prune only while reward allows.

Pure Python, deterministic, no TensorFlow. The learner feeds it returns and asks it for the
target sparsity through the same ``Schedule`` protocol as the iterative baseline::

    controller = RewardAwareController(ControllerConfig(window=10, step_up=0.05))
    schedule = RewardAwareSchedule(controller, begin_step=s_shift_step, frequency=1000)
    on every finished evaluation/episode:  controller.observe(episode_return)
    on every update step:                  decision = schedule(step)   # -> PruneDecision

The paper gives the idea, not the rule; the rule implemented here. Returns are grouped in
consecutive, non-overlapping windows of ``window`` returns and one decision is taken per
full window, on its mean ``m``. With ``best`` the highest window mean so far and
``gap = (best - m) / max(|best|, min_scale)`` (how far below the best, as a fraction of the
return's scale)::

    first window                          HOLD   (it only sets best)
    gap <= tolerance        ("holds")     RAISE  target += step_up  (at most max_sparsity)
    gap >  tolerance        ("drops")     HOLD   stop raising
    ... and the previous window dropped
        too and m < its mean ("further")  LOWER  target -= step_down (at least min_sparsity)

Best-so-far rather than the previous window: a slow slide of small drops, each inside the
tolerance of its predecessor, still trips the rule. A lucky window inflates ``best``; use a
window of several episodes. ``min_scale`` keeps the tolerance meaningful for returns near 0.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from edge_rl.compress.schedule import PruneDecision


@dataclass(frozen=True)
class ControllerConfig:
    # Sparsity range and steps (fractions of blocks pruned).
    initial_sparsity: float = 0.0
    min_sparsity: float = 0.0
    max_sparsity: float = 0.9
    step_up: float = 0.05  # per window that holds the trend
    step_down: float = 0.05  # per window that drops further; 0 never steps back

    # Trend test.
    window: int = 10  # returns per decision
    tolerance: float = 0.05  # allowed shortfall below the best window mean, fraction of scale
    min_scale: float = 1.0  # scale floor, in return units, for returns near zero

    def __post_init__(self) -> None:
        _check(
            0.0 <= self.min_sparsity <= self.initial_sparsity <= self.max_sparsity < 1.0,
            "need 0 <= min_sparsity <= initial_sparsity <= max_sparsity < 1",
            (self.min_sparsity, self.initial_sparsity, self.max_sparsity),
        )
        _check(0.0 < self.step_up < 1.0, "step_up must be in (0, 1)", self.step_up)
        _check(0.0 <= self.step_down < 1.0, "step_down must be in [0, 1)", self.step_down)
        _check(self.window >= 1, "window must be >= 1", self.window)
        _check(self.tolerance >= 0.0, "tolerance must be >= 0", self.tolerance)
        _check(self.min_scale > 0.0, "min_scale must be > 0", self.min_scale)


class Action(enum.Enum):
    RAISE = "raise"
    HOLD = "hold"
    LOWER = "lower"


@dataclass(frozen=True)
class ControllerDecision:
    action: Action
    target_sparsity: float  # after the action
    window_mean: float  # m
    best_mean: float  # best window mean after this window
    gap: float  # (best before this window - m) / scale; 0.0 for the first window


class RewardAwareController:
    """The rule in the module docstring; ``target_sparsity`` is its current output."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self._target = config.initial_sparsity
        self._returns: list[float] = []  # the window being filled
        self._best: float | None = None
        self._previous: ControllerDecision | None = None

    @property
    def target_sparsity(self) -> float:
        return self._target

    def observe(self, episode_return: float) -> ControllerDecision | None:
        """Add one return; a decision when it completes a window, else None."""
        if not math.isfinite(episode_return):
            raise ValueError(f"episode_return must be finite, got {episode_return!r}")
        self._returns.append(float(episode_return))
        if len(self._returns) < self.config.window:
            return None
        mean = sum(self._returns) / len(self._returns)
        self._returns.clear()
        decision = self._decide(mean)
        self._previous = decision
        return decision

    def state(self) -> dict:
        """JSON-able, for a checkpoint (edge_rl/learner/durable.py)."""
        p = self._previous
        previous = (
            None
            if p is None
            else [p.action.value, p.target_sparsity, p.window_mean, p.best_mean, p.gap]
        )
        return {
            "target": self._target,
            "returns": list(self._returns),
            "best": self._best,
            "previous": previous,
        }

    def load_state(self, state: dict) -> None:
        self._target = state["target"]
        self._best = state["best"]
        self._returns = list(state["returns"])
        p = state["previous"]
        self._previous = None if p is None else ControllerDecision(Action(p[0]), *p[1:])

    def _decide(self, mean: float) -> ControllerDecision:
        c, previous = self.config, self._previous
        if self._best is None:
            self._best = mean
            return ControllerDecision(Action.HOLD, self._target, mean, mean, 0.0)
        gap = (self._best - mean) / max(abs(self._best), c.min_scale)
        if gap <= c.tolerance:
            action = Action.RAISE
            self._target = min(self._target + c.step_up, c.max_sparsity)
            self._best = max(self._best, mean)
        elif previous is not None and _dropped(previous, c) and mean < previous.window_mean:
            action = Action.LOWER
            self._target = max(self._target - c.step_down, c.min_sparsity)
        else:
            action = Action.HOLD
        return ControllerDecision(action, self._target, mean, self._best, gap)


class RewardAwareSchedule:
    """The controller as a ``Schedule`` (``edge_rl.compress.schedule``).

    Masks are updated every ``frequency`` steps from ``begin_step`` (where GST's ``S_shift``
    phase starts pruning), to whatever target the controller holds at that step.
    """

    def __init__(self, controller: RewardAwareController, begin_step: int, frequency: int):
        _check(begin_step >= 0, "begin_step must be >= 0", begin_step)
        _check(frequency >= 1, "frequency must be >= 1", frequency)
        self.controller = controller
        self.begin_step = int(begin_step)
        self.frequency = int(frequency)

    def __call__(self, step: int) -> PruneDecision:
        due = step >= self.begin_step and (step - self.begin_step) % self.frequency == 0
        return PruneDecision(due, self.controller.target_sparsity)


def _dropped(decision: ControllerDecision, config: ControllerConfig) -> bool:
    return decision.gap > config.tolerance


def _check(ok: bool, message: str, value: object) -> None:
    if not ok:
        raise ValueError(f"reward-aware controller: {message}, got {value!r}")
