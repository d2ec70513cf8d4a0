"""Every figure a board reports of itself, bounded before it is stored, summed or shown.

    limits = status_limits(cfg.env_id, ingest_bounds)      # the learner's
    limits = limits_for_env(manifest.env_id)                # the deploy tool's
    status, clamped = bound_status(status, limits)   # clamped: the fields it changed

A status that decodes is well-formed (every count in [0, 2^53), every time finite), but a
compromised board with valid credentials may still say its recent return is 1e308, or that
its actor loop has run for 1e308 s: summed over the fleet such figures become infinite
(``summary.json``'s energy written as ``Infinity``, which is not JSON), and shown they are
300-digit numbers. So the learner (roster.py) and the deploy tool (fleet_watch.py) clamp
each figure to what the env and the board's own counts make possible:

* ``recent_return`` to the env's return range: the per-step reward range (plausible.py:
  known, configured, a warm-up's or generic) times ``max_episode_steps`` from the
  gymnasium registry, and 0 (``UNKNOWN_EPISODE_STEPS`` when the registry has no limit);
* ``episodes`` to ``env_steps`` (an episode takes at least one step), ``batches_sent`` to
  the transitions sent, dropped or oversize (a batch holds at least one);
* ``env_steps_per_s`` to ``MAX_STEPS_PER_S``, every runtime breakdown bucket and the wall
  time to ``MAX_SECONDS``, ``time_unix`` to ``[0, MAX_UNIX]``.

Counts of steps and transitions are bounded by the board's grant where they are recorded
(roster.py refuses a status over it). What was clamped is counted by the caller.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from edge_rl.learner.ingest.plausible import KNOWN_REWARDS, Bounds
from edge_rl.types import ActorStatus

# A registry env without ``max_episode_steps``, or a ``module:callable`` env: a generous
# episode length, so that its return bound is still finite (and summable over 1,000 boards).
UNKNOWN_EPISODE_STEPS = 100_000
MAX_STEPS_PER_S = 1e6  # env steps a second: far above any board's (a Pi 5 does ~10^4)
MAX_SECONDS = 10 * 365 * 86400.0  # a bucket of a runtime breakdown: ten years
MAX_UNIX = 2**33  # seconds since the epoch (the year 2242)


@dataclass(frozen=True)
class StatusLimits:
    """What a status of one run's env may say; the return range is inclusive."""

    return_low: float
    return_high: float

    def __post_init__(self) -> None:
        finite = math.isfinite(self.return_low) and math.isfinite(self.return_high)
        if not finite or self.return_low > self.return_high:
            raise ValueError(f"return range [{self.return_low}, {self.return_high}]")

    def clamp_return(self, value: float) -> float:
        return min(max(value, self.return_low), self.return_high)


# Where the env is not known (``edge-rl fleet-status``): a bound that keeps any fleet's
# sums finite and any figure shown short.
GENERIC_LIMITS = StatusLimits(-1e12, 1e12)


def episode_limit(env_id: str) -> int:
    """``max_episode_steps`` of ``env_id`` in the gymnasium registry (no env is made);
    ``UNKNOWN_EPISODE_STEPS`` if it has none or is not a registry id."""
    if ":" in env_id:
        return UNKNOWN_EPISODE_STEPS
    try:
        import gymnasium as gym

        steps = gym.spec(env_id).max_episode_steps
    except Exception:  # noqa: BLE001 - any id the registry does not know: the generous bound
        return UNKNOWN_EPISODE_STEPS
    return int(steps) if steps else UNKNOWN_EPISODE_STEPS


def limits_for_env(
    env_id: str, reward_low: float | None = None, reward_high: float | None = None
) -> StatusLimits:
    """The return range of ``env_id``: per-step rewards (given, else ``KNOWN_REWARDS``,
    else ±1e6) times its episode limit, widened to hold 0 (an episode cut short)."""
    if reward_low is None or reward_high is None:
        reward_low, reward_high = KNOWN_REWARDS.get(env_id, (-1e6, 1e6))
    steps = episode_limit(env_id)
    return StatusLimits(min(0.0, reward_low * steps), max(0.0, reward_high * steps))


def status_limits(env_id: str, bounds: Bounds | None) -> StatusLimits:
    """The learner's limits: per-step rewards as ingest bounds them (plausible.py)."""
    if bounds is None:
        return limits_for_env(env_id)
    return limits_for_env(env_id, bounds.reward_low, bounds.reward_high)


def _clip(value: float, high: float) -> float:
    return min(max(float(value), 0.0), high)


def bound_status(status: ActorStatus, limits: StatusLimits) -> tuple[ActorStatus, tuple[str, ...]]:
    """``status`` with every figure inside what is possible, and the fields that were not."""
    s = status
    changes: dict[str, object] = {}
    if s.recent_return is not None:
        ret = limits.clamp_return(s.recent_return)
        if ret != s.recent_return:
            changes["recent_return"] = ret
    if s.episodes > s.env_steps:
        changes["episodes"] = s.env_steps
    sent = s.transitions_sent + s.transitions_dropped + s.transitions_oversize
    if s.batches_sent > sent:
        changes["batches_sent"] = sent
    if (rate := _clip(s.env_steps_per_s, MAX_STEPS_PER_S)) != s.env_steps_per_s:
        changes["env_steps_per_s"] = rate
    if (when := _clip(s.time_unix, MAX_UNIX)) != s.time_unix:
        changes["time_unix"] = when
    if s.breakdown and any(v > MAX_SECONDS for v in s.breakdown.values()):
        changes["breakdown"] = {k: _clip(v, MAX_SECONDS) for k, v in s.breakdown.items()}
    if not changes:
        return s, ()
    return dataclasses.replace(s, **changes), tuple(sorted(changes))
