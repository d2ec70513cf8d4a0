#!/usr/bin/env python
"""Messages per 1,000 transitions and header bytes per transition, before and after.

    .venv/bin/python benchmarks/wire_overhead.py              # 2 rounds of 6,000 steps, ~8 min
    .venv/bin/python benchmarks/wire_overhead.py --quick      # 1 round of 2,500 steps

Each round runs `edge-rl learn --config examples/cartpole_dqn.yaml` (4 simulated rpi4
actors, model selection off) twice, side by side:

    even     fleet.min_grant=1: credit shared evenly every ~50 ms grant round, as before
    slices   the default fleet.min_grant: slices of at least that many steps per actor

An actor ships its batch when its credit runs out (docs/protocol.md §6.2), so the slice
is the message. Messages are the actors' own `batches_sent` (summary.json), transitions
their `transitions_sent`. Header bytes are those of a batch of the arm's mean size with
this run's ids, measured with the encoder: `described` lists the body's layout in the
header (`arrays`, what every batch carried before), `compact` leaves it out (the learner
lays the body out from its env spec, §3.1). `updates/s` shows what the slices cost the
learner: its update rate over the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _p in (_HERE.parent, _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import numpy as np  # noqa: E402
from _common import md_table  # noqa: E402

from edge_rl.types import TransitionBatch  # noqa: E402
from edge_rl.wire.transitions import encode_transitions  # noqa: E402

CONFIG = _HERE.parent / "examples" / "cartpole_dqn.yaml"
ARMS = {"even": ["--set", "fleet.min_grant=1"], "slices": []}
BODY_BYTES = 4 * 4 + 8 + 4 + 4 * 4 + 1 + 1  # one CartPole transition in the body
SESSION = 2**53 - 1  # 16 digits, as a random 53-bit session mostly has


def learn(out: Path, steps: int, extra: list[str]) -> dict:
    """One run of the example at ``steps``; its summary."""
    sets = {
        "total_env_steps": steps,
        "select_every": 0,
        "select_recheck": 0,
        "eval_episodes": 1,
        "energy.enabled": "false",
    }
    cmd = [sys.executable, "-m", "edge_rl.cli", "learn", "--config", str(CONFIG)]
    cmd += ["--out", str(out)] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    subprocess.run(cmd + extra, check=True, capture_output=True, timeout=1800)
    return json.loads((out / "summary.json").read_text())


def header_bytes(n: int, seq: int, run_id: str, describe: bool) -> int:
    """Prefix and header of a CartPole batch of ``n`` transitions."""
    z = np.zeros((n, 4), np.float32)
    flags = np.zeros(n, bool)
    batch = TransitionBatch(
        "sim-00", SESSION, seq, 12, z, np.zeros(n, np.int64), z[:, 0], z, flags, flags, run_id
    )
    return len(encode_transitions(batch, describe=describe)) - n * BODY_BYTES


def measure(summary: dict) -> dict:
    actors = summary["actors"].values()
    batches = sum(a["batches_sent"] for a in actors)
    transitions = sum(a["transitions_sent"] for a in actors)
    mean = transitions / batches
    n, seq = max(1, round(mean)), batches // len(summary["actors"])
    described = header_bytes(n, seq, summary["run_id"], describe=True)
    compact = header_bytes(n, seq, summary["run_id"], describe=False)
    return {
        "messages": batches,
        "transitions": transitions,
        "per_1000": 1000 * batches / transitions,
        "mean": mean,
        "described": described / mean,
        "compact": compact / mean,
        "updates_per_s": summary["updates"] / summary["wall_s"],
        "wall_s": summary["wall_s"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="1 round of 2,500 steps")
    args = ap.parse_args()
    steps, rounds = (2500, 1) if args.quick else (args.steps, args.rounds)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for arm, extra in ARMS.items():
                t0 = time.monotonic()
                m = measure(learn(Path(tmp) / f"{arm}-{r}", steps, extra))
                print(f"round {r} {arm}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
                rows.append([arm, r, m])
    print(
        f"CartPole DQN, 4 simulated rpi4 actors, {steps:,} env steps per run, "
        f"load average {os.getloadavg()[0]:.1f}\n"
    )
    headers = [
        "arm",
        "round",
        "messages",
        "transitions",
        "messages per 1,000",
        "transitions per message",
        "header B/transition, described",
        "header B/transition, compact",
        "body B/transition",
        "updates/s",
        "wall s",
    ]
    table = [
        [arm, r, m["messages"], m["transitions"], f"{m['per_1000']:.1f}", f"{m['mean']:.1f}"]
        + [f"{m['described']:.1f}", f"{m['compact']:.1f}", BODY_BYTES]
        + [f"{m['updates_per_s']:.0f}", f"{m['wall_s']:.0f}"]
        for arm, r, m in rows
    ]
    print(md_table(headers, table))


if __name__ == "__main__":
    main()
