"""What the learner itself lost of each actor's transitions, per actor session.

    lost = LearnerLosses(max_actors=10_000, topics=Topics("edge-rl", "run"))
    lost.dropped_unread(topic, payload)  # a payload the full inbox dropped: its n
    lost.note("pi-01", session, 64)      # a batch refused after decoding (policy version)
    lost.current(session_of)             # {actor: transitions} of each actor's current session

Those transitions were sent and will never arrive, for certain: fleet control writes their
credit off at once. Waiting for ``credit_timeout_s`` instead stalled a fleet whose actors kept
delivering other batches (each delivery restarts that clock) whenever the lost share filled
the lead (``transport.ingest_queue=2``: 5 s stalls, a 5,000-step run 4x as long;
docs/reliability.md). Written on the transport and ingest threads: every access holds a lock.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import peek_batch


class LearnerLosses:
    def __init__(self, max_actors: int, topics: Topics) -> None:
        self.max_actors = max_actors  # ids kept at most (a forger's invented ids are not)
        self.topics = topics
        self._lost: dict[str, tuple[int, int]] = {}  # actor id -> (session, transitions)
        self._lock = threading.Lock()

    def dropped_unread(self, topic: str, payload: bytes) -> int:
        """The inbox had no room for ``payload`` (transport thread): its transitions, as the
        header claims; a loss of its actor's if under its own id (often before that actor's
        first batch is read: in a burst)."""
        head = peek_batch(payload)
        if head is not None and head[0] == self.topics.actor_of(topic):
            self.note(*head)
        return head[2] if head else 0

    def note(self, actor: str, session: int, n: int) -> None:
        with self._lock:
            if actor not in self._lost and len(self._lost) >= self.max_actors:
                return
            last, before = self._lost.get(actor, (session, 0))
            # A new session (a restarted actor) starts its own count.
            self._lost[actor] = (session, n + (before if last == session else 0))

    def current(self, session_of: Mapping[str, int]) -> dict[str, int]:
        """Per actor, what was lost of the session the learner accepts its batches from (an
        actor none of whose batches was accepted yet: of the one session seen). Reads
        ``session_of`` (ingest's) one key at a time: safe while ingest writes it."""
        with self._lock:
            return {a: n for a, (s, n) in self._lost.items() if session_of.get(a, s) == s}
