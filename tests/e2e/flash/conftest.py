"""What the flash and doctor tests share: a deployment made at run time (a policy key, a CA
with a broker certificate for 127.0.0.1 and passwords), edge-rl's wheel built once, a
stand-in wheelhouse (the real download is tests/e2e/flash/test_wheelhouse.py's slow test), a
cache holding the reference model, and ``flash(...)``: ``edge-rl flash`` as a user runs it.

``deployed``: a real Mosquitto (tests/harness/mosquitto_auth.py's, with host/mosquitto.conf and
that deployment's files) and a board flashed for it.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from edge_rl.boards import load_board
from edge_rl.deploy.broker_check import check_brokers
from edge_rl.deploy.wheelhouse import build_own_wheel
from tests.harness.mosquitto_auth import Mosquitto
from tests.harness.paths import REPO
from tests.harness.waits import wait_for


@dataclass(frozen=True)
class Kit:
    root: Path
    creds: Path
    policy_key: Path
    wheel: Path  # edge-rl's own, built from this tree
    wheelhouse: Path  # stand-in dependency wheels
    cache: Path  # holds the reference model after the first flash


def _run(*args: str, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "edge_rl.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or REPO,
    )


@pytest.fixture(scope="session")
def kit(tmp_path_factory, mosquitto_available) -> Kit:
    root = tmp_path_factory.mktemp("deployment")
    assert _run("keygen", str(root / "learner.key")).returncode == 0
    p = _run(
        "credentials",
        str(root / "creds"),
        "--actors",
        "spare-01",
        "--tls",
        "--passwords",
        "--server-name",
        "127.0.0.1",
    )
    assert p.returncode == 0, p.stderr
    own = root / "own"
    build_own_wheel(REPO, own)  # one build of the tree at a time, across xdist workers
    standin = root / "standin"
    standin.mkdir()
    for name in (
        "numpy-2.0.0-cp311-cp311-manylinux_2_17_aarch64.whl",
        "numpy-2.0.0-cp313-cp313-manylinux_2_17_aarch64.whl",
    ):
        with zipfile.ZipFile(standin / name, "w") as z:
            z.writestr("stand-in.txt", "not a real wheel: the flash tests never install it")
    (own_wheel,) = own.glob("edge_rl-*.whl")
    return Kit(root, root / "creds", root / "learner.pub", own_wheel, standin, root / "cache")


@pytest.fixture
def flash(kit):
    """``flash(out, *args, verbose=False) -> CompletedProcess``: edge-rl flash for the kit's
    deployment, a CartPole run on a broker at mqtts://127.0.0.1:PORT (``broker=``), stand-in
    wheels; ``verbose``: ``edge-rl --verbose flash``."""

    def run(
        out: Path,
        *args: str,
        broker: str = "mqtts://127.0.0.1:8883",
        run: str = "r1",
        creds: Path | None = None,
        verbose: bool = False,
    ) -> subprocess.CompletedProcess:
        return _run(
            *(["--verbose"] if verbose else []),
            "flash",
            "--board",
            "rpi4",
            "--broker",
            broker,
            "--run",
            run,
            "--env",
            "CartPole-v1",
            "--policy-key",
            str(kit.policy_key),
            "--credentials",
            str(creds or kit.creds),
            "--out",
            str(out),
            "--wheel",
            str(kit.wheel),
            "--wheelhouse",
            str(kit.wheelhouse),
            "--wheelhouse-cache",
            str(kit.cache),
            *args,
        )

    return run


@pytest.fixture(scope="module")
def deployed(kit, tmp_path_factory) -> Iterator[tuple[Path, object]]:
    """(a flashed board's bundle, its broker), made once per module: a Mosquitto with
    host/mosquitto.conf and host/acl and the deployment's files, the board flashed for its
    URL, the new password file installed and the broker reloaded (SIGHUP to its PID), as
    docs/boards.md says. Tests change a copy of the bundle (``bundle``), never this one."""
    tmp = tmp_path_factory.mktemp("deployed")
    creds = tmp / "creds"
    shutil.copytree(kit.creds, creds)
    installed = tmp / "etc"
    shutil.copytree(creds / "broker", installed)
    shutil.copy(REPO / "host" / "acl", installed / "acl")
    (tmp / "persist").mkdir()
    text = (REPO / "host" / "mosquitto.conf").read_text()
    text = text.replace("listener 8883\n", "listener {PORT} 127.0.0.1\n")
    text = text.replace("/etc/mosquitto/edge-rl/", f"{installed}/")
    text = text.replace("/var/lib/mosquitto/", f"{tmp / 'persist'}/")
    broker = Mosquitto(tmp, text.splitlines(), tls=True)
    try:
        p = _run(
            "flash",
            "--board",
            "rpi4",
            "--broker",
            broker.url,
            "--run",
            "r1",
            "--env",
            "CartPole-v1",
            "--policy-key",
            str(kit.policy_key),
            "--credentials",
            str(creds),
            "--out",
            str(tmp / "out"),
            "--ids",
            "pi-doc",
            "--wheel",
            str(kit.wheel),
            "--wheelhouse",
            str(kit.wheelhouse),
            "--wheelhouse-cache",
            str(kit.cache),
        )
        assert p.returncode == 0, p.stderr
        shutil.copy(creds / "broker" / "mosquitto.passwd", installed / "mosquitto.passwd")
        broker.proc.send_signal(signal.SIGHUP)
        bundle = tmp / "out" / "pi-doc"
        cfg = load_board(bundle / "etc" / "board.yaml")
        wait_for(lambda: _logs_in(cfg), 10, "the reloaded broker to take the password", 0.1)
        yield bundle, broker
    finally:
        broker.stop()


def _logs_in(cfg) -> bool:
    return all(c.ok for c in check_brokers(cfg, 2.0))


@pytest.fixture
def bundle(deployed, tmp_path) -> Path:
    """This test's own copy of the deployed board's bundle (modes kept)."""
    copy = tmp_path / "pi-doc"
    shutil.copytree(deployed[0], copy)
    return copy
