"""Shared fixtures: real brokers on free loopback ports and paho clients connected to them.

A missing Mosquitto (or ``setpriv``) skips the tests that need it on a laptop and fails
them in CI (``CI`` set to anything but ``0``/``false``): CI must not go green by skipping.
The rule is enforced for every test: in CI, any skip (a ``skipif``, an ``importorskip``
of a declared dependency, a ``pytest.skip``) is reported as a failure, unless the test is
in ``CI_MAY_SKIP`` with the reason it may.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.broker.executables import find_mosquitto
from edge_rl.transport.address import parse_broker_url
from tests.harness.learn import SMALL_NETS, TINY, run_cli
from tests.harness.waits import bound, slack, until

# Real Mosquitto processes with a config of a test's own (TLS, passwords, ACLs) and paho
# clients that report how their connection ended: the security, flash and doctor tests'.
# And the session's one shared `edge-rl learn` run, for the checks that only read it.
pytest_plugins = ["tests.harness.mosquitto_auth", "tests.harness.shared_run"]

CONNECT_TIMEOUT_S = 5.0


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


# Tests that may skip even in CI: nodeid -> why. Keep it empty or tiny; every entry is a
# part of the suite that CI does not run.
CI_MAY_SKIP: dict[str, str] = {}


def _require(found: bool, message: str) -> None:
    """Skip (locally) or fail (in CI) the calling test when ``found`` is false."""
    if found:
        return
    if _in_ci():
        pytest.fail(f"CI requires it: {message}", pytrace=False)
    pytest.skip(message)


def require_mosquitto() -> None:
    """Skip (locally) or fail (in CI) the calling test when Mosquitto is not installed."""
    _require(
        find_mosquitto() is not None,
        "mosquitto not found on PATH or in /usr/sbin; install it with "
        "`apt-get install mosquitto` (Debian/Ubuntu) or `brew install mosquitto` (macOS)",
    )


@pytest.fixture(scope="session")
def mosquitto_available() -> None:
    """Request it in a test that starts its own Mosquitto: skips or fails like the others."""
    require_mosquitto()


@pytest.fixture(scope="session")
def setpriv_available() -> None:
    """util-linux's ``setpriv``, which ties the broker's and actors' lives to the learner's
    (edge_rl/broker/embedded.py ``die_with_parent``): skips or fails like Mosquitto."""
    _require(
        shutil.which("setpriv") is not None,
        "setpriv not found; install util-linux (`apt-get install util-linux`; on Debian "
        "before bookworm, `apt-get install setpriv`); `make test` does when run as root",
    )


def _ci_refuses_skip(report) -> bool:
    return (
        _in_ci()
        and report.skipped
        and not hasattr(report, "wasxfail")  # an expected failure is not a skip
        and report.nodeid not in CI_MAY_SKIP
    )


def _as_failure(report) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
    report.outcome = "failed"
    report.longrepr = f"skipped in CI (CI={os.environ.get('CI')}), which must not skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI, a test's skip (at setup or in the test) is a failure."""
    outcome = yield
    report = outcome.get_result()
    if _ci_refuses_skip(report):
        _as_failure(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """In CI, a module that skips itself (``importorskip`` at module level) is a failure."""
    outcome = yield
    report = outcome.get_result()
    if _ci_refuses_skip(report):
        _as_failure(report)


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """pytest-timeout's bound on a test (the ini's, or its own ``timeout`` marker) is for a
    quiet machine: stretched here by the load when the test starts
    (``tests.harness.waits.slack``), before pytest-timeout reads it."""
    marker = item.get_closest_marker("timeout")
    base = marker.args[0] if marker is not None and marker.args else None
    if base is None and marker is None:
        base = item.config.getoption("timeout", None) or item.config.getini("timeout")
    if base and float(base) > 0 and slack() > 1.0:
        item.add_marker(pytest.mark.timeout(float(base) * slack()), append=False)
    yield


def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist (``make test`` runs two workers), the checks that read the
    session's shared run go to one worker, so that the run is made once, not once a worker
    (``--dist loadgroup``)."""
    for item in items:
        if "cartpole_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("cartpole_run"))


@pytest.fixture(scope="session")
def mosquitto() -> Iterator[EmbeddedBroker]:
    """One Mosquitto for the whole session. Tests share it: use unique topics."""
    require_mosquitto()
    with EmbeddedBroker(kind="mosquitto") as broker:
        yield broker


@pytest.fixture
def fresh_mosquitto() -> Iterator[EmbeddedBroker]:
    """A Mosquitto of this test's own, free to kill (``.kill()``) and restart (``.start()``)."""
    require_mosquitto()
    with EmbeddedBroker(kind="mosquitto") as broker:
        yield broker


MqttClientFactory = Callable[..., mqtt.Client]


@pytest.fixture
def mqtt_client_factory() -> Iterator[MqttClientFactory]:
    """``make(broker_or_url, client_id="", **client_kwargs) -> connected paho client``.

    Callback API v2, MQTT 5 (3.1.1 against a broker that has no v5, i.e. amqtt),
    network loop running. Every client is disconnected and its loop stopped at teardown.
    """
    clients: list[mqtt.Client] = []

    def make(broker: EmbeddedBroker | str, client_id: str = "", **client_kwargs) -> mqtt.Client:
        if isinstance(broker, EmbeddedBroker):
            host, port, v5 = broker.host, broker.port, broker.supports_mqtt5
        else:
            (host, port), v5 = parse_broker_url(broker), True
        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
            **client_kwargs,
        )
        connected = threading.Event()
        result: list[mqtt.ReasonCode] = []

        def on_connect(_client, _userdata, _flags, reason_code, _properties) -> None:
            result.append(reason_code)
            connected.set()

        client.on_connect = on_connect
        clients.append(client)
        client.connect(host, port)
        client.loop_start()
        if not connected.wait(CONNECT_TIMEOUT_S):
            pytest.fail(f"no CONNACK from {host}:{port} within {CONNECT_TIMEOUT_S} s")
        if result[0].is_failure:
            pytest.fail(f"broker {host}:{port} refused the connection: {result[0]}")
        client.on_connect = None
        return client

    yield make
    for client in clients:
        client.disconnect()
        client.loop_stop()


