"""The status-stall attack across a real ``--resume``: a board that was granted credit
leaves a retained status claiming 2^53-1 env steps on the broker; the learner is killed by
PID (SIGKILL) and resumed with ``edge-rl learn --resume``. The resumed learner reads the
bogus status first thing, finds it past the grant it loaded from RUN_DIR/grants.json,
refuses it (``status_over_credit``), grants nothing from it, and its run reaches its
budget. Real Mosquitto (external, as a deployment's), real learner and actor processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from edge_rl.transport.mqtt import MqttTransport
from edge_rl.types import ActorStatus
from edge_rl.wire.messages import decode_status, encode_status
from edge_rl.wire.topics import Topics
from tests.harness.paths import REPO
from tests.harness.waits import bound, until

RUN = "stall-resume"
INTRUDER = "intruder"
MAX_SEQ = 2**53 - 1
BUDGET = 5_000
FLAGS = [
    *("--set", f"run={RUN}", "--set", f"total_env_steps={BUDGET}"),
    *("--set", "learning_starts=400", "--set", "dqn.hidden=[32, 32]"),
    *("--set", "export.min_greedy_agreement=0", "--set", "export.every_updates=100"),
    *("--set", "export.calibration_size=50", "--set", "export.parity_size=50"),
    *("--set", "select_every=0", "--set", "select_recheck=0", "--set", "eval_episodes=2"),
    *("--set", "checkpoint.every_s=0", "--set", "checkpoint.every_env_steps=800"),
]


def _header(run: Path) -> dict | None:
    try:
        return json.loads((run / "checkpoint" / "header.json").read_text())
    except (OSError, ValueError):
        return None


def _granted(run: Path, actor: str) -> int:
    try:
        return json.loads((run / "grants.json").read_text())["grants"][actor][1]
    except (OSError, ValueError, KeyError):
        return 0


def _until(cond, timeout: float, proc: subprocess.Popen) -> None:
    until(lambda: proc.poll() is not None or cond(), bound(timeout), step=0.2)
    assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
    assert cond(), "timed out"


def _retained(url: str, topic: str) -> bytes | None:
    got: list[bytes] = []
    reader = MqttTransport(
        url, "stall-reader", subscriptions=[(topic, 1)], on_message=lambda t, p: got.append(p)
    )
    reader.start()
    try:
        assert reader.wait_connected(15)
        until(lambda: bool(got), bound(5))  # a retained message comes at once, if any
    finally:
        reader.stop()
    return got[0] if got else None


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(900)
def test_a_retained_stall_status_survives_a_kill_and_the_resumed_run_reaches_its_budget(
    tmp_path, fresh_mosquitto, setpriv_available, cli
):
    run, url = tmp_path / "run", fresh_mosquitto.url
    topics = Topics("edge-rl", RUN)
    argv = [sys.executable, "-m", "edge_rl.cli", "learn", "--config", "examples/cartpole_dqn.yaml"]
    argv += ["--out", str(run), "--broker", url, "--fleet", "0", *FLAGS]
    learner = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    fleet = None
    intruder = MqttTransport(url, f"actor-{INTRUDER}")
    intruder.start()
    try:
        assert intruder.wait_connected(15)
        _until(lambda: (run / "signing.pub").exists(), 120, learner)
        fleet = subprocess.Popen(
            [sys.executable, "-m", "edge_rl.cli", "fleet", "--broker", url, "--env", "CartPole-v1"]
            + ["-n", "2", "--board", "rpi5", "--run", RUN, "--policy-key", str(run / "signing.pub")]
            + ["--log-dir", str(tmp_path / "boards")],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _until(lambda: _header(run) is not None, 180, learner)
        run_id = _header(run)["identity"]["run_id"]
        # The intruder announces itself like a board and is granted credit...
        status = ActorStatus(INTRUDER, "running", run_id=run_id, session=4242)
        assert intruder.publish(topics.status(INTRUDER), encode_status(status), retain=True, wait=5)
        _until(lambda: _granted(run, INTRUDER) > 0, 180, learner)
        # ...then leaves a retained claim of 2^53-1 env steps on the broker.
        stall = ActorStatus(INTRUDER, "running", run_id=run_id, session=4242, env_steps=MAX_SEQ)
        assert intruder.publish(topics.status(INTRUDER), encode_status(stall), retain=True, wait=5)
        _until(lambda: (_header(run) or {}).get("env_steps", 0) >= 1_600, 180, learner)
        os.kill(learner.pid, signal.SIGKILL)  # by PID: the learner only
        learner.wait(timeout=30)
        retained = _retained(url, topics.status(INTRUDER))
        assert retained is not None and decode_status(retained).env_steps == MAX_SEQ
        granted_before = _granted(run, INTRUDER)

        resumed = cli("learn", "--resume", str(run), "--broker", url, "--json", timeout=280)
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        summary = json.loads(resumed.stdout[resumed.stdout.index("{") :])
        assert summary["env_steps"] == BUDGET and summary["interrupted"] is False
        assert summary["resumed_from_env_steps"] >= 1_600
        assert summary["status_over_credit"] >= 1  # the retained claim: refused
        assert INTRUDER not in summary["actors"]  # never recorded, never granted
        assert _granted(run, INTRUDER) == granted_before  # no grant came from the claim
        os.kill(fleet.pid, signal.SIGINT)
        assert fleet.wait(timeout=60) == 0
    finally:
        intruder.stop()
        for proc in (learner, fleet):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
