"""The whole loop against a real Mosquitto: a learner and two real actor processes.

Checks what the issue asks of the backbone: actors report the new policy version, every
transition sent is received exactly once into replay, and a malformed payload from a plain
MQTT client is rejected and counted while training goes on.

The attack cannot race the fleet's end: it runs inside the learner's 10th update, which
waits (bounded) until the learner has counted every bad batch and every actor the bad
control message. Until that update returns no credit is granted, so the actors stop far
short of the budget (credit = learning_starts + max_lag + updates / replay_ratio).
"""

from __future__ import annotations

import json
import threading
import uuid

import numpy as np
import pytest

from edge_rl.config import RunConfig
from edge_rl.learner.node import LearnerNode
from edge_rl.sim.fleet import Fleet
from edge_rl.transport.mqtt import mqtt_connect
from edge_rl.types import TransitionBatch
from edge_rl.wire.envelope import MAGIC_CONTROL, MAGIC_TRANSITIONS
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions
from tests.harness.configs import small_cartpole

pytestmark = pytest.mark.slow


def tiny_config(run: str) -> RunConfig:
    # One step per call: the attack fires in the call that starts at update 10.
    return small_cartpole(
        run, dqn={"updates_per_call": 1}, eval_episodes=10, select_every=2, select_episodes=2
    )


ATTACK_AT_UPDATE = 10
ACTORS = ("sim-00", "sim-01")


def attack(client, topics: Topics, node, log: dict, wait_for) -> None:
    """Publish malformed payloads with a plain MQTT client, and wait until each is counted:
    the bad batches by the learner's ingest thread, the bad control by every actor."""
    nan_batch = TransitionBatch(
        "evil",
        1,
        0,
        0,
        np.full((2, 4), np.nan, np.float32),
        np.zeros(2, np.int64),
        np.zeros(2, np.float32),
        np.zeros((2, 4), np.float32),
        np.zeros(2, bool),
        np.zeros(2, bool),
    )
    payloads = {
        "bad_magic": b"this is not a transition batch",
        "non_finite": encode_transitions(nan_batch),
        "bad_version": MAGIC_TRANSITIONS + b"\x07\x00" + b"\0" * 20,
    }
    log["updates"], log["env_steps"] = node.algo.updates, node.env_steps
    for reason, payload in payloads.items():
        client.publish(topics.transitions("evil"), payload, qos=1).wait_for_publish(5)
        log["sent"].append(reason)
    log["batches_counted"] = wait_for(
        lambda: all(node.ingest.stats().rejected[r] == 1 for r in payloads), 30
    )
    # Not retained: the learner's own control message stays in force.
    bad = MAGIC_CONTROL + b"\x01\x00 not a header"
    client.publish(topics.control, bad, qos=1).wait_for_publish(5)
    log["sent"].append("bad_control")
    log["control_counted"] = wait_for(  # from the actors' status messages (every 0.2 s)
        lambda: all(
            a in (seen := node.fleet.actors()) and seen[a].control_rejected == 1 for a in ACTORS
        ),
        30,
    )


