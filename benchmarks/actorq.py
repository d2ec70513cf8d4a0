#!/usr/bin/env python
"""ActorQ's comparison on our system: fp32, fp16 and int8 deployed policies, same task.

    .venv/bin/python benchmarks/actorq.py --config examples/cartpole_dqn.yaml --seeds 0 1
    .venv/bin/python benchmarks/actorq.py --config benchmarks/configs/cartpole_dqn_large.yaml
    .venv/bin/python benchmarks/actorq.py --config examples/cartpole_dqn.yaml --quick
    .venv/bin/python benchmarks/actorq.py --config benchmarks/configs/cartpole_dqn_pizero.yaml \
        --precisions fp32 int8 --seeds 0 1 2          # ActorQ's regime: ~30 min

QuaRL (Krishnan et al., TMLR 2022) trains with a full-precision learner and int8 actors
and reports end-to-end speed-ups (time to a reward) and carbon savings against fp32
actors, with the actor's time split into step / policy pull / deserialize / model load.
Here one `edge-rl learn` per precision (`export.precision`), same config, seed and budget;
all arms of a seed run at the same time, so that on a shared machine each gets the same
share of the CPU and wall times compare (as benchmarks/gst.py). Each arm's run directory
is kept under --out; --reuse prints the table from run directories that have a
summary.json (a run stopped part-way resumes from its checkpoint: benchmarks/_arms.py).
Prints one markdown table (also written to OUT/table.md, with the raw figures in
OUT/results.json); each column is defined in HEADERS below.

Reading it: the learner grants the fleet env-step credit at the replay ratio, so actors
that are faster than the learner only wait longer ("actor idle %"). Precision can shorten
the time to the threshold only when the actors are the bottleneck (actor idle % near 0,
"learner idle %" high: the learner waiting for their data); the actor-side columns and the
fleet's energy show its effect either way. "model speed-up" predicts an arm's speed-up from
the fp32 arm's figures and the actors' per-step speed alone (predicted_speed_up); with more
than one seed a second table gives each figure's mean ± std over the seeds.

A policy that cannot be shipped makes an arm meaningless (its actors would act randomly
all run), so before starting, each arm's model size is estimated from the config and
checked against the MQTT packet limit and the board's max_policy_bytes (--no-size-check
skips this). --quick is a tiny-budget smoke run with 64-64 networks and parity gates that
always pass (a few minutes for three CartPole arms on 2 cores).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).parent))
from _arms import ROOT, finished, run_arms  # noqa: E402
from _common import md_table  # noqa: E402

PRECISIONS = ("fp32", "fp16", "int8")  # fp32 first: the reference of the ratios
THRESHOLDS = {"CartPole-v1": 475.0, "HalfCheetah-v5": 5000.0, "Pendulum-v1": -200.0}
BYTES_PER_WEIGHT = {"int8": 1, "fp16": 2, "fp32": 4}
# zlib (the default codec) takes <= 12 % off a dense model (3x2048 actor: int8 1 %, fp16
# 10 %, fp32 8 %); a model whose estimate is past a limit even after 15 % off is refused.
ZLIB_BEST = 0.85
QUICK = [
    "--fleet",
    "2",
    "--set",
    "total_env_steps=3000",
    "--set",
    "learning_starts=500",
    "--set",
    "replay_capacity=10000",
    "--set",
    "export.every_updates=100",
    # The fleet waits for the learner: without it, actors can reach the budget before the
    # first policy is out, and the actor columns would have no model step to report.
    "--set",
    "max_lag_transitions=250",
    "--set",
    "select_every=0",
    "--set",
    "eval_episodes=3",
    "--set",
    "export.calibration_size=100",
    "--set",
    "export.parity_size=100",
]
QUICK_NETS = {  # tiny networks, and parity gates that always pass (tests/conftest.py)
    "dqn": ["--set", "dqn.hidden=[64, 64]", "--set", "export.min_greedy_agreement=0"],
    "td3": [
        "--set",
        "td3.actor_hidden=[64, 64]",
        "--set",
        "td3.critic_hidden=[64, 64]",
        "--set",
        "td3.batch_size=64",
        "--set",
        "td3.updates_per_call=1",
        "--set",
        "export.max_action_error=2",
        "--set",
        "export.mean_action_error=2",
    ],
}


# --- running the arms -------------------------------------------------------------------


def arm_args(args: argparse.Namespace, algo: str, precision: str) -> list[str]:
    """Every flag after ``--config/--out/--seed``; later ``--set``s win."""
    quick = [*QUICK, *QUICK_NETS[algo]] if args.quick else []
    user = [x for kv in args.set for x in ("--set", kv)]
    return [*quick, *user, "--set", f"export.precision={precision}"]


def run_seed(args: argparse.Namespace, algo: str, seed: int) -> dict[str, Path]:
    dirs = {p: args.out / f"{p}-s{seed}" for p in args.precisions}
    flags = ["--config", str(args.config), "--seed", str(seed)]
    todo = {
        p: (d, [*flags, *arm_args(args, algo, p)])
        for p, d in dirs.items()
        if not (args.reuse and finished(d))
    }
    if todo:
        run_arms(todo, poll=args.poll)
    return dirs


# --- the size check ---------------------------------------------------------------------


def policy_weights(cfg: Any) -> int:
    """Weights and biases of the deployed network (a Dense stack) from the config's sizes."""
    from edge_rl.envs import make_env
    from edge_rl.specs import EnvSpec

    env = make_env(cfg.env_id)
    spec = EnvSpec.from_gym(env.observation_space, env.action_space)
    env.close()
    obs_dim = math.prod(spec.obs_shape)
    if cfg.algo == "dqn":
        dims = [obs_dim, *cfg.dqn.hidden, spec.num_actions]
    else:  # the frozen rescale is exported as float constants, 2 per action dimension
        dims = [obs_dim, *cfg.td3.actor_hidden, math.prod(spec.action_shape)]
    return sum(i * o + o for i, o in zip(dims, dims[1:], strict=False))


