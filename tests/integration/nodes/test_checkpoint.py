"""Durable runs in one process: the checkpoint's round trip (the next update after a
restore is the update the run would have taken), its clear errors, its atomic write, and
an interrupted in-memory run resumed to its budget. The kill -9 of a real `edge-rl learn`
is in tests/e2e/test_resume_cli.py."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from edge_rl.agents.algo import learner_arrays
from edge_rl.agents.td3.config import TD3Config
from edge_rl.compress.config import CompressionConfig
from edge_rl.learner.checkpoint import Checkpoint, CheckpointError
from edge_rl.learner.node import LearnerNode
from edge_rl.learner.run_dir import RunDir
from edge_rl.transport.memory import MemoryBroker
from tests.harness.waits import bound, until

sys.path.insert(0, str(Path(__file__).parent))  # its neighbour's config and in-memory run
from test_nodes_in_memory import run_config, run_in_memory  # noqa: E402


def td3_config(run: str):
    return run_config(
        run,
        env_id="Pendulum-v1",
        algo="td3",
        td3=TD3Config(
            actor_hidden=(16, 16), critic_hidden=(16, 16), batch_size=32, updates_per_call=1
        ),
    )


def gst_config(run: str):
    """GST on the DQN: block-circulant for the first ~60 updates, then pruned every 10."""
    return run_config(run, compression=CompressionConfig(method="gst", prune_every=10))


def node_with_data(cfg, run_dir, updates: int = 7) -> LearnerNode:
    """A learner (not running) whose replay holds 500 transitions and that took updates."""
    node = LearnerNode(cfg, MemoryBroker().connect, run_dir)
    rng = np.random.default_rng(5)
    spec, n = node.spec, 500
    obs = rng.normal(size=(n, *spec.obs_shape)).astype(np.float32)
    if spec.discrete:
        action = rng.integers(0, spec.num_actions, n)
    else:
        action = rng.uniform(-1, 1, (n, *spec.action_shape)).astype(np.float32)
    reward = rng.normal(size=n).astype(np.float32)
    done = (rng.random(n) < 0.1).astype(np.float32)
    node.replay.add(obs, action, reward, obs[::-1].copy(), done)
    counted = node.ingest.state()
    counted["stats"]["transitions"] = n
    counted["stats"]["by_actor"] = {
        "pi-01": n,  # a real board: counts from zero on resume too
        "sim-00": 7,  # the simulated fleet restarts with the learner
    }
    node.ingest.load_state(counted)
    for _ in range(updates):
        node.algo.update(node.replay.sample(node.algo.batch_size))
    return node


@pytest.mark.parametrize(
    ("make_cfg", "updates"),
    [
        (lambda: run_config("ck-dqn"), 7),
        (lambda: td3_config("ck-td3"), 7),
        (lambda: gst_config("ck-gst"), 75),
    ],
    ids=["dqn", "td3", "dqn-gst-pruned"],
)
def test_the_next_update_after_a_restore_is_the_one_without_the_save(tmp_path, make_cfg, updates):
    cfg = make_cfg()
    cfg = dataclasses.replace(cfg, fleet=dataclasses.replace(cfg.fleet, actors=1))
    first = node_with_data(cfg, tmp_path / "run", updates)
    if first.algo.compressor is not None:  # past GST's transition: masks in force
        assert not first.algo.compressor.circulant and first.algo.compressor.mask_updates
    first.durable.save()
    assert (tmp_path / "run" / "checkpoint" / "header.json").exists()
    header = json.loads((tmp_path / "run" / "checkpoint" / "header.json").read_text())
    assert header["env_steps"] == 500 and header["updates"] == updates and header["identity"]

    second = LearnerNode(cfg, MemoryBroker().connect, tmp_path / "run", resume=True)
    second.durable.restore()
    assert second.algo.updates == updates and second.env_steps == 500
    assert len(second.replay) == 500
    assert second.ingest.stats().by_actor == {"pi-01": 500}  # sim-00 is a new process now
    before = learner_arrays(first.algo.learner)
    for name, value in learner_arrays(second.algo.learner).items():
        np.testing.assert_array_equal(value, before[name], err_msg=name)
    if first.algo.compressor is not None:
        a, b = first.algo.compressor, second.algo.compressor
        assert (b.step, b.mask_updates, b.circulant) == (a.step, a.mask_updates, a.circulant)
        assert b.summary() == a.summary()
    # The next updates: same minibatches (replay's rng), same optimiser slots and noise,
    # and for GST the same masks, re-imposed after each step (and the next prune, at 80).
    for _ in range(6):
        a, b = (
            first.algo.update(first.replay.sample(first.algo.batch_size)),
            second.algo.update(second.replay.sample(second.algo.batch_size)),
        )
        assert a == b
    after = learner_arrays(first.algo.learner)
    for name, value in learner_arrays(second.algo.learner).items():
        np.testing.assert_array_equal(value, after[name], err_msg=name)


def test_a_checkpoint_of_another_version_or_config_is_a_clear_error(tmp_path):
    cfg = run_config("ck-err")
    node = node_with_data(cfg, tmp_path / "run")
    node.durable.save()
    header_path = tmp_path / "run" / "checkpoint" / "header.json"
    header = json.loads(header_path.read_text())
    header_path.write_text(json.dumps({**header, "edge_rl_version": "0.0.1"}))
    other = LearnerNode(cfg, MemoryBroker().connect, tmp_path / "run", resume=True)
    with pytest.raises(CheckpointError, match=r"edge-rl version '0\.0\.1'.*'0\.1\.0'"):
        other.durable.restore()
    header_path.write_text(json.dumps({**header, "format": 1}))  # the layout of one state
    other = LearnerNode(cfg, MemoryBroker().connect, tmp_path / "run", resume=True)
    with pytest.raises(CheckpointError, match=r"layout format 1.*reads format 2 only"):
        other.durable.restore()
    header_path.write_text(json.dumps(header))
    changed = dataclasses.replace(cfg, replay_ratio=0.5)
    other = LearnerNode(changed, MemoryBroker().connect, tmp_path / "run", resume=True)
    with pytest.raises(CheckpointError, match="config"):
        other.durable.restore()


def test_a_save_that_died_half_way_leaves_the_previous_checkpoint(tmp_path):
    cfg = run_config("ck-atomic")
    node = node_with_data(cfg, tmp_path / "run")
    node.durable.save()
    ck = Checkpoint(RunDir(tmp_path / "run"), node.durable.checkpoint.header)
    # Killed between the two renames: only checkpoint.old/ is complete.
    (tmp_path / "run" / "checkpoint").rename(tmp_path / "run" / "checkpoint.old")
    (tmp_path / "run" / "checkpoint.tmp").mkdir()  # and a half-written next one
    assert ck.load().header["env_steps"] == 500
    node.algo.update(node.replay.sample(node.algo.batch_size))
    node.durable.save()  # the next save completes and cleans up
    assert ck.load().header["updates"] == 8
    assert not (tmp_path / "run" / "checkpoint.old").exists()
    assert not (tmp_path / "run" / "checkpoint.tmp").exists()


def test_an_interrupted_run_resumes_to_its_budget_and_versions_go_on(tmp_path):
    cfg = run_config("ck-resume", total_env_steps=1_600)

    def stop_at_800(broker, learner):
        def watch():
            until(lambda: learner.env_steps >= 800, bound(120), step=0.01)
            learner.stop.event.set()  # what SIGTERM does (durable.StopRequest)

        threading.Thread(target=watch, daemon=True).start()

    first, _, _, _ = run_in_memory(tmp_path, cfg, before_run=stop_at_800)
    run = tmp_path / "run"
    assert first["interrupted"] is True and first["final_eval_return"] is None
    assert 800 <= first["env_steps"] < 1_600
    saved = json.loads((run / "checkpoint" / "header.json").read_text())
    assert saved["env_steps"] == first["env_steps"] and not saved["finished"]
    rows_before = (run / "metrics.csv").read_text().splitlines()
    versions_before = [json.loads(x)["policy_version"] for x in open(run / "publishes.jsonl")]

    (run / "summary.json").unlink()
    second, _, _, learner = run_in_memory(tmp_path, cfg, resume=True)
    assert second["interrupted"] is False and second["env_steps"] == 1_600
    assert second["resumed_from_env_steps"] == saved["env_steps"]
    assert second["run_id"] == first["run_id"] == saved["identity"]["run_id"]  # protocol §5
    assert second["updates"] >= saved["updates"]
    versions = [json.loads(x)["policy_version"] for x in open(run / "publishes.jsonl")]
    assert versions[: len(versions_before)] == versions_before
    assert len(versions) > len(versions_before)
    assert all(b > a for a, b in zip(versions, versions[1:], strict=False)), versions
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[: len(rows_before)] == rows_before and len(rows) > len(rows_before)
    assert json.loads((run / "checkpoint" / "header.json").read_text())["finished"] is True
    with pytest.raises(CheckpointError, match="finished"):
        LearnerNode(cfg, MemoryBroker().connect, run, resume=True).durable.restore()


def test_each_part_keeps_its_own_state_in_the_checkpoint(tmp_path):
    """One state entry per part of the node's map; a part missing from a checkpoint, or
    one whose state is not its own, is a clear error naming the part."""
    cfg = run_config("ck-parts")
    node = node_with_data(cfg, tmp_path / "run")
    node.durable.save()
    ck = tmp_path / "run" / "checkpoint"
    state = json.loads((ck / "state.json").read_text())
    assert set(state) == set(node.durable.parts) >= {"algo", "replay", "ingest", "broadcast"}
    assert state["exporter"] == {"last_updates": 0, "deferred": 0}
    assert state["replay"]["size"] == 500
    assert {f.name for f in ck.glob("*.npz")} == {"algo.npz", "replay.npz", "demos.npz"}
    del state["meter"]
    (ck / "state.json").write_text(json.dumps(state))
    other = LearnerNode(cfg, MemoryBroker().connect, tmp_path / "run", resume=True)
    with pytest.raises(CheckpointError, match="no state of meter"):
        other.durable.restore()
    state["meter"] = {"wall": 1.0}
    (ck / "state.json").write_text(json.dumps(state))
    with pytest.raises(CheckpointError, match="part 'meter'"):
        other.durable.restore()
