"""A board with a scripted teacher and a real learner over the in-memory transport: the
teacher's steps are flagged on the wire, counted in the board's status, copied into the
learner's demonstration buffer, mixed into its batches and saved with its checkpoint.
Each figure is checked against an independent count: the teacher's schedule."""

from __future__ import annotations

import dataclasses
import json
import threading

import minari
import numpy as np
import yaml
from click.testing import CliRunner

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig
from edge_rl.cli.main import main
from edge_rl.learner.checkpoint import Checkpoint, header_for
from edge_rl.learner.node import LearnerNode
from edge_rl.transport.memory import MemoryBroker
from tests.harness.cartpole_policies import MODELS
from tests.harness.configs import small_cartpole
from tests.harness.waits import bound, wait_for

EVERY, FOR = 50, 5  # the teacher takes 5 steps of every 50: a 10 % share


def test_a_teachers_steps_become_demonstrations(tmp_path, monkeypatch):
    cfg = small_cartpole(
        "teleop",
        total_env_steps=1_200,
        learning_starts=200,
        max_lag_transitions=300,
        hidden=(16, 16),
        eval_episodes=1,
    )
    board = BoardConfig(
        board="test-board",
        batch_size=16,
        flush_interval_s=0.05,
        status_interval_s=0.1,
        teleop="edge_rl.actor.teleop:scripted_teacher",
        teleop_args={"model": str(MODELS["good"]), "every_steps": EVERY, "for_steps": FOR},
    )
    broker = MemoryBroker()
    sampled: list[np.ndarray] = []
    try:
        learner = LearnerNode(cfg, broker.connect, tmp_path / "run")
        key = tmp_path / "run" / "signing.pub"
        learner.signer.write_public(key)
        sample = learner.mixer.sample

        def watched(n: int):  # what the trainer drew: rewards say nothing, so the rows' obs
            batch = sample(n)
            sampled.append(batch.obs)
            return batch

        learner.mixer.sample = watched
        opts = ActorOptions("a0", cfg.env_id, broker.url, run=cfg.run, seed=3, policy_key=str(key))
        actor = ActorNode(board, opts, connect=broker.connect)
        thread = threading.Thread(target=actor.run, name="actor", daemon=True)
        thread.start()
        summary = learner.run()
        wait_for(lambda: actor.rc.state == "serving", bound(10), "the board serving", 0.01)
        actor.stop()
        thread.join(bound(10))
    finally:
        broker.close()

    steps = summary["env_steps"]
    acted = sum(t % EVERY < FOR for t in range(steps))  # the teacher's schedule
    assert steps == cfg.total_env_steps and acted == 120
    assert summary["actors"]["a0"]["interventions"] == acted  # the board's own count
    assert summary["actors"]["a0"]["intervention_rate"] == 0.1 == summary["intervention_rate"]
    assert learner.replay.interventions() == acted  # flagged on the wire, row by row
    assert summary["demonstrations"] == {
        "rows": acted,
        "added": acted,
        "intervention_rows": acted,
        "online_ratio": 0.5,
        "pretrain_updates": 0,
        "pretrain_seconds": 0.0,
    }
    demo = learner.mixer.demos.rows()
    online = learner.replay.rows()
    np.testing.assert_array_equal(demo.obs, online.obs[online.intervention])
    np.testing.assert_array_equal(demo.action, online.action[online.intervention])
    # Batches drew from the demonstrations: about half of each batch's rows are theirs.
    demo_obs = {o.tobytes() for o in demo.obs}
    drawn = np.concatenate(sampled)
    share = np.mean([o.tobytes() in demo_obs for o in drawn])
    assert summary["updates"] > 0 and 0.4 < share < 0.6, share
    # The finished checkpoint holds the demonstration buffer.
    saved = Checkpoint(learner.run_dir, header_for(cfg, learner.run_id)).load()
    assert saved.parts["demos"].arrays["intervention"].sum() == acted

    # `edge-rl record --from replay`: the board's steps from that checkpoint, as Minari
    # episodes, the teacher's steps marked. (config.yaml as `edge-rl learn` writes it.)
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    plain = json.loads(json.dumps(dataclasses.asdict(cfg)))
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump(plain))
    argv = ["record", str(tmp_path / "run"), "--dataset", "edge-rl/cartpole/teleop-v0"]
    result = CliRunner().invoke(main, [*argv, "--from", "replay", "--board", "a0"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["interventions"] == acted
    ds = minari.load_dataset("edge-rl/cartpole/teleop-v0")
    assert ds.total_steps == steps
    flags = np.concatenate([ep.infos["intervention"][1:] for ep in ds.iterate_episodes()])
    assert flags.tolist() == [t % EVERY < FOR for t in range(steps)]  # step by step
