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
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf

from edge_rl.types import QuantParams

PRECISIONS = ("int8", "fp16", "fp32")

# A feature that barely moves in the calibration set (a stuck sensor, or early replay in
# which it has not moved yet) would get std ~ 0 and turn any later movement into a huge z
# that saturates the int8 input. 1e-3 is far below the spread of real control features
# (CartPole's pole angle has std ~0.05 even while balanced), so those are untouched; an env
# whose features genuinely live on a finer scale should be rescaled by its wrapper.
MIN_OBS_STD = 1e-3

# Normalised features are clipped to +-Z_CLIP standard deviations. int8 saturates far
# earlier (at the calibration range); for fp32/fp16 it bounds what a broken sensor can do.
Z_CLIP = 100.0

# The op types kept in float in an int8 export: the normalisation, TD3's rescale and clip.
FLOAT_OPS = ["MUL", "ADD", "MINIMUM", "MAXIMUM"]


@dataclass(frozen=True)
class ExportedModel:
    """A converted model and what describes it (see ``PolicyManifest``)."""

    tflite: bytes
    precision: str  # "int8" | "fp16" | "fp32"
    input_quant: QuantParams  # float32 for every precision: the model takes raw obs
    output_quant: QuantParams
    obs_mean: tuple[float, ...]  # the normalisation inside the model (for inspection)
    obs_std: tuple[float, ...]
    convert_seconds: float


