"""cli/shutdown.py with real signals in real processes: SIGTERM's work runs off the main
thread (so a handler never waits for a lock its own thread holds, nor for itself), the
process ends within its bound however the stop goes, and a child whose parent died
before it started exits at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from edge_rl.broker.executables import PARENT_ENV
from tests.harness.paths import REPO
from tests.harness.waits import bound

# The main thread holds the lock ``stop`` needs, forever unless ``stop`` runs elsewhere,
# and is sent SIGTERM twice in a row (a killed learner's pdeathsig comes once per thread).
HELD = textwrap.dedent(
    """
    import os, signal, threading, time
    from edge_rl.cli.shutdown import stop_on_sigterm

    lock, stopped = threading.Lock(), threading.Event()

    def stop():
        with lock:
            stopped.set()

    stop_on_sigterm(stop, bound_s=60)
    with lock:
        print("ready", flush=True)
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGTERM)  # its handler runs here, on this thread
        time.sleep(0.2)
    stopped.wait(30)
    print("stopped" if stopped.is_set() else "not stopped", flush=True)
    """
)

# ``stop`` does nothing and the main thread never ends: the bound ends the process.
STUCK = textwrap.dedent(
    """
    import threading
    from edge_rl.cli.shutdown import stop_on_sigterm

    stop_on_sigterm(lambda: None, bound_s=1.0)
    print("ready", flush=True)
    threading.Event().wait()
    """
)


def _python(code: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=dict(os.environ, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_sigterm_stops_from_a_thread_of_its_own_while_main_holds_the_lock():
    proc = _python(HELD)
    out, err = proc.communicate(timeout=bound(60))
    assert proc.returncode == 0, err[-2000:]
    assert out.split() == ["ready", "stopped"], (out, err[-2000:])


def test_the_process_ends_within_its_bound_when_the_stop_does_not_end_it():
    proc = _python(STUCK)
    assert proc.stdout.readline().strip() == "ready"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=bound(30))
    assert proc.returncode == 1  # faulthandler's exit
    assert time.monotonic() - started < bound(10)
    assert "Timeout" in err and "Thread" in err, err[-2000:]  # every thread's stack


def test_a_child_whose_parent_is_gone_exits_at_once():
    # A PID that is not this child's parent stands for a parent that died before the
    # child's pdeathsig was armed (the child then has another parent already).
    result = cli_with_parent(os.getpid() + 1_000_000)
    assert result.returncode != 0
    assert "is gone" in result.stderr and "Traceback" not in result.stderr


def cli_with_parent(parent: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_rl.cli", "actor", "--board", "rpi4", "--id", "a"],
        cwd=REPO,
        env=dict(os.environ, **{PARENT_ENV: str(parent)}),
        capture_output=True,
        text=True,
        timeout=bound(60),
    )


def test_a_child_of_a_live_parent_goes_on():
    # Its parent (this test) is the one named: the command goes on to its own checks.
    result = cli_with_parent(os.getpid())
    assert "is gone" not in result.stderr
    assert result.returncode != 0 and "--broker" in result.stderr  # the next check's error
