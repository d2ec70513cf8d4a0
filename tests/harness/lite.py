"""A .tflite model's outputs in plain LiteRT: what any user of the file would write."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter


def lite_outputs(model: bytes | Path, obs: np.ndarray) -> np.ndarray:
    """The outputs ``[n, out]`` of ``model`` (its bytes or its file) on each row of ``obs``,
    one batch-1 invoke each; raw float32 in, float32 out."""
    if isinstance(model, Path):
        model = model.read_bytes()
    interp = Interpreter(model_content=model)
    interp.allocate_tensors()
    (inp,), (out,) = interp.get_input_details(), interp.get_output_details()
    assert inp["dtype"] == np.float32 and out["dtype"] == np.float32
    rows = []
    for row in obs:
        interp.set_tensor(inp["index"], row[None].astype(np.float32))
        interp.invoke()
        rows.append(interp.get_tensor(out["index"])[0].copy())
    return np.stack(rows)
