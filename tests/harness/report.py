"""What every ``edge-rl report`` must leave, checked the same way on synthetic and real runs."""

from __future__ import annotations

from pathlib import Path

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MIN_PNG_BYTES = 25_000  # 8x4.8 in at 150 dpi: a blank canvas ~5 KB, empty axes ~14 KB
ALL_PLOTS = [
    "return_vs_env_steps.png",
    "return_vs_wall_time.png",
    "selection_scores.png",
    "final_return.png",
]
# Drawn when a run's summary.json has runtime_breakdown and energy.
COST_PLOTS = ["runtime_breakdown_fleet.png", "runtime_breakdown_learner.png", "energy.png"]


def check_report(out: Path, stdout: str, runs: list[str], plots: list[str]) -> None:
    """``edge-rl report``'s output in ``out``: exactly ``plots``, each a real PNG, and
    report.md naming every run and linking every plot; stdout lists the files written."""
    assert [Path(line) for line in stdout.split()] == [out / p for p in plots] + [out / "report.md"]
    assert sorted(p.name for p in out.glob("*.png")) == sorted(plots)
    for name in plots:
        data = (out / name).read_bytes()
        assert data.startswith(PNG_SIGNATURE) and len(data) > MIN_PNG_BYTES, name
    md = (out / "report.md").read_text()
    for run in runs:
        assert f"| `{run}` |" in md
    for name in plots:
        assert f"]({name})" in md
