"""An in-process broker for unit tests of node logic: no sockets, same threading as MQTT.

    broker = MemoryBroker()  # MemoryBroker(keeps_retained=False): a cluster node's view
    learner = LearnerNode(cfg, broker.connect, run_dir)      # any Connect-taking node
    probe = broker.connect("probe", subscriptions=[("edge-rl/#", 1)], on_message=seen)
    ...
    broker.wait_idle(5)      # every message published so far has been handed to its handlers
    broker.drop("actor-a0")  # an abrupt loss: the broker publishes that client's last will
    broker.lose("edge-rl/+/actors/+/transitions", 3)  # the next 3 such messages vanish
    broker.close()

What it keeps of MQTT: topic filters with ``+`` and ``#`` (paho's own matcher), retained
messages (an empty retained payload clears one) delivered after a subscriber's
``on_connect``, last wills, one message order for everyone, and delivery on a thread of
its own (a handler never runs on the publisher's thread, as with paho's network thread).
Exactly once, whatever the QoS. Integration tests keep using a real Mosquitto.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable

from paho.mqtt.client import topic_matches_sub

from edge_rl.transport.base import MessageHandler

log = logging.getLogger(__name__)

_Job = Callable[[], None]


class MemoryTransport:
    """One client of a ``MemoryBroker``; made by ``MemoryBroker.connect``."""

    def __init__(self, broker: MemoryBroker, client_id: str, **kw) -> None:
        self.broker = broker
        self.client_id = client_id
        self.url = f"memory://{client_id}"
        self.subscriptions: list[tuple[str, int]] = list(kw.get("subscriptions", ()))
        self.on_message: MessageHandler | None = kw.get("on_message")
        self.on_connect: Callable[[], None] | None = kw.get("on_connect")
        self.will: tuple[str, bytes] | None = kw.get("will")
        self.max_packet_size: int = kw.get("max_packet_size", 2_000_000)
        self._connected = threading.Event()
        self.callback_errors = 0
        self.connects = 0
        self.owner_io = False  # handlers run on the broker's thread, whatever was asked
        self.last_failure = ""  # MqttTransport's: why it is not connected (never, here)

    def start(self) -> None:
        self.broker.submit(self._connect)

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def stop(self) -> None:  # a clean disconnect: no last will
        self._connected.clear()

    def replace_will(self, topic: str, payload: bytes, timeout: float = 15.0) -> bool:
        self.will = (topic, payload)
        return self.connected

    def poll(self, timeout: float = 0.0) -> None:
        if timeout > 0:
            time.sleep(timeout)

    def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False, wait: float = 0.0
    ) -> bool:
        if len(payload) + len(topic) + 64 > self.max_packet_size:
            raise ValueError(f"payload of {len(payload)} bytes exceeds max_packet_size")
        if not self.connected:
            return False
        self.broker.route(topic, bytes(payload), retain)
        return True

    def matches(self, topic: str) -> bool:
        return any(topic_matches_sub(sub, topic) for sub, _ in self.subscriptions)

    def _connect(self) -> None:  # on the broker's thread, like paho's CONNACK handling
        self.connects += 1
        self._connected.set()
        self._call(self.on_connect)
        for topic, payload in self.broker.retained_for(self):
            self.deliver(topic, payload)

    def deliver(self, topic: str, payload: bytes) -> None:
        """On the broker's thread: hand one message to ``on_message`` while connected."""
        if self.connected and self.on_message is not None:
            self._call(lambda: self.on_message(topic, payload))

    def _call(self, fn: Callable[[], None] | None) -> None:
        if fn is None:
            return
        try:
            fn()
        except Exception:  # noqa: BLE001 - as MqttTransport: a handler must not kill delivery
            self.callback_errors += 1
            log.exception("%s: error in a handler", self.client_id)


class MemoryBroker:
    def __init__(self, *, keeps_retained: bool = True) -> None:
        """``keeps_retained=False``: retained messages are delivered to the subscribers of
        the moment and never stored, as on a node of a clustered broker whose retained
        messages live on another node (or arrive there late)."""
        self.url = "memory://"
        self.keeps_retained = keeps_retained
        self.clients: dict[str, MemoryTransport] = {}
        self.retained: dict[str, bytes] = {}
        self.published: list[tuple[str, bytes, bool]] = []  # (topic, payload, retain), in order
        self._losses: list[list] = []  # [topic filter, messages still to lose]
        self.lost: list[tuple[str, bytes]] = []  # what lose() made vanish, in order
        self._jobs: queue.Queue[_Job | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="memory-broker", daemon=True)
        self._thread.start()

    def connect(self, client_id: str, **kw) -> MemoryTransport:
        """A ``Connect``: the new client replaces any connected one of the same id."""
        old = self.clients.get(client_id)
        if old is not None:
            old.stop()
        client = self.clients[client_id] = MemoryTransport(self, client_id, **kw)
        return client

    def drop(self, client_id: str) -> None:
        """The client vanishes without a goodbye: its last will goes out, retained."""
        client = self.clients[client_id]
        client.stop()
        if client.will is not None:
            topic, payload = client.will
            self.route(topic, payload, True)

    def lose(self, topic_filter: str, count: int) -> None:
        """Fault injection: the next ``count`` messages matching ``topic_filter`` are
        acknowledged to their publisher and delivered to no one (as in a broker crash)."""
        self.submit(lambda: self._losses.append([topic_filter, count]))

    def wait_idle(self, timeout: float) -> bool:
        """True once everything submitted so far has been delivered."""
        done = threading.Event()
        self.submit(done.set)
        return done.wait(timeout)

    def retained_for(self, client: MemoryTransport) -> list[tuple[str, bytes]]:
        return [(t, p) for t, p in self.retained.items() if client.matches(t)]

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join(timeout=5)

    def submit(self, job: _Job) -> None:
        """Run ``job`` on the broker's thread, after every job submitted before it."""
        self._jobs.put(job)

    def route(self, topic: str, payload: bytes, retain: bool) -> None:
        """Publish ``payload`` on ``topic`` from the broker's thread, in submission order."""
        self.submit(lambda: self._route(topic, payload, retain))

    def _route(self, topic: str, payload: bytes, retain: bool) -> None:
        for loss in self._losses:
            if loss[1] > 0 and topic_matches_sub(loss[0], topic):
                loss[1] -= 1
                self.lost.append((topic, payload))
                return
        self.published.append((topic, payload, retain))
        if retain and self.keeps_retained:
            if payload:
                self.retained[topic] = payload
            else:
                self.retained.pop(topic, None)
        for client in list(self.clients.values()):
            if client.matches(topic):
                client.deliver(topic, payload)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()
