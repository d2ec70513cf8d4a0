#!/usr/bin/env python
"""False positives of the quarantine rule: honest runs of the examples, one table.

    nice .venv/bin/python benchmarks/quarantine_fp.py --out runs/quarantine_fp
    .venv/bin/python benchmarks/quarantine_fp.py --seeds 1,2 --cartpole-steps 10000
    .venv/bin/python benchmarks/quarantine_fp.py --fleets 3,5,8 --restart \
        --cartpole-steps 6000 --pendulum-steps 4000     # early training, a learner restart

Runs examples/cartpole_dqn.yaml and examples/pendulum_td3.yaml (simulated Pi 4 actors,
every one honest; ``--fleets``: fleet sizes, 4 by default) once per seed and fleet size
with ``edge-rl learn``, the shipped quarantine rule (``QuarantineConfig``'s defaults), and
reads each run's summary.json. With ``--restart``, each run is also run once more with
the learner stopped by SIGTERM a third of the way in (its fleet with it) and resumed with
``--resume --keep-quarantine`` (a quarantine found before the restart is kept and shows).
Short budgets are early training: exploration still falling, policies changing fast (the
stretch in which an honest board was quarantined at z 7.1). Columns:

* fleet: boards; restart: whether the learner was stopped and resumed; slow board: with
  ``--slow``, board sim-01 is frozen (SIGSTOP, by its PID) 3 s of every 5 and continued:
  it steps in bursts, short of credit, behind the fleet's policy versions; board restart:
  with ``--board-restart``, board sim-02 is killed (SIGKILL, by its PID) a third of the way
  in and started again with its own command line and environment
* quarantined: boards the rule isolated (an honest fleet: every one is a false positive)
* peak |z|: the largest robust z-score any board reached (the rule fires past max_z)
* judged: boards with enough data to be judged at the end; return: the deployed policy's
  ``final_eval_return``; wall s: the run's own

Nothing here asserts a number: tests/unit/learner/fleet/test_quarantine.py and
tests/e2e/security/test_quarantine_run.py check the rule and a real quarantine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import md_table  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = {"cartpole": "examples/cartpole_dqn.yaml", "pendulum": "examples/pendulum_td3.yaml"}
HEADERS = [
    "example",
    "seed",
    "fleet",
    "restart",
    "slow board",
    "board restart",
    "env steps",
    "quarantined",
    "peak |z|",
    "judged",
    "return",
    "wall s",
]


def run_one(
    example: str,
    seed: int,
    fleet: int,
    restart: bool,
    steps: int,
    out: Path,
    timeout: float,
    slow: bool = False,
    board_restart: bool = False,
) -> dict:
    """One honest run; its summary.json (None-filled if it did not finish)."""
    name = f"{example}-s{seed}-f{fleet}{'-r' if restart else ''}{'-slow' if slow else ''}"
    name += "-br" if board_restart else ""
    run_dir = out / name
    edge_rl = str(Path(sys.executable).with_name("edge-rl"))
    cmd = [edge_rl, "learn", "--config", str(REPO / EXAMPLES[example]), "--seed", str(seed)]
    cmd += ["--fleet", str(fleet), "--run", f"qfp-{name}", "--set", f"total_env_steps={steps}"]
    cmd += ["--out", str(run_dir), "--json"]
    head = {"example": example, "seed": seed, "fleet": fleet, "restart": restart, "slow": slow}
    head["board_restart"] = board_restart
    with open(out / f"{name}.log", "w") as log:
        if restart:
            first = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            _stop_at(first, run_dir, steps // 3, timeout)
            cmd = [edge_rl, "learn", "--resume", str(run_dir), "--keep-quarantine", "--json"]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        stop = threading.Event()
        if slow:
            threading.Thread(target=_slow_board, args=(proc.pid, stop), daemon=True).start()
        restarted: list[subprocess.Popen] = []
        if board_restart:
            args = (proc.pid, run_dir, steps // 3, stop, restarted)
            threading.Thread(target=_restart_board, args=args, daemon=True).start()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
        finally:
            stop.set()
            for board in restarted:  # it ends with the learner; bounded, by its PID
                with contextlib.suppress(subprocess.TimeoutExpired):
                    board.wait(30)
                if board.poll() is None:
                    board.kill()
                    board.wait(10)
    summary = run_dir / "summary.json"
    if proc.returncode != 0 or not summary.exists():
        return {**head, "failed": proc.returncode}
    return {**head, **json.loads(summary.read_text())}


SLOW_BOARD = "sim-01"


def _slow_board(learner: int, stop: threading.Event) -> None:
    """Board ``SLOW_BOARD`` of the learner ``learner`` (found by its command line among the
    learner's children, then stopped and continued by its PID): frozen 3 s of every 5, a
    board that steps in bursts and falls behind the fleet's policy versions."""
    pid = None
    while pid is None and not stop.wait(0.5):
        pid = _child_with(learner, ["--id", SLOW_BOARD])
    while pid is not None and not stop.is_set():
        try:
            os.kill(pid, signal.SIGSTOP)
            stop.wait(3.0)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            return
        stop.wait(2.0)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


RESTARTED_BOARD = "sim-02"


def _restart_board(
    learner: int, run_dir: Path, at: int, stop: threading.Event, out: list[subprocess.Popen]
) -> None:
    """Board ``RESTARTED_BOARD`` killed (SIGKILL, by its PID) once the run passes ``at``
    env steps, and started again at once with its own command line and environment: a
    board that lost power and came back (a new session; it waits out the identity
    window before it is granted again)."""
    metrics = run_dir / "metrics.csv"
    while not stop.wait(0.5):
        rows = metrics.read_text().splitlines()[1:] if metrics.exists() else []
        if rows and int(rows[-1].split(",")[1] or 0) >= at:
            break
    pid = _child_with(learner, ["--id", RESTARTED_BOARD])
    if pid is None or stop.is_set():
        return
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        os.kill(pid, signal.SIGKILL)
    except (OSError, ProcessLookupError):
        return
    env = dict(kv.split("=", 1) for kv in raw.split("\0") if "=" in kv)
    stop.wait(1.0)
    out.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))


