"""A message past nats-server's ``max_payload`` (4 MiB in the shipped configs) on the
three-node loopback cluster (the ``cluster`` tier): what docs/scale.md says of it.

Measured on nats-server 2.9.10: an MQTT client's QoS 1 PUBLISH is not held to
``max_payload`` (that limit is of NATS clients' messages): a 5,000,000-byte policy,
retained, from the learner on node A is acknowledged, reaches a board subscribed on node B
and is kept for a board that subscribes later. What bounds a publish is the sender's own
``max_packet_size`` (``transport.max_packet_bytes``): past it the transport refuses
before sending, with a ValueError that names the limit, so no oversize packet leaves for
a broker that might close the connection on it.
"""

from __future__ import annotations

import threading

import pytest

from edge_rl.broker.nats_conf import MAX_PAYLOAD
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.wire.topics import Topics
from tests.conftest import _require
from tests.harness.cluster import Cluster, nats_server
from tests.harness.waits import wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(240)]
BIG = 5_000_000
WAIT_S = 60.0  # JetStream elects its leaders for a few seconds after the nodes start


def _wait_for(check, what: str) -> None:
    wait_for(check, WAIT_S, what, 0.1)


def test_a_publish_past_max_payload_is_delivered_and_the_sender_s_limit_is_what_refuses(
    tmp_path,
):
    _require(nats_server() is not None, "nats-server not found: scripts/ensure-nats")
    assert BIG > MAX_PAYLOAD
    topics = Topics("edge-rl", "big-payload")
    cluster = Cluster.start(tmp_path / "cluster", topics, ["pi-01", "pi-02"])
    got: dict[str, list[int]] = {"pi-01": [], "pi-02": []}
    lock = threading.Lock()
    made: list[MqttTransport] = []

    def board(actor: str, node: str) -> MqttTransport:
        def on_message(_topic: str, payload: bytes) -> None:
            with lock:
                got[actor].append(len(payload))

        t = MqttTransport(
            cluster.url(node),
            actor,
            subscriptions=[(topics.policy, 1)],
            on_message=on_message,
            auth=cluster.auth(actor),
            max_packet_size=16_000_000,
        )
        made.append(t)
        t.start()
        assert t.wait_connected(WAIT_S)
        return t

    try:
        learner = MqttTransport(
            cluster.url("a"), "learner", auth=cluster.auth("learner"), max_packet_size=16_000_000
        )
        made.append(learner)
        learner.start()
        assert learner.wait_connected(WAIT_S)
        board("pi-01", "b")
        # the board's subscription is in place once a small retained message reaches it
        _wait_for(
            lambda: (
                learner.publish(topics.policy, b"probe", retain=True, wait=2.0)
                and 5 in got["pi-01"]
            ),
            "the board on node B never got the probe",
        )
        assert learner.publish(topics.policy, b"x" * BIG, retain=True, wait=30.0)  # PUBACK
        _wait_for(lambda: BIG in got["pi-01"], "the 5 MB policy never reached node B's board")
        board("pi-02", "c")  # joins later: the retained one, replicated
        _wait_for(lambda: BIG in got["pi-02"], "the retained 5 MB policy never reached pi-02")

        default = MqttTransport(cluster.url("a"), "learner-2", auth=cluster.auth("learner"))
        with pytest.raises(ValueError, match=f"payload of {BIG} bytes exceeds max_packet_size"):
            default.publish(topics.policy, b"x" * BIG)  # refused before it is sent
        assert learner.connected
        learner.publish(topics.policy, b"", retain=True, wait=5.0)
    finally:
        for t in made:
            t.stop()
        cluster.stop()
