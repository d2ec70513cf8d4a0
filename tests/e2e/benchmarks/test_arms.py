"""benchmarks/_arms.py: a run stopped part-way continues with --resume, and stopping a
benchmark stops its arms (real child processes, by PID)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from tests.harness.paths import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
import _arms  # noqa: E402

FLAGS = ["--config", "examples/cartpole_dqn.yaml", "--seed", "1"]


def test_a_run_with_a_checkpoint_and_no_summary_is_resumed(tmp_path):
    run = tmp_path / "gst-s1"
    assert _arms.learn_command(run, FLAGS)[1:] == ["learn", "--out", str(run), *FLAGS]
    (run / "checkpoint").mkdir(parents=True)
    assert _arms.learn_command(run, FLAGS)[1:] == ["learn", "--resume", str(run)]
    (run / "summary.json").write_text('{"interrupted": true}')  # stopped by a signal
    assert _arms.learn_command(run, FLAGS)[1:] == ["learn", "--resume", str(run)]
    (run / "summary.json").write_text('{"interrupted": false}')  # finished: --reuse skips it
    assert _arms.learn_command(run, FLAGS)[1:] == ["learn", "--out", str(run), *FLAGS]
    assert _arms.finished(run)


def test_stopping_the_benchmark_stops_its_arms(tmp_path, monkeypatch):
    """SIGTERM to run_arms ends every arm it started; none is left running."""
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def popen(cmd, **kwargs):  # an arm that runs until it is told to stop
        proc = real_popen([sys.executable, "-c", "import time; time.sleep(60)"], **kwargs)
        started.append(proc)
        return proc

    monkeypatch.setattr(_arms.subprocess, "Popen", popen)
    arms = {name: (tmp_path / name, FLAGS) for name in ("dense", "gst")}
    t0 = time.monotonic()
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()  # both are running
    try:
        _arms.run_arms(arms, poll=0.1)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("run_arms returned though it was told to stop")
    assert len(started) == 2
    assert all(p.poll() is not None for p in started), [p.pid for p in started]
    assert time.monotonic() - t0 < 30
    assert signal.getsignal(signal.SIGTERM) is not _arms._stop_on_sigterm
