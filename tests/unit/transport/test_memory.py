"""The in-memory transport keeps what node logic relies on from MQTT (memory.py)."""

from __future__ import annotations

import threading

import pytest

from edge_rl.transport.memory import MemoryBroker

WAIT_S = 5.0


@pytest.fixture
def broker():
    b = MemoryBroker()
    yield b
    b.close()


def started(broker: MemoryBroker, client_id: str, **kw):
    client = broker.connect(client_id, **kw)
    client.start()
    assert client.wait_connected(WAIT_S)
    return client


def test_wildcards_route_and_handlers_run_on_the_brokers_thread(broker):
    got: list[tuple[str, bytes, str]] = []

    def handle(topic: str, payload: bytes) -> None:
        got.append((topic, payload, threading.current_thread().name))

    subs = [("edge-rl/r/actors/+/transitions", 1), ("edge-rl/r/control", 1)]
    started(broker, "learner", subscriptions=subs, on_message=handle)
    pub = started(broker, "pub")
    assert pub.publish("edge-rl/r/actors/a0/transitions", b"1")
    assert pub.publish("edge-rl/r/actors/a0/status", b"not subscribed")
    assert pub.publish("edge-rl/other/control", b"other run")
    assert pub.publish("edge-rl/r/control", b"2")
    assert broker.wait_idle(WAIT_S)
    assert [(t, p) for t, p, _ in got] == [
        ("edge-rl/r/actors/a0/transitions", b"1"),
        ("edge-rl/r/control", b"2"),
    ]
    assert {name for _, _, name in got} == {"memory-broker"}


def test_retained_arrive_after_on_connect_and_an_empty_payload_clears(broker):
    pub = started(broker, "pub")
    pub.publish("p/policy", b"v1", retain=True)
    pub.publish("p/policy", b"v2", retain=True)  # replaces v1
    pub.publish("p/control", b"c", retain=True)
    pub.publish("p/control", b"", retain=True)  # clears it
    assert broker.wait_idle(WAIT_S)
    order: list[str] = []
    started(
        broker,
        "late",
        subscriptions=[("p/#", 1)],
        on_connect=lambda: order.append("connect"),
        on_message=lambda t, p: order.append(f"{t}={p.decode()}"),
    )
    assert broker.wait_idle(WAIT_S)
    assert order == ["connect", "p/policy=v2"]


def test_last_will_on_drop_not_on_stop(broker):
    seen: list[bytes] = []
    started(broker, "learner", subscriptions=[("s/+", 1)], on_message=lambda t, p: seen.append(p))
    a = started(broker, "a", will=("s/a", b"offline-a"))
    b = started(broker, "b", will=("s/b", b"offline-b"))
    b.stop()  # a clean goodbye: no will
    broker.drop("a")  # vanished: the will goes out, retained
    assert broker.wait_idle(WAIT_S)
    assert seen == [b"offline-a"]
    assert broker.retained == {"s/a": b"offline-a"}
    assert not a.publish("s/a", b"after the drop")  # a dropped client cannot send


def test_a_raising_handler_is_counted_and_delivery_goes_on(broker):
    seen: list[bytes] = []

    def handler(topic: str, payload: bytes) -> None:
        if payload == b"boom":
            raise RuntimeError("handler bug")
        seen.append(payload)

    sub = started(broker, "sub", subscriptions=[("t", 1)], on_message=handler)
    pub = started(broker, "pub")
    for p in (b"a", b"boom", b"b"):
        pub.publish("t", p)
    assert broker.wait_idle(WAIT_S)
    assert seen == [b"a", b"b"] and sub.callback_errors == 1


def test_oversize_publish_raises_and_a_new_client_id_replaces_the_old(broker):
    small = started(broker, "x", max_packet_size=1_000)
    with pytest.raises(ValueError):
        small.publish("t", b"\0" * 2_000)
    again = started(broker, "x")
    assert again.connected and not small.connected  # MQTT's session takeover
