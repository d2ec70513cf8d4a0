"""Failover on a real clustered broker (the ``cluster`` tier, `make test-cluster`): three
nats-server nodes on loopback (tests/harness/cluster.py), the learner on node A, two
simulated fleets on nodes B and C, each given every node (``URL,URL,URL``). A node is
killed by its PID mid-run and restarted later. What must hold, from independent counters
as in tests/e2e/test_faults.py: the run ends by itself at exactly its budget, every
transition the actors sent is in replay or lost where a counter says why, no duplicate in
replay, and the boards of the killed node carry on from a live one.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from edge_rl.sim.fleet import Fleet
from edge_rl.wire.topics import Topics
from tests.conftest import _require
from tests.harness.cluster import Cluster, learner_run, nats_server
from tests.harness.fault_run import account
from tests.harness.faults import ENV, RUN, Fault, Harness, no_fault
from tests.harness.waits import bound, until

# Several seconds of stepping on a quiet machine: progress is seen in metrics.csv, written
# once a second, and a fault meant for 30 % of the run must not land at its end.
STEPS = 12_000
PER_NODE = 2  # actors on node B and on node C
RUN_TIMEOUT_S = 420  # a run that has not finished by then has stalled
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(RUN_TIMEOUT_S + 120)]


class Fleets:
    """Two fleets as one for the accounting (actor ids, processes)."""

    def __init__(self, *fleets: Fleet) -> None:
        self.fleets = fleets

    def actor_ids(self) -> list[str]:
        return [a for f in self.fleets for a in f.actor_ids()]

    @property
    def procs(self) -> list:
        return [p for f in self.fleets for p in f.procs]


@pytest.fixture
def nats_available() -> None:
    _require(nats_server() is not None, "nats-server not found: scripts/ensure-nats")


def run_with_node_killed(tmp_path: Path, node: str) -> tuple:
    topics = Topics("edge-rl", RUN)
    ids = {n: [f"sim-{n}-{i:02d}" for i in range(PER_NODE)] for n in ("b", "c")}
    cluster = Cluster.start(tmp_path / "cluster", topics, [*ids["b"], *ids["c"]])
    try:
        return _run(tmp_path, cluster, ids, node)
    finally:
        cluster.stop()


def _run(tmp_path: Path, cluster: Cluster, ids: dict, node: str) -> tuple:
    run = learner_run(tmp_path, cluster.urls("a", "b", "c"), cluster.auth("learner"), STEPS)
    run_dir, board, public_key, argv = run.run_dir, run.board, run.public_key, run.argv
    fleets = [
        Fleet(
            PER_NODE,
            board,
            cluster.urls(first, *(n for n in ("a", "b", "c") if n != first)),
            ENV,
            policy_key=public_key,
            run=RUN,
            log_dir=run_dir / "fleet",
            id_prefix=f"sim-{first}",
            auth=cluster.auth,
        )
        for first in ("b", "c")
    ]
    h = Harness(None, Fleets(*fleets), run_dir, STEPS, board, public_key, argv)  # type: ignore[arg-type]
    t0 = time.monotonic()
    h.start_learner()
    try:
        with fleets[0], fleets[1]:
            assert h.at(0.3), "\n".join(h.events)
            cluster.kill(node)
            h.log(f"node {node} killed (SIGKILL)")
            assert h.wait_steps(int(STEPS * 0.6)), "\n".join(h.events)
            cluster.restart(node)
            h.log(f"node {node} restarted")
            left = t0 + bound(RUN_TIMEOUT_S) - time.monotonic()
            until(lambda: h.learner.poll() is not None, left, step=0.5)
            finished = h.learner.poll() == 0
    finally:
        if h.learner.poll() is None:
            h.learner.terminate()
            h.learner.wait(15)
    row = account(Fault("cluster", f"node {node} killed", no_fault), h, finished, 0.0)
    events = "\n".join(row.events)
    assert row.finished, f"the run did not finish by itself:\n{events}"
    assert row.summary["env_steps"] == STEPS, events
    assert row.lost == sum(row.causes.values()) >= 0, (row.causes, events)
    assert row.summary["transitions_received"] == row.received == STEPS
    assert row.causes["rejected"] == 0 and row.causes["ingest queue"] == 0
    assert row.duplicated == row.summary["transitions_duplicate"]  # refused, not in replay
    # The rest went down with the node, its credit written off; or was sent at the end of
    # the run on credit an idle board held and the others were granted again (a board cut
    # off from its node is idle until it reconnects), and the run ended without it.
    assert row.causes["in transit"] <= row.written_off + row.reclaimed
    assert len(row.summary["actors"]) == 2 * PER_NODE
    return row, ids


def test_a_board_node_killed_and_restarted(tmp_path, nats_available, setpriv_available):
    row, ids = run_with_node_killed(tmp_path, "b")
    # Node B's boards moved to a live node and went on: each sent after the kill.
    logs = {a: (tmp_path / "run" / "fleet" / f"{a}.log").read_text() for a in ids["b"]}
    for actor, text in logs.items():
        assert "disconnected from" in text and "connected to" in text, actor


def test_the_learner_node_killed_and_restarted(tmp_path, nats_available, setpriv_available):
    row, _ = run_with_node_killed(tmp_path, "a")
    assert row.summary["env_steps"] == STEPS
