"""A tiny ``edge-rl learn`` run leaves the runtime breakdown in summary.json and its logs."""

from __future__ import annotations

import csv
import json
import time

import pytest

from edge_rl.types import ACTOR_LOOP_BUCKETS


def _adds_up(b: dict[str, float], buckets) -> bool:
    return sum(b[k] for k in buckets) == pytest.approx(b["wall"], abs=1e-5)


@pytest.mark.slow
def test_tiny_run_reports_the_runtime_breakdown(cartpole_run):
    # The shared run's short lag and one update per transition make the fleet wait for
    # updates, so that policies go out (exporter thread) and actors load them (policy slot)
    # during the run.
    run = cartpole_run.run_dir
    summary = json.loads((run / "summary.json").read_text())
    rb = summary["runtime_breakdown"]

    # The learner: each thread's buckets add up to that thread's wall.
    main, ingest, exporter = (rb["learner"][t] for t in ("main", "ingest", "exporter"))
    assert _adds_up(main, ("setup", "updates", "export", "publish", "evaluate", "other", "idle"))
    assert _adds_up(ingest, ("ingest", "idle")) and ingest["ingest"] > 0
    assert _adds_up(exporter, ("export", "publish", "evaluate", "idle"))
    # Against the summary's own clock (time.monotonic, the clock perf_counter reads here),
    # which starts once setup is done and stops after main's last lap (and after the
    # energy meter's stop, which takes what it takes): an ordering, less the rounding of
    # wall_s to 10 ms. Setup charged to any other bucket would break it by the seconds of
    # tracing and connecting. Every thread's clock starts at the same instant.
    assert main["setup"] > 0
    assert time.get_clock_info("perf_counter").implementation == (
        time.get_clock_info("monotonic").implementation
    )
    assert main["wall"] - main["setup"] <= summary["wall_s"] + 0.005 + 2e-6
    assert ingest["wall"] <= main["wall"] and exporter["wall"] <= main["wall"]
    assert main["updates"] > 0 and summary["updates"] > 0
    assert main["evaluate"] > 0  # the final evaluation at least
    assert exporter["export"] > 0 and summary["publishes"] >= 2  # background exports
    assert main["publish"] + exporter["publish"] > 0

    # The actors, from their final status messages, and their sum.
    actors = rb["actors"]
    assert set(actors) == set(summary["actors"]) == {"sim-00", "sim-01"}
    for b in actors.values():
        assert _adds_up(b, ACTOR_LOOP_BUCKETS)
        assert min(b["env_step"], b["inference"], b["exploration"], b["publish"]) > 0
    # Policies loaded on the actors' slot threads (v1 comes out well before the budget).
    assert all(a["policy_version"] >= 1 for a in summary["actors"].values())
    assert all(b["policy_receive"] > 0 and b["model_load"] > 0 for b in actors.values())
    for k, v in rb["fleet_total"].items():
        assert v == pytest.approx(sum(b[k] for b in actors.values()), abs=1e-5)

    # The logs: breakdown.csv (long form) and the end-of-run lines in learner.log.
    rows = list(csv.DictReader(open(run / "breakdown.csv")))
    assert {r["source"] for r in rows} >= {"learner/main", "actor/sim-00", "fleet_total"}
    got = {(r["source"], r["bucket"]): float(r["seconds"]) for r in rows}
    assert got[("actor/sim-01", "env_step")] == actors["sim-01"]["env_step"]
    log = (run / "learner.log").read_text()
    assert "runtime breakdown learner/main: wall" in log
    assert "runtime breakdown fleet_total: wall" in log
