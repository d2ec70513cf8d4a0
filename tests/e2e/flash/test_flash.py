"""edge-rl flash: the bundle's files, their modes, the unit, user-data, and actor ids that
are never issued twice (docs/boards.md)."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from edge_rl.boards import known_boards, load_board

SECRETS = ("etc/credentials/client.key", "etc/credentials/password")


@pytest.fixture
def creds(kit, tmp_path) -> Path:
    """This test's own copy of the deployment (its registry of issued ids included)."""
    copy = tmp_path / "creds"
    shutil.copytree(kit.creds, copy)  # copies the modes too
    return copy


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, p.stdout + p.stderr
    return p


def test_a_bundle_has_what_install_needs_with_private_secrets(flash, kit, creds, tmp_path):
    pw = tmp_path / "wifi"
    pw.write_text("hunter2-wifi\n")
    pw.chmod(0o600)
    ok(
        flash(
            tmp_path / "out",
            "--ids",
            "pi-a",
            "--wifi-ssid",
            "lab",
            "--wifi-password-file",
            str(pw),
            "--wifi-country",
            "DE",
            creds=creds,
        )
    )
    b = tmp_path / "out" / "pi-a"
    for f in (
        "install.sh",
        "edge-rl-actor.service",
        "user-data",
        "meta-data",
        "network-config",
        "README.txt",
        "etc/board.yaml",
        "etc/policy.pub",
        "etc/credentials/ca.crt",
        "etc/credentials/client.crt",
        *SECRETS,
        "reference/model.tflite",
        "reference/expected.npz",
    ):
        assert (b / f).is_file(), f
    # Secrets readable by their owner only, and so is everything under the bundle.
    assert mode(b) == 0o700 and mode(b / "etc" / "credentials") == 0o700
    for f in (*SECRETS, "network-config"):
        assert mode(b / f) == 0o600, f
    assert mode(b / "install.sh") & stat.S_IXUSR
    # The wheelhouse: edge-rl's own wheel and the dependency wheels (stand-ins here).
    wheels = sorted(w.name for w in (b / "wheelhouse").glob("*.whl"))
    assert wheels[0].startswith("edge_rl-") and any("cp311" in w for w in wheels)
    assert any("cp313" in w for w in wheels)

    # The board file: the profile without emulation, this board's id, paths that resolve.
    raw = yaml.safe_load((b / "etc" / "board.yaml").read_text())
    assert "emulation" not in raw and raw["actor"]["id"] == "pi-a"
    board = load_board(b / "etc" / "board.yaml")
    assert board.emulation.compute_slowdown == 1.0 and board.power is not None
    assert (board.actor.run, board.actor.env) == ("r1", "CartPole-v1")
    assert board.auth.username == "pi-a"
    own_password = (creds / "boards" / "pi-a" / "password").read_text()
    assert Path(board.auth.password_file).read_text() == own_password
    assert Path(board.policy_public_key).read_bytes() == kit.policy_key.read_bytes()
    assert Path(board.auth.key_file).is_file()

    # user-data: cloud-config YAML that names the board and runs install.sh from the card.
    text = (b / "user-data").read_text()
    assert text.startswith("#cloud-config\n")
    ud = yaml.safe_load(text)
    assert ud["hostname"] == "pi-a"
    assert ["bash", "/boot/firmware/edge-rl/install.sh", "--purge-secrets"] in ud["runcmd"]
    assert "users" not in ud  # no --ssh-key: no login made
    net = yaml.safe_load((b / "network-config").read_text())["network"]
    ap = net["wifis"]["wlan0"]
    assert ap["access-points"] == {"lab": {"password": "hunter2-wifi"}}
    assert ap["regulatory-domain"] == "DE" and net["version"] == 2
    assert yaml.safe_load((b / "meta-data").read_text())["instance_id"].startswith("edge-rl-pi-a-")


