"""Waits on states, never on the clock: a test polls the condition it asserts, within a
bound sized for a loaded machine, and says what it waited for when the bound runs out.

A bound is given in seconds for a quiet 2-core machine and stretched by ``slack()``: the
machine's load per core at the time of the wait (``make test`` beside six CPU-bound
processes runs at a load of 13-15 on 2 cores, each process at ~1/7 of a core), or more with
``EDGE_RL_TEST_SLACK=F``. Waiting on a state costs nothing once it holds, so a generous
bound slows no passing test; only a fixed ``sleep`` would.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable

import pytest

SLACK_ENV = "EDGE_RL_TEST_SLACK"
MAX_SLACK = 10.0  # a machine slower than this is not one a test can be sized for


def slack() -> float:
    """How much longer than on a quiet machine anything takes here now: the larger of
    ``EDGE_RL_TEST_SLACK`` (default 1) and the 1-minute load average per core."""
    floor = float(os.environ.get(SLACK_ENV, "1") or 1)
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return max(1.0, floor, min(per_core, MAX_SLACK))


def bound(seconds: float) -> float:
    """``seconds`` on a quiet machine, stretched by ``slack()``."""
    return seconds * slack()


def until(cond: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """True once ``cond()`` holds, False after ``timeout`` s (not stretched): for a test
    that asserts a state does NOT come, or reports a miss itself."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)  # the poll interval
    return True


def wait_for(
    cond: Callable[[], bool],
    timeout: float,
    what: str,
    step: float = 0.05,
    detail: Callable[[], str] | None = None,
) -> None:
    """Until ``cond()`` holds; fails the test, naming ``what`` (and ``detail()``, e.g. a
    log's tail), after ``bound(timeout)`` s."""
    limit = bound(timeout)
    if not until(cond, limit, step):
        more = f"\n{detail()}" if detail is not None else ""
        pytest.fail(f"waited {limit:.0f} s for {what}{more}", pytrace=False)


def exit_code(
    proc: subprocess.Popen,
    timeout: float,
    what: str,
    detail: Callable[[], str] | None = None,
) -> int:
    """``proc``'s exit code once it has exited, within ``bound(timeout)`` s, or a failure
    naming ``what`` was to end (and ``detail()``)."""
    limit = bound(timeout)
    try:
        return proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        more = f"\n{detail()}" if detail is not None else ""
        pytest.fail(f"{what}: still running after {limit:.0f} s{more}", pytrace=False)