class Affine(keras.layers.Layer):
    """``y = x * scale + offset`` per feature, optionally clipped to ``[low, high]``.

    Constants, not weights: they trace into float MUL / ADD (/ MAXIMUM / MINIMUM) ops.
    """

    def __init__(
        self,
        scale: np.ndarray,
        offset: np.ndarray,
        clip: tuple[np.ndarray, np.ndarray] | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.scale = np.asarray(scale, np.float32)  # [features]
        self.offset = np.asarray(offset, np.float32)  # [features]
        self.clip = None if clip is None else tuple(np.asarray(c, np.float32) for c in clip)

    def call(self, x):
        y = x * self.scale + self.offset
        if self.clip is not None:
            y = keras.ops.minimum(keras.ops.maximum(y, self.clip[0]), self.clip[1])
        return y


def export_policy(
    model: keras.Model,
    calibration_obs: np.ndarray,
    precision: str = "int8",
    per_channel: bool = True,
) -> ExportedModel:
    """Convert ``model`` (raw obs -> output) to a batch-1 TFLite model on raw obs.

    ``calibration_obs [n, obs_dim]``: real observations (from replay). They set the
    normalisation and, for int8, the activation ranges of every quantised tensor.
    ``per_channel`` (int8 only): one weight scale per output unit of each Dense layer
    (TFLite's default), or one per layer (smaller model, coarser weights).
    """
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

    export_model = deployable_model(model, mean, std)
    t0 = time.perf_counter()
    tflite_bytes = _convert(export_model, obs, precision, per_channel)
    convert_seconds = time.perf_counter() - t0

    input_quant, output_quant = _read_quant(tflite_bytes)
    return ExportedModel(
        tflite=tflite_bytes,
        precision=precision,
        input_quant=input_quant,
        output_quant=output_quant,
        obs_mean=tuple(float(m) for m in mean),
        obs_std=tuple(float(s) for s in std),
        convert_seconds=convert_seconds,
    )


def deployable_model(model: keras.Model, mean: np.ndarray, std: np.ndarray) -> keras.Model:
    """A batch-1 copy of a Dense stack with the normalisation in front, raw obs in.

    ``Affine(1 / std, -mean / std)`` computes ``z = (obs - mean) / std`` (clipped to
    ``±Z_CLIP``), and the first
    Dense layer absorbs the inverse map so that the stack computes on ``z`` exactly what
    ``model`` computes on ``obs``. First layer, kernel ``W [obs_dim, units]``, bias ``b``;
    with obs = z * std + mean:
        obs @ W + b = z @ (W * std[:, None]) + (b + mean @ W)
    so  W' = W * std[:, None],  b' = b + mean @ W.  The other layers are copied unchanged.
    (The round trip is not a no-op in int8: the quantised tensor is then ``z``, on which
    every feature has the same spread.) A final Dense layer that is *not trainable* (the TD3 actor's
    frozen rescale from tanh units to the env's bounds, ``a = t * half + mid`` with a
    diagonal kernel) becomes a float ``Affine(half, mid)`` clipped to ``mid ± |half|``:
    the model's output is then inside the bounds exactly, not up to quantisation error.
    """
    dense = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    if not dense or not all(isinstance(layer, keras.layers.Dense) for layer in dense):
        kinds = [type(layer).__name__ for layer in dense]
        raise ValueError(f"export needs a plain stack of Dense layers, got {kinds}")
    obs_dim = int(dense[0].kernel.shape[0])
    if mean.shape != (obs_dim,) or std.shape != (obs_dim,):
        raise ValueError(f"the model takes {obs_dim} features, calibration has {mean.shape}")

    rescale = None
    if len(dense) > 1 and not dense[-1].trainable:
        rescale, dense = dense[-1], dense[:-1]
    # A fixed batch of 1: the actor runs one observation per step and LiteRT then never
    # has to resize tensors.
    layers: list[keras.layers.Layer] = [
        keras.Input(shape=(obs_dim,), batch_size=1),
        # The clip is a barrier as much as a guard: without it the converter fuses the
        # MUL / ADD into the first FULLY_CONNECTED whenever that layer holds the folded
        # weights (it undoes the fold), and int8 is back to one scale for raw obs.
        Affine(1.0 / std, -mean / std, clip=(-Z_CLIP, Z_CLIP), name="normalise"),
    ]
    weights: list[np.ndarray] = []
    for i, layer in enumerate(dense):
        kernel = np.asarray(layer.kernel, np.float64)  # [in, units]; float64 for an exact fold
        bias = np.asarray(layer.bias, np.float64) if layer.use_bias else np.zeros(kernel.shape[1])
        if i == 0:
            kernel, bias = kernel * std[:, None], bias + mean @ kernel
        layers.append(keras.layers.Dense(layer.units, activation=layer.activation, name=layer.name))
        weights += [kernel.astype(np.float32), bias.astype(np.float32)]
    if rescale is not None:
        kernel = np.asarray(rescale.kernel, np.float64)  # [act, act], diagonal
        half = np.diag(kernel)
        if (
            not np.allclose(kernel, np.diag(half))
            or rescale.activation is not keras.activations.linear
        ):
            raise ValueError(
                f"a frozen last layer must be a linear diagonal rescale: {rescale.name}"
            )
        mid = np.asarray(rescale.bias, np.float64)
        bounds = (mid - np.abs(half), mid + np.abs(half))
        layers.append(Affine(half, mid, clip=bounds, name=rescale.name))
    exported = keras.Sequential(layers, name=f"{model.name}_export")
    exported.set_weights(weights)
    return exported


def _convert(
    model: keras.Model, obs: np.ndarray, precision: str, per_channel: bool = True
) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if precision == "fp16":
        # float16 weights (half the bytes), float32 activations and I/O.
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    # Quieten the Python side: Keras prints the temporary SavedModel's signature to stdout
    # (its interactive-logging switch is thread-local, so other threads keep printing) and
    # TF logs converter INFO/WARNINGs. The C++ side (absl W0000/I0000 lines on stderr)
    # obeys only TF_CPP_MIN_LOG_LEVEL set before TensorFlow is imported.
    tf_logger, interactive = tf.get_logger(), keras.config.is_interactive_logging_enabled()
    level = tf_logger.level
    tf_logger.setLevel(logging.ERROR)
    keras.config.disable_interactive_logging()
    try:
        with warnings.catch_warnings():
            # Benign with a representative dataset: the converter measures the input range.
            warnings.filterwarnings("ignore", message="Statistics for quantized inputs")
            # The debugger builds a tf.lite.Interpreter, which warns of its deprecation.
            warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
            if precision != "int8":
                return bytes(converter.convert())
            return _selective_int8(converter, obs, per_channel)
    finally:
        tf_logger.setLevel(level)
        if interactive:
            keras.config.enable_interactive_logging()


def _selective_int8(
    converter: tf.lite.TFLiteConverter, obs: np.ndarray, per_channel: bool = True
) -> bytes:
    """int8 weights and activations for every op but ``FLOAT_OPS``; float I/O."""

    def representative_dataset() -> Iterator[list[np.ndarray]]:
        for row in obs:  # batch size 1, as the model's input
            yield [row[None, :].astype(np.float32)]

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative_dataset
    # Not ``_experimental_disable_per_channel_quantization_for_dense_layers``: TF 2.21's
    # QuantizationDebugger calls mlir_quantize with the all-ops flag only and drops that
    # one. The all-ops flag is the same thing here: FULLY_CONNECTED are our only int8 ops
    # with weights.
    converter._experimental_disable_per_channel = not per_channel
    options = tf.lite.experimental.QuantizationDebugOptions(denylisted_ops=FLOAT_OPS)
    with _without_native_lines(b"fully_quantize: "):  # printed by C++ on every call
        debugger = tf.lite.experimental.QuantizationDebugger(
            converter=converter, debug_dataset=representative_dataset, debug_options=options
        )
        return bytes(debugger.get_nondebug_quantized_model())


@contextlib.contextmanager
def _without_native_lines(prefix: bytes) -> Iterator[None]:
    """Drop lines starting with ``prefix`` that anything writes to file descriptor 2.

    The quantiser's C++ code prints a line per call straight to fd 2, past Python's
    logging and TF_CPP_MIN_LOG_LEVEL, once per export into the learner's live view. For
    the duration, fd 2 is a pipe; a thread copies every other line (other threads' log
    records included) to the real stderr, so nothing else is lost or reordered.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def pump() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if not line.startswith(prefix):
                    os.write(saved, line)

    thread = threading.Thread(target=pump, name="stderr-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the pump sees EOF
        thread.join(timeout=5.0)
        os.close(saved)


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