def test_the_unit_runs_the_board_file_as_the_service_user_with_bounded_restarts(
    flash, creds, tmp_path
):
    ok(flash(tmp_path / "out", "--ids", "pi-u", creds=creds))
    unit = (tmp_path / "out" / "pi-u" / "edge-rl-actor.service").read_text()
    lines = {
        line.split("=", 1)[0]: line.split("=", 1)[1]
        for line in unit.splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert lines["User"] == "edge-rl" and lines["Group"] == "edge-rl"
    assert lines["ExecStart"] == (
        "/opt/edge-rl/venv/bin/edge-rl actor --config /etc/edge-rl/board.yaml"
    )
    assert lines["Restart"] == "on-failure"  # not "always": a clean stop stays stopped
    assert lines["RestartPreventExitStatus"] == "3"  # a refused id (protocol v3) stays down
    assert int(lines["StartLimitBurst"]) <= 10 and int(lines["StartLimitIntervalSec"]) > 0
    assert "/home/" not in unit and "User=pi" not in unit
    install = (tmp_path / "out" / "pi-u" / "install.sh").read_text()
    assert "useradd --system" in install and "--no-index --find-links" in install
    assert "doctor --config" in install and "--no-start" in install


def test_two_bundles_never_share_an_actor_id(flash, creds, tmp_path):
    first = ok(flash(tmp_path / "a", "--count", "2", creds=creds))
    second = ok(flash(tmp_path / "b", "--count", "2", "--run", "r2", creds=creds))
    ids_a = {p.name for p in (tmp_path / "a").iterdir()}
    ids_b = {p.name for p in (tmp_path / "b").iterdir()}
    assert ids_a == {"pi-01", "pi-02"} and ids_b == {"pi-03", "pi-04"}, (first, second)
    registry = json.loads((creds / "issued.json").read_text())["actors"]
    assert set(registry) == ids_a | ids_b and registry["pi-03"]["run"] == "r2"
    # Each board file names its own id, and no two bundles have the same credentials.
    boards = [
        load_board(tmp_path / d / a / "etc" / "board.yaml")
        for d, ids in (("a", ids_a), ("b", ids_b))
        for a in ids
    ]
    assert len({b.actor.id for b in boards}) == 4
    assert len({Path(b.auth.password_file).read_text() for b in boards}) == 4

    # A duplicate is refused clearly, for this run or another, and nothing is written.
    for run in ("r1", "r3"):
        p = flash(tmp_path / "c", "--ids", "pi-05,pi-02", "--run", run, creds=creds)
        assert p.returncode != 0 and "pi-02" in p.stderr and "already issued" in p.stderr
        assert "--rotate" in p.stderr and not (tmp_path / "c").exists()
    p = flash(tmp_path / "d", "--ids", "pi-09,pi-09", creds=creds)
    assert p.returncode != 0 and "more than once" in p.stderr
    assert not (creds / "boards" / "pi-05").exists()  # refused before any credential was made


def test_rotate_gives_a_flashed_board_new_credentials(flash, creds, tmp_path):
    ok(flash(tmp_path / "out", "--ids", "pi-r", creds=creds))
    old_pw = (creds / "boards" / "pi-r" / "password").read_text()
    old_hash = _passwd_line(creds, "pi-r")
    p = ok(flash(tmp_path / "out", "--ids", "pi-r", "--rotate", creds=creds))
    assert "mosquitto.passwd" in p.stdout  # says to re-install the broker's file
    new_pw = (tmp_path / "out" / "pi-r" / "etc" / "credentials" / "password").read_text()
    assert new_pw != old_pw and _passwd_line(creds, "pi-r") != old_hash
    passwd = (creds / "broker" / "mosquitto.passwd").read_text()
    assert passwd.count("pi-r:") == 1  # the old line is gone
    (retired,) = (creds / "retired").iterdir()
    assert (retired / "password").read_text() == old_pw
    assert json.loads((creds / "issued.json").read_text())["actors"]["pi-r"]["rotations"] == 1
    p = flash(tmp_path / "out", "--ids", "pi-never", "--rotate", creds=creds)
    assert p.returncode != 0 and "never issued" in p.stderr


def _passwd_line(creds: Path, user: str) -> str:
    lines = (creds / "broker" / "mosquitto.passwd").read_text().splitlines()
    return next(line for line in lines if line.startswith(f"{user}:"))


def test_credentials_made_earlier_for_a_board_are_used(flash, creds, tmp_path):
    before = (creds / "boards" / "spare-01" / "client.key").read_text()
    p = ok(flash(tmp_path / "out", "--ids", "spare-01", creds=creds))
    assert "existing credentials used for spare-01" in p.stdout
    copied = tmp_path / "out" / "spare-01" / "etc" / "credentials" / "client.key"
    assert copied.read_text() == before


@pytest.mark.parametrize(
    "args,broker,message",
    [
        (["--ids", "pi-x"], "mqtt://127.0.0.1:1883", "TLS"),
        (
            ["--ids", "pi-x", "--board", "rpi9"],
            None,
            f"known boards: {known_boards()}",
        ),
        (["--ids", "pi x"], None, "invalid username"),
        (["--count", "2", "--boot-partition", "."], None, "exactly one board"),
        (["--ids", "pi-x", "--python", "2.7"], None, "--python 2.7"),
        (["--ids", "pi-x", "--count", "1"], None, "--ids ID,ID or --count N"),
    ],
)
def test_bad_input_is_refused_before_anything_is_written(
    flash, creds, tmp_path, args, broker, message
):
    p = flash(tmp_path / "out", *args, broker=broker or "mqtts://127.0.0.1:8883", creds=creds)
    assert p.returncode != 0 and message in p.stderr, p.stderr
    assert not (tmp_path / "out").exists() and not (creds / "issued.json").exists()


def test_boot_partition_gets_cloud_init_files_and_the_bundle(flash, creds, tmp_path):
    boot = tmp_path / "boot"
    boot.mkdir()
    (boot / "user-data").write_text("#cloud-config\n# the image's own\n")
    ok(flash(tmp_path / "out", "--ids", "pi-b", "--boot-partition", str(boot), creds=creds))
    assert (boot / "user-data").read_text() == (tmp_path / "out/pi-b/user-data").read_text()
    assert (boot / "user-data.orig").read_text().endswith("the image's own\n")
    assert (boot / "meta-data").is_file() and (boot / "edge-rl" / "install.sh").is_file()
    assert (boot / "edge-rl" / "etc" / "board.yaml").is_file()


def test_a_retired_board_loses_its_password_and_its_id_is_never_issued_again(
    flash, creds, tmp_path
):
    ok(flash(tmp_path / "out", "--ids", "pi-t", creds=creds))
    assert "pi-t:" in (creds / "broker" / "mosquitto.passwd").read_text()
    retire = [sys.executable, "-m", "edge_rl.cli", "retire", "--credentials", str(creds), "pi-t"]
    p = subprocess.run(retire, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "pi-t:" not in (creds / "broker" / "mosquitto.passwd").read_text()
    assert not (creds / "boards" / "pi-t").exists() and (creds / "retired").is_dir()
    for extra in ([], ["--rotate"]):
        p = flash(tmp_path / "again", "--ids", "pi-t", *extra, creds=creds)
        assert p.returncode != 0 and "retired" in p.stderr


def test_user_data_with_an_ssh_key_makes_a_key_only_admin_login():
    from edge_rl.deploy.cloudinit import network_config, user_data

    ud = yaml.safe_load(user_data("pi-k", "ssh-ed25519 AAAAC3Nza test@host\n"))
    (user,) = ud["users"]
    assert user["ssh_authorized_keys"] == ["ssh-ed25519 AAAAC3Nza test@host"]
    assert user["lock_passwd"] is True and ud["ssh_pwauth"] is False
    assert ud["runcmd"][0] == ["systemctl", "enable", "--now", "ssh"]  # before install.sh
    assert ud["runcmd"][-1][1] == "/boot/firmware/edge-rl/install.sh"
    with pytest.raises(ValueError, match="two-letter country"):
        network_config("lab", "pw", "Germany")


@pytest.mark.slow
def test_flash_is_quiet_unless_verbose(flash, creds, tmp_path):
    """A cache without the reference model: flash makes it with TensorFlow, whose start-up,
    CUDA probe and converter lines stay off the terminal; ``--verbose`` shows them."""
    noise = ("oneDNN", "cudart_stub", "absl::", "flatbuffer_export", "XNNPACK")
    for verbose in (False, True):
        cache, out = tmp_path / f"cache-{verbose}", tmp_path / f"out-{verbose}"
        done = ok(flash(out, "--count", "1", "--wheelhouse-cache", str(cache), verbose=verbose))
        assert (cache / "reference-int8.tflite").is_file()  # made here, by TensorFlow
        if verbose:
            assert any(n in done.stderr for n in noise), done.stderr[-2000:]
        else:
            assert done.stderr == "", done.stderr
            assert len(done.stdout.splitlines()) <= 4, done.stdout
