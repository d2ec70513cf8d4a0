"""The emulated Raspberry Pi check: ``scripts/emulated-pi-check`` (``make pi-check``) runs
this (``python -m pi_check`` from scripts/) with the host venv's Python, after it installed
qemu-user-static, debootstrap and binfmt.

    scripts/emulated-pi-check [--board rpi4|rpi5] [--steps N] [--keep] [--timings FILE]

Exit 0: a fresh emulated board installed its bundle offline, its doctor passed (reference
outputs bit-identical to this host's, broker login over TLS), it caught a wrong CPU model,
and the board joined a learner's short run: its transitions accepted, its signed policy
verified and loaded, the deployed policy's outputs bit-identical to this host's. Exit 1
with the reason otherwise; every process it started is stopped and nothing stays mounted.
The phases are in check.py; docs/boards.md ("The emulated Raspberry Pi check") has the
times measured.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from . import joinrun
from .check import CheckFailed, PiCheck, timed
from .chroot import MODELS, check_no_mounts, environment_ok
from .rootfs import Recipe, ensure_tarball, extract

REPO = Path(__file__).resolve().parents[2]


def parse_args(argv: list[str]) -> argparse.Namespace:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "edge-rl"
    p = argparse.ArgumentParser(prog="emulated-pi-check", description=__doc__.split("\n\n")[0])
    p.add_argument("--board", choices=sorted(MODELS), default="rpi4")
    p.add_argument("--steps", type=int, default=2500, help="the learner's total_env_steps")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=cache,
        help="rootfs tarballs and the flash wheelhouse (default: %(default)s)",
    )
    p.add_argument("--mirror", default=Recipe.mirror, help="Debian mirror for debootstrap")
    p.add_argument("--workdir", type=Path, help="default: a new /var/tmp/edge-rl-pi-check-*")
    p.add_argument("--keep", action="store_true", help="keep the workdir (logs, rootfs)")
    p.add_argument("--timings", type=Path, help="also write the times and facts as JSON")
    return p.parse_args(argv)


def check(args: argparse.Namespace, work: Path, facts: dict) -> str:
    recipe = Recipe(mirror=args.mirror)
    t0 = time.monotonic()
    print(f"== rootfs: Debian {recipe.suite} {recipe.arch}, key {recipe.key}", flush=True)
    tarball, built, build_s = ensure_tarball(recipe, args.cache_dir / "pi-rootfs", work)
    facts["rootfs"] = "built" if built else "cache hit"
    facts["rootfs_build_s"] = round(build_s, 1)
    extract(tarball, work / "rootfs")
    facts["rootfs_s"] = round(time.monotonic() - t0, 1)
    print(f"== rootfs: {facts['rootfs']} ({tarball}); ready in {facts['rootfs_s']} s", flush=True)

    pi = PiCheck(REPO, work, work / "rootfs", MODELS[args.board], args.steps)
    pi.facts = facts | pi.facts
    try:
        timed(pi.facts, "flash", pi.flash, args.cache_dir / "wheelhouse")
        pi.start_broker()
        timed(pi.facts, "install", pi.install)
        timed(pi.facts, "reinstall", pi.reinstall)
        doctor = timed(pi.facts, "doctor", pi.run_doctor)
        print(doctor, end="", flush=True)
        pi.facts["control"] = timed(pi.facts, "control", pi.negative_control).strip()
        print(f"   QEMU_CPU=max: {pi.facts['control']}", flush=True)
        pi.facts["summary"] = timed(pi.facts, "run", joinrun.run, pi)
        pi.facts["parity_outputs"] = timed(pi.facts, "parity", joinrun.parity, pi)
    finally:
        if pi.broker is not None:
            pi.broker.stop()
        facts.update(pi.facts)
    return doctor


def report(facts: dict) -> None:
    s = facts.get("summary", {})
    a = s.get("actor", {})
    built = (
        f" (debootstrap + tarball {facts['rootfs_build_s']} s)"
        if facts["rootfs"] == "built"
        else ""
    )
    print(f"\nemulated {facts['board']} (QEMU_CPU={facts['qemu_cpu']}): PASSED")
    rows = [
        ("rootfs", f"{facts['rootfs']}, {facts['rootfs_s']} s{built}"),
        ("flash (host)", f"{facts['flash_s']} s"),
        ("install (first boot)", f"{facts['install_s']} s"),
        ("install again", f"{facts['reinstall_s']} s"),
        ("doctor", f"{facts['doctor_s']} s"),
        ("doctor, QEMU_CPU=max", f"{facts['control_s']} s: failed as it must"),
        (
            "run",
            f"{facts['run_s']} s: the board sent {a.get('transitions_sent')} transitions, the "
            f"learner accepted {s.get('transitions_received')} and rejected "
            f"{s.get('transitions_rejected')}; the board loaded signed policy "
            f"v{a.get('policy_version')} and refused {a.get('policies_rejected')}",
        ),
        ("parity", f"{facts['parity_s']} s: {facts['parity_outputs']} outputs bit-identical"),
        ("total", f"{facts['total_s']} s"),
    ]
    for name, value in rows:
        print(f"  {name:<22} {value}")


def _interrupted(signum, _frame) -> None:
    """SIGTERM (CI's timeout, kill PID) unwinds like Ctrl-C, through every ``finally``: the
    board's processes, the learner and the broker are stopped, nothing stays mounted."""
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if problems := environment_ok():
        print("emulated-pi-check: cannot run here:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, _interrupted)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="edge-rl-pi-check-", dir="/var/tmp"))
    work.mkdir(parents=True, exist_ok=True)
    facts: dict = {}
    t0 = time.monotonic()
    ok = False
    try:
        check(args, work, facts)
        ok = True
    except (CheckFailed, RuntimeError, OSError, KeyError, ValueError) as e:
        print(f"\nemulated-pi-check FAILED: {e}\n(logs in {work})", file=sys.stderr)
        args.keep = True
    except KeyboardInterrupt as e:
        print(f"\nemulated-pi-check interrupted ({e or 'Ctrl-C'}): stopped", file=sys.stderr)
        facts["interrupted"] = True
    finally:
        facts["total_s"] = round(time.monotonic() - t0, 1)
        check_no_mounts(work)
        if args.timings:
            args.timings.write_text(json.dumps(facts, indent=2) + "\n")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    if ok:
        report(facts)
    return 0 if ok else 130 if facts.get("interrupted") else 1
