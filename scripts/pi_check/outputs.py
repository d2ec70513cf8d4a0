"""A model's outputs on given inputs, with edge-rl's own LiteRT runner: run on the host and on
the board, then compared bit for bit (``differing``).

    python outputs.py MODEL.tflite INPUTS.npz OUT.npz     # on either side; numpy + edge-rl

The doctor compares the bundle's reference model; this compares the policy the run
actually trained and deployed, on 2,000 observations. Standard library, numpy and
edge_rl.runtime only: it runs in the board's venv (edge-rl[edge], no TensorFlow).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def observations(obs_dim: int, n: int = 2000, seed: int = 0) -> np.ndarray:
    """``[n, obs_dim]`` float32: CartPole-scale observations, some beyond the usual range."""
    return np.random.default_rng(seed).normal(scale=1.5, size=(n, obs_dim)).astype(np.float32)


def run(model: Path, inputs: Path, out: Path) -> None:
    from edge_rl.runtime.litert import TFLitePolicy

    with np.load(inputs, allow_pickle=False) as z:
        x = z["inputs"]
    policy = TFLitePolicy(model.read_bytes(), num_threads=1)
    np.savez(out, outputs=policy.batch(x), runtime=np.str_(policy.runtime))  # [n, out] float32


def differing(a: np.ndarray, b: np.ndarray) -> int:
    """Rows of ``a`` and ``b`` (float32 ``[n, k]``) whose bits differ anywhere."""
    if a.shape != b.shape or a.dtype != np.float32 or b.dtype != np.float32:
        raise ValueError(f"outputs {a.shape} {a.dtype} vs {b.shape} {b.dtype}")
    return int(np.sum(np.any(a.view(np.uint32) != b.view(np.uint32), axis=-1)))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: outputs.py MODEL.tflite INPUTS.npz OUT.npz")
    run(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
