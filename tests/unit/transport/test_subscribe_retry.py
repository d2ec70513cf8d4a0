"""A refused subscription is tried again while connected (transport/mqtt.py): a node of a
clustered broker refuses a SUBSCRIBE while its replicated state is re-elected (nats-server:
"Unable to add JetStream consumer"), and Mosquitto never refuses one, so the SUBACK is
fed to the transport here; the real case runs in tests/e2e/cluster/."""

from __future__ import annotations

import random
import time

from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from edge_rl.transport.backoff import Backoff
from edge_rl.transport.mqtt import MqttTransport
from tests.harness.waits import bound, until

REFUSED = ReasonCode(PacketTypes.SUBACK, identifier=0x80)
GRANTED = ReasonCode(PacketTypes.SUBACK, identifier=1)


def transport(monkeypatch) -> tuple[MqttTransport, list[str]]:
    t = MqttTransport(
        "mqtt://127.0.0.1:1",
        "retry",
        backoff=Backoff(base_s=0.01, cap_s=0.02, rng=random.Random(0)),
    )
    sent: list[str] = []

    def subscribe(topic: str, qos: int = 0):
        sent.append(topic)
        return 0, len(sent)  # (MQTT_ERR_SUCCESS, mid)

    monkeypatch.setattr(t._client, "subscribe", subscribe)
    t._connected.set()  # as after a CONNACK
    return t, sent


def _until(predicate, timeout: float = 5.0) -> bool:
    return until(predicate, bound(timeout), step=0.01)


def test_a_refusal_is_retried_until_granted(monkeypatch) -> None:
    t, sent = transport(monkeypatch)
    t._subscribe("edge-rl/r/actors/+/transitions", 1)
    t._on_subscribe(None, None, 1, [REFUSED], None)
    assert _until(lambda: len(sent) == 2) and t.subscribe_failures == 1
    t._on_subscribe(None, None, 2, [REFUSED], None)
    assert _until(lambda: len(sent) == 3) and t.subscribe_failures == 2
    t._on_subscribe(None, None, 3, [GRANTED], None)
    time.sleep(0.1)  # a retry that was not to come: five backoffs (at most 0.02 s) long
    assert len(sent) == 3 and t._sub_attempts == {}


def test_a_brokers_own_topics_and_a_lost_connection_are_not_retried(monkeypatch) -> None:
    t, sent = transport(monkeypatch)
    t._subscribe("$SYS/broker/publish/messages/dropped", 0)  # Mosquitto's, not nats-server's
    t._on_subscribe(None, None, 1, [REFUSED], None)
    t._subscribe("edge-rl/r/policy", 1)
    t._connected.clear()  # the connection went: the next one subscribes anew
    t._on_subscribe(None, None, 2, [REFUSED], None)
    time.sleep(0.2)  # retries that were not to come: ten backoffs (at most 0.02 s) long
    assert sent == ["$SYS/broker/publish/messages/dropped", "edge-rl/r/policy"]
    assert t.subscribe_failures == 1
