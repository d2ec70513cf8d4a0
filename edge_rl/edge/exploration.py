"""On-device exploration: turn the model's output into the action the env gets."""

from __future__ import annotations

import numpy as np

from edge_rl.specs import EnvSpec


def random_action(spec: EnvSpec, rng: np.random.Generator) -> np.ndarray:
    """Uniform over the action space (used until the first policy arrives)."""
    if spec.discrete:
        return np.int64(rng.integers(spec.num_actions))
    low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)
    return rng.uniform(low, high).astype(np.float32).reshape(spec.action_shape)


def epsilon_greedy(q_values: np.ndarray, epsilon: float, rng: np.random.Generator) -> np.int64:
    """With probability ``epsilon`` a uniform action, else ``argmax_a Q(s, a)``."""
    if rng.random() < epsilon:
        return np.int64(rng.integers(q_values.shape[-1]))
    return np.int64(np.argmax(q_values))
