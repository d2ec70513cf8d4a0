"""What every report figure shares: an Agg canvas, a title naming the envs, axis labels
and a legend outside the axes (``plots.py`` and ``cost_plots.py`` draw on it)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from edge_rl.report.runs import Run

SPARSE_POINTS = 30  # fewer finite points than this: draw markers as well as the line

# 300000 -> "300k", 1500000 -> "1.5M": matplotlib's default is "3" with "1e5" in a corner.
STEPS = FuncFormatter(
    lambda x, _: (
        f"{x / 1e6:g}M" if abs(x) >= 1e6 else f"{x / 1e3:g}k" if abs(x) >= 1e3 else f"{x:g}"
    )
)


def figure(height: float = 4.8, ncols: int = 1) -> tuple[Figure, list[Axes]]:
    """An 8 in wide figure with ``ncols`` axes side by side (sharing y when more than one)."""
    fig = Figure(figsize=(8, height), dpi=150, layout="constrained")
    FigureCanvasAgg(fig)  # attaches itself: savefig renders PNG without any GUI backend
    axes = fig.subplots(1, ncols, sharey=True, squeeze=False)[0]
    for ax in axes:
        ax.grid(alpha=0.3)
    return fig, list(axes)


def curve(ax: Axes, x: np.ndarray, y: np.ndarray, i: int, label: str) -> None:
    # A run of a few seconds has a point or two: a bare line would draw nothing visible.
    marker = "o" if np.isfinite(y).sum() < SPARSE_POINTS else None
    ax.plot(x, y, color=f"C{i}", label=label, marker=marker, markersize=4)
    ax.set_xlim(left=0)  # training starts at 0; a short run's axis would otherwise float


def env_title(runs: Sequence[Run], what: str) -> str:
    envs = sorted({r.summary.env_id for r in runs})
    return f"{' / '.join(envs)}: {what}"


def finish(
    fig: Figure,
    ax: Axes,
    title: str,
    xlabel: str,
    ylabel: str,
    handles: Sequence[Artist] | None = None,
    ncols: int = 2,
) -> None:
    """Title, axis labels, and the legend below the axes in at most ``ncols`` columns."""
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    n = len(handles) if handles else len(ax.get_legend_handles_labels()[0])
    fig.legend(handles=handles, loc="outside lower center", ncols=min(n, ncols), frameon=False)
