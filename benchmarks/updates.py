#!/usr/bin/env python
"""Learner updates/s against this machine's matmul floor, as the examples run them.

    .venv/bin/python benchmarks/updates.py            # full run, ~3 min
    .venv/bin/python benchmarks/updates.py --quick    # smoke run, ~1 min

Two networks, each with its example's config (``examples/cartpole_dqn.yaml``,
``examples/pendulum_td3.yaml``): DQN on CartPole (4-256-256-2, batch 64) and TD3 on
Pendulum (actor 3-256-256-1, twin critics 4-256-256-1, batch 256). Every timed call does
what the learner node does per call: ``ReplayBuffer.sample(K * b)`` from 100k random
transitions, then ``learner.update``. Variants (``K`` = gradient steps per compiled call):

    before   K=1, no XLA: one step per call, as the examples ran
    ...      K and XLA in between
    now      the example's ``updates_per_call`` and ``jit_compile``

**The floor.** The FLOPs of one update are its matmuls (element-wise ops, Adam and the
Polyak averages are a few % of them at these widths): each Dense layer ``[B, i] @ [i, o]``
costs ``2 B i o`` forward and, when trained, ``2 B i o`` for ``dW = X^T dY`` plus ``2 B i o``
for ``dX = dY W^T`` (not for the first layer: no gradient reaches the observation).

    DQN  target forward on s', online forward on s' (double DQN picks a'), online forward
         and backward on s.
    TD3  per critic step: target actor and twin target critics forward on s', twin
         critics forward and backward; every ``policy_delay`` steps an actor step (actor
         forward and backward, Q1 forward and its dX only).

Each distinct product shape is timed alone, with numpy (OpenBLAS) and in a compiled TF
loop (oneDNN), and the faster one is its achievable GFLOP/s. The floor is the time of an
update whose every matmul ran at that speed with nothing else in between; ``roofline/s``
is its inverse and ``share`` the measured updates/s over it.

The variants take turns in rounds (a few seconds each), so that load on a shared 2-core
machine hits them alike; the table gives medians over the rounds.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_HERE = Path(__file__).resolve().parent
for _p in (_HERE.parent, _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import numpy as np  # noqa: E402
from _common import SEED, md_table  # noqa: E402

CAPACITY = 100_000
EXAMPLES = _HERE.parent / "examples"


@dataclass(frozen=True)
class Product:
    """One matmul ``[m, k] @ [k, n]`` and how many times one update runs it."""

    m: int
    k: int
    n: int
    count: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.k * self.n


@dataclass(frozen=True)
class Network:
    name: str
    example: str  # examples/<file>
    products: tuple[Product, ...]  # the matmuls of one update


def dense_shapes(model) -> list[tuple[int, int]]:
    """``(in, out)`` of each Dense kernel of ``model``, in order."""
    return [tuple(layer.kernel.shape) for layer in model.layers if hasattr(layer, "kernel")]


def forward(shapes: list[tuple[int, int]], b: int, times: float) -> list[Product]:
    return [Product(b, i, o, times) for i, o in shapes]


def backward(shapes: list[tuple[int, int]], b: int, times: float, dw: bool = True) -> list[Product]:
    """dW = X^T dY for every layer (when ``dw``); dX = dY W^T for every layer but the first."""
    out = [Product(i, b, o, times) for i, o in shapes] if dw else []
    return out + [Product(b, o, i, times) for i, o in shapes[1:]]


def dqn_products(cfg) -> tuple[Product, ...]:
    from edge_rl.agents.dqn.networks import make_q_network

    shapes = dense_shapes(make_q_network(4, 2, cfg.dqn.hidden, SEED))
    b = cfg.dqn.batch_size
    return tuple(forward(shapes, b, 3.0) + backward(shapes, b, 1.0))


def td3_products(cfg) -> tuple[Product, ...]:
    from edge_rl.agents.td3.networks import make_actor, make_critic

    actor = dense_shapes(make_actor(3, [-2.0], [2.0], cfg.td3.actor_hidden, SEED))
    critic = dense_shapes(make_critic(3, 1, cfg.td3.critic_hidden, SEED))
    b, delay = cfg.td3.batch_size, cfg.td3.policy_delay
    per_actor_step = 1.0 / delay
    return tuple(
        forward(actor, b, 1.0)  # target actor on s'
        + forward(critic, b, 4.0)  # twin targets on (s', a'), twin critics on (s, a)
        + backward(critic, b, 2.0)  # twin critics
        + forward(actor, b, per_actor_step)  # pi(s)
        + forward(critic, b, per_actor_step)  # Q1(s, pi(s))
        + [Product(b, o, i, per_actor_step) for i, o in critic]  # dQ1/da through Q1
        + backward(actor[:-1], b, per_actor_step)  # the frozen rescale: no dW
    )


def matmul_gflops(p: Product, seconds: float) -> float:
    """Best of numpy and a compiled TF loop for one product shape, in GFLOP/s."""
    import tensorflow as tf

    rng = np.random.default_rng(SEED)
    a = rng.standard_normal((p.m, p.k), np.float32)
    w = rng.standard_normal((p.k, p.n), np.float32)
    n, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        a @ w
        n += 1
    numpy_rate = n * p.flops / elapsed

    reps = max(8, int(2e8 / p.flops))  # ~0.2 GFLOP per call: dispatch is noise

    @tf.function
    def loop(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        acc = tf.zeros([], tf.float32)
        for i in tf.range(reps):  # the operand moves with i: no hoisting out of the loop
            acc += tf.reduce_sum(tf.matmul(x + tf.cast(i, tf.float32), y)[0, :1])
        return acc

    ta, tw = tf.constant(a), tf.constant(w)
    loop(ta, tw).numpy()
    n, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        loop(ta, tw).numpy()
        n += reps
    return max(numpy_rate, n * p.flops / elapsed) / 1e9


def floor_seconds(products: tuple[Product, ...], gflops: dict[tuple[int, int, int], float]):
    return sum(p.count * p.flops / (gflops[(p.m, p.k, p.n)] * 1e9) for p in products)


@dataclass(frozen=True)
class Variant:
    label: str
    k: int
    xla: bool


def variants(k_now: int, xla_now: bool) -> list[Variant]:
    grid = [(1, False), (1, True), (k_now, False), (k_now, True), (4 * k_now, True)]
    out = []
    for k, xla in dict.fromkeys(grid):
        label = (
            "before" if (k, xla) == (1, False) else "now" if (k, xla) == (k_now, xla_now) else ""
        )
        out.append(Variant(label, k, xla))
    return out


def make_runner(net: Network, cfg, v: Variant) -> Callable[[], int]:
    """One learner call of variant ``v`` on ``net``'s example config; returns its steps."""
    import dataclasses

    from edge_rl.learner.node import algo_for_run
    from edge_rl.learner.replay import ReplayBuffer
    from edge_rl.specs import EnvSpec

    algo_cfg = getattr(cfg, cfg.algo)
    algo_cfg = dataclasses.replace(algo_cfg, updates_per_call=v.k, jit_compile=v.xla)
    cfg = dataclasses.replace(cfg, **{cfg.algo: algo_cfg})
    if cfg.algo == "dqn":
        spec = EnvSpec(obs_shape=(4,), num_actions=2)
        action = np.random.default_rng(SEED).integers(0, 2, CAPACITY)
    else:
        spec = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))
        action = np.random.default_rng(SEED).uniform(-2, 2, (CAPACITY, 1)).astype(np.float32)
    rng = np.random.default_rng(SEED)
    obs = rng.standard_normal((CAPACITY, *spec.obs_shape), np.float32)
    replay = ReplayBuffer(spec, CAPACITY, seed=SEED)
    replay.add(
        obs,
        action,
        rng.standard_normal(CAPACITY, np.float32),
        obs[::-1].copy(),
        (rng.random(CAPACITY) < 0.01).astype(np.float32),
    )
    algo = algo_for_run(cfg, spec)
    algo.compile()

    def run() -> int:
        algo.update(replay.sample(algo.batch_size))
        return v.k

    run()  # XLA compiles on the first call with concrete shapes
    return run


