"""Load a ``.tflite`` policy in LiteRT and run it on one float observation.

``ai-edge-litert`` first (delegates int8 and float layers to XNNPACK by default), then
``tflite-runtime`` (its last release, 2.14, needs numpy<2 and does not use XNNPACK on
x86; see DESIGN.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


def interpreter_class() -> tuple[type, str]:
    """The LiteRT ``Interpreter`` class available here, and the runtime's name."""
    try:
        from ai_edge_litert.interpreter import Interpreter

        return Interpreter, "ai_edge_litert"
    except ImportError:
        pass
    try:
        from tflite_runtime.interpreter import Interpreter  # type: ignore[import-not-found]

        return Interpreter, "tflite_runtime"
    except ImportError as e:
        raise ImportError(
            "no TFLite runtime: install ai-edge-litert (pip install 'edge-rl[edge]')"
        ) from e


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

    Quantises the (normalised) observation into the input tensor's dtype and dequantises
    the output, reading the parameters from the model itself. Not thread-safe: one
    instance per thread.
    """

    def __init__(
        self,
        model_bytes: bytes,
        *,
        num_threads: int = 1,
        obs_mean: Sequence[float] | None = None,
        obs_std: Sequence[float] | None = None,
    ) -> None:
        t0 = time.perf_counter()
        cls, self.runtime = interpreter_class()
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
        obs_dim = int(np.prod(self.input_shape[1:]))
        self._mean = (
            np.zeros(obs_dim, np.float32) if obs_mean is None else np.asarray(obs_mean, np.float32)
        )
        self._std = (
            np.ones(obs_dim, np.float32) if obs_std is None else np.asarray(obs_std, np.float32)
        )
        if self._mean.shape != (obs_dim,) or self._std.shape != (obs_dim,):
            raise ValueError(f"obs_mean/obs_std must have {obs_dim} entries")
        if np.any(self._std <= 0):
            raise ValueError("obs_std must be positive")

    def _to_input(self, obs: np.ndarray) -> np.ndarray:
        x = (np.asarray(obs, np.float32).reshape(self.input_shape) - self._mean) / self._std
        q = self.input_quant
        if q.dtype == np.float32:
            return x
        if q.dtype == np.float16:
            return x.astype(np.float16)
        info = np.iinfo(q.dtype)
        return np.clip(np.round(x / q.scale) + q.zero_point, info.min, info.max).astype(q.dtype)

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
