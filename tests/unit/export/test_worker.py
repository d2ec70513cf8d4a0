"""The export worker: conversions run in a child process that is restarted when it dies,
whose failures come back as exceptions, and that leaves with its parent (real processes)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import keras
import numpy as np
import pytest

from edge_rl.agents.dqn.networks import make_q_network
from edge_rl.export import convert
from edge_rl.export.parity import check_q_parity
from edge_rl.export.tflite import deployable_model, export_policy, start_export_worker
from edge_rl.export.worker import (
    ExportWorker,
    RemoteTraceback,
    WorkerDied,
    default_worker,
    shutdown,
)
from tests.harness.procs import alive
from tests.harness.waits import bound, until


def _until(done, seconds: float = 30.0) -> bool:
    return until(done, bound(seconds))


def _until_gone(pid: int, seconds: float = 30.0) -> bool:
    return _until(lambda: not alive(pid), seconds)


def _obs(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 4)).astype(np.float32)


@pytest.fixture
def worker():
    w = ExportWorker()
    yield w
    w.close()


def test_the_warm_up_starts_the_worker_that_the_next_export_uses() -> None:
    shutdown()
    start_export_worker().join(120)  # bounded: the worker's TensorFlow import
    shared = default_worker()
    pid, starts = shared.pid, shared.starts
    assert pid is not None
    export_policy(make_q_network(4, 2, (32, 32), seed=0), _obs(64, seed=0), "int8", direct=False)
    assert shared.pid == pid and shared.starts == starts


def test_a_failed_warm_up_is_logged_not_raised(worker: ExportWorker, caplog) -> None:
    worker.warm_up(int, "not a number").join(60)
    assert "warm-up failed" in caplog.text and "invalid literal" in caplog.text
    assert worker.call(os.getpid) == worker.pid


def test_a_killed_worker_is_restarted_by_the_next_export() -> None:
    model = make_q_network(4, 2, (32, 32), seed=0)
    export_policy(model, _obs(64, seed=0), "int8", direct=False)
    shared = default_worker()
    pid, starts = shared.pid, shared.starts
    assert pid is not None and pid != os.getpid()  # the conversion ran in another process
    os.kill(pid, signal.SIGKILL)
    # Until the worker's view says so: a killed multi-threaded process shows as a zombie
    # before its last thread has exited and it can be waited for.
    assert _until(lambda: shared.pid is None)
    exported = export_policy(model, _obs(64, seed=1), "int8", direct=False)
    assert check_q_parity(exported, model, _obs(64, seed=2)).greedy_agreement > 0.9
    assert shared.starts == starts + 1 and shared.pid not in (None, pid)


def test_one_worker_serves_every_export_of_a_run() -> None:
    model = make_q_network(4, 2, (32, 32), seed=0)
    export_policy(model, _obs(64, seed=0), "fp32", direct=False)
    shared = default_worker()
    pid, starts = shared.pid, shared.starts
    for precision in ("int8", "fp16", "fp32"):
        assert export_policy(model, _obs(64, seed=0), precision, direct=False).path == "converter"
    assert shared.pid == pid and shared.starts == starts


def test_a_worker_that_dies_mid_call_raises_and_is_replaced(worker: ExportWorker) -> None:
    first = worker.call(os.getpid)
    with pytest.raises(WorkerDied, match="exit 3"):
        worker.call(os._exit, 3)
    assert not alive(first)
    second = worker.call(os.getpid)
    assert second != first and worker.starts == 2


def test_the_callers_exception_comes_back_with_its_type_and_traceback(worker) -> None:
    with pytest.raises(ValueError, match="invalid literal") as info:
        worker.call(int, "not a number")
    assert isinstance(info.value.__cause__, RemoteTraceback)
    assert "ValueError" in str(info.value.__cause__)
    pid = worker.pid
    with pytest.raises(RuntimeError, match="SystemExit"):  # never re-raised as SystemExit
        worker.call(sys.exit, 2)
    assert worker.pid == pid and worker.starts == 1  # an exception does not cost the worker


def test_a_hung_call_is_bounded_and_the_worker_replaced(worker: ExportWorker) -> None:
    first = worker.call(os.getpid)
    with pytest.raises(TimeoutError):
        worker.call(time.sleep, 600, timeout=1.0)
    assert not alive(first)
    assert worker.call(os.getpid) != first


def test_an_argument_that_does_not_pickle_is_refused_before_the_worker(worker) -> None:
    with pytest.raises(Exception, match="pickle"):
        worker.call(len, lambda: None)
    assert worker.starts == 0


def test_a_model_error_is_raised_to_the_caller() -> None:
    model = make_q_network(4, 2, (32, 32), seed=0)
    obs = _obs(16, seed=0)
    deployable = deployable_model(model, obs.mean(axis=0), obs.std(axis=0))
    config = keras.saving.serialize_keras_object(deployable)
    wrong = [w[:1] for w in deployable.get_weights()]  # weights of the wrong shapes
    with pytest.raises(ValueError):
        default_worker().call(convert.convert, config, wrong, obs, "int8", True)
    export_policy(model, obs, "fp32")  # and the worker goes on


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("method", ["gst", "iterative"])
def test_a_compressed_snapshot_exports_through_the_worker(method: str, direct: bool) -> None:
    from edge_rl.compress.compressor import Compressor
    from edge_rl.compress.config import CompressionConfig
    from edge_rl.export.regions import weight_regions
    from edge_rl.learner.outbound.packager import snapshot

    network = make_q_network(4, 2, (32, 32), seed=0)
    compressor = Compressor(CompressionConfig(method=method), network, total_updates=4_000)
    compressor.on_updates(4_000)  # GST: past its transition; both: pruned
    middle = np.asarray(network.layers[1].kernel)  # the compressed layer (first, last dense)
    assert np.mean(middle == 0) >= 0.5
    model = snapshot(network)  # what the publisher exports
    exported = export_policy(model, _obs(200, seed=0), "int8", per_channel=False, direct=direct)
    assert exported.path == ("direct" if direct else "converter")
    assert check_q_parity(exported, model, _obs(200, seed=1)).greedy_agreement > 0.9
    assert len(weight_regions(exported.tflite)) == 3


@pytest.mark.parametrize("direct", [True, False])
def test_export_leaves_this_process_fd2_warnings_and_loggers_alone(monkeypatch, direct) -> None:
    import tensorflow as tf

    model = make_q_network(4, 2, (32, 32), seed=0)
    export_policy(model, _obs(64, seed=0), "int8")  # imports done, worker started, template
    dup2: list[tuple[int, int]] = []
    real_dup2 = os.dup2
    monkeypatch.setattr(os, "dup2", lambda a, b, *r: dup2.append((a, b)) or real_dup2(a, b, *r))
    filters, level = list(warnings.filters), tf.get_logger().level
    interactive = keras.config.is_interactive_logging_enabled()
    assert export_policy(model, _obs(64, seed=1), "int8", direct=direct).path == (
        "direct" if direct else "converter"
    )
    assert [b for _, b in dup2] == []  # fd 2 was never swapped here
    assert warnings.filters == filters and tf.get_logger().level == level
    assert keras.config.is_interactive_logging_enabled() == interactive


def test_the_workers_native_noise_is_filtered_on_its_own_stderr(worker, capfd) -> None:
    worker.start()  # after capfd: the worker's fd 2 is the captured one
    worker.call(os.write, 2, b"kept: the worker's own line\n")
    obs = _obs(64, seed=0)
    model = make_q_network(4, 2, (32, 32), seed=0)
    deployable = deployable_model(model, obs.mean(axis=0), obs.std(axis=0))
    config = keras.saving.serialize_keras_object(deployable)
    worker.call(convert.convert, config, deployable.get_weights(), obs, "int8", True)
    err = capfd.readouterr().err
    assert "kept: the worker's own line" in err and "fully_quantize" not in err


PARENT = textwrap.dedent(
    """
    import json, os, signal
    from edge_rl.export.worker import ExportWorker

    worker = ExportWorker()
    print(json.dumps({"worker": worker.call(os.getpid)}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_the_worker_exits_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    pid = None
    try:
        pid = json.loads(parent.stdout.readline())["worker"]  # bounded by the start timeout
        assert parent.wait(60) == -signal.SIGKILL
        assert _until_gone(pid), f"export worker {pid} outlived its parent"
    finally:
        parent.kill()
        parent.wait(5)
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)


MID_CALL_PARENT = textwrap.dedent(
    """
    import json, os, signal, threading, time
    from edge_rl.export.worker import ExportWorker

    worker = ExportWorker()
    pid = worker.call(os.getpid)
    threading.Thread(target=worker.call, args=(time.sleep, 600), daemon=True).start()
    print(json.dumps({"worker": pid}), flush=True)
    time.sleep(1.0)  # the worker is inside its call: it reads no EOF until that returns
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_the_worker_exits_when_its_parent_is_killed_during_a_call() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", MID_CALL_PARENT], stdout=subprocess.PIPE, text=True
    )
    pid = None
    try:
        pid = json.loads(parent.stdout.readline())["worker"]
        assert parent.wait(60) == -signal.SIGKILL
        assert _until_gone(pid, 10.0), f"export worker {pid} outlived its parent mid-call"
    finally:
        parent.kill()
        parent.wait(5)
        if pid is not None and alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_the_pipes_hold_a_learner_export_in_one_write() -> None:
    """A learner export's ~0.6 MB request crosses in one write, not ~10 turns of 64 KB."""
    import fcntl

    from edge_rl.export.worker import PIPE_BYTES, widen_pipe

    read, write = os.pipe()
    try:
        assert fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) < PIPE_BYTES  # the system's default
        widen_pipe(write)
        assert fcntl.fcntl(write, fcntl.F_GETPIPE_SZ) == PIPE_BYTES
        os.set_blocking(write, False)
        assert os.write(write, b"x" * 600_000) == 600_000  # all of it, no reader yet
    finally:
        os.close(read)
        os.close(write)
    worker = ExportWorker()
    try:
        assert worker.call(len, b"y" * 900_000) == 900_000  # through the widened pipes
    finally:
        worker.close()
