#!/usr/bin/env python
"""What the exporter thread does per policy version, piece by piece, in whatever
``edge_rl`` is first on the path (so that two checkouts compare side by side):

    PYTHONPATH=../base .venv/bin/python benchmarks/export_cycle.py    # the code before
    PYTHONPATH=.       .venv/bin/python benchmarks/export_cycle.py    # this checkout

Per version of the CartPole DQN net (4-256-256-2, every weight moved between versions, as
``export_speed.py`` moves them): ``export_policy`` int8 per-channel on 1,000 calibration
observations, the learner's parity check (``check_q_parity``) on 1,000 others, the policy
codec (zlib), and the model selection's score: 10 greedy episodes (``Evaluator``) of a
policy that balances to 500 (``tests/e2e/data/cartpole_good_int8.tflite``), the longest a
score gets. Prints the median ms of each and the load average. Nothing here asserts a
number.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE))

import numpy as np  # noqa: E402
from export_speed import train_step  # noqa: E402

GOOD = _HERE.parent / "tests" / "e2e" / "data" / "cartpole_good_int8.tflite"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", type=int, default=30)
    args = parser.parse_args()
    from edge_rl.agents.dqn.networks import make_q_network
    from edge_rl.export.parity import check_q_parity
    from edge_rl.export.tflite import export_policy, start_export_worker
    from edge_rl.runtime.evaluate import Evaluator
    from edge_rl.wire.policy import compress_model

    start_export_worker().join(300)
    rng = np.random.default_rng(0)
    model = make_q_network(4, 2, (256, 256), seed=0)
    scale = np.array([2.0, 3.0, 0.2, 3.0], np.float32)

    def sample(n: int) -> np.ndarray:
        return (rng.standard_normal((n, 4)) * scale).astype(np.float32)

    export_policy(model, sample(1000), "int8")  # the template, not timed
    good = GOOD.read_bytes()
    evaluator = Evaluator("CartPole-v1")
    evaluator.run(good, 10, seed=0)  # its envs, not timed
    load0 = os.getloadavg()[0]
    seconds: dict[str, list[float]] = {"export": [], "parity": [], "zlib": [], "score": []}
    for v in range(args.versions):
        train_step(model, rng)
        calibration, held_out = sample(1000), sample(1000)
        t0 = time.perf_counter()
        exported = export_policy(model, calibration, "int8")
        t1 = time.perf_counter()
        check_q_parity(exported, model, held_out)
        t2 = time.perf_counter()
        compress_model(exported.tflite, "zlib")
        t3 = time.perf_counter()
        evaluator.run(good, 10, seed=20_000 + v)
        t4 = time.perf_counter()
        for key, a, b in zip(seconds, (t0, t1, t2, t3), (t1, t2, t3, t4), strict=True):
            seconds[key].append(b - a)
    evaluator.close()
    medians = {k: round(1000 * float(np.median(v)), 1) for k, v in seconds.items()}
    load = f"{load0:.1f} -> {os.getloadavg()[0]:.1f}"
    print(json.dumps({"load": load, "versions": args.versions, "ms_median": medians}))


if __name__ == "__main__":
    main()
