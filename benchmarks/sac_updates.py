"""SAC's update, edge-rl against Stable-Baselines3: CPU time per gradient step, side by side.

    .venv/bin/python benchmarks/sac_updates.py                     # Pendulum-v1, ~2 min
    .venv/bin/python benchmarks/sac_updates.py --env HalfCheetah-v5 --calls 60

The same work on both sides: the examples' SAC (256-256 policy and twin critics, batch 256,
Adam 3e-4, gamma 0.99, tau 0.005, temperature learned towards -|A|; SACConfig's defaults are
SB3's). edge-rl: ``SACLearner.update`` on ``16 x 256`` rows drawn by ``ReplayBuffer.sample``
from ``--fill`` random transitions, 16 XLA-compiled steps per call, as the learner node calls
it (``--calls`` calls). SB3 (its venv, ``vs_sb3.py`` makes it): ``SAC.train`` on a buffer
filled by as many random env steps, for as many gradient steps, then ``SAC.learn`` for as
many env steps (one env step and one gradient step each). Both processes start together, at
``--threads`` threads each (``vs_sb3.thread_env``), so a shared machine's load hits them
alike; process CPU time per step is the figure to compare, the wall time moves with the load.
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

from _common import md_table  # noqa: E402
from vs_sb3 import DEFAULT_VENV, ensure_sb3_venv, thread_env  # noqa: E402

SB3_SIDE = _HERE / "_sb3_sac_updates.py"


def edge_side(env_id: str, calls: int, fill: int, seed: int) -> dict:
    """This process as edge-rl's side: compile, then ``calls`` timed update calls."""
    import gymnasium as gym
    import numpy as np

    from edge_rl.agents.sac.config import SACConfig
    from edge_rl.agents.sac.learning import SACLearner
    from edge_rl.learner.replay import ReplayBuffer
    from edge_rl.specs import EnvSpec

    env = gym.make(env_id)
    spec = EnvSpec.from_gym(env.observation_space, env.action_space)
    rng = np.random.default_rng(seed)
    replay = ReplayBuffer(spec, fill, seed=seed)
    obs_dim, act_dim = int(np.prod(spec.obs_shape)), int(np.prod(spec.action_shape))
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    replay.add(
        rng.normal(size=(fill, obs_dim)).astype(np.float32),
        rng.uniform(low, high, (fill, act_dim)).astype(np.float32),
        rng.normal(size=fill).astype(np.float32),
        rng.normal(size=(fill, obs_dim)).astype(np.float32),
        np.zeros(fill, np.float32),
    )
    cfg = SACConfig()
    learner = SACLearner(spec, cfg, seed=seed)
    rows = cfg.updates_per_call * cfg.batch_size
    c0 = time.process_time()
    learner.compile()
    learner.update(replay.sample(rows))  # the first call, not timed
    compile_cpu = time.process_time() - c0
    c0, w0 = time.process_time(), time.monotonic()
    for _ in range(calls):
        learner.update(replay.sample(rows))
    steps = calls * cfg.updates_per_call
    return {
        "steps": steps,
        "cpu_s": time.process_time() - c0,
        "wall_s": time.monotonic() - w0,
        "compile_cpu_s": compile_cpu,
        "config": {"updates_per_call": cfg.updates_per_call, "jit_compile": cfg.jit_compile},
    }


def sb3_kwargs() -> dict:
    """SB3's SAC at SACConfig's defaults (which are SB3's: named here so a change shows)."""
    from edge_rl.agents.sac.config import SACConfig

    c = SACConfig()
    assert c.actor_lr == c.critic_lr == c.alpha_lr, "SB3 has one learning rate"
    return {
        "learning_rate": c.actor_lr,
        "batch_size": c.batch_size,
        "gamma": c.gamma,
        "tau": c.tau,
        "ent_coef": f"auto_{c.init_alpha}",
        "policy_kwargs": {"net_arch": {"pi": list(c.actor_hidden), "qf": list(c.critic_hidden)}},
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--calls", type=int, default=60, help="edge-rl calls of 16 steps")
    p.add_argument("--fill", type=int, default=20_000, help="random transitions in replay")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--side", choices=["both", "edge"], default="both", help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=None, help="the edge side's result (internal)")
    p.add_argument("--sb3-venv", type=Path, default=DEFAULT_VENV)
    args = p.parse_args()
    if args.side == "edge":
        args.out.write_text(json.dumps(edge_side(args.env, args.calls, args.fill, 0)))
        return
    python, note = ensure_sb3_venv(args.sb3_venv, install=True)
    if python is None:
        raise SystemExit(note)
    steps = args.calls * 16
    env = thread_env(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        spec = {
            "env_id": args.env,
            "steps": steps,
            "fill": args.fill,
            "threads": args.threads,
            "seed": 0,
            "kwargs": sb3_kwargs(),
        }
        (t / "spec.json").write_text(json.dumps(spec))
        load_start = os.getloadavg()[0]
        edge_cmd = [sys.executable, __file__, "--side", "edge", "--env", args.env]
        edge_cmd += ["--calls", str(args.calls), "--fill", str(args.fill), "--out", str(t / "e")]
        procs = [
            subprocess.Popen(edge_cmd, env=env),
            subprocess.Popen(
                [str(python), str(SB3_SIDE), str(t / "spec.json"), str(t / "s")], env=env
            ),
        ]
        if any(proc.wait(timeout=3600) for proc in procs):
            raise SystemExit("a side exited non-zero")
        load_end = os.getloadavg()[0]
        edge = json.loads((t / "e").read_text())
        sb3 = json.loads((t / "s").read_text())
    ms = lambda s, n: 1000.0 * s / n  # noqa: E731
    e_ms = ms(edge["cpu_s"], edge["steps"])
    t_ms, l_ms = ms(sb3["train"]["cpu_s"], steps), ms(sb3["learn"]["cpu_s"], steps)
    head = [
        "task",
        "edge-rl update",
        "SB3 `train` step",
        "SB3 `learn` step",
        "SB3 train / edge-rl",
        "SB3 learn / edge-rl",
        "edge-rl trace + XLA compile",
        "load start/end",
    ]
    row = [
        args.env,
        f"{e_ms:.2f} ms",
        f"{t_ms:.2f} ms",
        f"{l_ms:.2f} ms",
        f"{t_ms / e_ms:.2f}x",
        f"{l_ms / e_ms:.2f}x",
        f"{edge['compile_cpu_s']:.1f} CPU-s",
        f"{load_start:.1f}/{load_end:.1f}",
    ]
    print(
        f"{note}\nprocess CPU time per gradient step ({steps} steps a side; threads "
        f"{args.threads})\n"
    )
    print(md_table(head, [row]))
    print(json.dumps({"edge-rl": edge, "sb3": sb3}))


if __name__ == "__main__":
    main()
