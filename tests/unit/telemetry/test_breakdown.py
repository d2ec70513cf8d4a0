"""LapClock accounting and the learner's breakdown report (no broker, no TensorFlow)."""

from __future__ import annotations

import csv
import logging
import time

import pytest

from edge_rl.telemetry.breakdown import (
    LapClock,
    busy,
    fleet_total,
    learner_clocks,
    runtime_breakdown,
    write_report,
)
from tests.harness.clocks import FakeClock


def test_laps_charge_the_time_since_the_previous_lap_and_add_up_to_wall():
    clock = FakeClock()
    laps = LapClock(("work", "idle"), clock=clock)
    clock.t += 0.5
    assert laps.lap("idle") == 0.5
    clock.t += 0.25
    assert laps.lap("work") == 0.25
    assert laps.lap("work") == 0.0  # nothing since the last lap
    clock.t += 2.0  # after the last lap: not in any bucket, nor in wall
    assert laps.totals() == {"work": 0.25, "idle": 0.5, "wall": 0.75}
    assert clock.reads == 4  # one read at the start, one per lap; totals() reads none


def test_a_split_lap_charges_its_parts_and_the_rest_in_one_read():
    clock = FakeClock()
    laps = LapClock(("a", "b", "rest"), clock=clock)
    assert laps.now is clock  # a hot loop times its parts on the clock laps read
    clock.t += 1.0
    laps.lap_split({"a": 0.25, "b": 0.5}, rest="rest")
    assert laps.totals() == {"a": 0.25, "b": 0.5, "rest": 0.25, "wall": 1.0}
    clock.t += 0.5
    laps.lap_split({"a": 0.5, "b": 0.0}, rest="rest")  # parts that fill the lap: no rest
    assert laps.totals() == {"a": 0.75, "b": 0.5, "rest": 0.25, "wall": 1.5}
    assert clock.reads == 3  # the start, and one per split lap


def test_totals_round_and_still_add_up():
    clock = FakeClock(0.0)
    laps = LapClock(("a", "b"), clock=clock)
    for _ in range(3):
        clock.t += 1 / 3
        laps.lap("a")
    clock.t += 1e-7  # below the 1 µs the totals keep
    laps.lap("b")
    t = laps.totals()
    assert (t["a"], t["b"], t["wall"]) == (1.0, 0.0, 1.0)
    assert laps.totals(digits=9)["b"] == pytest.approx(1e-7, rel=1e-6)


def test_the_default_clock_is_perf_counter():
    before = time.perf_counter()
    laps = LapClock(("a",))
    after = time.perf_counter()
    assert before <= laps.start <= after  # same clock as the tests' outside stopwatches


def test_restart_zeroes_and_unknown_buckets_fail_loudly():
    clock = FakeClock()
    laps = LapClock(("a",), clock=clock)
    clock.t += 1.0
    laps.lap("a")
    clock.t += 1.0
    laps.restart()
    assert laps.totals() == {"a": 0.0, "wall": 0.0}
    clock.t += 0.5
    laps.lap("a")
    assert laps.totals() == {"a": 0.5, "wall": 0.5}  # from the restart, not the start
    with pytest.raises(KeyError):
        laps.lap("typo")


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
        "setup",
        "updates",
        "export",
        "publish",
        "evaluate",
        "other",
        "idle",
        "wall",
    }
    assert list(rb["actors"]) == ["a", "b"]  # sorted; an actor without a breakdown is left out
    assert rb["fleet_total"] == {"idle": 2.0, "wall": 3.0, "env_step": 1.0}
    with caplog.at_level(logging.INFO, logger="edge_rl.telemetry.breakdown"):
        write_report(tmp_path / "breakdown.csv", rb)
    rows = list(csv.DictReader(open(tmp_path / "breakdown.csv")))
    assert {"source": "actor/b", "bucket": "env_step", "seconds": "1.0"} in rows
    assert {r["source"] for r in rows} == {
        "learner/main",
        "learner/ingest",
        "learner/exporter",
        "actor/a",
        "actor/b",
        "fleet_total",
    }
    assert "runtime breakdown fleet_total: wall 3.00 s; idle 2.00 s (67%)" in caplog.text


def test_live_view_shows_each_actors_loop_shares():
    from rich.console import Console

    from edge_rl.telemetry.progress import _actors, _shares
    from edge_rl.types import ActorStatus

    assert _shares({"env_step": 1.0, "publish": 0.5, "idle": 0.5, "wall": 2.0}) == "50/0/0/25/0/25"
    assert _shares({}) == "-"  # an actor that predates the breakdown
    console = Console(width=200, record=True)
    b = {"env_step": 3.0, "idle": 1.0, "wall": 4.0}
    console.print(_actors({"a": ActorStatus("a", "running", breakdown=b)}, "running"))
    assert "75/0/0/0/0/25" in console.export_text()


def test_busy_is_every_bucket_but_idle():
    clock = LapClock(("export", "publish", "evaluate", "idle"), clock=FakeClock(0.0))
    fake = clock.now
    for bucket, seconds in (("idle", 5.0), ("export", 0.25), ("publish", 0.5), ("evaluate", 1.0)):
        fake.t += seconds
        clock.lap(bucket)
    assert busy(clock.totals()) == pytest.approx(1.75)  # not the idle 5 s, not the wall
