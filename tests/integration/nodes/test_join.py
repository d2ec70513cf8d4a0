"""Pull-on-join (learner/fleet/join.py, the actor's hello): a board gets its control, policy and
credit from the learner's answer on its own topics, and a learner that reconnects hears
from every board at once; nothing hangs on a retained message (a clustered broker's node
may not have it)."""

from __future__ import annotations

import json
import threading

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.config import FleetConfig
from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.fleet.join import JoinDesk
from edge_rl.learner.node import LearnerNode
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ControlMessage
from edge_rl.wire.messages import decode_control, decode_status, encode_control
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from tests.harness.waits import wait_for
from tests.integration.nodes.test_nodes_in_memory import (
    FAST_BOARD,
    RID,
    Recorder,
    run_config,
    status,
)

WAIT_S = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def desk(max_actors: int = 10) -> tuple[JoinDesk, Recorder, list[str], Topics, Clock]:
    cfg = run_config("join", fleet=FleetConfig(actors=0, max_actors=max_actors))
    topics = Topics(cfg.transport.root, cfg.run)
    sent = Recorder()
    fleet = FleetControl(cfg.fleet, cfg.pacing, topics, sent, lambda: (0, {}), RID)
    policies: list[str] = []

    def send_policy(topic: str) -> bool:
        policies.append(topic)
        return True

    clock = Clock()
    return (
        JoinDesk(topics, fleet, send_policy, max_actors, clock=clock),
        sent,
        policies,
        topics,
        clock,
    )


def test_a_hello_is_answered_on_the_boards_own_topics():
    join, sent, policies, topics, _ = desk()
    join.fleet.on_status(topics.status("a0"), status("a0", state="starting"))
    join.fleet.send("running", updates=0)  # a0 is known: it is granted credit
    grant = dict(sent.sent)[topics.credit("a0")]
    sent.sent.clear()

    join.on_hello(topics.actor_hello("a0"), status("a0", state="starting"))

    assert [t for t, _ in sent.sent] == [topics.welcome("a0"), topics.credit("a0")]
    assert decode_control(sent.sent[0][1]) == ControlMessage("running", RID, "")
    assert sent.sent[1][1] == grant  # its last grant again
    assert policies == [topics.welcome("a0")]  # the current policy, to a0 alone
    assert join.stats().hellos == 1


def test_a_newcomer_gets_the_control_and_the_policy_and_no_credit_yet():
    join, sent, policies, topics, _ = desk()
    join.fleet.send("running", updates=0)
    sent.sent.clear()
    join.on_hello(topics.actor_hello("new"), status("new", state="starting", run_id=""))
    assert [t for t, _ in sent.sent] == [topics.welcome("new")]
    assert policies == [topics.welcome("new")]


def test_bad_hellos_are_refused_and_counted():
    join, sent, policies, topics, _ = desk()
    join.fleet.send("running", updates=0)
    sent.sent.clear()
    join.on_hello(topics.actor_hello("a1"), status("a0"))  # a0 speaking on a1's topic
    join.on_hello(topics.actor_hello("a2"), b"not a status")
    join.on_hello(topics.actor_hello("a3"), b"")
    assert sent.sent == [] and policies == []
    assert join.stats().hellos_rejected == 3 and join.stats().hellos == 0


def test_hellos_in_a_loop_are_throttled_to_the_bucket_rate():
    join, _, policies, topics, clock = desk()
    join.fleet.send("running", updates=0)
    for _ in range(10):
        join.on_hello(topics.actor_hello("a0"), status("a0"))
    assert len(policies) == 4 and join.stats().hellos_throttled == 6  # the burst, no more
    clock.now += 1.0  # one token back
    join.on_hello(topics.actor_hello("a0"), status("a0"))
    join.on_hello(topics.actor_hello("a0"), status("a0"))
    assert len(policies) == 5 and join.stats().hellos_throttled == 7
    join.on_hello(topics.actor_hello("a1"), status("a1"))  # another board: its own bucket
    assert len(policies) == 6


def test_invented_ids_do_not_grow_the_desk():
    join, _, policies, topics, clock = desk(max_actors=2)  # 4 buckets
    for i in range(6):
        join.on_hello(topics.actor_hello(f"x{i}"), status(f"x{i}"))
    assert len(policies) == 4 and join.stats().hellos_rejected == 2
    clock.now += 10.0  # every bucket refilled: forgotten, room again
    join.on_hello(topics.actor_hello("x5"), status("x5"))
    assert len(policies) == 5


