"""Actor identity: which process speaks for each actor id, and refusing a second one.

    ids = Identities(window_s=10)
    ids.admit("pi-01", session, state)   # True: this status is the owner's; record it
    ids.owner("pi-01")                   # the session credit is granted to
    ids.refused("pi-01")                 # sessions told to stop (in the actor's grant)

Two boards given the same id (the default hostname ``raspberrypi``, a copied SD card)
are two processes with different sessions under one id. The first one seen owns the id.
A status from another session while the owner is live (it said something else than
``offline`` within ``window_s``) is a duplicate: that newcomer is refused, logged and
counted, and its session is listed in the id's credit grant, on which the actor stops
(docs/protocol.md §5.3). A restarted board is not a duplicate: its old process went
``offline`` (its last will) or silent for ``window_s``; the new session waits that long,
then owns the id. (A broker that hands one client id from one connection to the other
sends the kicked one's last will: a will alone does not free the id, silence does.)

Pure bookkeeping with an injected clock; FleetControl calls it under its lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from edge_rl.wire.messages import MAX_REFUSED

log = logging.getLogger(__name__)


@dataclass
class _Id:
    owner: int
    seen: float  # when the owner last said it was not offline
    gone: float | None = None  # when the owner's last will arrived, if it did
    refused: list[int] = field(default_factory=list)
    waiting: set[int] = field(default_factory=set)  # arrived after the will: a restart?


class Identities:
    def __init__(self, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.clock = clock
        self._ids: dict[str, _Id] = {}
        self.refusals = 0  # statuses of refused sessions, first and repeated

    def admit(self, actor: str, session: int, state: str) -> bool:
        """Whether this status comes from the process that owns ``actor``'s id (now)."""
        now = self.clock()
        ident = self._ids.get(actor)
        if ident is None:
            if state == "offline":
                return False  # the will of a process never seen: nothing to record
            self._ids[actor] = _Id(session, now)
            return True
        if session == ident.owner:
            if state == "offline":
                ident.gone = ident.gone or now
                return True
            ident.seen = now
            ident.gone = None
            for waiting in sorted(ident.waiting):  # the owner is back: they were duplicates
                self._refuse(actor, ident, waiting)
            ident.waiting.clear()
            return True
        if session in ident.refused or state == "offline":
            self.refusals += session in ident.refused
            return False
        quiet = now - ident.seen
        if quiet >= self.window_s:  # the old process is gone: will or no will, it is silent
            log.info(
                "%s: session %d takes over from %d (silent %.0f s)",
                actor,
                session,
                ident.owner,
                quiet,
            )
            self._ids[actor] = _Id(session, now, refused=ident.refused)
            return True
        if ident.gone is not None:  # a restart, probably: wait until the old one is silent
            ident.waiting.add(session)  # long enough (or comes back: then it was a duplicate)
            excess = len(ident.waiting) - MAX_REFUSED
            if excess > 0:
                ident.waiting = set(sorted(ident.waiting)[excess:])
            return False
        self._refuse(actor, ident, session)
        return False

    def _refuse(self, actor: str, ident: _Id, session: int) -> None:
        ident.refused = (ident.refused + [session])[-MAX_REFUSED:]
        self.refusals += 1
        log.error(
            "actor id %r is used by two live processes (sessions %d and %d): the newcomer %d "
            "is refused and told to stop. Give every board its own id (edge-rl flash does).",
            actor,
            ident.owner,
            session,
            session,
        )

    def owner(self, actor: str) -> int | None:
        ident = self._ids.get(actor)
        return None if ident is None else ident.owner

    def refused(self, actor: str) -> tuple[int, ...]:
        ident = self._ids.get(actor)
        return () if ident is None else tuple(ident.refused)

    @property
    def refused_sessions(self) -> int:
        return sum(len(i.refused) for i in self._ids.values())
