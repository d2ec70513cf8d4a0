"""TD3 actor and critic: plain MLPs of Dense layers.

Both are plain stacks on purpose: ``edge_rl.export.tflite`` folds the observation
normalisation into the first Dense layer and rebuilds the stack layer by layer, so it
accepts nothing but Dense layers. That is why the actor's rescale from tanh space to the
env's bounds is itself a Dense layer (frozen, diagonal) rather than a Lambda or Rescaling.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np


def _hidden_layers(hidden: tuple[int, ...], seed: int) -> list[keras.layers.Layer]:
    return [
        keras.layers.Dense(
            int(units),
            activation="relu",
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed + i),
            name=f"hidden_{i}",
        )
        for i, units in enumerate(hidden)
    ]


def make_actor(
    obs_dim: int,
    action_low: Sequence[float],
    action_high: Sequence[float],
    hidden: tuple[int, ...],
    seed: int,
) -> keras.Model:
    """``obs [B, obs_dim] -> action [B, act_dim]`` inside ``[low, high]``.

    ReLU hidden layers, a tanh head in [-1, 1], then ``a = tanh_out * half + mid`` as a
    final Dense with a frozen (non-trainable) diagonal kernel ``diag(half_range)`` and bias
    ``mid``: the model stays a pure Dense stack (see the module docstring) and its output
    is the env's action, in bounds up to float32 rounding (one ulp at a saturated tanh).
    """
    low = np.asarray(action_low, np.float64).reshape(-1)
    high = np.asarray(action_high, np.float64).reshape(-1)
    if obs_dim <= 0 or low.size == 0 or low.shape != high.shape or np.any(low >= high):
        raise ValueError(
            f"need obs_dim > 0 and low < high of equal non-zero length, got "
            f"obs_dim={obs_dim}, low={low.tolist()}, high={high.tolist()}"
        )
    act_dim = int(low.size)
    tanh_head = keras.layers.Dense(
        act_dim,
        activation="tanh",
        kernel_initializer=keras.initializers.GlorotUniform(seed=seed + len(hidden)),
        name="tanh_action",
    )
    rescale = keras.layers.Dense(act_dim, activation=None, trainable=False, name="rescale")
    model = keras.Sequential(
        [
            keras.Input(shape=(obs_dim,), dtype="float32"),
            *_hidden_layers(hidden, seed),
            tanh_head,
            rescale,
        ],
        name="actor",
    )
    half, mid = (high - low) / 2.0, (high + low) / 2.0  # [act_dim] each
    rescale.set_weights([np.diag(half).astype(np.float32), mid.astype(np.float32)])
    return model


def make_critic(obs_dim: int, act_dim: int, hidden: tuple[int, ...], seed: int) -> keras.Model:
    """``concat([obs, action]) [B, obs_dim + act_dim] -> Q [B, 1]``.

    One concatenated input rather than two inputs: a Sequential stack, one matmul in the
    first layer, and the caller concatenates once per batch.
    """
    if obs_dim <= 0 or act_dim <= 0:
        raise ValueError(f"obs_dim and act_dim must be positive, got {obs_dim}, {act_dim}")
    head = keras.layers.Dense(
        1,
        activation=None,
        kernel_initializer=keras.initializers.GlorotUniform(seed=seed + len(hidden)),
        name="q_value",
    )
    return keras.Sequential(
        [
            keras.Input(shape=(obs_dim + act_dim,), dtype="float32"),
            *_hidden_layers(hidden, seed),
            head,
        ],
        name="critic",
    )
