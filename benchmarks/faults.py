#!/usr/bin/env python
"""Fault injection on the CartPole example: one run per fault, one table.

    nice .venv/bin/python benchmarks/faults.py --out runs/faults            # every row
    .venv/bin/python benchmarks/faults.py --only broker_restart,actor_kill --steps 6000

Each row runs examples/cartpole_dqn.yaml (50,000 env steps, 4 simulated Pi 4 actors)
against a Mosquitto of its own, injects one fault (tests/harness/faults.py) and reads the
accounting from independent counters: what the actors sent (their own counts) against
what the learner put in replay. Columns:

* sent: the actors' ``transitions_sent`` (handed to the MQTT client), by their own count
* received: transitions the learner added to replay from the fleet's actors
* lost: sent + dropped by an actor before sending − received − cut at the budget; the
  cause column splits it by the counters that explain it
* dup: transitions received twice (QoS 1 redelivery; deduplicated, not in replay)
* budget: the learner's ``env_steps == total_env_steps`` and it exited by itself
* wall s: from the learner's start to its exit (a stall shows as a timeout); return: the
  deployed int8 policy's ``final_eval_return`` (10 greedy episodes in LiteRT)

Nothing here asserts a number: tests/e2e/test_faults.py runs short versions and checks.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the shared fault harness
from _common import md_table  # noqa: E402

from tests.harness.fault_run import Row, run_fault  # noqa: E402
from tests.harness.faults import FAULTS  # noqa: E402
from tests.harness.paths import REPO  # noqa: E402

HEADERS = [
    "fault",
    "sent",
    "received",
    "lost",
    "cause of loss",
    "written off",
    "dup",
    "budget",
    "wall s",
    "return",
]


def cells(row: Row) -> list:
    cause = ", ".join(f"{k} {v:,}" for k, v in row.causes.items() if v) or "-"
    ret = "-" if row.final_return is None else f"{row.final_return:.1f}"
    budget = "yes" if row.budget_reached and row.finished else "NO"
    received = f"{row.received:,}" + (f" (+{row.foreign:,} unknown id)" if row.foreign else "")
    return [
        row.fault,
        f"{row.sent:,}",
        received,
        f"{row.lost:,}",
        cause,
        f"{row.written_off:,}",
        f"{row.duplicated:,}",
        budget,
        f"{row.wall_s:.0f}",
        ret,
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", help=f"comma-separated rows of: {', '.join(FAULTS)}")
    p.add_argument("--steps", type=int, default=50_000, help="total_env_steps of each run")
    p.add_argument("--out", type=Path, default=REPO / "runs" / "faults")
    p.add_argument("--timeout", type=float, default=1500, help="per run, s: past it, stalled")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--reuse", action="store_true", help="the table from OUT/*.row.json only")
    args = p.parse_args()
    names = args.only.split(",") if args.only else list(FAULTS)
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        p.error(f"unknown rows {unknown}; rows: {', '.join(FAULTS)}")
    if args.reuse:  # e.g. rows measured by two processes at once
        done = [args.out / f"{n}.row.json" for n in names if (args.out / f"{n}.row.json").exists()]
        print(md_table(HEADERS, [json.loads(f.read_text())["cells"] for f in done]))
        return
    rows = []
    for name in names:
        row = run_fault(FAULTS[name], args.out, args.steps, args.set, args.timeout)
        rows.append(row)
        print(f"{name}: " + " | ".join(map(str, cells(row))), flush=True)
        for e in row.events:
            print("   ", e, flush=True)
        (args.out / f"{name}.row.json").write_text(
            json.dumps(
                {
                    "cells": cells(row),
                    "causes": row.causes,
                    "events": row.events,
                    "foreign": row.foreign,
                    "over_budget": row.over_budget,
                },
                indent=1,
            )
        )
    print()
    print(md_table(HEADERS, [cells(r) for r in rows]))


if __name__ == "__main__":
    main()