def size_problems(args: argparse.Namespace, algo: str) -> list[str]:
    """Arms whose model is sure to exceed the MQTT packet limit or the board's limit."""
    from edge_rl.boards import board_file, load_board
    from edge_rl.config import load_run_config

    problems = []
    for p in args.precisions:
        flags = arm_args(args, algo, p)
        sets = dict(flags[i + 1].split("=", 1) for i, f in enumerate(flags) if f == "--set")
        cfg = load_run_config(args.config, {k: yaml.safe_load(v) for k, v in sets.items()})
        board_path = board_file(cfg.fleet.board)
        board = load_board(board_path if board_path.is_absolute() else ROOT / board_path)
        model = policy_weights(cfg) * BYTES_PER_WEIGHT[p]
        limit = cfg.transport.max_packet_bytes  # the learner's client and embedded broker
        if model * ZLIB_BEST > limit:
            problems.append(
                f"{p}: a ~{model / 1e6:.1f} MB model does not fit the {limit:,}-byte MQTT "
                "packet limit: every export would fail to publish (raise "
                "transport.max_packet_bytes)"
            )
        if model > board.max_policy_bytes:
            problems.append(
                f"{p}: a ~{model / 1e6:.1f} MB model is over the board's max_policy_bytes "
                f"{board.max_policy_bytes:,} ({board_path}): actors would reject it"
            )
    return problems


# --- figures of one arm ------------------------------------------------------------------


def _metrics(d: Path) -> list[dict[str, str]]:
    path = d / "metrics.csv"
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def publishes(d: Path) -> list[dict]:
    path = d / "publishes.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def time_to(d: Path, threshold: float) -> tuple[float, int] | None:
    """(wall_s, env_steps) of the first metrics.csv row whose recent_return (the mean of
    the fleet's last 20 exploring episodes) reaches ``threshold``; None if none does."""
    for row in _metrics(d):
        r = float(row["recent_return"] or "nan")
        if not math.isnan(r) and r >= threshold:
            return float(row["wall_s"]), int(row["env_steps"])
    return None


def greedy_time_to(d: Path, scores: dict[str, float], threshold: float) -> tuple[float, int] | None:
    """(wall_s, env_steps) when the first policy whose selection score (greedy episodes on
    the host, ``summary.json`` ``selection_scores``) reaches ``threshold`` was published:
    its env steps from publishes.jsonl, the wall time of the first metrics.csv row there."""
    at = {p["policy_version"]: p["env_steps"] for p in publishes(d) if "policy_version" in p}
    good = sorted(int(v) for v, score in scores.items() if score >= threshold and int(v) in at)
    if not good:
        return None
    env_steps = at[good[0]]
    for row in _metrics(d):
        if int(row["env_steps"]) >= env_steps:
            return float(row["wall_s"]), env_steps
    return None


