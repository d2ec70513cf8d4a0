"""``run_learner``, the learner process's wiring, called in this process: no click, no
subprocess for the learner (its embedded Mosquitto and simulated actors are processes)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from edge_rl.config import load_run_config
from edge_rl.learner.run import LearnOptions, run_learner
from tests.harness.lite import lite_outputs
from tests.harness.paths import REPO

ROOT = REPO
# A ~30 s CartPole run: small networks, gates that always pass (conftest.py's TINY).
TINY = {
    "fleet.actors": 2,
    "fleet.board": "rpi5",
    "total_env_steps": 1200,
    "learning_starts": 400,
    "export.every_updates": 100,
    "select_every": 2,
    "select_episodes": 1,
    "eval_episodes": 2,
    "export.calibration_size": 50,
    "export.parity_size": 50,
    "replay_capacity": 5000,
    "dqn.hidden": [32, 32],
    "export.min_greedy_agreement": 0,
    "run": "in-process",
}


@pytest.mark.slow
def test_run_learner_in_process_on_an_embedded_mosquitto(tmp_path, mosquitto_available, caplog):
    caplog.set_level(logging.INFO, logger="edge_rl.learner.outbound.packager")
    cfg = load_run_config(ROOT / "examples" / "cartpole_dqn.yaml", TINY)
    run = tmp_path / "run"
    options = LearnOptions(embedded_broker="mosquitto", live_view=False)
    summary = run_learner(cfg, run, options)
    assert summary["env_steps"] >= 1200 and summary["policy_version"] >= 1
    assert summary["final_eval_return"] is not None and summary["eval_episodes"] == 2
    assert set(summary["actors"]) == {"sim-00", "sim-01"}
    assert json.loads((run / "summary.json").read_text()) == json.loads(json.dumps(summary))
    # What a later `edge-rl learn --resume` and the fleet need, in the run directory.
    assert load_run_config(run / "config.yaml") == cfg
    assert (run / "signing.pub").exists() and (run / "policy.tflite").exists()
    # The boards' model returns Q less its mean over actions (agents/dqn/adapter.py): the
    # two outputs cancel to within int8 rounding (~1 % of their range), where Q-values
    # would add up to twice their size.
    q = lite_outputs(run / "policy.tflite", np.random.default_rng(0).normal(size=(64, 4)))
    assert np.abs(q.sum(axis=1)).max() <= 0.05 * np.abs(q).max() + 1e-6, q[:4]
    assert list(run.glob("mosquitto-*.log")) and (run / "fleet" / "sim-01.log").exists()
    # The export template is converted while the learner sets up, not by the first export.
    assert "export: template made at set-up" in caplog.text
