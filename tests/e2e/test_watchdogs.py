"""The board's watchdogs with real processes (docs/robots.md): a real `edge-rl learn`, a
Mosquitto of the test's own and a real `edge-rl actor` whose env (a real Pendulum) logs
every action it gets. The broker killed by PID, the learner killed by SIGKILL: the env gets
the safe action (zero, exactly) within ``stale_after_s`` plus one control period of the
kill, and nothing else after it. The emergency stop (SIGUSR2) holds with the broker down
and when it comes back, until it is released on the board.

What holds is read from the env's own log (when each action reached it), not from the
board's report of itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.learn import learn_argv
from tests.harness.paths import REPO
from tests.harness.robot_envs import read_actions
from tests.harness.waits import bound, exit_code, wait_for

RUN = "watchdogs"
STALE_S = 3.0  # well above the learner's 0.25 s heartbeat, on a loaded machine too
PERIOD_S = 0.05  # the board's control period: 20 Hz
# Random exploration within [-1.5, 1.5] is never exactly 0.0: the safe action is.
BOARD = f"""board: test-robot
status_interval_s: 0.2
control_hz: {1 / PERIOD_S}
safety:
  action_low: -1.5
  action_high: 1.5
  stale_after_s: {STALE_S}
  on_stale: zero
  estop_file: estop
"""
# A learner that grants credit and never trains in the test's time (learning_starts).
LEARNER = [
    "--fleet",
    "0",
    "--set",
    f"run={RUN}",
    "--set",
    "total_env_steps=500000",
    "--set",
    "learning_starts=400000",
    "--set",
    "replay_capacity=500000",
    "--set",
    "td3.actor_hidden=[32, 32]",
    "--set",
    "td3.critic_hidden=[32, 32]",
]


@pytest.fixture
def robot(tmp_path, fresh_mosquitto, setpriv_available):
    """A learner and one board stepping under its credit: ``(learner, actor, actions file,
    board dir, broker)``; the processes are killed by PID at the end."""
    url = fresh_mosquitto.url
    run = tmp_path / "run"
    board_dir = tmp_path / "board"
    board_dir.mkdir()
    (board_dir / "robot.yaml").write_text(BOARD)
    actions = tmp_path / "actions.log"
    argv = learn_argv("examples/pendulum_td3.yaml", run, "--broker", url, *LEARNER)
    learner = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    actor = None
    try:
        wait_for(
            lambda: (run / "signing.pub").exists() or learner.poll() is not None,
            120,
            "the learner's signing.pub",
        )
        actor = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edge_rl.cli",
                "actor",
                "--board",
                str(board_dir / "robot.yaml"),
                "--id",
                "robot-0",
                "--run",
                RUN,
                "--env",
                "tests.harness.robot_envs:pendulum",
                "--broker",
                url,
                "--policy-key",
                str(run / "signing.pub"),
            ],
            cwd=REPO,
            env={**os.environ, "EDGE_RL_TEST_ACTIONS": str(actions)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_for(
            lambda: actions.exists() and sum(a != [0.0] for _, a in read_actions(actions)) >= 100,
            120,
            "the board's first 100 exploring env steps under the learner's credit",
        )
        yield learner, actor, actions, board_dir, fresh_mosquitto
    finally:
        for proc in (actor, learner):
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(30)


def _first_safe_after(actions: Path, t0: float) -> float | None:
    """When the env first got the safe action (0.0) after ``t0``, or None."""
    return next((t for t, a in read_actions(actions) if t > t0 and a == [0.0]), None)


def _held_safe(actions: Path, since: float) -> bool:
    """Every action the env got from ``since`` on was the safe one."""
    return all(a == [0.0] for t, a in read_actions(actions) if t >= since)


def _check_safe_within_bound(actions: Path, t_kill: float, what: str) -> float:
    # From its first exploring step to the kill, no safe action: no false alarm. (Before
    # it, the board waited for its broker and credit in the safe state.)
    steps = [a for t, a in read_actions(actions) if t < t_kill]
    acting = next(i for i, a in enumerate(steps) if a != [0.0])
    assert [0.0] not in steps[acting:], "a safe action before the fault: a false alarm"
    wait_for(lambda: _first_safe_after(actions, t_kill) is not None, 30, f"safe action ({what})")
    first = _first_safe_after(actions, t_kill)
    delay = first - t_kill
    load = os.getloadavg()[0]
    print(f"\n{what}: safe action {delay * 1000:.0f} ms after the kill (load {load:.2f})")
    assert delay <= bound(STALE_S + PERIOD_S), f"{what}: {delay:.3f} s"
    wait_for(  # a few periods of the fault, then read them
        lambda: sum(t > first for t, _ in read_actions(actions)) >= 5, 30, "five more periods"
    )
    assert _held_safe(actions, first), f"{what}: a policy action after the safe one"
    return delay


def test_broker_killed_by_pid_gives_the_safe_action_within_stale_after_s(robot):
    learner, actor, actions, _, broker = robot
    t_kill = time.monotonic()
    os.kill(broker.pid, signal.SIGKILL)  # by PID: the broker only
    _check_safe_within_bound(actions, t_kill, "broker killed")
    assert actor.poll() is None and learner.poll() is None


def test_learner_killed_by_sigkill_gives_the_safe_action_within_stale_after_s(robot):
    learner, actor, actions, _, _ = robot
    t_kill = time.monotonic()
    os.kill(learner.pid, signal.SIGKILL)
    exit_code(learner, 30, "the learner after kill -9")
    _check_safe_within_bound(actions, t_kill, "learner killed")
    assert actor.poll() is None


def test_the_emergency_stop_holds_with_the_broker_down_until_released_on_the_board(robot):
    learner, actor, actions, board_dir, broker = robot
    estop = board_dir / "estop"
    broker.kill()  # the network is down: only the board itself can stop it now
    t_sig = time.monotonic()
    os.kill(actor.pid, signal.SIGUSR2)
    wait_for(estop.exists, 10, "the e-stop file SIGUSR2 writes")
    wait_for(lambda: _first_safe_after(actions, t_sig) is not None, 30, "the safe action")
    broker.start()  # the network comes back, the learner with it: still stopped
    t_back = time.monotonic()
    # The board steps on (the safe action) until the learner's control and credit have had
    # longer than stale_after_s to flow again: a release by the network would show by then.
    wait_for(
        lambda: any(t > t_back + STALE_S + 1.0 for t, _ in read_actions(actions)),
        STALE_S + 30,
        "the board stepping past the learner's return",
    )
    assert _held_safe(actions, _first_safe_after(actions, t_sig)), "released by the network"
    assert any(t > t_back for t, _ in read_actions(actions)), "the board stopped stepping"
    estop.unlink()  # the local release
    t_rel = time.monotonic()
    wait_for(
        lambda: any(t > t_rel and a != [0.0] for t, a in read_actions(actions)),
        60,
        "the board acting again after the release",
    )
    assert actor.poll() is None and learner.poll() is None
