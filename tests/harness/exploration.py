"""Exploration one step at a time: the reference distributions that the actor's
``Explorer`` (edge_rl/actor/exploration.py) draws in blocks, and what the learning
regression's in-process collector uses."""

from __future__ import annotations

import numpy as np

from edge_rl.specs import EnvSpec


def random_action(spec: EnvSpec, rng: np.random.Generator) -> np.ndarray:
    """Uniform over the action space (an actor's action before its first policy)."""
    if spec.discrete:
        return np.int64(rng.integers(spec.num_actions))
    low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)
    return rng.uniform(low, high).astype(np.float32).reshape(spec.action_shape)


def epsilon_greedy(q_values: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.int64:
    """With probability ``epsilon`` a uniform action, else ``argmax_a Q(s, a)``."""
    if rng.random() < epsilon:
        return np.int64(rng.integers(q_values.shape[-1]))
    return np.int64(np.argmax(q_values))


def gaussian(
    action: np.ndarray, sigma: float, spec: EnvSpec, rng: np.random.Generator
) -> np.ndarray:
    """``clip(a + N(0, (sigma * half_range)^2), low, high)``: TD3's exploration noise.

    ``sigma`` is a fraction of the action half-range, so one value fits every env.
    """
    low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)
    a = np.asarray(action, np.float32).reshape(-1)
    noisy = a + rng.normal(0.0, sigma, a.shape).astype(np.float32) * (high - low) / 2
    return np.clip(noisy, low, high).reshape(spec.action_shape)
