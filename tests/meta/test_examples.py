"""Every example config runs end to end at a tiny budget (CleanRL-style smoke tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness.paths import REPO
from tests.harness.shared_run import CONFIG as SHARED_CONFIG

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES} >= {"cartpole_dqn.yaml", "pendulum_td3.yaml"}


def _run_at_a_tiny_budget(example: Path, algo: str, tmp_path: Path, cli, tiny_learn) -> Path:
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
    return run


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_at_a_tiny_budget(example, request, tmp_path, cli, tiny_learn):
    import yaml

    algo = yaml.safe_load(example.read_text())["algo"]
    if example == SHARED_CONFIG:  # the session's shared run is this example's, at TINY's budget
        run = request.getfixturevalue("cartpole_run").run_dir
    else:
        request.getfixturevalue("mosquitto_available")
        run = _run_at_a_tiny_budget(example, algo, tmp_path, cli, tiny_learn)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["algo"] == algo and summary["env_steps"] >= 1200
    assert summary["policy_version"] >= 1 and summary["final_eval_return"] is not None
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["output_kind"] == ("q_values" if algo == "dqn" else "action")
    ev = cli("eval", str(run / "policy.tflite"), "--env", summary["env_id"], "--episodes", "2")
    assert ev.returncode == 0, ev.stderr[-2000:]
