"""An adversary against a real run: Mosquitto with the run's ACL, a learner, two actor
processes, and an attacker that holds a board's own credentials (a compromised board) and
tries every topic, plus an anonymous client.

What must hold, each checked from counters other than the attacked component's own:
* the learner and both actors are alive to the end, and the run reaches its budget;
* replay holds only the honest actors' transitions (what they report sent, once);
* no actor ever acts on a policy the learner did not sign (every transition the learner
  receives carries a version it published, and the actors report the learner's versions);
* every attack is refused where the design says: by the broker (ACL, anonymous connect),
  by the learner's ingest or status checks, or by the actors.

The attack runs inside the learner's 10th update and waits, bounded, until the learner
has counted what it sent, so it cannot race the end of the run.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import paho.mqtt.client as mqtt
import pytest

from edge_rl.broker.config import BrokerAccounts
from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.config import RunConfig
from edge_rl.learner.node import LearnerNode
from edge_rl.specs import EnvSpec
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.types import (
    ActorStatus,
    ControlMessage,
    CreditGrant,
    PolicyBundle,
    TransitionBatch,
)
from edge_rl.wire.envelope import MAGIC_STATUS, MAGIC_TRANSITIONS, SCHEMA_VERSION
from edge_rl.wire.messages import encode_control, encode_credit, encode_status
from edge_rl.wire.policy import encode_policy
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import decode_transitions, encode_transitions
from tests.harness.cartpole_policies import cartpole_manifest
from tests.harness.configs import small_cartpole
from tests.harness.runs import fleet_and_learner

pytestmark = pytest.mark.slow

HONEST = ("sim-00", "sim-01")
INTRUDER = "intruder"  # a board with valid credentials of its own, gone bad
ATTACK_AT_UPDATE = 10
CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)


def config(run: str) -> RunConfig:
    # One step per call: the attack fires in the call that starts at update 10.
    return small_cartpole(run, dqn={"updates_per_call": 1}, eval_episodes=5, select_every=0)


def batch(actor: str, seq: int, run_id: str, *, reward: float = 1.0, version: int = 0, n=4):
    """A batch for the run start ``run_id`` (the intruder reads it off the control topic)."""
    obs = np.zeros((n, 4), np.float32)
    return TransitionBatch(
        actor,
        7,
        seq,
        version,
        obs,
        np.zeros(n, np.int64),
        np.full(n, reward, np.float32),
        obs,
        np.zeros(n, bool),
        np.zeros(n, bool),
        run_id=run_id,
    )


def forged_policy(run: str, run_id: str) -> bytes:
    """A well-formed bundle with a huge version, signed by the attacker's own key."""
    model = b"\0" * 64
    m = cartpole_manifest(model, version=10**6, epsilon=1.0, codec="none", run=run, run_id=run_id)
    return encode_policy(PolicyBundle(m, model), Signer.generate())


def nested_header(depth: int = 5_000) -> bytes:  # 10 KB: under the 64 KB header cap
    h = b"[" * depth + b"]" * depth
    version = SCHEMA_VERSION.to_bytes(2, "little")
    return MAGIC_TRANSITIONS + version + len(h).to_bytes(4, "little") + h


def anonymous_refused(broker: EmbeddedBroker, wait_for) -> bool:
    codes: list = []
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    c.on_connect = lambda cl, u, f, rc, p: codes.append(rc)
    c.connect(broker.host, broker.port)
    c.loop_start()
    try:
        wait_for(lambda: codes, 10)
    finally:
        c.loop_stop()
        c.disconnect()
    return bool(codes) and codes[0].is_failure


def attack(evil: MqttTransport, topics: Topics, node: LearnerNode, log: dict, wait_for) -> None:
    """Everything the intruder's credentials let it send, and what they do not."""
    run, rid = topics.run, node.run_id
    sent = log["sent"]

    def send(topic: str, payload: bytes, what: str, retain: bool = False) -> None:
        assert evil.publish(topic, payload, retain=retain, wait=5), f"{what}: not sent"
        sent.append(what)

    # Outside its own namespace: the broker's ACL drops these (nobody receives them).
    send(topics.policy, forged_policy(run, rid), "forged policy", retain=True)
    send(topics.policy, b"ERLP\x01\x00garbage", "garbage policy", retain=True)
    send(topics.control, encode_control(ControlMessage("stopped", rid)), "forged stop", True)
    send(
        topics.transitions(HONEST[0]),
        encode_transitions(batch(HONEST[0], 0, rid)),
        "batch under an honest id",
    )
    # Credit: stop an honest actor (a grant that refuses every session it could have), or
    # grant itself or an honest actor the whole budget. Only the learner may write credit.
    honest_session = node.fleet.actors()[HONEST[0]].session  # (the test's knowledge)
    for actor in (HONEST[0], INTRUDER):
        forged = CreditGrant(rid, 0, 10**9, refused=(honest_session,))
        send(topics.credit(actor), encode_credit(forged), "forged credit", True)
    send(
        topics.status(HONEST[0]),
        encode_status(ActorStatus(HONEST[0], "stopped")),
        "status under an honest id",
        retain=True,
    )
    for i in range(200):  # invented actors: no topic of theirs is writable by the intruder
        send(
            topics.status(f"ghost-{i}"),
            encode_status(ActorStatus(f"ghost-{i}", "running")),
            "invented actor",
        )
    # Inside its own namespace: the learner's checks refuse these.
    mine = topics.transitions(INTRUDER)
    own = {
        "bad_magic": b"not a batch at all",
        "bad_version": MAGIC_TRANSITIONS + b"\x01\x00" + b"\0" * 20,
        "bad_header": nested_header(),
        "non_finite": encode_transitions(batch(INTRUDER, 0, rid, reward=float("nan"))),
        "out_of_bounds": encode_transitions(batch(INTRUDER, 1, rid, reward=3e38)),
        "unknown_policy": encode_transitions(batch(INTRUDER, 2, rid, version=10**6)),
        "wrong_run": encode_transitions(batch(INTRUDER, 3, "an-earlier-start")),
    }
    for reason, payload in own.items():
        send(mine, payload, reason)
    status = topics.status(INTRUDER)
    send(status, b"ERLS junk", "bad status")
    bad = json.dumps({"actor_id": INTRUDER, "state": "running", "env_steps": "a lot"}).encode()
    version = SCHEMA_VERSION.to_bytes(2, "little")
    send(status, MAGIC_STATUS + version + len(bad).to_bytes(4, "little") + bad, "mistyped status")
    log["ingest_counted"] = wait_for(
        lambda: all(node.ingest.stats().rejected[r] >= 1 for r in own), 30
    )
    log["status_counted"] = wait_for(lambda: node.fleet.stats().status_rejected >= 2, 30)
    log["attacked_at"] = node.env_steps


