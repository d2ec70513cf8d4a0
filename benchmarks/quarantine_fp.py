#!/usr/bin/env python
"""False positives of the quarantine rule: honest runs of the examples, one table.

    nice .venv/bin/python benchmarks/quarantine_fp.py --out runs/quarantine_fp
    .venv/bin/python benchmarks/quarantine_fp.py --seeds 1,2 --cartpole-steps 10000

Runs examples/cartpole_dqn.yaml and examples/pendulum_td3.yaml (4 simulated Pi 4 actors,
every one honest) once per seed with ``edge-rl learn``, the shipped quarantine rule
(``QuarantineConfig``'s defaults), and reads each run's summary.json. Columns:

* quarantined: boards the rule isolated (an honest fleet: every one is a false positive)
* peak |z|: the largest robust z-score any board reached (the rule fires past max_z)
* judged: boards with enough data to be judged at the end; return: the deployed policy's
  ``final_eval_return``; wall s: the run's own

Nothing here asserts a number: tests/unit/learner/fleet/test_quarantine.py and
tests/e2e/security/test_quarantine_run.py check the rule and a real quarantine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import md_table  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = {"cartpole": "examples/cartpole_dqn.yaml", "pendulum": "examples/pendulum_td3.yaml"}
HEADERS = ["example", "seed", "env steps", "quarantined", "peak |z|", "judged", "return", "wall s"]


def run_one(example: str, seed: int, steps: int, out: Path, timeout: float) -> dict:
    """One honest run; its summary.json (None-filled if it did not finish)."""
    run_dir = out / f"{example}-s{seed}"
    edge_rl = Path(sys.executable).with_name("edge-rl")
    cmd = [
        str(edge_rl),
        "learn",
        "--config",
        str(REPO / EXAMPLES[example]),
        "--seed",
        str(seed),
        "--run",
        f"qfp-{example}-{seed}",
        "--set",
        f"total_env_steps={steps}",
        "--out",
        str(run_dir),
        "--json",
    ]
    with open(out / f"{example}-s{seed}.log", "w") as log:
        proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
    summary = run_dir / "summary.json"
    if proc.returncode != 0 or not summary.exists():
        return {"example": example, "seed": seed, "failed": proc.returncode}
    return {"example": example, "seed": seed, **json.loads(summary.read_text())}


def cells(s: dict) -> list:
    if "failed" in s:
        return [s["example"], s["seed"], "-", f"run failed ({s['failed']})", "-", "-", "-", "-"]
    boards = s["boards"].values()
    peak = max((b["peak_z"] for b in boards), default=0.0)
    judged = sum(b["window"] >= 500 for b in boards)
    ret = s["final_eval_return"]
    return [
        s["example"],
        s["seed"],
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
    p.add_argument("--cartpole-steps", type=int, default=50_000)
    p.add_argument("--pendulum-steps", type=int, default=20_000)
    p.add_argument("--out", type=Path, default=REPO / "runs" / "quarantine_fp")
    p.add_argument("--timeout", type=float, default=1800, help="per run, s")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    steps = {"cartpole": args.cartpole_steps, "pendulum": args.pendulum_steps}
    rows = []
    for example in args.examples.split(","):
        for seed in map(int, args.seeds.split(",")):
            s = run_one(example, seed, steps[example], args.out, args.timeout)
            rows.append(cells(s))
            print(" | ".join(map(str, rows[-1])), flush=True)
    print()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(md_table(HEADERS, rows))


if __name__ == "__main__":
    main()
