"""The DQN Q-network: a plain MLP of Dense layers.

Kept a plain stack on purpose: ``edge_rl.export.tflite`` folds the observation
normalisation into the first Dense layer and rebuilds the stack layer by layer.
"""

from __future__ import annotations

import keras


def make_q_network(
    obs_dim: int, num_actions: int, hidden: tuple[int, ...], seed: int
) -> keras.Model:
    """``obs [B, obs_dim] float32 -> Q [B, num_actions]``: ReLU hidden layers, linear head."""
    if obs_dim <= 0 or num_actions <= 0:
        raise ValueError(f"obs_dim and num_actions must be positive, got {obs_dim}, {num_actions}")
    layers: list[keras.layers.Layer] = [keras.Input(shape=(obs_dim,), dtype="float32")]
    for i, units in enumerate(hidden):
        layers.append(
            keras.layers.Dense(
                int(units),
                activation="relu",
                kernel_initializer=keras.initializers.GlorotUniform(seed=seed + i),
                name=f"hidden_{i}",
            )
        )
    layers.append(
        keras.layers.Dense(
            num_actions,
            activation=None,
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed + len(hidden)),
            name="q_values",
        )
    )
    return keras.Sequential(layers, name="q_network")
