"""benchmarks/actorq.py: the figures of an arm from hand-made run files (fast), the size
check on the large configs (fast), and a quick CartPole run of the three precisions whose
table is checked against the run directories it leaves (slow).

In the slow test the expected figures are recomputed from the files, not with the
script's helpers, so that a wrong column (a unit, a divisor, another arm's summary) fails.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.paths import REPO

SCRIPT = REPO / "benchmarks" / "actorq.py"
sys.path.insert(0, str(SCRIPT.parent))
import actorq  # noqa: E402

# CartPole's random-policy returns are ~20: a quick run's recent_return crosses this in
# most arms, often at the very first metrics row (wall 0.0, where no ratio is defined).
THRESHOLD = 12.0


def parse_table(stdout: str) -> list[dict[str, str]]:
    """The last markdown table in ``stdout``: one dict per row, keyed by header."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("|")]
    assert len(lines) >= 3, f"no markdown table in:\n{stdout[-3000:]}"
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    headers, rows = cells[0], cells[2:]
    assert all(len(r) == len(headers) for r in rows)
    return [dict(zip(headers, r, strict=True)) for r in rows]


def number(cell: str) -> float:
    return float(cell.replace(",", "").rstrip("×"))


# --- fast: one arm's figures from hand-made files ------------------------------------------


def write_run(
    d: Path,
    precision: str,
    returns: list[float | None],
    kg: float,
    scores: dict[str, float] | None = None,
) -> Path:
    """A run directory with one metrics row per second (recent_return ``returns``), two
    actors of 1000 env steps each, three publishes (the last after the budget) at env steps
    200, 1200, 2000, and the selection ``scores`` (policy version -> greedy return)."""
    d.mkdir(parents=True)
    with open(d / "metrics.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["wall_s", "env_steps", "recent_return"])
        for i, r in enumerate(returns):
            w.writerow([f"{i:.2f}", 100 * i, "nan" if r is None else r])
    pubs = [(200, 4000), (1200, 4000), (2000, 3000)]  # (env_steps, payload_bytes)
    (d / "publishes.jsonl").write_text(
        "".join(
            json.dumps({"policy_version": v, "env_steps": e, "payload_bytes": b}) + "\n"
            for v, (e, b) in enumerate(pubs, start=1)
        )
    )
    actor = {
        "wall": 20.0,
        "idle": 15.0,
        "inference": 0.9,
        "model_load": 0.03,
        "policy_receive": 0.006,
    }
    summary = {
        "policy_precision": precision,
        "seed": 0,
        "env_steps": 2000,
        "wall_s": 21.0,
        "final_eval_return": 480.0,
        "final_eval_return_std": 12.5,
        "eval_episodes": 10,
        "publishes": 3,
        "policy_payload_bytes": 3000,
        "policy_bytes_total": 11000,
        "exports_failed": 1,
        "selection_scores": scores or {},
        "actors": {"a": {"env_steps": 1000}, "b": {"env_steps": 1000}},
        "runtime_breakdown": {
            "actors": {"a": actor, "b": actor},
            "fleet_total": {k: 2 * v for k, v in actor.items()},
        },
        "energy": {
            "learner": {"kwh": 1e-3, "kg_co2e": kg / 2},
            "fleet": {"kwh": 2e-4, "kg_co2e": kg / 2},
        },
    }
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def test_figures_of_one_arm(tmp_path):
    d = write_run(tmp_path / "int8", "int8", [None, 20.0, 474.9, 475.0, 300.0], kg=2e-4)
    f = actorq.figures(d, threshold=475.0)
    assert (f["time_to_threshold_s"], f["env_steps_at_threshold"]) == (3.0, 300)
    assert f["actor_steps_per_s"] == pytest.approx(1000 / 20.0)
    assert f["actor_busy_steps_per_s"] == pytest.approx(1000 / 5.0)
    assert f["actor_idle_pct"] == pytest.approx(75.0)
    # 2000 actor steps, less the 200 before the first publish: 1.8 s / 1800 steps.
    assert f["inference_us"] == pytest.approx(1000.0)
    # Two publishes while the fleet ran (the third came at the budget), two actors.
    assert f["model_load_ms"] == pytest.approx(1e3 * 0.06 / 4)
    assert f["receive_ms"] == pytest.approx(1e3 * 0.012 / 4)
    assert f["mean_payload_bytes"] == pytest.approx(11000 / 3)
    assert f["kg_co2e"] == pytest.approx(2e-4)
    assert actorq.figures(d, threshold=475.1)["time_to_threshold_s"] is None


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ({"1": 100.0, "2": 500.0}, (12.0, 1200)),  # v2 published at 1200 steps: row 12
        ({"2": 500.0, "1": 475.0}, (2.0, 200)),  # the first version, not the first key
        ({"1": 474.9, "3": 500.0}, None),  # v3 came at 2000 steps: past the last row
        ({}, None),
    ],
)
def test_greedy_time_to_threshold(tmp_path, scores, expected):
    d = write_run(tmp_path / "int8", "int8", [None, *[1.0] * 14], kg=1e-4, scores=scores)
    f = actorq.figures(d, threshold=475.0)
    got = (f["greedy_time_to_threshold_s"], f["greedy_env_steps_at_threshold"])
    assert got == (expected or (None, None))


