"""``report.md``: one table row per run, then the figures that were written."""

from __future__ import annotations

from collections.abc import Sequence

from edge_rl.report.plots import Plot
from edge_rl.report.runs import Run, RunSummary

NONE = "–"  # a value the run did not record

COLUMNS = ("run", "env", "algo", "precision", "seed", "env steps", "updates", "wall time",
           "final return ± std", "policy bytes / payload bytes", "exports failed")  # fmt: skip


def render(runs: Sequence[Run], plots: Sequence[Plot]) -> str:
    """The markdown text; ``plots`` are the figures written next to it (PNG links)."""
    lines = ["# edge-rl report", "", "## Runs", "", _row(COLUMNS), _row(["---"] * len(COLUMNS))]
    lines += [_row(_cells(run)) for run in runs]
    lines += [
        "",
        "Final return: greedy evaluation of the deployed policy at the end of the run "
        "(mean ± std over its episodes). Policy bytes: the deployed model; payload bytes: "
        "what one policy publish sends (compressed).",
        "",
        "Run directories: " + ", ".join(f"`{run.path}`" for run in runs) + ".",
    ]
    for plot in plots:
        lines += ["", f"## {plot.caption}", "", f"![{plot.caption}]({plot.filename})"]
    return "\n".join(lines) + "\n"


def _cells(run: Run) -> list[str]:
    s = run.summary
    return [
        f"`{run.name}`",
        s.env_id,
        s.algo,
        s.policy_precision or NONE,
        str(s.seed),
        f"{s.env_steps:,}",
        f"{s.updates:,}",
        f"{s.wall_s / 60:.1f} min",
        _return(s),
        f"{_int(s.policy_model_bytes)} / {_int(s.policy_payload_bytes)}",
        _int(s.exports_failed),
    ]


def _return(s: RunSummary) -> str:
    if s.final_eval_return is None:
        return NONE
    std = NONE if s.final_eval_return_std is None else f"{s.final_eval_return_std:.1f}"
    return f"{s.final_eval_return:.1f} ± {std}"


def _int(x: int | None) -> str:
    return NONE if x is None else f"{x:,}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
