"""The live view's seams: log records while it is up, the terminal it claims, the result."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pexpect
import pyte
import pytest
from rich.console import Console

from edge_rl.telemetry.progress import (
    CurrentStderrHandler,
    LiveView,
    result_lines,
)
from edge_rl.types import ActorStatus
from tests.harness.paths import REPO

HEADER = re.compile(r"^\s*episodes\s+recent return\s+greedy\s+updates\s")

SUMMARY = {
    "env_id": "CartPole-v1",
    "algo": "dqn",
    "env_steps": 50_000,
    "updates": 12_345,
    "wall_s": 182.4,
    "final_eval_return": 187.25,
    "final_eval_return_std": 12.1,
    "eval_episodes": 10,
    "policy_version": 40,
    "policy_precision": "int8",
    "transitions_received": 50_000,
    "energy": {"learner": {"kwh": 1e-4}},
}


def _row(env_steps: int) -> dict:
    return {
        "env_steps": env_steps,
        "episodes": env_steps // 20,
        "recent_return": 21.5,
        "updates": env_steps // 4,
        "updates_per_s": 150.0,
        "policy_version": 2,
        "actors_online": 1,
        "transitions_rejected": 0,
        "transitions_duplicate": 0,
        "fleet_state": "running",
    }


def test_result_is_short_and_names_the_next_commands():
    lines = result_lines(SUMMARY, Path("runs/cp run"), total_s=201.0)
    text = "\n".join(lines)
    assert len(lines) <= 8 and max(map(len, lines)) <= 80
    assert "final return 187.2 ± 12.1 (10 greedy episodes, int8 in LiteRT)" in text
    assert "env steps 50,000, updates 12,345, policy v40" in text
    assert "wall time 3m 02s training, 3m 21s in all" in text
    assert "run directory runs/cp run (summary.json, learner.log; TensorBoard: tb/)" in text
    # Ready to paste: the run directory is quoted for the shell.
    assert "  edge-rl eval 'runs/cp run'/policy.tflite --env CartPole-v1 --episodes 10" in lines
    assert "  edge-rl report 'runs/cp run'" in lines
    assert "transitions_received" not in text and "kwh" not in text


def test_result_of_a_run_that_deployed_no_policy():
    summary = dict(
        SUMMARY,
        final_eval_return=None,
        final_eval_return_std=None,
        eval_episodes=0,
        policy_version=0,
        wall_s=41.04,
    )
    text = "\n".join(result_lines(summary, Path("r")))
    assert "final return: not evaluated (no policy was deployed)" in text
    assert "wall time 41.0 s training" in text and "in all" not in text
    assert "edge-rl eval" not in text and "edge-rl report r" in text


def test_result_of_a_run_whose_evaluation_a_signal_skipped():
    summary = dict(
        SUMMARY,
        final_eval_return=None,
        final_eval_return_std=None,
        final_eval_skipped=True,
        eval_episodes=0,
    )
    lines = result_lines(summary, Path("r"))
    text = "\n".join(lines)
    assert "final return: not evaluated (interrupted after the budget; see next:)" in text
    assert "  edge-rl eval r/policy.tflite --env CartPole-v1 --episodes 10" in lines


def _learner_energy(**learner) -> dict:
    return dict(SUMMARY, energy={"learner": learner})


def test_result_states_the_learners_energy_method_once():
    measured = _learner_energy(
        kwh=1e-4,
        method="codecarbon 3.3.2 offline, process tracking: CPU estimated as CPU load x TDP, "
        "RAM estimated from memory size (23.5 GB)",
        cpu_method="cpu_load",
        notes=["We saw that you have a Intel(R) Xeon(R) Processor but we don't know it."],
    )
    lines = result_lines(measured, Path("r"), total_s=201.0)
    energy = [line for line in lines if "energy" in line]
    assert energy == ["  learner energy by codecarbon: CPU estimated as CPU load x TDP"]
    assert max(map(len, lines)) <= 80 and lines.index(energy[0]) < lines.index("next:")
    text = "\n".join(lines)
    assert "Xeon" not in text and "kwh" not in text  # its warnings and figures: elsewhere
    rapl = _learner_energy(kwh=1e-4, method="codecarbon", cpu_method="intel_rapl")
    assert "  learner energy by codecarbon: CPU measured by RAPL energy counters" in result_lines(
        rapl, Path("r")
    )
    missing = _learner_energy(kwh=None, method="none", missing="energy.enabled is false")
    assert "  learner energy: not measured (summary.json says why)" in result_lines(
        missing, Path("r")
    )


def test_the_terminal_handler_leaves_codecarbons_records_out(monkeypatch):
    handler = CurrentStderrHandler()
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    for name in ("codecarbon", "edge_rl.telemetry.carbon"):
        record = logging.LogRecord(name, logging.WARNING, __file__, 1, "from %s", (name,), None)
        handler.handle(record)
    assert out.getvalue() == "from edge_rl.telemetry.carbon\n"


def test_handler_writes_to_the_stderr_of_the_moment(monkeypatch):
    handler = CurrentStderrHandler()
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "hello %s", ("a",), None)
    first, second = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    handler.emit(record)
    monkeypatch.setattr(sys, "stderr", second)
    handler.emit(record)
    assert first.getvalue() == second.getvalue() == "hello a\n"


def test_records_logged_while_the_view_is_up_print_above_it(monkeypatch):
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, height=60)
    log = logging.getLogger("edge_rl.test_live_view")
    monkeypatch.setattr(log, "propagate", False)
    log.addHandler(CurrentStderrHandler())
    try:
        actor = ActorStatus("sim-00", "running", board="rpi5", env_steps=10)
        with LiveView(1000, console=console) as view:
            assert view.interactive
            for i in range(1, 6):
                view.update(_row(100 * i), {"sim-00": actor})
                view._live.refresh()
                log.warning("record %d", i)
    finally:
        log.handlers.clear()
    screen = pyte.Screen(160, 60)
    pyte.Stream(screen).feed(out.getvalue().replace("\n", "\r\n"))
    lines = [line.rstrip() for line in screen.display]
    assert sum(bool(HEADER.match(line)) for line in lines) == 1, "\n".join(lines)
    records = [line for line in lines if line.startswith("record ")]
    assert records == [f"record {i}" for i in range(1, 6)], "\n".join(lines)
    # All of them above the view, which ends with its last frame.
    assert lines.index("record 5") < next(i for i, x in enumerate(lines) if HEADER.match(x))
    assert any("500/1000" in line for line in lines)


def _screen(view_calls) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, height=60)
    with LiveView(1000, console=console) as view:
        for args in view_calls:
            view.update(*args)
            view._live.refresh()
    screen = pyte.Screen(160, 60)
    pyte.Stream(screen).feed(out.getvalue().replace("\n", "\r\n"))
    return [line.rstrip() for line in screen.display]


def test_the_greedy_score_shows_beside_the_exploring_return():
    actor = ActorStatus("sim-00", "running", board="rpi5", env_steps=10)
    lines = _screen([(_row(100), {"sim-00": actor}, None)])
    i = next(i for i, x in enumerate(lines) if HEADER.match(x))
    assert lines[i + 1].split()[:3] == ["5", "21.5", "-"], lines[i + 1]  # none scored yet
    lines = _screen([(_row(100), {"sim-00": actor}, (12, 487.25))])
    i = next(i for i, x in enumerate(lines) if HEADER.match(x))
    assert lines[i + 1].split()[:4] == ["5", "21.5", "487.2", "(v12)"], lines[i + 1]


@pytest.mark.parametrize(
    "fleet, board, shown",
    [
        ("running", "paused", "running"),
        ("paused", "paused", "paused"),
        ("running", "offline", "offline"),
    ],
)
def test_a_board_between_two_grants_shows_the_run_state(fleet, board, shown):
    actor = ActorStatus("sim-00", board, board="rpi5", env_steps=10)
    lines = _screen([(_row(100) | {"fleet_state": fleet}, {"sim-00": actor}, None)])
    (row,) = [x.split() for x in lines if x.split()[:1] == ["sim-00"]]
    assert row[1] == shown, lines


CLAIM = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from edge_rl.telemetry.progress import claim_terminal
    print("claimed", claim_terminal(Path(sys.argv[1])), flush=True)
    os.write(2, b"native line\\n")  # as TensorFlow's C++ or LiteRT writes
    print("python line", file=sys.stderr, flush=True)
    """
)


def test_claimed_terminal_keeps_python_stderr_and_sends_native_lines_to_the_log(tmp_path):
    log_path = tmp_path / "learner.log"
    log_path.write_text("before\n")
    child = pexpect.spawn(sys.executable, ["-c", CLAIM, str(log_path)], cwd=str(REPO))
    terminal = child.read().decode()  # to EOF (pexpect's default 30 s timeout)
    child.close()
    assert child.exitstatus == 0, terminal
    assert "claimed True" in terminal and "python line" in terminal
    assert "native line" not in terminal
    assert log_path.read_text() == "before\nnative line\n"


def test_no_terminal_no_claim(tmp_path):
    log_path = tmp_path / "learner.log"
    proc = subprocess.run(
        [sys.executable, "-c", CLAIM, str(log_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert "claimed False" in proc.stdout
    assert proc.stderr == "native line\npython line\n" and not log_path.exists()
