"""EmbeddedBroker against real paho clients, for each broker kind; parse_broker_url cases."""

from __future__ import annotations

import queue
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator

import paho.mqtt.client as mqtt
import pytest

from edge_rl.broker import embedded as broker_mod
from edge_rl.broker.embedded import BrokerError, EmbeddedBroker
from edge_rl.transport.address import parse_broker_url

WAIT_S = 5.0
KINDS = ["mosquitto", "amqtt"]


@pytest.fixture(scope="module", params=KINDS)
def broker(request: pytest.FixtureRequest) -> Iterator[EmbeddedBroker]:
    if request.param == "mosquitto":
        yield request.getfixturevalue("mosquitto")  # the session broker; skips/fails if missing
        return
    with EmbeddedBroker(kind="amqtt") as amqtt_broker:
        yield amqtt_broker


def _new_broker(kind: str, request: pytest.FixtureRequest, **kwargs) -> EmbeddedBroker:
    """A broker of this test's own (stopped at teardown), after the Mosquitto check."""
    if kind == "mosquitto":
        request.getfixturevalue("mosquitto_available")
    b = EmbeddedBroker(kind=kind, **kwargs)
    request.addfinalizer(b.stop)
    return b


def _topic() -> str:
    return f"edge-rl/test/{uuid.uuid4().hex}"


def _subscribe(client: mqtt.Client, topic: str) -> queue.Queue[mqtt.MQTTMessage]:
    """Subscribe at QoS 1, wait for the SUBACK, return the queue messages land in."""
    inbox: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
    acked = threading.Event()
    client.on_message = lambda _c, _u, msg: inbox.put(msg)
    client.on_subscribe = lambda *_args: acked.set()
    client.subscribe(topic, qos=1)
    assert acked.wait(WAIT_S), f"no SUBACK for {topic}"
    return inbox


def _refused(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
    except ConnectionRefusedError:
        return True
    return False


# -- delivery, per broker kind ------------------------------------------------------------


def test_qos1_publish_reaches_subscriber(broker, mqtt_client_factory) -> None:
    topic, payload = _topic(), bytes(range(256)) * 40  # 10 KB, every byte value
    inbox = _subscribe(mqtt_client_factory(broker), topic)

    info = mqtt_client_factory(broker).publish(topic, payload, qos=1)
    info.wait_for_publish(WAIT_S)

    assert info.is_published()
    msg = inbox.get(timeout=WAIT_S)
    assert (msg.topic, msg.payload, msg.qos, msg.retain) == (topic, payload, 1, False)


def test_retained_message_reaches_late_subscriber(broker, mqtt_client_factory) -> None:
    topic = _topic()
    mqtt_client_factory(broker).publish(topic, b"policy v1", qos=1, retain=True).wait_for_publish(
        WAIT_S
    )

    inbox = _subscribe(mqtt_client_factory(broker), topic)

    msg = inbox.get(timeout=WAIT_S)
    assert (msg.payload, msg.retain) == (b"policy v1", True)


@pytest.mark.parametrize("kind", KINDS)
def test_stop_frees_port_and_restart_reuses_it(kind, request) -> None:
    b = _new_broker(kind, request)
    b.start()
    url = b.url

    b.stop()
    assert not b.running
    assert _refused(b.host, b.port)

    b.start()  # a restart keeps the URL, so clients can reconnect to it
    assert b.running and b.url == url
    assert not _refused(b.host, b.port)


@pytest.mark.parametrize("kind", KINDS)
def test_start_fails_clearly_when_port_is_taken(kind, request) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        b = _new_broker(kind, request, port=port, start_timeout=5.0)

        with pytest.raises(BrokerError, match=r"(?is)exited with code.*address already in use"):
            b.start()
        assert not b.running


def test_auto_port_retries_once_when_taken(request, monkeypatch) -> None:
    b = _new_broker("mosquitto", request)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = iter([taken])
        real_free_port = broker_mod.free_port
        monkeypatch.setattr(
            broker_mod, "free_port", lambda host: next(ports, None) or real_free_port(host)
        )

        b.start()

        assert b.running and b.port != taken


@pytest.mark.parametrize(("kind", "v5_accepted"), [("mosquitto", True), ("amqtt", False)])
def test_mqtt5_support(kind, v5_accepted, request) -> None:
    b = _new_broker(kind, request).start()
    assert b.supports_mqtt5 is v5_accepted
    codes: queue.Queue[mqtt.ReasonCode] = queue.Queue()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.on_connect = lambda _c, _u, _f, reason_code, _p: codes.put(reason_code)
    client.connect(b.host, b.port)
    client.loop_start()
    try:
        assert (
            codes.get(timeout=WAIT_S).is_failure is not v5_accepted
        )  # amqtt: "Unsupported protocol version"
    finally:
        client.disconnect()
        client.loop_stop()


def test_mosquitto_advertises_and_enforces_max_packet_size(request) -> None:
    # paho does not check the CONNACK's Maximum Packet Size itself: the transport must.
    b = _new_broker("mosquitto", request, max_packet_size=10_000).start()
    connacks: queue.Queue[int] = queue.Queue()
    disconnected = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv5)
    client.on_connect = lambda _c, _u, _f, _rc, props: connacks.put(props.MaximumPacketSize)
    client.on_disconnect = lambda *_args: disconnected.set()
    client.connect(b.host, b.port)
    client.loop_start()
    try:
        assert connacks.get(timeout=WAIT_S) == 10_000
        client.publish(_topic(), b"x" * 20_000, qos=0)
        assert disconnected.wait(WAIT_S), "oversize publish did not get the client disconnected"
    finally:
        client.disconnect()
        client.loop_stop()


