"""A finished run ends ``serving`` on the documented TLS broker (host/mosquitto.conf with
``edge-rl credentials --run``'s files and generated ACL), and stays so:

(a) ``edge-rl learn`` to its budget with two boards (``edge-rl fleet``), then exit: the
    broker reads the learner's DISCONNECT (no "out of memory" drop), the retained control
    is ``serving`` of that run start, and ``edge-rl deploy`` rolls the run's policy out;
(b) the learner killed by SIGKILL right after it sent ``serving`` (while it evaluates the
    policy): the broker publishes its last will, and the control is still ``serving``.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edge_rl.transport.auth import BrokerAuth
from edge_rl.transport.mqtt import MqttTransport
from edge_rl.types import ControlMessage
from edge_rl.wire.messages import decode_control
from edge_rl.wire.topics import Topics
from tests.harness.paths import REPO
from tests.harness.waits import bound, exit_code, wait_for

CONFIG = REPO / "examples" / "cartpole_dqn.yaml"
RUN = "tls-final"
TOPICS = Topics("edge-rl", RUN)
WATCH = "watch-00"  # a board id of the run's that no board process uses: the tests read with it
DEPLOY = "--canary 0.5 --window 30 --min-episodes 2 --max-drop 0.9 --rate 5 --confirm 30"


def cli_proc(args: list[str], out: Path) -> subprocess.Popen:
    with open(out, "w") as f:  # a file, not a pipe: nothing blocks on a full pipe
        return subprocess.Popen(
            [sys.executable, "-m", "edge_rl.cli", *args],
            cwd=REPO,
            stdout=f,
            stderr=subprocess.STDOUT,
        )


class Controls:
    """Every control message on the run's control topic (the retained one first), read as a
    board enrolled in the run: the broker makes the username the client id, so a second
    client of the learner's credentials would take over the learner's connection."""

    def __init__(self, url: str, creds: Path) -> None:
        self.seen: list[ControlMessage] = []
        self.transport = MqttTransport(
            url,
            WATCH,
            subscriptions=[(TOPICS.control, 1)],
            on_message=lambda _t, p: p and self.seen.append(decode_control(p)),
            auth=BrokerAuth.from_directory(creds / "boards" / WATCH, WATCH),
        )

    def __enter__(self) -> Controls:
        self.transport.start()
        assert self.transport.wait_connected(bound(10))
        return self

    def __exit__(self, *_exc) -> None:
        self.transport.stop()


def retained_control(url: str, creds: Path) -> ControlMessage:
    with Controls(url, creds) as c:
        wait_for(lambda: bool(c.seen), 10, "the retained control")
        return c.seen[0]


@pytest.fixture
def deployment(tmp_path, cli, tiny_learn, mosquitto_with, shipped_config):
    """``start() -> (broker, learner, fleet, run dir)``: credentials --run for two boards,
    Mosquitto from host/mosquitto.conf with them, and ``edge-rl learn --fleet 0`` with
    ``edge-rl fleet`` of two boards on it; every process ended at teardown."""
    creds = tmp_path / "creds"
    made = cli(
        *("credentials", str(creds), "--actors", f"pi-00,pi-01,{WATCH}", "--tls", "--passwords"),
        *("--server-name", "127.0.0.1", "--run", RUN),
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    keys = cli("keygen", str(tmp_path / "learner.key"), timeout=60)
    assert keys.returncode == 0, keys.stderr
    broker = mosquitto_with(shipped_config(creds, certificates=False, generated_acl=True), tls=True)
    procs: list[subprocess.Popen] = []
    tiny = [a for a in tiny_learn("dqn") if a not in ("--fleet", "2", "--board", "rpi5")]

    def start():
        run = tmp_path / "run"
        learner = cli_proc(
            [
                *("learn", "--config", str(CONFIG), "--out", str(run), *tiny),
                *("--set", f"run={RUN}", "--fleet", "0", "--broker", broker.url),
                *("--credentials", str(creds / "learner")),
                *("--signing-key", str(tmp_path / "learner.key")),
            ],
            tmp_path / "learn.out",
        )
        fleet = cli_proc(
            [
                *("fleet", "--broker", broker.url, "--env", "CartPole-v1", "-n", "2"),
                *("--board", "rpi5", "--run", RUN, "--id-prefix", "pi"),
                *("--credentials", str(creds), "--log-dir", str(tmp_path / "fleet")),
                *("--policy-key", str(tmp_path / "learner.pub")),
            ],
            tmp_path / "fleet.out",
        )
        procs.extend([learner, fleet])
        return broker, learner, fleet, run

    yield start, creds, tmp_path
    for p in procs:
        if p.poll() is None:  # SIGTERM first: each stops its children itself
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.mark.slow
def test_a_finished_run_ends_serving_and_deploys(deployment, cli) -> None:
    start, creds, tmp_path = deployment
    broker, learner, fleet, run = start()
    learn_log = (tmp_path / "learn.out").read_text
    code = exit_code(learner, 240, "the learner's run", lambda: learn_log()[-4000:])
    assert code == 0, learn_log()[-4000:]
    log = broker.log.read_text()
    assert "Received DISCONNECT from learner" in log, log[-3000:]
    assert "learner disconnected due to" not in log, log[-3000:]
    summary = json.loads((run / "summary.json").read_text())
    assert retained_control(broker.url, creds) == ControlMessage(
        "serving", summary["run_id"], "", retained_control(broker.url, creds).status_interval_s
    )
    assert fleet.poll() is None, (tmp_path / "fleet.out").read_text()[-3000:]
    deployed = cli(
        *("deploy", str(run), "--broker", broker.url, "--run", RUN, *DEPLOY.split()),
        *("--credentials", str(creds / "learner"), "--signing-key", str(tmp_path / "learner.key")),
        timeout=120,
    )
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    assert ": deployed:" in deployed.stdout


ENDED = re.compile(r"Client learner (closed its connection|disconnected)|on client learner,")


@pytest.mark.slow
def test_a_learner_killed_after_serving_leaves_the_run_serving(deployment) -> None:
    start, creds, tmp_path = deployment
    broker, learner, _fleet, _run = start()
    learn_log = (tmp_path / "learn.out").read_text
    with Controls(broker.url, creds) as controls:
        wait_for(
            lambda: any(c.state == "serving" for c in controls.seen) or learner.poll() is not None,
            240,
            "the learner's serving",
            detail=lambda: learn_log()[-4000:],
        )
    assert learner.poll() is None, "the learner exited before it could be killed"
    ends = len(ENDED.findall(broker.log.read_text()))
    learner.send_signal(signal.SIGKILL)  # an unclean close: the broker publishes the will
    learner.wait(bound(10))
    wait_for(
        lambda: len(ENDED.findall(broker.log.read_text())) > ends,
        30,
        "the broker to see the killed learner's connection end",
    )
    served = next(c for c in controls.seen if c.state == "serving")
    final = retained_control(broker.url, creds)
    assert (final.state, final.run_id) == ("serving", served.run_id), final
