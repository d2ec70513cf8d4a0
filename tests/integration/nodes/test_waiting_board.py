"""A board that may not step sleeps until something is due: its next status, a grant, a
control or a loaded policy, not a turn every 0.1 s (issue 33: a thousand waiting boards in
a host woke ten thousand times a second). A real ActorNode on the in-memory broker, paused
by its learner, its waits counted."""

from __future__ import annotations

import threading
import time

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig
from edge_rl.transport.memory import MemoryBroker
from edge_rl.types import ControlMessage
from edge_rl.wire.messages import encode_control
from edge_rl.wire.topics import Topics
from tests.harness.waits import wait_for
from tests.integration.test_actor_step_path import RUN, RUN_ID, Calls, policy_payload

STATUS_S = 2.0
STATUSES = 2


def test_a_paused_board_wakes_for_its_status_and_for_news_only(policy_keys) -> None:
    signer, public_key = policy_keys
    broker = MemoryBroker()
    topics = Topics("edge-rl", RUN)
    learner = broker.connect("learner")
    learner.start()
    assert learner.wait_connected(5)
    board = BoardConfig(board="test-board", status_interval_s=STATUS_S)
    opts = ActorOptions("a0", "CartPole-v1", "memory://", run=RUN, policy_key=str(public_key))
    node = ActorNode(board, opts, connect=broker.connect)
    calls, waits = Calls(), []
    real_wait = node.rc.wait_news

    def counted(timeout: float) -> None:
        calls["wait"] += 1
        waits.append(timeout)
        real_wait(timeout)

    node.rc.wait_news = counted
    real_status = node._publish_status

    def status(*args, **kwargs) -> None:
        calls["status"] += 1
        real_status(*args, **kwargs)

    node._publish_status = status
    learner.publish(topics.control, encode_control(ControlMessage("paused", RUN_ID)), retain=True)
    thread = threading.Thread(target=node.run, name="actor-under-test", daemon=True)
    thread.start()
    try:
        wait_for(lambda: node.rc.state == "paused", 30, "the board joined, paused")
        calls.clear()
        # Nothing happens for two of its status intervals: the board should sleep.
        wait_for(lambda: calls["status"] >= STATUSES, 30, "two statuses", step=0.01)
        quiet = calls["wait"]
        # A policy loaded meanwhile ends the sleep: the board reports it at once, not at
        # its next status.
        learner.publish(topics.policy, policy_payload(signer), retain=True)
        wait_for(lambda: node.slot.version == 1, 60, "the policy v1 loaded", step=0.01)
        t0 = time.monotonic()
        wait_for(lambda: node._reported_version == 1, 10, "v1 reported", step=0.01)
        reported_after = time.monotonic() - t0
    finally:
        node.stop()
        thread.join(20)
        learner.stop()
    # One wake per status (and a spare for where the window falls); a turn of 0.1 s would
    # be 20 a status.
    assert quiet <= STATUSES + 2, (quiet, waits[:10])
    assert reported_after < STATUS_S / 2, reported_after
