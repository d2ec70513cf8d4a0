"""Train, then run (docs/protocol.md §5.4), with real processes on a real Mosquitto: boards
of their own (``edge-rl fleet``, and one ``edge-rl actor --config`` as a flashed unit runs
it) outlive every learner.

(a) A run ends with every board serving the deployed policy, verified by its signature,
    at the greedy return the run's final evaluation measured; a second run then starts on
    the same board processes, and ``edge-rl stop`` idles them, still connected.
(b) SIGTERM of the learner at ~40 % pauses the run: the same board processes wait, and
    ``--resume`` finishes the run with them at exactly its budget.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from edge_rl.config import load_run_config
from edge_rl.learner.run import LearnOptions, run_learner
from edge_rl.types import ActorStatus
from edge_rl.wire.messages import decode_status
from edge_rl.wire.policy import decode_policy
from edge_rl.wire.signing import Signer, Verifier
from edge_rl.wire.topics import Topics
from tests.harness.paths import REPO
from tests.harness.waits import exit_code, wait_for

ROOT = REPO
ENV = "CartPole-v1"
SMALL = {  # a ~30 s CartPole run: small networks, gates that always pass
    "fleet.actors": 0,
    "learning_starts": 300,
    "export.every_updates": 100,
    "select_every": 2,
    "select_episodes": 2,
    "eval_episodes": 5,
    "export.calibration_size": 50,
    "export.parity_size": 50,
    "replay_capacity": 5000,
    "dqn.hidden": [32, 32],
    "export.min_greedy_agreement": 0,
}


class Statuses:
    """Every board's latest status, from a subscriber on the run's status topics."""

    def __init__(self, make_client, url: str, topics: Topics) -> None:
        self.latest: dict[str, ActorStatus] = {}
        self.received: dict[str, int] = {}  # statuses received, by board
        self._lock = threading.Lock()
        self.client = make_client(url)
        self.client.on_message = self._on_message
        self.client.subscribe(topics.all_status, qos=1)

    def _on_message(self, _client, _userdata, message) -> None:
        status = decode_status(message.payload)
        with self._lock:
            self.latest[status.actor_id] = status
            self.received[status.actor_id] = self.received.get(status.actor_id, 0) + 1

    def now(self) -> dict[str, ActorStatus]:
        with self._lock:
            return dict(self.latest)

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self.received)

    def wait(self, what: str, ids: set[str], check, timeout: float) -> dict[str, ActorStatus]:
        """Until every board in ``ids`` has a status for which ``check`` holds (``timeout``
        stretched by the machine's load)."""

        got: dict[str, ActorStatus] = {}

        def hold() -> bool:
            got.update(self.now())  # the statuses for which it held, returned
            return ids <= set(got) and all(check(got[a]) for a in ids)

        wait_for(hold, timeout, what, step=0.2, detail=lambda: str(self.now()))
        return got

    def stay(self, what: str, ids: set[str], check, statuses: int = 2) -> None:
        """Every board in ``ids`` sends ``statuses`` more statuses, and ``check`` holds for
        each board's latest then: a state that lasts, seen in the boards' own reports."""
        before = self.counts()
        wait_for(
            lambda: all(self.counts().get(a, 0) >= before.get(a, 0) + statuses for a in ids),
            30,
            f"{statuses} more statuses from each of {sorted(ids)} ({what})",
        )
        got = self.now()
        assert all(check(got[a]) for a in ids), (what, got)


def _children(pid: int) -> set[int]:
    kids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.add(int(stat.parent.name))
    return kids


def _board_file(path: Path, public_key: Path, actor: dict | None = None) -> Path:
    board = {
        "board": "rpi5",
        "status_interval_s": 0.5,
        "serving_status_interval_s": 1.0,
        "policy_public_key": str(public_key),
    }
    if actor is not None:
        board["actor"] = actor
    path.write_text(yaml.safe_dump(board))
    return path


def _fleet(url: str, board: Path, run: str, n: int, logs: Path, key: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "edge_rl.cli", "fleet", "--broker", url, "--env", ENV]
    argv += ["-n", str(n), "--board", str(board), "--run", run, "--log-dir", str(logs)]
    argv += ["--policy-key", str(key)]
    return subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def _end(*procs: subprocess.Popen | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


def _served_like_the_evaluation(status: ActorStatus, returns: list[float]) -> bool:
    """The board's greedy return (a mean of 1-20 of its own episodes) against the deployed
    model's greedy returns in LiteRT (``returns``, 30 episodes): within three standard
    deviations of one episode, the spread at least 10 % of the mean (a weak policy's
    CartPole returns are far from normal)."""
    mean = statistics.fmean(returns)
    spread = max(statistics.pstdev(returns), 0.1 * mean, 2.0)
    return abs(status.recent_return - mean) <= 3 * spread * math.sqrt(1 + 1 / len(returns))


@pytest.mark.slow
def test_a_run_ends_with_every_board_serving_its_result_and_the_next_run_takes_them(
    tmp_path, fresh_mosquitto, mqtt_client_factory, cli
):
    url, run = fresh_mosquitto.url, "serve-e2e"
    topics = Topics("edge-rl", run)
    key = tmp_path / "learner.key"  # one key for both runs: the boards' board files name it
    Signer.load_or_create(key).write_public(tmp_path / "learner.pub")
    pub = tmp_path / "learner.pub"
    statuses = Statuses(mqtt_client_factory, url, topics)
    flashed = {"id": "pi-flashed", "run": run, "env": ENV, "broker": url}
    unit = _board_file(tmp_path / "board.yaml", pub, actor=flashed)
    fleet = actor = None
    try:
        fleet = _fleet(
            url, _board_file(tmp_path / "sim.yaml", pub), run, 2, tmp_path / "logs", key=pub
        )
        # What the flashed unit's ExecStart runs: everything from its board file.
        actor = subprocess.Popen(
            [sys.executable, "-m", "edge_rl.cli", "actor", "--config", str(unit)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        boards = {"sim-00", "sim-01", "pi-flashed"}
        statuses.wait("boards up", boards, lambda s: s.state == "starting", 60)
        pids = _children(fleet.pid) | {actor.pid}
        sessions = {a: s.session for a, s in statuses.now().items()}

        overrides = {**SMALL, "run": run, "signing_key": str(key), "total_env_steps": 1200}
        cfg = load_run_config(ROOT / "examples" / "cartpole_dqn.yaml", overrides)
        options = LearnOptions(broker=url, live_view=False)
        first = run_learner(cfg, tmp_path / "run1", options)
        deployed = first["policy_version"]
        assert first["env_steps"] == 1200 and set(first["actors"]) == boards

        # The deployed policy, signed, as the run directory keeps it: any board verifies it.
        bundle = (tmp_path / "run1" / "policy.bundle").read_bytes()
        policy = decode_policy(bundle, Verifier.from_file(pub), len(bundle))
        model = (tmp_path / "run1" / "policy.tflite").read_bytes()
        assert policy.manifest.policy_version == deployed
        assert policy.manifest.run_id == first["run_id"]
        assert policy.manifest.model_sha256 == hashlib.sha256(model).hexdigest()
        eval_run = cli(
            "eval", str(tmp_path / "run1" / "policy.tflite"), "--env", ENV, "--episodes", "30"
        )
        assert eval_run.returncode == 0, eval_run.stderr[-2000:]
        greedy = json.loads(eval_run.stdout)["returns"]  # the deployed model's own spread

        # Every board serves it (it loads only what its key verifies), at the greedy return
        # the final evaluation measured, after a few episodes of its own.
        def serving(s: ActorStatus, summary: dict = first) -> bool:
            return (
                s.state == "serving"
                and s.run_id == summary["run_id"]
                and s.policy_version == summary["policy_version"]
                and s.recent_return is not None
            )

        begun = statuses.wait("serving run 1", boards, serving, 60)
        # A few more served episodes in each board's mean.
        served = statuses.wait(
            "3 more served episodes",
            boards,
            lambda s: serving(s) and s.served_episodes >= begun[s.actor_id].served_episodes + 3,
            60,
        )
        for a in boards:
            assert _served_like_the_evaluation(served[a], greedy), (
                served[a].recent_return,
                greedy,
                first["final_eval_return"],
            )
            assert served[a].env_steps == first["actors"][a]["env_steps"]  # served: not counted

        # A second run under the same name: the same processes join it, then serve its result.
        second = run_learner(cfg, tmp_path / "run2", options)
        assert second["run_id"] != first["run_id"] and second["env_steps"] == 1200
        assert set(second["actors"]) == boards
        statuses.wait("serving run 2", boards, lambda s: serving(s, second), 60)
        assert {a: s.session for a, s in statuses.now().items()} == sessions
        assert pids == _children(fleet.pid) | {actor.pid} and fleet.poll() is None

        # An explicit end: the boards idle, connected (same processes), until the next run.
        ended = cli("stop", "--broker", url, "--run", run)
        assert ended.returncode == 0 and second["run_id"] in ended.stdout, ended.stderr
        statuses.wait("stopped", boards, lambda s: s.state == "stopped", 30)
        statuses.stay("stopped, connected", boards, lambda s: s.state == "stopped")
        assert fleet.poll() is None and actor.poll() is None
        assert pids == _children(fleet.pid) | {actor.pid}
        os.kill(fleet.pid, signal.SIGINT)  # Ctrl-C: the fleet's actors exit cleanly
        actor.terminate()  # systemd's stop
        assert exit_code(fleet, 60, "the fleet after Ctrl-C") == 0
        assert exit_code(actor, 60, "the flashed unit's actor after SIGTERM") == 0
    finally:
        _end(fleet, actor)


BUDGET = 3_000


@pytest.mark.slow
def test_sigterm_pauses_the_run_and_resume_finishes_it_with_the_same_boards(
    tmp_path, fresh_mosquitto, mqtt_client_factory, cli
):
    url, run_name, run = fresh_mosquitto.url, "pause-e2e", tmp_path / "run"
    topics = Topics("edge-rl", run_name)
    statuses = Statuses(mqtt_client_factory, url, topics)
    # A short lead: without the learner's updates the boards run at most 300 steps ahead,
    # so the SIGTERM lands well before the budget even when the learner is slow to see it.
    sets = {
        **SMALL,
        "run": run_name,
        "total_env_steps": BUDGET,
        "checkpoint.every_s": 0,
        "max_lag_transitions": 300,
    }
    argv = [sys.executable, "-m", "edge_rl.cli", "learn", "--config", "examples/cartpole_dqn.yaml"]
    argv += ["--out", str(run), "--broker", url, "--fleet", "0"]
    for k, v in sets.items():
        argv += ["--set", f"{k}={json.dumps(v) if isinstance(v, list) else v}"]
    learner = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    fleet = None
    try:
        wait_for(
            lambda: (run / "signing.pub").exists() or learner.poll() is not None,
            120,
            "the learner's signing.pub",
        )
        board = _board_file(tmp_path / "sim.yaml", run / "signing.pub")
        fleet = _fleet(url, board, run_name, 2, tmp_path / "logs", key=run / "signing.pub")
        boards = {"sim-00", "sim-01"}
        statuses.wait("boards up", boards, lambda s: s.session > 0, 60)
        pids = _children(fleet.pid)
        assert len(pids) == 2

        wait_for(
            lambda: (
                learner.poll() is not None
                or sum(s.env_steps for s in statuses.now().values()) >= 0.25 * BUDGET
            ),
            150,
            f"the boards' first {0.25 * BUDGET:.0f} env steps",
        )
        assert learner.poll() is None, learner.stderr.read().decode()[-3000:]
        learner.send_signal(signal.SIGTERM)  # by PID: the learner only
        code = exit_code(learner, 90, "the learner after SIGTERM")
        assert code == 128 + signal.SIGTERM  # (the CLI says so)
        first = json.loads((run / "summary.json").read_text())
        assert first["interrupted"] is True and first["env_steps"] < BUDGET

        # Paused, not stopped: the same processes hold and wait, connected.
        rid = first["run_id"]
        held = statuses.wait(
            "paused", boards, lambda s: s.state == "paused" and s.run_id == rid, 30
        )
        sessions = {a: s.session for a, s in held.items()}
        statuses.stay("paused, connected", boards, lambda s: s.state == "paused")
        assert fleet.poll() is None and _children(fleet.pid) == pids

        resumed = cli("learn", "--resume", str(run), "--broker", url, "--json", timeout=240)
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        summary = json.loads(resumed.stdout[resumed.stdout.index("{") :])
        assert summary["env_steps"] == BUDGET and summary["interrupted"] is False
        assert summary["run_id"] == rid and summary["resumed_from_env_steps"] == first["env_steps"]
        assert set(summary["actors"]) == boards
        # The same board processes finished it, and now serve its result.
        done = statuses.wait(
            "serving",
            boards,
            lambda s: s.state == "serving" and s.policy_version == summary["policy_version"],
            60,
        )
        assert {a: s.session for a, s in done.items()} == sessions
        assert fleet.poll() is None and _children(fleet.pid) == pids
        assert sum(s.env_steps for s in done.values()) >= BUDGET  # they did the steps
        os.kill(fleet.pid, signal.SIGINT)
        assert exit_code(fleet, 60, "the fleet after Ctrl-C") == 0
    finally:
        _end(learner, fleet)
