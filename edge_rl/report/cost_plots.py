"""What a run cost: where its threads spent their wall time, and its energy.

Each figure has one row per run that recorded the data (a run from before the runtime
breakdown or the energy block is left out; no such run at all: no figure). Bars are
coloured by what they measure (a bucket; the learner host or the fleet), and the run's
name on the y axis is written in the run's colour.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from edge_rl.report.canvas import env_title, figure, finish
from edge_rl.report.costs import SLOT_BUCKETS, Clock, Energy
from edge_rl.report.runs import Run, run_labels

# Buckets in drawing order (edge_rl/telemetry/breakdown.py), with what a legend says.
FLEET_BUCKETS = {
    "env_step": "env step",
    "inference": "inference",
    "exploration": "exploration",
    "publish": "publish transitions",
    "emulation": "emulation (slower board's extra compute)",
    "idle": "idle (broker, learner's credit, pause)",
}
LEARNER_BUCKETS = {
    "setup": "setup (tracing, connect, first policy)",
    "updates": "gradient updates",
    "export": "export",
    "publish": "publish policy",
    "evaluate": "evaluate",
    "other": "other (control, metrics)",
    "idle": "idle (no update due, waiting)",
}
COLOURS = {
    "env_step": "#1f77b4",
    "inference": "#ff7f0e",
    "exploration": "#2ca02c",
    "publish": "#d62728",
    "emulation": "#9467bd",
    "setup": "#8c564b",
    "updates": "#17becf",
    "export": "#e377c2",
    "evaluate": "#bcbd22",
    "other": "#c5b0d5",
    "idle": "#d9d9d9",
}
EXTRA_COLOURS = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c49c94", "#f7b6d2")
LABEL_MIN_SHARE = 0.06  # a segment narrower than this share of the axis: no number inside
ZOOM_BELOW_PERCENT = 50.0  # every run busy for less of its wall: add a panel zoomed on busy
RUN_AXIS = "run (precision, seed)"

# The energy figure: one pair of bars per run, the learner host above the fleet.
LEARNER_COLOUR, FLEET_COLOUR = "#4c4c4c", "#e69f00"
# (unit, factor from kWh or kg): a tiny run's 3.2e-5 kWh reads as 32.1 mWh, not as "3.2"
# with "1e-5" in the axis corner. The first unit in which the largest value is >= 1 wins.
ENERGY_UNITS = (("kWh", 1.0), ("Wh", 1e3), ("mWh", 1e6))
CO2_UNITS = (("kg", 1.0), ("g", 1e3), ("mg", 1e6))

# A run -> the clock to draw and a line about it under the run's name; None: no such clock.
Pick = Callable[[Run], tuple[Clock, str] | None]


def fleet_breakdown(runs: Sequence[Run]) -> Figure | None:
    """The actor loops' wall time by bucket, summed over the fleet (``fleet_total``)."""

    def pick(run: Run) -> tuple[Clock, str] | None:
        b = run.summary.runtime_breakdown
        if b is None or b.fleet_total is None:
            return None
        actors = f"{len(b.actors)} actor" + ("" if len(b.actors) == 1 else "s")
        return b.fleet_total, f"{actors} · busy {_percent(b.fleet_total.busy_percent())} %"

    return _shares(
        runs,
        pick,
        FLEET_BUCKETS,
        skip=SLOT_BUCKETS,  # the policy slot's thread: beside the loop, outside its wall
        what="where the fleet's actor loops spend their time",
        xlabel="share of loop wall time (%)\n100 % = every actor's loop wall time, summed",
    )


def learner_breakdown(runs: Sequence[Run]) -> Figure | None:
    """The learner's main thread (the update loop) by bucket."""

    def pick(run: Run) -> tuple[Clock, str] | None:
        b = run.summary.runtime_breakdown
        main = b.learner.get("main") if b else None
        if main is None:
            return None
        return main, f"wall {main.wall / 60:.1f} min · busy {_percent(main.busy_percent())} %"

    return _shares(
        runs,
        pick,
        LEARNER_BUCKETS,
        skip=(),
        what="where the learner's main thread spends its time",
        xlabel="share of the main thread's wall time (%)\n100 % = from its start to its last lap",
    )


