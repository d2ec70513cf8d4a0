"""A broker URL list against two real Mosquittos: the first killed by PID, the transport
moves to the second, re-subscribes and goes on publishing and receiving."""

from __future__ import annotations

import os
import queue
import random
import signal
import time

import paho.mqtt.client as mqtt

from edge_rl.transport.backoff import Backoff
from edge_rl.transport.mqtt import MqttTransport
from tests.harness.waits import bound, until

WAIT_S = 10.0
TOPIC = "edge-rl/failover/ping"
OPEN = ["allow_anonymous true"]  # this test is about failover, not credentials


def _probe(url_port: int) -> mqtt.Client:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=f"probe-{url_port}")
    client.connect("127.0.0.1", url_port)
    client.loop_start()
    return client


def _until(predicate, timeout: float = WAIT_S) -> bool:
    return until(predicate, bound(timeout), step=0.02)


def _transport(url: str, got: queue.Queue) -> MqttTransport:
    return MqttTransport(
        url,
        "failover-client",
        subscriptions=[(TOPIC, 1)],
        on_message=lambda _t, p: got.put(p),
        backoff=Backoff(base_s=0.1, cap_s=1.0, rng=random.Random(0)),
    )


def _receives(transport: MqttTransport, port: int, got: queue.Queue, payload: bytes) -> bool:
    """A message published on the node at ``port`` reaches the transport (retried: the
    SUBSCRIBE of a fresh connection may still be on its way)."""
    probe = _probe(port)
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            probe.publish(TOPIC, payload, qos=1).wait_for_publish(2)
            try:
                while got.get(timeout=0.3) != payload:
                    continue
                return True
            except queue.Empty:
                continue
        return False
    finally:
        probe.loop_stop()
        probe.disconnect()


def test_the_first_node_killed_by_pid_the_client_moves_to_the_second(mosquitto_with) -> None:
    first, second = mosquitto_with(OPEN), mosquitto_with(OPEN)
    got: queue.Queue = queue.Queue()
    transport = _transport(f"{first.url},{second.url}", got)
    transport.start()
    try:
        assert transport.wait_connected(WAIT_S)
        assert transport.current_url == first.url and transport.connects == 1
        assert _receives(transport, first.port, got, b"on-first")

        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(5)
        t0 = time.monotonic()
        assert _until(lambda: transport.connected and transport.current_url == second.url)
        moved_s = time.monotonic() - t0
        assert transport.connects == 2 and transport.failovers >= 1
        assert moved_s < 5.0  # back-off capped at 1 s here: a few attempts at most
        assert _receives(transport, second.port, got, b"on-second")  # subscriptions renewed
        assert transport.publish(TOPIC, b"from-client", qos=1, wait=WAIT_S)
    finally:
        transport.stop()
    assert not transport.connected


def test_a_dead_first_node_at_start_is_passed_over(mosquitto_with) -> None:
    dead, live = mosquitto_with(OPEN), mosquitto_with(OPEN)
    dead_url = dead.url
    os.kill(dead.proc.pid, signal.SIGKILL)
    dead.proc.wait(5)
    got: queue.Queue = queue.Queue()
    transport = _transport(f"{dead_url},{live.url}", got)
    transport.start()
    try:
        assert transport.wait_connected(WAIT_S)
        assert transport.current_url == live.url
        assert transport.connect_failures >= 1 and transport.failovers == 1
        assert _receives(transport, live.port, got, b"hello")
    finally:
        transport.stop()


def test_a_list_of_one_retries_its_only_node(mosquitto_with) -> None:
    """A list of one: the same node again and again, as for a broker restart."""
    broker = mosquitto_with(OPEN)
    got: queue.Queue = queue.Queue()
    transport = _transport(broker.url, got)
    transport.start()
    try:
        assert transport.wait_connected(WAIT_S)
        broker.stop()
        assert _until(lambda: not transport.connected)
        assert _until(lambda: transport.connect_failures >= 2)
        assert transport.failovers == 0 and transport.current_url == broker.url
    finally:
        transport.stop()
