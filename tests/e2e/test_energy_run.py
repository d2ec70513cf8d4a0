"""A tiny ``edge-rl learn`` run writes summary.json's ``energy``: the learner host as
codecarbon measured it (offline), the simulated fleet from the board's power model."""

from __future__ import annotations

import json

import pytest

from edge_rl.boards import load_board
from edge_rl.telemetry.energy import busy_idle, energy_kwh
from tests.harness.paths import REPO

ROOT = REPO


@pytest.mark.slow
def test_tiny_run_reports_energy(cartpole_run):
    import codecarbon  # noqa: F401 - a declared dependency: a missing one fails, not skips

    csvs = cartpole_run.repo_csvs_before
    run = cartpole_run.run_dir
    summary = json.loads((run / "summary.json").read_text())
    e = summary["energy"]
    g_per_kwh = e["carbon_intensity_g_per_kwh"]
    assert e["country"] == "USA" and g_per_kwh > 0 and "codecarbon" in e["intensity_source"]

    # The learner host: codecarbon's own figures, priced at the same intensity.
    learner = e["learner"]
    assert learner["missing"] is None and learner["kwh"] > 0
    assert learner["method"].startswith("codecarbon") and learner["cpu_method"]
    assert learner["kg_co2e"] == pytest.approx(learner["kwh"] * g_per_kwh / 1000, rel=1e-3)
    assert learner["duration_s"] >= summary["wall_s"]  # from before setup to after the eval

    # The fleet: the rpi5 board file's figures, over each actor's runtime breakdown.
    fleet = e["fleet"]
    power = load_board(ROOT / "firmware_configs" / "rpi5.yaml").power
    assert (fleet["method"], fleet["board"]) == ("power model", "rpi5")
    assert (fleet["idle_w"], fleet["busy_w"], fleet["source"]) == (
        power.idle_w,
        power.busy_w,
        power.source,
    )
    assert fleet["kwh"] > 0 and fleet["missing"] == {}
    assert fleet["kg_co2e"] == pytest.approx(fleet["kwh"] * g_per_kwh / 1000, rel=1e-3)
    actors = fleet["actors"]
    assert set(actors) == {"sim-00", "sim-01"}
    # (every kWh and kg in the block is rounded to 6 significant digits)
    assert fleet["kwh"] == pytest.approx(sum(a["kwh"] for a in actors.values()), rel=1e-5)
    for actor, a in actors.items():
        b = summary["runtime_breakdown"]["actors"][actor]
        busy, idle = busy_idle(b)
        assert (a["busy_s"], a["idle_s"]) == pytest.approx((busy, idle), abs=1e-3)
        assert busy > 0 and busy + idle == pytest.approx(b["wall"], abs=1e-3)
        assert a["kwh"] == pytest.approx(energy_kwh(power, busy, idle), rel=1e-5)

    # Offline and tidy: codecarbon wrote no emissions.csv anywhere.
    assert not list(run.rglob("emissions*.csv")) and set(ROOT.glob("*.csv")) == csvs
