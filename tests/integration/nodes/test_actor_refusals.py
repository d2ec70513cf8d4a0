"""What an actor refuses or cannot send is counted in its status, as the learner reads it.

A real actor against a real Mosquitto: a malformed control message is ignored (the run goes
on under the good one) and counted; batches over the board's ``max_batch_bytes`` (which
caps a batch's rows, so only when one row does not fit) are dropped before sending, counted
by transition, and logged once.
"""

from __future__ import annotations

import logging
import threading
import uuid

from edge_rl.actor.node import ActorNode, ActorOptions
from edge_rl.boards import BoardConfig
from edge_rl.types import ActorStatus
from edge_rl.wire.envelope import MAGIC_CONTROL
from edge_rl.wire.messages import decode_status
from edge_rl.wire.topics import Topics
from tests.harness.waits import wait_for


def test_status_counts_bad_control_and_oversize_batches(
    mosquitto, mqtt_client_factory, caplog, policy_keys, grant_run
):
    run = f"refuse-{uuid.uuid4().hex[:8]}"
    topics = Topics("edge-rl", run)
    client = mqtt_client_factory(mosquitto)
    statuses: list[ActorStatus] = []
    client.on_message = lambda _c, _u, msg: statuses.append(decode_status(msg.payload))
    client.subscribe(topics.status("a0"), qos=1)
    # The node caps its batch at the rows that fit in max_batch_bytes, at least one; one
    # CartPole transition with its header is ~160 bytes: every batch is oversize.
    board = BoardConfig(
        board="test-board",
        batch_size=16,
        flush_interval_s=0.1,
        status_interval_s=0.2,
        max_batch_bytes=100,
    )
    opts = ActorOptions(
        "a0",
        "CartPole-v1",
        mosquitto.url,
        run=run,
        seed=3,
        max_env_steps=400,
        policy_key=str(policy_keys[1]),
    )
    node = ActorNode(board, opts)
    thread = threading.Thread(target=node.run, daemon=True)
    # Retained, so the actor gets each one when it subscribes or at once if it has.
    bad = MAGIC_CONTROL + b"\x01\x00 not a header"
    client.publish(topics.control, bad, qos=1, retain=True).wait_for_publish(5)
    with caplog.at_level(logging.WARNING, logger="edge_rl"):
        thread.start()
        wait_for(lambda: node.rc.rejected > 0, 20, "the bad control's rejection", 0.01)
        assert node.rc.rejected == 1 and node.env_steps == 0  # ignored: still waiting
        grant_run(client, topics, "a0", node.session)  # a good control, and credit
        thread.join(60)
    assert not thread.is_alive()

    wait_for(lambda: any(s.state == "stopped" for s in statuses), 5, "the stopped status", 0.01)
    final = [s for s in statuses if s.state == "stopped"][-1]
    assert final.env_steps == 400  # the bad control message did not stop the run
    assert final.control_rejected == 1
    assert final.transitions_oversize == 400 and final.transitions_sent == 0
    assert final.batches_sent == 0 and final.batches_dropped == 0
    oversize = [r for r in caplog.records if "max_batch_bytes" in r.getMessage()]
    rejected = [r for r in caplog.records if "control message rejected" in r.getMessage()]
    assert len(oversize) == 1 and len(rejected) == 1