@pytest.mark.parametrize(
    ("fp32_returns", "arm_returns", "speed_up", "arm_time"),
    [
        ([None, 1, 1, 1, 500], [None, 1, 500], "2.00×", "2.0"),  # 4 s against 2 s
        ([None, 1, 500], [None, 1, 1, 1, 500], "0.50×", "4.0"),
        ([None, 1, 500], [None, 1, 1], "-", "not reached"),
        ([None, 1, 1], [None, 1, 500], "-", "2.0"),
        ([500, 500], [None, 500], "-", "1.0"),  # fp32 at the first row, 0 s: no ratio
    ],
)
def test_ratios_against_fp32(tmp_path, fp32_returns, arm_returns, speed_up, arm_time):
    ref = actorq.figures(write_run(tmp_path / "fp32", "fp32", fp32_returns, 4e-4), 475.0)
    arm = actorq.figures(write_run(tmp_path / "int8", "int8", arm_returns, 1e-4), 475.0)
    cells = dict(zip(actorq.HEADERS, actorq.row(arm, ref), strict=True))
    assert (cells["speed-up vs fp32"], cells["time to R (s)"]) == (speed_up, arm_time)
    assert cells["CO2 ratio vs fp32"] == "4.00×"
    assert cells["final return"] == "480.0 ± 12.5"
    assert cells["KB/publish"] == "3.7" and cells["final payload KB"] == "3.0"


def test_size_check_refuses_policies_that_cannot_ship():
    def problems(config: str, quick: bool = False, sets: list[str] = ()) -> list[str]:
        args = argparse.Namespace(
            config=REPO / config, quick=quick, set=list(sets), precisions=list(actorq.PRECISIONS)
        )
        return actorq.size_problems(args, "dqn" if "cartpole" in config else "td3")

    assert problems("examples/cartpole_dqn.yaml") == []
    large = "benchmarks/configs/cartpole_dqn_large.yaml"
    assert problems(large) == []  # transport.max_packet_bytes 36 MB, a 40 MB board
    # At the default 2 MB packet limit every precision of a 3x2048 network is refused,
    with_2mb = problems(large, sets=["transport.max_packet_bytes=2000000"])
    assert [p.split(":")[0] for p in with_2mb] == ["fp32", "fp16", "int8"]
    assert all("MQTT packet limit" in p for p in with_2mb)
    # and on the stock Pi 4 board (8 MB) even the int8 model (8.4 M weights) is too big.
    stock = problems(large, sets=["fleet.board=rpi4"])
    assert [p.split(":")[0] for p in stock] == ["fp32", "fp16", "int8"]
    assert all("max_policy_bytes 8,000,000" in p for p in stock)
    # --quick shrinks the networks to 64-64: the large config's files still get a smoke run.
    assert problems("benchmarks/configs/cartpole_dqn_large.yaml", quick=True) == []


# --- slow: a quick run, its table against its run directories -------------------------------

# The quick run of three arms: 76 s on this 2-core machine at load 7; the subprocess gets 5×
# that, and each test that may be the first to set it up a little more (the timeout covers
# fixture setup), so that the subprocess reports rather than pytest-timeout.
BENCH_TIMEOUT_S = 420
quick_run_timeout = pytest.mark.timeout(BENCH_TIMEOUT_S + 60)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, mosquitto_available):
    out = tmp_path_factory.mktemp("actorq")
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--config",
            str(REPO / "examples" / "cartpole_dqn.yaml"),
            "--quick",
            "--threshold",
            str(THRESHOLD),
            "--out",
            str(out),
            "--poll",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=BENCH_TIMEOUT_S,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, parse_table(proc.stdout)