def test_the_learner_hello_carries_its_control_once_it_has_one():
    join, sent, _, topics, _ = desk()
    join.hello()
    assert sent.sent == [] and join.stats().learner_hellos == 0
    join.fleet.send("running", updates=0)
    sent.sent.clear()
    join.hello()
    assert [t for t, _ in sent.sent] == [topics.hello]
    assert decode_control(sent.sent[0][1]).state == "running"
    assert join.stats().learner_hellos == 1


def test_a_board_answers_the_learner_hello_with_its_status_at_once(tmp_path):
    cfg = run_config("join-board")
    topics = Topics(cfg.transport.root, cfg.run)
    Signer.load_or_create(tmp_path / "k").write_public(tmp_path / "k.pub")
    broker = MemoryBroker(keeps_retained=False)
    try:
        opts = ActorOptions(
            "b0", cfg.env_id, broker.url, run=cfg.run, policy_key=str(tmp_path / "k.pub")
        )
        actor = ActorNode(FAST_BOARD, opts, connect=broker.connect)
        actor.transport.start()
        assert actor.transport.wait_connected(WAIT_S) and broker.wait_idle(WAIT_S)
        # on connecting: a status, and a hello to the learner
        first = [t for t, _, _ in broker.published]
        assert first == [topics.status("b0"), topics.actor_hello("b0")]
        learner = broker.connect("learner", subscriptions=[(topics.all_status, 1)])
        learner.start()
        assert learner.wait_connected(WAIT_S)
        broker.published.clear()
        learner.publish(topics.hello, encode_control(ControlMessage("running", "r9", "")))
        assert broker.wait_idle(WAIT_S) and broker.wait_idle(WAIT_S)
        said = [decode_status(p) for t, p, _ in broker.published if t == topics.status("b0")]
        assert len(said) == 1 and said[0].actor_id == "b0"
        assert actor.rc.run_id == "r9" or actor.rc.take_join() == "r9"  # the hello's control
    finally:
        broker.close()


def test_a_board_that_joins_late_on_a_node_without_retained_messages_trains(tmp_path):
    """Every retained message goes to the subscribers of the moment only: the board that
    connects after the learner's control, policy and grants learns them from its welcome,
    and the run reaches its budget from it alone."""
    cfg = run_config("join-late")
    broker = MemoryBroker(keeps_retained=False)
    try:
        learner = LearnerNode(cfg, broker.connect, tmp_path / "run")
        public_key = tmp_path / "run" / "signing.pub"
        learner.signer.write_public(public_key)
        result: dict = {}
        runner = threading.Thread(target=lambda: result.update(learner.run()), daemon=True)
        runner.start()
        control = Topics(cfg.transport.root, cfg.run).control
        wait_for(  # the learner's start: TensorFlow on a busy machine
            lambda: any(t == control for t, _, _ in list(broker.published)),
            300,
            "the learner's control",
        )
        assert broker.wait_idle(WAIT_S)  # the learner's control is out, to no one
        opts = ActorOptions(
            "a0", cfg.env_id, broker.url, run=cfg.run, seed=3, policy_key=str(public_key)
        )
        actor = ActorNode(FAST_BOARD, opts, connect=broker.connect)
        thread = threading.Thread(target=actor.run, name="actor", daemon=True)
        thread.start()
        runner.join(600)
        assert not runner.is_alive(), "the run did not end"
        # The final control, live.
        wait_for(lambda: actor.rc.state == "serving", WAIT_S, "the board serving", 0.01)
        actor.stop()
        thread.join(WAIT_S)
    finally:
        broker.close()
    summary = result
    assert summary["env_steps"] >= cfg.total_env_steps
    assert actor.transitions_sent == summary["transitions_received"] == len(learner.replay)
    assert summary["batches_missing"] == 0 and summary["transitions_rejected"] == 0
    assert learner.join.stats().hellos >= 1  # what it joined with came from its welcome
    written = json.loads((tmp_path / "run" / "summary.json").read_text())
    joined = learner.join.stats()
    assert written["hellos_answered"] == summary["hellos_answered"] == joined.hellos
    assert written["learner_hellos"] == joined.learner_hellos
    assert written["hellos_throttled"] == joined.hellos_throttled
    assert written["hellos_rejected"] == joined.hellos_rejected == 0
    assert broker.retained == {}
    assert actor.slot.version == summary["policy_version"] >= 2
