"""The faults and what they act on, behind benchmarks/faults.py and tests/e2e/test_faults.py.

    row = run_fault(FAULTS["broker_restart"], out_dir, steps, sets, timeout_s)  # fault_run.py

One run: a Mosquitto of its own on a free loopback port (no persistence, no credentials, so
that the harness can kill and restart it by PID and act as a bad client), four simulated
actors started here (``Fleet``: one process each, their PIDs known) and the learner as
``edge-rl learn --broker URL --fleet 0`` in a process of its own. The fault is injected at
a point of the run read from the learner's ``metrics.csv`` (env steps), every wait bounded.

What must hold (docs/reliability.md): the run ends by itself at exactly its budget, and
what the actors sent is what the learner received, plus a loss that a counter explains.
The sent side comes from the actors (their exit log line, or for an actor killed
outright its last status), the received side from the learner's replay counters.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.sim.fleet import Fleet
from edge_rl.wire.topics import Topics
from tests.harness.paths import REPO
from tests.harness.waits import bound, until

# A tiny CartPole learner: what the fault and cluster runs train through their faults.
CHEAP = (
    "dqn.hidden=[32, 32]",
    "export.min_greedy_agreement=0",
    "select_every=0",
    "select_recheck=0",
    "eval_episodes=2",
    "export.calibration_size=50",
    "export.parity_size=50",
)

CONFIG = REPO / "examples" / "cartpole_dqn.yaml"
ENV, RUN, ACTORS = "CartPole-v1", "cartpole", 4
DONE = re.compile(r"actor (\S+) done: (\d+) env steps, (\d+) transitions sent, (\d+) dropped")


@dataclass
class Harness:
    """What a fault acts on while the run goes; ``events`` is its log (what, when)."""

    broker: EmbeddedBroker
    fleet: Fleet
    run_dir: Path
    steps: int  # the run's budget
    board: Path
    public_key: Path
    learner_argv: list[str]
    learner: subprocess.Popen | None = None
    extra: list[subprocess.Popen] = field(default_factory=list)  # actors a fault started
    events: list[str] = field(default_factory=list)
    notes: dict[str, int] = field(default_factory=dict)  # e.g. forged transitions published
    killed: set[str] = field(default_factory=set)  # actor ids killed outright
    _t0: float = field(default_factory=time.monotonic)

    def env_steps(self) -> int:
        """The learner's env steps (transitions received), from its last metrics.csv row."""
        try:
            with open(self.run_dir / "metrics.csv") as f:
                lines = f.read().splitlines()
        except OSError:
            return 0
        if len(lines) < 2:
            return 0
        header, last = lines[0].split(","), lines[-1].split(",")
        try:
            return int(float(last[header.index("env_steps")]))
        except (ValueError, IndexError):
            return 0

    def wait_steps(self, n: int, timeout: float = 600) -> bool:
        """Until the learner has ``n`` env steps (False on timeout or if it exited)."""
        reached = until(
            lambda: (
                self.env_steps() >= n or self.learner is None or self.learner.poll() is not None
            ),
            bound(timeout),
            step=0.2,
        )
        if not reached or self.env_steps() < n:
            self.log(f"gave up waiting for {n} env steps")
            return False
        return True

    def at(self, fraction: float) -> bool:
        return self.wait_steps(int(self.steps * fraction))

    def log(self, what: str) -> None:
        self.events.append(
            f"t={time.monotonic() - self._t0:6.1f}s steps={self.env_steps()}: {what}"
        )

    def actor_pid(self, i: int) -> int:
        return self.fleet.procs[i].pid

    def start_learner(self, argv: list[str] | None = None) -> None:
        out = open(self.run_dir.parent / f"{self.run_dir.name}.learner.out", "a")  # noqa: SIM115
        self.learner = subprocess.Popen(
            argv or self.learner_argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT
        )


# --- the faults ------------------------------------------------------------------------


def no_fault(h: Harness) -> None:
    pass


def broker_restarts(h: Harness, times: int = 3, down_s: float = 5.0) -> None:
    """Kill the broker (SIGKILL by its PID) ``times`` times, each restarted after ``down_s``."""
    for k in range(times):
        if not h.at((k + 1) / (times + 1)):
            return
        pid = h.broker.pid
        h.broker.kill()
        h.log(f"broker pid {pid} killed (SIGKILL)")
        time.sleep(down_s)  # the fault: the broker down this long
        h.broker.start()
        h.log(f"broker restarted (pid {h.broker.pid}) after {down_s:.0f} s")


