"""edge-rl against Stable-Baselines3, side by side: both runs of a task start at one moment.

    .venv/bin/python benchmarks/vs_sb3.py                      # like-for-like, all tasks
    .venv/bin/python benchmarks/vs_sb3.py --tuned              # each side's own settings
    .venv/bin/python benchmarks/vs_sb3.py --tasks cartpole,pendulum --out runs/vs-sb3
    .venv/bin/python benchmarks/vs_sb3.py --quick --tasks cartpole   # smoke run
    .venv/bin/python benchmarks/vs_sb3.py --tasks pendulum_sac --seeds 0,1,2   # SAC

For each task, edge-rl's side is ``edge-rl learn`` on a config this script writes (the
example's, adapted), with its embedded broker and simulated fleet: the product path. The
budget counts the fleet's env steps in all, so 4 actors step 50,000 times together as SB3's
one env does alone. SB3's side is ``benchmarks/_sb3_side.py`` run by the interpreter of a venv
of its own (``--sb3-venv``, default ``~/.cache/edge-rl/sb3-venv``), which the script makes on
first use: CPU-only PyTorch, stable-baselines3, and the same gymnasium, MuJoCo (with imageio
and packaging, which its envs import) and NumPy as edge-rl. PyTorch is not an edge-rl
dependency. Both processes start together, so a shared machine's load hits them alike; the
script waits for each with ``os.wait4``, whose resource usage is the process tree's (the
child and every descendant it reaped: the fleet, the broker, the export worker); edge-rl's
tree is also read from ``/proc`` every second (``_proc_cpu.py``), which splits its CPU time
into the learner's main thread, its other threads, the export worker, the actors and the
broker.

Threads, the same way on both sides: ``--threads T`` (default 1) goes into both processes'
environment as ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``,
``TF_NUM_INTRAOP_THREADS`` and ``TF_NUM_INTEROP_THREADS`` (TensorFlow reads the last two when
it makes its thread pools), and SB3's side also calls ``torch.set_num_threads(T)`` and
``torch.set_num_interop_threads(T)``.

Like-for-like (the default): one set of settings on both sides, edge-rl's example's (for
CartPole that is RL Zoo's tuned DQN): network sizes, learning rate(s), batch size, gamma,
learning start, replay size, exploration, and the same NUMBER OF GRADIENT UPDATES (edge-rl's
``replay_ratio`` is set to give exactly SB3's count). Model selection on both sides at one
cadence: edge-rl scores published policies greedily as its config says, SB3 runs an
``EvalCallback`` as often (in env steps) with as many episodes, and keeps the best model
unless the last scores more. ``--tuned``: edge-rl's example as it is (budget set to the
task's) against RL Zoo's hyper-parameters (``ZOO``) and the zoo's own evaluation (every
25,000 env steps, 5 episodes: ``rl_zoo3/train.py``'s defaults).

Each side's final return is the mean of ``--episodes`` greedy episodes (edge-rl: of the
deployed int8 model in LiteRT; SB3: of the kept policy in PyTorch). Output: one markdown table
row per side, then where each side's time went, in ``OUT/table.md``; raw figures in
``OUT/results.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from _common import md_table
from _proc_cpu import TreeSampler

from edge_rl.agents.sac.config import SACConfig  # a plain dataclass: no TensorFlow import
from edge_rl.broker.executables import die_with_parent

ROOT = Path(__file__).resolve().parents[1]
EDGE_RL = str(Path(sys.executable).parent / "edge-rl")
SB3_SIDE = Path(__file__).resolve().parent / "_sb3_side.py"
DEFAULT_VENV = Path.home() / ".cache" / "edge-rl" / "sb3-venv"
SB3_PACKAGES = ["torch==2.13.0", "stable-baselines3==2.9.2"]
SIDE_TIMEOUT_S = 4 * 3600

# RL Baselines3 Zoo's hyper-parameters (DLR-RM/rl-baselines3-zoo, hyperparams/dqn.yml and
# hyperparams/td3.yml, as of 2026-04): the entries for CartPole-v1 (n_timesteps 5e4),
# Pendulum-v1 (n_timesteps 20000) and HalfCheetah-v4 (the "mujoco-defaults" anchor,
# n_timesteps 1e6; the zoo has no v5 entry). noise_std is the zoo's noise_type "normal".
ZOO: dict[str, dict[str, Any]] = {
    "CartPole-v1": {
        "learning_rate": 2.3e-3,
        "batch_size": 64,
        "buffer_size": 100_000,
        "learning_starts": 1000,
        "gamma": 0.99,
        "target_update_interval": 10,
        "train_freq": 256,
        "gradient_steps": 128,
        "exploration_fraction": 0.16,
        "exploration_final_eps": 0.04,
        "policy_kwargs": {"net_arch": [256, 256]},
    },
    "Pendulum-v1": {
        "gamma": 0.98,
        "buffer_size": 200_000,
        "learning_starts": 10_000,
        "noise_std": 0.1,
        "gradient_steps": 1,
        "train_freq": 1,
        "learning_rate": 1e-3,
        "policy_kwargs": {"net_arch": [400, 300]},
    },
    "HalfCheetah-v5": {
        "learning_starts": 10_000,
        "noise_std": 0.1,
        "train_freq": 1,
        "gradient_steps": 1,
        "learning_rate": 1e-3,
        "batch_size": 256,
        "policy_kwargs": {"net_arch": [400, 300]},
    },
}
ZOO_EVAL = {"every_steps": 25_000, "episodes": 5}  # rl_zoo3/train.py: --eval-freq, --eval-episodes


@dataclass(frozen=True)
class Task:
    name: str
    example: str  # examples/<example>.yaml
    budget: int  # env steps
    quick_budget: int


TASKS = {
    "cartpole": Task("cartpole", "cartpole_dqn", 50_000, 2_000),
    "pendulum": Task("pendulum", "pendulum_td3", 20_000, 1_500),
    "halfcheetah": Task("halfcheetah", "halfcheetah_td3", 40_000, 1_500),
    "pendulum_sac": Task("pendulum_sac", "pendulum_sac", 20_000, 1_500),
    "halfcheetah_sac": Task("halfcheetah_sac", "halfcheetah_sac", 40_000, 1_500),
}

# --quick: small networks and budgets, parity gates that always pass (a smoke run).
QUICK = {
    "learning_starts": 500,
    "select_every": 2,
    "select_episodes": 1,
    "select_recheck": 0,
    "export": {
        "every_updates": 100,
        "min_greedy_agreement": 0.0,
        "max_action_error": 2.0,
        "mean_action_error": 2.0,
    },
    "dqn": {"hidden": [32, 32], "updates_per_call": 1, "jit_compile": False},
    "td3": {
        "actor_hidden": [32, 32],
        "critic_hidden": [32, 32],
        "batch_size": 64,
        "updates_per_call": 1,
        "jit_compile": False,
    },
    "sac": {
        "actor_hidden": [32, 32],
        "critic_hidden": [32, 32],
        "batch_size": 64,
        "updates_per_call": 1,
        "jit_compile": False,
    },
}


# ---- the two sides' settings ----------------------------------------------------------


def merged(base: dict, over: dict) -> dict:
    """``base`` with ``over``'s keys set, nested dicts merged."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def sb3_updates(budget: int, learning_starts: int, train_freq: int, gradient_steps: int) -> int:
    """Gradient steps SB3's off-policy loop takes in ``budget`` env steps: it collects
    ``train_freq`` steps at a time (the last rollout runs past the budget to a whole one) and
    trains ``gradient_steps`` after each rollout that ends past ``learning_starts``."""
    rollouts = math.ceil(budget / train_freq)
    return (rollouts - learning_starts // train_freq) * gradient_steps


def replay_ratio_for(updates: int, budget: int, learning_starts: int) -> float:
    """The replay ratio whose ``updates_paid_by(budget)`` is exactly ``updates``
    (``int(ratio × (budget − learning_starts))``; the half keeps float rounding off)."""
    return (updates + 0.5) / (budget - learning_starts)


def sb3_from_edge(cfg: dict) -> dict:
    """SB3 constructor arguments (and ``noise_std``) with edge-rl config ``cfg``'s settings."""
    common = {
        "buffer_size": cfg["replay_capacity"],
        "learning_starts": cfg["learning_starts"],
    }
    if cfg["algo"] == "dqn":
        d = cfg["dqn"]
        train_freq = ZOO["CartPole-v1"]["train_freq"]
        return {
            **common,
            "learning_rate": d["learning_rate"],
            "batch_size": d["batch_size"],
            "gamma": d.get("gamma", 0.99),
            # SB3 counts it in env steps and checks it between rollouts: 10 (< train_freq)
            # copies the target once per burst of gradient steps, as edge-rl's
            # target_update_interval: gradient_steps does (edge_rl/agents/dqn/config.py).
            "target_update_interval": ZOO["CartPole-v1"]["target_update_interval"],
            "train_freq": train_freq,
            "gradient_steps": round(cfg["replay_ratio"] * train_freq),
            "exploration_fraction": d["exploration_fraction"],
            "exploration_final_eps": d["epsilon_end"],
            "policy_kwargs": {"net_arch": list(d["hidden"])},
        }
    if cfg["algo"] == "sac":
        return sac_from_edge(cfg, common)
    t = cfg["td3"]
    lr = t.get("actor_lr", 3e-4)
    if t.get("critic_lr", 3e-4) != lr or cfg["replay_ratio"] != 1.0:
        raise SystemExit("like-for-like TD3 needs actor_lr == critic_lr and replay_ratio 1")
    return {
        **common,
        "learning_rate": lr,
        "batch_size": t["batch_size"],
        "gamma": t.get("gamma", 0.99),
        "tau": t.get("tau", 0.005),
        "policy_delay": t.get("policy_delay", 2),
        "target_policy_noise": t.get("target_noise", 0.2),
        "target_noise_clip": t.get("target_noise_clip", 0.5),
        "train_freq": 1,
        "gradient_steps": 1,
        "noise_std": t["exploration_sigma"],
        "policy_kwargs": {
            "net_arch": {"pi": list(t["actor_hidden"]), "qf": list(t["critic_hidden"])}
        },
    }


def sac_from_edge(cfg: dict, common: dict) -> dict:
    """SB3's SAC with edge-rl's ``sac:`` settings (SACConfig's defaults where it says
    nothing: they are SB3's). SB3 explores with its own stochastic policy; ``explore``
    (``policy``) goes to ``_sb3_side.py``, which can act as edge-rl's boards do instead."""
    s = SACConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg["sac"].items()})
    if not s.actor_lr == s.critic_lr == s.alpha_lr or cfg["replay_ratio"] != 1.0:
        raise SystemExit("like-for-like SAC needs one learning rate and replay_ratio 1")
    if (s.log_std_min, s.log_std_max) != (-20.0, 2.0):
        raise SystemExit("like-for-like SAC needs SB3's log-std clip [-20, 2]")
    return {
        **common,
        "learning_rate": s.actor_lr,
        "batch_size": s.batch_size,
        "gamma": s.gamma,
        "tau": s.tau,
        "ent_coef": f"auto_{s.init_alpha}" if s.autotune else s.init_alpha,
        "target_entropy": "auto" if s.target_entropy is None else s.target_entropy,
        "train_freq": 1,
        "gradient_steps": 1,
        "noise_std": s.exploration_sigma,
        "policy_kwargs": {"net_arch": {"pi": list(s.actor_hidden), "qf": list(s.critic_hidden)}},
    }


