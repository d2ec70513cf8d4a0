#!/usr/bin/env python
"""Pipeline bubbles: who waits on whom in a run of the example, quiet and next to a CPU hog.

    .venv/bin/python benchmarks/pipeline.py --out runs/pipeline                 # quiet, busy
    .venv/bin/python benchmarks/pipeline.py --out runs/pipeline-base --root ../base  # a checkout
    .venv/bin/python benchmarks/pipeline.py --reuse --out runs/pipeline         # table only

One `edge-rl learn --config CONFIG --seed S --out DIR` per arm, one at a time: quiet (no hog
of ours), then busy (one process spinning on one core for the whole run, started before the
run and killed by its PID after it). ``--root`` runs another checkout's code (its
``edge_rl`` first on PYTHONPATH, its config), so that the code before a change and after it
are measured with the same script on the same machine. From each run's summary.json
(``runtime_breakdown``, every learner thread's and actor's wall time split into buckets):

* exporter busy: the exporter thread's export + publish + evaluate, % of the learner's wall;
* main idle: the learner's main thread waiting (no update owed, or an export in flight);
* main updates: its share in gradient updates;
* boards idle: the fleet's idle seconds over the fleet's wall (actor-seconds), i.e. the
  share of the boards' time spent waiting for credit or a policy.

The load average (1 min) is read just before each run. Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import md_table  # noqa: E402

from edge_rl.telemetry.breakdown import busy  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
HOG = "import time\nend = time.monotonic() + {t}\nwhile time.monotonic() < end:\n    pass\n"
ARMS = ("quiet", "busy")


def start_hog(timeout_s: float) -> subprocess.Popen:
    """One process spinning on one core, for at most ``timeout_s``."""
    return subprocess.Popen([sys.executable, "-c", HOG.format(t=float(timeout_s))])


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()  # by its own PID, nothing broader
    proc.wait(timeout=10)


def run_one(args: argparse.Namespace, arm: str, run_dir: Path, commit: str) -> dict:
    root = args.root.resolve()
    config = args.config if args.config.is_absolute() else root / args.config
    cmd = [sys.executable, "-m", "edge_rl.cli", "learn", "--config", str(config)]
    cmd += ["--seed", str(args.seed), "--out", str(run_dir)]
    cmd += [x for kv in args.set for x in ("--set", kv)]
    env = dict(os.environ, PYTHONPATH=str(root))
    load = os.getloadavg()[0]
    hog = start_hog(args.timeout + 30) if arm == "busy" else None
    t0 = time.monotonic()
    try:
        with open(run_dir.with_suffix(".out"), "w") as out:
            proc = subprocess.run(
                cmd,
                cwd=root,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=args.timeout,
            )
    except subprocess.TimeoutExpired:
        proc = None
    finally:
        if hog is not None:
            stop(hog)
    meta = {
        "arm": arm,
        "root": str(root),
        "commit": commit,
        "load_1min": round(load, 2),
        "load_1min_end": round(os.getloadavg()[0], 2),
        "command_wall_s": round(time.monotonic() - t0, 1),
        "returncode": None if proc is None else proc.returncode,
    }
    (run_dir / "pipeline.json").write_text(json.dumps(meta))
    return meta


def _commit(root: Path) -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.stdout.strip() or "?"


def shares(summary: dict) -> dict[str, float]:
    """The breakdown's shares, in %: see the module docstring."""
    rb = summary["runtime_breakdown"]
    main, exporter = rb["learner"]["main"], rb["learner"]["exporter"]
    wall = max(main["wall"], 1e-9)
    fleet = rb["fleet_total"]
    return {
        "exporter_busy": 100 * busy(exporter) / wall,
        "main_idle": 100 * main["idle"] / wall,
        "main_updates": 100 * main["updates"] / wall,
        "boards_idle": 100 * fleet.get("idle", 0.0) / max(fleet.get("wall", 0.0), 1e-9),
    }


def row(run_dir: Path) -> list:
    meta = json.loads((run_dir / "pipeline.json").read_text())
    path = run_dir / "summary.json"
    if not path.exists():
        return [meta["commit"], meta["arm"], f"{meta['load_1min']:.2f}", "failed", *["-"] * 8]
    s = json.loads(path.read_text())
    sh = shares(s)
    wall = s["wall_s"]
    updates = s.get("updates", 0)
    ret = s.get("final_eval_return")
    return [
        meta["commit"],
        meta["arm"],
        f"{meta['load_1min']:.2f} -> {meta['load_1min_end']:.2f}",
        f"{wall:.1f}",
        f"{sh['exporter_busy']:.1f}%",
        f"{sh['main_idle']:.1f}%",
        f"{sh['main_updates']:.1f}%",
        f"{sh['boards_idle']:.1f}%",
        f"{updates / max(wall, 1e-9):.0f}",
        f"{s.get('env_steps', 0):,}",
        "-" if ret is None else f"{ret:.1f}",
        meta["command_wall_s"],
    ]


HEADERS = [
    "code",
    "arm",
    "load (1 min)",
    "learner wall s",
    "exporter busy",
    "main idle",
    "main updates",
    "boards idle",
    "updates/s",
    "env steps",
    "final return",
    "command wall s",
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", type=Path, default=Path("examples") / "cartpole_dqn.yaml")
    p.add_argument("--root", type=Path, default=ROOT, help="checkout whose code runs")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", nargs="*", choices=ARMS, default=list(ARMS))
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "pipeline")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run at most")
    p.add_argument("--set", action="append", default=[], help="KEY=VALUE for edge-rl learn")
    p.add_argument("--reuse", action="store_true", help="only print the table of --out")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.reuse:
        commit = _commit(args.root)  # once: every arm runs the code as it was at the start
        for arm in args.arms:
            run_dir = args.out / f"{commit}-s{args.seed}-{arm}"
            if run_dir.exists():
                sys.exit(f"{run_dir} exists: choose another --out or remove it")
            run_dir.mkdir(parents=True)
            meta = run_one(args, arm, run_dir, commit)
            print(f"{arm}: {meta}", flush=True)
    dirs = sorted(d for d in args.out.iterdir() if (d / "pipeline.json").exists())
    print(md_table(HEADERS, [row(d) for d in dirs]))


if __name__ == "__main__":
    main()
