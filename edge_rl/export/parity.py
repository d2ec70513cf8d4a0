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


def outputs(
    exported: ExportedModel, model: keras.Model, obs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The exported model in LiteRT and the float model, on the same raw observations:
    ``(lite [n, out], float [n, out])``."""
    obs = parity_rows(obs)
    policy = TFLitePolicy(exported.tflite)
    with single_threaded():  # the learner's updates hold the other core
        lite = policy.batch_at_once(obs)  # [n, out]
        float_out = float_forward(model, obs)  # [n, out]
    return lite, float_out


def parity_rows(obs: np.ndarray) -> np.ndarray:
    """``obs`` as the float32 ``[n, obs_dim]`` rows a parity check runs on."""
    obs = np.asarray(obs, np.float32)
    if obs.ndim < 2 or obs.shape[0] == 0:
        raise ValueError(f"obs must be a non-empty [n, obs_dim] array, got {obs.shape}")
    return obs.reshape(obs.shape[0], -1)


# One Dense layer as NumPy computes it: kernel [in, units] float32, bias [units] float32
# or None, and its activation's name (a key of ACTIVATIONS).
DenseStep = tuple[np.ndarray, np.ndarray | None, str]


def check_exportable(model: keras.Model) -> tuple[DenseStep, ...]:
    """``model``'s ``dense_stack``; ValueError naming what the export cannot take: a layer
    that is not Dense, or an activation that is not one of ``ACTIVATIONS``."""
    stack = dense_stack(model)
    if stack is not None:
        return stack
    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    for layer in layers:
        if not isinstance(layer, keras.layers.Dense):
            raise ValueError(
                f"{model.name}: export needs a plain stack of Dense layers; "
                f"{layer.name} is a {type(layer).__name__}"
            )
        activation = keras.activations.serialize(layer.activation)
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"{model.name}: export supports the activations {', '.join(ACTIVATIONS)}; "
                f"{layer.name} uses {activation!r}"
            )
    raise ValueError(f"{model.name}: export needs at least one Dense layer")


def dense_stack(model: keras.Model) -> tuple[DenseStep, ...] | None:
    """``model``'s layers as ``DenseStep``s, or None when it is not a plain Dense stack
    whose activations NumPy computes (``ACTIVATIONS``)."""
    layers = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    dense = all(
        isinstance(layer, keras.layers.Dense)
        and keras.activations.serialize(layer.activation) in ACTIVATIONS
        for layer in layers
    )
    if not layers or not dense:
        return None
    return tuple(
        (
            np.asarray(layer.kernel, np.float32),
            np.asarray(layer.bias, np.float32) if layer.use_bias else None,
            keras.activations.serialize(layer.activation),
        )
        for layer in layers
    )


def stack_forward(stack: tuple[DenseStep, ...], obs: np.ndarray) -> np.ndarray:
    """A ``dense_stack`` on ``obs [n, obs_dim]`` in float32, in NumPy."""
    x = obs
    for kernel, bias, activation in stack:
        x = x @ kernel
        if bias is not None:
            x = x + bias
        x = ACTIVATIONS[activation](x)
    return np.asarray(x, np.float32)


def float_forward(model: keras.Model, obs: np.ndarray) -> np.ndarray:
    """``model`` on ``obs [n, obs_dim]`` in float32: a plain Dense stack in NumPy (a few
    matrix products on this thread: no TensorFlow op competes with the learner's updates
    for the cores and the GIL), any other model through Keras."""
    stack = dense_stack(model)
    if stack is None:
        return np.asarray(model(obs, training=False))
    return stack_forward(stack, obs)


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
    return q_report(*outputs(exported, model, obs))


def q_report(q_lite: np.ndarray, q_float: np.ndarray) -> ParityReport:
    """``check_q_parity``'s figures from the two models' outputs ``[n, A]`` on the same
    observations."""
    error = np.abs(q_lite - q_float)
    agree = np.argmax(q_lite, axis=1) == np.argmax(q_float, axis=1)  # [n]
    return ParityReport(
        n=int(q_lite.shape[0]),
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
    return action_report(*outputs(exported, model, obs), half_range, quantile)


def action_report(
    a_lite: np.ndarray, a_float: np.ndarray, half_range: np.ndarray, quantile: float = 1.0
) -> ActionParityReport:
    """``check_action_parity``'s figures from the two models' outputs ``[n, act_dim]`` on
    the same observations."""
    error = np.abs(a_lite - a_float) / np.asarray(half_range, np.float32)  # [n, act_dim]
    worst = error.max(axis=1)  # [n]: each observation's largest error
    return ActionParityReport(
        n=int(a_lite.shape[0]),
        max_error=float(worst.max()),
        mean_error=float(error.mean()),
        quantile=quantile,
        quantile_error=float(np.quantile(worst, quantile)),
    )


def judge_actions(
    a_lite: np.ndarray,
    a_float: np.ndarray,
    half_range: np.ndarray,
    quantile: float,
    max_allowed: float,
    mean_allowed: float,
) -> tuple[bool, dict[str, float]]:
    """The export gate for a deterministic actor (TD3's, SAC's mean head): whether
    ``action_report``'s figures pass, and the figures it was judged on."""
    r = action_report(a_lite, a_float, half_range, quantile)
    figures = {"max_action_error": r.max_error, "mean_action_error": r.mean_error}
    if quantile < 1.0:
        figures[f"q{quantile:g}_action_error"] = r.quantile_error
    return r.passes(max_allowed, mean_allowed), figures
