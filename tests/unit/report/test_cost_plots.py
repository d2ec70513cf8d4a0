"""What a run cost, drawn: known runtime breakdowns and energy in, bar lengths out."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.report.cost_plots import energy, fleet_breakdown, learner_breakdown
from edge_rl.report.runs import load_run

# fleet_total of two actors (seconds). The slot thread's buckets are outside the loop's wall.
IDLE_FLEET = {
    "env_step": 10.0,
    "inference": 5.0,
    "exploration": 5.0,
    "publish": 20.0,
    "emulation": 10.0,
    "idle": 150.0,
    "wall": 200.0,
    "policy_receive": 3.0,
    "model_load": 1.0,
}
IDLE_FLEET_PERCENT = {
    "env step": 5.0,
    "inference": 2.5,
    "exploration": 2.5,
    "publish transitions": 10.0,
    "emulation (slower board's extra compute)": 5.0,
    "idle (broker, learner's credit, pause)": 75.0,
}
BUSY_FLEET = {
    "env_step": 40.0,
    "inference": 30.0,
    "exploration": 0.0,
    "publish": 10.0,
    "emulation": 0.0,
    "idle": 20.0,
    "wall": 100.0,
}
# The learner's main thread; an older run has no "setup" bucket (it counts as 0 %).
MAIN = {
    "setup": 6.0,
    "updates": 30.0,
    "export": 8.0,
    "publish": 1.0,
    "evaluate": 2.0,
    "other": 2.0,
    "idle": 1.0,
    "wall": 50.0,
}
MAIN_PERCENT = {
    "setup (tracing, connect, first policy)": 12.0,
    "gradient updates": 60.0,
    "export": 16.0,
    "publish policy": 2.0,
    "evaluate": 4.0,
    "other (control, metrics)": 4.0,
    "idle (no update due, waiting)": 2.0,
}


def _segments(ax) -> dict[str, list[float]]:
    """Legend label -> the width of its segment on each run's bar, top to bottom."""
    return {c.get_label(): [p.get_width() for p in c] for c in ax.containers}


def _ticks(ax) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


def _legend(fig) -> list[str]:
    return [t.get_text() for legend in fig.legends for t in legend.get_texts()]


def test_fleet_bars_are_each_bucket_share_of_loop_wall(make_run):
    old = load_run(make_run("old"))  # no runtime breakdown: no bar
    idle = load_run(make_run("idle", breakdown=(IDLE_FLEET, MAIN)))
    fig = fleet_breakdown([old, idle])
    full, zoom = fig.axes  # every run busy < 50 %: a second panel zooms on the busy part
    assert _segments(full) == {k: [v] for k, v in IDLE_FLEET_PERCENT.items()}
    assert list(_segments(full)) == list(IDLE_FLEET_PERCENT)  # drawing order, idle last
    (idle_bar,) = full.containers[-1]
    assert idle_bar.get_x() + idle_bar.get_width() == pytest.approx(100.0)  # stacked to 100 %
    busy = {k: v for k, v in IDLE_FLEET_PERCENT.items() if not k.startswith("idle")}
    assert [c.get_label() for c in zoom.containers] == ["_nolegend_"] * len(busy)
    assert [c[0].get_width() for c in zoom.containers] == list(busy.values())
    assert zoom.get_xlim() == pytest.approx((0, 1.15 * 25.0))
    assert _ticks(full) == ["idle (int8, seed 0)\n2 actors · busy 25.0 %"]
    assert full.get_xlim() == (0, 100) and "100 % = every actor's loop wall time" in (
        full.get_xlabel()
    )
    assert "fleet's actor loops" in fig.get_suptitle() and full.get_ylabel()
    assert _legend(fig) == list(IDLE_FLEET_PERCENT)  # once each, not again for the zoom
    assert full.get_yticklabels()[0].get_color() == "C1"  # the run keeps its colour


def test_fleet_bars_without_zoom_when_a_run_is_mostly_busy(make_run):
    runs = [
        load_run(make_run("idle", breakdown=(IDLE_FLEET, MAIN))),
        load_run(make_run("busy", breakdown=(BUSY_FLEET, MAIN))),
    ]
    fig = fleet_breakdown(runs)
    (ax,) = fig.axes
    segments = _segments(ax)
    assert segments["env step"] == [5.0, 40.0] and segments["inference"] == [2.5, 30.0]
    assert segments["idle (broker, learner's credit, pause)"] == [75.0, 20.0]
    assert [t.split("\n")[1] for t in _ticks(ax)] == [
        "2 actors · busy 25.0 %",
        "2 actors · busy 80.0 %",
    ]
    assert "fleet's actor loops" in ax.get_title() and "(%)" in ax.get_xlabel()


