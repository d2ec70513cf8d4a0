"""A wheel install works outside the source tree: the board files, install.sh and the unit
ship in the wheel, and ``edge-rl actor --board rpi4`` / ``edge-rl doctor`` run from it.

The wheel is ``pip wheel . --no-deps`` (the kit's); it goes into a fresh venv with
``--no-deps``; the dependencies come from the dev venv's site-packages through a plain path
line in a .pth file (so the dev venv's editable edge-rl is not seen), and the commands run
from a temporary directory, where no checkout is.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import uuid
import zipfile
from pathlib import Path

import pytest

from edge_rl.wire.messages import decode_status
from edge_rl.wire.topics import Topics

# The install's and the installed commands' environment: a checkout on PYTHONPATH (how
# tests run from a worktree) would be seen instead of the wheel.
OUTSIDE = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def installed(kit, tmp_path_factory) -> Path:
    """The venv's bin/ with the kit's wheel installed (no deps)."""
    venv = tmp_path_factory.mktemp("wheel-venv") / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-deps",
            str(kit.wheel),
        ],
        check=True,
        timeout=300,
        capture_output=True,
        env=OUTSIDE,
    )
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    (site / "dev-venv-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return venv / "bin"


def test_the_wheel_carries_the_board_files_and_the_bundle_templates(kit):
    names = set(zipfile.ZipFile(kit.wheel).namelist())
    for name in (
        "edge_rl/firmware_configs/rpi4.yaml",
        "edge_rl/firmware_configs/rpi5.yaml",
        "edge_rl/deploy/install.sh",
        "edge_rl/deploy/edge-rl-actor.service",
    ):
        assert name in names, name


def test_edge_rl_actor_board_rpi4_runs_from_the_wheel(
    installed, tmp_path, mosquitto, mqtt_client_factory, policy_keys, wait_for, grant_run
):
    where = subprocess.run(
        [installed / "python", "-c", "import edge_rl; print(edge_rl.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=OUTSIDE,
        timeout=60,
    )
    assert where.stdout.startswith(str(installed.parent)), where  # not the checkout
    run = f"wheel-{uuid.uuid4().hex[:8]}"
    topics = Topics("edge-rl", run)
    client = mqtt_client_factory(mosquitto)
    got = []
    client.on_message = lambda _c, _u, msg: got.append(decode_status(msg.payload))
    client.subscribe(topics.status("w-01"), qos=1)
    p = subprocess.Popen(
        [
            installed / "edge-rl",
            "actor",
            "--board",
            "rpi4",
            "--broker",
            mosquitto.url,
            "--env",
            "CartPole-v1",
            "--id",
            "w-01",
            "--run",
            run,
            "--policy-key",
            str(policy_keys[1]),
            "--max-env-steps",
            "300",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env=OUTSIDE,
    )
    try:
        assert wait_for(lambda: any(s.session for s in got), 60), "no status from the actor"
        grant_run(client, topics, "w-01", next(s.session for s in got if s.session))
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert "known boards" not in err
    assert wait_for(lambda: any(s.state == "stopped" for s in got), 30)
    assert got[-1].board == "rpi4" and got[-1].env_steps == 300


def test_edge_rl_doctor_runs_from_the_wheel(installed, bundle, tmp_path):
    p = subprocess.run(
        [
            installed / "edge-rl",
            "doctor",
            "--config",
            str(bundle / "etc" / "board.yaml"),
            "--skip-broker",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=OUTSIDE,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1] == "8 of 8 checks passed"
