"""``edge-rl report`` as a user runs it: PNGs and report.md from run directories."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from edge_rl.cli.main import main
from tests.harness.report import ALL_PLOTS, COST_PLOTS, check_report

FLEET = {
    "env_step": 10.0,
    "inference": 5.0,
    "exploration": 5.0,
    "publish": 20.0,
    "emulation": 10.0,
    "idle": 150.0,
    "wall": 200.0,
}
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


def _report(*args: str):
    return CliRunner().invoke(main, ["report", *args])


def test_report_on_two_runs(make_run, tmp_path):
    a = make_run("a-int8", "int8", scores={1: 10.0, 2: 30.0})
    b = make_run("b-fp32", "fp32")
    out = tmp_path / "report"
    result = _report(str(a), str(b), "--out", str(out))
    assert result.exit_code == 0, result.output
    check_report(out, result.output, ["a-int8", "b-fp32"], ALL_PLOTS)
    md = (out / "report.md").read_text()
    assert "| `a-int8` | CartPole-v1 | dqn | int8 | 0 | 6,000 | 3,000 | 1.0 min |" in md
    assert "| 180.0 ± 12.5 | 5,120 / 3,072 | 1 |" in md
    assert "Energy" not in md  # neither run recorded what it cost


def test_cost_plots_and_table_when_runs_record_them(make_run, tmp_path):
    costs = make_run("costs", breakdown=(FLEET, MAIN), energy=(0.0032, 0.0008, 400.0))
    old = make_run("old", "fp32")
    out = tmp_path / "report"
    result = _report(str(costs), str(old), "--out", str(out))
    assert result.exit_code == 0, result.output
    plots = [p for p in ALL_PLOTS if p != "selection_scores.png"]
    check_report(out, result.output, ["costs", "old"], [*plots, *COST_PLOTS])
    md = (out / "report.md").read_text()
    table = md[md.index("## Energy and fleet load") :].splitlines()
    assert table[2].startswith("| run | learner host kWh | fleet kWh |")
    # kWh, kg CO2e (kWh x 400 g/kWh), the grid, and 25 % of the loops' wall time not idle
    assert table[4] == "| `costs` | 0.0032 | 0.0008 | 0.00128 | 0.00032 | 400 (USA) | 25.0 % |"
    assert md.count("| `old` |") == 1  # in the runs table only: it recorded neither
    assert "- fleet: power model (rpi5: 2.8 W idle, 9.7 W busy), 1 actor priced" in md
    assert "- no energy for actor sim-01: no runtime breakdown in its status" in md


def test_no_selection_scores_no_selection_plot(make_run, tmp_path):
    out = tmp_path / "report"
    result = _report(str(make_run("plain")), "--out", str(out))
    assert result.exit_code == 0, result.output
    plots = [p for p in ALL_PLOTS if p != "selection_scores.png"]
    check_report(out, result.output, ["plain"], plots)
    assert "selection_scores.png" not in (out / "report.md").read_text()


def test_compression_and_bytes_plots_when_runs_log_their_publishes(make_run, tmp_path):
    pubs = [(v, 1000 * v, 90_000 - 5_000 * v, None) for v in range(1, 6)]
    dense = make_run("dense", "fp32", publishes=pubs)
    gst = make_run("gst", publishes=[(v, 1000 * v, 20_000, 0.69 + 0.01 * v) for v in range(1, 6)])
    out = tmp_path / "report"
    result = _report(str(dense), str(gst), "--out", str(out))
    assert result.exit_code == 0, result.output
    plots = [p for p in ALL_PLOTS if p != "selection_scores.png"]
    check_report(
        out, result.output, ["dense", "gst"], [*plots, "compression.png", "policy_bytes.png"]
    )


def test_default_out_is_report_in_the_working_directory(make_run, tmp_path, monkeypatch):
    run = make_run("r")
    monkeypatch.chdir(tmp_path)
    result = _report(str(run))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "report" / "report.md").is_file()


@pytest.mark.parametrize(
    "break_it, message",
    [
        (lambda run: (run / "summary.json").unlink(), "summary.json: missing"),
        (lambda run: (run / "metrics.csv").write_text("wall_s\n"), "no column"),
    ],
)
def test_bad_run_directory_is_a_clear_error(make_run, tmp_path, break_it, message):
    good, bad = make_run("good"), make_run("bad")
    break_it(bad)
    out = tmp_path / "report"
    result = _report(str(good), str(bad), "--out", str(out))
    assert result.exit_code == 1
    assert f"Error: {bad}" in result.output and message in result.output
    assert not out.exists()  # nothing half-written


def test_missing_run_directory(tmp_path):
    result = _report(str(tmp_path / "nope"))
    assert result.exit_code != 0 and str(tmp_path / "nope") in result.output
