"""The report's figures: each one a function from runs to a matplotlib ``Figure``.

Figures use matplotlib's object API on the Agg canvas (no pyplot, no display, no global
figure state; ``canvas.py``), so a report renders headless on a learner host or in CI.
Every run keeps its colour (``C0``, ``C1``, ... by position) in every figure, and every
figure has a title, axis labels with units and a legend placed outside the axes, where it
cannot hide a line.

Adding a plot is one function ``runs -> Figure | None`` that returns ``None`` when no run
has the data, plus one ``Plot`` in ``PLOTS``; the writer saves it and links it from
report.md. Learning and the policy on the wire are drawn here; what a run cost (runtime
breakdown, energy and CO2) in ``cost_plots.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from edge_rl.report import cost_plots
from edge_rl.report.canvas import STEPS, curve, env_title, figure, finish
from edge_rl.report.runs import Run, SelectionPoint, run_labels

RETURN_LABEL = "training return\n(mean of recent episodes, with exploration)"


@dataclass(frozen=True)
class Plot:
    filename: str  # PNG in the report directory
    caption: str  # its heading in report.md
    make: Callable[[Sequence[Run]], Figure | None]  # None: no run has the data


def return_vs_env_steps(runs: Sequence[Run]) -> Figure:
    """Training return (the learner's rolling mean over the fleet's episodes) per env step."""
    fig, (ax,) = figure()
    for i, (run, label) in enumerate(zip(runs, run_labels(list(runs)), strict=True)):
        curve(ax, run.metrics.env_steps, run.metrics.recent_return, i, label)
    ax.xaxis.set_major_formatter(STEPS)
    finish(
        fig,
        ax,
        env_title(runs, "training return against env steps"),
        "env steps (all actors)",
        RETURN_LABEL,
    )
    return fig


def return_vs_wall_time(runs: Sequence[Run]) -> Figure:
    """The same curves against the learner's wall clock: ActorQ's end-to-end speed-up."""
    fig, (ax,) = figure()
    for i, (run, label) in enumerate(zip(runs, run_labels(list(runs)), strict=True)):
        curve(ax, run.metrics.wall_s / 60, run.metrics.recent_return, i, label)
    finish(
        fig,
        ax,
        env_title(runs, "training return against wall time"),
        "wall time since the learner started (min)",
        RETURN_LABEL,
    )
    return fig


def selection_scores(runs: Sequence[Run]) -> Figure | None:
    """Greedy return of the published policies that model selection scored, if any."""
    scored = [
        (i, run, label)
        for i, (run, label) in enumerate(zip(runs, run_labels(list(runs)), strict=True))
        if run.summary.selection_scores
    ]
    if not scored:
        return None
    points = {i: run.selection() for i, run, _ in scored}
    # Env steps compare runs whose export failures shifted the version numbers; use them
    # unless some version is absent from its metrics.csv (a truncated run).
    by_steps = all(p.env_steps is not None for ps in points.values() for p in ps)
    fig, (ax,) = figure()
    for i, _run, label in scored:
        xs, ys = _unjoined(points[i], by_steps)
        ax.plot(xs, ys, "o-", color=f"C{i}", label=label)
    ax.set_xlim(left=0)
    if by_steps:
        ax.xaxis.set_major_formatter(STEPS)
        xlabel = "env steps when the policy was published (all actors)"
    else:
        xlabel = "policy version"
    finish(
        fig,
        ax,
        env_title(runs, "greedy return of published policies (model selection)"),
        xlabel,
        "greedy return\n(mean of selection episodes)",
    )
    return fig


def _unjoined(points: list[SelectionPoint], by_steps: bool) -> tuple[list[float], list[float]]:
    """x and y of the scored policies, the line broken (a NaN) across unscored versions:
    scoring every n-th policy makes n the usual gap between two scored versions, and a
    wider one is a policy left unscored (it could not make the top five): no line spans it.
    """
    xs: list[float] = []
    ys: list[float] = []
    versions = [p.policy_version for p in points]
    step = min((b - a for a, b in zip(versions, versions[1:], strict=False)), default=0)
    for k, p in enumerate(points):
        if k and p.policy_version - points[k - 1].policy_version > step:
            xs.append(math.nan)
            ys.append(math.nan)
        xs.append(p.env_steps if by_steps and p.env_steps is not None else p.policy_version)
        ys.append(p.score)
    return xs, ys


def final_return(runs: Sequence[Run]) -> Figure:
    """Final greedy evaluation of each run's deployed policy, mean ± std over episodes."""
    fig, (ax,) = figure(height=1.6 + 0.7 * len(runs))
    ticks = []
    for i, (run, label) in enumerate(zip(runs, run_labels(list(runs)), strict=True)):
        mean, std = run.summary.final_eval_return, run.summary.final_eval_return_std
        if mean is None:  # the run ended before its final evaluation
            ticks.append(f"{label}\nnot evaluated")
            continue
        ax.barh(
            i, mean, xerr=std, color=f"C{i}", capsize=6, height=0.6, error_kw={"elinewidth": 1.5}
        )
        # The value goes under the run's name: text beside a bar can run off the axes.
        ticks.append(f"{label}\n{mean:.1f}" + (f" ± {std:.1f}" if std is not None else ""))
    ax.set_yticks(range(len(runs)), ticks)
    ax.invert_yaxis()  # first run on top, as listed on the command line
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.grid(axis="y", visible=False)
    handles = [
        Patch(color="0.6", label="mean over the final greedy evaluation episodes"),
        Line2D([], [], color="k", marker="|", markersize=10, label="± 1 std"),
    ]
    finish(
        fig,
        ax,
        env_title(runs, "final return of the deployed policy"),
        "return (sum of rewards per episode)",
        "run (precision, seed)\nfinal return ± std",
        handles=handles,
    )
    return fig


