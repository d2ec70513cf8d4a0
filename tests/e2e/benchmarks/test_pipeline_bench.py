"""benchmarks/pipeline.py at a tiny budget: one run of the CartPole example quiet and one
next to the hog it starts, and the breakdown table of both (~1.5 min)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.harness.paths import REPO


@pytest.mark.slow
@pytest.mark.bench
def test_pipeline_table_quiet_and_busy(tmp_path, mosquitto_available):
    out = tmp_path / "pipeline"
    small = {
        "total_env_steps": "3000",
        "learning_starts": "500",
        "fleet.actors": "2",
        "dqn.hidden": "[32, 32]",
        "select_recheck": "0",
        "eval_episodes": "2",
    }
    cmd = [sys.executable, str(REPO / "benchmarks" / "pipeline.py"), "--out", str(out)]
    cmd += ["--timeout", "200"] + [x for k, v in small.items() for x in ("--set", f"{k}={v}")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=500, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [x for x in proc.stdout.splitlines() if x.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [
        dict(zip(header, (c.strip() for c in x.strip("|").split("|")), strict=True))
        for x in lines[2:]
    ]
    assert sorted(r["arm"] for r in rows) == ["busy", "quiet"]
    for r in rows:
        assert r["env steps"] == "3,000", r
        for share in ("exporter busy", "main idle", "main updates", "boards idle"):
            assert 0.0 <= float(r[share].rstrip("%")) <= 100.0, r
        assert float(r["main updates"].rstrip("%")) > 0  # the learner trained
        assert float(r["updates/s"]) > 0
