"""Reading run directories back: typed records, selection on the env-step axis, bad dirs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from edge_rl.report.costs import Clock, FleetEnergy
from edge_rl.report.markdown import render
from edge_rl.report.runs import Metrics, Run, RunDirError, load_run, run_labels


def test_loads_summary_and_metrics(make_run):
    run = load_run(make_run("a", precision="fp16", seed=3, scores={1: 50.0}))
    s = run.summary
    assert (s.env_id, s.algo, s.seed, s.policy_precision) == ("CartPole-v1", "dqn", 3, "fp16")
    assert (s.env_steps, s.final_eval_return, s.final_eval_return_std) == (6000, 180.0, 12.5)
    assert s.selection_scores == {1: 50.0}  # JSON's string keys back to versions
    assert len(run.metrics.wall_s) == 60 and run.metrics.env_steps[-1] == 5900
    assert math.isnan(run.metrics.recent_return[0]) and run.metrics.recent_return[5] == -72.0
    assert run.label() == "a (fp16, seed 3)"


def test_optional_fields_may_be_absent(make_run):
    run = load_run(make_run("old", precision=None, final=(None, None)))
    assert run.summary.policy_precision is None and run.summary.final_eval_return is None
    assert run.label() == "old (seed 0)"


FLEET = {"env_step": 3.0, "idle": 7.0, "wall": 10.0, "model_load": 0.5}
MAIN = {"updates": 8.0, "idle": 2.0, "wall": 10.0}


def test_loads_runtime_breakdown_and_energy(make_run):
    s = load_run(make_run("costs", breakdown=(FLEET, MAIN), energy=(0.004, 0.001, 500.0))).summary
    b, e = s.runtime_breakdown, s.energy
    assert b.fleet_total == Clock({"env_step": 3.0, "idle": 7.0, "model_load": 0.5}, 10.0)
    assert b.fleet_total.busy_percent() == 30.0 and b.fleet_total.percent("env_step") == 30.0
    assert b.learner["main"] == Clock({"updates": 8.0, "idle": 2.0}, 10.0)
    assert set(b.learner) == {"main", "ingest", "exporter"}
    assert set(b.actors) == {"sim-00", "sim-01"}
    assert b.actors["sim-00"].wall == 5.0  # each actor has half of the fleet total
    assert (e.learner.kwh, e.fleet.kwh, e.g_co2e_per_kwh) == (0.004, 0.001, 500.0)
    assert (e.learner.kg_co2e, e.fleet.kg_co2e) == (0.002, 0.0005)
    assert e.fleet == FleetEnergy(
        0.001, 0.0005, "rpi5", 2.8, 9.7, 1, {"sim-01": "no runtime breakdown in its status"}
    )
    assert e.learner.method.startswith("codecarbon") and e.country == "USA"


def test_runs_without_cost_blocks_still_load(make_run):
    s = load_run(make_run("old")).summary
    assert s.runtime_breakdown is None and s.energy is None
    run = make_run("nulls")  # a run with energy tracking off may write null
    _summary(lambda d: d.update(energy=None, runtime_breakdown=None))(run)
    assert load_run(run).summary.energy is None


def test_labels_tell_same_named_runs_apart_by_path(make_run):
    a, b, c = make_run("x/run"), make_run("y/run"), make_run("solo")
    labels = run_labels([load_run(a), load_run(b), load_run(c)])
    assert labels == [f"{a} (int8, seed 0)", f"{b} (int8, seed 0)", "solo (int8, seed 0)"]


# policy_version per metrics row -> env steps of the first row showing each scored version.
SELECTION_CASES = [
    # versions per row, scores, expected env steps per scored version (rows are 10 steps)
    ([0, 0, 1, 1, 2, 3], {1: 5.0, 3: 7.0}, [20, 50]),
    ([0, 2, 2, 4], {1: 5.0, 2: 6.0, 4: 8.0}, [10, 10, 30]),  # 1 never shown: first >= 1
    ([0, 1, 1], {1: 5.0, 2: 9.0}, [10, None]),  # 2 scored after the last metrics row
]


@pytest.mark.parametrize("versions, scores, expected", SELECTION_CASES)
def test_selection_points_on_the_env_step_axis(make_run, versions, scores, expected):
    base = load_run(make_run("r", scores=scores))
    n = len(versions)
    steps = np.arange(n) * 10.0
    metrics = Metrics(steps / 10, steps, np.zeros(n), np.asarray(versions, dtype=float))
    run = Run(base.path, base.summary, metrics)
    points = run.selection()
    assert [p.policy_version for p in points] == sorted(scores)
    assert [p.env_steps for p in points] == expected
    assert [p.score for p in points] == [scores[v] for v in sorted(scores)]


def _rewrite(name, transform):
    def mutate(run):
        path = run / name
        path.write_text(transform(path.read_text()))

    return mutate


def _summary(change):
    def transform(text):
        data = json.loads(text)
        change(data)
        return json.dumps(data)

    return _rewrite("summary.json", transform)


BAD_RUNS = [
    ("no summary", lambda run: (run / "summary.json").unlink(), "summary.json: missing"),
    ("no metrics", lambda run: (run / "metrics.csv").unlink(), "metrics.csv: missing"),
    ("summary not JSON", _rewrite("summary.json", lambda t: t[:20]), "not readable JSON"),
    ("summary a list", _rewrite("summary.json", lambda t: "[1, 2]"), "expected a JSON object"),
    (
        "summary lacks keys",
        _summary(lambda d: (d.pop("env_id"), d.pop("wall_s"))),
        "missing env_id, wall_s",
    ),
    ("summary bad value", _summary(lambda d: d.update(seed="zero")), "malformed value"),
    (
        "metrics lack a column",
        _rewrite("metrics.csv", lambda t: t.replace("recent_return", "ret", 1)),
        "no column recent_return",
    ),
    (
        "metrics bad number",
        _rewrite("metrics.csv", lambda t: t.replace("\n1.0,100,", "\n1.0,lots,", 1)),
        "line 3: env_steps='lots' is not a number",
    ),
    ("metrics short row", _rewrite("metrics.csv", lambda t: t + "61.0,6100\n"), "is not a number"),
    ("metrics header only", _rewrite("metrics.csv", lambda t: t.splitlines()[0] + "\n"), "no rows"),
    # The issue-5 blocks: the message names the file and the field.
    (
        "breakdown a list",
        _summary(lambda d: d.update(runtime_breakdown=[1])),
        "summary.json: malformed runtime_breakdown: expected an object, got list",
    ),
    (
        "clock without wall",
        _summary(lambda d: d["runtime_breakdown"]["fleet_total"].pop("wall")),
        "malformed runtime_breakdown.fleet_total: no wall",
    ),
    (
        "bucket not a number",
        _summary(lambda d: d["runtime_breakdown"]["learner"]["main"].update(idle="2 s")),
        "malformed runtime_breakdown.learner.main.idle: '2 s' is not a number",
    ),
    (
        "bucket negative",
        _summary(lambda d: d["runtime_breakdown"]["actors"]["sim-00"].update(env_step=-1.0)),
        "runtime_breakdown.actors.sim-00.env_step: -1.0 is not a finite",
    ),
    (
        "energy without learner",
        _summary(lambda d: d["energy"].pop("learner")),
        "malformed energy.learner: expected an object, got nothing",
    ),
    (
        "energy kwh a string",
        _summary(lambda d: d["energy"]["fleet"].update(kwh="0.1")),
        "malformed energy.fleet.kwh: '0.1' is not a number",
    ),
    (
        "intensity nan",
        _summary(lambda d: d["energy"].update(carbon_intensity_g_per_kwh=math.nan)),
        "energy.carbon_intensity_g_per_kwh: nan is not a finite number",
    ),
]


@pytest.mark.parametrize("mutate, message", [c[1:] for c in BAD_RUNS], ids=[c[0] for c in BAD_RUNS])
def test_bad_run_directory_names_the_file(make_run, mutate, message):
    run = make_run("bad", breakdown=(FLEET, MAIN), energy=(0.004, 0.001, 500.0))
    mutate(run)
    with pytest.raises(RunDirError, match="bad") as info:
        load_run(run)
    assert str(run) in str(info.value) and message in str(info.value)


def test_publishes_are_read_and_a_bad_line_names_the_file_and_line(make_run):
    run = make_run("pubs", publishes=[(1, 100, 20_000, 0.69), (2, 200, 18_000, None)])
    assert [p.compression for p in load_run(run).publishes] == [0.69, None]
    assert load_run(make_run("none")).publishes == ()
    with open(run / "publishes.jsonl", "a") as f:
        f.write('{"policy_version": 3}\n')
    with pytest.raises(RunDirError, match="publishes.jsonl, line 3"):
        load_run(run)


def test_not_a_directory(tmp_path):
    with pytest.raises(RunDirError, match="not a directory"):
        load_run(tmp_path / "nowhere")


def test_each_board_s_shield_and_control_rate_reach_the_report(make_run):
    path = make_run("robot")
    summary = json.loads((path / "summary.json").read_text())
    summary["actors"]["arm-1"] = {
        "env_steps": 5000,
        "safety": {"clipped": 41, "broker_lost": 7},
        "control_periods": 5000,
        "deadline_misses": 12,
        "jitter_p50_ms": 0.31,
        "jitter_p99_ms": 4.5,
    }
    (path / "summary.json").write_text(json.dumps(summary))
    run = load_run(path)
    assert run.summary.boards["arm-1"].safety == {"clipped": 41, "broker_lost": 7}
    assert not run.summary.boards["sim-00"].shown  # a board from before v5: no row
    text = render([run], [])
    row = next(line for line in text.splitlines() if "arm-1" in line)
    assert "broker_lost: 7, clipped: 41" in row and "12 (0.24 %)" in row and "0.31 / 4.50" in row
    assert "sim-00" not in text.split("## Boards")[1]
