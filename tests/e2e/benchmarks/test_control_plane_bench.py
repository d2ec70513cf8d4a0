"""benchmarks/control_plane.py at a small fleet: both arms' rows, every board connected and
every policy loaded (no number asserted but what must hold at any speed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness.paths import REPO


@pytest.mark.slow
@pytest.mark.bench
def test_control_plane_table_for_a_small_fleet(tmp_path, mosquitto_available):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "control_plane.py"),
            "--boards",
            "4",
            "--per-proc",
            "2",
            "--window",
            "1",
            "--out",
            str(tmp_path / "table.md"),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [x for x in (tmp_path / "table.md").read_text().splitlines() if x.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        rows[cells["arm"]] = cells
    assert set(rows) == {"before", "after"}
    for cells in rows.values():
        assert cells["boards"] == "4" and cells["procs"] == "2"
        # Every board connected and loaded both policies ("-" where one did not).
        for col in ("connect s", "int8 p50 s", "int8 p99 s", "gst p50 s", "gst p99 s"):
            assert cells[col] != "-", (col, cells)
        assert float(cells["MB/board"]) > 0 and float(cells["tr/s"]) > 0
    assert rows["before"]["spread s"] == "0" and float(rows["after"]["spread s"]) > 0
