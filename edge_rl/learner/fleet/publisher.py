"""Grant publishing: each actor's credit grant on its own topic (retained), at most
``fleet.max_grants_per_s`` over the fleet.

    out = GrantPublisher(topics, publish, grants, fleet.max_grants_per_s)
    out.publish(credits, ids, run_id, now)   # each grant that changed (main thread)
    out.republish()                          # after a (re)connect: every grant again
    out.resend("pi-01")                      # a board said hello: its last grant again
    out.clear()                              # the learner leaves: no grant is retained

Each grant is written to ``Grants`` before it is published: ingest bounds an actor's data
by it, and the status check what a status may claim. A grant to a new session, or one that
refuses a session, goes at once; more credit for a known one waits its turn (oldest grant
first) and is still in the ledger: it goes out whole later. A grant the transport refused
is sent again next round.

Pure bookkeeping around ``publish``: FleetControl calls it under its lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.identity import Identities
from edge_rl.types import CreditGrant
from edge_rl.wire.messages import encode_credit
from edge_rl.wire.topics import Topics

Publish = Callable[..., bool]  # Transport.publish


class RateBound:
    """A token bucket: ``take(n)`` says how many of ``n`` messages may go now, at most
    ``per_s`` a second on average and half a second's worth at once (``per_s`` 0: all)."""

    def __init__(self, per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_s = per_s
        self._clock = clock
        self._burst = max(1.0, per_s / 2)
        self._tokens = self._burst
        self._t = clock()

    def take(self, n: int) -> int:
        if self.per_s <= 0:
            return n
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._t) * self.per_s)
        self._t = now
        k = min(n, int(self._tokens))
        self._tokens -= k
        return k


class GrantPublisher:
    def __init__(
        self,
        topics: Topics,
        publish: Publish,
        grants: Grants,
        max_grants_per_s: float,
        rate_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics = topics
        self._publish = publish
        self.grants = grants
        self._rate = RateBound(max_grants_per_s, rate_clock)
        self._last: dict[str, CreditGrant] = {}  # the last grant published to each actor
        self._granted_at: dict[str, float] = {}  # actor -> when its last grant went out
        self.unsent = 0  # grants the transport refused: sent again next round

    def publish(self, credits: Mapping[str, int], ids: Identities, run_id: str, now: float) -> None:
        """Publish each actor's grant that changed: to the session that owns its id (none
        to an id no session owns yet), with the sessions refused under it."""
        waiting = []
        for actor, credit in credits.items():
            owner = ids.owner(actor)
            if owner is None:
                continue
            grant = CreditGrant(run_id, owner, credit, ids.refused(actor))
            last = self._last.get(actor)
            if last == grant:
                continue
            if last is None or (last.session, last.refused) != (grant.session, grant.refused):
                self._send(actor, grant, now)
            else:
                waiting.append((self._granted_at.get(actor, 0.0), actor, grant))
        for _, actor, grant in sorted(waiting)[: self._rate.take(len(waiting))]:
            self._send(actor, grant, now)

    def _send(self, actor: str, grant: CreditGrant, now: float) -> None:
        """Record ``grant`` and publish it. One the transport refused (its queue full, or
        not connected) is not taken as sent, and the next round sends it again: a grant
        goes out only when it changes, so a lost one would never be repeated, and a board
        that never hears of its credit does not step, is frozen as idle, and starves."""
        self.grants.set(actor, grant.session, grant.credit)  # before it can step under it
        if not self._publish(self.topics.credit(actor), encode_credit(grant), retain=True):
            self.unsent += 1
            return
        self._last[actor] = grant
        self._granted_at[actor] = now

    def republish(self) -> None:
        """Every actor's last grant again (the broker may have lost them)."""
        for actor, grant in self._last.items():
            self._publish(self.topics.credit(actor), encode_credit(grant), retain=True)

    def resend(self, actor: str) -> None:
        """``actor``'s last grant again, if it was granted: none hangs on a retained one."""
        grant = self._last.get(actor)
        if grant is not None:
            self._publish(self.topics.credit(actor), encode_credit(grant), retain=True)

    def clear(self) -> None:
        """The grants stop being retained (an empty retained payload clears one), so that a
        board that reconnects meanwhile takes no stale credit."""
        for actor in self._last:
            self._publish(self.topics.credit(actor), b"", retain=True)
        self._last.clear()