def _child_with(parent: int, args: list[str]) -> int | None:
    """The child of ``parent`` whose command line holds ``args`` in a row (Linux /proc)."""
    try:
        children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    except OSError:
        return None
    for child in map(int, children):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
        except OSError:
            continue
        if any(argv[i : i + len(args)] == args for i in range(len(argv))):
            return child
    return None


def _stop_at(proc: subprocess.Popen, run_dir: Path, steps: int, timeout: float) -> None:
    """SIGTERM to the learner (by its PID) once its metrics.csv passes ``steps`` env steps;
    then wait for it to checkpoint and exit."""
    metrics, deadline = run_dir / "metrics.csv", time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        rows = metrics.read_text().splitlines()[1:] if metrics.exists() else []
        if rows and int(rows[-1].split(",")[1] or 0) >= steps:
            break
        time.sleep(1.0)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout)


def cells(s: dict) -> list:
    if "failed" in s:
        head = [s["example"], s["seed"], s["fleet"], "yes" if s["restart"] else "no"]
        head.append("yes" if s.get("slow") else "no")
        head.append("yes" if s.get("board_restart") else "no")
        return [*head, "-", f"run failed ({s['failed']})", "-", "-", "-", "-"]
    boards = s["boards"].values()
    peak = max((b["peak_z"] for b in boards), default=0.0)
    judged = sum(b["window"] >= 500 for b in boards)
    ret = s["final_eval_return"]
    return [
        s["example"],
        s["seed"],
        s["fleet"],
        "yes" if s["restart"] else "no",
        "yes" if s.get("slow") else "no",
        "yes" if s.get("board_restart") else "no",
        f"{s['env_steps']:,}",
        ", ".join(sorted(s["quarantined"])) or "0",
        f"{peak:.2f}",
        judged,
        "-" if ret is None else f"{ret:.1f}",
        f"{s['wall_s']:.0f}",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", default="1,2,3,4,5")
    p.add_argument("--examples", default="cartpole,pendulum")
    p.add_argument("--fleets", default="4", help="fleet sizes, comma-separated (3 to 8)")
    p.add_argument("--restart", action="store_true", help="also each run stopped and resumed")
    p.add_argument(
        "--slow", action="store_true", help=f"{SLOW_BOARD} frozen 3 s of every 5 (SIGSTOP)"
    )
    p.add_argument(
        "--board-restart",
        action="store_true",
        help=f"{RESTARTED_BOARD} killed (SIGKILL) a third of the way in and started again",
    )
    p.add_argument("--cartpole-steps", type=int, default=50_000)
    p.add_argument("--pendulum-steps", type=int, default=20_000)
    p.add_argument("--out", type=Path, default=REPO / "runs" / "quarantine_fp")
    p.add_argument("--timeout", type=float, default=1800, help="per run, s")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    steps = {"cartpole": args.cartpole_steps, "pendulum": args.pendulum_steps}
    rows = []
    restarts = (False, True) if args.restart else (False,)
    for example in args.examples.split(","):
        for fleet in map(int, args.fleets.split(",")):
            for seed in map(int, args.seeds.split(",")):
                for restart in restarts:
                    s = run_one(
                        example,
                        seed,
                        fleet,
                        restart,
                        steps[example],
                        args.out,
                        args.timeout,
                        args.slow,
                        args.board_restart,
                    )
                    rows.append(cells(s))
                    print(" | ".join(map(str, rows[-1])), flush=True)
    print()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(md_table(HEADERS, rows))


if __name__ == "__main__":
    main()