def test_an_adversary_with_a_boards_credentials_gets_nothing(
    tmp_path, policy_keys, fast_board, wait_for
):
    run = f"adv-{uuid.uuid4().hex[:8]}"
    cfg = config(run)
    topics = Topics(cfg.transport.root, run)
    accounts = BrokerAccounts(actors=(*HONEST, INTRUDER), root=cfg.transport.root, run=run)
    board = fast_board
    with EmbeddedBroker(kind="mosquitto", accounts=accounts, log_dir=tmp_path) as broker:
        assert broker.authenticated
        assert anonymous_refused(broker, wait_for)
        fleet, node = fleet_and_learner(cfg, broker, 2, board, policy_keys, tmp_path)
        evil = MqttTransport(broker.url, f"actor-{INTRUDER}", auth=broker.auth(INTRUDER))
        evil.start()
        assert evil.wait_connected(15)
        log: dict = {"sent": []}
        real_update = node.algo.update

        def update_then_attack(*args, **kwargs):
            if node.algo.updates == ATTACK_AT_UPDATE and not log["sent"]:
                attack(evil, topics, node, log, wait_for)
            return real_update(*args, **kwargs)

        node.algo.update = update_then_attack
        versions: list[int] = []  # every version a transition arrived with, and its actor
        real_handle = node.ingest.handle

        def recording_handle(topic, payload):
            accepted = real_handle(topic, payload)
            if accepted:
                versions.append(decode_transitions(payload, node.spec).policy_version)
            return accepted

        node.ingest.handle = recording_handle
        with fleet:
            summary = node.run()
            # The run is over: every actor serves its result (no control message ends a
            # board) until the fleet is stopped, and SIGTERM ends each one cleanly.
            assert all(c is None for c in fleet.exit_codes()), fleet.exit_codes()
            fleet.stop()
        evil.stop()
    codes = fleet.exit_codes()

    # Alive to the end, and the run finished: the forged "stopped" never reached anyone (an
    # actor it reached would report "stopped", not "serving").
    assert codes == [0, 0], codes
    assert all(a["state"] == "serving" for a in summary["actors"].values()), summary["actors"]
    assert summary["env_steps"] == cfg.total_env_steps
    assert log["attacked_at"] < cfg.total_env_steps and len(log["sent"]) == 7 + 200 + 7 + 2
    assert log["ingest_counted"] and log["status_counted"], log
    # Replay holds only what the honest actors sent (by their own count), once.
    actors = summary["actors"]
    assert set(actors) == set(HONEST), actors  # no ghost, no intruder (it never announced)
    sent_by_honest = sum(a["transitions_sent"] for a in actors.values())
    assert len(node.replay) == summary["transitions_received"] == cfg.total_env_steps
    assert sent_by_honest == cfg.total_env_steps + summary["transitions_over_budget"]
    assert node.ingest.stats().by_actor.keys() <= set(HONEST)
    # No actor acted on a policy the learner did not sign: every accepted transition carries
    # a version the learner published, and each actor reports one of those.
    lines = (tmp_path / "run" / "publishes.jsonl").read_text().splitlines()
    published = {json.loads(x)["policy_version"] for x in lines}
    assert set(versions) - {0} <= published
    assert all(a["policy_version"] in published for a in actors.values())
    assert all(a["policies_rejected"] == 0 for a in actors.values())  # the broker dropped them
    # Each refusal counted where it happened.
    for reason in (
        "bad_magic",
        "bad_version",
        "bad_header",
        "non_finite",
        "out_of_bounds",
        "unknown_policy",
        "wrong_run",
    ):
        assert summary["batches_rejected"].get(reason, 0) >= 1, summary["batches_rejected"]
    assert summary["status_rejected"] >= 2