def compression_over_training(runs: Sequence[Run]) -> Figure | None:
    """Compression ratio of each published policy (GST / iterative pruning runs)."""
    rows = [
        (i, run, label)
        for i, (run, label) in enumerate(zip(runs, run_labels(list(runs)), strict=True))
        if any(p.compression is not None for p in run.publishes)
    ]
    if not rows:
        return None
    fig, (ax,) = figure()
    for i, run, label in rows:
        pubs = [p for p in run.publishes if p.compression is not None]
        x = np.array([p.env_steps for p in pubs], float)
        curve(ax, x, np.array([100 * p.compression for p in pubs]), i, label)
    ax.xaxis.set_major_formatter(STEPS)
    ax.set_ylim(0, 100)
    finish(
        fig,
        ax,
        env_title(runs, "compression of each published policy"),
        "env steps when the policy was published (all actors)",
        "compression ratio (%)\n(1 - stored / dense kernel entries)",
    )
    return fig


def policy_bytes(runs: Sequence[Run]) -> Figure | None:
    """Payload bytes of every broadcast policy, on a log scale (what each board receives)."""
    rows = [
        (i, run, label)
        for i, (run, label) in enumerate(zip(runs, run_labels(list(runs)), strict=True))
        if run.publishes
    ]
    if not rows:
        return None
    fig, (ax,) = figure()
    for i, run, label in rows:
        total = sum(p.payload_bytes for p in run.publishes) / 1e6
        x = np.array([p.env_steps for p in run.publishes], float)
        y = np.array([p.payload_bytes / 1e3 for p in run.publishes])
        curve(ax, x, y, i, f"{label}: {total:.2f} MB in {len(run.publishes)} publishes")
    ax.xaxis.set_major_formatter(STEPS)
    ax.set_yscale("log")
    finish(
        fig,
        ax,
        env_title(runs, "policy payload per publish"),
        "env steps when the policy was published (all actors)",
        "payload on the wire (KB, log scale)",
    )
    return fig


# The report, in order. New plots go here (see the module docstring).
PLOTS: tuple[Plot, ...] = (
    Plot("return_vs_env_steps.png", "Return against env steps", return_vs_env_steps),
    Plot("return_vs_wall_time.png", "Return against wall time", return_vs_wall_time),
    Plot(
        "selection_scores.png",
        "Model selection: greedy return of published policies",
        selection_scores,
    ),
    Plot("final_return.png", "Final return (mean ± std)", final_return),
    Plot("compression.png", "Compression of the published policy", compression_over_training),
    Plot("policy_bytes.png", "Policy bytes on the wire", policy_bytes),
    Plot(
        "runtime_breakdown_fleet.png",
        "Runtime breakdown: the fleet's actor loops",
        cost_plots.fleet_breakdown,
    ),
    Plot(
        "runtime_breakdown_learner.png",
        "Runtime breakdown: the learner's main thread",
        cost_plots.learner_breakdown,
    ),
    Plot("energy.png", "Energy and carbon: learner host and fleet", cost_plots.energy),
)
