"""Run an exported model in its own runtime (LiteRT) and compare it with the float model.

The learner checks every export before publishing it: a conversion that silently changes
the greedy action is worse than no new policy at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import numpy as np

from edge_rl.export.blas import single_threaded
from edge_rl.export.folded import ACTIVATIONS
from edge_rl.export.tflite import ExportedModel
from edge_rl.runtime.litert import TFLitePolicy


def _both(
    exported: ExportedModel, model: keras.Model, obs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The exported model in LiteRT and the float model, on the same raw observations."""
    obs = np.asarray(obs, np.float32)
    if obs.ndim < 2 or obs.shape[0] == 0:
        raise ValueError(f"obs must be a non-empty [n, obs_dim] array, got {obs.shape}")
    obs = obs.reshape(obs.shape[0], -1)
    policy = TFLitePolicy(exported.tflite)
    with single_threaded():  # the learner's updates hold the other core
        lite = policy.batch_at_once(obs)  # [n, out]
        float_out = float_forward(model, obs)  # [n, out]
    return lite, float_out


def float_forward(model: keras.Model, obs: np.ndarray) -> np.ndarray:
    """``model`` on ``obs [n, obs_dim]`` in float32: a plain Dense stack in NumPy (a few
    matrix products on this thread: no TensorFlow op competes with the learner's updates
    for the cores and the GIL), any other model through Keras."""
    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    dense = all(
        isinstance(layer, keras.layers.Dense)
        and keras.activations.serialize(layer.activation) in ACTIVATIONS
        for layer in layers
    )
    if not layers or not dense:
        return np.asarray(model(obs, training=False))
    x = obs
    for layer in layers:
        x = x @ np.asarray(layer.kernel, np.float32)
        if layer.use_bias:
            x = x + np.asarray(layer.bias, np.float32)
        x = ACTIVATIONS[keras.activations.serialize(layer.activation)](x)
    return np.asarray(x, np.float32)


@dataclass(frozen=True)
class ParityReport:
    n: int  # observations compared
    greedy_agreement: float  # fraction of rows whose argmax matches the float model's
    max_abs_error: float  # over all rows and outputs
    mean_abs_error: float


def check_q_parity(exported: ExportedModel, model: keras.Model, obs: np.ndarray) -> ParityReport:
    """Compare LiteRT on ``exported`` with ``model`` on raw observations ``obs [n, obs_dim]``.

    LiteRT goes through ``TFLitePolicy``, the actor's own loader, so that the
    normalisation and (de)quantisation the actor does are part of what is checked.
    """
    q_lite, q_float = _both(exported, model, obs)  # [n, A] each
    error = np.abs(q_lite - q_float)
    agree = np.argmax(q_lite, axis=1) == np.argmax(q_float, axis=1)  # [n]
    return ParityReport(
        n=int(obs.shape[0]),
        greedy_agreement=float(np.mean(agree)),
        max_abs_error=float(error.max()),
        mean_abs_error=float(error.mean()),
    )


@dataclass(frozen=True)
class ActionParityReport:
    n: int  # observations compared
    # |a_lite - a_float| in fractions of the action half-range (high - low) / 2, so that one
    # threshold fits every env: 0.01 is 1 % of the way from the centre to a bound.
    max_error: float  # over all rows and action dimensions
    mean_error: float
    # The `quantile` of each observation's largest error (over its action dimensions);
    # quantile 1.0 makes it max_error. A saturating actor (TD3's tanh near a switching
    # surface) flips a whole dimension on a few observations: the maximum sees only those.
    quantile: float = 1.0
    quantile_error: float = 0.0

    def passes(self, max_allowed: float, mean_allowed: float) -> bool:
        """The export gate: quantile_error <= max_allowed and mean_error <= mean_allowed."""
        return self.quantile_error <= max_allowed and self.mean_error <= mean_allowed


def check_action_parity(
    exported: ExportedModel,
    model: keras.Model,
    obs: np.ndarray,
    half_range: np.ndarray,
    quantile: float = 1.0,
) -> ActionParityReport:
    """Compare a deterministic actor in LiteRT with ``model`` on raw observations."""
    a_lite, a_float = _both(exported, model, obs)  # [n, act_dim] each
    error = np.abs(a_lite - a_float) / np.asarray(half_range, np.float32)  # [n, act_dim]
    worst = error.max(axis=1)  # [n]: each observation's largest error
    return ActionParityReport(
        n=int(obs.shape[0]),
        max_error=float(worst.max()),
        mean_error=float(error.mean()),
        quantile=quantile,
        quantile_error=float(np.quantile(worst, quantile)),
    )
