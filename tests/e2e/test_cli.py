"""The `edge-rl` command as a user runs it: learn (embedded broker + fleet), eval, bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from tests.harness.learn import learn_argv
from tests.harness.paths import REPO
from tests.harness.procs import alive, children, survivors
from tests.harness.waits import wait_for

ROOT = REPO


@pytest.mark.slow
def test_learn_with_embedded_broker_and_fleet_then_eval(cartpole_run, cli):
    run = cartpole_run.run_dir  # examples/cartpole_dqn.yaml, --fleet 2 --board rpi5
    summary = json.loads((run / "summary.json").read_text())
    for key in (
        "env_id",
        "algo",
        "env_steps",
        "updates",
        "wall_s",
        "final_eval_return",
        "policy_version",
        "transitions_received",
        "transitions_rejected",
        "transitions_duplicate",
    ):
        assert key in summary, key
    assert summary["env_steps"] >= cartpole_run.budget and summary["policy_version"] >= 1
    assert summary["eval_episodes"] == 10 and summary["final_eval_return"] is not None
    assert set(summary["actors"]) == {"sim-00", "sim-01"}
    assert (run / "fleet" / "sim-00.log").exists() and (run / "config.yaml").exists()
    # codecarbon's warnings (that region; on a host whose CPU it does not know, five more)
    # are in learner.log and not on stderr; the result states its method once.
    notes = summary["energy"]["learner"]["notes"]
    assert any("Regional emissions retrieval failed" in n for n in notes), notes
    learner_log, stderr = (
        " ".join(s.split()) for s in ((run / "learner.log").read_text(), cartpole_run.stderr)
    )
    for note in notes:
        assert note in learner_log and note not in stderr, note
    assert "WARNING codecarbon: " in learner_log
    for mark in ("[codecarbon", "WARNING codecarbon", "ERROR codecarbon"):
        assert mark not in stderr, cartpole_run.stderr[-4000:]
    stdout = cartpole_run.stdout
    assert stdout.count("learner energy by codecarbon: CPU ") == 1, stdout

    ev = cli("eval", str(run / "policy.tflite"), "--env", "CartPole-v1", "--episodes", "3")
    assert ev.returncode == 0, ev.stderr[-2000:]
    result = json.loads(ev.stdout)
    assert len(result["returns"]) == 3 and result["mean_return"] > 0

    wrong = cli("eval", str(run / "policy.tflite"), "--env", "Acrobot-v1")
    assert wrong.returncode != 0 and "CartPole-v1" in wrong.stderr


def _learn_two_boards(run, total_env_steps: int, *flags: str) -> subprocess.Popen:
    """``edge-rl learn`` on the CartPole example with 2 simulated Pi 5 boards, in a
    session of its own (a killpg reaches no test)."""
    return subprocess.Popen(
        learn_argv(
            "examples/cartpole_dqn.yaml",
            run,
            "--fleet",
            "2",
            "--board",
            "rpi5",
            "--set",
            f"total_env_steps={total_env_steps}",
            "--set",
            "dqn.hidden=[32, 32]",
            *flags,
        ),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _leave_nothing(proc: subprocess.Popen, kids: list[int]) -> None:
    """The learner and every process it started, killed by PID if still there."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for c in kids + children(proc.pid):  # a failed run must not leave orphans
        if alive(c):
            os.kill(c, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl-c"])
def test_a_signal_checkpoints_and_ends_a_run_without_orphans(tmp_path, mosquitto_available, sig):
    """SIGTERM to the learner's PID, or SIGINT to its whole process group as a terminal's
    Ctrl-C sends it: the broker and actors (sessions of their own) do not get it, so the
    learner checkpoints, stops the fleet, and writes its summary with every actor stopped."""
    run = tmp_path / "run"
    proc = _learn_two_boards(run, 10_000_000, *(["--json"] if sig == signal.SIGTERM else []))
    kids: list[int] = []
    try:

        def stepping() -> bool:
            metrics = run / "metrics.csv"
            rows = metrics.read_text().splitlines()[1:] if metrics.exists() else []
            return bool(rows) and int(rows[-1].split(",")[1]) > 0  # env_steps

        wait_for(lambda: proc.poll() is not None or stepping(), 120, "the actors stepping", 0.5)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        kids = children(proc.pid)
        assert len(kids) >= 3, kids  # two actors and the broker
        if sig == signal.SIGTERM:
            proc.send_signal(sig)
        else:
            os.killpg(proc.pid, sig)  # the group: the learner and whatever shares it
        out, err = proc.communicate(timeout=90)
        # Interrupted, not failed: a checkpoint, then the fleet paused, then summary.json.
        assert proc.returncode == 128 + sig, err[-3000:]
        summary = json.loads((run / "summary.json").read_text())
        # --json (the SIGTERM case) prints it, interrupted or not; without it, nothing.
        if sig == signal.SIGTERM:
            assert json.loads(out) == summary, out[-2000:]
        else:
            assert '"run_id"' not in out, out[-2000:]
        assert summary["interrupted"] is True and summary["final_eval_return"] is None
        states = {a["state"] for a in summary["actors"].values()}
        # Told by the learner, not killed.
        assert states == {"paused"}, (summary["actors"], err[-3000:])
        header = json.loads((run / "checkpoint" / "header.json").read_text())
        assert header["env_steps"] == summary["env_steps"] > 0 and not header["finished"]
        assert "--resume" in err
        left = survivors(kids, within_s=30)
        assert not left, (left, err[-3000:])
    finally:
        _leave_nothing(proc, kids)


@pytest.mark.slow
def test_a_sigterm_after_the_budget_still_finishes_the_run(tmp_path, mosquitto_available):
    """SIGTERM to the learner's PID once learner.log says the budget is met: the run
    finishes (exit 0, summary.json, its boards serving, a finished checkpoint) rather than
    ending with 130 and no summary; the signal skips the final evaluation unless it came
    after the evaluation began (docs/reliability.md)."""
    run = tmp_path / "run"
    proc = _learn_two_boards(run, 3000)
    kids: list[int] = []
    try:

        def budget_met() -> bool:
            log = run / "learner.log"
            return log.exists() and "budget met:" in log.read_text(errors="replace")

        wait_for(lambda: proc.poll() is not None or budget_met(), 180, "the budget met", 0.05)
        assert proc.poll() is None, proc.stderr.read()[-3000:]
        kids = children(proc.pid)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err[-3000:]
        summary = json.loads((run / "summary.json").read_text())
        assert summary["interrupted"] is False and summary["env_steps"] >= 3000
        if summary["final_eval_skipped"]:
            assert summary["final_eval_return"] is None and "not evaluated" in out
        else:  # the signal came while the evaluation ran: it ended
            assert summary["final_eval_return"] is not None
        assert {a["state"] for a in summary["actors"].values()} == {"serving"}, err[-3000:]
        assert json.loads((run / "checkpoint" / "header.json").read_text())["finished"]
        left = survivors(kids, within_s=30)
        assert not left, (left, err[-3000:])
    finally:
        _leave_nothing(proc, kids)


@pytest.mark.slow
def test_learn_on_the_embedded_python_broker(tmp_path, cli):
    # The fallback for machines without Mosquitto: amqtt speaks MQTT 3.1.1 only.
    run = tmp_path / "run"
    proc = cli(
        "learn",
        "--config",
        "examples/cartpole_dqn.yaml",
        "--out",
        str(run),
        "--embedded-broker",
        "amqtt",
        "--fleet",
        "1",
        "--board",
        "rpi5",
        "--set",
        "total_env_steps=800",
        "--set",
        "learning_starts=300",
        "--set",
        "dqn.hidden=[16]",
        "--set",
        "export.every_updates=50",
        "--set",
        "export.min_greedy_agreement=0.0",
        "--set",
        "select_every=0",
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["env_steps"] >= 800 and summary["policy_version"] >= 1
    assert summary["actors"]["sim-00"]["transitions_sent"] == summary["transitions_received"]
    assert list(run.glob("amqtt-*.log"))


@pytest.mark.parametrize(
    "args,message",
    [
        (["learn", "--config", "examples/cartpole_dqn.yaml", "--set", "dqn.gama=0.9"], "gama"),
        (
            ["learn", "--config", "examples/cartpole_dqn.yaml", "--set", "replay_ratio=-1"],
            "replay_ratio",
        ),
        (["learn", "--config", "examples/cartpole_dqn.yaml", "--set", "nokey"], "KEY=VALUE"),
        (["learn", "--config", "examples/cartpole_dqn.yaml", "--run", "a/b"], "run name"),
        (
            [
                "actor",
                "--board",
                "nosuchboard",
                "--broker",
                "mqtt://127.0.0.1:1",
                "--env",
                "CartPole-v1",
                "--id",
                "a",
                "KEY",
            ],
            "known boards",
        ),
        (
            [
                "actor",
                "--board",
                "rpi4",
                "--broker",
                "http://x",
                "--env",
                "CartPole-v1",
                "--id",
                "a",
                "KEY",
            ],
            "mqtt://",
        ),
        (
            [
                "actor",
                "--board",
                "rpi4",
                "--broker",
                "mqtt://127.0.0.1:1",
                "--env",
                "CartPole-v1",
                "--id",
                "a/b",
                "KEY",
            ],
            "actor id",
        ),
        (
            [
                "actor",
                "--board",
                "rpi4",
                "--broker",
                "mqtt://127.0.0.1:1",
                "--env",
                "CartPole-v1",
                "--id",
                "a",
            ],
            "public key",
        ),
    ],
    ids=[
        "unknown key",
        "bad value",
        "bad --set",
        "bad --run",
        "unknown board",
        "bad url",
        "bad id",
        "no policy key",
    ],
)
def test_bad_input_gets_a_clear_error(args, message, cli, policy_keys):
    args = [a for x in args for a in (["--policy-key", str(policy_keys[1])] if x == "KEY" else [x])]
    proc = cli(*args, timeout=60)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
