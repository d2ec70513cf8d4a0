"""benchmarks/attacks.py at a tiny budget, the attacked arm only: the outlying board is
quarantined, none of its rows is left in replay, and the run reaches its budget (the clean
arm and the deployed returns side by side take minutes: docs/security.md)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness.paths import REPO


@pytest.mark.slow
@pytest.mark.bench
@pytest.mark.timeout(700)
def test_attacks_outlier_arm(tmp_path, mosquitto_available):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "attacks.py"),
            "--seeds",
            "1",
            "--steps",
            "4000",
            "--arms",
            "outlier",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("|")]
    (row,) = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    seed, arm, steps, ret, rows, quarantined, _wall = row
    assert (seed, arm, steps) == ("1", "outlier", "4,000")
    # At 4,000 steps the outlier (200-step episodes, a quarter of the credit at most) may
    # not finish the 5 episodes the rule needs before the budget: the table must say
    # which. Detection itself: tests/e2e/security/test_quarantine_run.py.
    left = int(rows.replace(",", ""))
    if quarantined.startswith("at "):
        assert left == 0  # every row of a quarantined board evicted
    else:
        assert quarantined == "-" and 0 < left < 4_000  # a share of the run, not all of it
    assert float(ret.split(" ± ")[0]) >= 0
