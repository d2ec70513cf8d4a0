"""Real faults on a real run: Mosquitto killed and restarted by its PID, an actor frozen
by SIGSTOP, a spool that overflows, a batch from an id nobody announced.

Each test runs benchmarks/faults.py's harness (a Mosquitto of its own, four actor
processes, ``edge-rl learn --broker``) on a short CartPole run with cheap learning, and
checks what must hold from independent counters (Jepsen-style):

* the run finishes by itself, in bounded time, at exactly its budget
  (``env_steps == total_env_steps``);
* every transition the actors sent (their own exit counts) is in replay, cut at the budget,
  or lost where a counter says why: no other loss, and no duplicate in replay.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import _faults  # noqa: E402
import faults  # noqa: E402

STEPS = 4_000
CHEAP = [
    "dqn.hidden=[32, 32]",
    "export.min_greedy_agreement=0",
    "select_every=0",
    "select_recheck=0",
    "eval_episodes=2",
    "export.calibration_size=50",
    "export.parity_size=50",
]
RUN_TIMEOUT_S = 200  # a run that has not finished by then has stalled


def run(tmp_path: Path, name: str, **inject_kw) -> faults.Row:
    fault = _faults.FAULTS[name]
    if inject_kw:  # shorter outages than the benchmark's, same code
        fault = dataclasses.replace(fault, inject=functools.partial(fault.inject, **inject_kw))
    row = faults.run_fault(fault, tmp_path, STEPS, CHEAP, RUN_TIMEOUT_S)
    events = "\n".join(row.events)
    assert row.finished, f"the run did not finish by itself:\n{events}"
    assert row.summary["env_steps"] == STEPS, events
    # Accounting: sent (+ dropped by the actors) = received + cut at the budget + lost.
    assert row.lost == sum(row.causes.values()) >= 0, (row.causes, events)
    assert row.summary["transitions_received"] == row.received + row.foreign == STEPS
    assert row.summary["transitions_rejected"] == 0 and row.causes["ingest queue"] == 0
    assert len(row.summary["actors"]) == _faults.ACTORS
    return row


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_broker_killed_and_restarted(tmp_path, mosquitto_available, setpriv_available):
    row = run(tmp_path, "broker_restart", times=2, down_s=2.0)
    assert sum("killed (SIGKILL)" in e for e in row.events) == 2
    # What went down with the broker is lost in transit and nowhere else, and the learner
    # wrote exactly that much credit off (else the run would have stalled on it).
    assert row.causes["spool overflow"] == 0
    assert row.lost == row.causes["in transit"] == row.written_off


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_spool_overflow_while_the_broker_is_down(tmp_path, mosquitto_available):
    row = run(tmp_path, "spool_overflow", down_s=4.0)
    dropped = sum(a["transitions_dropped"] for a in row.summary["actors"].values())
    assert row.causes["spool overflow"] == dropped > 0  # the fault did happen
    assert row.causes["in transit"] == row.written_off  # the rest: with the broker


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_a_batch_from_an_unknown_actor_id(tmp_path, mosquitto_available):
    row = run(tmp_path, "unknown_actor")
    # Accepted once (valid data), counted against the budget, granted no credit: the run
    # still ends at exactly its budget, and the fleet lost nothing.
    assert row.foreign == 64 and row.lost == 0 and row.written_off == 0
    assert row.received == STEPS - 64


@pytest.mark.slow
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_an_actor_frozen_by_sigstop_resumes(tmp_path, mosquitto_available):
    row = run(tmp_path, "actor_sigstop", stop_s=8.0)
    assert any("SIGCONT" in e for e in row.events)
    # Frozen longer than credit_timeout_s, resumed: it lost nothing, nothing was duplicated.
    assert row.lost == 0 and row.duplicated == 0
    assert row.summary["actors"]["sim-01"]["state"] == "serving"  # it finished with the rest
