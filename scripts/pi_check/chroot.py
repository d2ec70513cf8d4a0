"""Run a command on the emulated board: a chroot into the arm64 rootfs under qemu-user.

    board = Board(rootfs, model=PI4)                 # writes the ARM cpuinfo and /sys files
    board.run(["/bin/sh", "/boot/firmware/edge-rl/install.sh", "--no-start"], log=..., timeout=600)
    proc = board.popen([...], log=...)               # a background process (the actor)

Each command gets a mount namespace of its own (``unshare --mount --propagation private``):
/proc, /dev and the cpuinfo file are mounted inside it only, and vanish with its last
process, however it ends (``kill -9`` included). The host never sees them, so nothing can
be left mounted, and ``check_no_mounts`` proves it after every command.

What the board sees, and why (each measured with qemu 7.2 on this x86 host):

* ``/proc/cpuinfo``: qemu-user passes the host's x86 one through, and LiteRT's cpuinfo
  library then segfaults in ``Interpreter()``. A Pi's ARM cpuinfo is bind-mounted over it.
* ``/sys/devices/system/cpu/{possible,present,online}``: plain files in the rootfs (sysfs
  is not mounted), the 4 cores of a Pi; the same library reads them.
* ``QEMU_CPU``: the Pi's core (cortex-a72 for a Pi 4, cortex-a76 for a Pi 5). qemu's
  default ``max`` CPU gives wrong XNNPACK int8 results (1,995 of 2,000 outputs differed).
* ``env -i``: a clean environment (PATH, HOME, LANG, QEMU_CPU only), so the host's pip
  settings, virtualenv and proxies do not leak into what the board does.

The chroot shares the host's network namespace: the board reaches a broker on 127.0.0.1.
"""

from __future__ import annotations

import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PiModel:
    name: str
    qemu_cpu: str
    cpuinfo_core: str  # one processor's block, without its "processor" line
    revision: str
    model: str


# From /proc/cpuinfo of 64-bit Raspberry Pi OS on each board.
PI4 = PiModel(
    name="rpi4",
    qemu_cpu="cortex-a72",
    cpuinfo_core="BogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm crc32 cpuid\n"
    "CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd08\n"
    "CPU revision\t: 3\n",
    revision="c03114",
    model="Raspberry Pi 4 Model B Rev 1.4",
)
PI5 = PiModel(
    name="rpi5",
    qemu_cpu="cortex-a76",
    cpuinfo_core="BogoMIPS\t: 108.00\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 "
    "atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\nCPU implementer\t: 0x41\n"
    "CPU architecture: 8\nCPU variant\t: 0x4\nCPU part\t: 0xd0b\nCPU revision\t: 1\n",
    revision="d04170",
    model="Raspberry Pi 5 Model B Rev 1.0",
)
MODELS = {m.name: m for m in (PI4, PI5)}
CORES = 4
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Runs as root, as PID 1 of the new PID and mount namespaces, before the chroot: $1 rootfs,
# $2 cpuinfo file, $3 QEMU_CPU, then the command. The mounts are private to the namespace.
# It stays PID 1 (no exec) and hands SIGTERM on to the command: the kernel delivers to a
# namespace's init only the signals it has a handler for, and kills every process left in
# the namespace when it exits, so nothing the board started outlives the command.
_ENTER = r"""set -u
root=$1 cpuinfo=$2 cpu=$3; shift 3
mount -t proc proc "$root/proc" && mount --bind "$cpuinfo" "$root/proc/cpuinfo" &&
    mount --rbind /dev "$root/dev" || exit 125
env -i PATH="$PATH" HOME=/root LANG=C.UTF-8 QEMU_CPU="$cpu" chroot "$root" "$@" &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT
wait $child; rc=$?
while kill -0 $child 2>/dev/null; do wait $child; rc=$?; done
exit $rc
"""


