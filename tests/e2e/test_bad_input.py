"""A user's mistake comes first, in one line saying what to do, with a non-zero exit and
nothing half-written: each row of the bad-input table, as a user runs the command (a
subprocess, real gymnasium, real Mosquitto). ``learn``'s checks run before TensorFlow is
imported (cli/preflight.py): each run reports whether the process ever imported it.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edge_rl.types import ControlMessage, PolicyBundle
from edge_rl.wire.messages import encode_control
from edge_rl.wire.policy import encode_policy
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from tests.harness.cartpole_policies import MODELS, policy_bundle
from tests.harness.paths import REPO
from tests.harness.waits import bound

CONFIG = REPO / "examples" / "cartpole_dqn.yaml"
# The CLI, and on exit whether TensorFlow was ever imported (one last stderr line).
TRACED = (
    "import atexit, sys; atexit.register(lambda: print('tensorflow imported:', "
    "'tensorflow' in sys.modules, file=sys.stderr)); "
    "from edge_rl.cli.main import main; main(prog_name='edge-rl')"
)


@dataclasses.dataclass(frozen=True)
class Ran:
    code: int
    error: str  # the stderr lines before the TensorFlow report
    seconds: float
    tensorflow: bool


def edge_rl(*args: str, timeout: float = 120) -> Ran:
    start = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-c", TRACED, *args],
        capture_output=True,
        text=True,
        timeout=bound(timeout),
        cwd=REPO,
    )
    *lines, report = p.stderr.strip().splitlines()
    assert report.startswith("tensorflow imported:"), p.stderr
    return Ran(p.returncode, "\n".join(lines), time.monotonic() - start, report.endswith("True"))


def assert_one_line(ran: Ran, *needles: str) -> None:
    assert ran.code == 1, ran
    assert len(ran.error.splitlines()) == 1 and ran.error.startswith("Error: "), ran.error
    assert "Traceback" not in ran.error
    for needle in needles:
        assert needle in ran.error, ran.error


def learn(out: Path, *args: str) -> Ran:
    return edge_rl("learn", "--config", str(CONFIG), "--out", str(out), *args)


def test_an_unknown_env_fails_before_tensorflow_and_leaves_no_run_dir(tmp_path) -> None:
    ran = learn(tmp_path / "run", "--set", "env_id=CartPole-v9")
    assert_one_line(ran, "unknown environment 'CartPole-v9'", "CartPole-v1")
    assert not ran.tensorflow and not (tmp_path / "run").exists()
    assert ran.seconds < bound(20)


def test_an_unreachable_broker_fails_within_seconds_naming_url_and_cause(tmp_path) -> None:
    ran = learn(tmp_path / "run", "--broker", "mqtt://127.0.0.1:1", "--fleet", "0")
    assert_one_line(ran, "mqtt://127.0.0.1:1", "connection refused", "--broker")
    assert not ran.tensorflow and not (tmp_path / "run").exists()
    assert ran.seconds < bound(15)


@pytest.mark.parametrize("where", ["under a file", "in /proc"])
def test_an_out_that_cannot_be_made_is_one_line(tmp_path, where) -> None:
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "run" if where == "under a file" else Path("/proc/edge-rl/run")
    ran = learn(out, "--fleet", "0")
    assert_one_line(ran, str(out), "give another --out")
    assert not ran.tensorflow and not out.exists()


def test_a_missing_signing_key_names_keygen_and_makes_nothing(tmp_path) -> None:
    key = tmp_path / "typo" / "learner.key"
    ran = learn(tmp_path / "run", "--signing-key", str(key))
    assert_one_line(ran, f"edge-rl keygen {key}")
    assert not ran.tensorflow and not (tmp_path / "typo").exists()
    assert not (tmp_path / "run").exists()


@pytest.fixture
def tls_broker(tmp_path, cli, mosquitto_with, shipped_config):
    creds = tmp_path / "creds"
    made = cli(
        *("credentials", str(creds), "--actors", "pi-00", "--tls", "--passwords"),
        *("--server-name", "127.0.0.1", "--run", "bad"),
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    return mosquitto_with(
        shipped_config(creds, certificates=False, generated_acl=True), tls=True
    ), creds


def test_fleet_status_with_a_board_s_credentials_says_whose_are_needed(tls_broker) -> None:
    broker, creds = tls_broker
    board = creds / "boards" / "pi-00"
    for login in (
        ["--credentials", str(board)],
        ["--credentials", str(board), "--username", "pi-00"],
    ):
        ran = edge_rl("fleet-status", "--broker", broker.url, "--run", "bad", *login)
        assert_one_line(ran, "--credentials DIR/learner")
        assert not ran.tensorflow


def test_deploy_of_another_env_s_policy_is_refused_before_anything_is_sent(
    tmp_path, mosquitto_with, clients
) -> None:
    broker = mosquitto_with(["allow_anonymous true"])
    signer = Signer.generate()
    key = tmp_path / "learner.key"
    signer.write_private(key)
    topics = Topics("edge-rl", "cartpole")
    served = policy_bundle(MODELS["good"].read_bytes(), run="cartpole", run_id="s1", version=3)
    pendulum = dataclasses.replace(
        served.manifest,
        env_id="Pendulum-v1",
        env_spec=dataclasses.replace(
            served.manifest.env_spec,
            obs_shape=(3,),
            num_actions=0,
            action_shape=(1,),
            action_low=(-2.0,),
            action_high=(2.0,),
        ),
    )
    source = tmp_path / "pendulum.bundle"
    source.write_bytes(encode_policy(PolicyBundle(pendulum, served.payload), signer))
    learner = clients(broker)
    assert learner.first_outcome() == "connected"
    learner.publish(topics.control, encode_control(ControlMessage("serving", "s1")), retain=True)
    learner.publish(topics.policy, encode_policy(served, signer), retain=True)
    learner.subscribe(f"{topics.base}/actors/+/target")
    ran = edge_rl(
        *("deploy", str(source), "--broker", broker.url, "--run", "cartpole"),
        *("--signing-key", str(key)),
    )
    assert_one_line(ran, "Pendulum-v1", "CartPole-v1", "every board would refuse it")
    assert learner.messages.empty()  # no target was sent to any board
