"""One network loop serving many transports (transport/netloop.py, what `edge-rl actors`
gives its boards) against real Mosquittos: every connection served by its ``net-io``
thread (no thread per connection), messages in and PUBACKs back, a quiet loop that does
not wake per connection, failover to the next node when one is killed by PID, and TLS
with client certificates (one thread touching each TLS socket)."""

from __future__ import annotations

import os
import queue
import random
import signal
import threading
import time
from pathlib import Path

import pytest

from edge_rl.deploy.credentials import make_credentials
from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.backoff import Backoff
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.transport.netloop import NetLoop
from tests.harness.waits import bound, wait_for

OPEN = ["allow_anonymous true"]  # these tests are about threading, not credentials
N = 40


class Board:
    """A transport on the loop, and what its handler saw (payloads, threads)."""

    def __init__(self, url: str, name: str, net: NetLoop, auth: BrokerAuth | None = None):
        self.got: queue.Queue[bytes] = queue.Queue()
        self.threads: set[str] = set()
        self.topic = f"edge-rl/net-loop/{name}"
        self.transport = MqttTransport(
            url,
            name,
            subscriptions=[(self.topic, 1)],
            on_message=self._on_message,
            backoff=Backoff(base_s=0.1, cap_s=1.0, rng=random.Random(0)),
            auth=auth,
            owner_io=True,  # what an actor node asks for: the loop serves it instead
            net=net,
        )

    def _on_message(self, _topic: str, payload: bytes) -> None:
        self.threads.add(threading.current_thread().name)
        self.got.put(payload)

    def echo(self, payload: bytes) -> bool:
        """Its own publish (from this thread) comes back through its subscription."""
        deadline = time.monotonic() + bound(10)
        while time.monotonic() < deadline:
            if not self.transport.publish(self.topic, payload, qos=1, wait=1.0):
                time.sleep(0.05)  # not connected yet, or not acknowledged yet
                continue
            try:
                while self.got.get(timeout=0.5) != payload:
                    pass
                return True
            except queue.Empty:
                continue  # published before the SUBSCRIBE was in place: again
        return False


@pytest.fixture
def net():
    loop = NetLoop().start()
    yield loop
    loop.stop()


def _boards(url: str, net: NetLoop, n: int, auth=None) -> list[Board]:
    boards = [Board(url, f"board-{i}", net, auth) for i in range(n)]
    for b in boards:
        b.transport.start()
    return boards


def test_one_thread_serves_every_connection(mosquitto_with, net) -> None:
    broker = mosquitto_with(OPEN)
    before = threading.active_count()
    boards = _boards(broker.url, net, N)
    try:
        for b in boards:
            assert b.transport.wait_connected(bound(10)), b.transport.client_id
        assert all(b.echo(b"ping " + b.topic.encode()) for b in boards)
        assert {name for b in boards for name in b.threads} == {"net-io"}
        assert threading.active_count() == before  # no thread per connection
        assert not any(b.transport.owner_io for b in boards)
        # Quiet: the loop sleeps until its next tick (keep-alive), not once per connection.
        net.wakeups, quiet_s = 0, 3.0
        time.sleep(quiet_s)  # the quiet interval measured (nothing to wait for)
        assert net.wakeups <= quiet_s / net.tick_s + 3, net.wakeups
        assert net.callback_errors == 0
    finally:
        for b in boards:
            b.transport.stop()
    assert not any(b.transport.connected for b in boards)


def test_a_killed_node_moves_every_connection_to_the_next(mosquitto_with, net) -> None:
    first, second = mosquitto_with(OPEN), mosquitto_with(OPEN)
    boards = _boards(f"{first.url},{second.url}", net, 5)
    try:
        for b in boards:
            assert b.transport.wait_connected(bound(10))
        assert all(b.transport.current_url == first.url for b in boards)
        os.kill(first.proc.pid, signal.SIGKILL)  # by PID
        first.proc.wait(5)
        wait_for(
            lambda: all(
                b.transport.connected and b.transport.current_url == second.url for b in boards
            ),
            20,
            "every connection on the second node",
        )
        assert all(b.echo(b"after") for b in boards)
    finally:
        for b in boards:
            b.transport.stop()


@pytest.fixture(scope="module")
def creds(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("creds")
    make_credentials(root, ["pi-01"], tls=True, server_names=["127.0.0.1"])
    return root


def test_tls_connections_on_one_loop(mosquitto_with, creds, net) -> None:
    broker_dir = creds / "broker"
    broker = mosquitto_with(
        [
            f"cafile {broker_dir / 'ca.crt'}",
            f"certfile {broker_dir / 'server.crt'}",
            f"keyfile {broker_dir / 'server.key'}",
            "require_certificate true",
            "allow_anonymous true",
        ],
        tls=True,
    )
    auth = BrokerAuth.from_directory(creds / "boards" / "pi-01", "pi-01")
    boards = _boards(broker.url, net, 10, auth)
    try:
        for b in boards:
            assert b.transport.wait_connected(bound(10))
        # Many records at once: the loop reads what TLS already decrypted, not only what
        # the socket still holds.
        assert all(b.echo(os.urandom(20_000)) for b in boards)
        assert {name for b in boards for name in b.threads} == {"net-io"}
    finally:
        for b in boards:
            b.transport.stop()
