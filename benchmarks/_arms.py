"""Run the arms of a benchmark (one `edge-rl learn` each) at the same time, and wait.

    run_arms({"dense": (run_dir, ["--config", ..., "--set", ...]), ...}, poll=30)

All arms of a seed run concurrently so that a shared machine's load hits them alike; each
writes its own run directory and `benchmark.log`. Progress (each arm's last env steps and
training return, from its metrics.csv) is printed every `poll` seconds; any arm that exits
non-zero ends the benchmark with the arm's log named.
"""

from __future__ import annotations

import csv
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # arms run here: board paths in configs resolve
EDGE_RL = str(Path(sys.executable).parent / "edge-rl")  # the venv's console script


def run_arms(arms: dict[str, tuple[Path, list[str]]], poll: float = 30.0) -> None:
    """``arms``: name -> (run directory, `edge-rl learn` flags after ``--out``)."""
    procs = []
    for name, (run_dir, flags) in arms.items():
        run_dir.mkdir(parents=True, exist_ok=True)
        log = open(run_dir / "benchmark.log", "w")  # noqa: SIM115 - closed below
        cmd = [EDGE_RL, "learn", "--out", str(run_dir), *flags]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        procs.append((name, proc, log))
        print(f"started {name}: {run_dir}", flush=True)
    t0 = time.monotonic()
    while any(proc.poll() is None for _, proc, _ in procs):
        time.sleep(poll)
        status = "  ".join(progress(name, arms[name][0]) for name, _, _ in procs)
        print(f"  {time.monotonic() - t0:6.0f} s  {status}", flush=True)
    failed = []
    for name, proc, log in procs:
        log.close()
        if proc.returncode:
            failed.append(f"{name} (exit {proc.returncode}, see {arms[name][0] / 'benchmark.log'})")
    if failed:
        raise SystemExit(f"arms failed: {', '.join(failed)}")


def progress(name: str, run_dir: Path) -> str:
    """``name: N steps, return R`` from the arm's last metrics.csv row."""
    path = run_dir / "metrics.csv"
    rows = list(csv.DictReader(path.open())) if path.exists() else []
    last = rows[-1] if rows else {}
    return f"{name}: {last.get('env_steps', 0)} steps, return {last.get('recent_return', '-')}"