def quick_sb3(kwargs: dict, edge: dict) -> dict:
    """--quick: SB3's settings shrunk as edge-rl's are (networks, batch, learning start)."""
    algo = edge["algo"]
    hidden = edge["dqn"]["hidden"] if algo == "dqn" else edge[algo]["actor_hidden"]
    out = {**kwargs, "learning_starts": edge["learning_starts"]}
    out["policy_kwargs"] = {"net_arch": list(hidden)}
    if algo != "dqn":
        out["batch_size"] = edge[algo]["batch_size"]
    return out


def selection_every_steps(cfg: dict) -> int:
    """edge-rl's selection cadence in env steps: a policy is published every
    ``export.every_updates`` updates and every ``select_every``-th one is scored."""
    updates = cfg["export"]["every_updates"] * max(1, cfg.get("select_every", 0))
    return max(1, round(updates / cfg["replay_ratio"]))


@dataclass(frozen=True)
class Pair:
    """One task's two sides: edge-rl's run config and SB3's spec (for ``_sb3_side.py``)."""

    task: str
    edge_config: dict
    sb3_spec: dict


def make_pair(task: Task, args: argparse.Namespace, seed: int | None = None) -> Pair:
    """One task's pair; ``seed`` (None: the example's) for both sides."""
    example = yaml.safe_load((ROOT / "examples" / f"{task.example}.yaml").read_text())
    budget = task.quick_budget if args.quick else (args.budget or task.budget)
    edge = merged(example, {"total_env_steps": budget, "eval_episodes": args.episodes})
    edge["run"] = f"vs-sb3-{task.name}".replace("_", "-")
    label = task.name
    if seed is not None:
        edge["seed"], edge["run"], label = seed, f"{edge['run']}-s{seed}", f"{task.name} s{seed}"
    if args.quick:
        edge = merged(edge, QUICK)
    env_id, algo = edge["env_id"], edge["algo"]
    if args.tuned:
        kwargs = dict(ZOO[env_id])
        select = ZOO_EVAL
    else:
        kwargs = sb3_from_edge(edge)
        select = {"every_steps": selection_every_steps(edge), "episodes": edge["select_episodes"]}
    if args.quick:
        kwargs = quick_sb3(kwargs, edge)
    noise_std = kwargs.pop("noise_std", 0.0)
    updates = sb3_updates(
        budget, kwargs["learning_starts"], kwargs["train_freq"], kwargs["gradient_steps"]
    )
    if not args.tuned:  # the same number of gradient updates on both sides
        edge["replay_ratio"] = replay_ratio_for(updates, budget, edge["learning_starts"])
    spec = {
        "env_id": env_id,
        "algo": algo,
        "total_timesteps": budget,
        "seed": edge["seed"],
        "threads": args.threads,
        "kwargs": kwargs,
        "noise_std": noise_std,
        "select": select if edge.get("select_every", 0) or args.tuned else None,
        "final_episodes": args.episodes,
        "expected_updates": updates,
        "explore": args.sb3_sac_explore,  # SAC only: SB3's own policy, or as edge-rl's boards
    }
    return Pair(label, edge, spec)