def test_learner_and_two_actor_processes(
    mosquitto, mqtt_client_factory, tmp_path, policy_keys, fast_board, wait_for
):
    cfg = tiny_config(f"it-{uuid.uuid4().hex[:8]}")
    topics = Topics(cfg.transport.root, cfg.run)
    board = fast_board
    signer, public_key = policy_keys
    fleet = Fleet(
        2,
        board,
        mosquitto.url,
        cfg.env_id,
        policy_key=public_key,
        run=cfg.run,
        log_dir=tmp_path / "fleet",
    )
    node = LearnerNode(
        cfg, mqtt_connect(mosquitto.url), tmp_path / "run", signer=signer, fleet_alive=fleet.alive
    )
    # Record which thread each export runs on: training must not wait for conversion.
    export_threads: list[str] = []
    real_export = node.packager.export

    def recording_export(*args, **kwargs):
        export_threads.append(threading.current_thread().name)
        return real_export(*args, **kwargs)

    node.packager.export = recording_export
    # The attack, inside the learner's 10th update (on its main thread): training is under
    # way, and nothing more is granted to the actors until it is counted.
    evil = mqtt_client_factory(mosquitto)
    attacked: dict = {"sent": []}
    real_update = node.algo.update

    def update_then_attack(*args, **kwargs):
        if node.algo.updates == ATTACK_AT_UPDATE:
            attack(evil, topics, node, attacked, wait_for)
        return real_update(*args, **kwargs)

    node.algo.update = update_then_attack
    with fleet:
        summary = node.run()
        assert not fleet.wait(2), "actors exited on the learner's end: they should serve"
    assert fleet.exit_codes() == [0, 0]  # SIGTERM as the fleet stops: a clean exit

    # Training happened and policies went out; each actor ran a published policy.
    assert summary["updates"] >= 0.25 * (summary["env_steps"] - 300) - 1
    assert summary["policy_version"] >= 2
    actors = summary["actors"]
    assert set(actors) == set(ACTORS)
    assert all(a["state"] == "serving" and a["policy_version"] >= 1 for a in actors.values())

    # Exports during the run happen on the exporter thread; only the final one waits.
    assert export_threads[-1] == threading.main_thread().name
    assert any(t.startswith("exporter") for t in export_threads[:-1]), export_threads

    # Exactly once: what the actors sent is what went into replay, no gaps, no duplicates.
    sent_total = sum(a["transitions_sent"] for a in actors.values())
    assert sent_total == summary["transitions_received"] == len(node.replay)
    assert summary["batches_missing"] == 0
    assert sent_total >= cfg.total_env_steps

    # Malformed payloads: rejected, counted by reason, never in replay, training went on.
    sent = attacked["sent"]
    assert sent == ["bad_magic", "non_finite", "bad_version", "bad_control"], attacked
    assert attacked["batches_counted"] and attacked["control_counted"], attacked
    assert attacked["updates"] == ATTACK_AT_UPDATE
    assert attacked["env_steps"] < cfg.total_env_steps  # mid-run, not after the budget
    assert summary["updates"] > ATTACK_AT_UPDATE and summary["env_steps"] > attacked["env_steps"]
    for reason in sent[:-1]:
        assert summary["batches_rejected"].get(reason) == 1, summary["batches_rejected"]
    # ... and a malformed control message is ignored and counted by every actor.
    assert [a["control_rejected"] for a in actors.values()] == [1, 1], actors
    assert summary["transitions_rejected"] >= 2  # the NaN batch declared 2 transitions

    # Model selection: what is deployed at the end is the best-scoring policy seen.
    scores = {int(v): r for v, r in summary["selection_scores"].items()}
    assert len(scores) >= 2  # several scored during the run, and the last one
    assert scores[summary["deployed_weights_of_version"]] == max(scores.values())

    # The run directory a user gets.
    run = tmp_path / "run"
    for name in ("summary.json", "policy.tflite", "manifest.json", "metrics.csv"):
        assert (run / name).stat().st_size > 0, name
    assert any((run / "tb").iterdir())
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["policy_version"] == summary["policy_version"]
    assert manifest["precision"] == "int8" and manifest["input_quant"]["dtype"] == "float32"
    assert summary["eval_episodes"] == 10 and summary["final_eval_return"] > 0
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("wall_s,env_steps") and len(rows) >= 3

    # Flow control: env-step credit keeps the data within max_lag of what the updates have
    # paid for at the replay ratio, and the run exactly within its budget.
    assert summary["env_steps"] == cfg.total_env_steps
    import csv

    for row in csv.DictReader(rows):
        paid = cfg.learning_starts + cfg.max_lag_transitions + int(row["updates"]) / 0.25
        assert int(row["env_steps"]) <= paid, row
