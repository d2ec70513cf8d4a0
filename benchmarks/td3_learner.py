#!/usr/bin/env python
"""TD3 learner updates/s: gradient steps per compiled call, XLA, and where sampling runs.

    .venv/bin/python benchmarks/td3_learner.py            # full run, ~1.8 min
    .venv/bin/python benchmarks/td3_learner.py --quick    # smoke run, ~35 s

HalfCheetah shapes (obs 17, action 6), batch 256, 256-256 actor and critics, default
TD3Config otherwise. Every timed call includes what the learner node does per call:
``ReplayBuffer.sample(K * 256)`` from 100k random transitions, then ``TD3Learner.update``.
Variants (``K`` = gradient steps per compiled call, ``updates_per_call``):

    a    K=1                       b    K=4                      c    K=16
    a+x  K=1, XLA (jit_compile)    b+x  K=4, XLA                 c+x  K=16, XLA
    d    K=16, XLA, sampling inside the graph: the replay lives in tf.Variables and the
         compiled call gathers its own random indices (``InGraphSampling`` below, a
         benchmark-only subclass: keeping tf.Variables in step with the ingest thread's
         writes is a design of its own, not worth it unless this row says so).
    e    K=16, hidden-layer matmuls in bfloat16 (Keras ``mixed_bfloat16``; weights, Adam and
         the heads in float32); e+x the same with XLA
    torch  the usual implementation, as a baseline: PyTorch eager, one step per call,
         CleanRL's TD3 update (``_torch_td3.py``); shown when torch is installed.

The variants take turns in rounds (a few seconds each), so that load on a shared 2-core
machine hits them alike; the table gives the median over rounds of updates/s, of the ratio
to ``a`` measured within the same round, and of process CPU time per update (TF's intra-op
pool may use both cores). ``compile_s`` is ``TD3Learner.compile()`` plus the first call.

Loop form (measured while writing TD3Learner): the K steps run as a ``tf.while_loop``
(``for i in tf.range(K)``). A Python loop unrolled at trace time gave the same updates/s
within noise (K=16: 216 vs 251 without XLA, 274 vs 263 with XLA) but took ~25 s to trace
and compile at K=16 against ~3 s, growing linearly in K.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Run as a script from a checkout without installing.
_HERE = Path(__file__).resolve().parent
for _p in (_HERE.parent, _HERE):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import numpy as np  # noqa: E402
from _common import SEED, md_table  # noqa: E402

OBS_DIM, ACT_DIM, BATCH, CAPACITY = 17, 6, 256, 100_000


@dataclass(frozen=True)
class Variant:
    name: str
    k: int
    xla: bool
    in_graph: bool = False
    torch: bool = False  # the PyTorch baseline (benchmarks/_torch_td3.py)
    bf16: bool = False  # hidden-layer matmuls in bfloat16


VARIANTS = [
    Variant("a", 1, False),
    Variant("a+x", 1, True),
    Variant("b", 4, False),
    Variant("b+x", 4, True),
    Variant("c", 16, False),
    Variant("c+x", 16, True),
    Variant("d", 16, True, in_graph=True),
    Variant("e", 16, False, bf16=True),
    Variant("e+x", 16, True, bf16=True),
]
BASELINE = Variant("torch", 1, False, torch=True)


def random_transitions(n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    return (
        rng.standard_normal((n, OBS_DIM), np.float32),
        rng.uniform(-1.0, 1.0, (n, ACT_DIM)).astype(np.float32),
        rng.standard_normal(n, np.float32),
        rng.standard_normal((n, OBS_DIM), np.float32),
        (rng.random(n) < 0.01).astype(np.float32),
    )


def make_runner(variant: Variant, spec, replay, arrays):
    """A zero-argument callable doing one learner call; returns the gradient steps taken."""
    import tensorflow as tf

    from edge_rl.agents.td3.config import TD3Config
    from edge_rl.agents.td3.learning import TD3Learner

    config = TD3Config(batch_size=BATCH, updates_per_call=variant.k, jit_compile=variant.xla)

    if variant.torch:
        from _torch_td3 import make_torch_td3

        step = make_torch_td3(OBS_DIM, ACT_DIM, seed=SEED)

        class Eager:
            def compile(self) -> None:
                pass

        def run_torch() -> int:
            b = replay.sample(BATCH)
            step(b.obs, b.action, b.reward, b.next_obs, b.terminated.astype(np.float32))
            return 1

        return Eager(), run_torch

    if not variant.in_graph:
        with bf16_hidden_layers() if variant.bf16 else contextlib.nullcontext():
            learner = TD3Learner(spec, config, seed=SEED)
        n = variant.k * BATCH

        def run() -> int:
            learner.update(replay.sample(n))
            return variant.k

        return learner, run

    class InGraphSampling(TD3Learner):
        """The replay as tf.Variables; the compiled call draws and gathers its minibatches."""

        def __init__(self) -> None:
            super().__init__(spec, config, seed=SEED)
            self.store = [tf.Variable(x, trainable=False) for x in arrays]  # [N, ...] each
            self.size = tf.Variable(len(arrays[2]), dtype=tf.int32, trainable=False)
            self._train_sampled = tf.function(
                self._sample_and_train, jit_compile=config.jit_compile
            )

        def _sample_and_train(self):
            n = config.updates_per_call * config.batch_size
            idx = self._rng.uniform([n], 0, self.size, dtype=tf.int32)  # [K * B]
            return self._train_steps(*(tf.gather(x, idx) for x in self.store))

        def compile(self) -> None:
            self._train_sampled.get_concrete_function()

    learner = InGraphSampling()

    def run_in_graph() -> int:
        learner._train_sampled().numpy()  # the same single host sync as update()
        learner.updates += variant.k
        return variant.k

    return learner, run_in_graph


@contextlib.contextmanager
def bf16_hidden_layers() -> Iterator[None]:
    """Networks built meanwhile get ``mixed_bfloat16`` hidden layers (benchmark-only).

    Keras mixed precision: float32 weights and Adam, the matmul and ReLU in bfloat16 (oneDNN
    runs bfloat16 matmuls on AMX / AVX512-BF16 here: 386 vs 178 GFLOP/s for a lone
    256x256x256 product); the heads stay float32, so the losses do too.
    """
    import keras

    from edge_rl.agents.td3 import networks

    plain = networks._hidden_layers

    def hidden(hidden: tuple[int, ...], seed: int) -> list:
        layers = plain(hidden, seed)
        for layer in layers:
            layer.dtype_policy = keras.DTypePolicy("mixed_bfloat16")
        return layers

    networks._hidden_layers = hidden
    try:
        yield
    finally:
        networks._hidden_layers = plain


def timed(run, seconds: float) -> tuple[float, float]:
    """Run for ``seconds``; updates/s and process CPU ms per update."""
    steps, c0, t0 = 0, time.process_time(), time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < seconds:
        steps += run()
    return steps / elapsed, (time.process_time() - c0) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run, ~35 s")
    parser.add_argument("--rounds", type=int, help="rounds of every variant (3; quick 2)")
    parser.add_argument(
        "--seconds", type=float, help="seconds per variant per round (3.5; quick 0.6)"
    )
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 3)
    seconds = args.seconds or (0.6 if args.quick else 3.5)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from edge_rl.learner.replay import ReplayBuffer
    from edge_rl.specs import EnvSpec

    load0 = os.getloadavg()
    spec = EnvSpec(
        obs_shape=(OBS_DIM,),
        action_shape=(ACT_DIM,),
        action_low=(-1.0,) * ACT_DIM,
        action_high=(1.0,) * ACT_DIM,
    )
    arrays = random_transitions(CAPACITY, np.random.default_rng(SEED))
    replay = ReplayBuffer(spec, CAPACITY, seed=SEED)
    replay.add(*arrays)

    variants = list(VARIANTS)
    try:
        import torch

        torch.set_num_threads(os.cpu_count() or 1)
        variants.append(BASELINE)
        torch_version = f"; PyTorch {torch.__version__}"
    except ImportError:
        torch_version = "; PyTorch not installed: no baseline row (pip install torch)"

    runners, compile_s = {}, {}
    for v in variants:
        t0 = time.perf_counter()
        learner, run = make_runner(v, spec, replay, arrays)
        learner.compile()
        run()  # XLA compiles on the first call with concrete shapes
        compile_s[v.name] = time.perf_counter() - t0
        runners[v.name] = run
        print(f"built {v.name}: {compile_s[v.name]:.1f} s", file=sys.stderr, flush=True)

    rate = {v.name: [] for v in variants}
    cpu = {v.name: [] for v in variants}
    for r in range(rounds):
        order = variants if r % 2 == 0 else variants[::-1]  # no variant always goes first
        for v in order:
            ups, ms = timed(runners[v.name], seconds)
            rate[v.name].append(ups)
            cpu[v.name].append(ms)
    base = np.array(rate["a"])

    rows = []
    for v in variants:
        rows.append(
            [
                v.name,
                v.k,
                "yes" if v.xla else "no",
                "in graph" if v.in_graph else "numpy",
                f"{np.median(rate[v.name]):.0f}",
                f"{np.median(np.array(rate[v.name]) / base):.2f}x",
                f"{np.median(cpu[v.name]):.2f}",
                f"{compile_s[v.name]:.1f}",
            ]
        )
    cpu_model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu_model = next(ln.split(":", 1)[1].strip() for ln in f if "model name" in ln)
    except (OSError, StopIteration):
        pass
    print(
        f"TD3 learner, obs {OBS_DIM} act {ACT_DIM}, batch {BATCH}, 256-256 nets; "
        f"{rounds} rounds x {seconds:g} s; TF {tf.__version__}{torch_version}; {cpu_model}, "
        f"{os.cpu_count()} CPUs; load {load0[0]:.2f} -> {os.getloadavg()[0]:.2f}\n"
    )
    headers = ["variant", "K", "XLA", "sampling", "updates/s", "vs a", "CPU ms/update"]
    print(md_table([*headers, "compile_s"], rows))


if __name__ == "__main__":
    main()
