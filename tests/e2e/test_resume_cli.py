"""`edge-rl learn --resume` after a `kill -9` of a real learner (embedded Mosquitto, a
simulated fleet of 2): the run ends at its budget, policy versions go on, the run
directory's files are appended to, and a fresh run into it is refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.learn import learn_argv
from tests.harness.paths import REPO
from tests.harness.procs import alive, children, survivors
from tests.harness.waits import bound, exit_code, wait_for

ROOT = REPO
BUDGET = 5_000
SHORT = [
    "--fleet",
    "2",
    "--board",
    "rpi5",
    "--set",
    "run=resume-cli",
    "--set",
    f"total_env_steps={BUDGET}",
    "--set",
    "learning_starts=400",
    "--set",
    "dqn.hidden=[32, 32]",
    "--set",
    "export.min_greedy_agreement=0",
    "--set",
    "export.every_updates=100",
    "--set",
    "export.calibration_size=50",
    "--set",
    "export.parity_size=50",
    "--set",
    "select_every=2",
    "--set",
    "select_episodes=1",
    "--set",
    "select_recheck=0",
    "--set",
    "eval_episodes=2",
    "--set",
    "checkpoint.every_s=0",
    "--set",
    "checkpoint.every_env_steps=800",
]


def _header(run: Path) -> dict | None:
    try:
        return json.loads((run / "checkpoint" / "header.json").read_text())
    except (OSError, ValueError):  # not there yet, or being replaced
        return None


def _checkpointed(run: Path, learner: subprocess.Popen) -> None:
    """Until the learner has checkpointed 1,600 env steps and a policy (or has exited)."""

    def saved() -> bool:
        header = _header(run)
        return learner.poll() is not None or bool(
            header and header["env_steps"] >= 1_600 and header["policy_version"] >= 1
        )

    wait_for(saved, 180, "a checkpoint past 1,600 env steps with a policy")
    assert learner.poll() is None, learner.stderr.read().decode()[-3000:]


def _versions(run: Path) -> list[int]:
    return [json.loads(line)["policy_version"] for line in open(run / "publishes.jsonl")]


@pytest.mark.slow
def test_kill_9_then_resume_ends_at_the_budget_with_versions_going_on(
    tmp_path, mosquitto_available, setpriv_available, cli
):
    run = tmp_path / "run"
    argv = learn_argv("examples/cartpole_dqn.yaml", run, *SHORT)
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kids: list[int] = []
    try:
        _checkpointed(run, proc)
        kids = children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)  # by PID: the learner only
        exit_code(proc, 30, "the learner after kill -9")
        left = survivors(kids, within_s=bound(30))  # the broker and actors follow (pdeathsig)
        assert not left, left
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in kids:
            if alive(c):
                os.kill(c, signal.SIGKILL)
    assert not (run / "summary.json").exists()
    saved = _header(run)
    assert saved is not None and saved["env_steps"] < BUDGET
    rows = (run / "metrics.csv").read_text().splitlines()
    versions = _versions(run)

    # A fresh run into the same directory is refused, and writes nothing there.
    again = cli("learn", "--config", "examples/cartpole_dqn.yaml", "--out", str(run), *SHORT)
    assert again.returncode != 0 and "--resume" in again.stderr, again.stderr[-2000:]
    assert (run / "metrics.csv").read_text().splitlines() == rows
    changed = cli("learn", "--resume", str(run), "--set", "seed=3")
    assert changed.returncode != 0 and "--set" in changed.stderr

    resumed = cli("learn", "--resume", str(run), "--json", timeout=280)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    summary = json.loads(resumed.stdout[resumed.stdout.index("{") :])
    assert summary["env_steps"] == BUDGET and summary["interrupted"] is False
    assert summary["resumed_from_env_steps"] == saved["env_steps"]
    assert summary["updates"] >= saved["updates"]
    after = _versions(run)
    assert after[: len(versions)] == versions and len(after) > len(versions)
    assert all(b > a for a, b in zip(after, after[1:], strict=False)), after
    assert summary["policy_version"] == after[-1]
    assert (run / "metrics.csv").read_text().splitlines()[: len(rows)] == rows
    finished = cli("learn", "--resume", str(run))
    assert finished.returncode != 0 and "finished" in finished.stderr


@pytest.mark.slow
def test_boards_that_keep_running_see_the_learner_come_back(
    tmp_path, fresh_mosquitto, setpriv_available, cli
):
    """Actors of their own (`edge-rl fleet`, as real boards) on an external Mosquitto: the
    learner is killed with kill -9 and resumed; the same actor processes go on, take the
    resumed learner's policies (new versions) and serve its result after its budget."""
    run, url = tmp_path / "run", fresh_mosquitto.url
    flags = [x for x in SHORT if x not in ("--fleet", "2", "--board", "rpi5")]
    argv = learn_argv("examples/cartpole_dqn.yaml", run, "--broker", url, "--fleet", "0", *flags)
    learner = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    fleet = None
    try:
        wait_for(
            lambda: (run / "signing.pub").exists() or learner.poll() is not None,
            120,
            "the learner's signing.pub",
        )
        fleet = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edge_rl.cli",
                "fleet",
                "--broker",
                url,
                "--env",
                "CartPole-v1",
                "-n",
                "2",
                "--board",
                "rpi5",
                "--run",
                "resume-cli",
                "--policy-key",
                str(run / "signing.pub"),
                "--log-dir",
                str(tmp_path / "boards"),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _checkpointed(run, learner)
        os.kill(learner.pid, signal.SIGKILL)
        exit_code(learner, 30, "the learner after kill -9")
        time.sleep(1.0)  # the scenario: a while with no learner, which ends no board
        assert fleet.poll() is None  # the boards go on without their learner
        versions = _versions(run)

        resumed = cli("learn", "--resume", str(run), "--broker", url, "--json", timeout=280)
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        summary = json.loads(resumed.stdout[resumed.stdout.index("{") :])
        assert summary["env_steps"] == BUDGET
        after = _versions(run)
        assert after[: len(versions)] == versions and len(after) > len(versions)
        assert all(b > a for a, b in zip(after, after[1:], strict=False)), after
        assert fleet.poll() is None  # serving the result: no control message ends a board
        os.kill(fleet.pid, signal.SIGINT)  # Ctrl-C: each actor exits cleanly
        assert exit_code(fleet, 60, "the fleet after Ctrl-C") == 0
        actors = summary["actors"]
        assert set(actors) == {"sim-00", "sim-01"}
        assert all(a["state"] == "serving" for a in actors.values()), actors
        # They ran the resumed learner's policies: versions past the killed learner's last.
        assert all(a["policy_version"] > versions[-1] for a in actors.values()), actors
    finally:
        for proc in (learner, fleet):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
