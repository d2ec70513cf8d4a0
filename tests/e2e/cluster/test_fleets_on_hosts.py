"""Fleets on several hosts (the ``cluster`` tier): the three cluster nodes and the learner
in one network namespace, two ``edge-rl fleet`` groups in two more, each joined to the
first by a veth pair of its own and reaching only its own node (B or C). One run; both
groups train it. Every namespace is the test's own (``ip netns``, root): nothing touches
the host's interfaces.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from edge_rl.broker.nats_conf import ClusterNode
from edge_rl.wire.topics import Topics
from tests.conftest import _require
from tests.harness.cluster import Cluster, learner_run, nats_server
from tests.harness.faults import ENV, RUN
from tests.harness.paths import REPO
from tests.harness.waits import bound, until

STEPS = 2_000
RUN_TIMEOUT_S = 420
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(RUN_TIMEOUT_S + 120)]
# node -> (its address in the brokers' namespace, the fleet namespace's address)
LINKS = {"b": ("10.233.1.1", "10.233.1.2"), "c": ("10.233.2.1", "10.233.2.2")}


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, timeout=30)


@pytest.fixture
def hosts():
    """{"brokers": ns, "b": ns, "c": ns}: the fleets' namespaces veth-joined to the brokers'."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("ip netns needs root and iproute2 (CI runs as root)")
    _require(nats_server() is not None, "nats-server not found: scripts/ensure-nats")
    tag = f"{os.getpid() % 100000}"
    names = {"brokers": f"erl-k{tag}", "b": f"erl-kb{tag}", "c": f"erl-kc{tag}"}
    made: list[str] = []
    try:
        for ns in names.values():
            _run("ip", "netns", "add", ns)
            made.append(ns)
            _run("ip", "-n", ns, "link", "set", "lo", "up")
        for node, (inner, outer) in LINKS.items():
            here, there = f"v{node}k", f"v{node}f"
            peer = ("peer", there, "netns", names[node])
            _run("ip", "-n", names["brokers"], "link", "add", here, "type", "veth", *peer)
            _run("ip", "-n", names["brokers"], "addr", "add", f"{inner}/24", "dev", here)
            _run("ip", "-n", names[node], "addr", "add", f"{outer}/24", "dev", there)
            _run("ip", "-n", names["brokers"], "link", "set", here, "up")
            _run("ip", "-n", names[node], "link", "set", there, "up")
        yield names
    finally:
        for ns in reversed(made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _popen(ns: str, argv: list[str], log) -> subprocess.Popen:
    """``argv`` in namespace ``ns`` (``ip netns exec`` execs it: the PID is its own)."""
    return subprocess.Popen(
        ["ip", "netns", "exec", ns, *argv], cwd=REPO, stdout=log, stderr=subprocess.STDOUT
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_two_fleets_in_namespaces_of_their_own_train_one_run(tmp_path, hosts, setpriv_available):
    ids = {n: [f"sim-{n}-{i:02d}" for i in range(2)] for n in LINKS}
    nodes = {"a": ClusterNode("a", "127.0.0.1", 4222, 6222, 1893)}
    nodes |= {n: ClusterNode(n, inner, 4222, 6222, 1883) for n, (inner, _) in LINKS.items()}
    cluster = Cluster.start(
        tmp_path / "cluster",
        Topics("edge-rl", RUN),
        [*ids["b"], *ids["c"]],
        nodes=nodes,
        netns=hosts["brokers"],
    )
    run = learner_run(tmp_path, cluster.url("a"), cluster.auth("learner"), STEPS)
    run_dir, board, learn = run.run_dir, run.board, run.argv
    procs: list[subprocess.Popen] = []
    try:
        with open(tmp_path / "learner.out", "w") as out:
            procs.append(_popen(hosts["brokers"], learn, out))
        for node in LINKS:
            fleet = [
                sys.executable,
                "-m",
                "edge_rl.cli",
                "fleet",
                "--broker",
                cluster.url(node),
                "--env",
                ENV,
                "-n",
                "2",
                "--board",
                str(board),
                "--run",
                RUN,
                "--id-prefix",
                f"sim-{node}",
                "--policy-key",
                str(run.public_key),
                "--log-dir",
                str(tmp_path / f"fleet-{node}"),
                "--credentials",
                str(cluster.creds),
            ]
            with open(tmp_path / f"fleet-{node}.out", "w") as out:
                procs.append(_popen(hosts[node], fleet, out))
        until(lambda: procs[0].poll() is not None, bound(RUN_TIMEOUT_S), step=0.5)
        assert procs[0].poll() == 0, (tmp_path / "learner.out").read_text()[-3000:]
    finally:
        for proc in procs:
            _stop(proc)
        cluster.stop()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["env_steps"] == STEPS
    assert summary["transitions_rejected"] == 0
    by_actor = summary["transitions_received_by_actor"]
    assert set(by_actor) == {*ids["b"], *ids["c"]}  # both hosts' fleets trained the run
    assert all(n > 0 for n in by_actor.values())
