"""Idleness: an actor that holds credit and neither steps nor delivers is granted no more,
and what it holds is granted again to the others.

    idle = IdleWatch(quiet)
    idle.idle("pi-01", env_steps, holds, delivered_at, now)   # per round, per actor online
    lost = idle.reclaim(idle_actors, held, lost)              # what the idle hold: free again
    idle.reclaimed()                                          # the lead's overcommit so far

What an idle actor holds does not count as outstanding: ingest takes no more of its data
than its grant, nor past the budget, so the lead may be granted again to the others
(overcommitted by at most what idle actors hold). Else a board that holds credit and never
steps stalls the fleet at the budget's end.

Pure bookkeeping: FleetControl calls it under its lock, with its clock's ``now``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from edge_rl.learner.fleet.timing import Quiet


class IdleWatch:
    def __init__(self, quiet: Quiet) -> None:
        self.quiet = quiet
        self._stepping: dict[str, tuple[int, float]] = {}  # actor -> (env steps, since when)
        # What idle actors held unstepped and was granted again: the lead's overcommit, a
        # total of idle spells that ended and the most of each spell going on.
        self._ended = 0
        self._spells: dict[str, int] = {}

    def idle(self, actor: str, steps: int, holds: bool, delivered_at: float, now: float) -> bool:
        """Whether ``actor`` ``holds`` credit and has neither stepped (``steps``, by its
        statuses) nor delivered (since ``delivered_at``) for ``Quiet.bound_s``. The clock
        starts when it comes to hold credit: a board that waited long for its first grant
        is not idle the moment it gets one."""
        last = self._stepping.get(actor)
        if last is None or last[0] != steps or not holds:
            self._stepping[actor] = last = (steps, now)
        return holds and self.quiet.silent(max(last[1], delivered_at), now)

    def reclaim(
        self, idle: Collection[str], held: Mapping[str, int], lost: Mapping[str, int]
    ) -> dict[str, int]:
        """``lost`` with what each ``idle`` actor ``held`` (granted, not delivered) counted
        lost too, so that it is no longer outstanding; the spells of actors that moved
        again end and are counted."""
        for a in [a for a in self._spells if a not in idle]:  # it moved again
            self._ended += self._spells.pop(a)
        out = dict(lost)
        for a in idle:
            if held[a] > out[a]:
                self._spells[a] = max(self._spells.get(a, 0), held[a] - out[a])
                out[a] = held[a]
        return out

    def reclaimed(self) -> int:
        """What idle actors held unstepped and was granted again (the summary's count)."""
        return self._ended + sum(self._spells.values())
