"""A transport's close on the documented TLS broker (host/mosquitto.conf, passwords, the
ACL ``edge-rl credentials --run`` generates), with a real Mosquitto:

(a) ``stop()`` while messages keep arriving and just after QoS 1 publishes is a clean
    DISCONNECT: the broker reads it (no "out of memory" drop) and does not publish the
    last will over the retained state;
(b) after ``replace_will``, a client killed by SIGKILL (an unclean close) leaves the new
    will retained, not the one it connected with; without it, the old one.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import MqttTransport
from tests.harness.paths import REPO
from tests.harness.waits import bound, wait_for

RUN = "close"
CONTROL = f"edge-rl/{RUN}/control"
STATUS = f"edge-rl/{RUN}/actors/pi-00/status"


@pytest.fixture
def broker(tmp_path, cli, mosquitto_with, shipped_config):
    """(Mosquitto from host/mosquitto.conf over TLS with the generated ACL, creds dir)."""
    creds = tmp_path / "creds"
    made = cli(
        "credentials",
        str(creds),
        "--actors",
        "pi-00",
        "--tls",
        "--passwords",
        "--server-name",
        "127.0.0.1",
        "--run",
        RUN,
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    lines = shipped_config(creds, certificates=False, generated_acl=True)
    return mosquitto_with(lines, tls=True), creds


def auth(creds: Path, who: str) -> BrokerAuth:
    directory = creds / "learner" if who == "learner" else creds / "boards" / who
    return BrokerAuth.from_directory(directory, who)


def retained(url: str, creds: Path, topic: str) -> list[bytes]:
    """The retained message on ``topic``, read by a fresh client of the learner's."""
    seen: list[bytes] = []
    reader = MqttTransport(
        url,
        "learner",
        subscriptions=[(topic, 1)],
        on_message=lambda _t, p: seen.append(p),
        auth=auth(creds, "learner"),
    )
    reader.start()
    try:
        wait_for(lambda: bool(seen), 10, f"the retained message on {topic}")
    finally:
        reader.stop()
    return seen


def test_stop_under_traffic_is_a_clean_disconnect(broker) -> None:
    mosquitto, creds = broker
    learner = MqttTransport(
        mosquitto.url,
        "learner",
        subscriptions=[(f"edge-rl/{RUN}/actors/+/status", 1)],
        on_message=lambda _t, _p: None,
        will=(CONTROL, b"will"),
        auth=auth(creds, "learner"),
    )
    learner.start()
    assert learner.wait_connected(bound(10))
    assert learner.publish(CONTROL, b"final", retain=True, wait=bound(5))
    board = MqttTransport(mosquitto.url, "pi-00", auth=auth(creds, "pi-00"))
    board.start()
    assert board.wait_connected(bound(10))
    flooding = threading.Event()
    flooding.set()

    def flood() -> None:  # statuses keep coming while the learner leaves
        while flooding.is_set():
            board.publish(STATUS, b"x" * 2000, qos=0)
            time.sleep(0.0005)  # the pace of the flood, not a wait for anything

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    try:
        wait_for(lambda: mosquitto.log.read_text().count("PUBLISH to learner") > 200, 10, "traffic")
        for actor in ("pi-00", "pi-01", "pi-02"):  # as FleetControl.clear: grants cleared
            learner.publish(f"edge-rl/{RUN}/actors/{actor}/credit", b"", retain=True)
        learner.stop()
    finally:
        flooding.clear()
        sender.join(5)
        board.stop()
    log = mosquitto.log.read_text()
    assert "Received DISCONNECT from learner" in log, log[-3000:]
    assert "learner disconnected due to" not in log, log[-3000:]
    assert retained(mosquitto.url, creds, CONTROL) == [b"final"]


CHILD = """
import sys, time
from pathlib import Path
from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import MqttTransport
url, creds, replace, topic = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "1", sys.argv[4]
t = MqttTransport(url, "learner", will=(topic, b"paused"),
                  auth=BrokerAuth.from_directory(creds / "learner", "learner"))
t.start()
assert t.wait_connected(30)
if replace:
    assert t.replace_will(topic, b"serving", 30)
assert t.publish(topic, b"serving", retain=True, wait=30)
print("ready", flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("replace", [True, False], ids=["replaced", "as-connected"])
def test_an_unclean_close_publishes_the_will_in_place(broker, tmp_path, replace) -> None:
    mosquitto, creds = broker
    out = tmp_path / "child.out"
    with open(out, "w") as f:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, mosquitto.url, str(creds), str(int(replace)), CONTROL],
            cwd=REPO,
            stdout=f,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(lambda: "ready" in out.read_text(), 30, "the client's final state", 0.1)
        child.send_signal(signal.SIGKILL)  # an unclean close: the broker publishes the will
        child.wait(bound(10))
        ended = re.compile(r"Client learner (closed its connection|disconnected)|on client learner")
        wait_for(
            lambda: len(ended.findall(mosquitto.log.read_text())) > (1 if replace else 0),
            10,
            "the broker to see the killed client's connection end",
        )
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    expected = b"serving" if replace else b"paused"
    assert retained(mosquitto.url, creds, CONTROL) == [expected]