def timed(run: Callable[[], int], seconds: float) -> float:
    steps, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        steps += run()
    return steps / elapsed


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(ln.split(":", 1)[1].strip() for ln in f if "model name" in ln)
    except (OSError, StopIteration):
        return platform.processor() or "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run, ~1 min")
    parser.add_argument("--rounds", type=int, help="rounds of every variant (3; quick 1)")
    parser.add_argument("--seconds", type=float, help="seconds per variant per round (3; quick 1)")
    args = parser.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    seconds = args.seconds or (1.0 if args.quick else 3.0)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from edge_rl.config import load_run_config

    load0 = os.getloadavg()
    nets = []
    for name, example, products in (
        ("DQN CartPole", "cartpole_dqn.yaml", dqn_products),
        ("TD3 Pendulum", "pendulum_td3.yaml", td3_products),
    ):
        cfg = load_run_config(EXAMPLES / example)
        nets.append((Network(name, example, products(cfg)), cfg))

    shapes = {(p.m, p.k, p.n): p for net, _ in nets for p in net.products}
    gflops = {s: matmul_gflops(p, 0.3 if args.quick else 1.0) for s, p in shapes.items()}
    print(f"timed {len(gflops)} matmul shapes", file=sys.stderr, flush=True)

    runners: dict[tuple[str, Variant], Callable[[], int]] = {}
    for net, cfg in nets:
        algo_cfg = getattr(cfg, cfg.algo)
        for v in variants(algo_cfg.updates_per_call, algo_cfg.jit_compile):
            runners[(net.name, v)] = make_runner(net, cfg, v)
            print(f"built {net.name} K={v.k} XLA={v.xla}", file=sys.stderr, flush=True)

    rate: dict[tuple[str, Variant], list[float]] = {key: [] for key in runners}
    keys = list(runners)
    for r in range(rounds):
        for key in keys if r % 2 == 0 else keys[::-1]:  # no variant always goes first
            rate[key].append(timed(runners[key], seconds))

    rows = []
    for net, _ in nets:
        floor = floor_seconds(net.products, gflops)
        mflop = sum(p.count * p.flops for p in net.products) / 1e6
        before = np.median(rate[(net.name, Variant("before", 1, False))])
        for (name, v), samples in rate.items():
            if name != net.name:
                continue
            ups = float(np.median(samples))
            rows.append(
                [
                    net.name,
                    v.label,
                    v.k,
                    "yes" if v.xla else "no",
                    f"{ups:.0f}",
                    f"{ups / before:.2f}x",
                    f"{mflop:.1f}",
                    f"{mflop / 1e3 / floor:.0f}",
                    f"{1.0 / floor:.0f}",
                    f"{ups * floor:.1%}",
                ]
            )
    print(
        f"Learner updates/s; {rounds} rounds x {seconds:g} s; TF {tf.__version__}, numpy "
        f"{np.__version__}; {cpu_model()}, {os.cpu_count()} CPUs; "
        f"load {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}\n"
    )
    headers = ["network", "", "K", "XLA", "updates/s", "vs before", "MFLOP/update"]
    print(md_table([*headers, "matmul GFLOP/s", "roofline/s", "share"], rows))


if __name__ == "__main__":
    main()
