"""Where credentials come from (URL, BrokerAuth, config, board file, command line) and the
clear errors for bad ones. No broker needed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edge_rl.boards import load_board
from edge_rl.config import load_run_config
from edge_rl.transport.address import parse_broker_address
from edge_rl.transport.auth import AuthError, BrokerAuth, read_password_file
from edge_rl.transport.mqtt import MqttTransport
from tests.harness.paths import REPO


def secret(path: Path, text: str = "s3cret\n", mode: int = 0o600) -> Path:
    path.write_text(text)
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("mqtts://broker.lan", ("broker.lan", 8883, True)),
        ("mqtts://127.0.0.1:18883", ("127.0.0.1", 18883, True)),
        ("mqtt://broker.lan", ("broker.lan", 1883, False)),
    ],
)
def test_mqtts_urls(url, expected) -> None:
    assert tuple(parse_broker_address(url)) == expected


@pytest.mark.parametrize("url", ["mqtts://u:p@host", "mqtt://u@host:1883"])
def test_credentials_in_a_url_are_refused_with_the_way_to_give_them(url) -> None:
    with pytest.raises(ValueError, match="must not carry credentials.*--password-file"):
        parse_broker_address(url)


@pytest.mark.parametrize("bad_mode", [0o640, 0o604, 0o660, 0o644])
def test_password_file_readable_by_others_is_refused(tmp_path, bad_mode) -> None:
    path = secret(tmp_path / "password", mode=bad_mode)
    with pytest.raises(AuthError, match=r"group or others.*chmod 600"):
        read_password_file(path)


def test_password_file_first_line_and_empty_one(tmp_path) -> None:
    assert read_password_file(secret(tmp_path / "p", "abc\nignored\n")) == "abc"
    with pytest.raises(AuthError, match="empty"):
        read_password_file(secret(tmp_path / "q", ""))
    with pytest.raises(AuthError, match="not found"):
        read_password_file(tmp_path / "missing")


def test_password_from_an_environment_variable(monkeypatch) -> None:
    auth = BrokerAuth(username="pi-01", password_env="EDGE_RL_TEST_PW")
    with pytest.raises(AuthError, match="EDGE_RL_TEST_PW is not set"):
        auth.password()
    monkeypatch.setenv("EDGE_RL_TEST_PW", "from-env")
    assert auth.password() == "from-env"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cert_file": "c.crt"}, "both cert_file and key_file"),
        ({"key_file": "c.key"}, "both cert_file and key_file"),
        ({"username": "u", "password_file": "p", "password_env": "E"}, "not both"),
        ({"username": ""}, "non-empty"),
    ],
)
def test_broker_auth_rejects_bad_combinations(kwargs, message) -> None:
    with pytest.raises(AuthError, match=message):
        BrokerAuth(**kwargs)


def test_a_password_needs_a_username(tmp_path) -> None:
    with pytest.raises(AuthError, match="needs a username"):
        BrokerAuth(password_file=str(secret(tmp_path / "p"))).password()


def test_tls_files_need_mqtts(tmp_path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("x")
    with pytest.raises(AuthError, match="mqtts://"):
        MqttTransport("mqtt://127.0.0.1:1883", "c", auth=BrokerAuth(ca_file=str(ca)))


def test_missing_or_unusable_tls_files_are_clear_errors(tmp_path) -> None:
    with pytest.raises(AuthError, match="ca_file .* not found"):
        MqttTransport("mqtts://127.0.0.1", "c", auth=BrokerAuth(ca_file=str(tmp_path / "nope")))
    ca = tmp_path / "ca.crt"
    ca.write_text("not a certificate")
    with pytest.raises(AuthError, match="cannot load the TLS files"):
        MqttTransport("mqtts://127.0.0.1", "c", auth=BrokerAuth(ca_file=str(ca)))
    key = secret(tmp_path / "client.key", "x", mode=0o644)
    with pytest.raises(AuthError, match="client key .* group or others"):
        BrokerAuth(cert_file=str(ca), key_file=str(key)).check_files()


def test_merged_prefers_the_command_line() -> None:
    config = BrokerAuth(ca_file="a.crt", username="learner", password_file="cfg-pw")
    merged = config.merged(BrokerAuth(username="other", password_env="PW"))
    assert merged == BrokerAuth(ca_file="a.crt", username="other", password_env="PW")


def test_run_config_transport_auth(tmp_path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text("env_id: CartPole-v1\ntransport:\n  auth: {ca_file: ca.crt, username: lrn}\n")
    assert load_run_config(path).transport.auth == BrokerAuth(ca_file="ca.crt", username="lrn")
    path.write_text("env_id: CartPole-v1\ntransport:\n  auth: {username: l, password: hunter2}\n")
    with pytest.raises(ValueError, match="password"):  # a secret never goes in a config
        load_run_config(path)
    path.write_text("env_id: CartPole-v1\ntransport:\n  auth: {cert_file: c.crt}\n")
    with pytest.raises(ValueError, match="key_file"):
        load_run_config(path)


def test_board_file_auth_paths_are_relative_to_the_board_file(tmp_path) -> None:
    board = (REPO / "firmware_configs" / "rpi4.yaml").read_text()
    path = tmp_path / "boards" / "pi.yaml"
    path.parent.mkdir()
    path.write_text(board + "auth:\n  ca_file: creds/ca.crt\n  password_file: /etc/pw\n")
    auth = load_board(path).auth
    assert auth.ca_file == str(tmp_path / "boards" / "creds" / "ca.crt")
    assert auth.password_file == "/etc/pw" and auth.username is None
    assert load_board(REPO / "firmware_configs" / "rpi4.yaml").auth.empty


def test_from_directory_takes_what_is_there(tmp_path) -> None:
    (tmp_path / "ca.crt").write_text("x")
    secret(tmp_path / "password")
    auth = BrokerAuth.from_directory(tmp_path, "pi-01")
    assert auth == BrokerAuth(
        ca_file=str(tmp_path / "ca.crt"), username="pi-01", password_file=str(tmp_path / "password")
    )
    with pytest.raises(AuthError, match="not found"):
        BrokerAuth.from_directory(tmp_path / "nope", "pi-01")


def test_argv_carries_no_secret(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PW", "hunter2")
    auth = BrokerAuth(ca_file="ca.crt", username="pi-01", password_env="PW")
    assert auth.argv() == ["--ca-file", "ca.crt", "--username", "pi-01", "--password-env", "PW"]
    assert "hunter2" not in repr(auth)