def actor_kill(h: Harness) -> None:
    """One actor ``kill -9``, not restarted: the others must finish the budget."""
    if h.at(0.4):
        os.kill(h.actor_pid(1), signal.SIGKILL)
        h.killed.add(h.fleet.actor_ids()[1])
        h.log(f"actor {h.fleet.actor_ids()[1]} pid {h.actor_pid(1)} killed (SIGKILL)")


def actor_sigstop(h: Harness, stop_s: float = 30.0) -> None:
    """One actor frozen (SIGSTOP) for ``stop_s``, then SIGCONT: it resumes, nothing lost."""
    if h.at(0.4):
        pid = h.actor_pid(1)
        os.kill(pid, signal.SIGSTOP)
        h.log(f"actor pid {pid} stopped (SIGSTOP)")
        time.sleep(stop_s)  # the fault: the actor frozen this long
        os.kill(pid, signal.SIGCONT)
        h.log(f"actor pid {pid} continued (SIGCONT) after {stop_s:.0f} s")


def spool_overflow(h: Harness, down_s: float = 15.0) -> None:
    """The broker killed as the learner's first grant (learning_starts + max_lag_transitions)
    goes out, down for ``down_s``: the actors (a slow board, so that they still hold most of
    that credit) step on and fill the board's small spool. Later in a run an actor holds
    almost no unspent credit (the fleet outruns the learner), so a broker outage there
    leaves at most one batch in the spool."""
    if not _first_grant(h, timeout=300):
        return
    pid = h.broker.pid
    h.broker.kill()
    h.log(f"first grant out: broker pid {pid} killed (SIGKILL)")
    time.sleep(down_s)  # the fault: the broker down this long
    h.broker.start()
    h.log(f"broker restarted (pid {h.broker.pid}) after {down_s:.0f} s")


def _first_grant(h: Harness, timeout: float) -> bool:
    """Until the learner has granted some actor credit (its retained credit topic)."""
    from edge_rl.wire.messages import decode_credit

    base = Topics(root="edge-rl", run=RUN).base
    return (
        _watch(h, f"{base}/actors/+/credit", lambda p: decode_credit(p).credit > 0, timeout)
        is not None
    )


def _run_id(h: Harness, timeout: float = 30) -> str:
    """This start of the run, from the learner's retained control message (protocol v3)."""
    from edge_rl.wire.messages import decode_control

    control = Topics(root="edge-rl", run=RUN).control
    got = _watch(h, control, lambda p: decode_control(p).run_id, timeout)
    if got is None:
        raise RuntimeError("no control message with a run id")
    return decode_control(got).run_id


def _watch(h: Harness, topic: str, accept: Callable[[bytes], Any], timeout: float):
    """The first payload on ``topic`` that ``accept`` takes (truthy), or None (bounded)."""
    import queue

    from edge_rl.transport.mqtt import MqttTransport
    from edge_rl.wire.envelope import CodecError

    seen: queue.Queue[bytes] = queue.Queue()

    def on_message(_topic: str, payload: bytes) -> None:
        try:
            if accept(payload):
                seen.put(payload)
        except CodecError:  # e.g. an empty retained payload: cleared
            pass

    t = MqttTransport(
        h.broker.url, "fault-watch", subscriptions=[(topic, 1)], on_message=on_message
    )
    t.start()
    try:
        return seen.get(timeout=timeout)
    except queue.Empty:
        return None
    finally:
        t.stop()


def bad_batches(h: Harness) -> None:
    """A bad client publishes malformed batches under a real actor's id (no ACL here)."""
    from edge_rl.wire.transitions import encode_transitions, peek_count

    if not h.at(0.4):
        return
    victim = h.fleet.actor_ids()[1]
    nan = _batch(victim, _run_id(h), n=64, reward=float("nan"))
    payloads = [b"\x00garbage", encode_transitions(nan)[:-40], encode_transitions(nan)]
    h.notes["forged_transitions"] = sum(peek_count(p) for p in payloads)
    _publish(h, Topics(root="edge-rl", run=RUN).transitions(victim), payloads)
    h.log(f"{len(payloads)} malformed batches published as {victim}")


