"""``edge-rl report`` on a real run: the session's shared CartPole run (tests/harness/
shared_run.py), every plot, the cost plots and the tables."""

from __future__ import annotations

import pytest

from tests.harness.report import ALL_PLOTS, COST_PLOTS, check_report


@pytest.mark.slow
def test_report_on_a_real_tiny_run(tmp_path, cartpole_run, cli):
    # select_every=2 in the shared run's flags makes the learner score policies: every plot
    # is drawn.
    run = cartpole_run.run_dir
    assert run.name == "cartpole-tiny"
    out = tmp_path / "report"
    proc = cli("report", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-4000:]
    # Every run logs its publishes: the bytes plot too (compression only when it is on),
    # and its runtime breakdown and energy: the cost plots.
    plots = [*ALL_PLOTS, "policy_bytes.png", *COST_PLOTS]
    check_report(out, proc.stdout, ["cartpole-tiny"], plots)
    md = (out / "report.md").read_text()
    assert "| CartPole-v1 | dqn | int8 |" in md and "## Energy and fleet load" in md