def test_auto_kind_prefers_mosquitto(request) -> None:
    request.getfixturevalue("mosquitto_available")
    assert EmbeddedBroker(kind="auto").kind == "mosquitto"


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="kind"):
        EmbeddedBroker(kind="emqx")


def test_module_imports_only_the_standard_library() -> None:
    # A board imports edge_rl.transport: nothing heavy may come with the broker helper.
    code = (
        "import sys, edge_rl.broker.embedded\n"
        "heavy = {'tensorflow', 'keras', 'numpy', 'amqtt', 'paho'} & set(sys.modules)\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)


# -- parse_broker_url -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mqtt://127.0.0.1:1883", ("127.0.0.1", 1883)),
        ("mqtt://localhost:40123", ("localhost", 40123)),
        ("mqtt://broker.lan", ("broker.lan", 1883)),
        ("mqtt://broker.lan/", ("broker.lan", 1883)),
        ("MQTT://Broker:1884", ("broker", 1884)),
        ("mqtt://[::1]:1883", ("::1", 1883)),
        ("  mqtt://10.0.0.2:1883 ", ("10.0.0.2", 1883)),
    ],
)
def test_parse_broker_url_accepts(url, expected) -> None:
    assert parse_broker_url(url) == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "mqtt://HOST:PORT"),
        ("localhost:1883", "mqtt://HOST:PORT"),
        ("tcp://localhost:1883", "scheme"),
        ("mqtts://user@localhost:8883", "credentials"),
        ("http://localhost", "scheme"),
        ("mqtt://", "no host"),
        ("mqtt://:1883", "no host"),
        ("mqtt://localhost:abc", "invalid port"),
        ("mqtt://localhost:70000", "invalid port"),
        ("mqtt://localhost:0", "port 0"),
        ("mqtt://localhost:1883/edge-rl", "path"),
        ("mqtt://localhost:1883?x=1", "query"),
        ("mqtt://user:pw@localhost:1883", "credentials"),
    ],
)
def test_parse_broker_url_rejects(url, reason) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_broker_url(url)
