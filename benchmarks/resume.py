#!/usr/bin/env python
"""Durable runs: `kill -9` of the learner part-way, then `edge-rl learn --resume`.

    nice .venv/bin/python benchmarks/resume.py --out runs/resume            # both runs
    nice .venv/bin/python benchmarks/resume.py --runs cartpole --out runs/resume
    .venv/bin/python benchmarks/resume.py --reuse --out runs/resume          # table only
    nice .venv/bin/python benchmarks/resume.py --cost     # one checkpoint's cost, in-process

Per run: `edge-rl learn --config CONFIG --out DIR` (its default checkpoint schedule,
every 60 s), watched through DIR/metrics.csv; once it has received KILL_AT env steps the
learner is killed with SIGKILL by its PID (its broker and actors follow by pdeathsig),
then `edge-rl learn --resume DIR` runs to the budget. The table: where it was killed,
which checkpoint it resumed from, the final env steps, whether the policy versions in
publishes.jsonl increase strictly across the restart, the deployed int8 model's final
return (summary.json), and what one checkpoint cost (learner.log: the median, and the
last one, with the full replay). --cost times `Durable.save` of the CartPole example's
learner (no broker: MemoryBroker) with 0, 10,000, 50,000 and 100,000 transitions in
replay, side by side: the main thread's pause (copies and the fsynced write) and the
checkpoint's size. Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import md_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUNS = {  # name: (config, kill at env steps, budget, return to reach)
    "cartpole": ("examples/cartpole_dqn.yaml", 20_000, 50_000, 475.0),
    "pendulum": ("examples/pendulum_td3.yaml", 10_000, 20_000, -200.0),
}
EDGE_RL = str(ROOT / ".venv" / "bin" / "edge-rl")


def last_env_steps(run_dir: Path) -> int:
    try:
        rows = (run_dir / "metrics.csv").read_text().splitlines()[1:]
        return int(rows[-1].split(",")[1]) if rows else 0
    except (OSError, ValueError, IndexError):  # not there yet, or a row being written
        return 0


def children_of(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    return kids


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_part_way(config: str, kill_at: int, run_dir: Path, timeout: float) -> dict:
    with open(run_dir.with_suffix(".first.out"), "w") as out:
        proc = subprocess.Popen(
            [EDGE_RL, "learn", "--config", config, "--out", str(run_dir)],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if last_env_steps(run_dir) >= kill_at:
            break
        time.sleep(0.2)
    killed_at = last_env_steps(run_dir)
    children = children_of(proc.pid)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)  # the learner, by its PID
    proc.wait(timeout=30)
    end = time.monotonic() + 30  # its broker and actors follow it (pdeathsig)
    while any(alive(c) for c in children) and time.monotonic() < end:
        time.sleep(0.2)
    for c in children:
        if alive(c):
            os.kill(c, signal.SIGKILL)
    header = json.loads((run_dir / "checkpoint" / "header.json").read_text())
    return {
        "killed_at": killed_at,
        "resumed_from": header["env_steps"],
        "versions_before": len(versions(run_dir)),
    }


def versions(run_dir: Path) -> list[int]:
    path = run_dir / "publishes.jsonl"
    out = []
    for line in path.read_text().splitlines() if path.exists() else []:
        try:
            out.append(int(json.loads(line)["policy_version"]))
        except (ValueError, KeyError):
            continue
    return out


def checkpoint_costs(run_dir: Path) -> list[float]:
    text = (run_dir / "learner.log").read_text()
    return [float(s) for s in re.findall(r"durable: checkpoint at .*: ([0-9.]+) s", text)]


def run_one(name: str, out: Path, timeout: float) -> None:
    config, kill_at, _, _ = RUNS[name]
    run_dir = out / name
    if run_dir.exists():
        sys.exit(f"{run_dir} exists: choose another --out or remove it")
    t0 = time.monotonic()
    meta = kill_part_way(config, kill_at, run_dir, timeout)
    with open(run_dir.with_suffix(".resume.out"), "w") as f:
        proc = subprocess.run(
            [EDGE_RL, "learn", "--resume", str(run_dir)],
            cwd=ROOT,
            stdout=f,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    meta.update(returncode=proc.returncode, command_wall_s=round(time.monotonic() - t0, 1))
    (run_dir.with_suffix(".json")).write_text(json.dumps(meta))
    print(f"{name}: {meta}", flush=True)


def row(name: str, out: Path) -> list:
    run_dir = out / name
    meta = json.loads(run_dir.with_suffix(".json").read_text())
    _, _, budget, target = RUNS[name]
    s = json.loads((run_dir / "summary.json").read_text()) if meta["returncode"] == 0 else {}
    vs = versions(run_dir)
    monotonic = all(b > a for a, b in zip(vs, vs[1:], strict=False))
    ret = s.get("final_eval_return")
    costs = checkpoint_costs(run_dir)
    size = sum(f.stat().st_size for f in (run_dir / "checkpoint").rglob("*") if f.is_file())
    return [
        name,
        f"{budget:,}",
        f"{meta['killed_at']:,}",
        f"{meta['resumed_from']:,}",
        f"{s.get('env_steps', 0):,}",
        "yes" if monotonic else "**no**",
        f"v{vs[meta['versions_before'] - 1]} → v{vs[meta['versions_before']]}",
        f"v{vs[-1]}",
        "failed" if ret is None else f"{ret:.1f}",
        "**yes**" if ret is not None and ret >= target else "no",
        s.get("wall_s", "-"),
        meta["command_wall_s"],
        len(costs),
        f"{statistics.median(costs):.3f}",
        f"{costs[-1]:.3f}",
        f"{size / 1e6:.1f}",
    ]


def checkpoint_cost(repeats: int = 5) -> None:
    import tempfile

    import numpy as np

    from edge_rl.config import load_run_config
    from edge_rl.learner.node import LearnerNode
    from edge_rl.transport.memory import MemoryBroker

    cfg = load_run_config(ROOT / "examples" / "cartpole_dqn.yaml")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        node = LearnerNode(cfg, MemoryBroker().connect, Path(tmp) / "run")
        node.packager.wait_ready(timeout=120)  # its TensorFlow import: not next to the timing
        rng, filled = np.random.default_rng(0), 0
        for n in (0, 10_000, 50_000, 100_000):
            k = n - filled
            if k:
                obs = rng.normal(size=(k, 4)).astype(np.float32)
                node.replay.add(
                    obs, rng.integers(0, 2, k), np.ones(k, np.float32), obs, np.zeros(k, np.float32)
                )
                filled = n
            seconds = []
            for _ in range(repeats):
                node.durable.save()
                seconds.append(node.durable.last_seconds)
            ck = Path(tmp) / "run" / "checkpoint"
            size = sum(f.stat().st_size for f in ck.rglob("*") if f.is_file())
            rows.append(
                [
                    f"{n:,}",
                    f"{statistics.median(seconds) * 1e3:.1f}",
                    f"{min(seconds) * 1e3:.1f}",
                    f"{max(seconds) * 1e3:.1f}",
                    f"{size / 1e6:.2f}",
                ]
            )
    headers = ["transitions in replay", "median ms", "min ms", "max ms", "checkpoint MB"]
    print(f"CartPole DQN 4-256-256-2, Durable.save() x{repeats}")
    print(md_table(headers, rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="*", choices=list(RUNS), default=list(RUNS))
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "resume")
    p.add_argument("--timeout", type=float, default=1200.0, help="seconds per command at most")
    p.add_argument("--reuse", action="store_true", help="only print the table of --out")
    p.add_argument("--cost", action="store_true", help="only time one checkpoint, in-process")
    args = p.parse_args()
    if args.cost:
        return checkpoint_cost()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.reuse:
        for name in args.runs:
            run_one(name, args.out, args.timeout)
    names = [n for n in RUNS if (args.out / f"{n}.json").exists()]
    headers = [
        "run",
        "budget",
        "killed at",
        "resumed from",
        "final env steps",
        "versions monotonic",
        "across the restart",
        "last version",
        "final return",
        "reached",
        "learner wall_s",
        "command wall_s",
        "checkpoints",
        "median s",
        "last s (full replay)",
        "checkpoint MB",
    ]
    print(md_table(headers, [row(n, args.out) for n in names]))


if __name__ == "__main__":
    main()
