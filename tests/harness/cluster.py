"""A three-node nats-server cluster on loopback for the ``cluster`` tier: configs made by
edge_rl/broker/nats_conf.py into a directory of the test's, started and stopped by
scripts/cluster (PID files), a password per user made at run time.

    c = Cluster.start(tmp_path / "cluster", Topics("edge-rl", "cartpole"), ["sim-b-00"])
    c.url("a")        # mqtt://127.0.0.1:PORT of node a's MQTT listener
    c.kill("b")       # SIGKILL by the PID in its PID file
    c.restart("b")    # scripts/cluster start DIR b: back, JetStream catches up
    c.stop()
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

from edge_rl.broker.acl import run_acl
from edge_rl.broker.nats_conf import ClusterNode, nats_accounts, nats_node
from edge_rl.transport.address import free_port
from edge_rl.transport.auth import BrokerAuth, write_private
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from tests.harness.fault_run import write_board
from tests.harness.faults import CHEAP, CONFIG
from tests.harness.learn import learn_argv
from tests.harness.paths import REPO
from tests.harness.procs import alive
from tests.harness.waits import bound, until

SCRIPT = REPO / "scripts" / "cluster"
NAMES = ("a", "b", "c")


def nats_server() -> str | None:
    return shutil.which("nats-server") or (
        "/usr/sbin/nats-server" if os.path.exists("/usr/sbin/nats-server") else None
    )


@dataclass
class Cluster:
    dir: Path
    nodes: dict[str, ClusterNode]
    creds: Path  # as `edge-rl credentials` lays them out: learner/, boards/<id>/
    netns: str | None = None  # the network namespace the nodes run in (None: this one)

    @classmethod
    def start(
        cls,
        directory: Path,
        topics: Topics,
        actors: list[str],
        nodes: dict[str, ClusterNode] | None = None,
        netns: str | None = None,
    ) -> Cluster:
        directory.mkdir(parents=True)
        nodes = nodes or {
            n: ClusterNode(n, "127.0.0.1", free_port(), free_port(), free_port()) for n in NAMES
        }
        creds = directory / "creds"
        passwords = {}
        for user in ["learner", *actors]:
            home = creds / ("learner" if user == "learner" else f"boards/{user}")
            home.mkdir(parents=True)
            passwords[user] = secrets.token_urlsafe(18)
            write_private(home / "password", passwords[user] + "\n")
        write_private(
            directory / "accounts.conf",
            nats_accounts(run_acl(topics, "learner", actors), passwords),
        )
        for node in nodes.values():
            store = directory / f"js-{node.name}"
            text = nats_node(node, list(nodes.values()), str(store))
            (directory / f"node-{node.name}.conf").write_text(text)
        cluster = cls(directory, nodes, creds, netns)
        cluster.script("start")
        return cluster

    def script(self, *args: str) -> str:
        inside = ["ip", "netns", "exec", self.netns] if self.netns else []
        done = subprocess.run(
            [*inside, str(SCRIPT), args[0], str(self.dir), *args[1:]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def url(self, name: str) -> str:
        node = self.nodes[name]
        return f"mqtt://{node.host}:{node.mqtt_port}"

    def urls(self, *names: str) -> str:
        return ",".join(self.url(n) for n in names)

    def auth(self, user: str) -> BrokerAuth:
        home = self.creds / ("learner" if user == "learner" else f"boards/{user}")
        return BrokerAuth(username=user, password_file=str(home / "password"))

    def pid(self, name: str) -> int:
        return int((self.dir / f"node-{name}.pid").read_text())

    def kill(self, name: str) -> None:
        pid = self.pid(name)
        os.kill(pid, signal.SIGKILL)
        # scripts/cluster started it in a session of its own: init reaps it, not us, and a
        # container's init may never do so. A zombie counts as gone, so the fault's timing
        # (restart at 60 %) does not wait out the bound.
        until(lambda: not alive(pid), bound(10))
        (self.dir / f"node-{name}.pid").unlink()

    def restart(self, name: str) -> None:
        self.script("start", name)

    def stop(self) -> None:
        self.script("stop")


@dataclass(frozen=True)
class LearnerRun:
    """An ``edge-rl learn`` of the fault harness's CartPole config on a cluster, with no
    simulated fleet of its own: its run directory, signing key, board file and argv."""

    run_dir: Path
    public_key: Path
    board: Path
    argv: list[str]


def learner_run(tmp_path: Path, brokers: str, auth: BrokerAuth, steps: int) -> LearnerRun:
    """``brokers``: the URL list the learner is given (its own node first)."""
    run_dir, keys = tmp_path / "run", tmp_path / "keys"
    run_dir.mkdir()
    Signer.load_or_create(keys / "learner.key").write_public(keys / "learner.pub")
    board = write_board(tmp_path / "board.yaml", {"status_interval_s": 0.5})
    argv = learn_argv(
        CONFIG,
        run_dir,
        "--fleet",
        "0",
        "--signing-key",
        str(keys / "learner.key"),
        "--broker",
        brokers,
        *auth.argv(),
        *(x for kv in [f"total_env_steps={steps}", *CHEAP] for x in ("--set", kv)),
    )
    return LearnerRun(run_dir, keys / "learner.pub", board, argv)