# ---- SB3's venv -----------------------------------------------------------------------


def versions_of(*names: str) -> list[str]:
    """``name==version`` of edge-rl's own copies, so both sides step the same envs."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in names:
        try:
            out.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            continue
    return out


def sb3_ready(python: Path) -> bool:
    """The venv runs SB3 on every task: MuJoCo's envs import imageio and packaging too."""
    if not python.exists():
        return False
    probe = [str(python), "-c", "import stable_baselines3, torch, gymnasium.envs.mujoco"]
    return subprocess.run(probe, capture_output=True, timeout=300).returncode == 0


def ensure_sb3_venv(venv: Path, install: bool) -> tuple[Path | None, str]:
    """SB3's interpreter (made with its packages if missing and ``install``), and a note."""
    python = venv / "bin" / "python"
    if not sb3_ready(python):
        if not install:
            return None, f"SB3 not run: no ready venv at {venv} (and --no-sb3-install)"
        print(f"making SB3's venv at {venv} (pip, ~1 min) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        # gymnasium[mujoco]'s parts, as edge-rl's host extra installs them.
        pins = versions_of("gymnasium", "numpy", "mujoco", "imageio", "packaging")
        pip = [str(python), "-m", "pip", "install", "-q", *SB3_PACKAGES, *pins]
        done = subprocess.run(pip, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0 or not sb3_ready(python):
            return None, f"SB3 not run: pip could not build {venv}: {done.stderr[-500:]}"
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    pkgs = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout or "[]")}
    cuda = sorted(name for name in pkgs if name.startswith("nvidia"))
    note = (
        f"SB3 venv {venv}: torch {pkgs.get('torch')}, stable-baselines3 "
        f"{pkgs.get('stable-baselines3', pkgs.get('stable_baselines3'))}, gymnasium "
        f"{pkgs.get('gymnasium')}; CUDA packages: {', '.join(cuda) or 'none'}"
    )
    return python, note


