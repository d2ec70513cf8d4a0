"""The TFLite converter calls, run in the export worker process (``edge_rl.export.worker``).

``convert`` is what ``export_policy`` sends to the worker: the deployable Keras model as
its public serialisation (``keras.saving.serialize_keras_object`` and ``get_weights()``),
the calibration observations, the precision; it returns the ``.tflite`` bytes. Everything
process-wide that a quiet conversion needs happens here, inside the worker only:

* TensorFlow's Python logger at ERROR and Keras's interactive logging off (Keras prints the
  temporary SavedModel's signature to stdout; TF logs converter INFO/WARNINGs);
* ``warnings`` filters for the converter's two benign warnings (set once, process-wide:
  the worker has no other threads that warn);
* the quantiser's C++ ``fully_quantize:`` line on every call, written straight to file
  descriptor 2, dropped by a filter on the worker's own fd 2;
* the private converter flag for per-tensor int8 (see ``_selective_int8``).

``convert_model`` is the converter alone, callable in any process (benchmarks/ compares
both); it touches none of the above.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import warnings
from collections.abc import Iterator

import keras
import numpy as np
import tensorflow as tf

# The op types kept in float in an int8 export: the normalisation, TD3's rescale and clip.
FLOAT_OPS = ["MUL", "ADD", "MINIMUM", "MAXIMUM"]
_NATIVE_NOISE = b"fully_quantize: "  # printed by the quantiser's C++ code on every call
_quiet = False


def convert(
    config: dict, weights: list[np.ndarray], obs: np.ndarray, precision: str, per_channel: bool
) -> bytes:
    """In the worker: rebuild the model from its serialisation and convert it, quietly."""
    _quiet_this_process()
    # The custom layer (``Affine``) registers itself with Keras on import.
    from edge_rl.export import layers  # noqa: F401

    model = keras.saving.deserialize_keras_object(config)
    model.set_weights(weights)
    with _without_native_lines(_NATIVE_NOISE):
        return convert_model(model, obs, precision, per_channel)


def warm_up() -> None:
    """In the worker: what a first conversion would otherwise pay (importing this module
    imports TensorFlow), done ahead of it (``ExportWorker.warm_up``)."""
    _quiet_this_process()


def _quiet_this_process() -> None:
    """Process-wide quiet for the converter: for the worker, never for the learner."""
    global _quiet
    if _quiet:
        return
    tf.get_logger().setLevel(logging.ERROR)
    keras.config.disable_interactive_logging()
    # Benign with a representative dataset: the converter measures the input range.
    warnings.filterwarnings("ignore", message="Statistics for quantized inputs")
    # The debugger builds a tf.lite.Interpreter, which warns of its deprecation.
    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated")
    _quiet = True


def convert_model(
    model: keras.Model, obs: np.ndarray, precision: str, per_channel: bool = True
) -> bytes:
    """``model`` to ``.tflite`` bytes; ``obs [n, obs_dim]`` calibrates int8."""
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    if precision == "int8":
        return _selective_int8(converter, obs, per_channel)
    if precision == "fp16":
        # float16 weights (half the bytes), float32 activations and I/O.
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    return bytes(converter.convert())


def _selective_int8(
    converter: tf.lite.TFLiteConverter, obs: np.ndarray, per_channel: bool = True
) -> bytes:
    """int8 weights and activations for every op but ``FLOAT_OPS``; float I/O.

    Selective quantisation goes through the public ``tf.lite.experimental
    .QuantizationDebugger`` (denylisted op types). Per-tensor weights have no public switch
    (TF 2.21): the debugger itself passes the converter's private
    ``_experimental_disable_per_channel`` to ``mlir_quantize`` and nothing else, so that
    flag is set here, in the worker's own converter object. (Not
    ``_experimental_disable_per_channel_quantization_for_dense_layers``: the debugger drops
    it. The all-ops flag is the same thing here: FULLY_CONNECTED are our only int8 ops
    with weights.) Without it, ``per_channel=False`` could not be offered.
    """

    def representative_dataset() -> Iterator[list[np.ndarray]]:
        for row in obs:  # batch size 1, as the model's input
            yield [row[None, :].astype(np.float32)]

    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.representative_dataset = representative_dataset
    converter._experimental_disable_per_channel = not per_channel
    options = tf.lite.experimental.QuantizationDebugOptions(denylisted_ops=FLOAT_OPS)
    debugger = tf.lite.experimental.QuantizationDebugger(
        converter=converter, debug_dataset=representative_dataset, debug_options=options
    )
    return bytes(debugger.get_nondebug_quantized_model())


@contextlib.contextmanager
def _without_native_lines(prefix: bytes) -> Iterator[None]:
    """Drop lines starting with ``prefix`` that anything writes to file descriptor 2.

    For the duration, fd 2 is a pipe; a thread copies every other line to the real stderr,
    so nothing else is lost or reordered. It swaps the *process's* fd 2: used in the export
    worker, whose only other thread is that copier.
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