def energy(runs: Sequence[Run]) -> Figure | None:
    """kWh and kg CO2e of the learner host (measured) and the fleet (power model)."""
    rows = [
        (i, label, run.summary.energy)
        for i, (run, label) in enumerate(zip(runs, run_labels(list(runs)), strict=True))
        if run.summary.energy is not None
    ]
    if not rows:
        return None
    fig, (kwh_ax, co2_ax) = figure(height=2.4 + 0.8 * len(rows), ncols=2)
    energies = [e for *_, e in rows]
    kwh_unit = _pairs(kwh_ax, energies, lambda e: (e.learner.kwh, e.fleet.kwh), ENERGY_UNITS)
    co2_unit = _pairs(co2_ax, energies, lambda e: (e.learner.kg_co2e, e.fleet.kg_co2e), CO2_UNITS)
    _run_ticks(kwh_ax, [(i, label) for i, label, _ in rows])
    kwh_ax.set_ylabel(RUN_AXIS)
    kwh_ax.set_xlabel(f"energy ({kwh_unit})")
    co2_ax.set_xlabel(f"emissions ({co2_unit} CO2e)\n= energy × the grid's carbon intensity")
    kwh_ax.set_title("energy")
    grids = sorted(
        {(e.country, e.g_co2e_per_kwh) for e in energies if e.g_co2e_per_kwh is not None}, key=str
    )
    co2_ax.set_title("carbon")
    if len(grids) == 1:
        co2_ax.set_title(f"carbon ({grids[0][0]} grid, {grids[0][1]:.0f} g CO2e/kWh)")
    elif grids:
        co2_ax.set_title("carbon (grids differ by run: see report.md)")
    fig.suptitle(env_title(runs, "energy and carbon of the learner host and the fleet"))
    # One legend entry per method: runs measured the same way share it.
    handles = [
        Patch(color=LEARNER_COLOUR, label=_wrap(f"learner host: {m}"))
        for m in dict.fromkeys(e.learner.method for e in energies)
    ]
    handles += [
        Patch(color=FLEET_COLOUR, label=_wrap(f"fleet: {m}"))
        for m in dict.fromkeys(e.fleet.method for e in energies)
    ]
    fig.legend(handles=handles, loc="outside lower center", ncols=1, frameon=False, fontsize=8)
    return fig


def _shares(
    runs: Sequence[Run],
    pick: Pick,
    names: dict[str, str],
    skip: Sequence[str],
    what: str,
    xlabel: str,
) -> Figure | None:
    """One horizontal bar per run: each bucket's % of the clock's wall, stacked to 100 %.

    When every run is mostly idle (an actor waiting for its credit), a second panel zooms
    on the busy buckets, which would otherwise be slivers beside a 95 % idle bar.
    """
    rows = [
        (i, f"{label}\n{picked[1]}", picked[0])
        for i, (run, label) in enumerate(zip(runs, run_labels(list(runs)), strict=True))
        if (picked := pick(run)) is not None and picked[0].wall > 0
    ]
    if not rows:
        return None
    # Known buckets in their order, then any that a newer run adds; idle last, the remainder.
    seen = {b for *_, clock in rows for b in clock.buckets if b not in skip}
    extra = sorted(seen - names.keys())
    busy = [b for b in names if b in seen and b != "idle"] + extra
    colours = COLOURS | {b: EXTRA_COLOURS[n % len(EXTRA_COLOURS)] for n, b in enumerate(extra)}
    clocks = [clock for *_, clock in rows]
    most_busy = max(sum(c.percent(b) for b in busy) for c in clocks)
    zoom = most_busy < ZOOM_BELOW_PERCENT
    fig, axes = figure(height=2.6 + 0.7 * len(rows), ncols=2 if zoom else 1)
    everything = busy + (["idle"] if "idle" in seen else [])
    _stack(axes[0], clocks, everything, colours, names, full=100.0)
    _run_ticks(axes[0], [(i, label) for i, label, _ in rows])
    if zoom:  # the same bars without idle, on an axis as long as the busiest run's busy part
        _stack(axes[1], clocks, busy, colours, None, full=1.15 * most_busy or 1.0)
        axes[1].set_xlabel("busy buckets, zoomed\n(% of loop wall time, as on the left)")
        axes[1].set_title("zoom on the busy buckets")
        fig.suptitle(env_title(runs, what))
    handles, _ = axes[0].get_legend_handles_labels()
    finish(
        fig,
        axes[0],
        "all buckets" if zoom else env_title(runs, what),
        xlabel,
        RUN_AXIS,
        handles=handles,
        ncols=3,
    )
    return fig


