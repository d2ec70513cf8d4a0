"""Ingest: one transition payload from the bus into replay. Runs on the ingest thread.

    ingest = Ingest(spec, replay, topics, latest_version=lambda: broadcast.version, run_id=...)
    while running:                          # the ingest thread (learner/inbox.py)
        topic, payload = queue.get()
        if ingest.handle(topic, payload):   # never raises: a reject is counted by reason
            check_budget()

``handle`` in data-flow order:

    decode_transitions   CodecError: bytes that are not a batch of this env (wire/)
    Validator.origin     Rejected: another actor's topic, another run start, out of bounds,
                         implausible_reward (plausible.py)
    BoardWatch           Rejected: quarantined (a board isolated by learner/fleet/quarantine.py)
    Admission.admit      Rejected: too_many_actors; an actor's oldest session forgotten
    Dedup.first_time     a resend is counted as a duplicate, not as a reject; over_credit: a
                         seq gap wider than the session's unused credit (0 if not granted)
    Validator.version    Rejected: unknown_policy, stale; the batch was seen (no gap), and
                         its transitions are the learner's own loss (lost.py)
    Grants               Rejected: not_granted (an id never granted credit), not_owner (a
                         session other than the one its id's grant is for), over_credit (past
                         the session's grant): a share of replay never exceeds the grant
    Accounting           the budget cut, then replay.add (and the rows an intervention
                         acted into the demonstration buffer: learner/demos.py), then
                         the counters and episodes
    BoardWatch.judge     each board's figures against the fleet's (at most once a second):
                         a board it quarantines has its rows evicted from replay

Both exceptions are counted per reason and logged once per reason (protocol.md §7); any
other exception is counted as ``internal_error`` and logged with its traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Set

from edge_rl.learner.demos import BatchMixer
from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.quarantine import BoardWatch
from edge_rl.learner.ingest.accounting import Accounting, IngestStats
from edge_rl.learner.ingest.admission import Admission
from edge_rl.learner.ingest.dedup import Dedup
from edge_rl.learner.ingest.lost import LearnerLosses
from edge_rl.learner.ingest.plausible import Bounds
from edge_rl.learner.ingest.validate import Rejected, Validator
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec
from edge_rl.types import TransitionBatch
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import decode_transitions, peek_count

log = logging.getLogger(__name__)

# Refusals a board is not to blame for (the learner's own lag or limits, or a board already
# isolated): they do not count toward its refused share.
NOT_BLAMED = frozenset({"quarantined", "stale", "too_many_actors", "internal_error"})


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
        grants: Grants | None = None,
        bounds: Bounds | None = None,
        watch: BoardWatch | None = None,
        evict: bool = True,
        demos: BatchMixer | None = None,
    ) -> None:
        """``max_transitions``: the run's budget; a batch that crosses it is cut there.
        ``run_id``: only batches stepped for this start of the run are taken. ``grants``:
        what fleet control granted (None: no credit bound, for ingest on its own).
        ``bounds``: the env's plausible observations and rewards (None: magnitudes only).
        ``watch``: per-board figures and quarantine (None: none); ``evict``: a quarantined
        board's rows leave replay. ``demos``: where rows an intervention acted are copied
        (None: nowhere)."""
        self.spec = spec
        self.replay = replay
        self.max_payload_bytes = max_payload_bytes
        self.grants = grants
        self.watch = watch
        self.evict = evict
        self.demos = demos
        self.topics = topics
        self.validate = Validator(
            topics,
            run_id,
            latest_version,
            max_policy_lag,
            max_abs_observation,
            max_abs_reward,
            bounds,
        )
        self.admission = Admission(max_actors, max_sessions_per_actor)
        self.dedup = Dedup()
        self.accounting = Accounting(max_transitions)
        self.learner_losses = LearnerLosses(max_actors, topics)  # what the learner itself lost

    def handle(self, topic: str, payload: bytes) -> bool:
        """Ingest one transition payload; True when it went into replay. Never raises."""
        try:
            return self._handle(topic, payload)
        except (CodecError, Rejected) as e:
            self.accounting.reject(e.reason, str(e), peek_count(payload))
            if self.watch is not None and e.reason not in NOT_BLAMED:
                self.watch.refused(self.topics.actor_of(topic))
                self._judge()
        except Exception as e:  # noqa: BLE001 - a payload must never kill the ingest thread
            log.exception("unexpected error ingesting a batch from %s", topic)
            message = f"internal_error: {type(e).__name__}: {e}"
            self.accounting.reject("internal_error", message, peek_count(payload))
        return False

    def _handle(self, topic: str, payload: bytes) -> bool:
        batch = decode_transitions(payload, self.spec, self.max_payload_bytes)
        self.validate.origin(topic, batch)  # until it passes, seq is untrusted: a gap stays
        if self.watch is not None and self.watch.is_quarantined(batch.actor_id):
            raise Rejected("quarantined", f"{batch.actor_id!r} is in quarantine")
        key = (batch.actor_id, batch.session)
        for old in self.admission.admit(*key):
            self.dedup.forget(old)
            self.accounting.forget(old)
        credit = self._credit_of(batch)
        room = None if credit is None else max(0, credit - self.accounting.accepted_from(key))
        if not self.dedup.first_time(key, batch.seq, room):
            self.accounting.duplicate(len(batch))
            return False
        self._check_version(batch)
        self._check_grant(batch, credit, room)
        n = self.accounting.within_budget(len(batch))
        if n == 0:
            return False
        b, acted = batch, batch.interventions[:n]
        rows = (b.obs[:n], b.action[:n], b.reward[:n], b.next_obs[:n], b.terminated[:n])
        self.replay.add(*rows, b.actor_id, b.truncated[:n], acted)
        if self.demos is not None and acted.any():
            self.demos.add_interventions(
                tuple(a[acted] for a in (*rows, b.truncated[:n])), b.actor_id
            )
        done = (b.terminated | b.truncated)[:n]
        returns = self.accounting.accepted(key, b.seq, b.reward[:n], done)
        if self.watch is not None:
            ends_open = not bool(done[-1]) if n else None
            self.watch.accepted(b.actor_id, b.reward[:n], returns, b.policy_version, ends_open)
            self._judge()
        return True

    def _judge(self) -> None:
        """The quarantine rule; a board it isolates has its rows evicted (with ``evict``).
        Here, on the ingest thread: no batch of the board can be added after the eviction."""
        assert self.watch is not None
        for verdict in self.watch.judge(self.accounting.transitions, time.monotonic()):
            if self.evict:
                self.watch.evicted(verdict.actor, self.replay.evict(verdict.actor))
                if self.demos is not None:  # its interventions too
                    self.demos.demos.evict(verdict.actor)

    def _credit_of(self, batch: TransitionBatch) -> int | None:
        """The credit of the session that sent ``batch``: 0 if the grant is not its (or
        there is none); None if there are no grants to check."""
        if self.grants is None:
            return None
        return self.grants.bound(batch.actor_id, batch.session)

    def _check_grant(self, batch: TransitionBatch, credit: int | None, room: int | None) -> None:
        """Only the granted session's data, and no more of it than its grant."""
        if self.grants is None or credit is None or room is None:
            return
        grant = self.grants.of(batch.actor_id)
        if grant is None:
            raise Rejected("not_granted", f"{batch.actor_id!r} was granted no credit")
        if batch.session != grant[0]:
            raise Rejected("not_owner", f"session {batch.session}: the id is {grant[0]}'s")
        if len(batch) > room:
            raise Rejected("over_credit", f"{len(batch)} transitions, {room} of credit left")

    def _check_version(self, batch: TransitionBatch) -> None:
        """A refused version: sent, seen, never trained on, so lost for certain."""
        try:
            self.validate.version(batch)
        except Rejected:
            self.learner_losses.note(batch.actor_id, batch.session, len(batch))
            raise

    # --- readers on other threads --------------------------------------------------------

    @property
    def transitions(self) -> int:
        """Transitions in replay: the run's env steps."""
        return self.accounting.transitions

    def received(self) -> tuple[int, dict[str, int]]:
        """Transitions in replay, in all and from each actor's current session."""
        return self.accounting.received()

    def lost(self) -> dict[str, int]:
        """What the learner itself lost of each actor's current session (lost.py)."""
        return self.learner_losses.current(self.accounting.session_of)

    def recent_return(self, n: int = 20) -> float | None:
        return self.accounting.recent_return(n)

    def returns_since(self, seen: int) -> tuple[list[float], int]:
        return self.accounting.returns_since(seen)

    def stats(self) -> IngestStats:
        return self.accounting.stats()

    @property
    def missing_batches(self) -> int:
        return self.dedup.stats().missing_batches

    # --- durable runs (learner/durable.py): JSON-able, taken with ingest paused ---------

    def state(self) -> dict:
        """The parts' states in one flat dict: "stats", "session_of", "episode_returns"
        (accounting), "sessions" (admission), "seqs" (dedup), "quarantine" (the board watch)."""
        state = {**self.accounting.state(), **self.admission.state(), **self.dedup.state()}
        if self.watch is not None:
            state["quarantine"] = self.watch.state()
        return state

    def load_state(self, state: Mapping, restarted: Set[str] = frozenset()) -> None:
        """``restarted``: actors whose processes are new (the resumed learner's own
        simulated fleet): their sessions are forgotten, and their credit starts over."""
        self.accounting.load_state(state, restarted)
        self.admission.load_state(state, restarted)
        self.dedup.load_state(state, restarted)
        if self.watch is not None and "quarantine" in state:
            self.watch.load_state(state["quarantine"])
