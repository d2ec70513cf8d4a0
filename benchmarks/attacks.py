#!/usr/bin/env python
"""Every attack of docs/security.md against a real run of the CartPole example, and its
deployed return next to a clean run of the same seed: one table, one row an attack.

    nice .venv/bin/python benchmarks/attacks.py --seeds 1,2          # as root: every arm
    .venv/bin/python benchmarks/attacks.py --seeds 1 --steps 3000 --arms wire
    .venv/bin/python benchmarks/attacks.py --table RESULTS.jsonl     # the table again

Each arm runs examples/cartpole_dqn.yaml (its nets, hyper-parameters, budget and model
selection) in this process: Mosquitto with the run's ACL and a password per client, a
learner, three honest simulated Pi 4 actor processes, and the attacker
(benchmarks/_attack_arms.py; the attackers are tests/harness/attackers.py and floods.py,
the ones the e2e security tests run):

* clean: no attacker
* wire: a board of the run whose password the attacker holds (a) sends 19,000 transitions
  of +-1e6 rewards and a plausible batch of its grant + 1, (b) leaves a retained status of
  2^53-1 env steps, (c) logs in a second session under the live sim-01 with sim-01's
  password, (g) sends seq 2^53-1, a batch of an old session, rewards 1e6 on a truncated
  episode; once it holds a grant and a fifth of the budget is stepped
* deploy (root): the shipped host/mosquitto.conf, TLS, its limits, with a deployment's
  generated password file and ACL and host/edge-rl.nft, in a network namespace; the run in
  another: (e) 1,100 idle TCP connections from one address while the boards connect and
  8 valid logins are tried from theirs, (d) a board of another run writes into this run's
  topics, (f) 400 x 1.99 MB from a board of the run at a fifth of the budget
* outlier: (h) a board that follows its credit and sends episodes that pass every check
  of ingest but never fall (every return 200), with the shipped quarantine rule
* outlier, no quarantine: the same with ``quarantine.enabled: false`` (its data stays)

Each arm's result is a JSON line in OUT/results.jsonl (``--table`` prints the table from
such a file). Nothing here asserts a number: tests/e2e/benchmarks/test_attacks_bench.py
runs the wire arm tiny.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the shared attackers
from _attack_arms import (  # noqa: E402
    ARMS,
    INTRUDER,
    OUTLIER,
    STRANGER,
    deploy_child,
    run_arm,
)
from _common import md_table  # noqa: E402

from tests.harness.paths import REPO  # noqa: E402

HEADERS = [
    "attack",
    "arm",
    "refused by: counter",
    "attacker's rows taken of its grant",
    "budget reached",
    "deployed return, attacked",
    "clean, same seed",
    "stalls",
    "valid logins refused",
    "broker RSS MB before / peak / after",
]


def _each(results: list[dict], cell) -> str:
    """One cell over the seeds: ``a / b``; a seed the arm did not run for: "not run"."""
    return " / ".join("not run" if r is None else cell(r) for r in results)


def _ret(r: dict) -> str:
    return "-" if r.get("return") is None else f"{r['return']:.1f} ± {r['return_std']:.1f}"


def _share(actor: str):
    def cell(r: dict) -> str:
        taken = r["taken_by_actor"].get(actor, 0)
        return f"{taken:,} of {r['granted'].get(actor, 0):,}"

    return cell


def _counter(*names: str):
    def cell(r: dict) -> str:
        rejected = {**r["rejected"], **{k: r[k] for k in ("status_over_credit",) if k in r}}
        rejected["actor_sessions_refused"] = r["actor_sessions_refused"]
        return ", ".join(f"{n} {rejected.get(n, 0)}" for n in names)

    return cell


def _stranger(r: dict) -> str:
    reached = (STRANGER in r["actors"]) + (STRANGER in r["taken_by_actor"])
    reached += sum(r["rejected"].get(k, 0) for k in ("not_owner", "not_granted"))
    reached += r["actor_sessions_refused"]
    return f"broker ACL: {reached} reached the learner"


def _honest_quarantined(r: dict) -> str:
    """Boards of the honest fleet the quarantine isolated: false positives."""
    honest = {a: q for a, q in r["quarantined"].items() if a.startswith("sim-")}
    if not honest:
        return "no board quarantined"
    return ", ".join(f"{a} quarantined at {q['env_steps']:,}" for a, q in honest.items())


def _resumed(r: dict) -> str:
    killed, resumed = r["killed_at"], r["resumed_from_env_steps"]
    where = f"killed at {killed:,}, resumed at {resumed:,}"
    return f"status_over_credit {r['status_over_credit']} ({where})"


def _flood(r: dict) -> str:
    f = r.get("flood", {})
    return f"nft: {f.get('flood_opened', '?')} of 1,100 opened"


def _payload(r: dict) -> str:
    acked = r.get("rss_mb", {}).get("acked", "?")
    q = r["quarantined"].get(INTRUDER)
    caught = f"; quarantined ({q['rule']}) at {q['env_steps']:,}" if q else ""
    return f"{acked} of 400 acked; too_large {r['rejected'].get('too_large', 0)}{caught}"


def _quarantine(r: dict) -> str:
    q = r["quarantined"].get(OUTLIER)
    if not q:
        return f"quarantine: -, {r['replay_rows'].get(OUTLIER, 0):,} rows left"
    return f"quarantine at {q['env_steps']:,} (z {q['z']:.1f}), {q['rows_evicted']:,} evicted"


def _observations(r: dict) -> str:
    q = r["quarantined"].get(INTRUDER)
    caught = f"; quarantined ({q['rule']})" if q else ""
    return (
        f"implausible_obs {r['rejected'].get('implausible_obs', 0)}; "
        f"exports_failed {r['exports_failed']}{caught}"
    )


def _done_flags(r: dict) -> str:
    q = r["quarantined"].get(INTRUDER)
    refused = sum(r["rejected"].get(k, 0) for k in r["rejected"])
    caught = f"quarantined ({q['rule']}) at {q['env_steps']:,}" if q else "not quarantined"
    return f"{caught}; batches refused {refused}"


def _banked(r: dict) -> str:
    return (
        f"claimed {r.get('banked_claimed', 0):,}, dumped {r.get('banked_dumped', 0):,}; "
        f"credit_withheld {r['credit_withheld']:,}, over budget "
        f"{r['transitions_over_budget']:,}"
    )


def _spoofed(r: dict) -> str:
    shown = r["intruder_figures"].get("recent_return")
    strict = "strict JSON" if r.get("summary_strict_json") else "NOT strict JSON"
    return f"status_clamped {r['status_clamped']}; return recorded {shown}; {strict}"


def _hellos(r: dict) -> str:
    h = r.get("hellos", {})
    return (
        f"{r.get('hellos_sent', 0):,} sent: answered {h.get('hellos_answered', 0):,}, "
        f"throttled {h.get('hellos_throttled', 0):,}; {_honest_quarantined(r)}"
    )


ROWS = [  # (attack, arm, refused-by cell, whose share)
    ("(a) 19,000 transitions of ±1e6 rewards", "wire", _counter("implausible_reward"), INTRUDER),
    ("(a) a plausible batch of its grant + 1", "wire", _counter("over_credit"), INTRUDER),
    ("(b) a retained status of 2^53-1 env steps", "wire", _counter("status_over_credit"), INTRUDER),
    (
        "(b) the same, across a SIGKILL of the learner and --resume",
        "stall-resume",
        _resumed,
        INTRUDER,
    ),
    (
        "(c) a second session under the live sim-01, with its password",
        "wire",
        _counter("not_owner", "actor_sessions_refused"),
        INTRUDER,
    ),
    (
        "(g) seq 2^53-1; an old session's batch; rewards 1e6, truncated",
        "wire",
        _counter("over_credit", "not_owner", "implausible_reward"),
        INTRUDER,
    ),
    ("(d) a board of another run writes into this run", "deploy", _stranger, STRANGER),
    ("(e) 1,100 idle TCP connections from one address", "deploy", _flood, None),
    ("(f) 400 × 1.99 MB from a board of the run", "deploy", _payload, INTRUDER),
    (
        "(i) CartPole velocities of ±9.9e5, within the space",
        "observations",
        _observations,
        INTRUDER,
    ),
    ("(j) done flags inverted, a seq skipped every batch", "done-flags", _done_flags, INTRUDER),
    (
        "(k) claims its grant as sent, dumps it at half the budget",
        "banked-credit",
        _banked,
        INTRUDER,
    ),
    ("(l) statuses with returns of 1e300, 1e308 every 2 s", "spoofed-figures", _spoofed, INTRUDER),
    ("(m) 200 hellos a second from a board of the run", "hello-flood", _hellos, None),
    ("(h) an outlying board (every return 200)", "outlier", _quarantine, OUTLIER),
    ("(h) the same, quarantine off", "outlier, no quarantine", _quarantine, OUTLIER),
]


def _logins(r: dict) -> str:
    f = r.get("flood")
    return "-" if f is None else f"{f['logins_refused']} of {f['logins_refused'] + f['logins_ok']}"


def _rss(r: dict) -> str:
    m = r.get("rss_mb")
    return "-" if m is None else f"{m['before']} / {m['peak']} / {m['after']}"


def _stalls(r: dict) -> str:
    at, longest = r["longest_flat"]
    return f"{len(r['stalls'])} (longest flat {longest:.0f} s at {at:,})"


def table(results: list[dict]) -> str:
    by = {(r["arm"], r["seed"]): r for r in results}
    seeds = sorted({r["seed"] for r in results})
    rows = []
    for attack, arm, refused, actor in ROWS:
        got = [by.get((arm, s)) for s in seeds]
        if not any(got):
            continue
        clean = [by.get(("clean", s), {}) for s in seeds]
        rows.append(
            [
                attack,
                arm,
                _each(got, refused),
                "-" if actor in (None, STRANGER) else _each(got, _share(actor)),
                _each(got, lambda r: "yes" if r["env_steps"] == r["budget"] else "no"),
                _each(got, _ret),
                " / ".join(_ret(c) if c else "-" for c in clean),
                _each(got, _stalls),
                _each(got, _logins),
                _each(got, _rss),
            ]
        )
    clean = [by.get(("clean", s)) for s in seeds]
    if any(clean):
        yes = _each(clean, lambda r: "yes" if r["env_steps"] == r["budget"] else "no")
        stalled = _each(clean, _stalls)
        caught = _each(clean, _honest_quarantined)
        rows.append(["none", "clean", caught, "-", yes, _each(clean, _ret), "", stalled, "-", "-"])
    errors = [
        f"{r['arm']} seed {r['seed']}: {r['attack_error']}" for r in results if "attack_error" in r
    ]
    note = "".join(f"\nattack failed: {e}" for e in errors)
    strict = [r for r in results if "summary_strict_json" in r]
    if strict:
        ok = sum(bool(r["summary_strict_json"]) for r in strict)
        note += f"\nsummary.json parses with a strict parser: {ok} of {len(strict)} runs"
    if not rows:
        return "no arm of the table ran" + note
    return (
        f"seeds {', '.join(map(str, seeds))} (a cell is seed {' / '.join(map(str, seeds))})\n\n"
        + md_table(HEADERS, rows)
        + note
    )


ROLLOUTS = [  # (attack, its deploy, the clean deploy beside it)
    (
        "claims −1e300 for the policy served; a random network deployed",
        "bad, liar claims -1e300",
        "bad, clean",
    ),
    (
        "claims 1e300, refuses what it is sent; a good policy deployed",
        "good, liar claims 1e300 and refuses",
        "good, clean",
    ),
    (
        "a retained status of v2^53−1, its board gone; a good policy deployed",
        "good, liar's retained v2^53-1, liar gone",
        "good, clean",
    ),
]


def _served(d: dict | None) -> str:
    """What the fleet serves after a deploy: the new policy's measured return if it was
    deployed, the previous one's if it was aborted."""
    if not d or "result" not in d:
        return "-" if not d else f"error: {d.get('error', '?')[:60]}"
    measured = d["measured_candidate"] if d["result"] == "deployed" else d["measured_baseline"]
    m = "-" if measured is None else f"{measured:.1f}"
    return f"{d['result']} v{d['version']}: serves {m}"


