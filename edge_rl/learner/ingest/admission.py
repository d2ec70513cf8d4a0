"""Which (actor, session) pairs ingest keeps state for: bounded, so a forger's invented ids
and an actor restarting in a loop cannot grow the learner's memory.

    admission = Admission(max_actors=10_000, max_sessions=8)
    for old in admission.admit("pi-01", session):   # Rejected("too_many_actors") past the ids
        ...forget old's sequence numbers and open episode

At most ``max_actors`` ids; of each, its newest ``max_sessions`` sessions (an older
session's batches are long delivered or lost). Ingest thread only.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from edge_rl.learner.ingest.dedup import SessionKey
from edge_rl.learner.ingest.validate import Rejected


@dataclass(frozen=True)
class AdmissionStats:
    actors: int  # ids with state kept
    sessions: int  # (actor, session) pairs with state kept


class Admission:
    def __init__(self, max_actors: int = 10_000, max_sessions: int = 8) -> None:
        self.max_actors = max_actors
        self.max_sessions = max_sessions
        self._sessions: dict[str, list[int]] = {}  # actor id -> its sessions, oldest first

    def admit(self, actor: str, session: int) -> list[SessionKey]:
        """Room for ``(actor, session)``: the pairs forgotten to make it (an actor's oldest
        session past ``max_sessions``); none if it was admitted before. Raises
        ``Rejected("too_many_actors")`` for a new id past ``max_actors``, keeping nothing."""
        sessions = self._sessions.get(actor)
        if sessions is None:
            if len(self._sessions) >= self.max_actors:
                raise Rejected("too_many_actors", f"{actor!r}: over max_actors")
            sessions = self._sessions[actor] = []
        elif session in sessions:
            return []
        sessions.append(session)
        forgotten = []
        while len(sessions) > self.max_sessions:
            forgotten.append((actor, sessions.pop(0)))
        return forgotten

    def stats(self) -> AdmissionStats:
        return AdmissionStats(len(self._sessions), sum(map(len, self._sessions.values())))

    # --- durable runs: the checkpoint's "sessions" -------------------------------------

    def state(self) -> dict[str, dict[str, list[int]]]:
        return {"sessions": {a: list(s) for a, s in self._sessions.items()}}

    def load_state(self, state: Mapping, restarted: Set[str] = frozenset()) -> None:
        """``restarted``: actors whose processes are new: their sessions are forgotten."""
        self._sessions = {a: list(s) for a, s in state["sessions"].items() if a not in restarted}
