"""``edge-rl learn --demos``: a dataset ``edge-rl record`` wrote, in a real run's
demonstration buffer, mixed into its batches (issue 35's done-when)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from edge_rl.learner.datasets import Episode, write_dataset
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
        "pretrain_updates": 0,
        "pretrain_seconds": 0.0,
    }
    assert summary["env_steps"] == 1200  # a dataset is not the fleet's budget
    assert summary["updates"] > 0


def _pendulum_episodes(n: int, steps: int, seed: int) -> list[Episode]:
    """``n`` Pendulum episodes of ``steps`` random actions, stepped in the real env."""
    import gymnasium as gym

    env, rng, episodes = gym.make("Pendulum-v1"), np.random.default_rng(seed), []
    for i in range(n):
        obs, _ = env.reset(seed=seed + i)
        e = Episode(observations=[obs])
        for t in range(steps):
            action = rng.uniform(-2, 2, size=1).astype(np.float32)
            obs, reward, terminated, _, _ = env.step(action)
            e.observations.append(obs)
            e.actions.append(action)
            e.rewards.append(float(reward))
            e.terminations.append(bool(terminated))
            e.truncations.append(t == steps - 1)
            e.interventions.append(False)
        episodes.append(e)
    return episodes


@pytest.mark.slow
def test_a_pretrained_run_publishes_before_the_fleet_steps(tmp_path, monkeypatch, cli, tiny_learn):
    """``replay.pretrain_updates``: those updates on the dataset alone, v1 exported from
    them before any fleet step, and the fleet's transitions still paying for every online
    update of the replay ratio after them."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    write_dataset("edge-rl/pendulum/random-v0", _pendulum_episodes(3, 100, 0), "Pendulum-v1")
    run = tmp_path / "run"
    argv = ["learn", "--config", "examples/pendulum_td3.yaml", "--out", str(run)]
    pretrain = ["--set", "replay.pretrain_updates=300", "--demos", "edge-rl/pendulum/random-v0"]
    proc = cli(*argv, *tiny_learn("td3"), *pretrain)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    demos = summary["demonstrations"]
    assert (demos["rows"], demos["pretrain_updates"]) == (300, 300)
    assert summary["env_steps"] == 1200
    # The head start does not pay for online updates: 1.0 x (1,200 - 400) after it.
    assert summary["updates"] == 300 + 800
    first = json.loads((run / "publishes.jsonl").read_text().splitlines()[0])
    assert (first["policy_version"], first["learner_step"], first["env_steps"]) == (1, 300, 0)


def test_pretraining_without_a_dataset_is_refused_before_the_run(tmp_path, cli):
    run = tmp_path / "run"
    argv = ["learn", "--config", "examples/pendulum_td3.yaml", "--out", str(run)]
    proc = cli(*argv, "--set", "replay.pretrain_updates=300", timeout=60)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "replay.pretrain_updates needs demos:" in proc.stderr
    assert "Traceback" not in proc.stderr and not (run / "config.yaml").exists()
