"""`edge-rl credentials`: what it writes, with which modes, and what it refuses; the
deployment's ACL it generates (DIR/broker/acl), against a real Mosquitto."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from edge_rl.broker import executables
from edge_rl.broker.acl import actor_grants, parse_acl
from edge_rl.deploy.credentials import make_credentials
from edge_rl.deploy.ids import Registry
from edge_rl.wire.topics import Topics


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


def _enroll(cli, root: Path, actor: str, run: str) -> None:
    result = cli("credentials", str(root), "--actors", actor, "--passwords", "--run", run)
    assert result.returncode == 0, result.stderr
    assert f"wrote   {root / 'broker' / 'acl'}" in result.stdout


def _login(root: Path, user: str) -> dict:
    directory = root / ("learner" if user == "learner" else f"boards/{user}")
    return {"username": user, "password": (directory / "password").read_text().strip()}


@pytest.fixture
def two_runs(cli, tmp_path, mosquitto_with):
    """A deployment of two boards in two runs (``--run``), behind Mosquitto with the
    generated ACL and password file, as host/mosquitto.conf installs them."""
    root = tmp_path / "creds"
    _enroll(cli, root, "pi-01", "run-a")
    _enroll(cli, root, "pi-02", "run-b")
    broker = root / "broker"
    lines = [
        "allow_anonymous false",
        f"password_file {broker / 'mosquitto.passwd'}",
        f"acl_file {broker / 'acl'}",
        "use_username_as_clientid true",
    ]
    return root, mosquitto_with(lines)


def test_generated_acl_keeps_a_board_out_of_another_run(two_runs, clients) -> None:
    root, broker = two_runs
    a, b = Topics("edge-rl", "run-a"), Topics("edge-rl", "run-b")
    learner = clients(broker, **_login(root, "learner"))
    assert learner.first_outcome() == "connected"
    learner.subscribe("edge-rl/#")  # one learner serves every run of the deployment
    pi01 = clients(broker, **_login(root, "pi-01"))
    assert pi01.first_outcome() == "connected"

    pi01.publish(b.transitions("pi-01"), b"its id, another run")
    pi01.publish(b.status("pi-01"), b"its status, another run", retain=True)
    pi01.publish(b.transitions("pi-02"), b"another board of another run")
    pi01.publish(a.transitions("pi-02"), b"another board's id in its run")
    pi01.publish(a.transitions("pi-01"), b"own batch")
    assert learner.until(b"own batch") == [b"own batch"]


def test_generated_acl_lets_a_board_read_only_its_own_run(two_runs, clients) -> None:
    root, broker = two_runs
    a, b = Topics("edge-rl", "run-a"), Topics("edge-rl", "run-b")
    pi01 = clients(broker, **_login(root, "pi-01"))
    pi02 = clients(broker, **_login(root, "pi-02"))
    learner = clients(broker, **_login(root, "learner"))
    assert pi01.first_outcome() == pi02.first_outcome() == learner.first_outcome() == "connected"
    for topic in (b.policy, b.control, b.credit("pi-02"), a.control, a.credit("pi-01")):
        pi01.subscribe(topic)
    pi02.subscribe(b.policy)

    learner.publish(b.policy, b"run-b policy", retain=True)
    learner.publish(b.control, b"run-b control", retain=True)
    learner.publish(b.credit("pi-02"), b"pi-02 credit", retain=True)
    learner.publish(a.credit("pi-01"), b"pi-01 credit")
    learner.publish(a.control, b"run-a control")
    assert pi01.until(b"run-a control") == [b"pi-01 credit", b"run-a control"]
    assert pi02.until(b"run-b policy") == [b"run-b policy"]  # its own run's


def test_generated_acl_follows_enrollment_rotation_and_retirement(cli, tmp_path) -> None:
    root = tmp_path / "creds"
    _enroll(cli, root, "pi-01", "run-a")
    _enroll(cli, root, "pi-02", "run-a")
    grants = parse_acl((root / "broker" / "acl").read_text())
    assert sorted(grants) == ["learner", "pi-01", "pi-02"]
    assert grants["pi-01"] == actor_grants(Topics("edge-rl", "run-a"), "pi-01")
    assert mode(root / "broker" / "acl") == 0o600

    with Registry.open(root) as reg:  # what edge-rl flash --run run-b --ids pi-02 records
        reg.check_new(["pi-02"])  # enrolled, never flashed: a flash may take it
        reg.issue(["pi-02"], run="run-b", board="rpi4", out=tmp_path / "out")
    grants = parse_acl((root / "broker" / "acl").read_text())
    assert grants["pi-02"] == actor_grants(Topics("edge-rl", "run-b"), "pi-02")

    retired = cli("retire", "--credentials", str(root), "pi-01")
    assert retired.returncode == 0, retired.stderr
    assert sorted(parse_acl((root / "broker" / "acl").read_text())) == ["learner", "pi-02"]
    again = cli("credentials", str(root), "--actors", "pi-01", "--passwords", "--run", "run-a")
    assert again.returncode != 0 and "retired" in again.stderr  # never made again


def test_a_retired_id_is_refused_by_the_broker_once_the_regenerated_files_are_in(
    cli, tmp_path, mosquitto_with, clients
) -> None:
    """``edge-rl retire`` rewrites the password file and the ACL and says to install both;
    a Mosquitto loaded with them refuses the retired board's login and keeps the other's."""
    root = tmp_path / "creds"
    _enroll(cli, root, "pi-01", "run-a")
    _enroll(cli, root, "pi-02", "run-a")
    old_login = _login(root, "pi-01")
    retired = cli("retire", "--credentials", str(root), "pi-01")
    assert retired.returncode == 0, retired.stderr
    broker = root / "broker"
    assert "regenerated" in retired.stdout and str(broker / "acl") in retired.stdout
    assert str(broker / "mosquitto.passwd") in retired.stdout and "reload" in retired.stdout
    url = mosquitto_with(
        [
            "allow_anonymous false",
            f"password_file {broker / 'mosquitto.passwd'}",
            f"acl_file {broker / 'acl'}",
            "use_username_as_clientid true",
        ]
    )
    assert clients(url, **old_login).first_outcome().startswith("refused")
    assert clients(url, **_login(root, "pi-02")).first_outcome() == "connected"
    assert "pi-01" not in parse_acl((broker / "acl").read_text())


def test_credentials_without_run_enroll_nothing(cli, tmp_path) -> None:
    root = tmp_path / "creds"
    result = cli("credentials", str(root), "--actors", "pi-01", "--passwords")
    assert result.returncode == 0, result.stderr
    assert "not enrolled in a run" in result.stdout
    assert sorted(parse_acl((root / "broker" / "acl").read_text())) == ["learner"]
    bad = cli("credentials", str(root), "--actors", "pi-02", "--passwords", "--run", "a/b")
    assert bad.returncode != 0 and "run name" in bad.stderr
    assert not (root / "boards" / "pi-02").exists()


def test_generated_acl_lets_the_learner_alone_write_a_target_and_its_board_alone_read_it(
    cli, tmp_path, mosquitto_with, clients
) -> None:
    """A rollout's target topic (docs/protocol.md §5.5) on a live Mosquitto with the
    deployment's ACL: written by the learner's login only, read by its own board only."""
    root = tmp_path / "creds"
    _enroll(cli, root, "pi-01", "run-a")
    _enroll(cli, root, "pi-03", "run-a")
    broker = mosquitto_with(
        [
            "allow_anonymous false",
            f"password_file {root / 'broker' / 'mosquitto.passwd'}",
            f"acl_file {root / 'broker' / 'acl'}",
            "use_username_as_clientid true",
        ]
    )
    a = Topics("edge-rl", "run-a")
    pi01 = clients(broker, **_login(root, "pi-01"))
    pi03 = clients(broker, **_login(root, "pi-03"))
    learner = clients(broker, **_login(root, "learner"))
    assert pi01.first_outcome() == pi03.first_outcome() == learner.first_outcome() == "connected"
    pi01.subscribe(a.target("pi-01"))
    pi03.subscribe(a.target("pi-01"))  # another board's target: the ACL denies it
    pi03.subscribe(a.target("pi-03"))

    pi03.publish(a.target("pi-01"), b"forged by pi-03", retain=True)
    pi01.publish(a.target("pi-01"), b"written by pi-01 itself", retain=True)
    learner.publish(a.target("pi-01"), b"pi-01 target", retain=True)
    learner.publish(a.target("pi-03"), b"pi-03 target", retain=True)
    assert pi01.until(b"pi-01 target") == [b"pi-01 target"]
    assert pi03.until(b"pi-03 target") == [b"pi-03 target"]
    late = clients(broker, **_login(root, "pi-01"))  # reconnects: gets the retained one
    assert late.first_outcome() == "connected"
    late.subscribe(a.target("pi-01"))
    assert late.until(b"pi-01 target") == [b"pi-01 target"]
