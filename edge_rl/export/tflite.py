"""Export a Dense-MLP policy to TFLite (int8 / fp16 / fp32), normalisation folded in.

Why fold: full-integer int8 quantises the input tensor with *one* scale. CartPole's cart
position spans ~±2.4 while its pole angle spans ~±0.2, so a shared scale would leave the
angle a handful of int8 levels. The actor therefore feeds the normalised observation
``z = (obs - mean) / std`` (``edge_rl.edge.runtime.TFLitePolicy`` does this), and the
exported model absorbs the affine map into its first Dense layer, so that it computes on
``z`` exactly what the float model computes on ``obs``.
"""

from __future__ import annotations

import logging
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


@dataclass(frozen=True)
class ExportedModel:
    """A converted model and what an actor needs to feed it (see ``PolicyManifest``)."""

    tflite: bytes
    precision: str  # "int8" | "fp16" | "fp32"
    input_quant: QuantParams
    output_quant: QuantParams
    obs_mean: tuple[float, ...]
    obs_std: tuple[float, ...]  # the model's input is (obs - obs_mean) / obs_std
    convert_seconds: float


def export_policy(
    model: keras.Model, calibration_obs: np.ndarray, precision: str = "int8"
) -> ExportedModel:
    """Convert ``model`` (raw obs -> output) to TFLite with batch size 1.

    ``calibration_obs [n, obs_dim]``: real observations (from replay). They set the
    normalisation and, for int8, the activation ranges of every quantised tensor.
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

    export_model = fold_normalisation(model, mean, std)
    z = (obs - mean) / std  # [n, obs_dim] what the actor will feed

    t0 = time.perf_counter()
    tflite_bytes = _convert(export_model, z, precision)
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


def fold_normalisation(model: keras.Model, mean: np.ndarray, std: np.ndarray) -> keras.Model:
    """A batch-1 copy of a Dense stack that takes ``z = (obs - mean) / std`` instead of obs.

    First layer, kernel ``W [obs_dim, units]``, bias ``b [units]``; with obs = z * std + mean:
        obs @ W + b = z @ (W * std[:, None]) + (b + mean @ W)
    so  W' = W * std[:, None],  b' = b + mean @ W.  The other layers are copied unchanged.
    """
    dense = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    if not dense or not all(isinstance(layer, keras.layers.Dense) for layer in dense):
        kinds = [type(layer).__name__ for layer in dense]
        raise ValueError(f"export needs a plain stack of Dense layers, got {kinds}")
    obs_dim = int(dense[0].kernel.shape[0])
    if mean.shape != (obs_dim,) or std.shape != (obs_dim,):
        raise ValueError(f"the model takes {obs_dim} features, calibration has {mean.shape}")

    # A fixed batch of 1: the actor runs one observation per step and LiteRT then never
    # has to resize tensors.
    layers: list[keras.layers.Layer] = [keras.Input(shape=(obs_dim,), batch_size=1)]
    weights: list[np.ndarray] = []
    for i, layer in enumerate(dense):
        kernel = np.asarray(layer.kernel, np.float64)  # [in, units]; float64 for an exact fold
        bias = np.asarray(layer.bias, np.float64) if layer.use_bias else np.zeros(kernel.shape[1])
        if i == 0:
            kernel, bias = kernel * std[:, None], bias + mean @ kernel
        layers.append(keras.layers.Dense(layer.units, activation=layer.activation, name=layer.name))
        weights += [kernel.astype(np.float32), bias.astype(np.float32)]
    folded = keras.Sequential(layers, name=f"{model.name}_export")
    folded.set_weights(weights)
    return folded


def _convert(model: keras.Model, z: np.ndarray, precision: str) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if precision == "int8":

        def representative_dataset() -> Iterator[list[np.ndarray]]:
            for row in z:  # batch size 1, as the model's input
                yield [row[None, :].astype(np.float32)]

        # Full-integer: int8 weights, activations and I/O, so that XNNPACK runs the whole
        # graph in int8 and a board never touches float inside the model.
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = representative_dataset
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
    elif precision == "fp16":
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
            return bytes(converter.convert())
    finally:
        tf_logger.setLevel(level)
        if interactive:
            keras.config.enable_interactive_logging()


def _read_quant(tflite_bytes: bytes) -> tuple[QuantParams, QuantParams]:
    """Input and output quantisation as LiteRT sees them (the actor reads the same)."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=tflite_bytes)
    (inp,) = interp.get_input_details()
    (out,) = interp.get_output_details()

    def params(detail: dict) -> QuantParams:
        scale, zero_point = detail["quantization"]
        return QuantParams(np.dtype(detail["dtype"]).name, float(scale), int(zero_point))

    return params(inp), params(out)