@pytest.mark.slow
@pytest.mark.bench
@quick_run_timeout
def test_table_has_three_arms_with_numbers(quick_run):
    _, rows = quick_run
    assert [r["arm"] for r in rows] == ["fp32", "fp16", "int8"]
    numeric = [
        "actor steps/s",
        "busy steps/s",
        "actor idle %",
        "inference µs/step",
        "model load ms",
        "receive ms",
        "publishes",
        "final payload KB",
        "KB/publish",
        "learner Wh",
        "fleet Wh",
        "CO2 g",
        "CO2 ratio vs fp32",
        "exports failed",
        "wall s",
    ]
    for r in rows:
        for col in numeric:
            assert math.isfinite(number(r[col])), (r["arm"], col, r[col])
        mean, std = (number(x) for x in r["final return"].split("±"))
        assert std >= 0
    assert rows[0]["CO2 ratio vs fp32"] == "1.00×"
    # Precision shows in the model: int8 < fp16 < fp32 bytes on the wire.
    kb = [number(r["final payload KB"]) for r in rows]
    assert kb[2] < kb[1] < kb[0]


def first_reaching(metrics: Path, threshold: float) -> dict[str, str] | None:
    with open(metrics, newline="") as f:
        for m in csv.DictReader(f):
            if m["recent_return"] not in ("", "nan") and float(m["recent_return"]) >= threshold:
                return m
    return None


@pytest.mark.slow
@pytest.mark.bench
@quick_run_timeout
def test_table_matches_the_run_directories(quick_run):
    out, rows = quick_run
    for r in rows:
        d = out / f"{r['arm']}-s0"
        s = json.loads((d / "summary.json").read_text())
        assert s["policy_precision"] == r["arm"] and s["env_steps"] >= 3000
        mean, std = (number(x) for x in r["final return"].split("±"))
        assert mean == pytest.approx(s["final_eval_return"], abs=0.051)
        assert std == pytest.approx(s["final_eval_return_std"], abs=0.051)
        assert number(r["publishes"]) == s["publishes"] >= 1
        kb = s["policy_payload_bytes"] / 1e3
        assert number(r["final payload KB"]) == pytest.approx(kb, abs=0.051)
        pubs = [json.loads(x) for x in (d / "publishes.jsonl").read_text().splitlines()]
        assert len(pubs) == s["publishes"]
        mean_kb = sum(p["payload_bytes"] for p in pubs) / len(pubs) / 1e3
        assert number(r["KB/publish"]) == pytest.approx(mean_kb, abs=0.051)
        assert number(r["exports failed"]) == s["exports_failed"]
        assert number(r["wall s"]) == pytest.approx(s["wall_s"], abs=0.51)

        first = first_reaching(d / "metrics.csv", THRESHOLD)
        if first is None:
            assert (r["time to R (s)"], r["env steps at R"]) == ("not reached", "-")
        else:
            assert number(r["time to R (s)"]) == pytest.approx(float(first["wall_s"]), abs=0.051)
            assert number(r["env steps at R"]) == int(first["env_steps"])

        if not s["selection_scores"]:  # --quick turns selection off: no greedy scores
            assert r["greedy: time to R (s)"] == "not reached"

        actors = s["runtime_breakdown"]["actors"]
        rate = [s["actors"][a]["env_steps"] / b["wall"] for a, b in actors.items()]
        assert number(r["actor steps/s"]) == pytest.approx(sum(rate) / len(rate), abs=0.51)
        busy = [s["actors"][a]["env_steps"] / (b["wall"] - b["idle"]) for a, b in actors.items()]
        assert number(r["busy steps/s"]) == pytest.approx(sum(busy) / len(busy), abs=0.51)
        fleet = s["runtime_breakdown"]["fleet_total"]
        idle = 100 * fleet["idle"] / fleet["wall"]
        assert number(r["actor idle %"]) == pytest.approx(idle, abs=0.051)
        assert number(r["fleet Wh"]) == pytest.approx(s["energy"]["fleet"]["kwh"] * 1e3, rel=1e-3)


