"""One board's bundle: everything its first boot needs, in ``OUT/<actor id>/``.

    install.sh  edge-rl-actor.service  user-data  meta-data  [network-config]  README.txt
    etc/board.yaml  etc/policy.pub  etc/credentials/{ca.crt,client.crt,client.key,password}
    reference/model.tflite  reference/expected.npz      wheelhouse/*.whl

The bundle directory, its credentials directory, the key, the password and the Wi-Fi
settings are readable by their owner only (0700/0600); install.sh gives the installed
copies to the service user. ``board.yaml`` is the board profile (runtime, threads, limits,
power model) without its ``emulation`` section (a real board runs at its own speed), with
this board's ``actor:`` section and paths relative to itself.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml

from edge_rl.boards import load_board
from edge_rl.deploy import cloudinit
from edge_rl.deploy.reference import record
from edge_rl.deploy.wheelhouse import link_into
from edge_rl.wire.topics import DEFAULT_ROOT

SECRETS = ("client.key", "password")
CRED_FILES = ("ca.crt", "client.crt", "client.key", "password")


@dataclass(frozen=True)
class FlashSpec:
    board: Path  # the board profile (a shipped one or a file)
    broker: str  # mqtts://HOST:PORT as the boards reach it
    run: str
    env: str
    policy_key: Path  # the learner's public key (PEM)
    creds: Path  # the deployment's edge-rl credentials directory
    out: Path  # bundles go to out/<actor id>/
    root: str = DEFAULT_ROOT
    wifi: tuple[str, str, str] | None = None  # ssid, password, country
    ssh_key: str | None = None  # an admin login's public key (user-data)


def board_yaml(spec: FlashSpec, actor_id: str, cred_files: list[str]) -> str:
    data = yaml.safe_load(spec.board.read_text()) or {}
    data.pop("emulation", None)  # for a simulated board only (docs/fleet.md)
    data["policy_public_key"] = "policy.pub"
    auth = {"username": actor_id}
    names = {
        "ca.crt": "ca_file",
        "client.crt": "cert_file",
        "client.key": "key_file",
        "password": "password_file",
    }
    for f in cred_files:
        auth[names[f]] = f"credentials/{f}"
    data["auth"] = auth
    data["actor"] = {
        "id": actor_id,
        "run": spec.run,
        "env": spec.env,
        "broker": spec.broker,
        "root": spec.root,
    }
    header = (
        f"# edge-rl board {actor_id} (made by edge-rl flash from the {spec.board.stem} profile).\n"
        "# `edge-rl actor --config THIS_FILE` runs it; `edge-rl doctor --config THIS_FILE`\n"
        "# checks it. Paths are relative to this file. No emulation: a real board runs at\n"
        "# its own speed, and its energy is charged from its measured busy time.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False)


def write_bundle(
    spec: FlashSpec, actor_id: str, wheels: list[Path], reference_model: bytes
) -> Path:
    d = spec.out / actor_id
    if d.exists():
        shutil.rmtree(d)  # the caller refused a duplicate id already: this is a re-flash
    d.mkdir(mode=0o700, parents=True)
    etc = d / "etc"
    etc.mkdir(mode=0o755)
    (etc / "credentials").mkdir(mode=0o700)
    src = spec.creds / "boards" / actor_id
    cred_files = [f for f in CRED_FILES if (src / f).exists()]
    for f in cred_files:
        _copy(src / f, etc / "credentials" / f, 0o600 if f in SECRETS else 0o644)
    _copy(spec.policy_key, etc / "policy.pub", 0o644)
    _write(etc / "board.yaml", board_yaml(spec, actor_id, cred_files), 0o644)
    load_board(etc / "board.yaml")  # what the board will load: a bad profile fails here
    record(reference_model, d / "reference")
    link_into(wheels, d / "wheelhouse")
    flash_files = resources.files("edge_rl.deploy")
    _write(d / "install.sh", flash_files.joinpath("install.sh").read_text(), 0o755)
    _write(
        d / "edge-rl-actor.service",
        flash_files.joinpath("edge-rl-actor.service").read_text(),
        0o644,
    )
    _write(d / "user-data", cloudinit.user_data(actor_id, spec.ssh_key), 0o644)
    _write(d / "meta-data", cloudinit.meta_data(actor_id), 0o644)
    if spec.wifi:
        _write(d / "network-config", cloudinit.network_config(*spec.wifi), 0o600)
    _write(d / "README.txt", readme(actor_id, spec, bool(spec.wifi)), 0o644)
    return d


def _copy(src: Path, dst: Path, mode: int) -> None:
    _write(dst, src.read_bytes(), mode)


def _write(path: Path, content: str | bytes, mode: int) -> None:
    data = content.encode() if isinstance(content, str) else content
    path.touch(mode=0o600)  # never readable by others, not even for a moment
    path.write_bytes(data)
    path.chmod(mode)


def readme(actor_id: str, spec: FlashSpec, wifi: bool) -> str:
    lines = [
        f"edge-rl bundle for board {actor_id}: run {spec.run}, env {spec.env}, broker "
        f"{spec.broker}, profile {spec.board.stem}.",
        "",
        "On a Raspberry Pi OS trixie image (cloud-init): copy user-data, meta-data"
        + (", network-config" if wifi else "")
        + f" to the boot partition's top and this whole directory to {cloudinit.BUNDLE_DIR}/"
        f" on it (edge-rl flash --boot-partition does both). Bookworm image: copy this"
        f" directory to the boot partition as {cloudinit.BUNDLE_DIR}/, boot, log in, run"
        f" sudo bash {cloudinit.BOOT_DIR}/{cloudinit.BUNDLE_DIR}/install.sh --purge-secrets.",
        "",
        "install.sh               first boot runs it as root: service user edge-rl, venv "
        "/opt/edge-rl/venv, edge-rl[edge] from wheelhouse/, etc/ to /etc/edge-rl/, the "
        "unit, edge-rl doctor, start",
        "edge-rl-actor.service    systemd unit: runs edge-rl actor --config "
        "/etc/edge-rl/board.yaml as edge-rl; restarts on failure, 5 times in 10 min at most",
        "user-data                cloud-init: hostname, runcmd install.sh (and an admin "
        "login with --ssh-key)",
        "meta-data                cloud-init: this board's instance id",
        *(
            ["network-config           cloud-init: Wi-Fi (holds its password: mode 0600)"]
            if wifi
            else []
        ),
        "etc/board.yaml           the board file: profile, actor id, run, env, broker, "
        "credentials, public key",
        "etc/policy.pub           the learner's public key: the actor loads only policies "
        "it signed",
        "etc/credentials/         this board's CA certificate, client certificate and key, "
        "password (secrets 0600)",
        "reference/               a small int8 model and its outputs recorded on the host: "
        "edge-rl doctor compares them bit for bit",
        "wheelhouse/              edge-rl and edge-rl[edge]'s dependencies, aarch64, "
        "Python 3.11 and 3.13",
        "doctor.txt               (after install) the board's edge-rl doctor report",
        "",
        "docs/boards.md in the edge-rl repository: the whole procedure, credentials rotation, "
        "retiring a board.",
    ]
    return "\n".join(lines) + "\n"
