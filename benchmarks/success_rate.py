#!/usr/bin/env python
"""Success rate of the CartPole example: deployed int8 >= 475 within the run's env steps.

    .venv/bin/python benchmarks/success_rate.py --seeds 0 1 2 3 4 --out runs/sr          # quiet
    .venv/bin/python benchmarks/success_rate.py --seeds 0 1 2 3 4 --busy --out runs/sr   # + hog
    .venv/bin/python benchmarks/success_rate.py --reuse --out runs/sr   # table from run dirs

One `edge-rl learn --config CONFIG --seed S --out DIR` per seed, one at a time. With
--busy, a CPU hog (one process spinning on one core) is started before each run and
killed by its PID after it; the hog also ends by itself after --timeout seconds, so a
killed benchmark cannot leave it behind. Each run's summary.json gives the return of the
deployed int8 model in LiteRT (`final_eval_return`), `env_steps`, `wall_s` and the model
selection's scores; the load average is read just before the run starts. Prints a
markdown table. Nothing here asserts a number.
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

ROOT = Path(__file__).resolve().parents[1]
SUCCESS = 475.0  # CartPole-v1's "solved" return
HOG = "import time\nend = time.monotonic() + {t}\nwhile time.monotonic() < end:\n    pass\n"


def start_hog(timeout_s: float) -> subprocess.Popen:
    """One process spinning on one core, for at most ``timeout_s``."""
    return subprocess.Popen([sys.executable, "-c", HOG.format(t=float(timeout_s))])


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()  # by its own PID, nothing broader
    proc.wait(timeout=10)


def run_one(args: argparse.Namespace, seed: int, busy: bool, run_dir: Path) -> dict:
    load = os.getloadavg()[0]
    cmd = [
        str(ROOT / ".venv" / "bin" / "edge-rl"),
        "learn",
        "--config",
        str(args.config),
        "--seed",
        str(seed),
        "--out",
        str(run_dir),
        *(x for kv in args.set for x in ("--set", kv)),
    ]
    hog = start_hog(args.timeout + 30) if busy else None
    t0 = time.monotonic()
    try:
        with open(run_dir.with_suffix(".out"), "w") as out:
            proc = subprocess.run(
                cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, timeout=args.timeout
            )
    except subprocess.TimeoutExpired:
        proc = None
    finally:
        if hog is not None:
            stop(hog)
    meta = {
        "seed": seed,
        "busy": busy,
        "load_1min": round(load, 2),
        "command_wall_s": round(time.monotonic() - t0, 1),
        "returncode": None if proc is None else proc.returncode,
    }
    (run_dir / "success_rate.json").write_text(json.dumps(meta))
    return meta


def row(run_dir: Path) -> list:
    meta = json.loads((run_dir / "success_rate.json").read_text())
    path = run_dir / "summary.json"
    s = json.loads(path.read_text()) if path.exists() else {}
    ret = s.get("final_eval_return")
    scores = s.get("selection_scores") or {}
    best = max(scores.values()) if scores else None
    steps = s.get("env_steps")
    ok = ret is not None and ret >= SUCCESS and steps is not None and steps <= 50_000
    return [
        meta["seed"],
        "yes" if meta["busy"] else "no",
        f"{meta['load_1min']:.2f}",
        "failed" if ret is None else f"{ret:.1f}",
        "-" if steps is None else f"{steps:,}",
        s.get("wall_s", "-"),
        meta["command_wall_s"],
        "-" if best is None else f"{best:.1f}",
        len(scores),
        sum(v >= SUCCESS for v in scores.values()),
        s.get("exports_failed", "-"),
        "**yes**" if ok else "no",
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", type=Path, default=ROOT / "examples" / "cartpole_dqn.yaml")
    p.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3, 4])
    p.add_argument("--busy", action="store_true", help="run each next to a CPU hog")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "success_rate")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per run at most")
    p.add_argument("--set", action="append", default=[], help="KEY=VALUE for edge-rl learn")
    p.add_argument("--reuse", action="store_true", help="only print the table of --out")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.reuse:
        for seed in args.seeds:
            tag = "busy" if args.busy else "quiet"
            run_dir = args.out / f"s{seed}-{tag}"
            if run_dir.exists():
                sys.exit(f"{run_dir} exists: choose another --out or remove it")
            run_dir.mkdir(parents=True)
            meta = run_one(args, seed, args.busy, run_dir)
            print(f"seed {seed} {tag}: {meta}", flush=True)
    dirs = [d for d in args.out.iterdir() if (d / "success_rate.json").exists()]
    rows = sorted((row(d) for d in dirs), key=lambda r: (r[0], r[1]))  # seed, then busy
    headers = [
        "seed",
        "busy",
        "load (1 min)",
        "final_eval_return",
        "env steps",
        "learner wall_s",
        "command wall_s",
        "best selection score",
        "policies scored",
        "scored >= 475",
        "exports failing parity",
        "success (>= 475)",
    ]
    print(md_table(headers, rows))
    wins = sum(r[-1] == "**yes**" for r in rows)
    print(f"\n{wins} of {len(rows)} runs reach >= {SUCCESS:g} within 50,000 env steps")


if __name__ == "__main__":
    main()
