"""Loss write-off: of each actor's current process, the transitions that will not arrive,
whose credit goes back to the fleet's lead.

    write_off = WriteOff(quiet)
    write_off.lost(status, received, at_learner, now)   # per round, per actor online
    write_off.delivered_at("pi-01")                     # when its count last moved
    write_off.total()                                   # written off by the timeout

Lost at once: what the actor reports dropped (its full spool, its size limit) and what the
learner itself dropped of its data (a full inbox, ``Ingest.lost``; at most what is in
transit). Lost by the timeout: what it reports sent that has not arrived while its count
stood still for ``Quiet.bound_s`` (a broker restart loses in-flight batches).

Credit against delivery: a board that reports its grant sent and delivers none of it has
its claim written off and would be granted again, over and over. ``delivery`` is the
share of what it was credited for that arrived, ``(received + c) / (received + written
off + c)`` with ``c = DELIVERY_PRIOR`` (a new board starts trusted): the more it claims
and the less it sends, the less of the fleet's lead it may hold (CreditLedger's
``trust``). A written-off batch that lands after all is taken within its session's
grant: refusing it (tried) threw away 13 % of an honest fleet's data after a broker node
failed over, and the cap above already bounds what a board that claims and withholds
may hold.

Pure bookkeeping: FleetControl calls it under its lock, with its clock's ``now``.
"""

from __future__ import annotations

import logging

from edge_rl.learner.fleet.timing import Quiet
from edge_rl.types import ActorStatus

log = logging.getLogger(__name__)

DELIVERY_PRIOR = 200  # transitions: what a board is trusted with before it delivers any


class WriteOff:
    def __init__(self, quiet: Quiet) -> None:
        self.quiet = quiet
        self.written_off: dict[str, int] = {}  # actor -> in-transit transitions written off
        self.session_of: dict[str, int] = {}  # actor -> the session they were written off of
        self._progress: dict[str, tuple[int, float]] = {}  # actor -> (received, since when)

    def lost(self, status: ActorStatus, received: int, at_learner: int, now: float) -> int:
        """Transitions of ``status``'s process that will not arrive, ``received`` of them
        in: what it reports dropped; what the learner itself dropped (``at_learner``, part
        of what is in transit); and what it reports sent that has not arrived for
        ``Quiet.bound_s`` since its count last moved."""
        actor = status.actor_id
        last = self._progress.get(actor)
        if last is None or last[0] != received:
            self._progress[actor] = last = (received, now)
        lost = status.transitions_dropped + status.transitions_oversize
        in_transit = status.transitions_sent - received
        if in_transit > 0 and self.quiet.silent(last[1], now):
            if self.written_off.get(actor, 0) < in_transit:
                log.warning(
                    "%s: %d transitions sent but not received in %.0f s: written off",
                    actor,
                    in_transit,
                    self.quiet.bound_s(),
                )
            self.written_off[actor] = in_transit
            self.session_of[actor] = status.session
            return lost + in_transit
        # At once: waiting for the timeout stalled an actor that kept delivering (its progress
        # restarts the clock) every time its lost share filled the lead (ingest_queue=2: 5 s
        # stalls, a 5,000-step run 4x as long; docs/reliability.md).
        return lost + max(0, min(at_learner, in_transit))

    def delivery(self, actor: str, session: int, received: int) -> float:
        """The share of ``actor``'s process ``session``'s claims that arrived (module
        docstring), in (0, 1]; 1 while nothing of that session was written off."""
        written = self.written_off.get(actor, 0) if self.session_of.get(actor) == session else 0
        return (received + DELIVERY_PRIOR) / (received + written + DELIVERY_PRIOR)

    def delivered_at(self, actor: str) -> float:
        """When ``actor``'s received count last moved (as ``lost`` saw it)."""
        return self._progress[actor][1]

    def total(self) -> int:
        """Transitions written off by the timeout, over the fleet (the summary's count)."""
        return sum(self.written_off.values())
