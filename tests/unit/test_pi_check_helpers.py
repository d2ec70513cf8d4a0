"""The emulated Raspberry Pi check's pure parts (scripts/pi_check/): what it reads from the
installed unit, the cpuinfo it gives the board, the cache key of its rootfs, the mount
guard and the bit comparison. The check itself (root, qemu, ~5 min) is `make pi-check`."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tests.harness.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))

from pi_check import chroot, outputs, rootfs, unit  # noqa: E402

UNIT = """\
[Unit]
Description=x
ExecStart=/not/this/one
[Service]
# a comment; ExecStart=/nor/this
User=edge-rl
ExecStart=/opt/edge-rl/venv/bin/edge-rl actor \\
    --config /etc/edge-rl/board.yaml
Environment=PYTHONUNBUFFERED=1 "A=b c"
Environment=D=e
WorkingDirectory=-/var/lib/edge-rl
[Install]
WantedBy=multi-user.target
"""


def test_the_unit_is_run_as_systemd_would(tmp_path) -> None:
    path = tmp_path / "a.service"
    path.write_text(UNIT)
    s = unit.read_service(path)
    assert s.exec_start == [
        "/opt/edge-rl/venv/bin/edge-rl",
        "actor",
        "--config",
        "/etc/edge-rl/board.yaml",
    ]
    assert s.user == "edge-rl" and s.working_directory == "/var/lib/edge-rl"
    assert s.environment == {"PYTHONUNBUFFERED": "1", "A": "b c", "D": "e"}
    assert unit.command(s)[:2] == ["env", "--chdir=/var/lib/edge-rl"]


@pytest.mark.parametrize("extra", ["ExecStart=/bin/true\n", "EnvironmentFile=/etc/x\n"])
def test_a_unit_the_check_cannot_honour_is_refused(tmp_path, extra) -> None:
    path = tmp_path / "a.service"
    path.write_text(UNIT.replace("[Install]", extra + "[Install]"))
    with pytest.raises(ValueError, match="ExecStart|environmentfile"):
        unit.read_service(path)


@pytest.mark.parametrize(("model", "part"), [(chroot.PI4, "0xd08"), (chroot.PI5, "0xd0b")])
def test_the_board_gets_an_arm_cpuinfo_of_its_pi(model, part) -> None:
    text = chroot.cpuinfo_text(model)
    assert text.count("processor\t:") == chroot.CORES
    assert text.count(f"CPU part\t: {part}") == chroot.CORES and "Raspberry Pi" in text
    assert "GenuineIntel" not in text and "flags" not in text  # nothing of an x86 cpuinfo
    assert {chroot.PI4.qemu_cpu, chroot.PI5.qemu_cpu} == {"cortex-a72", "cortex-a76"}


def test_the_board_sees_plain_cpu_files(tmp_path) -> None:
    board = chroot.Board(tmp_path / "root", chroot.PI5)
    cpu = tmp_path / "root/sys/devices/system/cpu"
    assert (cpu / "possible").read_text() == (cpu / "present").read_text() == "0-3\n"
    assert "Raspberry Pi 5" in board.cpuinfo.read_text()
    argv = board.command(["/bin/true"])
    assert argv[0] == "unshare" and "--propagation" in argv and "private" in argv
    # its own PID namespace, killed whole when unshare dies: nothing outlives a command
    assert {"--mount", "--pid", "--fork", "--kill-child=KILL"} <= set(argv)
    assert "cortex-a76" in argv and "env -i" in chroot._ENTER


def test_any_change_to_the_recipe_is_a_new_rootfs() -> None:
    base = rootfs.Recipe()
    others = [
        rootfs.Recipe(suite="trixie"),
        rootfs.Recipe(packages=(*base.packages, "git")),
        rootfs.Recipe(mirror="http://example.invalid/debian"),
        rootfs.Recipe(version=base.version + 1),
    ]
    names = {r.tarball_name() for r in others}
    assert base.tarball_name() not in names and len(names) == len(others)
    assert rootfs.Recipe().key == base.key  # and none without a change


def test_the_mount_guard_sees_mounts() -> None:
    assert "/proc" in chroot.mounts_under(Path("/proc"))
    with pytest.raises(RuntimeError, match="mounts left"):
        chroot.check_no_mounts(Path("/proc"))
    chroot.check_no_mounts(Path(__file__).parent)  # tests/ holds no mount


def test_one_differing_bit_is_a_difference() -> None:
    a = np.arange(20, dtype=np.float32).reshape(10, 2)
    b = a.copy()
    assert outputs.differing(a, b) == 0
    b.view(np.uint32)[3, 1] ^= 1  # the last bit of one output
    assert outputs.differing(a, b) == 1
    with pytest.raises(ValueError):
        outputs.differing(a, b.astype(np.float64))
