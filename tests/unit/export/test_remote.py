"""The learner's export in the export worker's process: the same model, the same parity
outputs and the same packed payload as ``export_policy`` and the parity check on the
calling thread, so that the gate's decision is the same."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from edge_rl.agents.dqn.networks import make_q_network
from edge_rl.agents.td3.networks import make_actor
from edge_rl.export.parity import (
    action_report,
    check_action_parity,
    check_exportable,
    check_q_parity,
    q_report,
)
from edge_rl.export.parity import outputs as parity_outputs
from edge_rl.export.remote import export_checked, prepare_checked
from edge_rl.export.tflite import export_policy
from edge_rl.export.worker import ExportWorker
from edge_rl.wire.policy import decompress_model


@pytest.fixture(scope="module")
def worker():
    w = ExportWorker()
    yield w
    w.close()


def _obs(n: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(scale=0.5, size=(n, dim)).astype(np.float32)


def _same_as_here(model: keras.Model, checked, cal: np.ndarray, held_out: np.ndarray):
    here = export_policy(model, cal, "int8", per_channel=True)
    assert checked.exported.path == here.path == "direct"
    assert checked.exported.tflite == here.tflite  # byte for byte
    fields = ("precision", "input_quant", "output_quant", "obs_mean", "obs_std")
    assert all(getattr(checked.exported, f) == getattr(here, f) for f in fields)
    lite, reference = parity_outputs(here, model, held_out)
    assert np.array_equal(checked.lite, lite) and np.array_equal(checked.reference, reference)
    assert decompress_model(checked.payload, "zlib", 1 << 20) == here.tflite
    return here


def test_a_q_network_exports_and_checks_in_the_worker_as_here(worker) -> None:
    model = make_q_network(4, 2, (32, 32), seed=1)
    cal, held_out = _obs(300, 4, seed=0), _obs(200, 4, seed=1)
    assert prepare_checked(model, "int8", True, worker) is True
    pid = worker.pid
    checked = export_checked(model, cal, held_out, "int8", True, "zlib", worker)
    assert worker.pid == pid is not None  # the same child, its template made at prepare
    here = _same_as_here(model, checked, cal, held_out)
    assert q_report(checked.lite, checked.reference) == check_q_parity(here, model, held_out)


def test_a_td3_actor_exports_and_checks_in_the_worker_as_here(worker) -> None:
    low, high = np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32)
    actor = make_actor(3, low, high, (32, 32), seed=4)
    cal, held_out = _obs(300, 3, seed=2), _obs(200, 3, seed=3)
    checked = export_checked(actor, cal, held_out, "int8", True, "zlib", worker)
    here = _same_as_here(actor, checked, cal, held_out)
    half = (high - low) / 2
    remote = action_report(checked.lite, checked.reference, half, 0.99)
    assert remote == check_action_parity(here, actor, held_out, half, 0.99)


def test_a_network_numpy_cannot_run_is_refused_and_not_sent(worker) -> None:
    model = keras.Sequential(
        [keras.Input(shape=(4,)), keras.layers.Dense(8, activation="elu"), keras.layers.Dense(2)]
    )
    starts = worker.starts
    with pytest.raises(ValueError, match="activations linear, relu, tanh; dense.* uses 'elu'"):
        export_checked(model, _obs(50, 4, 0), _obs(20, 4, 1), "int8", True, "zlib", worker)
    with pytest.raises(ValueError, match="uses 'elu'"):  # at set-up, before the first export
        prepare_checked(model, "int8", True, worker)
    assert worker.starts == starts
    with pytest.raises(ValueError, match="precision"):
        prepare_checked(model, "int4", True, worker)


def test_a_layer_that_is_not_dense_is_refused_by_name() -> None:
    model = keras.Sequential(
        [keras.Input(shape=(4,)), keras.layers.Dense(8), keras.layers.Dropout(0.1, name="drop")],
        name="net",
    )
    with pytest.raises(ValueError, match="net: export needs a plain stack of Dense layers; drop"):
        check_exportable(model)
    stack = check_exportable(make_q_network(4, 2, (8,), seed=0))
    assert [activation for _, _, activation in stack] == ["relu", "linear"]
