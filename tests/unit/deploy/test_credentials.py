"""`edge-rl credentials`: what it writes, with which modes, and what it refuses."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from edge_rl.broker import executables
from edge_rl.deploy.credentials import make_credentials


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_command_writes_the_documented_layout(cli, tmp_path, mosquitto_available) -> None:
    out = tmp_path / "creds"
    names = ["--server-name", "learner.lan", "--server-name", "192.168.1.10"]
    args = ["credentials", str(out), "--actors", "pi-01,pi-02", "--tls", "--passwords", *names]
    result = cli(*args, timeout=60)
    assert result.returncode == 0, result.stderr
    for identity in ("learner", "boards/pi-01", "boards/pi-02"):
        d = out / identity
        assert sorted(p.name for p in d.iterdir()) == [
            "ca.crt",
            "client.crt",
            "client.key",
            "password",
        ]
        assert mode(d) == 0o700 and mode(d / "client.key") == 0o600 == mode(d / "password")
        name = d.name
        c = cert(d / "client.crt")
        assert c.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == name
        usage = c.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
        assert c.issuer == cert(out / "ca.crt").subject
    assert mode(out / "ca.key") == 0o600 and mode(out) == 0o700 and mode(out / "boards") == 0o700
    server = cert(out / "broker" / "server.crt")
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["learner.lan"]
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["192.168.1.10"]
    assert mode(out / "broker" / "server.key") == 0o600
    passwd = (out / "broker" / "mosquitto.passwd").read_text().splitlines()
    assert [line.split(":")[0] for line in passwd] == ["learner", "pi-01", "pi-02"]
    for line in passwd:  # hashed: no password in the broker's file
        user = line.split(":")[0]
        d = out / ("learner" if user == "learner" else f"boards/{user}")
        assert (d / "password").read_text().strip() not in line
        assert line.split(":")[1].startswith("$7$")
    assert mode(out / "broker" / "mosquitto.passwd") == 0o600


def test_refuses_to_overwrite_and_writes_nothing_then(tmp_path, mosquitto_available) -> None:
    root = tmp_path / "creds"
    make_credentials(root, ["pi-01"], tls=True, passwords=True, server_names=["127.0.0.1"])
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(FileExistsError, match="overwrite.*pi-01"):
        make_credentials(root, ["pi-02", "pi-01"], tls=True, passwords=True)
    with pytest.raises(FileExistsError, match="server.key"):
        make_credentials(root, ["pi-03"], tls=True, server_names=["other"])
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before


def test_adding_boards_reuses_the_ca(tmp_path, mosquitto_available) -> None:
    root = tmp_path / "creds"
    make_credentials(root, ["pi-01"], tls=True, passwords=True, server_names=["127.0.0.1"])
    ca_key = (root / "ca.key").read_bytes()
    learner = (root / "learner" / "password").read_text()
    written = make_credentials(root, ["pi-02"], tls=True, passwords=True)
    assert (root / "ca.key").read_bytes() == ca_key
    assert (root / "learner" / "password").read_text() == learner
    assert cert(root / "boards" / "pi-02" / "client.crt").issuer == cert(root / "ca.crt").subject
    users = [ln.split(":")[0] for ln in (root / "broker" / "mosquitto.passwd").read_text().split()]
    assert users == ["learner", "pi-01", "pi-02"]
    assert root / "broker" / "mosquitto.passwd" in written.updated


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"actors": ["pi-01"]}, "--tls, --passwords"),
        ({"actors": [], "passwords": True}, "at least one"),
        ({"actors": ["learner"], "passwords": True}, "not 'learner'"),
        ({"actors": ["pi/01"], "passwords": True}, "invalid"),
        ({"actors": ["pi:01"], "passwords": True}, "invalid"),
        ({"actors": ["pi-01"], "tls": True}, "--server-name"),
        ({"actors": ["pi-01"], "passwords": True, "days": 0}, "days"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        make_credentials(tmp_path / "creds", **kwargs)
    assert not (tmp_path / "creds").exists()


def test_missing_mosquitto_passwd_is_a_clear_error(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(executables, "_find", lambda name: None)
    with pytest.raises(FileNotFoundError, match="mosquitto_passwd not found.*apt-get install"):
        make_credentials(tmp_path / "creds", ["pi-01"], passwords=True)
    assert not (tmp_path / "creds").exists()


def test_command_reports_refusals_without_a_traceback(cli, tmp_path) -> None:
    result = cli("credentials", str(tmp_path / "c"), "--actors", "pi-01", "--tls", timeout=60)
    assert result.returncode != 0
    assert "--server-name" in result.stderr and "Traceback" not in result.stderr