# ---- running both sides at once -------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """A side's process tree, from its start to its exit."""

    returncode: int
    wall_s: float
    cpu_s: float  # user + sys of the process and every descendant it reaped
    load_start: float
    load_end: float
    # CPU seconds by part of the tree (_proc_cpu.py), for the sides sampled; sums to a little
    # less than cpu_s (each process's last sample before it exited).
    cpu_by_role: dict[str, float] = field(default_factory=dict)


def thread_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    for key in (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "TF_NUM_INTRAOP_THREADS",
        "TF_NUM_INTEROP_THREADS",
    ):
        env[key] = str(threads)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def launch(cmd: list[str], log: Path, env: dict[str, str]) -> tuple[subprocess.Popen, float]:
    """``cmd`` started now; it gets SIGTERM if this script dies first (a timeout's kill):
    no side outlives the benchmark."""
    with log.open("w") as out:
        proc = subprocess.Popen(
            die_with_parent(cmd), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env
        )
    return proc, time.monotonic()


def wait_tree(
    proc: subprocess.Popen,
    started: float,
    load: float,
    out: dict,
    key: str,
    sampler: TreeSampler | None = None,
) -> None:
    """Wait for ``proc`` with ``os.wait4``: its rusage covers the reaped process tree."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if sampler is not None:
        sampler.stop()
    out[key] = Measured(
        returncode=proc.returncode,
        wall_s=time.monotonic() - started,
        cpu_s=usage.ru_utime + usage.ru_stime,
        load_start=load,
        load_end=os.getloadavg()[0],
        cpu_by_role=sampler.by_role() if sampler is not None else {},
    )


def run_together(
    sides: dict[str, tuple[list[str], Path]], env: dict, sampled: tuple[str, ...] = ("edge-rl",)
) -> dict[str, Measured]:
    """Start every side's command at one moment; wait (bounded) for all of them. The
    ``sampled`` sides' process trees are also read from /proc every second (where the CPU
    went, by process)."""
    load = os.getloadavg()[0]
    procs = {name: launch(cmd, log, env) for name, (cmd, log) in sides.items()}
    samplers = {name: TreeSampler(procs[name][0].pid) for name in sampled if name in procs}
    for sampler in samplers.values():
        sampler.start()
    measured: dict[str, Measured] = {}
    waiters = [
        threading.Thread(
            target=wait_tree,
            args=(proc, t0, load, measured, name, samplers.get(name)),
            daemon=True,
        )
        for name, (proc, t0) in procs.items()
    ]
    for waiter in waiters:
        waiter.start()
    deadline = time.monotonic() + SIDE_TIMEOUT_S
    for waiter in waiters:
        waiter.join(max(0.0, deadline - time.monotonic()))
    for name, (proc, _) in procs.items():
        if name not in measured:
            proc.kill()
            raise SystemExit(f"{name} ran past {SIDE_TIMEOUT_S} s: killed (pid {proc.pid})")
    return measured


def run_pair(pair: Pair, out: Path, sb3_python: Path | None, threads: int) -> dict:
    """Both sides of one task, at once; their measured figures and results."""
    out.mkdir(parents=True, exist_ok=True)
    cfg_path, run_dir = out / "edge-rl.yaml", out / "edge-rl-run"
    cfg_path.write_text(yaml.safe_dump(pair.edge_config, sort_keys=False))
    edge_cmd = [EDGE_RL, "learn", "--config", str(cfg_path), "--out", str(run_dir)]
    sides = {"edge-rl": (edge_cmd, out / "edge-rl.log")}
    spec_path, result_path = out / "sb3-spec.json", out / "sb3-result.json"
    spec_path.write_text(json.dumps(pair.sb3_spec, indent=1))  # SB3's work, run or not
    if sb3_python is not None:
        sb3_cmd = [str(sb3_python), str(SB3_SIDE), str(spec_path), str(result_path)]
        sides["sb3"] = (sb3_cmd, out / "sb3.log")
    measured = run_together(sides, thread_env(threads))
    failed = [f"{name} (see {sides[name][1]})" for name, m in measured.items() if m.returncode]
    if failed:
        raise SystemExit(f"{pair.task}: exited non-zero: {', '.join(failed)}")
    record = {"task": pair.task, "edge-rl": edge_result(run_dir, measured["edge-rl"])}
    if "sb3" in measured:
        sb3 = json.loads(result_path.read_text())
        record["sb3"] = {**sb3, "measured": measured["sb3"].__dict__}
    return record


def run_pairs(pairs: list[Pair], outs: list[Path], sb3_python: Path | None, threads: int) -> list:
    """``run_pair`` for each pair, all at once; their records in order (SystemExit if any
    side of any pair failed)."""
    records: list = [None] * len(pairs)

    def one(i: int) -> None:
        try:
            records[i] = run_pair(pairs[i], outs[i], sb3_python, threads)
        except SystemExit as e:
            records[i] = e

    workers = [threading.Thread(target=one, args=(i,)) for i in range(len(pairs))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    failed = [str(r) for r in records if isinstance(r, SystemExit)]
    if failed:
        raise SystemExit("; ".join(failed))
    return records


def edge_result(run_dir: Path, measured: Measured) -> dict:
    s = json.loads((run_dir / "summary.json").read_text())
    main = s["runtime_breakdown"]["learner"]["main"]
    return {
        "env_steps": s["env_steps"],
        "updates": s["updates"],
        "final_return": s["final_eval_return"],
        "final_return_std": s["final_eval_return_std"],
        "learner_wall_s": s["wall_s"],
        "breakdown_s": {k: v for k, v in main.items() if k != "wall"},
        "fleet_s": s["runtime_breakdown"].get("fleet_total") or {},
        "measured": measured.__dict__,
    }


# ---- the tables -----------------------------------------------------------------------

HEADERS = [
    "task",
    "side",
    "env steps",
    "updates",
    "wall s",
    "CPU s",
    "load start/end",
    "final return",
    "SB3 wall / edge-rl wall",
]


def side_row(task: str, side: str, r: dict, ratio: str) -> list[str]:
    m = r["measured"]
    return [
        task,
        side,
        f"{r['env_steps']:,}",
        f"{r['updates']:,}",
        f"{m['wall_s']:.1f}",
        f"{m['cpu_s']:.1f}",
        f"{m['load_start']:.2f}/{m['load_end']:.2f}",
        f"{r['final_return']:.1f} ± {r['final_return_std']:.1f}",
        ratio,
    ]


def table(records: list[dict], sb3_note: str) -> str:
    rows = []
    for rec in records:
        edge, sb3 = rec["edge-rl"], rec.get("sb3")
        ratio = "-"
        if sb3:
            ratio = f"{sb3['measured']['wall_s'] / edge['measured']['wall_s']:.2f}"
        rows.append(side_row(rec["task"], "edge-rl", edge, ratio))
        if sb3:
            rows.append(side_row(rec["task"], "SB3", sb3, ""))
        else:
            rows.append([rec["task"], "SB3", *["-"] * 5, sb3_note, ""])
    return md_table(HEADERS, rows)


def breakdown(records: list[dict]) -> str:
    """Where each side's wall time went (edge-rl's learner main thread, SB3's loop), and
    edge-rl's CPU time by process."""
    rows = []
    for rec in records:
        b = rec["edge-rl"]["breakdown_s"]
        parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(b.items(), key=lambda kv: -kv[1]))
        rows.append([rec["task"], "edge-rl (learner main thread)", parts])
        cpu = rec["edge-rl"]["measured"].get("cpu_by_role") or {}
        if cpu:
            rows.append(
                [rec["task"], "edge-rl CPU s by process (/proc)", _parts(list(cpu.items()))]
            )
        fleet = rec["edge-rl"]["fleet_s"]
        if fleet:
            top = sorted(((k, v) for k, v in fleet.items() if k != "wall"), key=lambda kv: -kv[1])
            rows.append([rec["task"], "edge-rl fleet (sum of actors)", _parts(top)])
        if "sb3" in rec:
            b = rec["sb3"]["breakdown_s"]
            rows.append([rec["task"], "SB3 (its process)", _parts(sorted(b.items()))])
    return md_table(["task", "side", "seconds by bucket"], rows)


