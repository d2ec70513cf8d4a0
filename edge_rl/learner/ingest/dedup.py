"""Deduplication per ``(actor_id, session, seq)`` (protocol.md §3.1).

    dedup = Dedup()
    dedup.first_time(("pi-01", 7), seq)   # False for a batch seen before: a duplicate
    dedup.stats().missing_batches        # gaps below each session's newest seq

MQTT QoS 1 is at-least-once: a batch may arrive twice after a reconnect. Gaps in ``seq``
(batches an actor dropped from its spool, or the broker dropped) are counted, not waited
for. Which sessions are tracked is ``Admission``'s call; ``forget`` drops one. Written on
the ingest thread; ``stats`` is read at the run's end.

A gap is bounded by the session's unused credit (``room``): every batch holds at least one
transition, stepped under credit. A seq that would open a wider gap is refused
(``over_credit``), so one message cannot make ``missing_batches`` 2^53. ``missing_batches``
counts only what this run start could have lost: the gaps after a session's first batch
seen. A process numbers its batches on from an earlier run start (protocol.md §6 rule 9),
so the seqs below its first batch here are, as far as the learner can tell, another run
start's; a batch of this run start lost before that first one still shows, as the credit
it used (written off, ``credit_written_off``).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from edge_rl.learner.ingest.validate import Rejected

SessionKey = tuple[str, int]  # (actor id, session)
MAX_ABOVE = 10_000  # seqs kept above a gap; past it, the gap is given up on


class SeqTracker:
    """Which sequence numbers of one actor session have been seen (bounded memory)."""

    def __init__(self, floor: int = -1, above: Set[int] = frozenset(), max_seq: int = -1) -> None:
        self.floor = floor  # every seq <= floor has been seen
        self.above: set[int] = set(above)  # seen seqs above the floor
        self.max_seq = max_seq

    def first_time(self, seq: int) -> bool:
        if seq <= self.floor or seq in self.above:
            return False
        self.above.add(seq)
        self.max_seq = max(self.max_seq, seq)
        while self.floor + 1 in self.above:
            self.floor += 1
            self.above.discard(self.floor)
        if len(self.above) > MAX_ABOVE:  # a long-lost batch will not come: move on
            self.floor = min(self.above) - 1
        return True

    @property
    def missing(self) -> int:
        return self.max_seq - self.floor - len(self.above)


@dataclass(frozen=True)
class DedupStats:
    sessions: int  # (actor, session) pairs tracked
    missing_batches: int  # seqs never seen below each session's newest


class Dedup:
    def __init__(self) -> None:
        self._seqs: dict[SessionKey, SeqTracker] = {}

    def first_time(self, key: SessionKey, seq: int, room: int | None = None) -> bool:
        """Marks ``seq`` of ``key``'s session seen; False if it was before. ``room``: the
        session's unused credit (None: unbounded); raises ``Rejected("over_credit")`` for a
        seq that would open a gap wider than that, marking nothing."""
        tracker = self._seqs.get(key)
        if tracker is None:  # below it: an earlier run start's, or not this one's to count
            tracker = self._seqs[key] = SeqTracker(seq - 1, max_seq=seq - 1)
        elif room is not None and seq - max(tracker.max_seq, tracker.floor) - 1 > room:
            raise Rejected("over_credit", f"seq {seq} skips more batches than {room} steps")
        return tracker.first_time(seq)

    def forget(self, key: SessionKey) -> None:
        self._seqs.pop(key, None)

    def stats(self) -> DedupStats:
        trackers = list(self._seqs.values())
        return DedupStats(len(trackers), sum(t.missing for t in trackers))

    # --- durable runs: the checkpoint's "seqs", [actor, session, floor, above, max_seq] ---

    def state(self) -> dict[str, list[list]]:
        seqs = [[a, n, t.floor, sorted(t.above), t.max_seq] for (a, n), t in self._seqs.items()]
        return {"seqs": seqs}

    def load_state(self, state: Mapping, restarted: Set[str] = frozenset()) -> None:
        """``restarted``: actors whose processes are new: their sessions are forgotten."""
        self._seqs = {
            (a, n): SeqTracker(floor, above, max_seq)
            for a, n, floor, above, max_seq in state["seqs"]
            if a not in restarted
        }
