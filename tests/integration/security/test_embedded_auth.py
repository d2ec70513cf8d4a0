"""The embedded broker's authenticated mode (EmbeddedBroker(accounts=...)) against real
clients: who may connect, who may publish where. The ACL is the run's (broker/acl.py); every
test of the ``broker`` fixture runs against real Mosquitto and against the amqtt fallback,
which reads the same password file and ACL (broker/amqtt_plugins.py)."""

from __future__ import annotations

import logging
import queue
from pathlib import Path

import pytest

from edge_rl.broker.config import BrokerAccounts
from edge_rl.broker.embedded import BrokerError, EmbeddedBroker
from edge_rl.transport.auth import read_password_file
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.wire.topics import Topics

WAIT_S = 5.0

RUN = Topics("edge-rl", "sec")
ACCOUNTS = BrokerAccounts(actors=("sim-00", "sim-01"), root=RUN.root, run=RUN.run)


@pytest.fixture(params=["mosquitto", "amqtt"])
def broker(request):
    if request.param == "mosquitto":
        request.getfixturevalue("mosquitto_available")
    with EmbeddedBroker(kind=request.param, accounts=ACCOUNTS) as b:
        yield b


@pytest.fixture
def mosquitto_broker(mosquitto_available):
    with EmbeddedBroker(kind="mosquitto", accounts=ACCOUNTS) as b:
        yield b


def login(broker, user):
    auth = broker.auth(user)
    return {"username": user, "password": read_password_file(auth.password_file)}


def test_config_is_loopback_no_anonymous_with_acl(mosquitto_broker) -> None:
    broker = mosquitto_broker
    conf = broker.config_path.read_text()
    assert f"listener {broker.port} 127.0.0.1" in conf
    assert "allow_anonymous false" in conf and "allow_anonymous true" not in conf
    assert "password_file " in conf and "acl_file " in conf
    secrets = [broker._store.password_file, broker._store.acl_file]
    secrets.append(Path(broker.auth("sim-00").password_file))
    for path in secrets:
        assert path.stat().st_mode & 0o077 == 0, path
    assert broker.authenticated


def test_anonymous_client_is_refused(broker, clients) -> None:
    assert clients(broker).first_outcome().startswith("refused")


def test_wrong_password_is_refused(broker, clients) -> None:
    outcome = clients(broker, username="sim-00", password="not-the-password").first_outcome()
    assert outcome.startswith("refused")


def test_unknown_user_is_refused(broker, clients) -> None:
    password = login(broker, "sim-00")["password"]  # a real password, someone else's name
    assert (
        clients(broker, username="mallory", password=password).first_outcome().startswith("refused")
    )


def test_right_password_is_accepted(broker, clients) -> None:
    assert clients(broker, **login(broker, "sim-00")).first_outcome() == "connected"


def test_actor_cannot_publish_under_another_actors_id(broker, clients) -> None:
    learner = clients(broker, **login(broker, "learner"))
    assert learner.first_outcome() == "connected"
    learner.subscribe(f"{RUN.base}/#")
    a = clients(broker, **login(broker, "sim-00"))
    assert a.first_outcome() == "connected"

    a.publish(RUN.transitions("sim-01"), b"forged by sim-00")
    a.publish(RUN.status("sim-01"), b"forged status", retain=True)
    a.publish(RUN.transitions("sim-00"), b"own batch")  # allowed: the last one

    assert learner.until(b"own batch") == [b"own batch"]


def test_actor_cannot_publish_policy_or_control(broker, clients) -> None:
    learner = clients(broker, **login(broker, "learner"))
    assert learner.first_outcome() == "connected"
    learner.subscribe(f"{RUN.base}/#")
    actor = clients(broker, **login(broker, "sim-00"))
    assert actor.first_outcome() == "connected"

    actor.publish(RUN.policy, b"evil policy", retain=True)
    actor.publish(RUN.control, b"evil control", retain=True)
    actor.publish(RUN.credit("sim-00"), b"evil credit for itself", retain=True)
    actor.publish(RUN.credit("sim-01"), b"evil credit for another", retain=True)
    actor.publish(RUN.status("sim-00"), b"own status")

    assert learner.until(b"own status") == [b"own status"]


def test_learner_publishes_policy_and_control_to_actors(broker, clients) -> None:
    actor = clients(broker, **login(broker, "sim-01"))
    assert actor.first_outcome() == "connected"
    actor.subscribe(RUN.policy)
    actor.subscribe(RUN.control)
    learner = clients(broker, **login(broker, "learner"))
    assert learner.first_outcome() == "connected"

    actor.subscribe(RUN.credit("sim-01"))
    actor.subscribe(RUN.credit("sim-00"))  # not its own: the broker sends it nothing
    learner.publish(RUN.policy, b"policy v1", retain=True)
    learner.publish(RUN.credit("sim-00"), b"credit for sim-00", retain=True)
    learner.publish(RUN.credit("sim-01"), b"credit for sim-01", retain=True)
    learner.publish(RUN.control, b"running")

    assert actor.until(b"running") == [b"policy v1", b"credit for sim-01", b"running"]


def test_actor_cannot_read_another_actors_transitions(broker, clients) -> None:
    spy = clients(broker, **login(broker, "sim-01"))
    assert spy.first_outcome() == "connected"
    spy.subscribe(f"{RUN.base}/actors/#")
    spy.subscribe(RUN.control)
    a = clients(broker, **login(broker, "sim-00"))
    learner = clients(broker, **login(broker, "learner"))
    assert a.first_outcome() == learner.first_outcome() == "connected"

    a.publish(RUN.transitions("sim-00"), b"private batch")
    learner.publish(RUN.control, b"after")  # read by the spy: the end marker

    assert spy.until(b"after") == [b"after"]


