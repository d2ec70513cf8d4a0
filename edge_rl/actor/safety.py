"""The safety shield: the last step between any action and the env (docs/robots.md).

    shield = Shield(spec, board.safety)
    applied, reasons = shield.apply(proposed)   # policy, exploration or an override
    env.step(applied)                           # and the transition records ``applied``
    applied, reasons = shield.safe("broker_lost")   # a watchdog's safe action (None: stop)
    shield.reset()                              # after env.reset: the rate starts from rest
    shield.counts                               # reason -> actions changed, for the status

Every action the board gives its env comes out of ``apply`` or ``safe``, whoever proposed
it, and what holds for its output does not depend on its input:

* Box: the action has the env's shape, every element is finite, within
  ``[low, high]``, and within ``max_delta`` of the action applied before it (float32
  rounding aside; from rest, the zero action clipped into the bounds, at the start and
  after each ``reset``).
* Discrete: the action is an integer index in ``[0, num_actions)``.

In that order: an action that is not one (wrong shape, a NaN or inf, an index out of range
or not an integer) becomes the ``nonfinite`` action (``hold``: the last applied; ``zero``;
or the board file's action) and is counted ``nonfinite``; it is then clipped to the
bounds (``clipped``) and its change limited (``rate_limited``). ``safe(reason)`` puts
``on_stale``'s action through the same limits and counts ``reason``: a safe action ramps
to zero at ``max_delta`` a step rather than jumping there, as the rate is a property of
the actuator whatever asks for the move.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from edge_rl.boards import Safety
from edge_rl.specs import EnvSpec
from edge_rl.types import SAFE_REASONS, SHIELD_REASONS


class Shield:
    def __init__(self, spec: EnvSpec, cfg: Safety) -> None:
        self.cfg = cfg
        self.discrete = spec.discrete
        self.counts: dict[str, int] = dict.fromkeys((*SHIELD_REASONS, *SAFE_REASONS), 0)
        if self.discrete:
            self._init_discrete(spec, cfg)
        else:
            self._init_box(spec, cfg)

    # --- set-up: every configured value checked against the env, once --------------

    def _init_discrete(self, spec: EnvSpec, cfg: Safety) -> None:
        for name in ("action_low", "action_high", "max_delta"):
            if getattr(cfg, name) is not None:
                raise ValueError(f"safety.{name} applies to Box action spaces, not a discrete env")
        self.n = spec.num_actions
        self.shape: tuple[int, ...] = ()
        self.rest: Any = np.int64(0)
        self.prev: Any = self.rest
        self._replace = self._index(cfg.nonfinite, "nonfinite")
        self._stale = self._index(cfg.on_stale, "on_stale")

    def _index(self, v: Any, name: str) -> Any:
        if isinstance(v, str):
            return v
        if len(v) != 1 or v[0] != int(v[0]) or not 0 <= v[0] < self.n:
            raise ValueError(f"safety.{name}: {v!r} is not an action index below {self.n}")
        return np.int64(v[0])

    def _init_box(self, spec: EnvSpec, cfg: Safety) -> None:
        size = len(spec.action_low)
        self.shape = spec.action_shape
        low = self._per_dim(cfg.action_low, size, "action_low", spec.action_low)
        high = self._per_dim(cfg.action_high, size, "action_high", spec.action_high)
        if np.any(low >= high):
            raise ValueError("safety: action_low must be below action_high in every dimension")
        self.low = low
        self.high = high
        inf = np.full(size, np.inf, np.float32)
        self.delta = self._per_dim(cfg.max_delta, size, "max_delta", inf)
        self.rest = np.clip(np.zeros(size, np.float32), low, high)  # flat, as the limits
        self.prev = self.rest
        self._replace = self._vector(cfg.nonfinite, size, "nonfinite")
        self._stale = self._vector(cfg.on_stale, size, "on_stale")

    @staticmethod
    def _per_dim(v: tuple[float, ...] | None, size: int, name: str, default: Any) -> np.ndarray:
        if v is None:
            return np.asarray(default, np.float32).reshape(size)
        if len(v) not in (1, size):
            raise ValueError(f"safety.{name}: {len(v)} numbers for {size} action dimensions")
        return np.broadcast_to(np.asarray(v, np.float32), (size,)).copy()

    def _vector(self, v: Any, size: int, name: str) -> Any:
        if isinstance(v, str):
            return v
        if len(v) not in (1, size):
            raise ValueError(f"safety.{name}: {len(v)} numbers for {size} action dimensions")
        return np.broadcast_to(np.asarray(v, np.float32), (size,)).copy()

    # --- the loop's calls ----------------------------------------------------------------

    def reset(self) -> None:
        """The env was reset: the next action's change is limited from rest."""
        self.prev = self.rest

    def apply(self, proposed: Any) -> tuple[Any, tuple[str, ...]]:
        """The action the env may get for ``proposed``, and why it differs (if it does)."""
        if self.discrete:
            return self._apply_discrete(proposed)
        return self._apply_box(proposed)

    def safe(self, reason: str | None) -> tuple[Any, tuple[str, ...]]:
        """``on_stale``'s action through the limits, counted under ``reason`` (None: not
        counted, the hold before a reset hook); ``None`` for ``stop``: no action at all."""
        if reason is not None:
            self.counts[reason] += 1
        why = () if reason is None else (reason,)
        if self._stale == "stop":
            return None, why
        target = self._named(self._stale)
        if self.discrete:
            self.prev = np.int64(target)
            return self.prev, why
        applied, limited = self._limit(np.asarray(target, np.float32))
        return applied, (*why, *limited)

    def _apply_discrete(self, proposed: Any) -> tuple[Any, tuple[str, ...]]:
        ok = (isinstance(proposed, (int, np.integer)) or _int_scalar(proposed)) and not isinstance(
            proposed, bool
        )
        if ok and 0 <= int(proposed) < self.n:
            self.prev = np.int64(proposed)
            return self.prev, ()
        self.counts["nonfinite"] += 1
        self.prev = np.int64(self._named(self._replace))
        return self.prev, ("nonfinite",)

    def _apply_box(self, proposed: Any) -> tuple[Any, tuple[str, ...]]:
        try:
            a = np.asarray(proposed, np.float32).reshape(-1)
        except (TypeError, ValueError):  # not numbers at all: not an action
            a = np.full(1, np.nan, np.float32)
        if a.size != self.rest.size or not np.isfinite(a).all():
            self.counts["nonfinite"] += 1
            applied, why = self._limit(self._named(self._replace))
            return applied, ("nonfinite", *why)
        return self._limit(a)

    def _named(self, v: Any) -> Any:
        """``hold``: the last action applied; ``zero``: the zero action; else ``v`` itself
        (an action checked at set-up)."""
        if isinstance(v, str):
            return self.prev if v == "hold" else np.zeros_like(self.rest)
        return v

    def _limit(self, a: np.ndarray) -> tuple[np.ndarray, tuple[str, ...]]:
        """``a`` (flat, finite) clipped to the bounds, then to ``prev ± max_delta``."""
        why: tuple[str, ...] = ()
        c = np.minimum(np.maximum(a, self.low), self.high)
        if (c != a).any():
            self.counts["clipped"] += 1
            why = ("clipped",)
        # prev is within the bounds, so [lo, hi] holds prev: never empty.
        lo = np.maximum(self.low, self.prev - self.delta)
        hi = np.minimum(self.high, self.prev + self.delta)
        r = np.minimum(np.maximum(c, lo), hi)
        if (r != c).any():
            self.counts["rate_limited"] += 1
            why = (*why, "rate_limited")
        self.prev = r
        return r.reshape(self.shape), why


def _int_scalar(v: Any) -> bool:
    """A 0-d numpy array of an integer dtype (``np.argmax`` of an array gives a scalar)."""
    return isinstance(v, np.ndarray) and v.shape == () and np.issubdtype(v.dtype, np.integer)