def cpuinfo_text(model: PiModel, cores: int = CORES) -> str:
    blocks = [f"processor\t: {i}\n{model.cpuinfo_core}" for i in range(cores)]
    tail = f"Revision\t: {model.revision}\nSerial\t\t: 10000000e3a1b2c4\nModel\t\t: {model.model}\n"
    return "\n".join(blocks) + "\n" + tail


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` in this (the host's) mount namespace."""
    root = str(path.resolve())
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == root or point.startswith(root + "/"):
                found.append(point)
    return found


def check_no_mounts(path: Path) -> None:
    if left := mounts_under(path):
        raise RuntimeError(f"mounts left under {path}: {left} (unmount them: umount -R)")


class Board:
    """The rootfs at ``root`` as a Pi of ``model``; see the module's docstring."""

    def __init__(self, root: Path, model: PiModel = PI4) -> None:
        self.root = root.resolve()
        self.model = model
        self.cpuinfo = self.root.parent / f"cpuinfo-{model.name}"
        self.cpuinfo.write_text(cpuinfo_text(model))
        cpu = self.root / "sys" / "devices" / "system" / "cpu"
        cpu.mkdir(parents=True, exist_ok=True)
        for name in ("possible", "present", "online"):
            (cpu / name).write_text(f"0-{CORES - 1}\n")

    def command(self, argv: list[str]) -> list[str]:
        # --kill-child: if unshare dies (SIGKILL, or its parent's death), the namespace's
        # init gets SIGKILL and the kernel kills the rest of the namespace with it.
        ns = ["--pid", "--fork", "--kill-child=KILL", "--mount", "--propagation", "private"]
        return [
            "unshare",
            *ns,
            "--",
            "/bin/sh",
            "-c",
            _ENTER,
            "enter",
            str(self.root),
            str(self.cpuinfo),
            self.model.qemu_cpu,
            *argv,
        ]

    def popen(self, argv: list[str], log: Path) -> subprocess.Popen:
        """``argv`` on the board in the background, output to ``log``; the PID returned is
        unshare's (stop it with ``stop``). It gets SIGKILL if this process dies
        (``setpriv --pdeathsig``, ``kill -9`` included), and its namespace dies with it."""
        with open(log, "ab") as out:
            return subprocess.Popen(
                # KILL, not TERM: unshare ignores SIGTERM while it waits for its child.
                ["setpriv", "--pdeathsig", "KILL", *self.command(argv)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={"PATH": PATH},
                start_new_session=True,
            )

    def run(self, argv: list[str], log: Path, timeout: float) -> int:
        """``argv`` on the board, to completion or ``timeout`` (then killed); its exit code."""
        proc = self.popen(argv, log)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            raise RuntimeError(
                f"{argv[0]} did not finish on the board in {timeout:.0f} s (killed); see {log}"
            ) from None
        except BaseException:  # Ctrl-C, SIGTERM: the board's process goes too
            stop(proc)
            raise
        finally:
            check_no_mounts(self.root)


def stop(proc: subprocess.Popen, grace_s: float = 20.0) -> int:
    """Stop a board command by PID, bounded: SIGTERM to its namespace's init (unshare's
    child, which hands it on to the command; unshare itself ignores SIGTERM while it waits),
    then SIGKILL to unshare after ``grace_s``, which takes the whole namespace with it."""
    if proc.poll() is not None:
        return proc.returncode
    for pid in _children(proc.pid):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        return proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait(10)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def passwd_entry(root: Path, user: str) -> tuple[int, int, str]:
    """``(uid, gid, home)`` of ``user`` from the board's /etc/passwd (not the host's)."""
    for line in (root / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if fields[0] == user:
            return int(fields[2]), int(fields[3]), fields[5]
    raise KeyError(f"no user {user!r} on the board ({root}/etc/passwd)")


def as_user(root: Path, user: str, argv: list[str]) -> list[str]:
    """``argv`` run as ``user`` with its groups (the unit's ``User=``), via the board's
    setpriv (util-linux, in every Debian), with its HOME as systemd would set it. The change
    of user clears the parent-death signal, so it is set again after it."""
    uid, gid, home = passwd_entry(root, user)
    ids = [f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--pdeathsig=TERM"]
    return ["setpriv", *ids, "--", "env", f"HOME={home}", *argv]


def environment_ok() -> list[str]:
    """What the host lacks to run the board (empty when all is there)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("must run as root (debootstrap, chroot, mounts)")
    reg = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
    if not reg.is_file() or "enabled" not in reg.read_text():
        problems.append(
            "binfmt_misc has no enabled qemu-aarch64 (scripts/emulated-pi-check "
            "registers it: mount binfmt_misc, update-binfmts --enable qemu-aarch64)"
        )
    return problems
