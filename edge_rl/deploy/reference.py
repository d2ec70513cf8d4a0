"""The bundle's reference model: a small int8 policy and its outputs recorded on the host.

``edge-rl doctor`` runs the same model on the board over the same inputs and requires the
very same output bits: XNNPACK's int8 kernels compute in integers, so a board whose LiteRT
matches the host's gives the host's bits, and any difference means the board's runtime,
its CPU (emulation) or the copied files are not what the learner's policies will meet.

The model is made once per host by the project's own exporter (a DQN Q-network on a
CartPole-sized observation, fixed seed; TensorFlow, so this module is host-only) and kept in
the wheelhouse cache; the outputs are recorded afresh for every ``edge-rl flash``.
"""

from __future__ import annotations

import platform
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from edge_rl.runtime.litert import TFLitePolicy

OBS_DIM, N_ACTIONS, N_INPUTS = 4, 2, 64


def reference_model(cache_dir: Path) -> bytes:
    """The reference ``.tflite`` (int8), from ``cache_dir`` or made there once."""
    path = cache_dir / "reference-int8.tflite"
    if path.exists():
        return path.read_bytes()
    from edge_rl.agents.dqn.networks import make_q_network
    from edge_rl.export.tflite import export_policy
    from edge_rl.export.worker import shutdown

    rng = np.random.default_rng(0)
    calibration = rng.normal(size=(500, OBS_DIM)).astype(np.float32)  # [500, 4]
    try:
        exported = export_policy(make_q_network(OBS_DIM, N_ACTIONS, (32, 32), seed=0), calibration)
    finally:
        shutdown()  # the export worker: a CLI must not leave it running
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(exported.tflite)
    tmp.replace(path)  # atomic: a concurrent flash never reads half a model
    return exported.tflite


def record(model: bytes, out_dir: Path, num_threads: int = 1) -> Path:
    """Write ``out_dir/model.tflite`` and ``out_dir/expected.npz`` (inputs, the host's
    outputs, when and where they were made); returns ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # Inputs well inside and beyond the calibration range: saturated int8 values too.
    inputs = np.random.default_rng(1).normal(scale=2.0, size=(N_INPUTS, OBS_DIM))
    inputs = inputs.astype(np.float32)  # [64, 4]
    policy = TFLitePolicy(model, num_threads=num_threads)
    outputs = policy.batch(inputs)  # [64, 2] float32
    (out_dir / "model.tflite").write_bytes(model)
    np.savez(
        out_dir / "expected.npz",
        inputs=inputs,
        outputs=outputs,
        made_unix=np.float64(time.time()),
        host=np.str_(f"{platform.machine()} {policy.runtime} {_version(policy.runtime)}"),
    )
    return out_dir


def _version(runtime: str) -> str:
    try:
        return metadata.version(runtime.replace("_", "-"))
    except metadata.PackageNotFoundError:
        return "?"
