"""Ingest: decode → validate → staleness filter → dedup → replay. Runs on its own thread.

    ingest = Ingest(spec, replay, topics, latest_version=lambda: node.policy_version)
    ingest.handle(topic, payload)      # never raises: rejects are counted and logged once

Deduplication is per ``(actor_id, session, seq)``: MQTT QoS 1 is at-least-once, so a
batch may arrive twice after a reconnect. Gaps in ``seq`` (batches an actor dropped from
its spool, or the broker dropped) are counted, not waited for.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from edge_rl.config import RunConfig
from edge_rl.learner.ingest.lost import LearnerLosses
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import decode_transitions, peek_count

log = logging.getLogger(__name__)


class SeqTracker:
    """Which sequence numbers of one actor session have been seen (bounded memory)."""

    def __init__(self) -> None:
        self.floor = -1  # every seq <= floor has been seen
        self.above: set[int] = set()  # seen seqs above the floor
        self.max_seq = -1

    def first_time(self, seq: int) -> bool:
        if seq <= self.floor or seq in self.above:
            return False
        self.above.add(seq)
        self.max_seq = max(self.max_seq, seq)
        while self.floor + 1 in self.above:
            self.floor += 1
            self.above.discard(self.floor)
        if len(self.above) > 10_000:  # a long-lost batch will not come: move on
            self.floor = min(self.above) - 1
        return True

    @property
    def missing(self) -> int:
        return self.max_seq - self.floor - len(self.above)


@dataclass
class IngestStats:
    batches: int = 0
    transitions: int = 0  # accepted into replay
    duplicate_batches: int = 0
    duplicate_transitions: int = 0
    rejected_batches: int = 0
    rejected_transitions: int = 0  # when the header was readable enough to count them
    rejected: Counter[str] = field(default_factory=Counter)  # by reason
    # Transitions accepted from each actor's current process (session): what the actor's own
    # env-step counter can be compared with when the learner grants credit.
    by_actor: Counter[str] = field(default_factory=Counter)
    total_by_actor: Counter[str] = field(default_factory=Counter)  # ... over all its sessions
    episodes: int = 0
    over_budget: int = 0  # valid transitions past the run's budget: not added
    returns: deque[float] = field(default_factory=lambda: deque(maxlen=100))


class Ingest:
    def __init__(
        self,
        spec: EnvSpec,
        replay: ReplayBuffer,
        topics: Topics,
        latest_version: Callable[[], int],
        max_payload_bytes: int = 1_000_000,
        max_policy_lag: int | None = None,
        max_abs_observation: float = 1e6,
        max_abs_reward: float = 1e6,
        max_actors: int = 10_000,
        max_sessions_per_actor: int = 8,
        max_transitions: int | None = None,
        run_id: str | None = None,
    ) -> None:
        """``max_transitions``: the run's budget; a batch that crosses it is cut there.
        ``run_id``: only batches stepped for this start of the run are taken."""
        self.spec = spec
        self.replay = replay
        self.topics = topics
        self.latest_version = latest_version
        self.max_payload_bytes = max_payload_bytes
        self.max_policy_lag = max_policy_lag
        self.max_abs_observation = max_abs_observation
        self.max_abs_reward = max_abs_reward
        # Bounded state: ids past max_actors are refused, and of each actor only the newest
        # sessions are tracked (an old session's batches are long delivered or lost).
        self.max_actors = max_actors
        self.max_sessions = max_sessions_per_actor
        self.max_transitions = max_transitions
        self.run_id = run_id
        self._sessions: dict[str, list[int]] = {}  # actor id -> its sessions, oldest first
        self.stats = IngestStats()
        self._seqs: dict[tuple[str, int], SeqTracker] = {}
        self._ep_return: dict[tuple[str, int], float] = {}
        self._session_of: dict[str, int] = {}  # actor id -> its latest session
        self.learner_losses = LearnerLosses(max_actors, topics)  # what the learner itself lost
        self.lock = threading.Lock()  # guards stats for readers on other threads

    @classmethod
    def for_run(
        cls,
        cfg: RunConfig,
        spec: EnvSpec,
        replay: ReplayBuffer,
        latest_version: Callable[[], int],
        run_id: str,
    ) -> Ingest:
        """The learner's ingest: limits from the run config."""
        return cls(
            spec,
            replay,
            Topics(cfg.transport.root, cfg.run),
            latest_version,
            max_payload_bytes=cfg.transport.max_payload_bytes,
            max_policy_lag=cfg.max_policy_lag,
            max_abs_observation=cfg.max_abs_observation,
            max_abs_reward=cfg.max_abs_reward,
            max_actors=cfg.fleet.max_actors,
            max_transitions=cfg.total_env_steps,
            run_id=run_id,
        )

    def handle(self, topic: str, payload: bytes) -> bool:
        """Ingest one transition payload; True when it went into replay. Never raises."""
        try:
            return self._handle(topic, payload)
        except Exception as e:  # noqa: BLE001 - a payload must never kill the ingest thread
            log.exception("unexpected error ingesting a batch from %s", topic)
            self._reject(CodecError("internal_error", f"{type(e).__name__}: {e}"), payload)
            return False

    def _handle(self, topic: str, payload: bytes) -> bool:
        try:
            batch = decode_transitions(payload, self.spec, self.max_payload_bytes)
            if batch.actor_id != self.topics.actor_of(topic):
                raise CodecError("actor_mismatch", f"{batch.actor_id!r} published on {topic}")
            if self.run_id is not None and batch.run_id != self.run_id:
                raise CodecError("wrong_run", f"stepped for run {batch.run_id!r}")
            self._check_magnitudes(batch)
        except CodecError as e:
            self._reject(e, payload)  # seq unread or untrusted: a gap stays a gap
            return False
        key = (batch.actor_id, batch.session)
        if key not in self._seqs and not self._admit(*key):
            self._reject(
                CodecError("too_many_actors", f"{batch.actor_id!r}: over max_actors"), payload
            )
            return False
        tracker = self._seqs.setdefault(key, SeqTracker())
        if not tracker.first_time(batch.seq):
            with self.lock:
                self.stats.duplicate_batches += 1
                self.stats.duplicate_transitions += len(batch)
            return False
        # A well-formed batch from its own actor: seen from here on, so a version reject
        # below is counted as rejected, not also as missing, and its resend as a duplicate.
        latest = self.latest_version()
        try:
            if batch.policy_version > latest:
                raise CodecError("unknown_policy", f"v{batch.policy_version} > latest v{latest}")
            if (
                self.max_policy_lag is not None
                and latest - batch.policy_version > self.max_policy_lag
            ):
                raise CodecError(
                    "stale", f"v{batch.policy_version} is {latest - batch.policy_version} behind"
                )
        except CodecError as e:
            self._reject(e, payload)
            self.learner_losses.note(batch.actor_id, batch.session, len(batch))
            return False
        n = len(batch)
        if self.max_transitions is not None:  # the budget, exactly: the rest is counted
            n = max(0, min(n, self.max_transitions - self.stats.transitions))
            if n < len(batch):
                with self.lock:
                    self.stats.over_budget += len(batch) - n
                if n == 0:
                    return False
        b = batch
        self.replay.add(b.obs[:n], b.action[:n], b.reward[:n], b.next_obs[:n], b.terminated[:n])
        self._count_episodes(key, b.reward[:n], (b.terminated | b.truncated)[:n])
        with self.lock:
            self.stats.batches += 1
            self.stats.transitions += n
            if self._session_of.get(batch.actor_id, batch.session) != batch.session:
                self.stats.by_actor[batch.actor_id] = 0  # a restarted actor counts from 0
            self._session_of[batch.actor_id] = batch.session
            self.stats.by_actor[batch.actor_id] += n
            self.stats.total_by_actor[batch.actor_id] += n
        return True

    def lost(self) -> dict[str, int]:  # what the learner lost of each actor's session: lost.py
        return self.learner_losses.current(self._session_of)

    def _admit(self, actor: str, session: int) -> bool:
        """Room for a new (actor, session): False past max_actors; an actor's oldest
        session is forgotten past max_sessions."""
        sessions = self._sessions.get(actor)
        if sessions is None:
            if len(self._sessions) >= self.max_actors:
                return False
            sessions = self._sessions[actor] = []
        sessions.append(session)
        while len(sessions) > self.max_sessions:
            old = (actor, sessions.pop(0))
            self._seqs.pop(old, None)
            self._ep_return.pop(old, None)
        return True

    def _check_magnitudes(self, batch) -> None:
        """Finite is not enough: one reward of 3e38 poisons every TD target it reaches."""
        if len(batch) == 0:
            return
        big = max(np.abs(batch.obs).max(), np.abs(batch.next_obs).max())
        if big > self.max_abs_observation:
            raise CodecError("out_of_bounds", f"|obs| {big:.3g} > {self.max_abs_observation:g}")
        big = np.abs(batch.reward).max()
        if big > self.max_abs_reward:
            raise CodecError("out_of_bounds", f"|reward| {big:.3g} > {self.max_abs_reward:g}")

    def _count_episodes(self, key: tuple[str, int], reward: np.ndarray, done: np.ndarray) -> None:
        running = self._ep_return.get(key, 0.0)
        start = 0
        for end in np.flatnonzero(done):
            ep = running + float(reward[start : end + 1].sum())
            with self.lock:
                self.stats.episodes += 1
                self.stats.returns.append(ep)
            running, start = 0.0, end + 1
        self._ep_return[key] = running + float(reward[start:].sum())

    def _reject(self, error: CodecError, payload: bytes) -> None:
        with self.lock:
            self.stats.rejected_batches += 1
            self.stats.rejected[error.reason] += 1
            self.stats.rejected_transitions += peek_count(payload)
            first = self.stats.rejected[error.reason] == 1
        if first:  # log once per reason; the counters say how often
            log.warning("transition batch rejected (%s): %s", error.reason, error)

    def received(self) -> tuple[int, dict[str, int]]:
        """Transitions in replay, in all and from each actor's current session."""
        with self.lock:
            return self.stats.transitions, dict(self.stats.by_actor)

    @property
    def missing_batches(self) -> int:
        return sum(t.missing for t in self._seqs.values())

    def recent_return(self, n: int = 20) -> float | None:
        with self.lock:
            r = list(self.stats.returns)[-n:]
        return float(np.mean(r)) if r else None

    def returns_since(self, seen: int) -> tuple[list[float], int]:
        """Returns of the episodes finished after the first ``seen``, and the new count.

        At most the last 100 (the deque's bound): a caller that polls less often than 100
        episodes finish loses the oldest of them, and knows how many from the count.
        """
        with self.lock:
            n = self.stats.episodes
            new = list(self.stats.returns)[-(n - seen) :] if n > seen else []
        return new, n

    # --- durable runs (edge_rl/learner/durable.py): JSON-able, taken with ingest paused ---

    def state(self) -> dict:
        s = self.stats
        with self.lock:
            stats = {k: v for k, v in vars(s).items() if isinstance(v, int)}
            stats.update(
                rejected=dict(s.rejected),
                by_actor=dict(s.by_actor),
                returns=list(s.returns),
                total_by_actor=dict(s.total_by_actor),
            )
        seqs = [[a, n, t.floor, sorted(t.above), t.max_seq] for (a, n), t in self._seqs.items()]
        open_returns = [[a, n, r] for (a, n), r in self._ep_return.items()]
        return {
            "stats": stats,
            "sessions": self._sessions,
            "session_of": self._session_of,
            "seqs": seqs,
            "episode_returns": open_returns,
        }

    def load_state(self, state: dict, restarted: set[str] = frozenset()) -> None:
        """``restarted``: actors whose processes are new (the resumed learner's own
        simulated fleet): their sessions are forgotten, and their credit starts over."""
        st = dict(state["stats"])
        rejected, by_actor, returns = st.pop("rejected"), st.pop("by_actor"), st.pop("returns")
        self.stats.total_by_actor = Counter(st.pop("total_by_actor", {}))  # (older: none)
        with self.lock:
            for k, v in st.items():
                setattr(self.stats, k, int(v))
            self.stats.rejected = Counter(rejected)
            self.stats.by_actor = Counter({a: n for a, n in by_actor.items() if a not in restarted})
            self.stats.returns.extend(returns)
        self._sessions = {a: list(s) for a, s in state["sessions"].items() if a not in restarted}
        self._session_of = {a: s for a, s in state["session_of"].items() if a not in restarted}
        for a, n, floor, above, max_seq in state["seqs"]:
            if a not in restarted:
                t = self._seqs[(a, n)] = SeqTracker()
                t.floor = floor
                t.above = set(above)
                t.max_seq = max_seq
        self._ep_return = {(a, n): r for a, n, r in state["episode_returns"] if a not in restarted}
