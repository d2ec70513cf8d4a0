"""Export a Dense-MLP policy to TFLite (int8 / fp16 / fp32) that runs on raw observations.

The deployed ``policy.tflite`` is self-contained: float32 raw observation in, float32
Q-values or action (already inside the env's bounds) out, batch size 1. Any LiteRT user
can run it without our code or the manifest. The graph, for int8::

    obs ──MUL, ADD, clip (float)──► z = (obs - mean) / std ──QUANTIZE──► int8 Dense stack
        ──DEQUANTIZE──► [TD3 only: MUL, ADD (float) to the bounds, MINIMUM/MAXIMUM clip]

Why the normalisation stays float: int8 quantises a tensor with *one* scale. HalfCheetah's
joint angles span ~±1 while its joint velocities span ~±20, and CartPole's pole angle
spans ~±0.2 against ±2.4 for the cart; quantising the raw observation would leave the small
features a handful of levels. Normalising first (per feature, in float) and quantising
``z`` keeps every feature at the same resolution. The converter's selective quantisation
(``tf.lite.experimental.QuantizationDebugger`` with denylisted op types) keeps the MUL /
ADD / MINIMUM / MAXIMUM ops float; the Dense layers become int8 FULLY_CONNECTED (bias and
ReLU fused), so no Dense layer is affected by the denylist. XNNPACK runs both kinds.

Why TD3's rescale is float: its tanh head's int8 output has one scale for all action
dimensions, which is fine in tanh units ([-1, 1] for every dimension); mapping to bounds
that differ per dimension in float keeps that resolution in every dimension.

Which path makes an export (``edge_rl.export.direct``): the converter runs once per
network structure, on generic values, to make a template; every export then writes its
weights, biases, normalisation and int8 quantisation into that template's flatbuffer
(``edge_rl.export.template``), in milliseconds. The converter exports a version itself
when there is no usable template or the written model fails its self-check;
``ExportedModel.path`` says which path made it.

Where the conversion runs: the deployable model is built here, in the caller's process, and
converted in the export worker (``edge_rl.export.worker``, one long-lived child process;
``edge_rl.export.convert`` is what it runs), so that the converter's fd-2 noise filter,
``warnings`` filters, quiet loggers and private per-tensor flag touch no thread of the
learner. A worker that dies is restarted on the next export; its errors are raised here.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import keras
import numpy as np

from edge_rl.export import convert
from edge_rl.export.direct import TEMPLATE_ROWS, DirectExporter
from edge_rl.export.folded import FoldedPolicy, fold
from edge_rl.export.layers import Affine
from edge_rl.export.worker import default_worker
from edge_rl.types import QuantParams

PRECISIONS = ("int8", "fp16", "fp32")

# A feature that barely moves in the calibration set (a stuck sensor, or early replay in
# which it has not moved yet) would get std ~ 0 and turn any later movement into a huge z
# that saturates the int8 input. 1e-3 is far below the spread of real control features
# (CartPole's pole angle has std ~0.05 even while balanced), so those are untouched; an env
# whose features genuinely live on a finer scale should be rescaled by its wrapper.
MIN_OBS_STD = 1e-3


@dataclass(frozen=True)
class ExportedModel:
    """A converted model and what describes it (see ``PolicyManifest``)."""

    tflite: bytes
    precision: str  # "int8" | "fp16" | "fp32"
    input_quant: QuantParams  # float32 for every precision: the model takes raw obs
    output_quant: QuantParams
    obs_mean: tuple[float, ...]  # the normalisation inside the model (for inspection)
    obs_std: tuple[float, ...]
    # What the caller waited for the model: on the converter path the round trip to the
    # export worker (its start-up and TensorFlow import on a first or restarted call); on
    # the direct path the write and self-check (and a new structure's template conversion).
    convert_seconds: float
    path: str = (
        "converter"  # edge_rl.export.direct.PATHS: "direct" (template written) or "converter"
    )


def export_policy(
    model: keras.Model,
    calibration_obs: np.ndarray,
    precision: str = "int8",
    per_channel: bool = True,
    *,
    direct: bool = True,
) -> ExportedModel:
    """Convert ``model`` (raw obs -> output) to a batch-1 TFLite model on raw obs.

    ``calibration_obs [n, obs_dim]``: real observations (from replay). They set the
    normalisation and, for int8, the activation ranges of every quantised tensor.
    ``per_channel`` (int8 only): one weight scale per output unit of each Dense layer
    (TFLite's default), or one per layer (smaller model, coarser weights).
    ``direct``: write the weights into this structure's template when it can (see
    ``edge_rl.export.direct``); False converts the whole model (the reference path).

    Raises ``ValueError`` for bad input (before anything reaches the worker), the
    converter's own exception, or ``WorkerDied`` / ``TimeoutError`` when the worker died or
    hung (``edge_rl.export.worker``); the next export starts a new worker.
    """
    obs, mean, std = calibration(calibration_obs, precision)
    policy = fold(model, mean, std)
    t0 = time.perf_counter()
    if direct:
        tflite_bytes, path = _exporter.export(policy, obs, precision, bool(per_channel))
    else:
        tflite_bytes, path = _convert(policy, obs, precision, bool(per_channel)), "converter"
    return exported_model(tflite_bytes, precision, mean, std, time.perf_counter() - t0, path)


def calibration(
    calibration_obs: np.ndarray, precision: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``export_policy``'s checked inputs: the observations as float32 ``[n, obs_dim]``,
    their mean and their std (at least ``MIN_OBS_STD``); ``ValueError`` for bad ones."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {PRECISIONS}")
    obs = np.asarray(calibration_obs, np.float32)
    if obs.ndim < 2 or obs.shape[0] == 0:
        raise ValueError(f"calibration_obs must be a non-empty [n, obs_dim] array, got {obs.shape}")
    obs = obs.reshape(obs.shape[0], -1)  # [n, obs_dim]
    if not np.all(np.isfinite(obs)):
        raise ValueError("calibration_obs contains NaN or inf")
    mean = obs.mean(axis=0)  # [obs_dim]
    std = np.maximum(obs.std(axis=0), MIN_OBS_STD)  # [obs_dim]
    return obs, mean, std


def exported_model(
    tflite_bytes: bytes,
    precision: str,
    mean: np.ndarray,
    std: np.ndarray,
    convert_seconds: float,
    path: str,
) -> ExportedModel:
    """The ``ExportedModel`` of a model ``export_policy`` made."""
    input_quant, output_quant = _read_quant(tflite_bytes)
    return ExportedModel(
        tflite=tflite_bytes,
        precision=precision,
        input_quant=input_quant,
        output_quant=output_quant,
        obs_mean=tuple(float(m) for m in mean),
        obs_std=tuple(float(s) for s in std),
        convert_seconds=convert_seconds,
        path=path,
    )


def template_rows(model: keras.Model) -> tuple[FoldedPolicy, np.ndarray]:
    """What ``prepare_template`` converts for ``model``: its generic fold and rows."""
    dense = [layer for layer in model.layers if isinstance(layer, keras.layers.Dense)]
    if not dense:
        raise ValueError("export needs a plain stack of Dense layers")
    obs_dim = int(dense[0].kernel.shape[0])
    policy = fold(model, np.zeros(obs_dim), np.ones(obs_dim))
    rows = np.random.default_rng(0).normal(size=(TEMPLATE_ROWS, obs_dim))
    return policy, rows.astype(np.float32)


def prepare_template(model: keras.Model, precision: str = "int8", per_channel: bool = True) -> bool:
    """Convert the template of ``model``'s structure now, so that its first export writes
    into it instead of waiting for the conversion (``edge_rl.export.direct``); whether the
    structure has a template. The learner does it while it sets up, beside the worker's
    TensorFlow import. ``model``'s values do not matter, only its layers."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {PRECISIONS}")
    policy, rows = template_rows(model)
    return _exporter.prepare(policy.structure, rows, precision, bool(per_channel))


