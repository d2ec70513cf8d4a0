#!/usr/bin/env python
"""What moving the TFLite conversion into the export worker costs: int8 export in-process
against in the worker, side by side, plus the worker's start-up.

    .venv/bin/python benchmarks/export_worker.py            # full run, ~2 min
    .venv/bin/python benchmarks/export_worker.py --quick    # smoke run, ~1 min

Two policies, calibrated on 1,000 random normal observations (``export.calibration_size``'s
default): the CartPole DQN net (4-256-256-2) and a HalfCheetah-shaped TD3 actor
(17-256-256-6, tanh head and frozen rescale). Per int8 export:

    in-process  deployable model, the converter in this process (fd-2 filter, quiet
                loggers), LiteRT's I/O check
    worker      ``export_policy``: the same, the conversion in the warm worker (model
                serialised with Keras, sent through a pipe, bytes back)

The two take turns in rounds, so that load on a shared 2-core machine hits both alike; the
table gives the median and the range over rounds, and the median of the per-round
difference. Start-up, measured first on fresh workers: the interpreter to "ready"
(``ExportWorker.start``), and a first export on a fresh worker (start, TensorFlow import,
conversion), which is what the learner's first export pays once per run. The worker's
resident memory is read from /proc after the runs. Nothing here asserts a number.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

# Run as a script from a checkout without installing.
_HERE = Path(__file__).resolve().parent
for _p in (_HERE.parent, _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import numpy as np  # noqa: E402
from _common import SEED, md_table  # noqa: E402

N_CAL = 1_000


def nets():
    from edge_rl.agents.dqn.networks import make_q_network
    from edge_rl.agents.td3.networks import make_actor

    return {
        "CartPole DQN 4-256-256-2": make_q_network(4, 2, (256, 256), seed=SEED),
        "TD3 actor 17-256-256-6": make_actor(17, [-1.0] * 6, [1.0] * 6, (256, 256), seed=SEED),
    }


def export_in_process(model, obs: np.ndarray) -> bytes:
    """The pre-worker ``export_policy`` path (int8), conversion in this process."""
    from edge_rl.export import convert, tflite

    mean, std = obs.mean(axis=0), np.maximum(obs.std(axis=0), tflite.MIN_OBS_STD)
    deployable = tflite.deployable_model(model, mean, std)
    with convert._without_native_lines(convert._NATIVE_NOISE):
        data = convert.convert_model(deployable, obs, "int8", True)
    tflite._read_quant(data)
    return data


def timed(fn, *args) -> float:
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


def _range(s: list[float]) -> str:
    return f"{min(s):.2f}-{max(s):.2f}"


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def rss_mb(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 rounds, 1 start-up sample")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 7, quick 2)")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 7)
    starts = 1 if args.quick else 3
    load0, t_start = os.getloadavg()[0], time.perf_counter()

    import keras
    import tensorflow as tf

    from edge_rl.export import convert
    from edge_rl.export.tflite import export_policy
    from edge_rl.export.worker import ExportWorker, default_worker, shutdown

    def converted(model, obs, precision="int8"):
        """``export_policy`` through the converter in the worker (not the direct path)."""
        return export_policy(model, obs, precision, direct=False)

    convert._quiet_this_process()  # this process converts too (the in-process rows)
    models = nets()
    rng = np.random.default_rng(SEED)
    obs = {
        name: rng.standard_normal((N_CAL, m.input_shape[-1])).astype(np.float32)
        for name, m in models.items()
    }
    first = next(iter(models))

    # Start-up first, on fresh workers: the interpreter alone, then a first export.
    ready_s, first_s = [], []
    for _ in range(starts):
        w = ExportWorker()
        ready_s.append(timed(w.start))
        w.close()
        shutdown()
        first_s.append(timed(converted, models[first], obs[first], "int8"))
    export_in_process(models[first], obs[first])  # warm this process's converter too

    times: dict[tuple[str, str], list[float]] = {}
    for r in range(rounds):
        for name, model in models.items():
            pair = [("in-process", export_in_process), ("worker", converted)]
            for mode, fn in pair if r % 2 == 0 else pair[::-1]:
                times.setdefault((name, mode), []).append(timed(fn, model, obs[name]))
    rss = rss_mb(default_worker().pid)

    rows = []
    for name in models:
        a, b = times[(name, "in-process")], times[(name, "worker")]
        diff = statistics.median(y - x for x, y in zip(a, b, strict=True))
        for mode, s in (("in-process", a), ("worker", b)):
            extra = f"{diff:+.2f}" if mode == "worker" else ""
            rows.append([name, mode, f"{statistics.median(s):.2f}", _range(s), extra])
    load1 = os.getloadavg()[0]
    print("# export worker: int8 export in-process vs in the worker\n")
    print(
        f"machine: {cpu_model()}, {os.cpu_count()} CPUs; "
        f"load avg (1 min) {load0:.2f} -> {load1:.2f}; python {platform.python_version()}, "
        f"tensorflow {tf.__version__}, keras {keras.__version__}"
    )
    print(
        f"mode: {'quick' if args.quick else 'full'}, {rounds} rounds, {N_CAL} calibration "
        f"observations, seed {SEED}; wall {time.perf_counter() - t_start:.0f} s\n"
    )
    headers = ["policy", "conversion", "s / export (median)", "range", "worker - in-process"]
    print(md_table(headers, rows) + "\n")
    startup = [
        ["interpreter to ready (ExportWorker.start)", ready_s],
        [f"first export on a fresh worker ({first})", first_s],
    ]
    print(
        md_table(
            ["worker start-up", "s (median)", "range", "samples"],
            [[what, f"{statistics.median(s):.2f}", _range(s), len(s)] for what, s in startup],
        )
    )
    print(f"\nworker resident memory after the runs: {rss:.0f} MB")


if __name__ == "__main__":
    main()
