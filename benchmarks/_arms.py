"""Run the arms of a benchmark (one `edge-rl learn` each) at the same time, and wait.

    run_arms({"dense": (run_dir, ["--config", ..., "--set", ...]), ...}, poll=30)

All arms of a seed run concurrently so that a shared machine's load hits them alike; each
writes its own run directory and `benchmark.log`. Progress (each arm's last env steps and
training return, from its metrics.csv) is printed every `poll` seconds; any arm that exits
non-zero ends the benchmark with the arm's log named. An arm whose run directory holds a
checkpoint but no finished summary.json (a run stopped part-way) continues from it with `edge-rl
learn --resume`, so a long benchmark can be run in pieces. Stopping the benchmark (SIGTERM,
Ctrl-C) stops its arms the same way, each writing its checkpoint (STOP_WAIT_S at most,
then SIGKILL).
"""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # arms run here: board paths in configs resolve
EDGE_RL = str(Path(sys.executable).parent / "edge-rl")  # the venv's console script


STOP_WAIT_S = 120.0  # a learner's last checkpoint and its fleet's stop, on a loaded host


def finished(run_dir: Path) -> bool:
    """The run reached its budget: a summary.json that does not say ``interrupted`` (a
    learner stopped by a signal writes one too, after its checkpoint)."""
    path = run_dir / "summary.json"
    return path.exists() and not json.loads(path.read_text()).get("interrupted", False)


def learn_command(run_dir: Path, flags: list[str]) -> list[str]:
    """A new run in ``run_dir``, or ``--resume`` of the one stopped there part-way."""
    if (run_dir / "checkpoint").is_dir() and not finished(run_dir):
        return [EDGE_RL, "learn", "--resume", str(run_dir)]
    return [EDGE_RL, "learn", "--out", str(run_dir), *flags]


def run_arms(arms: dict[str, tuple[Path, list[str]]], poll: float = 30.0) -> None:
    """``arms``: name -> (run directory, `edge-rl learn` flags after ``--out``)."""
    procs = []
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        for name, (run_dir, flags) in arms.items():
            run_dir.mkdir(parents=True, exist_ok=True)
            cmd = learn_command(run_dir, flags)
            log = open(run_dir / "benchmark.log", "a")  # noqa: SIM115 - closed below
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
            procs.append((name, proc, log))
            how = "resumed" if "--resume" in cmd else "started"
            print(f"{how} {name}: {run_dir}", flush=True)
        t0 = time.monotonic()
        while any(proc.poll() is None for _, proc, _ in procs):
            time.sleep(poll)
            status = "  ".join(progress(name, arms[name][0]) for name, _, _ in procs)
            print(f"  {time.monotonic() - t0:6.0f} s  {status}", flush=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop(proc for _, proc, _ in procs)
    failed = []
    for name, proc, log in procs:
        log.close()
        if proc.returncode:
            failed.append(f"{name} (exit {proc.returncode}, see {arms[name][0] / 'benchmark.log'})")
    if failed:
        raise SystemExit(f"arms failed: {', '.join(failed)}")


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds run_arms, whose finally stops the arms


def _stop(procs: Iterable[subprocess.Popen]) -> None:
    """SIGTERM every arm still running (each checkpoints and stops its fleet), then wait,
    SIGKILL after STOP_WAIT_S: no learner outlives its benchmark."""
    live = [p for p in procs if p.poll() is None]
    for proc in live:
        proc.terminate()
    deadline = time.monotonic() + STOP_WAIT_S
    for proc in live:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def progress(name: str, run_dir: Path) -> str:
    """``name: N steps, return R`` from the arm's last metrics.csv row."""
    path = run_dir / "metrics.csv"
    rows = list(csv.DictReader(path.open())) if path.exists() else []
    last = rows[-1] if rows else {}
    return f"{name}: {last.get('env_steps', 0)} steps, return {last.get('recent_return', '-')}"
