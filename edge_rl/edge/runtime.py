"""Load a ``.tflite`` policy in LiteRT and run it on one float observation.

``ai-edge-litert`` first (delegates int8 and float layers to XNNPACK by default), then
``tflite-runtime`` (its last release, 2.14, needs numpy<2 and does not use XNNPACK on
x86; see DESIGN.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

RUNTIMES = ("ai_edge_litert", "tflite_runtime")


def interpreter_class(prefer: str = "ai_edge_litert") -> tuple[type, str]:
    """The LiteRT ``Interpreter`` class available here (``prefer`` first), and its name."""
    if prefer not in RUNTIMES:
        raise ValueError(f"unknown runtime {prefer!r}, expected one of {RUNTIMES}")
    for name in sorted(RUNTIMES, key=lambda r: r != prefer):
        try:
            if name == "ai_edge_litert":
                from ai_edge_litert.interpreter import Interpreter
            else:
                from tflite_runtime.interpreter import Interpreter  # type: ignore[import-not-found]
            return Interpreter, name
        except ImportError:
            continue
    raise ImportError("no TFLite runtime: install ai-edge-litert (pip install 'edge-rl[edge]')")


@dataclass(frozen=True)
class TensorQuant:
    dtype: np.dtype
    scale: float
    zero_point: int


def _quant(detail: dict) -> TensorQuant:
    scale, zero_point = detail.get("quantization", (0.0, 0))
    return TensorQuant(np.dtype(detail["dtype"]), float(scale), int(zero_point))


class TFLitePolicy:
    """One loaded model: float observation in, float model output (Q-values or action) out.

    Our exports take the raw observation as float32 and return float32 (see
    ``edge_rl.export.tflite``). A model with integer I/O (another full-integer export) also
    works: the observation is quantised into the input tensor's dtype and the output
    dequantised, with the parameters read from the model itself. Not thread-safe: one
    instance per thread.
    """

    def __init__(
        self,
        model_bytes: bytes,
        *,
        num_threads: int = 1,
        runtime: str = "ai_edge_litert",
    ) -> None:
        t0 = time.perf_counter()
        cls, self.runtime = interpreter_class(runtime)
        # Keep the bytes alive: the interpreter reads the flatbuffer in place.
        self._model_bytes = bytes(model_bytes)
        self._interp = cls(model_content=self._model_bytes, num_threads=num_threads)
        self._interp.allocate_tensors()
        self.load_seconds = time.perf_counter() - t0
        (inp,) = self._interp.get_input_details()
        (out,) = self._interp.get_output_details()
        self._in_index, self._out_index = inp["index"], out["index"]
        self.input_shape = tuple(int(d) for d in inp["shape"])
        self.output_shape = tuple(int(d) for d in out["shape"])
        self.input_quant, self.output_quant = _quant(inp), _quant(out)
        q = self.input_quant
        self._int_input = np.issubdtype(q.dtype, np.integer)
        if self._int_input:
            self._lo, self._hi = np.iinfo(q.dtype).min, np.iinfo(q.dtype).max
        self._buf = np.empty(self.input_shape, np.float32)

    def _to_input(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, np.float32).reshape(self.input_shape)
        if not self._int_input:
            return x.astype(self.input_quant.dtype, copy=False)
        q, buf = self.input_quant, self._buf
        np.multiply(x, 1.0 / q.scale, out=buf)
        buf += q.zero_point
        np.rint(buf, out=buf)
        np.maximum(buf, self._lo, out=buf)  # np.clip costs ~2 µs more on a [1, 4] array
        np.minimum(buf, self._hi, out=buf)
        return buf.astype(q.dtype)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Run one observation; returns the dequantised output row, shape ``[out_dim]``."""
        self._interp.set_tensor(self._in_index, self._to_input(obs))
        self._interp.invoke()
        y = self._interp.get_tensor(self._out_index)[0]
        q = self.output_quant
        if q.dtype in (np.float32, np.float16):
            return y.astype(np.float32)
        return (y.astype(np.float32) - q.zero_point) * q.scale

    def batch(self, obs: np.ndarray) -> np.ndarray:
        """Run a batch one row at a time (the model has batch size 1): ``[n, out_dim]``."""
        return np.stack([self(o) for o in obs])
