"""What ingest counted: batches and transitions taken, duplicates, rejects by reason, each
actor's share, episode returns, and the run's budget.

    accounting = Accounting(max_transitions=50_000)
    accounting.reject("stale", "stale: v3 is 4 behind", transitions=64)  # logged once per reason
    accounting.duplicate(64)
    n = accounting.within_budget(64)   # what fits of the budget; the rest counts as over_budget
    accounting.accepted(("pi-01", 7), seq, reward[:n], done[:n])
    accounting.stats()                 # IngestStats: a frozen copy for metrics and the summary

Written on the ingest thread. Fleet control (``received``, ``session_of``) and the main
thread (metrics, ``returns_since``) read while batches arrive: every counter is written
and read under one lock.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Mapping, Set
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from edge_rl.learner.ingest.dedup import SessionKey

log = logging.getLogger(__name__)

RETURNS_KEPT = 100  # finished episodes' returns kept for metrics and the exploration schedule


@dataclass(frozen=True)
class IngestStats:
    batches: int  # accepted into replay
    transitions: int  # accepted into replay
    duplicate_batches: int
    duplicate_transitions: int
    rejected_batches: int
    rejected_transitions: int  # when the header was readable enough to count them
    episodes: int
    over_budget: int  # valid transitions past the run's budget: not added
    rejected: Mapping[str, int]  # by reason; 0 for a reason never counted
    # Transitions accepted from each actor's current process (session): what the actor's own
    # env-step counter can be compared with when the learner grants credit.
    by_actor: Mapping[str, int]
    total_by_actor: Mapping[str, int]  # ... over all its sessions
    returns: tuple[float, ...]  # of the last RETURNS_KEPT episodes, oldest first


COUNTS = (  # the int fields of IngestStats: the checkpoint's "stats" keeps them by name
    "batches",
    "transitions",
    "duplicate_batches",
    "duplicate_transitions",
    "rejected_batches",
    "rejected_transitions",
    "episodes",
    "over_budget",
)


class Accounting:
    def __init__(self, max_transitions: int | None = None) -> None:
        """``max_transitions``: the run's budget; a batch that crosses it is cut there."""
        self.max_transitions = max_transitions
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter(dict.fromkeys(COUNTS, 0))
        self._rejected: Counter[str] = Counter()
        self._by_actor: Counter[str] = Counter()
        self._total_by_actor: Counter[str] = Counter()
        self._returns: deque[float] = deque(maxlen=RETURNS_KEPT)
        self._session_of: dict[str, int] = {}  # actor id -> the session by_actor counts
        # Each session's open episode: the seq of the batch it goes on in, and its reward so
        # far (None: part of it was in a batch that never came, so it has no return).
        self._open: dict[SessionKey, tuple[int, float | None]] = {}
        # Read one key at a time on other threads (``LearnerLosses.current``).
        self.session_of: Mapping[str, int] = MappingProxyType(self._session_of)

    # --- ingest thread -----------------------------------------------------------------

    def reject(self, reason: str, message: str, transitions: int) -> None:
        """A refused batch of ``transitions`` (as its header claims; 0 if unreadable)."""
        with self._lock:
            self._counts["rejected_batches"] += 1
            self._counts["rejected_transitions"] += transitions
            self._rejected[reason] += 1
            first = self._rejected[reason] == 1
        if first:  # log once per reason; the counters say how often
            log.warning("transition batch rejected (%s): %s", reason, message)

    def duplicate(self, transitions: int) -> None:
        with self._lock:
            self._counts["duplicate_batches"] += 1
            self._counts["duplicate_transitions"] += transitions

    def within_budget(self, n: int) -> int:
        """How many of a batch's ``n`` transitions the budget still takes, exactly; the
        rest is counted as over budget."""
        if self.max_transitions is None:
            return n
        fits = max(0, min(n, self.max_transitions - self._counts["transitions"]))
        if fits < n:
            with self._lock:
                self._counts["over_budget"] += n - fits
        return fits

    def accepted(
        self, key: SessionKey, seq: int, reward: np.ndarray, done: np.ndarray
    ) -> list[float]:
        """``len(reward)`` transitions of batch ``seq`` of ``key``'s session went into
        replay; ``done`` (terminated or truncated) ends an episode, whose return then counts.
        The returns of the episodes it ended."""
        actor, session = key
        finished = self._finish_episodes(key, seq, reward, done)
        with self._lock:
            self._counts["episodes"] += len(finished)
            self._returns.extend(finished)
            self._counts["batches"] += 1
            self._counts["transitions"] += len(reward)
            if self._session_of.get(actor, session) != session:
                self._by_actor[actor] = 0  # a restarted actor counts from 0
            self._session_of[actor] = session
            self._by_actor[actor] += len(reward)
            self._total_by_actor[actor] += len(reward)
        return finished

    def accepted_from(self, key: SessionKey) -> int:
        """Transitions in replay from ``key``'s session (0 if it is not the actor's current
        one: a session's count starts when its first batch is taken)."""
        actor, session = key
        return self._by_actor[actor] if self._session_of.get(actor) == session else 0

    def forget(self, key: SessionKey) -> None:
        """A session no longer tracked: its open episode will not be finished here."""
        self._open.pop(key, None)

    def _finish_episodes(
        self, key: SessionKey, seq: int, reward: np.ndarray, done: np.ndarray
    ) -> list[float]:
        """Returns of the episodes ``done`` ends; the reward after the last stays open for
        batch ``seq + 1``. An episode that began before a seq gap (a batch the board's spool
        dropped, lost in transit or refused) has no return: its sum would run on into the
        next episode. A session's first episode begins in its batch 0."""
        nxt, running = self._open.get(key, (0, 0.0))
        if seq != nxt:
            running = None
        start, finished = 0, []
        for end in np.flatnonzero(done):
            if running is not None:
                finished.append(running + float(reward[start : end + 1].sum()))
            running, start = 0.0, end + 1
        if running is not None:
            running += float(reward[start:].sum())
        self._open[key] = (seq + 1, running)
        return finished

    # --- any thread ----------------------------------------------------------------------

    @property
    def transitions(self) -> int:
        """Transitions in replay: the run's env steps."""
        return self._counts["transitions"]

    def received(self) -> tuple[int, dict[str, int]]:
        """Transitions in replay, in all and from each actor's current session."""
        with self._lock:
            return self._counts["transitions"], dict(self._by_actor)

    def recent_return(self, n: int = 20) -> float | None:
        with self._lock:
            r = list(self._returns)[-n:]
        return float(np.mean(r)) if r else None

    def returns_since(self, seen: int) -> tuple[list[float], int]:
        """Returns of the episodes finished after the first ``seen``, and the new count.

        At most the last RETURNS_KEPT: a caller that polls less often than that many
        episodes finish loses the oldest of them, and knows how many from the count.
        """
        with self._lock:
            n = self._counts["episodes"]
            new = list(self._returns)[-(n - seen) :] if n > seen else []
        return new, n

    def stats(self) -> IngestStats:
        with self._lock:
            return IngestStats(
                **{k: self._counts[k] for k in COUNTS},
                rejected=MappingProxyType(Counter(self._rejected)),
                by_actor=MappingProxyType(Counter(self._by_actor)),
                total_by_actor=MappingProxyType(Counter(self._total_by_actor)),
                returns=tuple(self._returns),
            )

    # --- durable runs: the checkpoint's "stats", "session_of", "episode_returns" ---------

    def state(self) -> dict:
        with self._lock:
            stats = {k: self._counts[k] for k in COUNTS}
            stats.update(
                rejected=dict(self._rejected),
                by_actor=dict(self._by_actor),
                returns=list(self._returns),
                total_by_actor=dict(self._total_by_actor),
            )
            session_of = dict(self._session_of)
        return {
            "stats": stats,
            "session_of": session_of,
            "episode_returns": [[a, n, r, nxt] for (a, n), (nxt, r) in self._open.items()],
        }

    def load_state(self, state: Mapping, restarted: Set[str] = frozenset()) -> None:
        """``restarted``: actors whose processes are new (the resumed learner's own
        simulated fleet): their sessions are forgotten, and their credit starts over."""
        st = state["stats"]
        with self._lock:
            for k in COUNTS:
                self._counts[k] = int(st.get(k, 0))
            self._rejected = Counter(st["rejected"])
            self._by_actor = Counter(
                {a: n for a, n in st["by_actor"].items() if a not in restarted}
            )
            self._total_by_actor = Counter(st.get("total_by_actor", {}))
            self._returns.clear()
            self._returns.extend(st["returns"])
            self._session_of.clear()
            self._session_of.update(
                {a: s for a, s in state["session_of"].items() if a not in restarted}
            )
        # A row without the next seq (a checkpoint written before it was kept): the open
        # episode has no return.
        self._open = {
            (a, n): (nxt[0], r) if nxt else (-1, None)
            for a, n, r, *nxt in state["episode_returns"]
            if a not in restarted
        }
