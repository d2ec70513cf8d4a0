"""The seam between a node and its message bus: MQTT for real, memory for unit tests.

A node never builds its client itself; it is handed a ``Connect`` and calls it once::

    transport = connect(
        "learner-cartpole",
        subscriptions=[(topics.all_transitions, 1)],
        on_message=handle,            # (topic, payload) on the transport's own thread
        on_connect=republish,         # after every (re)connect, subscriptions in place
        will=(status_topic, payload), # retained, published by the broker if we vanish
    )
    transport.start()                 # returns at once; connecting goes on in the background
    transport.wait_connected(10)
    transport.publish(topic, payload, qos=1, retain=True)  # False when it cannot send now
    transport.stop()

``MqttTransport`` (mqtt.py; ``mqtt_connect(url)`` is its ``Connect``) talks to a real
broker; ``MemoryBroker`` (memory.py) routes between transports in one process, with the
same threading: handlers run on a thread of the transport's, never on the caller's; with
``owner_io`` (MQTT only: an actor's loop), inside the owner's ``poll`` instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

MessageHandler = Callable[[str, bytes], None]


class Transport(Protocol):
    url: str
    client_id: str
    owner_io: bool  # the caller serves the connection with ``poll`` (mqtt.py)
    last_failure: str  # why the last connection attempt failed ("" if none did), one line

    def start(self) -> None: ...

    def wait_connected(self, timeout: float) -> bool: ...

    @property
    def connected(self) -> bool: ...

    def stop(self) -> None:
        """A clean close: the broker does not publish the last will."""
        ...

    def replace_will(self, topic: str, payload: bytes, timeout: float = 15.0) -> bool:
        """Make ``(topic, payload)`` the last will from now on (a clean reconnect: MQTT fixes
        a will at CONNECT); True once connected with it within ``timeout``."""
        ...

    def poll(self, timeout: float = 0.0) -> None:
        """``owner_io``: serve the connection on this thread for up to ``timeout`` s (its
        handlers run here); else only wait ``timeout``."""
        ...

    def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False, wait: float = 0.0
    ) -> bool:
        """Queue one message; False when not sent (not connected). ``ValueError`` when the
        payload is larger than the broker accepts: a caller must not retry that one."""
        ...


class Connect(Protocol):
    def __call__(
        self,
        client_id: str,
        *,
        subscriptions: Sequence[tuple[str, int]] = (),
        on_message: MessageHandler | None = None,
        on_connect: Callable[[], None] | None = None,
        will: tuple[str, bytes] | None = None,
        max_packet_size: int = 2_000_000,
        owner_io: bool = False,
    ) -> Transport: ...


def unreachable(transport: Transport) -> ConnectionError:
    """The error of a transport that did not connect in time: its URL and the last cause."""
    cause = transport.last_failure or "no answer"
    if cause.startswith("refused the login"):
        return ConnectionError(f"the MQTT broker at {transport.url} {cause}")
    return ConnectionError(f"cannot reach the MQTT broker at {transport.url}: {cause}")
