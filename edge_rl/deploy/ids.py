"""The actor ids a deployment has issued and the run each is enrolled in:
``CREDS_DIR/issued.json``, next to the CA, and the broker's ACL made from it,
``CREDS_DIR/broker/acl``.

Every board's actor id comes from its bundle, never from its hostname (every Raspberry Pi
OS image calls itself ``raspberrypi``, and two actors of one id take turns being kicked off
the broker). The registry lives in the credentials directory because that is what every
``edge-rl flash`` of a deployment shares (its CA signs the boards, its password file lists
them): an id it has issued is never issued again, for any run, unless asked to
``--rotate`` that board's credentials. Updates hold an exclusive lock, so two flashes at
once cannot hand out the same id.

A board is enrolled in one run: by ``edge-rl flash --run`` (``issue``) or by ``edge-rl
credentials --run`` (``enroll``: credentials made, no bundle yet; a later flash of that id
takes it). Every change rewrites ``broker/acl`` (``acl.deployment_acl``): one ``user``
section per enrolled board with its run spelt out, retired boards left out, so the ACL
follows ``flash``, ``--rotate`` and ``retire`` without anyone editing it. It takes effect
when installed on the broker and Mosquitto reloads (SIGHUP).

    with Registry.open(creds) as reg:
        ids = reg.next_free("pi", 20)           # pi-01 ... pi-20, skipping issued ones
        reg.issue(ids, run="cartpole", board="rpi4", out=bundles)
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

from edge_rl.broker.acl import deployment_acl, mosquitto_acl
from edge_rl.broker.config import check_username
from edge_rl.deploy.credentials import LEARNER
from edge_rl.transport.auth import write_private
from edge_rl.wire.topics import Topics

NAME = "issued.json"
ACL = "broker/acl"
_ACL_HEADER = (
    "edge-rl's ACL of this deployment, made from issued.json by edge-rl credentials --run,",
    "edge-rl flash and edge-rl retire: do not edit (the next change rewrites it). Install it",
    "with mosquitto.passwd (acl_file in host/mosquitto.conf) and reload Mosquitto (SIGHUP).",
    "One section per enrolled board, its run spelt out; a username not named may do nothing.",
)


class DuplicateId(ValueError):
    """An actor id that this deployment has already issued."""


class Registry:
    def __init__(self, path: Path, lock_fd: int, actors: dict[str, dict]) -> None:
        self.path = path
        self._fd = lock_fd
        self.actors = actors

    @classmethod
    def open(cls, creds: Path) -> Registry:
        for directory in reversed([Path(creds), *Path(creds).parents]):
            if not directory.exists():
                directory.mkdir(mode=0o700)
        path = Path(creds) / NAME
        fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)  # released in close(), or when the process dies
        actors = json.loads(path.read_text())["actors"] if path.exists() else {}
        return cls(path, fd, actors)

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def check_new(self, ids: list[str], rotate: bool = False) -> None:
        """Each id well-formed and named once; not issued before (``rotate``: issued before)."""
        if not ids:
            raise ValueError("no actor ids given (--ids ID,ID or --count N)")
        for actor_id in ids:
            check_username(actor_id)
        dupes = sorted({a for a in ids if ids.count(a) > 1})
        if dupes:
            raise DuplicateId(f"actor ids named more than once: {', '.join(dupes)}")
        retired = [a for a in ids if self.actors.get(a, {}).get("retired_unix")]
        if retired:
            raise DuplicateId(f"actor ids retired (edge-rl retire), never issued again: {retired}")
        if rotate:
            unknown = [a for a in ids if a not in self.actors]
            if unknown:
                raise ValueError(f"--rotate is for boards already flashed; never issued: {unknown}")
            return
        taken = [a for a in ids if self.actors.get(a, {}).get("bundle")]
        if taken:
            said = "; ".join(
                f"{a} (run {self.actors[a]['run']}, {self.actors[a]['bundle']})" for a in taken
            )
            raise DuplicateId(
                f"actor id already issued by {self.path}: {said}. Two boards must never "
                "share an id: pick new ids (--count N picks free ones), or re-issue that "
                "board's credentials with --rotate"
            )

    def next_free(self, prefix: str, count: int) -> list[str]:
        if count < 1:
            raise ValueError(f"--count must be at least 1, got {count}")
        out, i = [], 1
        while len(out) < count:
            actor_id = f"{prefix}-{i:02d}"
            if actor_id not in self.actors:
                out.append(actor_id)
            i += 1
        return out

    def enroll(self, ids: list[str], *, run: str, root: str = "edge-rl") -> None:
        """Record ``ids`` (credentials made, not flashed) as boards of ``run``."""
        Topics(root, run)  # ValueError: not a run name
        self.check_new(ids)
        now = round(time.time(), 3)
        for actor_id in ids:
            self.actors[actor_id] = {"run": run, "root": root, "enrolled_unix": now}
        self._save()

    def issue(
        self, ids: list[str], *, run: str, board: str, out: Path, root: str = "edge-rl"
    ) -> None:
        """Record ``ids`` as issued (atomically: the file is replaced, never half-written)."""
        now = time.time()
        for actor_id in ids:
            before = self.actors.get(actor_id, {})
            self.actors[actor_id] = {
                "run": run,
                "root": root,
                "board": board,
                "bundle": str((out / actor_id).resolve()),
                "issued_unix": round(now, 3),
                "rotations": before.get("rotations", -1) + 1,
            }
        self._save()

    def retire(self, ids: list[str]) -> None:
        """Mark ``ids`` retired: kept in the registry, so they are never issued again."""
        unknown = [a for a in ids if a not in self.actors]
        if unknown:
            raise ValueError(f"never issued by {self.path}: {unknown}")
        for actor_id in ids:
            self.actors[actor_id]["retired_unix"] = round(time.time(), 3)
        self._save()

    def boards(self) -> dict[str, Topics]:
        """Each enrolled board that is not retired → the topics of its run."""
        return {
            a: Topics(e.get("root", "edge-rl"), e["run"])
            for a, e in self.actors.items()
            if not e.get("retired_unix")
        }

    def write_acl(self) -> Path:
        """``broker/acl`` from the registry as it is (see the module)."""
        path = self.path.parent / ACL
        path.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.unlink(missing_ok=True)
        write_private(tmp, mosquitto_acl(deployment_acl(LEARNER, self.boards()), _ACL_HEADER))
        tmp.replace(path)
        return path

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": 1, "actors": self.actors}, indent=2) + "\n")
        tmp.replace(self.path)
        self.write_acl()