def figures(d: Path, threshold: float) -> dict[str, Any]:
    """The raw numbers of one arm: summary.json, metrics.csv and publishes.jsonl."""
    s = json.loads((d / "summary.json").read_text())
    rb = s["runtime_breakdown"]
    actors = {a: b for a, b in rb["actors"].items() if b.get("wall")}
    fleet = rb["fleet_total"]
    steps = {a: s["actors"][a]["env_steps"] for a in actors if a in s["actors"]}
    pubs = publishes(d)
    # Actors acted without a model (randomly, no inference) until the first publish, and
    # they load only what is published while they run: not the final export or redeploy,
    # published after the fleet stopped at the budget.
    random_steps = pubs[0]["env_steps"] if pubs else s["env_steps"]
    loads = sum(1 for p in pubs if p["env_steps"] < s["env_steps"])
    model_steps = sum(steps.values()) - random_steps
    main = (rb.get("learner") or {}).get("main") or {}
    energy = s.get("energy") or {}
    learner, fleet_e = energy.get("learner") or {}, energy.get("fleet") or {}
    kg = [learner.get("kg_co2e"), fleet_e.get("kg_co2e")]
    reached = time_to(d, threshold)
    greedy = greedy_time_to(d, s.get("selection_scores") or {}, threshold)
    return {
        "precision": s["policy_precision"],
        "seed": s["seed"],
        "time_to_threshold_s": reached and reached[0],
        "env_steps_at_threshold": reached and reached[1],
        "greedy_time_to_threshold_s": greedy and greedy[0],
        "greedy_env_steps_at_threshold": greedy and greedy[1],
        "final_return": s["final_eval_return"],
        "final_return_std": s["final_eval_return_std"],
        "eval_episodes": s["eval_episodes"],
        "actor_steps_per_s": _rate(steps, actors, busy=False),
        "actor_busy_steps_per_s": _rate(steps, actors, busy=True),
        "actor_idle_pct": 100 * fleet["idle"] / fleet["wall"] if fleet.get("wall") else None,
        # The learner's main thread waiting for data: the share of the run the fleet set.
        "learner_idle_pct": 100 * main["idle"] / main["wall"] if main.get("wall") else None,
        "learner_busy_s": main["wall"] - main["idle"] if main.get("wall") else None,
        "fleet_busy_s": statistics.fmean(b["wall"] - b.get("idle", 0.0) for b in actors.values())
        if actors
        else None,
        "inference_us": 1e6 * fleet["inference"] / model_steps if model_steps > 0 else None,
        "model_load_ms": 1e3 * fleet["model_load"] / (loads * len(actors)) if loads else None,
        "receive_ms": 1e3 * fleet["policy_receive"] / (loads * len(actors)) if loads else None,
        "publishes": s["publishes"],
        "final_payload_bytes": s["policy_payload_bytes"],
        "mean_payload_bytes": s["policy_bytes_total"] / s["publishes"] if s["publishes"] else None,
        "learner_kwh": learner.get("kwh"),
        "fleet_kwh": fleet_e.get("kwh"),
        "kg_co2e": sum(kg) if None not in kg else None,
        "exports_failed": s["exports_failed"],
        "wall_s": s["wall_s"],
    }


def _rate(steps: dict[str, int], actors: dict[str, dict], busy: bool) -> float | None:
    """Per actor: env steps / its loop's wall (less its idle time if ``busy``); the mean."""
    secs = [actors[a]["wall"] - (actors[a].get("idle", 0.0) if busy else 0.0) for a in steps]
    if not secs or min(secs) <= 0:
        return None
    return statistics.fmean(n / t for n, t in zip(steps.values(), secs, strict=True))


def predicted_speed_up(ref: dict[str, Any], arm: dict[str, Any]) -> float | None:
    """How much shorter ``arm``'s run should be than the fp32 ``ref``'s, from ``ref``'s own
    figures and the actors' per-step speed alone: the learner's busy time stays, the
    fleet's busy time shrinks by the ratio of busy steps/s, and the longer of the two sets
    the wall: ``max(fleet, learner) / max(fleet / speed, learner)``. A learner-bound run
    (fleet << learner) predicts 1.0x whatever the actors' speed."""
    tf, tl = ref.get("fleet_busy_s"), ref.get("learner_busy_s")
    s_ref, s_arm = ref.get("actor_busy_steps_per_s"), arm.get("actor_busy_steps_per_s")
    if not (tf and tl and s_ref and s_arm):
        return None
    return max(tf, tl) / max(tf * s_ref / s_arm, tl)


# --- the table ---------------------------------------------------------------------------