def unknown_actor(h: Harness) -> None:
    """One valid batch from an actor id that never announced itself."""
    from edge_rl.wire.transitions import encode_transitions

    if not h.at(0.4):
        return
    batch = _batch("ghost-00", _run_id(h), n=64)
    h.notes["foreign_sent"] = len(batch)
    _publish(
        h, Topics(root="edge-rl", run=RUN).transitions("ghost-00"), [encode_transitions(batch)]
    )
    h.log("one valid batch of 64 published as unknown actor ghost-00")


def same_id(h: Harness) -> None:
    """A second board starts with the id of a running one (sim-01)."""
    if not h.at(0.3):
        return
    cmd = [
        sys.executable,
        "-m",
        "edge_rl.cli",
        "actor",
        "--board",
        str(h.board),
        "--broker",
        h.broker.url,
        "--env",
        ENV,
        "--id",
        h.fleet.actor_ids()[1],
        "--run",
        RUN,
        "--policy-key",
        str(h.public_key),
        "--seed",
        "77",
    ]
    out = open(h.fleet.log_dir / "duplicate-sim-01.log", "w")  # noqa: SIM115
    h.extra.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO))
    h.log(f"second actor with id {h.fleet.actor_ids()[1]} started (pid {h.extra[-1].pid})")


def learner_kill_resume(h: Harness) -> None:
    """The learner ``kill -9`` at ~40 % of the budget, then ``edge-rl learn --resume``."""
    if not h.at(0.4) or h.learner is None:
        return
    pid = h.learner.pid
    os.kill(pid, signal.SIGKILL)
    h.learner.wait(timeout=30)
    h.log(f"learner pid {pid} killed (SIGKILL)")
    h.start_learner(resume_argv(h))
    h.log(f"learner resumed (pid {h.learner.pid})")


def resume_argv(h: Harness) -> list[str]:
    """``edge-rl learn --resume RUN_DIR`` against the same broker."""
    return [
        sys.executable,
        "-m",
        "edge_rl.cli",
        "learn",
        "--resume",
        str(h.run_dir),
        "--broker",
        h.broker.url,
    ]


def _batch(actor_id: str, run_id: str, n: int, reward: float = 1.0):
    import numpy as np

    from edge_rl.types import TransitionBatch

    rng = np.random.default_rng(0)
    obs = rng.uniform(-0.05, 0.05, (n, 4)).astype(np.float32)
    return TransitionBatch(
        actor_id=actor_id,
        session=12345,
        seq=0,
        policy_version=0,
        obs=obs,
        action=rng.integers(0, 2, n),
        reward=np.full(n, reward, np.float32),
        next_obs=obs,
        terminated=np.zeros(n, bool),
        truncated=np.zeros(n, bool),
        run_id=run_id,
    )


def _publish(h: Harness, topic: str, payloads: list[bytes]) -> None:
    from edge_rl.transport.mqtt import MqttTransport

    t = MqttTransport(h.broker.url, "bad-client")
    t.start()
    try:
        if not t.wait_connected(10):
            raise RuntimeError(f"bad client: no broker at {h.broker.url}")
        for p in payloads:
            t.publish(topic, p, qos=1, wait=5.0)
    finally:
        t.stop()


@dataclass(frozen=True)
class Fault:
    name: str
    what: str  # the table's first column
    inject: Callable[[Harness], None]
    board: dict[str, Any] = field(default_factory=dict)  # board-file keys over rpi4's
    sets: tuple[str, ...] = ()  # learner --set KEY=VALUE


FAULTS = {
    f.name: f
    for f in (
        Fault("baseline", "no fault", no_fault),
        Fault("broker_restart", "broker kill -9 ×3, back after 5 s", broker_restarts),
        Fault("actor_kill", "one actor kill -9 (no restart)", actor_kill),
        Fault("actor_sigstop", "one actor SIGSTOP 30 s, SIGCONT", actor_sigstop),
        Fault(
            "spool_overflow",
            "spool overflow (1 KB spool, broker down 15 s)",
            spool_overflow,
            board={"spool_limit_bytes": 1000, "emulation": {"compute_slowdown": 100.0}},
        ),
        Fault(
            "ingest_drop",
            "ingest-queue drop (transport.ingest_queue=2)",
            no_fault,
            sets=("transport.ingest_queue=2",),
        ),
        Fault("rejected_batch", "3 malformed batches under a real actor's id", bad_batches),
        Fault("unknown_actor", "one valid batch from an unknown actor id", unknown_actor),
        Fault("same_id", "two actors with the same id", same_id),
        Fault("learner_resume", "learner kill -9 at 40 %, --resume", learner_kill_resume),
    )
}
