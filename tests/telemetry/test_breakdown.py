"""LapClock accounting and the learner's breakdown report (no broker, no TensorFlow)."""

from __future__ import annotations

import csv
import logging
import time

import pytest

from edge_rl.telemetry.breakdown import (
    LapClock,
    fleet_total,
    learner_clocks,
    runtime_breakdown,
    write_report,
)


def test_laps_charge_the_time_since_the_previous_lap_and_add_up_to_wall():
    t0 = time.perf_counter()
    clock = LapClock(("work", "idle"))
    time.sleep(0.03)
    clock.lap("idle")
    time.sleep(0.01)
    clock.lap("work")
    clock.lap("work")  # nothing since the last lap: ~0 s
    outside = time.perf_counter() - t0
    t = clock.totals()
    assert t["idle"] >= 0.03 and 0.01 <= t["work"] < t["idle"]
    assert t["work"] + t["idle"] == pytest.approx(t["wall"], abs=2e-6)  # rounded to 1 µs
    assert 0 < outside - t["wall"] < 0.05  # wall is the time up to the last lap


def test_restart_zeroes_and_unknown_buckets_fail_loudly():
    clock = LapClock(("a",))
    time.sleep(0.01)
    clock.lap("a")
    clock.restart()
    assert clock.totals() == {"a": 0.0, "wall": 0.0}
    with pytest.raises(KeyError):
        clock.lap("typo")


def test_fleet_total_sums_key_by_key():
    actors = {"a": {"env_step": 1.0, "wall": 2.0}, "b": {"env_step": 0.5, "idle": 1.0, "wall": 1.5}}
    assert fleet_total(actors) == {"env_step": 1.5, "wall": 3.5, "idle": 1.0}
    assert fleet_total({}) == {}


def test_runtime_breakdown_and_report(tmp_path, caplog):
    clocks = learner_clocks()
    clocks["main"].lap("updates")
    actors = {"b": {"env_step": 1.0, "wall": 1.0}, "a": {"idle": 2.0, "wall": 2.0}, "old": {}}
    rb = runtime_breakdown(clocks, actors)
    assert set(rb["learner"]) == {"main", "ingest", "exporter"}
    assert set(rb["learner"]["main"]) == {
        "setup", "updates", "export", "publish", "evaluate", "other", "idle", "wall"
    }  # fmt: skip
    assert list(rb["actors"]) == ["a", "b"]  # sorted; an actor without a breakdown is left out
    assert rb["fleet_total"] == {"idle": 2.0, "wall": 3.0, "env_step": 1.0}
    with caplog.at_level(logging.INFO, logger="edge_rl.telemetry.breakdown"):
        write_report(tmp_path, rb)
    rows = list(csv.DictReader(open(tmp_path / "breakdown.csv")))
    assert {"source": "actor/b", "bucket": "env_step", "seconds": "1.0"} in rows
    assert {r["source"] for r in rows} == {
        "learner/main", "learner/ingest", "learner/exporter", "actor/a", "actor/b", "fleet_total"
    }  # fmt: skip
    assert "runtime breakdown fleet_total: wall 3.00 s; idle 2.00 s (67%)" in caplog.text


def test_live_view_shows_each_actors_loop_shares():
    from rich.console import Console

    from edge_rl.telemetry.progress import _actors, _shares
    from edge_rl.types import ActorStatus

    assert _shares({"env_step": 1.0, "publish": 0.5, "idle": 0.5, "wall": 2.0}) == "50/0/0/25/0/25"
    assert _shares({}) == "-"  # an actor that predates the breakdown
    console = Console(width=200, record=True)
    b = {"env_step": 3.0, "idle": 1.0, "wall": 4.0}
    console.print(_actors({"a": ActorStatus("a", "running", breakdown=b)}))
    assert "75/0/0/0/0/25" in console.export_text()
