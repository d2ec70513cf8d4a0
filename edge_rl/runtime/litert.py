"""Load a ``.tflite`` policy in LiteRT and run it on one float observation.

``ai-edge-litert`` first (delegates int8 and float layers to XNNPACK by default), then
``tflite-runtime`` (its last release, 2.14, needs numpy<2 and does not use XNNPACK on
x86, measured on the development host).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

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


def declared_tensor_bytes(interp) -> int:
    """Bytes of every tensor the model declares (weights and activations), read from the
    flatbuffer's tensor table before ``allocate_tensors``."""
    total = 0
    for t in interp.get_tensor_details():
        n = 1
        for d in t["shape"]:
            n *= max(int(d), 1)  # -1/0 (dynamic) counted as 1
        total += n * np.dtype(t["dtype"]).itemsize
    return total


class TFLitePolicy:
    """One loaded model: float observation in, float model output (Q-values or action) out.

    edge-rl's exports take the raw observation as float32 and return float32 for every
    precision: the model normalises and (de)quantises inside (see ``edge_rl.export.tflite``).
    A model with integer I/O tensors is rejected. Not thread-safe: one instance per thread.
    """

    def __init__(
        self,
        model_bytes: bytes,
        *,
        num_threads: int = 1,
        runtime: str = "ai_edge_litert",
        max_tensor_bytes: int | None = None,
    ) -> None:
        """``max_tensor_bytes``: refuse (``ValueError``) a model whose tensors declare more
        memory than this, before any of it is allocated (a small file can declare GBs)."""
        t0 = time.perf_counter()
        cls, self.runtime = interpreter_class(runtime)
        # Keep the bytes alive: the interpreter reads the flatbuffer in place.
        self._model_bytes = bytes(model_bytes)
        self._interp = cls(model_content=self._model_bytes, num_threads=num_threads)
        self._num_threads = num_threads
        self._wide: Any = None  # batch_at_once's interpreter, made on its first call
        self._wide_rows = 0
        self.tensor_bytes = declared_tensor_bytes(self._interp)
        if max_tensor_bytes is not None and self.tensor_bytes > max_tensor_bytes:
            raise ValueError(
                f"the model's tensors declare {self.tensor_bytes:,} bytes, more than the "
                f"board's max_tensor_bytes {max_tensor_bytes:,}"
            )
        self._interp.allocate_tensors()
        self.load_seconds = time.perf_counter() - t0
        (inp,) = self._interp.get_input_details()
        (out,) = self._interp.get_output_details()
        self._in_index = inp["index"]
        self._out_index = out["index"]
        # Bound once: __call__ runs once per env step.
        self._set_tensor = self._interp.set_tensor
        self._invoke = self._interp.invoke
        self._get_tensor = self._interp.get_tensor
        self.input_shape = tuple(int(d) for d in inp["shape"])
        self.output_shape = tuple(int(d) for d in out["shape"])
        self.input_quant = _quant(inp)
        self.output_quant = _quant(out)
        dtypes = (self.input_quant.dtype, self.output_quant.dtype)
        if dtypes != (np.float32, np.float32):
            raise ValueError(
                f"the model's input/output tensors are {dtypes[0]}/{dtypes[1]}; edge-rl runs "
                "models with float32 I/O (raw observation in), as edge_rl.export writes them"
            )

    def to_input(self, obs: np.ndarray) -> np.ndarray:
        """What the model is given for ``obs``: a float32 view in the input tensor's shape."""
        return np.asarray(obs, np.float32).reshape(self.input_shape)

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        """Run one observation; returns the output row, shape ``[out_dim]``."""
        # to_input's map, inline: one Python call less per env step.
        self._set_tensor(self._in_index, np.asarray(obs, np.float32).reshape(self.input_shape))
        self._invoke()
        return self._get_tensor(self._out_index)[0]  # get_tensor returns a copy

    def output_shape_on_zeros(self) -> tuple[int, ...]:
        """The output tensor's shape after one invoke on a zero observation.

        A model can load and allocate and still fail on its first invoke (RuntimeError
        "input tensor lacks data", found by fuzzing signed models): this raises what the
        interpreter raises (``RuntimeError``, ``ValueError``), so a caller can refuse such
        a model before it is ever called on a real observation."""
        self._interp.set_tensor(self._in_index, np.zeros(self.input_shape, np.float32))
        self._interp.invoke()
        return tuple(self._interp.get_tensor(self._out_index).shape)

    def batch(self, obs: np.ndarray) -> np.ndarray:
        """Run a batch one row at a time (the model has batch size 1): ``[n, out_dim]``."""
        return np.stack([self(o) for o in obs])

    def batch_at_once(self, obs: np.ndarray) -> np.ndarray:
        """``[n, out_dim]`` for ``obs [n, ...]`` in one invoke, on a second interpreter of
        the same model with its input resized to ``n`` rows (the actor's stays at batch 1).
        Every op of an edge-rl export works row by row, so each row's output is the one
        ``batch`` gives (equal on int8 and float exports: tests/unit/runtime); a model
        that cannot be resized runs row by row. For the learner's checks of 1,000
        observations: one call instead of 1,000."""
        rows = np.asarray(obs, np.float32).reshape((-1, *self.input_shape[1:]))
        n = rows.shape[0]
        if n == 0:
            raise ValueError("batch_at_once needs at least one observation")
        try:
            interp = self._resized(n)
        except (RuntimeError, ValueError):
            return self.batch(rows)
        interp.set_tensor(self._in_index, rows)
        interp.invoke()
        return interp.get_tensor(self._out_index)

    def _resized(self, n: int) -> Any:
        """The second interpreter, its input at ``n`` rows (made once, resized on change)."""
        if self._wide is None:
            cls, _ = interpreter_class(self.runtime)
            self._wide = cls(model_content=self._model_bytes, num_threads=self._num_threads)
            self._wide_rows = 0
        if self._wide_rows != n:
            self._wide.resize_tensor_input(self._in_index, [n, *self.input_shape[1:]])
            self._wide.allocate_tensors()
            self._wide_rows = n
        return self._wide
