"""A transport whose owner serves the connection (``owner_io``, what the actor loop uses)
against real Mosquittos: no network thread, handlers run inside the owner's ``poll`` on its
own thread, a publish that waits for its PUBACK polls for it, and when its node is killed
by PID the transport moves to the next one and the owner's polls serve that."""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import paho.mqtt.client as mqtt

from edge_rl.transport.backoff import Backoff
from edge_rl.transport.mqtt import MqttTransport

WAIT_S = 10.0
TOPIC = "edge-rl/owner-io/ping"
OPEN = ["allow_anonymous true"]  # this test is about threading, not credentials


class Owner:
    """The transport and what its handler saw: payloads and the threads they came on."""

    def __init__(self, url: str) -> None:
        self.got: list[bytes] = []
        self.threads: set[int] = set()
        self.transport = MqttTransport(
            url,
            "owner-io-client",
            subscriptions=[(TOPIC, 1)],
            on_message=self._on_message,
            backoff=Backoff(base_s=0.1, cap_s=1.0, rng=random.Random(0)),
            owner_io=True,
        )

    def _on_message(self, _topic: str, payload: bytes) -> None:
        self.got.append(payload)
        self.threads.add(threading.get_ident())

    def receives(self, port: int, payload: bytes) -> bool:
        """A message published on the node at ``port`` reaches the handler, inside this
        thread's polls (published again while the fresh SUBSCRIBE may be on its way)."""
        probe = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"probe-{port}")
        probe.connect("127.0.0.1", port)
        probe.loop_start()
        try:
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                probe.publish(TOPIC, payload, qos=1).wait_for_publish(2)
                until = time.monotonic() + 0.3
                while time.monotonic() < until:
                    self.transport.poll(0.05)
                    if payload in self.got:
                        return True
            return False
        finally:
            probe.loop_stop()
            probe.disconnect()


def _paho_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("paho-mqtt-client-")]


def test_the_owner_serves_the_connection_on_its_own_thread(mosquitto_with) -> None:
    broker = mosquitto_with(OPEN)
    owner = Owner(broker.url)
    before = _paho_threads()
    owner.transport.start()
    try:
        assert owner.transport.wait_connected(WAIT_S)  # the CONNACK, read by its polls
        assert owner.receives(broker.port, b"hello")
        assert owner.threads == {threading.get_ident()}  # inside poll, on this thread
        assert _paho_threads() == before  # no network thread of paho's
        # Its PUBACK is read by the polls of the wait: acknowledged, not just queued.
        assert owner.transport.publish(TOPIC, b"acked", qos=1, wait=WAIT_S)
    finally:
        owner.transport.stop()


def test_its_node_killed_by_pid_the_owner_polls_the_next(mosquitto_with) -> None:
    first, second = mosquitto_with(OPEN), mosquitto_with(OPEN)
    owner = Owner(f"{first.url},{second.url}")
    owner.transport.start()
    try:
        assert owner.transport.wait_connected(WAIT_S)
        assert owner.receives(first.port, b"on-first")
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(5)
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and owner.transport.current_url != second.url:
            owner.transport.poll(0.05)  # sees the socket close; the next node is tried
        assert owner.transport.wait_connected(WAIT_S)
        assert owner.transport.current_url == second.url
        assert owner.receives(second.port, b"on-second")
        assert owner.transport.publish(TOPIC, b"after", qos=1, wait=WAIT_S)
    finally:
        owner.transport.stop()


def test_the_actor_loop_owns_its_transport(mosquitto_with, tmp_path) -> None:
    """The board's loop serves its own MQTT connection between stints (actor/node.py):
    with paho's thread it handed the GIL over for every publish and every PUBACK."""
    from edge_rl.actor.node import ActorNode, ActorOptions
    from edge_rl.boards import BoardConfig
    from edge_rl.wire.signing import Signer

    key = tmp_path / "learner.pub"
    Signer.load_or_create(tmp_path / "learner.key").write_public(key)
    broker = mosquitto_with(OPEN)
    opts = ActorOptions("owner-io-board", "CartPole-v1", broker.url, policy_key=str(key))
    node = ActorNode(BoardConfig(board="test"), opts)
    try:
        assert node.transport.owner_io
    finally:
        node.env.close()


def test_the_actor_caps_its_batch_by_max_batch_bytes(mosquitto_with, tmp_path) -> None:
    """A batch closed by count must be small enough to send: CartPole's 47-byte rows
    (v5: the intervention byte) in 5,000 bytes (header room 1,024) are 84 rows, not the
    board's 256."""
    from edge_rl.actor.node import ActorNode, ActorOptions
    from edge_rl.boards import BoardConfig
    from edge_rl.wire.signing import Signer

    key = tmp_path / "learner.pub"
    Signer.load_or_create(tmp_path / "learner.key").write_public(key)
    broker = mosquitto_with(OPEN)
    opts = ActorOptions("capped-board", "CartPole-v1", broker.url, policy_key=str(key))
    board = BoardConfig(board="test", batch_size=256, max_batch_bytes=5_000)
    node = ActorNode(board, opts)
    try:
        assert node.batcher.batch_size == 84
    finally:
        node.env.close()