HEADERS = [
    "arm",
    "seed",
    "time to R (s)",  # learner wall s at the first recent_return >= R (metrics.csv)
    "env steps at R",  # env steps received by then
    "speed-up vs fp32",  # fp32's time to R / this arm's (same seed)
    "greedy: time to R (s)",  # wall s when the first policy scoring >= R was published
    "greedy: env steps at R",  # (selection score: greedy episodes on the host, LiteRT)
    "greedy: speed-up",  # fp32's greedy time to R / this arm's
    "model speed-up",  # predicted_speed_up: fp32's run with this arm's busy steps/s
    "final return",  # mean ± std of the deployed model's greedy eval (summary)
    "actor steps/s",  # per actor: env steps / its loop's wall; mean over actors
    "busy steps/s",  # the same over wall - idle: the actor's own speed
    "actor idle %",  # fleet idle / fleet wall: waiting for credit, the broker
    "learner idle %",  # learner main thread idle / wall: waiting for the fleet's data
    "inference µs/step",  # fleet inference s / env steps acted by a model (host clock)
    "model load ms",  # fleet model_load s / (publishes loaded x actors)
    "receive ms",  # fleet policy_receive s (decode, zlib, sha256) / the same
    "publishes",
    "final payload KB",  # the last bundle on the wire
    "KB/publish",  # policy_bytes_total / publishes
    "learner Wh",
    "fleet Wh",  # summary energy: codecarbon (host), power model (boards)
    "CO2 g",  # learner + fleet kg CO2e, in g
    "CO2 ratio vs fp32",  # fp32's CO2 / this arm's: > 1 is a saving
    "exports failed",
    "wall s",
]


def _num(x: float | None, fmt: str, missing: str = "-") -> str:
    return missing if x is None else format(x, fmt)


def _times(x: float | None) -> str:
    return f"{x:.2f}×" if x else "-"


def _ratio(ref: float | None, x: float | None) -> str:
    return f"{ref / x:.2f}×" if ref and x else "-"


def row(f: dict[str, Any], ref: dict[str, Any] | None) -> list[str]:
    ref = ref or {}
    ret = f["final_return"]
    return [
        f["precision"],
        str(f["seed"]),
        _num(f["time_to_threshold_s"], ".1f", "not reached"),
        _num(f["env_steps_at_threshold"], "d", "-"),
        _ratio(ref.get("time_to_threshold_s"), f["time_to_threshold_s"]),
        _num(f["greedy_time_to_threshold_s"], ".1f", "not reached"),
        _num(f["greedy_env_steps_at_threshold"], "d", "-"),
        _ratio(ref.get("greedy_time_to_threshold_s"), f["greedy_time_to_threshold_s"]),
        _times(predicted_speed_up(ref, f)),
        f"{ret:.1f} ± {f['final_return_std']:.1f}" if ret is not None else "-",
        _num(f["actor_steps_per_s"], ".0f"),
        _num(f["actor_busy_steps_per_s"], ".0f"),
        _num(f["actor_idle_pct"], ".1f"),
        _num(f["learner_idle_pct"], ".1f"),
        _num(f["inference_us"], ".1f"),
        _num(f["model_load_ms"], ".2f"),
        _num(f["receive_ms"], ".2f"),
        str(f["publishes"]),
        _num(f["final_payload_bytes"] and f["final_payload_bytes"] / 1e3, ".1f"),
        _num(f["mean_payload_bytes"] and f["mean_payload_bytes"] / 1e3, ".1f"),
        _num(f["learner_kwh"] and f["learner_kwh"] * 1e3, ".4g"),
        _num(f["fleet_kwh"] and f["fleet_kwh"] * 1e3, ".4g"),
        _num(f["kg_co2e"] and f["kg_co2e"] * 1e3, ".4g"),
        _ratio(ref.get("kg_co2e"), f["kg_co2e"]),
        str(f["exports_failed"]),
        f"{f['wall_s']:.0f}",
    ]


def table(all_dirs: list[dict[str, Path]], threshold: float) -> tuple[str, list[dict]]:
    rows, raw = [], []
    for dirs in all_dirs:
        figs = {p: figures(d, threshold) for p, d in dirs.items()}
        rows += [row(f, figs.get("fp32")) for f in figs.values()]
        raw += [{"run_dir": str(dirs[p]), **f} for p, f in figs.items()]
    return md_table(HEADERS, rows), raw


SEED_HEADERS = [
    "arm",
    "seeds",
    "learner idle %",  # mean over seeds: the share of the run the fleet set
    "busy steps/s",  # mean over seeds
    "greedy: time to R (s)",  # mean ± std over the seeds that reached R (k of n)
    "greedy: speed-up",  # per seed, fp32's greedy time to R / this arm's: mean ± std
    "fleet: speed-up",  # the same for the fleet's exploring return
    "model speed-up",  # per seed, predicted_speed_up: mean ± std
    "wall speed-up",  # per seed, fp32's wall / this arm's: what the model predicts
    "final return",  # mean ± std over seeds of the deployed policy's eval
    "CO2 g",  # mean over seeds
    "CO2 ratio vs fp32",  # per seed, fp32's CO2 / this arm's: mean ± std
]


