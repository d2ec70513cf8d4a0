"""``report.md``: one table row per run, what the runs cost (when they recorded it), then
the figures that were written."""

from __future__ import annotations

from collections.abc import Sequence

from edge_rl.report.costs import Energy
from edge_rl.report.plots import Plot
from edge_rl.report.runs import BoardSafety, Run, RunSummary

NONE = "–"  # a value the run did not record

COLUMNS = (
    "run",
    "env",
    "algo",
    "precision",
    "seed",
    "env steps",
    "updates",
    "wall time",
    "final return ± std",
    "policy bytes / payload bytes",
    "exports failed",
)
COST_COLUMNS = (
    "run",
    "learner host kWh",
    "fleet kWh",
    "learner host kg CO2e",
    "fleet kg CO2e",
    "grid g CO2e/kWh",
    "fleet busy",
)


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
    lines += _costs(runs)
    lines += _boards(runs)
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


def _costs(runs: Sequence[Run]) -> list[str]:
    """The energy and fleet-load table, for the runs that recorded either."""
    rows = [r for r in runs if r.summary.energy or r.summary.runtime_breakdown]
    if not rows:
        return []
    lines = [
        "",
        "## Energy and fleet load",
        "",
        _row(COST_COLUMNS),
        _row(["---"] * len(COST_COLUMNS)),
    ]
    lines += [_row(_cost_cells(run)) for run in rows]
    lines += [
        "",
        "Learner host: measured by codecarbon; fleet: each actor's board priced by its power "
        "model on the actor's busy and idle seconds; kg CO2e = kWh × the grid's carbon "
        "intensity. Fleet busy: the share of the actor loops' wall time (all actors summed) "
        "not idle.",
    ]
    notes = _energy_notes([(run.name, run.summary.energy) for run in rows if run.summary.energy])
    return lines + ([""] + notes if notes else [])


BOARD_COLUMNS = (
    "run",
    "board",
    "shield (reason: count)",
    "control periods",
    "deadline misses",
    "jitter p50 / p99 ms",
)


def _boards(runs: Sequence[Run]) -> list[str]:
    """The boards' safety shields and control rates, for the boards that had either."""
    rows = [
        [f"`{run.name}`", a, _reasons(b.safety), f"{b.control_periods:,}", _misses(b)]
        + [f"{b.jitter_p50_ms:.2f} / {b.jitter_p99_ms:.2f}"]
        for run in runs
        for a, b in run.summary.boards.items()
        if b.shown
    ]
    if not rows:
        return []
    return [
        "",
        "## Boards: safety shield and control rate",
        "",
        _row(BOARD_COLUMNS),
        _row(["---"] * len(BOARD_COLUMNS)),
        *[_row(r) for r in rows],
        "",
        "Shield: actions each board's shield changed, and safe actions its watchdogs gave, "
        "by reason (docs/robots.md). Deadline misses: control periods in which no step "
        "started (% of all periods); jitter: how late steps started after their deadlines.",
    ]


def _reasons(safety: dict[str, int]) -> str:
    return ", ".join(f"{k}: {n:,}" for k, n in sorted(safety.items())) or NONE


def _misses(b: BoardSafety) -> str:
    if not b.control_periods:
        return NONE
    share = b.deadline_misses / (b.control_periods + b.deadline_misses)  # of all periods
    return f"{b.deadline_misses:,} ({100 * share:.2f} %)"


def _cost_cells(run: Run) -> list[str]:
    e, b = run.summary.energy, run.summary.runtime_breakdown
    fleet = b.fleet_total if b else None
    return [
        f"`{run.name}`",
        _sig(e and e.learner.kwh),
        _sig(e and e.fleet.kwh),
        _sig(e and e.learner.kg_co2e),
        _sig(e and e.fleet.kg_co2e),
        NONE if e is None or e.g_co2e_per_kwh is None else f"{e.g_co2e_per_kwh:.0f} ({e.country})",
        NONE if fleet is None or fleet.wall <= 0 else f"{fleet.busy_percent():.1f} %",
    ]


def _energy_notes(energies: list[tuple[str, Energy]]) -> list[str]:
    """How each figure was obtained, once per method; runs named when methods differ."""
    methods: dict[str, list[str]] = {}
    for name, e in energies:
        grid = (
            f"{e.g_co2e_per_kwh:g} g CO2e/kWh"
            if e.g_co2e_per_kwh is not None
            else "no carbon intensity"
        )
        for line in (
            f"learner host: {e.learner.method}",
            f"fleet: {e.fleet.method}, {_count(e.fleet.actors, 'actor')} priced",
            f"grid ({e.country}): {grid}, {e.intensity_source}",
        ):
            methods.setdefault(line, []).append(name)
        if e.learner.missing:
            methods.setdefault(f"learner host not measured: {e.learner.missing}", []).append(name)
        for actor, why in e.fleet.missing.items():
            methods.setdefault(f"no energy for actor {actor}: {why}", []).append(name)
    notes = []
    for line, names in methods.items():
        runs = "" if len(names) == len(energies) else f" ({', '.join(f'`{n}`' for n in names)})"
        notes.append(f"- {line}{runs}")
    return notes


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _sig(x: float | None) -> str:
    """3 significant digits: a tiny run's energy is ~1e-5 kWh, a long one's ~1 kWh."""
    return NONE if x is None else f"{x:.3g}"


def _return(s: RunSummary) -> str:
    if s.final_eval_return is None:
        return NONE
    std = NONE if s.final_eval_return_std is None else f"{s.final_eval_return_std:.1f}"
    return f"{s.final_eval_return:.1f} ± {std}"


def _int(x: int | None) -> str:
    return NONE if x is None else f"{x:,}"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
