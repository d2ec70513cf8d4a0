"""Deadline misses of an emulated Raspberry Pi 4 board at 50 Hz on a MuJoCo env that steps in
wall-clock time (docs/robots.md), int8 against fp32 policies. Not a test: it asserts nothing.

    .venv/bin/python benchmarks/control_rate.py [--steps 500] [--json out.json]

Each arm is the board's step path with its real parts: ``Rate`` (50 Hz, the
``rpi4-robot`` board file's ``control_hz``), the exported TD3 actor in LiteRT
(``TFLitePolicy``, one thread, XNNPACK), the safety ``Shield``, the env
(``examples/realtime_mujoco.py``: Hopper-v5 advanced by the wall clock), and the rpi4
board file's emulation (``Throttle``: sleep 5x the inference and env time). Arms: the
examples' actor network (256-256) on Hopper, int8 and fp32, and the largest example
network's shape (HalfCheetah's 17-256-256-6) on the same loop. The arms take turns in
slices of 50 steps so that the machine's load hits them alike; the 1-min load average is
printed with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from edge_rl.actor.emulation import Throttle  # noqa: E402
from edge_rl.actor.rate import Rate  # noqa: E402
from edge_rl.actor.safety import Shield  # noqa: E402
from edge_rl.boards import board_file, load_board  # noqa: E402
from edge_rl.specs import EnvSpec  # noqa: E402
from examples.realtime_mujoco import RealTime  # noqa: E402

SLICE = 50


class Arm:
    """One policy on its own real-time Hopper, at the board's rate, slowed like a Pi 4."""

    def __init__(self, name: str, precision: str, obs_dim: int, act_dim: int, hz: float) -> None:
        import gymnasium as gym

        from edge_rl.agents.td3.networks import make_actor
        from edge_rl.export.tflite import export_policy
        from edge_rl.runtime.litert import TFLitePolicy

        self.name = name
        self.env = RealTime(gym.make("Hopper-v5"))
        self.spec = EnvSpec.from_gym(self.env.observation_space, self.env.action_space)
        low, high = [-1.0] * act_dim, [1.0] * act_dim
        net = make_actor(obs_dim, low, high, (256, 256), seed=0)
        calib = np.random.default_rng(0).normal(size=(200, obs_dim)).astype(np.float32)
        self.policy = TFLitePolicy(export_policy(net, calib, precision).tflite)
        self.obs_dim, self.act_dim = obs_dim, act_dim
        board = load_board(board_file("rpi4-robot"))
        self.shield = Shield(self.spec, board.safety)
        self.throttle = Throttle(board.emulation.compute_slowdown)
        self.rate = Rate(hz)
        self.obs, _ = self.env.reset(seed=0)
        self.compute: list[float] = []

    def run(self, steps: int) -> None:
        pc = time.perf_counter
        self.rate.restart()  # another arm ran meanwhile: a new schedule, not misses
        self.env.resume()  # ... and its world stood still: no jump of the other arms' time
        for _ in range(steps):
            self.rate.tick()
            t0 = pc()
            x = np.resize(self.obs.astype(np.float32), self.obs_dim)  # the network's input
            out = np.asarray(self.policy(x)).reshape(-1)[: self.spec.action_shape[0]]
            action, _ = self.shield.apply(out)
            self.obs, _, terminated, truncated, _ = self.env.step(action)
            spent = pc() - t0
            self.throttle.charge(spent)  # a Pi 4 is ~6x slower at this work
            self.compute.append(pc() - t0)
            if terminated or truncated:
                self.obs, _ = self.env.reset()
                self.shield.reset()

    def row(self) -> list:
        r, c = self.rate, np.asarray(self.compute) * 1000
        return [
            self.name,
            r.periods,
            r.misses,
            f"{100 * r.misses / max(r.periods + r.misses, 1):.2f} %",  # of all periods
            f"{r.jitter_ms(50):.2f} / {r.jitter_ms(99):.2f}",
            f"{np.median(c):.2f} / {np.percentile(c, 99):.2f}",
        ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=500, help="steps per arm (500 = 10 s at 50 Hz)")
    ap.add_argument("--hz", type=float, default=50.0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    arms = [
        Arm("Hopper actor 11-256-256-3, int8", "int8", 11, 3, args.hz),
        Arm("Hopper actor 11-256-256-3, fp32", "fp32", 11, 3, args.hz),
        Arm("largest example (17-256-256-6), int8", "int8", 17, 6, args.hz),
        Arm("largest example (17-256-256-6), fp32", "fp32", 17, 6, args.hz),
    ]
    load0 = os.getloadavg()[0]
    for _ in range(0, args.steps, SLICE):
        for arm in arms:
            arm.run(SLICE)
    load1 = os.getloadavg()[0]
    headers = [
        "policy",
        "periods",
        "deadline misses",
        "miss rate",
        "jitter p50 / p99 ms",
        "step work (emulated Pi 4) p50 / p99 ms",
    ]
    rows = [a.row() for a in arms]
    print(f"\n{args.hz:g} Hz, emulated rpi4 (compute_slowdown 6), Hopper-v5 in wall-clock time")
    print(
        f"1-min load average: {load0:.2f} at the start, {load1:.2f} at the end "
        f"({os.cpu_count()} cores)\n"
    )
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    if args.json:
        args.json.write_text(json.dumps({"load": [load0, load1], "headers": headers, "rows": rows}))


if __name__ == "__main__":
    main()
