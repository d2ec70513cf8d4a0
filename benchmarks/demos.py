#!/usr/bin/env python
"""Demonstrations on Pendulum (issue 35 item 5): a teacher, a dataset, or neither.

    nice .venv/bin/python benchmarks/demos.py --out runs/demos               # everything
    nice .venv/bin/python benchmarks/demos.py --out runs/demos --seeds 0     # one seed
    .venv/bin/python benchmarks/demos.py --out runs/demos --reuse            # table only

1. A teacher: `edge-rl learn` on examples/pendulum_td3.yaml (seed 100), its deployed int8
   policy (DIR/teacher/policy.tflite).
2. `edge-rl record DIR/teacher --dataset edge-rl/pendulum/teacher-v0 --steps 5000`
   (MINARI_DATASETS_PATH=DIR/datasets).
3. Per seed, three runs of the same config and budget (--steps, default 20,000):
   (a) teacher: the fleet's board file with `teleop: scripted_teacher` on the teacher's
       policy, taking over 20 of every 200 steps (10 %);
   (b) dataset: `--demos edge-rl/pendulum/teacher-v0` (5,000 demonstration transitions);
   (c) neither.
The table: per arm and seed, the env steps at the first metrics.csv row whose
recent_return (the fleet's last 20 training episodes, exploration and interventions
included) is at least -200, and the deployed policy's final greedy return
(summary.json); then each arm's median steps against (c)'s. Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from _common import md_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "pendulum_td3.yaml"
DATASET = "edge-rl/pendulum/teacher-v0"
THRESHOLD = -200.0
ARMS = ("teacher", "dataset", "neither")


def cli(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "edge_rl.cli", *args], check=True, cwd=ROOT, env=env)


def learn(out: Path, seed: int, steps: int, env: dict[str, str], *extra: str) -> None:
    if (out / "summary.json").exists():
        return
    budget = ["--set", f"total_env_steps={steps}", "--seed", str(seed)]
    cli("learn", "--config", str(CONFIG), "--out", str(out), *budget, *extra, env=env)


def teacher_board(out: Path, teacher: Path) -> Path:
    """rpi4's board file with the scripted teacher on ``teacher``'s policy."""
    board = yaml.safe_load((ROOT / "edge_rl" / "firmware_configs" / "rpi4.yaml").read_text())
    board["teleop"] = "edge_rl.actor.teleop:scripted_teacher"
    board["teleop_args"] = {
        "model": str(teacher / "policy.tflite"),
        "every_steps": 200,
        "for_steps": 20,
    }
    key = board.get("policy_public_key")
    if key:  # relative to the shipped board file's directory
        board["policy_public_key"] = str(ROOT / "edge_rl" / "firmware_configs" / key)
    path = out / "rpi4-teacher.yaml"
    path.write_text(yaml.safe_dump(board))
    return path


def steps_to(run: Path, threshold: float) -> int | None:
    with open(run / "metrics.csv") as f:
        for row in csv.DictReader(f):
            r = row.get("recent_return", "")
            if r not in ("", "nan") and float(r) >= threshold:
                return int(row["env_steps"])
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--reuse", action="store_true", help="only the table of finished runs")
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MINARI_DATASETS_PATH": str(out / "datasets")}
    teacher = out / "teacher"
    if not args.reuse:
        learn(teacher, 100, args.steps, env)
        if not (out / "datasets" / DATASET).exists():
            cli("record", str(teacher), "--dataset", DATASET, "--steps", "5000", env=env)
        board = teacher_board(out, teacher)
        for seed in args.seeds:
            learn(out / f"teacher-s{seed}", seed, args.steps, env, "--board", str(board))
            learn(out / f"dataset-s{seed}", seed, args.steps, env, "--demos", DATASET)
            learn(out / f"neither-s{seed}", seed, args.steps, env)
    rows, medians = [], {}
    for arm in ARMS:
        reached = []
        for seed in args.seeds:
            run = out / f"{arm}-s{seed}"
            if not (run / "summary.json").exists():
                continue
            s = json.loads((run / "summary.json").read_text())
            n = steps_to(run, THRESHOLD)
            reached.append(n if n is not None else float("inf"))
            rows.append(
                [
                    arm,
                    seed,
                    n if n is not None else f"> {s['env_steps']}",
                    f"{s['final_eval_return']:.1f}" if s["final_eval_return"] else "-",
                    f"{s.get('intervention_rate', 0):.3f}",
                    s.get("demonstrations", {}).get("rows", 0),
                ]
            )
        if reached:
            medians[arm] = statistics.median(reached)
    head = ["arm", "seed", "env steps to -200", "final return", "intervened", "demo rows"]
    print(md_table(head, rows))
    base = medians.get("neither")
    for arm in ("teacher", "dataset"):
        if base and arm in medians and medians[arm]:
            print(f"{arm}: median env steps {medians[arm]} vs {base}: {base / medians[arm]:.2f}x")
    (out / "table.md").write_text(md_table(head, rows) + "\n")


if __name__ == "__main__":
    main()