def _parts(items: list[tuple[str, float]]) -> str:
    return ", ".join(f"{k} {v:.1f}" for k, v in items)


# ---- entry point ----------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", default="cartpole,pendulum,halfcheetah")
    p.add_argument("--tuned", action="store_true", help="each side's own tuned settings")
    p.add_argument("--quick", action="store_true", help="smoke run: tiny budgets and networks")
    p.add_argument("--episodes", type=int, default=10, help="greedy episodes, both sides")
    p.add_argument("--threads", type=int, default=1, help="TF and torch threads, both sides")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--sb3-venv", type=Path, default=DEFAULT_VENV)
    p.add_argument("--no-sb3-install", action="store_true", help="never build SB3's venv")
    p.add_argument("--no-sb3", action="store_true", help="edge-rl's side only")
    p.add_argument(
        "--sb3-sac-explore",
        choices=["policy", "board"],
        default="policy",
        help="SAC: SB3 samples its stochastic policy (policy), or acts as edge-rl's boards "
        "do, its deterministic action plus the config's Gaussian noise (board)",
    )
    p.add_argument("--seeds", default=None, help="e.g. 0,1,2: a pair per seed, run at once")
    p.add_argument("--budget", type=int, default=None, help="env steps a side (task's default)")
    args = p.parse_args(argv)
    unknown = set(args.tasks.split(",")) - set(TASKS)
    if unknown:
        p.error(f"unknown tasks {sorted(unknown)}; choose from {sorted(TASKS)}")
    if args.tuned and any(TASKS[t].example.endswith("_sac") for t in args.tasks.split(",")):
        p.error("--tuned has RL Zoo's DQN and TD3 settings only; run SAC like-for-like")
    if args.seeds is not None:
        args.seeds = [int(s) for s in args.seeds.split(",")]
    if args.quick:
        args.episodes = min(args.episodes, 2)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    mode = "tuned" if args.tuned else "like-for-like"
    out = args.out or ROOT / "runs" / f"vs-sb3-{mode}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    if args.no_sb3:
        sb3_python, note = None, "SB3 not run (--no-sb3)"
    else:
        sb3_python, note = ensure_sb3_venv(args.sb3_venv, install=not args.no_sb3_install)
    print(note, flush=True)
    head = (
        f"# edge-rl vs Stable-Baselines3 ({mode}; threads {args.threads}; "
        f"{args.episodes} greedy episodes a side)\n\n{note}\n"
    )
    records = []
    for name in args.tasks.split(","):
        if args.seeds is None:
            pair = make_pair(TASKS[name], args)
            print(f"{name}: both sides start ({mode}) ...", flush=True)
            records.append(run_pair(pair, out / name, sb3_python, args.threads))
        else:  # every seed's pair at once: the machine's load hits all of them alike
            pairs = [make_pair(TASKS[name], args, seed) for seed in args.seeds]
            print(f"{name}: seeds {args.seeds}, all sides start ({mode}) ...", flush=True)
            records += run_pairs(
                pairs, [out / name / f"seed-{s}" for s in args.seeds], sb3_python, args.threads
            )
        # Written after every task: a long run stopped later keeps the tasks done so far.
        text = f"{head}\n{table(records, note)}\n\n{breakdown(records)}\n"
        (out / "table.md").write_text(text)
        results = {"note": note, "records": records}
        (out / "results.json").write_text(json.dumps(results, indent=1))
    print(text, flush=True)


if __name__ == "__main__":
    main()
