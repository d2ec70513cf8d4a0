#!/usr/bin/env python
"""Export time per policy version: the whole TFLite converter against the direct path
(weights written into a template flatbuffer), side by side, with the parity gate's pass rate.

    .venv/bin/python benchmarks/export_speed.py              # 30 versions per policy
    .venv/bin/python benchmarks/export_speed.py --quick      # 5 versions, a smoke run

Two policies, int8 per-channel (the learner's default), calibrated on 1,000 observations
and gated on 1,000 others (``export.calibration_size`` / ``parity_size``): the CartPole DQN
net (4-256-256-2) and a TD3 actor (17-256-256-6, tanh head, bounds that differ per
dimension). Between versions every trainable weight moves (Gaussian steps, 2 % of the
weights' spread) and the biases drift, as training does. Per version both paths export the
same snapshot, in alternating order so that load hits both alike:

    converter  ``export_policy(..., direct=False)``: the model converted whole in the warm
               export worker (serialise, MLIR, calibrate, quantise)
    direct     ``export_policy(...)``: weights, biases, normalisation and int8 parameters
               written into the structure's template, LiteRT self-check

Each export then goes through the learner's parity gate (``DQNAlgo.judge`` /
``TD3Algo.judge`` thresholds from ``ExportConfig``). The template's one conversion per
structure happens before the timed versions and is shown apart. Nothing here asserts a
number.
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
N_PARITY = 1_000
TD3_LOW = np.array([-1.0, -2.0, -0.5, -1.0, -3.0, 0.0])
TD3_HIGH = np.array([1.0, 1.0, 0.5, 2.0, 3.0, 1.0])


def policies() -> dict[str, tuple]:
    """name -> (model, observation sampler, gate)."""
    from edge_rl.agents.dqn.networks import make_q_network
    from edge_rl.agents.td3.networks import make_actor
    from edge_rl.config import ExportConfig
    from edge_rl.export.parity import check_action_parity, check_q_parity

    e = ExportConfig()
    half = (TD3_HIGH - TD3_LOW) / 2
    cart_scale = np.array([2.0, 3.0, 0.2, 3.0], np.float32)
    cheetah_scale = np.linspace(0.5, 10.0, 17).astype(np.float32)

    def dqn_gate(exported, model, obs) -> bool:
        return check_q_parity(exported, model, obs).greedy_agreement >= e.min_greedy_agreement

    def td3_gate(exported, model, obs) -> bool:
        r = check_action_parity(exported, model, obs, half, e.action_error_quantile)
        return r.passes(e.max_action_error, e.mean_action_error)

    return {
        "CartPole DQN 4-256-256-2": (
            make_q_network(4, 2, (256, 256), seed=SEED),
            lambda rng, n: (rng.standard_normal((n, 4)) * cart_scale).astype(np.float32),
            dqn_gate,
        ),
        "TD3 actor 17-256-256-6": (
            make_actor(17, TD3_LOW, TD3_HIGH, (256, 256), seed=SEED),
            lambda rng, n: (rng.standard_normal((n, 17)) * cheetah_scale).astype(np.float32),
            td3_gate,
        ),
    }


def train_step(model, rng: np.random.Generator) -> None:
    """Move every trainable weight and bias, as an interval of training would."""
    for layer in model.layers:
        if not layer.trainable:
            continue
        kernel = np.asarray(layer.kernel)
        step = rng.normal(0.0, 0.02 * float(kernel.std()), kernel.shape).astype(np.float32)
        layer.kernel.assign(kernel + step)
        bias = np.asarray(layer.bias)
        layer.bias.assign(bias + rng.normal(0.0, 0.01, bias.shape).astype(np.float32))


def timed_export(model, obs: np.ndarray, direct: bool):
    from edge_rl.export.tflite import export_policy

    t0 = time.perf_counter()
    exported = export_policy(model, obs, "int8", direct=direct)
    return exported, time.perf_counter() - t0


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 versions per policy")
    parser.add_argument("--versions", type=int, default=0, help="versions per policy")
    args = parser.parse_args()
    versions = args.versions or (5 if args.quick else 30)
    load0, t_start = os.getloadavg()[0], time.perf_counter()

    import tensorflow as tf

    from edge_rl.export.tflite import start_export_worker

    start_export_worker().join(300)
    rng = np.random.default_rng(SEED)
    rows, template_rows = [], []
    for name, (model, sample, gate) in policies().items():
        train_step(model, rng)
        calibration = sample(rng, N_CAL)
        first, first_s = timed_export(model, calibration, direct=True)  # the template
        template_rows.append([name, f"{first_s:.2f}", first.path])
        timed_export(model, calibration, direct=False)  # the worker has built this model
        seconds: dict[str, list[float]] = {"converter": [], "direct": []}
        passed = {"converter": 0, "direct": 0}
        paths: set[str] = set()
        for v in range(versions):
            train_step(model, rng)
            calibration, held_out = sample(rng, N_CAL), sample(rng, N_PARITY)
            order = [False, True] if v % 2 == 0 else [True, False]
            for direct in order:
                exported, s = timed_export(model, calibration, direct)
                mode = "direct" if direct else "converter"
                paths.add(f"{mode}:{exported.path}")
                seconds[mode].append(s)
                passed[mode] += bool(gate(exported, model, held_out))
        conv = statistics.median(seconds["converter"])
        for mode in ("converter", "direct"):
            s = seconds[mode]
            speedup = f"{conv / statistics.median(s):.0f}x" if mode == "direct" else ""
            rows.append(
                [
                    name,
                    mode,
                    f"{1000 * statistics.median(s):.1f}",
                    f"{1000 * p95(s):.1f}",
                    f"{passed[mode]}/{versions}",
                    speedup,
                ]
            )
        if paths != {"converter:converter", "direct:direct"}:
            print(f"WARNING: {name}: the paths that made the exports were {sorted(paths)}")

    load1 = os.getloadavg()[0]
    print("# export speed: the converter against weights written into a template\n")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs; load avg (1 min) "
        f"{load0:.2f} -> {load1:.2f}; python {platform.python_version()}, "
        f"tensorflow {tf.__version__}"
    )
    print(
        f"{versions} versions per policy, int8 per-channel, {N_CAL} calibration and "
        f"{N_PARITY} parity observations, seed {SEED}; wall {time.perf_counter() - t_start:.0f} s\n"
    )
    headers = ["policy", "path", "ms / export (median)", "p95", "parity gate passed", "speed-up"]
    print(md_table(headers, rows) + "\n")
    print(
        md_table(["policy", "first export: template conversion + write (s)", "path"], template_rows)
    )


if __name__ == "__main__":
    main()
