"""``edge-rl report`` as a user runs it: PNGs and report.md from run directories."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from edge_rl.cli import main

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MIN_PNG_BYTES = 25_000  # 8x4.8 in at 150 dpi: a blank canvas ~5 KB, empty axes ~14 KB
ALL_PLOTS = ["return_vs_env_steps.png", "return_vs_wall_time.png", "selection_scores.png",
             "final_return.png"]  # fmt: skip


def _report(*args: str):
    return CliRunner().invoke(main, ["report", *args])


def _check_report(out: Path, stdout: str, runs: list[str], plots: list[str]) -> None:
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


def test_report_on_two_runs(make_run, tmp_path):
    a = make_run("a-int8", "int8", scores={1: 10.0, 2: 30.0})
    b = make_run("b-fp32", "fp32")
    out = tmp_path / "report"
    result = _report(str(a), str(b), "--out", str(out))
    assert result.exit_code == 0, result.output
    _check_report(out, result.output, ["a-int8", "b-fp32"], ALL_PLOTS)
    md = (out / "report.md").read_text()
    assert "| `a-int8` | CartPole-v1 | dqn | int8 | 0 | 6,000 | 3,000 | 1.0 min |" in md
    assert "| 180.0 ± 12.5 | 5,120 / 3,072 | 1 |" in md


def test_no_selection_scores_no_selection_plot(make_run, tmp_path):
    out = tmp_path / "report"
    result = _report(str(make_run("plain")), "--out", str(out))
    assert result.exit_code == 0, result.output
    plots = [p for p in ALL_PLOTS if p != "selection_scores.png"]
    _check_report(out, result.output, ["plain"], plots)
    assert "selection_scores.png" not in (out / "report.md").read_text()


def test_compression_and_bytes_plots_when_runs_log_their_publishes(make_run, tmp_path):
    pubs = [(v, 1000 * v, 90_000 - 5_000 * v, None) for v in range(1, 6)]
    dense = make_run("dense", "fp32", publishes=pubs)
    gst = make_run("gst", publishes=[(v, 1000 * v, 20_000, 0.69 + 0.01 * v) for v in range(1, 6)])
    out = tmp_path / "report"
    result = _report(str(dense), str(gst), "--out", str(out))
    assert result.exit_code == 0, result.output
    plots = [p for p in ALL_PLOTS if p != "selection_scores.png"]
    _check_report(out, result.output, ["dense", "gst"], [*plots, "compression.png",
                                                         "policy_bytes.png"])  # fmt: skip


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


@pytest.mark.slow
def test_report_on_a_real_tiny_run(tmp_path, mosquitto_available, cli, tiny_learn):
    # select_every=2 in the tiny flags makes the learner score policies: every plot is drawn.
    run = tmp_path / "cartpole-tiny"
    proc = cli("learn", "--config", "examples/cartpole_dqn.yaml", "--out", str(run),
               *tiny_learn("dqn"), "--set", "run=report-smoke")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = tmp_path / "report"
    proc = cli("report", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-4000:]
    # Every run logs its publishes: the bytes plot too (compression only when it is on).
    _check_report(out, proc.stdout, ["cartpole-tiny"], [*ALL_PLOTS, "policy_bytes.png"])
    assert "| CartPole-v1 | dqn | int8 |" in (out / "report.md").read_text()
