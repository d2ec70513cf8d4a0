"""Write a report directory: every figure in ``PLOTS`` that has data, then report.md."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from edge_rl.report import markdown
from edge_rl.report.plots import PLOTS, Plot
from edge_rl.report.runs import Run


def write_report(runs: Sequence[Run], out: Path, plots: Sequence[Plot] = PLOTS) -> list[Path]:
    """Save the PNGs and ``report.md`` in ``out`` (created; same-named files are replaced).

    Returns the written paths, figures first. A plot whose data no run has is skipped,
    not drawn empty.
    """
    if not runs:
        raise ValueError("a report needs at least one run")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    drawn: list[Plot] = []
    for plot in plots:
        fig = plot.make(runs)
        if fig is None:
            continue
        path = out / plot.filename
        fig.savefig(path)
        written.append(path)
        drawn.append(plot)
    md = out / "report.md"
    md.write_text(markdown.render(runs, drawn))
    written.append(md)
    return written
