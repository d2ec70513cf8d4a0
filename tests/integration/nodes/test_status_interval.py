"""A board keeps to the status interval the learner's control message states
(docs/protocol.md §5, *How often*): its own when that is longer, the learner's otherwise,
for periodic statuses and for the report of a newly loaded policy alike."""

from __future__ import annotations

import threading
import time
from typing import Any

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.actor.run_control import RunControl
from edge_rl.boards import BoardConfig
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ControlMessage
from edge_rl.wire.messages import decode_status, encode_control
from edge_rl.wire.topics import Topics
from tests.harness.waits import wait_for

RUN, RUN_ID = "every", "every-start"
TOPICS = Topics("edge-rl", RUN)


def test_run_control_keeps_the_longer_of_the_two_intervals():
    rc = RunControl("pi", 7)
    assert rc.status_every(1.0) == 1.0
    rc.on_control(encode_control(ControlMessage("running", RUN_ID, "", 5.0)))
    assert rc.take_join() == RUN_ID  # the interval of the run start joined
    assert rc.status_every(1.0) == 5.0 and rc.status_every(10.0) == 10.0
    rc.on_control(encode_control(ControlMessage("running", RUN_ID, "", 2.5)))
    assert rc.status_every(1.0) == 2.5  # the learner's newest word
    rc.on_control(encode_control(ControlMessage("running", RUN_ID)))
    assert rc.status_every(1.0) == 1.0  # none stated: the board's own again


def actor_under_control(
    stated: float, own_interval: float, public_key: str
) -> tuple[MemoryBroker, Any, ActorNode, list[str], threading.Thread]:
    """A learner's end of an in-memory broker that records every status state, its control
    stating ``stated``, and an actor with a status interval of ``own_interval`` running."""
    broker = MemoryBroker()
    seen: list[str] = []
    learner = broker.connect(
        "learner",
        subscriptions=[(TOPICS.all_status, 1)],
        on_message=lambda _t, p: p and seen.append(decode_status(p).state),
    )
    learner.start()
    assert learner.wait_connected(5)
    control = encode_control(ControlMessage("running", RUN_ID, "", stated))
    learner.publish(TOPICS.control, control, retain=True)
    board = BoardConfig(board="test-board", status_interval_s=own_interval)
    opts = ActorOptions("a0", "CartPole-v1", "memory://", run=RUN, policy_key=public_key)
    node = ActorNode(board, opts, connect=broker.connect)
    thread = threading.Thread(target=node.run, name="actor-under-test", daemon=True)
    thread.start()
    return broker, learner, node, seen, thread


def statuses_in(seconds: float, stated: float, public_key: str) -> int:
    """Statuses an actor with a 0.05 s interval of its own sends in ``seconds`` while it
    waits for credit, under a control that states ``stated``."""
    broker, _learner, node, seen, thread = actor_under_control(stated, 0.05, public_key)
    try:
        wait_for(lambda: "paused" in seen, 30, "a paused status (joined, no credit)", 0.01)
        first = len(seen)
        time.sleep(seconds)  # the window whose statuses are counted
        return len(seen) - first
    finally:
        node.stop()
        thread.join(10)
        broker.close()


def test_a_board_reports_no_more_often_than_the_learner_asks(policy_keys):
    _signer, public_key = policy_keys
    own = statuses_in(2.0, 0.0, str(public_key))
    stretched = statuses_in(2.0, 1.0, str(public_key))
    # Its own 0.05 s, checked every wait turn (<= 0.1 s): ~20 in 2 s; at 1 s: 2 or 3.
    assert own >= 8, own
    assert stretched <= 3, stretched


def test_run_control_reports_a_change_of_state_once():
    rc = RunControl("pi", 7)
    rc.on_control(encode_control(ControlMessage("running", RUN_ID)))
    assert rc.take_join() == RUN_ID
    assert not rc.take_state_change()  # joining is the loop's own doing
    rc.on_control(encode_control(ControlMessage("running", RUN_ID, "", 2.0)))
    assert not rc.take_state_change()  # a new interval is no new state
    rc.on_control(encode_control(ControlMessage("paused", RUN_ID, "interrupted")))
    assert rc.take_state_change() and not rc.take_state_change()


def test_a_board_says_paused_at_once_not_at_its_next_status(policy_keys):
    """With a 30 s interval of its own, a board tells a pause within a wait turn: an
    interrupted learner writes its summary once its boards say ``paused``."""
    _signer, public_key = policy_keys
    broker, learner, node, seen, thread = actor_under_control(0.0, 30.0, str(public_key))
    try:
        wait_for(lambda: len(seen) >= 2, 30, "'starting', then a joined status", 0.01)
        before = len(seen)
        paused = ControlMessage("paused", RUN_ID, "the learner was interrupted")
        learner.publish(TOPICS.control, encode_control(paused), retain=True)
        wait_for(lambda: len(seen) > before, 5, "a status after the pause", 0.01)
        assert seen[before:] == ["paused"], seen
    finally:
        node.stop()
        thread.join(10)
        broker.close()
