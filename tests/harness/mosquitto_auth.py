"""Real Mosquitto processes with a config of each test's own, and paho clients that report
how their connection attempt ended (Mosquitto's own test-suite style: real refusals).

Every key, certificate and password is made by the test at run time (``edge-rl
credentials``' code, ``mosquitto_passwd``); nothing secret is committed.
"""

from __future__ import annotations

import os
import pwd
import queue
import re
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from edge_rl.broker.executables import find_mosquitto
from edge_rl.transport.address import free_port
from tests.harness.paths import REPO
from tests.harness.waits import bound, until

WAIT_S = 5.0


class Mosquitto:
    """``mosquitto -c`` on a config written from ``lines``: a listener on 127.0.0.1 first,
    unless the lines have their own with ``{PORT}`` in it (replaced by a free port)."""

    def __init__(self, workdir: Path, lines: list[str], *, tls: bool = False) -> None:
        self.port = free_port()
        self.host = "127.0.0.1"
        self.tls = tls
        own_listener = any("{PORT}" in line for line in lines)
        lines = [line.replace("{PORT}", str(self.port)) for line in lines]
        listener = [] if own_listener else [f"listener {self.port} {self.host}"]
        own = ["log_dest stderr", "log_type all"]
        if not any(line.startswith("persistence") for line in lines):
            own.append("persistence false")
        if os.geteuid() == 0:  # otherwise Mosquitto switches to user "mosquitto"
            own.append(f"user {pwd.getpwuid(os.geteuid()).pw_name}")
        self.conf = workdir / f"mosquitto-{self.port}.conf"
        self.conf.write_text("\n".join([*listener, *lines, *own]) + "\n")
        self.log = workdir / f"mosquitto-{self.port}.log"
        mosquitto = find_mosquitto()
        assert mosquitto is not None
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [mosquitto, "-c", str(self.conf)], stdout=out, stderr=subprocess.STDOUT
            )
        running = re.compile(r"mosquitto version \S+ running")
        until(
            lambda: running.search(self.log.read_text()) or self.proc.poll() is not None,
            bound(10),
        )
        if not running.search(self.log.read_text()):
            self.stop()
            pytest.fail(f"mosquitto did not start:\n{self.log.read_text()[-3000:]}")

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://{self.host}:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def mosquitto_with(mosquitto_available, tmp_path) -> Iterator:
    """``start(lines, tls=False) -> Mosquitto``: each stopped at teardown."""
    started: list[Mosquitto] = []

    def start(lines: list[str], *, tls: bool = False) -> Mosquitto:
        broker = Mosquitto(tmp_path, lines, tls=tls)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def shipped_config(tmp_path):
    """``make(creds, certificates) -> lines``: host/mosquitto.conf with host/acl and the
    broker files of ``edge-rl credentials`` installed in a temp dir, on a loopback port.
    ``certificates``: the client-certificate alternative its comments describe;
    ``generated_acl``: the ACL ``edge-rl credentials --run`` wrote instead of host/acl."""

    def make(creds: Path, *, certificates: bool, generated_acl: bool = False) -> list[str]:
        installed = tmp_path / "etc"
        shutil.copytree(creds / "broker", installed)
        if not generated_acl:
            shutil.copy(REPO / "host" / "acl", installed / "acl")
        (tmp_path / "persist").mkdir()
        text = (REPO / "host" / "mosquitto.conf").read_text()
        assert "listener 8883\n" in text and "/etc/mosquitto/edge-rl/" in text
        text = text.replace("listener 8883\n", "listener {PORT} 127.0.0.1\n")
        text = text.replace("/etc/mosquitto/edge-rl/", f"{installed}/")
        text = text.replace("/var/lib/mosquitto/", f"{tmp_path / 'persist'}/")
        if certificates:
            for key in ("require_certificate", "use_identity_as_username"):
                assert f"{key} false\n" in text
                text = text.replace(f"{key} false\n", f"{key} true\n")
        return text.splitlines()

    return make


class Client:
    """A paho client (MQTT 3.1.1) and what became of its connection attempt."""

    def __init__(
        self,
        broker,
        *,
        username=None,
        password=None,
        tls: ssl.SSLContext | None = None,
        client_id: str = "",
    ) -> None:
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311
        )
        if username is not None:
            self.client.username_pw_set(username, password)
        if tls is not None:
            self.client.tls_set_context(tls)
        self.outcome: queue.Queue[str] = queue.Queue()
        self.messages: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        self._subscribed = threading.Event()
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = lambda *_a: self.outcome.put("closed")
        self.client.on_message = lambda _c, _u, msg: self.messages.put(msg)
        self.client.on_subscribe = lambda *_a: self._subscribed.set()
        try:
            self.client.connect(broker.host, broker.port)
        except (OSError, ssl.SSLError) as e:  # a TLS handshake refused at once
            self.outcome.put(f"failed: {e!r}")
            return
        self.client.loop_start()

    def _on_connect(self, _c, _u, _f, reason_code, _p) -> None:
        self.outcome.put(f"refused: {reason_code}" if reason_code.is_failure else "connected")

    def first_outcome(self) -> str:
        """'connected', 'refused: <reason>', 'failed: <error>' or 'closed' (no CONNACK)."""
        try:
            return self.outcome.get(timeout=WAIT_S)
        except queue.Empty:
            return "no answer"

    def subscribe(self, topic: str) -> None:
        self._subscribed.clear()
        self.client.subscribe(topic, qos=1)
        assert self._subscribed.wait(WAIT_S), f"no SUBACK for {topic}"

    def publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(WAIT_S)  # the broker PUBACKs a denied publish too (3.1.1)
        assert info.is_published()

    def until(self, expected_last: bytes) -> list[bytes]:
        """Payloads received up to and including ``expected_last`` (bounded wait).

        Publish the denied messages first and an allowed one last, from the same client:
        Mosquitto forwards one client's messages in order, so when the last one is here, any
        denied one that got through would be here too. No sleeping, no timing.
        """
        out: list[bytes] = []
        while not out or out[-1] != expected_last:
            try:
                out.append(self.messages.get(timeout=WAIT_S).payload)
            except queue.Empty:
                pytest.fail(f"{expected_last!r} never arrived; got {out}")
        return out

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


@pytest.fixture
def clients() -> Iterator:
    """``connect(broker, **kwargs) -> Client``; each closed at teardown."""
    made: list[Client] = []

    def connect(broker, **kwargs) -> Client:
        made.append(Client(broker, **kwargs))
        return made[-1]

    yield connect
    for c in made:
        c.close()


def tls_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context
