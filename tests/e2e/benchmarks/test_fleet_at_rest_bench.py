"""benchmarks/fleet_at_rest.py, tiny: five waiting boards on a real Mosquitto, their
host sampled for a few seconds; the table names every board connected and figures a
waiting fleet can have (some CPU, far fewer wake-ups than a 0.1 s turn a board gives)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.e2e.benchmarks.test_actorq_bench import parse_table
from tests.harness.paths import REPO

BOARDS = 5
WINDOW_S = 4.0


@pytest.mark.slow
@pytest.mark.bench
@pytest.mark.timeout(400)
def test_the_fleet_at_rest_table_measures_the_waiting_boards() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "fleet_at_rest.py"),
            "--boards",
            str(BOARDS),
            "--window",
            str(WINDOW_S),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (row,) = parse_table(proc.stdout)
    assert row["arm"] == "after" and int(row["boards"]) == BOARDS
    assert int(row["connected"]) >= BOARDS
    # Two threads a board (loop, policy slot) and the host's own few.
    assert 2 * BOARDS <= int(row["threads"]) <= 2 * BOARDS + 16
    # A board that wakes only for its status (1 s) and the net loop's keep-alive tick: a
    # few a second each; a turn of 0.1 s would be 10 a board on its own.
    assert 0 < float(row["wakes/s"].replace(",", "")) < 8 * BOARDS
    assert 0 <= float(row["cpu %"]) < 100
