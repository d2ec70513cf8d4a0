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
   (b') pretrained: the same dataset, and `replay.pretrain_updates` (PRETRAIN) updates on
        it alone (TD3+BC) before the fleet starts;
   (c) neither.
The table: per arm and seed, the env steps at the first metrics.csv row whose
recent_return (the fleet's last 20 training episodes, exploration and interventions
included) is at least -200; the same once at least 20 episodes are in (a full window),
and the lowest recent return from then on; the deployed policy's final greedy return
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
WINDOW = 20  # episodes: the recent return's full window (metrics.csv's recent_return)
PRETRAIN = 4_000  # updates on the dataset alone before the fleet starts
ARMS = ("teacher", "dataset", "pretrained", "neither")


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


def returns(run: Path) -> list[tuple[int, int, float]]:
    """``(env_steps, episodes, recent_return)`` of each metrics.csv row with a return."""
    with open(run / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("recent_return", "") not in ("", "nan")]
    return [(int(r["env_steps"]), int(r["episodes"]), float(r["recent_return"])) for r in rows]


def steps_to(rows: list[tuple[int, int, float]], threshold: float, window: int = 0) -> int | None:
    """The env steps at the first row whose recent return is ``threshold`` or more, over
    at least ``window`` episodes (the recent return's own window is 20)."""
    return next((s for s, episodes, r in rows if episodes >= window and r >= threshold), None)


def lowest_after(rows: list[tuple[int, int, float]], env_steps: int | None) -> float | None:
    """The lowest recent return of the rows from ``env_steps`` on: does the arm stay?"""
    if env_steps is None:
        return None
    return min((r for s, _, r in rows if s >= env_steps), default=None)


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
            learn(
                out / f"pretrained-s{seed}",
                seed,
                args.steps,
                env,
                "--demos",
                DATASET,
                "--set",
                f"replay.pretrain_updates={PRETRAIN}",
            )
            learn(out / f"dataset-s{seed}", seed, args.steps, env, "--demos", DATASET)
            learn(out / f"neither-s{seed}", seed, args.steps, env)
    rows: list[list] = []
    reached: dict[str, dict[str, list[float]]] = {"first row": {}, f"over {WINDOW} episodes": {}}
    for arm in ARMS:
        for seed in args.seeds:
            run = out / f"{arm}-s{seed}"
            if not (run / "summary.json").exists():
                continue
            s = json.loads((run / "summary.json").read_text())
            metrics = returns(run)
            n = steps_to(metrics, THRESHOLD)
            full = steps_to(metrics, THRESHOLD, window=WINDOW)
            low = lowest_after(metrics, full)
            for name, steps in zip(reached, (n, full), strict=True):
                reached[name].setdefault(arm, []).append(float("inf") if steps is None else steps)
            rows.append(
                [
                    arm,
                    seed,
                    n if n is not None else f"> {s['env_steps']}",
                    full if full is not None else f"> {s['env_steps']}",
                    f"{low:.1f}" if low is not None else "-",
                    f"{s['final_eval_return']:.1f}" if s["final_eval_return"] else "-",
                    f"{s.get('intervention_rate', 0):.3f}",
                    s.get("demonstrations", {}).get("rows", 0),
                ]
            )
    head = [
        "arm",
        "seed",
        "env steps to -200",
        f"to -200 over {WINDOW} episodes",
        "lowest recent return after",
        "final return",
        "intervened",
        "demo rows",
    ]
    print(md_table(head, rows))
    for name, by_arm in reached.items():
        med = {arm: statistics.median(v) for arm, v in by_arm.items()}
        base = med.get("neither")
        for arm in ("teacher", "dataset", "pretrained"):
            if base and arm in med and med[arm]:
                ratio = base / med[arm]
                print(f"{name}: {arm} median env steps {med[arm]} vs {base}: {ratio:.2f}x")
    (out / "table.md").write_text(md_table(head, rows) + "\n")


if __name__ == "__main__":
    main()
