"""What a transition of the run's env can hold: observation bounds from its observation
space, and per-step reward bounds (protocol.md §3.1, security.md). A batch outside them is
refused (``out_of_bounds``, ``implausible_reward``, ``implausible_obs``): a board with
valid credentials that sends rewards of ±1e6 must not reach replay, even though they are
finite and well-formed.

Observation dimensions the space leaves unbounded (CartPole's two velocities, every one of
HalfCheetah's) are bounded by the same warm-up: each dimension's range over
``ingest.warmup_steps`` random env steps, widened by ``ingest.warmup_margin`` times its
width (at least 1) on each side. A batch inside the space but outside those bounds is
refused (``implausible_obs``): CartPole velocities of ±9.9e5 are finite and inside the
space, and as export calibration data they broke every export after them. The same bounds
clip the export's calibration (outbound/packager.py).

    bounds = bounds_for_env(cfg.env_id, cfg.ingest, cfg.seed, cfg.max_abs_reward)  # may step it
    bounds.reward_source           # which rule gave the reward bounds

Reward bounds, the first rule that applies:
1. the run config's ``ingest.reward_low``/``ingest.reward_high``;
2. a known per-step range (``KNOWN_REWARDS``, each with its source);
3. a random policy's range over ``ingest.warmup_steps`` env steps on the learner host,
   widened by ``ingest.warmup_margin`` times its width on each side: a trained policy earns
   more per step than a random one (HalfCheetah: about -1..1 at random, 12-15 trained);
4. the generic ``max_abs_reward`` (1e6), when there is no env to step or no warm-up.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from edge_rl.config import IngestConfig
from edge_rl.envs import make_env

log = logging.getLogger(__name__)

# Per-step reward ranges known exactly from the env's own code (gymnasium 1.x).
KNOWN_REWARDS: dict[str, tuple[float, float]] = {
    # cartpole.py: reward = 1.0 on every step an actor takes (it resets on termination).
    "CartPole-v1": (1.0, 1.0),
    # pendulum.py: -(angle_normalize(th)^2 + 0.1 thdot^2 + 0.001 u^2), |th| <= pi,
    # |thdot| <= max_speed = 8, |u| <= max_torque = 2.
    "Pendulum-v1": (-(math.pi**2 + 0.1 * 8**2 + 0.001 * 2**2), 0.0),
}
OBS_TOLERANCE = 1e-5  # relative, for float32 rounding of an observation at its bound


@dataclass(frozen=True)
class Bounds:
    obs_low: tuple[float, ...]  # per element of the flattened observation; -inf: unbounded
    obs_high: tuple[float, ...]
    reward_low: float
    reward_high: float
    reward_source: str  # "config", "known", "warm-up" or "generic"
    # Bounds of the unbounded dimensions from the warm-up (the space's elsewhere); empty:
    # the space's alone (no warm-up, or a space bounded in every dimension).
    plausible_low: tuple[float, ...] = ()
    plausible_high: tuple[float, ...] = ()

    def obs_implausible(self, obs: np.ndarray) -> bool:
        """Whether any observation in ``obs`` [n, *shape] is outside the warm-up's bounds."""
        if not self.plausible_low:
            return False
        flat = obs.reshape(len(obs), -1).astype(np.float64)
        return bool(
            np.any(flat < np.asarray(self.plausible_low)) or np.any(flat > self.plausible_high)
        )

    def clip(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` [n, *shape] clipped to the tightest bounds known (finite dimensions)."""
        low = np.asarray(self.plausible_low or self.obs_low, np.float64)
        high = np.asarray(self.plausible_high or self.obs_high, np.float64)
        flat = obs.reshape(len(obs), -1)
        return np.clip(flat, low, high).astype(obs.dtype).reshape(obs.shape)

    def obs_outside(self, obs: np.ndarray) -> bool:
        """Whether any observation in ``obs`` [n, *shape] is outside the space's bounds."""
        flat = obs.reshape(len(obs), -1).astype(np.float64)
        low, high = np.asarray(self.obs_low), np.asarray(self.obs_high)
        tol_low = OBS_TOLERANCE * np.maximum(1.0, np.abs(np.where(np.isfinite(low), low, 0)))
        tol_high = OBS_TOLERANCE * np.maximum(1.0, np.abs(np.where(np.isfinite(high), high, 0)))
        return bool(np.any(flat < low - tol_low) or np.any(flat > high + tol_high))

    def reward_outside(self, reward: np.ndarray) -> bool:
        tol = OBS_TOLERANCE * max(1.0, abs(self.reward_low), abs(self.reward_high))
        r = reward.astype(np.float64)
        return bool(np.any(r < self.reward_low - tol) or np.any(r > self.reward_high + tol))


def bounds_for_env(env_id: str, ingest: IngestConfig, seed: int, max_abs_reward: float) -> Bounds:
    """A run's bounds; makes the env once (and steps it, for a warm-up, with ``seed``)."""
    env = make_env(env_id)
    try:
        low, high = obs_bounds(env.observation_space)
        plausible = plausible_obs(env, low, high, ingest, seed)
        lo, hi, source = reward_bounds(env_id, ingest, seed, max_abs_reward, env)
    finally:
        env.close()
    log.info("ingest: rewards per step in [%g, %g] (%s)", lo, hi, source)
    if plausible is not None:
        log.info("ingest: observations in [%s] .. [%s] (warm-up)", *map(_short, plausible))
        return Bounds(low, high, lo, hi, source, *plausible)
    return Bounds(low, high, lo, hi, source)


def _short(xs: tuple[float, ...]) -> str:
    return ", ".join(f"{x:.3g}" for x in xs)


def plausible_obs(
    env: Any,
    low: tuple[float, ...],
    high: tuple[float, ...],
    ing: IngestConfig,
    seed: int,
) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
    """Bounds for the dimensions the space leaves unbounded, by the module's rule; None
    when every dimension is bounded, or there is no warm-up."""
    unbounded = ~(np.isfinite(low) & np.isfinite(high))
    if not unbounded.any() or not ing.warmup_steps:
        return None
    seen = warmup_observations(env, ing.warmup_steps, seed)
    if seen is None:
        return None
    lo, hi = seen
    pad = ing.warmup_margin * np.maximum(hi - lo, 1.0)
    new_low = np.where(unbounded, lo - pad, low)
    new_high = np.where(unbounded, hi + pad, high)
    # Never wider than the space (a half-bounded dimension keeps its finite side).
    new_low, new_high = np.maximum(new_low, low), np.minimum(new_high, high)
    return tuple(map(float, new_low)), tuple(map(float, new_high))


def warmup_observations(env: Any, steps: int, seed: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Per dimension, the smallest and largest observation of ``steps`` uniformly random
    env steps (None if the env cannot be stepped or gives a non-finite one)."""
    try:
        env.action_space.seed(seed)
        obs, _ = env.reset(seed=seed)
        lo = hi = np.asarray(obs, np.float64).reshape(-1)
        for _ in range(steps):
            obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
            flat = np.asarray(obs, np.float64).reshape(-1)
            lo, hi = np.minimum(lo, flat), np.maximum(hi, flat)
            if terminated or truncated:
                obs, _ = env.reset()
    except Exception:  # noqa: BLE001 - any env: the space's bounds alone apply
        log.exception("ingest: the observation warm-up failed; the space's bounds apply")
        return None
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        return None
    return lo, hi


def obs_bounds(space: Any) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A Box space's low and high, flattened (infinite where unbounded)."""
    n = int(np.prod(space.shape))
    if not hasattr(space, "low"):
        return (-math.inf,) * n, (math.inf,) * n
    low = np.broadcast_to(np.asarray(space.low, np.float64), space.shape).reshape(-1)
    high = np.broadcast_to(np.asarray(space.high, np.float64), space.shape).reshape(-1)
    return tuple(map(float, low)), tuple(map(float, high))


def reward_bounds(
    env_id: str, ing: IngestConfig, seed: int, max_abs_reward: float, env: Any
) -> tuple[float, float, str]:
    """``(low, high, source)`` by the rules in this module's docstring."""
    if ing.reward_low is not None and ing.reward_high is not None:
        return ing.reward_low, ing.reward_high, "config"
    if env_id in KNOWN_REWARDS:
        return (*KNOWN_REWARDS[env_id], "known")
    seen = warmup_rewards(env, ing.warmup_steps, seed) if ing.warmup_steps else None
    if seen is not None:
        lo, hi = seen
        width = max(hi - lo, abs(lo), abs(hi), 1e-3)
        return lo - ing.warmup_margin * width, hi + ing.warmup_margin * width, "warm-up"
    return -max_abs_reward, max_abs_reward, "generic"


def warmup_rewards(env: Any, steps: int, seed: int) -> tuple[float, float] | None:
    """The smallest and largest reward of ``steps`` uniformly random env steps (None if
    the env cannot be stepped)."""
    try:
        env.action_space.seed(seed)
        env.reset(seed=seed)
        lo, hi = math.inf, -math.inf
        for _ in range(steps):
            _, r, terminated, truncated, _ = env.step(env.action_space.sample())
            lo, hi = min(lo, float(r)), max(hi, float(r))
            if terminated or truncated:
                env.reset()
    except Exception:  # noqa: BLE001 - any env: fall back to the generic bound
        log.exception("ingest: the reward warm-up failed; the generic bound applies")
        return None
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else None