def test_learner_bars_are_each_bucket_share_of_the_main_thread(make_run):
    older_main = {k: v for k, v in MAIN.items() if k != "setup"} | {"updates": 36.0}
    runs = [
        load_run(make_run("new", breakdown=(IDLE_FLEET, MAIN))),
        load_run(make_run("older", breakdown=(IDLE_FLEET, older_main))),
    ]
    fig = learner_breakdown(runs)
    (ax,) = fig.axes  # busy 98 %: nothing to zoom on
    segments = _segments(ax)
    assert list(segments) == list(MAIN_PERCENT)
    assert {k: v[0] for k, v in segments.items()} == MAIN_PERCENT
    assert segments["setup (tracing, connect, first policy)"][1] == 0.0
    assert segments["gradient updates"][1] == 72.0
    assert [t.split("\n")[1] for t in _ticks(ax)] == ["wall 0.8 min · busy 98.0 %"] * 2
    assert "main thread" in ax.get_title() and "wall time (%)" in ax.get_xlabel()


@pytest.mark.parametrize("plot", [fleet_breakdown, learner_breakdown, energy])
def test_no_figure_without_the_data(make_run, plot):
    assert plot([load_run(make_run("old"))]) is None


# learner kWh, fleet kWh, g CO2e/kWh -> the unit of each panel and its factor from kWh / kg.
ENERGY_CASES = [
    ((2.5, 0.5, 400.0), ("kWh", 1.0), ("kg", 1.0)),
    ((0.0032, 0.0008, 400.0), ("Wh", 1e3), ("g", 1e3)),
    ((3.2e-5, 9e-6, 400.0), ("mWh", 1e6), ("mg", 1e6)),
]


@pytest.mark.parametrize("numbers, energy_unit, co2_unit", ENERGY_CASES)
def test_energy_bars_are_kwh_and_co2(make_run, numbers, energy_unit, co2_unit):
    learner_kwh, fleet_kwh, g = numbers
    runs = [load_run(make_run("e", energy=numbers)), load_run(make_run("old"))]
    fig = energy(runs)
    kwh_ax, co2_ax = fig.axes
    (unit, f), (mass, m) = energy_unit, co2_unit
    np.testing.assert_allclose(
        [p.get_width() for p in kwh_ax.patches], [learner_kwh * f, fleet_kwh * f]
    )
    np.testing.assert_allclose(
        [p.get_width() for p in co2_ax.patches],
        [learner_kwh * g / 1000 * m, fleet_kwh * g / 1000 * m],
    )
    assert kwh_ax.get_xlabel() == f"energy ({unit})"
    assert co2_ax.get_xlabel().startswith(f"emissions ({mass} CO2e)")
    assert _ticks(kwh_ax) == ["e (int8, seed 0)"]  # the run without energy has no row
    assert co2_ax.get_title() == "carbon (USA grid, 400 g CO2e/kWh)"
    assert "energy and carbon" in fig.get_suptitle()
    legend = _legend(fig)
    assert legend[0].startswith("learner host: codecarbon 3.3.2 offline")
    assert legend[1] == "fleet: power model (rpi5: 2.8 W idle, 9.7 W busy)"


def test_energy_not_measured_is_said_not_drawn(make_run):
    fig = energy([load_run(make_run("no-host", energy=(None, 0.002, None)))])
    kwh_ax, co2_ax = fig.axes
    assert [p.get_width() for p in kwh_ax.patches] == [pytest.approx(2.0)]  # Wh: fleet only
    assert len(co2_ax.patches) == 0 and co2_ax.get_title() == "carbon"  # no intensity known
    assert [t.get_text() for t in kwh_ax.texts] == [" not recorded", " 2"]  # and the value
    assert [t.get_text() for t in co2_ax.texts] == [" not recorded"] * 2


def test_numbers_inside_narrow_segments_are_left_out_and_none_reads_zero(make_run):
    """A fleet busy for a few hundredths of a % (500 boards waiting for credit): the zoomed
    panel's numbers have the decimals to say so, and a segment too narrow for its number
    has none (it would spill over its neighbours)."""
    tiny = {k: v / 1000 for k, v in IDLE_FLEET.items() if k not in ("idle", "wall")}
    tiny |= {"idle": 200.0 - sum(tiny.values()), "wall": 200.0}
    fig = fleet_breakdown([load_run(make_run("tiny", breakdown=(tiny, MAIN)))])
    full, zoom = fig.axes
    texts = [t.get_text() for t in zoom.texts if t.get_text()]
    assert texts and all(float(t) > 0 for t in texts), texts  # never "0.0"
    lo, hi = zoom.get_xlim()
    bars = [b for c in zoom.containers for b in c]
    for text in texts:  # room for it: its characters take ~2.5 % of the axis each
        widths = [b.get_width() for b in bars if f"{b.get_width():.3f}" == text]
        assert widths and min(widths) >= 0.025 * (len(text) + 1) * (hi - lo), text
    assert len(texts) < len(bars)  # the narrow ones say nothing
    assert "busy 0.027 %" in [t.get_text() for t in full.get_yticklabels()][0]
