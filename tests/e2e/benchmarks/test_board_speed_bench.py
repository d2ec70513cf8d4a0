"""benchmarks/board_speed.py's actor-alone table at a tiny budget: the rpi4 file and a copy
without emulation add no sleep, --emulate does (the learner arms are not run here: three
learner runs take minutes)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness.paths import REPO


@pytest.mark.slow
@pytest.mark.bench
def test_board_speed_actor_alone(tmp_path, mosquitto_available):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "board_speed.py"),
            "--rounds",
            "0",
            "--alone-rounds",
            "1",
            "--steps",
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("|")]
    rows = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells
    assert set(rows) == {"rpi4", "no emulation", "rpi4 --emulate"}
    assert rows["rpi4"][2] == rows["no emulation"][2] == "0.00"  # emulation seconds
    assert float(rows["rpi4 --emulate"][2]) > 0