def rollout_table(results: list[dict]) -> str:
    runs = sorted((r for r in results if r["arm"] == "rollout"), key=lambda r: r["seed"])
    if not runs:
        return ""
    rows = []
    for attack, attacked, clean in ROLLOUTS:
        got = [r.get("served", {}) for r in runs]
        flagged = " / ".join(
            ", ".join(sorted(g.get(attacked, {}).get("flagged", {}))) or "-" for g in got
        )
        rows.append(
            [
                attack,
                " / ".join(_served(g.get(attacked)) for g in got),
                " / ".join(_served(g.get(clean)) for g in got),
                flagged,
            ]
        )
    seeds = " / ".join(str(r["seed"]) for r in runs)
    head = ["rollout attack (a board of the run lies)", "attacked", "clean", "flagged"]
    return f"\nrollouts after the run (a cell is seed {seeds})\n\n" + md_table(head, rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", default="1,2")
    p.add_argument("--steps", type=int, default=50_000, help="total_env_steps of each run")
    p.add_argument("--arms", default=",".join(a.replace(", ", "_") for a in ARMS))
    p.add_argument("--out", type=Path, default=REPO / "runs" / "attacks")
    p.add_argument("--table", type=Path, help="print the table of a results.jsonl and exit")
    p.add_argument("--child", help=argparse.SUPPRESS)  # the deploy arm's run, in its namespace
    p.add_argument("--broker-pid", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        result = deploy_child(json.loads(args.child), args.broker_pid)
        print(json.dumps(result), flush=True)
        return
    if args.table:
        results = [json.loads(x) for x in args.table.read_text().splitlines() if x.strip()]
        print(table(results))
        print(rollout_table(results))
        return
    arms = [a.replace("_", ", ") for a in args.arms.split(",")]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        p.error(f"unknown arms {unknown}; arms: {', '.join(a.replace(', ', '_') for a in ARMS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in map(int, args.seeds.split(",")):
        for arm in arms:
            try:
                result = {"seed": seed, "arm": arm, **run_arm(arm, seed, args.steps, args.out)}
            except Exception as e:  # the other arms still run; the table leaves it out
                print(f"arm {arm}, seed {seed} failed: {e}", file=sys.stderr, flush=True)
                continue
            result["load"] = round(os.getloadavg()[0], 1)
            results.append(result)
            with open(args.out / "results.jsonl", "a") as f:
                f.write(json.dumps(result) + "\n")
            print(json.dumps(result), flush=True)
    print()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(table(results))
    print(rollout_table(results))


if __name__ == "__main__":
    main()