def _stack(
    ax: Axes,
    clocks: list[Clock],
    buckets: list[str],
    colours: dict[str, str],
    names: dict[str, str] | None,
    full: float,
) -> None:
    """Each clock's bar (row n for clocks[n]): its buckets' % of wall, left to right, on an
    axis ``full`` % long; a segment's % is written inside it when it is wide enough.
    ``names``: the legend's text per bucket (None: this axis adds nothing to the legend)."""
    left = [0.0] * len(clocks)
    for bucket in buckets:
        widths = [c.percent(bucket) for c in clocks]
        label = (names.get(bucket, bucket)) if names is not None else "_nolegend_"
        bars = ax.barh(
            range(len(clocks)),
            widths,
            left=left,
            height=0.6,
            edgecolor="white",
            color=colours[bucket],
            label=label,
        )
        texts = [_fits(w, full) for w in widths]
        ax.bar_label(bars, texts, label_type="center", fontsize=8)
        left = [a + w for a, w in zip(left, widths, strict=True)]
    ax.set_xlim(0, full)
    ax.grid(axis="y", visible=False)


def _percent(value: float) -> str:
    """One decimal, or two significant digits below 0.1 (0.034, not 0.0): not zero."""
    return f"{value:.1f}" if value == 0 or value >= 0.1 else f"{value:.2g}"


def _fits(width: float, full: float) -> str:
    """The % a segment ``width`` long (on an axis ``full`` long) says inside it, to as many
    decimals as the axis needs to tell it from 0, or "" when the text would not fit inside
    (it would overlap the next segment): about 2.5 % of the axis per character."""
    decimals = 0 if full >= 20 else max(1, math.ceil(-math.log10(full)) + 1)
    text = f"{width:.{decimals}f}"
    return text if width >= max(LABEL_MIN_SHARE, 0.025 * (len(text) + 1)) * full else ""


def _pairs(
    ax: Axes,
    energies: list[Energy],
    values: Callable[[Energy], tuple[float | None, float | None]],
    units: tuple[tuple[str, float], ...],
) -> str:
    """Per run, the learner host's bar above the fleet's, in the first unit that reads >= 1;
    returns that unit."""
    pairs = [values(e) for e in energies]
    largest = max((v for pair in pairs for v in pair if v is not None), default=0.0)
    unit, factor = next(((u, f) for u, f in units if largest * f >= 1), units[-1])
    for row, pair in enumerate(pairs):
        for value, shift, colour in zip(
            pair, (-0.2, 0.2), (LEARNER_COLOUR, FLEET_COLOUR), strict=True
        ):
            if value is None:  # not measured, or no carbon intensity: say so, draw nothing
                ax.text(0, row + shift, " not recorded", va="center", fontsize=8, color="0.3")
                continue
            bar = ax.barh(row + shift, value * factor, height=0.38, color=colour)
            ax.bar_label(bar, [f" {value * factor:.3g}"], fontsize=8)
    ax.set_xlim(0, 1.3 * largest * factor or 1)  # room for the value beside the longest bar
    ax.grid(axis="y", visible=False)
    return unit


def _run_ticks(ax: Axes, rows: list[tuple[int, str]]) -> None:
    """Row n is named by its label, in the colour of its run (``i``); first run on top."""
    ax.set_yticks(range(len(rows)), [label for _, label in rows])
    for tick, (i, _) in zip(ax.get_yticklabels(), rows, strict=True):
        tick.set_color(f"C{i}")
    ax.set_ylim(len(rows) - 0.5, -0.5)  # inverted: the first run on top, as on the command line


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, 110))
