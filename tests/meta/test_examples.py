"""Every example config runs end to end at a tiny budget (CleanRL-style smoke tests)."""

from __future__ import annotations

import json

import pytest

from tests.harness.paths import REPO

ROOT = REPO
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES} >= {"cartpole_dqn.yaml", "pendulum_td3.yaml"}


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_at_a_tiny_budget(example, tmp_path, mosquitto_available, cli, tiny_learn):
    import yaml

    algo = yaml.safe_load(example.read_text())["algo"]
    run = tmp_path / "run"
    proc = cli(
        "learn",
        "--config",
        str(example),
        "--out",
        str(run),
        *tiny_learn(algo),
        "--set",
        f"run=smoke-{example.stem}",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["algo"] == algo and summary["env_steps"] >= 1200
    assert summary["policy_version"] >= 1 and summary["final_eval_return"] is not None
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["output_kind"] == ("q_values" if algo == "dqn" else "action")
    ev = cli("eval", str(run / "policy.tflite"), "--env", summary["env_id"], "--episodes", "2")
    assert ev.returncode == 0, ev.stderr[-2000:]