@pytest.mark.slow
@pytest.mark.bench
@quick_run_timeout
def test_ratios_are_against_the_fp32_arm(quick_run):
    out, rows = quick_run
    t = {}
    for r in rows:
        first = first_reaching(out / f"{r['arm']}-s0" / "metrics.csv", THRESHOLD)
        t[r["arm"]] = float(first["wall_s"]) if first else None
    co2 = {}
    for r in rows:
        e = json.loads((out / f"{r['arm']}-s0" / "summary.json").read_text())["energy"]
        co2[r["arm"]] = e["learner"]["kg_co2e"] + e["fleet"]["kg_co2e"]
    for r in rows:
        if t["fp32"] and t[r["arm"]]:
            assert number(r["speed-up vs fp32"]) == pytest.approx(
                t["fp32"] / t[r["arm"]], abs=0.006
            )
        else:
            assert r["speed-up vs fp32"] == "-"
        assert number(r["CO2 g"]) == pytest.approx(1e3 * co2[r["arm"]], rel=1e-3)
        assert number(r["CO2 ratio vs fp32"]) == pytest.approx(
            co2["fp32"] / co2[r["arm"]], abs=0.006
        )


def test_the_quick_runs_subprocess_timeout_is_reachable():
    """pytest-timeout (300 s by default) must not fire before the subprocess's own."""
    for test in (
        test_table_has_three_arms_with_numbers,
        test_table_matches_the_run_directories,
        test_ratios_are_against_the_fp32_arm,
    ):
        marks = {m.name: m for m in test.pytestmark}
        assert "slow" in marks and marks["timeout"].args[0] > BENCH_TIMEOUT_S, test.__name__


def test_the_model_caps_the_speed_up_where_the_learner_sets_the_pace():
    ref = {"fleet_busy_s": 100.0, "learner_busy_s": 40.0, "actor_busy_steps_per_s": 100.0}
    # The fleet set the pace: 2.5x faster actors, 2.5x shorter run (100 s -> 40 s).
    assert actorq.predicted_speed_up(ref, {"actor_busy_steps_per_s": 250.0}) == 2.5
    # 10x faster actors: the learner's 40 s is now the longer part, and the cap.
    assert actorq.predicted_speed_up(ref, {"actor_busy_steps_per_s": 1000.0}) == 2.5
    # A learner-bound run (the earlier ones here): no speed-up whatever the actors do.
    learner_bound = {**ref, "fleet_busy_s": 10.0, "learner_busy_s": 100.0}
    assert actorq.predicted_speed_up(learner_bound, {"actor_busy_steps_per_s": 700.0}) == 1.0
    assert actorq.predicted_speed_up({}, {"actor_busy_steps_per_s": 700.0}) is None


def test_the_seed_table_spreads_each_seed_s_ratio_to_its_own_fp32_arm():
    def arm(precision, seed, greedy_s, wall_s, busy, kg):
        return {
            "precision": precision,
            "seed": seed,
            "learner_idle_pct": 50.0,
            "actor_busy_steps_per_s": busy,
            "greedy_time_to_threshold_s": greedy_s,
            "time_to_threshold_s": None,
            "final_return": 500.0,
            "kg_co2e": kg,
            "wall_s": wall_s,
            "fleet_busy_s": wall_s,
            "learner_busy_s": wall_s / 4,
        }

    raw = [
        arm("fp32", 0, 300.0, 400.0, 100.0, 4e-3),
        arm("int8", 0, 100.0, 200.0, 200.0, 2e-3),
        arm("fp32", 1, 200.0, 400.0, 100.0, 4e-3),
        arm("int8", 1, None, 200.0, 200.0, 1e-3),
    ]
    lines = actorq.seed_table(raw).splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {r[0]: r for r in ([c.strip() for c in x.strip("|").split("|")] for x in lines[2:])}
    int8 = dict(zip(header, rows["int8"], strict=True))
    assert int8["seeds"] == "0, 1"
    assert int8["greedy: speed-up"] == "3.00× ± 0.00 (1 of 2)"  # seed 1 never reached R
    assert int8["fleet: speed-up"] == "-"
    assert int8["model speed-up"] == "2.00× ± 0.00"  # 2x faster actors, fleet-bound fp32
    assert int8["wall speed-up"] == "2.00× ± 0.00"
    assert int8["CO2 ratio vs fp32"] == "3.00× ± 1.41"  # 2x and 4x
    assert dict(zip(header, rows["fp32"], strict=True))["wall speed-up"] == "1.00× ± 0.00"
