"""``edge-rl learn --demos``: a dataset ``edge-rl record`` wrote, in a real run's
demonstration buffer, mixed into its batches (issue 35's done-when)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.harness.cartpole_policies import MODELS


@pytest.mark.slow
def test_learn_trains_with_a_recorded_dataset(tmp_path, monkeypatch, cli, tiny_learn):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    (teacher / "config.yaml").write_text("env_id: CartPole-v1\n")
    shutil.copy(MODELS["good"], teacher / "policy.tflite")
    dataset = "edge-rl/cartpole/teacher-v0"
    proc = cli("record", str(teacher), "--dataset", dataset, "--steps", "600", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]

    run = tmp_path / "run"
    argv = ["learn", "--config", "examples/cartpole_dqn.yaml", "--out", str(run)]
    proc = cli(*argv, *tiny_learn("dqn"), "--demos", dataset)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["demonstrations"] == {
        "rows": 600,
        "added": 600,
        "intervention_rows": 0,
        "online_ratio": 0.5,
    }
    assert summary["env_steps"] == 1200  # a dataset is not the fleet's budget
    assert summary["updates"] > 0
