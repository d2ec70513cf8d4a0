"""Env-step credit: how far each actor may run ahead of what the learner has trained on.

    ledger = CreditLedger()
    credits = ledger.grant(allowed, received_total, by_actor, known_actors, lost)
    # -> {actor_id: env-step count (since the actor's process start) it may step up to}

Credit, once granted, cannot be taken back (an actor may already have used it), so a
grant only ever grows. What is neither received nor outstanding is shared evenly among the
known actors (a remainder to those granted least). Outstanding credit is what an actor was
granted and has not delivered, less what is known to be ``lost`` on the way (dropped by the
actor's full spool or size limit, or sent and never received: fleet_control.py decides):
lost credit goes back to the pool, so a lost batch can no longer stall a run. The ingest
side caps the budget itself (a written-off batch that arrives after all is not counted
twice). No TensorFlow, no I/O: a pure ledger.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence


class CreditLedger:
    def __init__(self) -> None:
        self.granted: dict[str, int] = {}  # actor id -> env steps it may take in all
        self._received_from: dict[str, int] = {}  # actor id -> transitions counted so far

    def grant(
        self,
        allowed: int,
        received: int,
        by_actor: Mapping[str, int],
        known: Sequence[str],
        lost: Mapping[str, int] | None = None,
        frozen: Collection[str] = (),
        stepped: Mapping[str, int] | None = None,
    ) -> dict[str, int]:
        """Credits for ``known`` actors, given ``received`` transitions of ``allowed``.

        ``by_actor`` counts what each actor's current process delivered; a count that goes
        down means the actor restarted (new session), and its grant restarts from there.
        ``lost``: of each actor's current process, transitions that will never arrive.
        ``frozen``: known actors whose grant does not grow (it still counts as outstanding).
        ``stepped``: each actor's env steps, by its status: it was granted at least that much,
        if by an earlier learner (one resumed from a checkpoint: its grants below what the
        actors had stepped freed no step, and its run stalled).
        """
        lost, stepped = lost or {}, stepped or {}
        known = sorted(known)
        for a in known:
            got = by_actor.get(a, 0)
            if got < self._received_from.get(a, 0):
                self.granted[a] = got
            self._received_from[a] = got
            self.granted[a] = max(self.granted.get(a, 0), got, stepped.get(a, 0))
        outstanding = sum(
            max(0, self.granted[a] - by_actor.get(a, 0) - lost.get(a, 0)) for a in known
        )
        available = allowed - received - outstanding
        growing = [a for a in known if a not in frozen]
        if available > 0 and growing:
            share, extra = divmod(available, len(growing))
            # The remainder goes to the actors granted least so far. (Giving it to the first
            # in name order starved the others when the learner frees fewer steps per grant
            # than there are actors: a slow learner freed 1-2 steps each time, and sim-00 and
            # sim-01 took every one of them.)
            behind = sorted(growing, key=lambda a: (self.granted[a], a))[:extra]
            for a in growing:
                self.granted[a] += share + (a in behind)
        return {a: self.granted[a] for a in known}
