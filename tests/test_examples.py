"""Every example config runs end to end at a tiny budget (CleanRL-style smoke tests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

TINY = [
    "--fleet", "2", "--board", "rpi5",
    "--set", "total_env_steps=1200", "--set", "learning_starts=400",
    "--set", "export.every_updates=100", "--set", "select_every=2", "--set", "select_episodes=1",
    "--set", "eval_episodes=2", "--set", "export.calibration_size=50",
    "--set", "export.parity_size=50", "--set", "replay_capacity=5000",
]  # fmt: skip
SMALL_NETS = {
    "dqn": ["--set", "dqn.hidden=[32, 32]", "--set", "export.min_greedy_agreement=0"],
    "td3": ["--set", "td3.actor_hidden=[32, 32]", "--set", "td3.critic_hidden=[32, 32]",
            "--set", "td3.batch_size=64", "--set", "td3.updates_per_call=1",
            "--set", "export.max_action_error=2",
            "--set", "export.mean_action_error=2"],
}  # fmt: skip


def test_every_example_is_covered():
    assert {p.name for p in EXAMPLES} >= {"cartpole_dqn.yaml", "pendulum_td3.yaml"}


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_at_a_tiny_budget(example, tmp_path, mosquitto_available, cli):
    import yaml

    algo = yaml.safe_load(example.read_text())["algo"]
    run = tmp_path / "run"
    proc = cli(
        "learn", "--config", str(example), "--out", str(run), *TINY, *SMALL_NETS[algo],
        "--set", f"run=smoke-{example.stem}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["algo"] == algo and summary["env_steps"] >= 1200
    assert summary["policy_version"] >= 1 and summary["final_eval_return"] is not None
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["output_kind"] == ("q_values" if algo == "dqn" else "action")
    ev = cli("eval", str(run / "policy.tflite"), "--env", summary["env_id"], "--episodes", "2")
    assert ev.returncode == 0, ev.stderr[-2000:]