def _spread(xs: list[float | None], fmt: str, unit: str = "") -> str:
    """``mean ± std`` of the values that exist, with ``(k of n)`` if some do not."""
    got = [x for x in xs if x is not None]
    if not got:
        return "-"
    std = statistics.stdev(got) if len(got) > 1 else 0.0
    text = f"{format(statistics.fmean(got), fmt)}{unit} ± {format(std, fmt)}"
    return text if len(got) == len(xs) else f"{text} ({len(got)} of {len(xs)})"


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def seed_table(raw: list[dict[str, Any]]) -> str:
    """One row per precision over the seeds: the spread of each figure and of each seed's
    ratio to the same seed's fp32 arm."""
    ref = {f["seed"]: f for f in raw if f["precision"] == "fp32"}
    rows = []
    for precision in [p for p in PRECISIONS if any(f["precision"] == p for f in raw)]:
        arms = [f for f in raw if f["precision"] == precision]
        pairs = [(ref.get(f["seed"]) or {}, f) for f in arms]
        rows.append(
            [
                precision,
                ", ".join(str(f["seed"]) for f in arms),
                _spread([f["learner_idle_pct"] for f in arms], ".1f"),
                _spread([f["actor_busy_steps_per_s"] for f in arms], ".0f"),
                _spread([f["greedy_time_to_threshold_s"] for f in arms], ".0f"),
                _spread(
                    [
                        _div(r.get("greedy_time_to_threshold_s"), f["greedy_time_to_threshold_s"])
                        for r, f in pairs
                    ],
                    ".2f",
                    "×",
                ),
                _spread(
                    [
                        _div(r.get("time_to_threshold_s"), f["time_to_threshold_s"])
                        for r, f in pairs
                    ],
                    ".2f",
                    "×",
                ),
                _spread([predicted_speed_up(r, f) for r, f in pairs], ".2f", "×"),
                _spread([_div(r.get("wall_s"), f["wall_s"]) for r, f in pairs], ".2f", "×"),
                _spread([f["final_return"] for f in arms], ".1f"),
                _spread([f["kg_co2e"] and f["kg_co2e"] * 1e3 for f in arms], ".3g"),
                _spread([_div(r.get("kg_co2e"), f["kg_co2e"]) for r, f in pairs], ".2f", "×"),
            ]
        )
    return md_table(SEED_HEADERS, rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    p.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="return R for 'time to R' (default by env: "
        + ", ".join(f"{k} {v:g}" for k, v in THRESHOLDS.items())
        + ")",
    )
    p.add_argument("--out", type=Path, default=None, help="default runs/actorq-<config stem>")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--quick", action="store_true", help="tiny budget smoke run (~2 min)")
    p.add_argument("--reuse", action="store_true", help="skip arms that have a summary.json")
    p.add_argument("--no-size-check", action="store_true", help="run arms that cannot ship")
    p.add_argument("--poll", type=float, default=30.0, help="seconds between progress lines")
    args = p.parse_args()
    args.precisions = [x for x in PRECISIONS if x in args.precisions]  # fp32 first
    args.config = args.config.resolve()
    raw_cfg = yaml.safe_load(args.config.read_text())
    algo, env_id = raw_cfg.get("algo", "dqn"), raw_cfg["env_id"]
    threshold = args.threshold if args.threshold is not None else THRESHOLDS.get(env_id)
    if threshold is None:
        raise SystemExit(f"no default threshold for {env_id}: pass --threshold")
    stem = f"actorq-{args.config.stem}{'-quick' if args.quick else ''}"
    args.out = (args.out or ROOT / "runs" / stem).resolve()
    problems = [] if args.no_size_check else size_problems(args, algo)
    if problems:
        raise SystemExit("policies that cannot be shipped:\n  " + "\n  ".join(problems))
    all_dirs = [run_seed(args, algo, seed) for seed in args.seeds]
    text, raw = table(all_dirs, threshold)
    if len(args.seeds) > 1:
        text += "\n\nOver the seeds (mean ± std):\n\n" + seed_table(raw)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(text + "\n")
    (args.out / "results.json").write_text(
        json.dumps({"threshold": threshold, "arms": raw}, indent=1)
    )
    print(f"\n{args.config.name}, R = {threshold:g} (" + " ".join(args.set) + ")\n")
    print(text)


if __name__ == "__main__":
    main()
