"""Start and stop N actor processes, each ``python -m edge_rl.cli actor ...``.

    with Fleet(n=4, board=board_file("rpi4"), broker=url, env="CartPole-v1", run="r1",
               log_dir=run_dir / "fleet") as fleet:
        ...              # fleet.alive() is False once every process has exited

Each member is the same code path a real board runs; only the board file's emulation
section (a compute slow-down, which each member is told to apply with ``--emulate``: a
real board never applies it) makes this machine behave like that board. Members get SIGTERM
when the process that started them dies, however it died (Linux; ``die_with_parent``).

``auth(actor_id)`` gives each member its broker credentials (transport/auth.py): paths and
names on its command line, never a password (that stays in its file or variable).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from edge_rl.boards import STOP_FLUSH_S, STOP_STATUS_S
from edge_rl.broker.executables import die_with_parent, parent_env
from edge_rl.sim.boards_file import BoardEntry, write_boards_file
from edge_rl.transport.auth import BrokerAuth
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN

# How long a SIGTERM'd actor process has before SIGKILL: a board's own bounded shutdown (a
# group's boards do theirs at once), then its disconnect, with room for a loaded host.
# Killed sooner, its boards' last wills say ``offline`` instead of ``stopped``.
STOP_GRACE_S = 2 * (STOP_FLUSH_S + STOP_STATUS_S)

log = logging.getLogger(__name__)


def fleet_ids(n: int, prefix: str = "sim") -> list[str]:
    """The actor ids of a simulated fleet: ``sim-00``, ``sim-01``, ... (three digits and
    more for a fleet past 100, so that the ids sort in order)."""
    width = max(2, len(str(n - 1)))
    return [f"{prefix}-{i:0{width}d}" for i in range(n)]


class Fleet:
    def __init__(
        self,
        n: int,
        board: Path,
        broker: str,
        env: str,
        *,
        policy_key: Path,  # the learner's public key (PEM): actors verify every policy with it
        run: str = DEFAULT_RUN,
        root: str = DEFAULT_ROOT,
        seed: int = 0,
        log_dir: Path | None = None,
        id_prefix: str = "sim",
        extra_args: tuple[str, ...] = (),
        auth: Callable[[str], BrokerAuth | None] | None = None,
        procs: int = 0,
        start_spread_s: float = 0.0,
    ) -> None:
        """``procs``: 0 runs each actor in a process of its own (``edge-rl actor``); P > 0
        spreads the ``n`` boards over P ``edge-rl actors`` processes, each board still its
        own actor. ``start_spread_s``: a process starts its boards that far apart at most."""
        if n < 1:
            raise ValueError("a fleet needs at least one actor")
        if procs < 0:
            raise ValueError("procs must be 0 (a process per actor) or more")
        if not board.exists():
            raise FileNotFoundError(f"board file {board} not found")
        self.n = n
        self.board = board
        self.broker = broker
        self.env = env
        self.policy_key = policy_key
        self.run = run
        self.root = root
        self.seed = seed
        self.log_dir = log_dir
        self.id_prefix = id_prefix
        self.extra_args = extra_args
        self.auth = auth
        self.group_procs = min(procs, n)
        self.start_spread_s = start_spread_s
        self.procs: list[subprocess.Popen] = []
        self._logs: list = []
        self._tmp: tempfile.TemporaryDirectory | None = None

    def actor_ids(self) -> list[str]:
        return fleet_ids(self.n, self.id_prefix)

    def _common(self) -> list[str]:
        """The options every member's command line shares."""
        return [
            "--board",
            str(self.board),
            "--broker",
            self.broker,
            "--env",
            self.env,
            "--run",
            self.run,
            "--root",
            self.root,
            "--policy-key",
            str(self.policy_key),
            "--emulate",
        ]

    def _seed(self, i: int) -> int:
        return self.seed + 1000 * (i + 1)

    def start(self) -> Fleet:
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.group_procs:
            self._start_groups()
        else:
            self._start_actors()
        log.info(
            "fleet: started %d actors (%s) in %d processes on %s",
            self.n,
            self.board.stem,
            len(self.procs),
            self.broker,
        )
        return self

    def _start_actors(self) -> None:
        for i, actor_id in enumerate(self.actor_ids()):
            cmd = ["actor", *self._common(), "--id", actor_id, "--seed", str(self._seed(i))]
            auth = self.auth(actor_id) if self.auth is not None else None
            if auth is not None:
                cmd += auth.argv()
            self._spawn([*cmd, *self.extra_args], actor_id)

    def _start_groups(self) -> None:
        """Board i goes to process i mod P; each reads its boards from a file (ids,
        seeds, credentials' paths) in the log directory, or a temporary one."""
        if self.log_dir is not None:
            where = self.log_dir
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="edge-rl-fleet-")
            where = Path(self._tmp.name)
        ids = self.actor_ids()
        for k in range(self.group_procs):
            boards = [
                BoardEntry(ids[i], self._seed(i), self.auth(ids[i]) if self.auth else None)
                for i in range(k, self.n, self.group_procs)
            ]
            path = where / f"actors-{k}.boards.json"
            write_boards_file(path, boards)
            cmd = ["actors", *self._common(), "--boards-file", str(path)]
            cmd += ["--start-spread", str(self.start_spread_s)]
            self._spawn([*cmd, *self.extra_args], f"actors-{k}")

    def _spawn(self, args: list[str], name: str) -> None:
        cmd = [sys.executable, "-m", "edge_rl.cli", *args]
        out = subprocess.DEVNULL
        if self.log_dir is not None:
            # Appended to: a resumed run keeps the earlier part's log.
            out = open(self.log_dir / f"{name}.log", "a")  # noqa: SIM115
            self._logs.append(out)
        # A learner killed outright must not leave actors running with nobody to train.
        # A session of its own: a terminal's Ctrl-C goes to the learner, which stops the
        # fleet itself (after its checkpoint), not to every actor at once.
        proc = subprocess.Popen(
            die_with_parent(cmd),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=member_env() | parent_env(),
            start_new_session=True,
        )
        self.procs.append(proc)

    def alive(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def exit_codes(self) -> list[int | None]:
        return [p.poll() for p in self.procs]

    def wait(self, timeout: float) -> bool:
        """Wait for every actor to exit by itself; True if they all did in time."""
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        return not self.alive()

    def stop(self, timeout: float = STOP_GRACE_S) -> None:
        """SIGTERM to each actor (it flushes, says ``stopped`` and exits: no control message
        ends an actor), then SIGKILL to any left after ``timeout``."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        if not self.wait(timeout):
            for p in self.procs:
                if p.poll() is None:
                    p.kill()
            self.wait(5.0)
        for f in self._logs:
            f.close()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def member_env() -> dict[str, str]:
    """The environment of a member process: this one's, without the fleet profile of
    ``edge-rl`` (the ``EDGE_RL_*`` variables and any profile file, cli/profile.py). A
    member's command line says everything it needs; a profile of the user's must not add
    credentials or a CA the run's broker does not use."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDGE_RL_")}
    return env | {"PYTHONUNBUFFERED": "1", "EDGE_RL_PROFILE": os.devnull}
