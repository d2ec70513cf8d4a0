"""The commands a deployment runs, over TLS with passwords against the shipped
host/mosquitto.conf: `edge-rl credentials`, then `edge-rl learn --broker mqtts://...
--credentials` and `edge-rl fleet --credentials` as separate processes. And the clear
errors of bad credentials options."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edge_rl.wire.signing import Signer
from tests.harness.paths import REPO
from tests.harness.waits import exit_code

CONFIG = REPO / "examples" / "cartpole_dqn.yaml"


def cli_proc(args: list[str], out: Path) -> subprocess.Popen:
    with open(out, "w") as f:  # a file, not a pipe: nothing blocks on a full pipe
        return subprocess.Popen(
            [sys.executable, "-m", "edge_rl.cli", *args],
            cwd=REPO,
            stdout=f,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.slow
def test_learn_and_fleet_over_tls_with_passwords(
    tmp_path, cli, tiny_learn, mosquitto_with, shipped_config
) -> None:
    creds = tmp_path / "creds"
    made = cli(
        "credentials",
        str(creds),
        "--actors",
        "pi-00,pi-01",
        "--tls",
        "--passwords",
        "--server-name",
        "127.0.0.1",
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    broker = mosquitto_with(shipped_config(creds, certificates=False), tls=True)
    run = tmp_path / "run"
    keys = cli("keygen", str(tmp_path / "learner.key"), timeout=60)  # the policy signing key
    assert keys.returncode == 0, keys.stderr
    tiny = [a for a in tiny_learn("dqn") if a not in ("--fleet", "2", "--board", "rpi5")]
    learner = cli_proc(
        [
            "learn",
            "--config",
            str(CONFIG),
            "--out",
            str(run),
            *tiny,
            "--set",
            "run=tls-smoke",
            "--fleet",
            "0",
            "--broker",
            broker.url,
            "--credentials",
            str(creds / "learner"),
            "--signing-key",
            str(tmp_path / "learner.key"),
        ],
        tmp_path / "learn.out",
    )
    fleet = cli_proc(
        [
            "fleet",
            "--broker",
            broker.url,
            "--env",
            "CartPole-v1",
            "-n",
            "2",
            "--board",
            "rpi5",
            "--run",
            "tls-smoke",
            "--id-prefix",
            "pi",
            "--credentials",
            str(creds),
            "--log-dir",
            str(tmp_path / "fleet"),
            "--policy-key",
            str(tmp_path / "learner.pub"),
        ],
        tmp_path / "fleet.out",
    )
    try:
        learn_log = (tmp_path / "learn.out").read_text
        fleet_log = (tmp_path / "fleet.out").read_text
        code = exit_code(learner, 240, "the learner's run", lambda: learn_log()[-4000:])
        assert code == 0, learn_log()[-4000:]
        # The run is over: the fleet serves its result (no control message ends a board)
        # until Ctrl-C, on which each actor exits cleanly.
        assert fleet.poll() is None, fleet_log()[-4000:]
        os.kill(fleet.pid, signal.SIGINT)
        code = exit_code(fleet, 60, "the fleet after Ctrl-C", lambda: fleet_log()[-4000:])
        assert code == 0, fleet_log()[-4000:]
    finally:
        for p in (learner, fleet):
            if p.poll() is None:  # SIGTERM first: each stops its children itself
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["transitions_received"] >= 1200
    assert set(summary["actors"]) == {"pi-00", "pi-01"}
    assert summary["transitions_rejected"] == 0
    log = broker.log.read_text()
    for user in ("learner", "pi-00", "pi-01"):
        assert f"u'{user}'" in log  # each logged in under its own name


def test_learn_refuses_credentials_for_the_embedded_broker(cli, tmp_path) -> None:
    result = cli(
        "learn",
        "--config",
        str(CONFIG),
        "--out",
        str(tmp_path / "r"),
        "--username",
        "learner",
        timeout=60,
    )
    assert result.returncode != 0 and "credentials are for --broker" in result.stderr


def test_actor_refuses_a_readable_password_file(cli, tmp_path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    os.chmod(password, 0o644)
    result = cli(
        "actor",
        "--board",
        "rpi4",
        "--broker",
        "mqtt://127.0.0.1:1",
        "--env",
        "CartPole-v1",
        "--id",
        "pi-01",
        "--password-file",
        str(password),
        timeout=60,
    )
    assert result.returncode != 0
    assert "chmod 600" in result.stderr and "Traceback" not in result.stderr


def test_fleet_refuses_a_missing_credentials_directory(cli, tmp_path) -> None:
    key = tmp_path / "learner.pub"
    Signer.generate().write_public(key)
    result = cli(
        "fleet",
        "--broker",
        "mqtts://127.0.0.1:1",
        "--env",
        "CartPole-v1",
        "-n",
        "1",
        "--credentials",
        str(tmp_path / "nope"),
        "--policy-key",
        str(key),
        timeout=60,
    )
    assert result.returncode != 0
    assert "not found" in result.stderr and "Traceback" not in result.stderr


def test_learn_refuses_a_readable_password_file_before_it_starts(cli, tmp_path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    os.chmod(password, 0o640)
    result = cli(
        "learn",
        "--config",
        str(CONFIG),
        "--out",
        str(tmp_path / "r"),
        "--broker",
        "mqtts://127.0.0.1:1",
        "--password-file",
        str(password),
        timeout=60,
    )
    assert result.returncode != 0
    assert "chmod 600" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "r").exists()  # refused before anything was started or written


def test_learn_refuses_tls_files_with_a_plain_url(cli, tmp_path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    result = cli(
        "learn",
        "--config",
        str(CONFIG),
        "--out",
        str(tmp_path / "r"),
        "--broker",
        "mqtt://127.0.0.1:1",
        "--ca-file",
        str(ca),
        timeout=60,
    )
    assert result.returncode != 0
    assert "needs an mqtts:// URL" in result.stderr and "Traceback" not in result.stderr