@pytest.fixture
def cli():
    """Run the ``edge-rl`` command as a user would (see ``run_cli``)."""
    return run_cli


@pytest.fixture
def tiny_learn():
    """``algo -> flags`` that make ``edge-rl learn`` a ~30 s smoke run (with selection)."""
    return lambda algo: [*TINY, *SMALL_NETS[algo]]


@pytest.fixture(scope="session")
def policy_keys(tmp_path_factory) -> tuple:
    """``(signer, public key file)``: a policy signing key made for this test session. Tests
    sign the policies they publish with it and hand the .pub to the actors they start."""
    from edge_rl.wire.signing import Signer

    keys = tmp_path_factory.mktemp("keys")
    signer = Signer.load_or_create(keys / "learner.key")
    signer.write_public(keys / "learner.pub")
    return signer, keys / "learner.pub"


FAST_BOARD = """\
board: test-board
num_threads: 1
batch_size: 16
flush_interval_s: 0.1
status_interval_s: 0.2
"""


@pytest.fixture
def fast_board(tmp_path) -> Path:
    """A board file for short real runs: small batches, flushed and reported often."""
    path = tmp_path / "test-board.yaml"
    path.write_text(FAST_BOARD)
    return path


def _wait_for(cond: Callable[[], bool], timeout: float) -> bool:
    """True once ``cond()`` holds, False after ``timeout`` s stretched by the machine's load
    (``tests.harness.waits.bound``; polls every 20 ms)."""
    return until(cond, bound(timeout), step=0.02)


@pytest.fixture
def wait_for() -> Callable[[Callable[[], bool], float], bool]:
    return _wait_for


TEST_RUN_ID = "test-run-start"  # the run start of control messages tests publish by hand


@pytest.fixture
def grant_run():
    """``grant_run(client, topics, actor_id, session, state=, credit=, run_id=)``."""
    return _grant_run


def _grant_run(
    client,
    topics,
    actor_id: str,
    session: int,
    *,
    state: str = "running",
    credit: int = 10**9,
    run_id: str = TEST_RUN_ID,
) -> None:
    """Be the learner for one actor (protocol v3 §5): a retained control message naming a
    run start, and a retained credit grant (default: no practical limit) to its process."""
    from edge_rl.types import ControlMessage, CreditGrant
    from edge_rl.wire.messages import encode_control, encode_credit

    control = encode_control(ControlMessage(state, run_id))
    client.publish(topics.control, control, qos=1, retain=True).wait_for_publish(5)
    grant = encode_credit(CreditGrant(run_id, session, credit))
    client.publish(topics.credit(actor_id), grant, qos=1, retain=True).wait_for_publish(5)
