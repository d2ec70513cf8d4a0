"""Every figure is readable on its own: title, labelled axes, a legend naming each run."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.report.plots import (
    PLOTS,
    compression_over_training,
    final_return,
    policy_bytes,
    return_vs_env_steps,
    return_vs_wall_time,
    selection_scores,
)
from edge_rl.report.runs import load_run


@pytest.fixture
def two_runs(make_run):
    return [
        load_run(make_run("q-int8", "int8", 0, scores={1: 20.0, 3: 90.0, 5: 150.0})),
        load_run(make_run("q-fp32", "fp32", 0, scores={2: 40.0, 4: 120.0})),
    ]


def _readable(fig) -> tuple[str, str, str, list[str]]:
    """Title, x label, y label and legend texts; fails on any that is missing."""
    (ax,) = fig.axes
    legend_texts = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel() and legend_texts
    return ax.get_title(), ax.get_xlabel(), ax.get_ylabel(), legend_texts


@pytest.mark.parametrize(
    "plot, xlabel, x_of",
    [
        (return_vs_env_steps, "env steps", lambda m: m.env_steps),
        (return_vs_wall_time, "(min)", lambda m: m.wall_s / 60),
    ],
)
def test_return_curves_overlay_one_line_per_run(two_runs, plot, xlabel, x_of):
    fig = plot(two_runs)
    title, x, y, legend = _readable(fig)
    assert "CartPole-v1" in title and xlabel in x and "return" in y
    assert legend == ["q-int8 (int8, seed 0)", "q-fp32 (fp32, seed 0)"]
    lines = fig.axes[0].get_lines()
    assert len(lines) == 2
    for line, run in zip(lines, two_runs, strict=True):
        np.testing.assert_array_equal(line.get_xdata(), x_of(run.metrics))
        np.testing.assert_array_equal(line.get_ydata(), run.metrics.recent_return)


def test_selection_scores_against_env_steps(two_runs):
    fig = selection_scores(two_runs)
    _, x, _, legend = _readable(fig)
    assert "env steps" in x and len(legend) == 2
    first = fig.axes[0].get_lines()[0]  # versions 1, 3, 5 appear at rows 10, 30, 50
    assert list(first.get_xdata()) == [1000, 3000, 5000]
    assert list(first.get_ydata()) == [20.0, 90.0, 150.0]


def test_selection_scores_fall_back_to_versions_when_steps_unknown(make_run):
    runs = [load_run(make_run("late", scores={1: 5.0, 99: 9.0}))]  # v99 never in metrics
    fig = selection_scores(runs)
    _, x, _, _ = _readable(fig)
    assert x == "policy version" and list(fig.axes[0].get_lines()[0].get_xdata()) == [1, 99]


def test_selection_scores_are_not_joined_across_an_unscored_policy(make_run):
    # every 2nd policy scored; v6 left unscored (it could not make the top five)
    runs = [load_run(make_run("gap", scores={2: 10.0, 4: 30.0, 8: 80.0, 10: 90.0}, rows=120))]
    (line,) = selection_scores(runs).axes[0].get_lines()
    x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
    assert list(y[:2]) == [10.0, 30.0] and np.isnan(y[2]) and list(y[3:]) == [80.0, 90.0]
    assert np.isnan(x[2]) and list(x[[0, 1, 3, 4]]) == [2000, 4000, 8000, 10000]


def test_selection_scores_only_runs_that_have_them(make_run):
    runs = [load_run(make_run("none")), load_run(make_run("some", scores={2: 7.0}))]
    fig = selection_scores(runs)
    (line,) = fig.axes[0].get_lines()
    assert line.get_label() == "some (int8, seed 0)" and line.get_color() == "C1"  # its colour
    assert selection_scores(runs[:1]) is None  # no run scored: no figure at all


def test_final_return_bars_with_std(make_run):
    runs = [
        load_run(make_run("a", final=(180.0, 12.5))),
        load_run(make_run("b", "fp32", final=(-150.0, 30.0))),
        load_run(make_run("c", final=(None, None))),
    ]
    fig = final_return(runs)
    _, x, y, legend = _readable(fig)
    ax = fig.axes[0]
    assert [p.get_width() for p in ax.patches] == [180.0, -150.0]  # c never evaluated
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "a (int8, seed 0)\n180.0 ± 12.5",
        "b (fp32, seed 0)\n-150.0 ± 30.0",
        "c (int8, seed 0)\nnot evaluated",
    ]
    assert "return" in x and "run" in y and "± 1 std" in legend


def test_plot_files_are_distinct():
    names = [p.filename for p in PLOTS]
    assert len(set(names)) == len(names) and all(n.endswith(".png") for n in names)


def test_compression_plot_has_only_the_compressed_runs(make_run):
    dense = load_run(make_run("dense", "fp32", publishes=[(1, 100, 250_000, None)]))
    gst = load_run(make_run("gst", publishes=[(1, 100, 20_000, 0.69), (2, 200, 18_000, 0.75)]))
    fig = compression_over_training([dense, gst])
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.get_lines()] == ["gst (int8, seed 0)"]
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [69.0, 75.0])
    assert compression_over_training([dense]) is None


def test_policy_bytes_plot_totals_every_publish(make_run):
    gst = load_run(make_run("gst", publishes=[(1, 100, 20_000, 0.69), (2, 200, 18_000, 0.75)]))
    fig = policy_bytes([gst])
    (line,) = fig.axes[0].get_lines()
    np.testing.assert_allclose(line.get_ydata(), [20.0, 18.0])
    assert line.get_label() == "gst (int8, seed 0): 0.04 MB in 2 publishes"
    assert fig.axes[0].get_yscale() == "log"
    assert policy_bytes([load_run(make_run("old"))]) is None
