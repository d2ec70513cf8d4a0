"""TLS against a real Mosquitto: certificates made at run time by `edge-rl credentials`'
code, the ACL of host/acl with the certificate's common name as the username, and the
shipped host/mosquitto.conf itself (paths pointed at the test's files, on loopback)."""

from __future__ import annotations

import queue
import ssl
from pathlib import Path

import pytest

from edge_rl.deploy.credentials import make_credentials
from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.wire.topics import Topics
from tests.harness.paths import REPO

WAIT_S = 5.0
RUN = Topics("edge-rl", "tls")


@pytest.fixture(scope="module")
def creds(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("creds")
    make_credentials(
        root, ["pi-01", "pi-02"], tls=True, passwords=True, server_names=["localhost", "127.0.0.1"]
    )
    return root


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory) -> Path:
    """Credentials of another deployment: same names, a CA the broker does not trust."""
    root = tmp_path_factory.mktemp("other")
    make_credentials(root, ["pi-01"], tls=True, server_names=["127.0.0.1"])
    return root


def context(ca: Path, identity: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if identity is not None:
        ctx.load_cert_chain(str(identity / "client.crt"), str(identity / "client.key"))
    return ctx


def cert_listener(creds: Path) -> list[str]:
    broker = creds / "broker"
    return [
        f"cafile {broker / 'ca.crt'}",
        f"certfile {broker / 'server.crt'}",
        f"keyfile {broker / 'server.key'}",
        "require_certificate true",
        "use_identity_as_username true",
        "allow_anonymous false",
        f"acl_file {REPO / 'host' / 'acl'}",
        "use_username_as_clientid true",
    ]


@pytest.fixture
def cert_broker(mosquitto_with, creds):
    return mosquitto_with(cert_listener(creds), tls=True)


def test_client_without_certificate_is_refused(cert_broker, creds, clients) -> None:
    outcome = clients(cert_broker, tls=context(creds / "ca.crt")).first_outcome()
    # Refused in the TLS handshake, before any MQTT: no CONNACK at all.
    assert outcome == "closed" or outcome.startswith("failed"), outcome


def test_client_with_certificate_of_another_ca_is_refused(cert_broker, creds, other_ca, clients):
    tls = context(creds / "ca.crt", other_ca / "boards" / "pi-01")
    outcome = clients(cert_broker, tls=tls).first_outcome()
    assert outcome == "closed" or outcome.startswith("failed"), outcome


def test_client_with_ca_signed_certificate_is_accepted(cert_broker, creds, clients) -> None:
    tls = context(creds / "ca.crt", creds / "boards" / "pi-01")
    assert clients(cert_broker, tls=tls).first_outcome() == "connected"


def test_client_that_does_not_trust_the_broker_does_not_connect(cert_broker, creds, other_ca):
    auth = BrokerAuth.from_directory(creds / "boards" / "pi-01", "pi-01")
    auth = BrokerAuth(
        ca_file=str(other_ca / "ca.crt"), cert_file=auth.cert_file, key_file=auth.key_file
    )
    transport = MqttTransport(cert_broker.url, "actor-pi-01", auth=auth)
    transport.start()
    try:
        assert not transport.wait_connected(2.0)
        assert transport.connect_failures >= 1
    finally:
        transport.stop()


def _transport(url: str, identity: Path, name: str, inbox=None, subscriptions=()):
    auth = BrokerAuth.from_directory(identity, name)
    on_message = (lambda topic, payload: inbox.put((topic, payload))) if inbox else None
    t = MqttTransport(
        url, f"edge-rl-{name}", auth=auth, subscriptions=subscriptions, on_message=on_message
    )
    t.start()
    return t


def _until(inbox: queue.Queue, last: bytes) -> list[bytes]:
    got: list[bytes] = []
    while not got or got[-1] != last:
        got.append(inbox.get(timeout=WAIT_S)[1])
    return got


def _end_to_end(url: str, creds: Path) -> None:
    """Learner and two actors over mqtts://: the ACL of host/acl on the certificate names."""
    inbox: queue.Queue = queue.Queue()
    learner = _transport(url, creds / "learner", "learner", inbox, [(f"{RUN.base}/#", 1)])
    pi01 = _transport(url, creds / "boards" / "pi-01", "pi-01")
    try:
        assert learner.wait_connected(WAIT_S) and pi01.wait_connected(WAIT_S)
        # Connected is not subscribed yet (the SUBSCRIBE goes out on connect): the learner's
        # own publish coming back shows its subscription is in place.
        assert learner.publish(RUN.control, b"ready", wait=WAIT_S)
        assert _until(inbox, b"ready") == [b"ready"]
        assert pi01.publish(RUN.transitions("pi-02"), b"forged", wait=WAIT_S)
        assert pi01.publish(RUN.policy, b"evil policy", wait=WAIT_S)
        assert pi01.publish(RUN.transitions("pi-01"), b"own batch", wait=WAIT_S)
        assert _until(inbox, b"own batch") == [b"own batch"]
        assert learner.publish(RUN.policy, b"policy v1", wait=WAIT_S)
        assert _until(inbox, b"policy v1") == [b"policy v1"]  # the learner reads its own
    finally:
        learner.stop()
        pi01.stop()


def test_mqtts_end_to_end_with_client_certificates(cert_broker, creds) -> None:
    _end_to_end(cert_broker.url, creds)


def test_shipped_config_with_passwords(mosquitto_with, creds, shipped_config, clients) -> None:
    broker = mosquitto_with(shipped_config(creds, certificates=False), tls=True)
    tls = context(creds / "ca.crt")
    assert clients(broker, tls=tls).first_outcome().startswith("refused")  # anonymous
    wrong = clients(broker, tls=context(creds / "ca.crt"), username="pi-01", password="guess")
    assert wrong.first_outcome().startswith("refused")
    _end_to_end(broker.url, creds)  # CA + password (the client certificate is not required)


def test_shipped_config_with_certificates(mosquitto_with, creds, shipped_config, clients):
    broker = mosquitto_with(shipped_config(creds, certificates=True), tls=True)
    outcome = clients(
        broker,
        tls=context(creds / "ca.crt"),
        username="pi-01",
        password=(creds / "boards" / "pi-01" / "password").read_text().strip(),
    )
    assert outcome.first_outcome() != "connected"  # a password alone is not enough now
    identity = creds / "boards" / "pi-01"
    no_password = clients(broker, tls=context(creds / "ca.crt", identity))
    assert no_password.first_outcome() == "connected"  # the certificate is the identity
    # Its client id is now "pi-01" (use_username_as_clientid): a second pi-01 would take
    # over its session, and paho's reconnect would take it back, over and over.
    no_password.close()
    _end_to_end(broker.url, creds)


def test_mqtt_transport_without_certificate_is_refused_and_says_so(cert_broker, creds, caplog):
    transport = MqttTransport(
        cert_broker.url, "actor-pi-01", auth=BrokerAuth(ca_file=str(creds / "ca.crt"))
    )
    with caplog.at_level("WARNING", logger="edge_rl.transport.mqtt"):
        transport.start()
        try:
            assert not transport.wait_connected(2.0)
        finally:
            transport.stop()
    assert transport.connect_failures >= 1 and transport.connects == 0
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "TLS failed" in warnings[0], warnings  # once, not per retry