def start_export_worker() -> threading.Thread:
    """Start the export worker and its TensorFlow import now, in the background (the returned
    thread), so that the first export waits for neither, or less: the import is ~4 s of CPU,
    10-28 s of wall time on this shared 2-core machine. The learner's publisher calls it at
    set-up."""
    return default_worker().warm_up(convert.warm_up)


def deployable_model(model: keras.Model, mean: np.ndarray, std: np.ndarray) -> keras.Model:
    """A batch-1 copy of a Dense stack with the normalisation in front, raw obs in.

    ``Affine(1 / std, -mean / std)`` computes ``z = (obs - mean) / std`` (clipped to
    ``±Z_CLIP``) and the first Dense layer absorbs the inverse map, so that the stack
    computes on ``z`` exactly what ``model`` computes on ``obs`` (``edge_rl.export.folded``).
    (The round trip is not a no-op in int8: the quantised tensor is then ``z``, on which
    every feature has the same spread.) TD3's frozen rescale becomes a float
    ``Affine(half, mid)`` clipped to ``mid ± |half|``: the model's output is then inside
    the bounds exactly, not up to quantisation error.
    """
    return keras_model(fold(model, mean, std))


def keras_model(policy: FoldedPolicy) -> keras.Model:
    """``policy`` as the Keras model that the converter converts."""
    norm = policy.normalise
    obs_dim = int(norm.scale.shape[0])
    # A fixed batch of 1: the actor runs one observation per step and LiteRT then never
    # has to resize tensors.
    layers: list[keras.layers.Layer] = [
        keras.Input(shape=(obs_dim,), batch_size=1, name="obs"),
        # The clip is a barrier as much as a guard: without it the converter fuses the
        # MUL / ADD into the first FULLY_CONNECTED whenever that layer holds the folded
        # weights (it undoes the fold), and int8 is back to one scale for raw obs.
        Affine(norm.scale, norm.offset, clip=(norm.low, norm.high), name=norm.name),
    ]
    weights: list[np.ndarray] = []
    for layer in policy.dense:
        units = int(layer.kernel.shape[1])
        layers.append(keras.layers.Dense(units, activation=layer.activation, name=layer.name))
        weights += [layer.kernel, layer.bias]
    if policy.rescale is not None:
        r = policy.rescale
        layers.append(Affine(r.scale, r.offset, clip=(r.low, r.high), name=r.name))
    exported = keras.Sequential(layers, name=f"{policy.model_name}_export")
    exported.set_weights(weights)
    return exported


def _convert(policy: FoldedPolicy, obs: np.ndarray, precision: str, per_channel: bool) -> bytes:
    """The converter path: ``policy`` converted whole, in the export worker."""
    export_model = keras_model(policy)
    config = keras.saving.serialize_keras_object(export_model)
    weights = export_model.get_weights()
    return default_worker().call(convert.convert, config, weights, obs, precision, per_channel)


_exporter = DirectExporter(_convert)


def _read_quant(tflite_bytes: bytes) -> tuple[QuantParams, QuantParams]:
    """Input and output quantisation as LiteRT sees them (float32, scale 0, for ours)."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=tflite_bytes)
    (inp,) = interp.get_input_details()
    (out,) = interp.get_output_details()

    def params(detail: dict) -> QuantParams:
        scale, zero_point = detail["quantization"]
        return QuantParams(np.dtype(detail["dtype"]).name, float(scale), int(zero_point))

    return params(inp), params(out)
