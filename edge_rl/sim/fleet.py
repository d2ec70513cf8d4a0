"""Start and stop N actor processes, each ``python -m edge_rl.cli actor ...``.

    with Fleet(n=4, board=board_file("rpi4"), broker=url, env="CartPole-v1", run="r1",
               log_dir=run_dir / "fleet") as fleet:
        ...              # fleet.alive() is False once every process has exited

Each member is the same code path a real board runs; only the board file's emulation
section (a compute slow-down, which each member is told to apply with ``--emulate``: a
real board never applies it) makes this host behave like that board. Members get SIGTERM
when the process that started them dies, however it died (Linux; ``die_with_parent``).

``auth(actor_id)`` gives each member its broker credentials (transport/auth.py): paths and
names on its command line, never a password (that stays in its file or variable).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from edge_rl.broker.executables import die_with_parent
from edge_rl.transport.auth import BrokerAuth
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN

log = logging.getLogger(__name__)


def fleet_ids(n: int, prefix: str = "sim") -> list[str]:
    """The actor ids of a simulated fleet: ``sim-00``, ``sim-01``, ..."""
    return [f"{prefix}-{i:02d}" for i in range(n)]


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
    ) -> None:
        if n < 1:
            raise ValueError("a fleet needs at least one actor")
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
        self.procs: list[subprocess.Popen] = []
        self._logs: list = []

    def actor_ids(self) -> list[str]:
        return fleet_ids(self.n, self.id_prefix)

    def start(self) -> Fleet:
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        for i, actor_id in enumerate(self.actor_ids()):
            cmd = [
                sys.executable,
                "-m",
                "edge_rl.cli",
                "actor",
                "--board",
                str(self.board),
                "--broker",
                self.broker,
                "--env",
                self.env,
                "--id",
                actor_id,
                "--run",
                self.run,
                "--root",
                self.root,
                "--policy-key",
                str(self.policy_key),
                "--seed",
                str(self.seed + 1000 * (i + 1)),
                "--emulate",
                *self.extra_args,
            ]
            auth = self.auth(actor_id) if self.auth is not None else None
            if auth is not None:
                cmd += auth.argv()
            out = subprocess.DEVNULL
            if self.log_dir is not None:
                # Appended to: a resumed run keeps the earlier part's log.
                out = open(self.log_dir / f"{actor_id}.log", "a")  # noqa: SIM115
                self._logs.append(out)
            # A learner killed outright must not leave actors running with nobody to train.
            # A session of its own: a terminal's Ctrl-C goes to the learner, which stops the
            # fleet itself (after its checkpoint), not to every actor at once.
            proc = subprocess.Popen(
                die_with_parent(cmd),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            self.procs.append(proc)
        log.info("fleet: started %d actors (%s) on %s", self.n, self.board.stem, self.broker)
        return self

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

    def stop(self, timeout: float = 10.0) -> None:
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

    def __enter__(self) -> Fleet:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