def test_mqtt_transport_logs_in_with_broker_auth(broker, clients) -> None:
    learner = clients(broker, **login(broker, "learner"))
    assert learner.first_outcome() == "connected"
    learner.subscribe(RUN.all_transitions)
    transport = MqttTransport(broker.url, "actor-sim-00", auth=broker.auth("sim-00"))
    transport.start()
    try:
        assert transport.wait_connected(WAIT_S)
        assert transport.publish(RUN.transitions("sim-00"), b"batch", wait=WAIT_S)
        assert learner.until(b"batch") == [b"batch"]
    finally:
        transport.stop()


def test_mqtt_transport_reports_a_refusal(broker, caplog) -> None:
    transport = MqttTransport(broker.url, "anonymous")
    with caplog.at_level(logging.WARNING, logger="edge_rl.transport.mqtt"):
        transport.start()
        try:
            assert not transport.wait_connected(2.0)
        finally:
            transport.stop()
    assert transport.refusals >= 1
    assert "refused the connection" in caplog.text and "anonymous" in caplog.text


def test_passwords_survive_a_restart(broker, clients) -> None:
    credentials = login(broker, "sim-00")
    broker.stop()
    broker.start()
    assert clients(broker, **credentials).first_outcome() == "connected"


def test_auth_files_are_removed_with_the_broker(mosquitto_available) -> None:
    with EmbeddedBroker(kind="mosquitto", accounts=ACCOUNTS) as b:
        directory = b._store.dir
        assert directory is not None and directory.exists()
    assert not directory.exists()


def test_amqtt_fallback_is_authenticated_and_stays_on_loopback(caplog) -> None:
    with pytest.raises(BrokerError, match="loopback"):
        EmbeddedBroker(kind="amqtt", host="0.0.0.0", accounts=ACCOUNTS)
    with caplog.at_level(logging.WARNING, logger="edge_rl.broker.embedded"):
        with EmbeddedBroker(kind="amqtt", accounts=ACCOUNTS) as b:
            assert b.authenticated and b.host == "127.0.0.1"
            transport = MqttTransport(b.url, "learner-sec", auth=b.auth("learner"))
            transport.start()
            try:
                assert transport.wait_connected(WAIT_S)  # its credentials, checked
            finally:
                transport.stop()
    assert "UNAUTHENTICATED" not in caplog.text


def test_actor_cannot_write_or_read_another_run(broker, clients) -> None:
    """The ACL names the run: an actor's own id under another run's base is not its own.
    (The run's learner may not read or write another run either: the deployment's ACL,
    where one learner serves every run, is tested in test_credentials.py.)"""
    other = Topics(RUN.root, "otherrun")
    learner = clients(broker, **login(broker, "learner"))
    assert learner.first_outcome() == "connected"
    learner.subscribe(f"{RUN.base}/#")
    actor = clients(broker, **login(broker, "sim-00"))
    assert actor.first_outcome() == "connected"
    actor.subscribe(other.policy)
    actor.subscribe(other.control)
    actor.subscribe(RUN.control)

    actor.publish(other.transitions("sim-00"), b"into another run")
    actor.publish(other.status("sim-00"), b"status in another run", retain=True)
    actor.publish(RUN.status("sim-00"), b"own status")
    assert learner.until(b"own status") == [b"own status"]

    learner.publish(other.policy, b"other run's policy", retain=True)
    learner.publish(other.control, b"other run's control")
    learner.publish(RUN.control, b"own run's control")
    assert actor.until(b"own run's control") == [b"own run's control"]


def test_a_will_on_another_actors_topic_is_never_delivered(broker, clients) -> None:
    """A last will is a publish too: amqtt refuses the CONNECT that names another actor's
    status; Mosquitto accepts it and drops the will on the ACL when it fires."""
    import paho.mqtt.client as mqtt

    learner = clients(broker, **login(broker, "learner"))
    assert learner.first_outcome() == "connected"
    learner.subscribe(RUN.all_status)
    creds = login(broker, "sim-00")
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    client.username_pw_set(creds["username"], creds["password"])
    client.will_set(RUN.status("sim-01"), b"forged will", qos=1)
    outcomes: queue.Queue[bool] = queue.Queue()
    client.on_connect = lambda _c, _u, _f, rc, _p: outcomes.put(rc.is_failure)
    client.connect(broker.host, broker.port)
    client.loop_start()
    try:
        refused = outcomes.get(timeout=WAIT_S)
    finally:
        client.loop_stop()
        sock = client.socket()
        if sock is not None:  # no DISCONNECT: the will fires where it was accepted
            sock.close()
    assert refused == (broker.kind == "amqtt")
    honest = clients(broker, **login(broker, "sim-01"))
    assert honest.first_outcome() == "connected"
    honest.publish(RUN.status("sim-01"), b"own status")
    assert learner.until(b"own status") == [b"own status"]


def test_accounts_reject_bad_names() -> None:
    with pytest.raises(ValueError, match="unique"):
        BrokerAccounts(actors=("learner",))
    with pytest.raises(ValueError, match="username"):
        BrokerAccounts(actors=("a:b",))
    with pytest.raises(ValueError, match="actor|username"):
        BrokerAccounts(actors=("a/b",))
