"""Fleet control: who is in the fleet, and how far each actor may run.

    fleet = FleetControl(cfg, topics, publish, ingest.received, rid, ingest.lost)
    fleet.on_status(topic, payload)     # transport thread: checked, then recorded
    fleet.send("running", updates=n)    # main thread, ~every 50 ms: new credit, if any
    fleet.send("paused", reason=why)    # the learner goes away: boards hold and wait
    fleet.send("serving")               # the run is done: boards serve its result (final)
    fleet.wait_for_state("serving")     # until every board online says so (bounded)
    fleet.republish()                   # after a reconnect: the broker may have lost it
    fleet.welcome(actor)                # a board said hello: its control and grant again
    fleet.announce(topics.hello)        # the learner's hello: every board re-announces
    fleet.clear()                       # at the end: the grants are no one's any more
    fleet.actors()                      # {actor_id: ActorStatus}, a copy
    control_will(topics, run_id)        # the learner's last will: "paused" if it vanishes

The control message (run state and run id) and each actor's credit grant, on its own
topic, are retained: an actor that (re)connects reads both at once. Credit
(``CreditLedger``) lets the fleet produce at most ``max_lag_transitions`` more
transitions than the updates done so far have paid for (``RunConfig.env_steps_paying_for``),
never more than the budget. An actor not known yet gets none: it announces itself with a
status of this run on its own topic and is granted credit in the next round. Statuses of
another run start are ignored; of two live processes under one id, the newcomer is
refused (identity.py). A status is checked against what the learner granted: one whose
counts (``env_steps``, or the transitions it says it sent, dropped or cut) pass its
session's grant (``Grants``) is refused and counted (``status_over_credit``): an actor
steps only under credit, so such a status is false, and its claim must not become credit.
Each grant is written to ``Grants`` before it is published: ingest bounds an actor's data
by it. No actor holds more than half the lead; one that holds credit and neither steps nor
delivers for ``credit_timeout_s`` (at least two stated status intervals; the clock starts
when it comes to hold credit) is granted no more, and what it holds is granted again to the
others (the lead is overcommitted by at most what idle actors hold: ingest takes no
more than a grant, nor past the budget). A quarantined board (learner/fleet/quarantine.py) is
granted nothing more.

The status registry is written on the transport's thread and read on the main thread (the
live view, the summary): every access holds ``_lock``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from edge_rl.config import RunConfig
from edge_rl.learner.fleet.credit import CreditLedger, Grants
from edge_rl.learner.fleet.identity import Identities
from edge_rl.types import ActorStatus, ControlMessage, CreditGrant, RunState
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import (
    MAX_STATUS_INTERVAL_S,
    decode_status,
    encode_control,
    encode_credit,
)
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)

Publish = Callable[..., bool]  # Transport.publish
FINAL: tuple[RunState, ...] = ("serving", "stopped")  # no other state follows either


def control_will(topics: Topics, run_id: str) -> tuple[str, bytes]:
    """The learner's last will (retained): a learner that vanishes leaves its run paused,
    so the boards hold their policy and wait for it to come back, as after SIGTERM."""
    msg = ControlMessage("paused", run_id, "the learner is gone")
    return topics.control, encode_control(msg)


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


def held_at_most(lead: int, online: int, min_share: int) -> int:
    """What one actor may hold granted and not delivered: half the ``lead`` (one that never
    delivers, a compromised board, cannot take all of it and stall the fleet), and twice an
    even share of it, at least ``min_share``: while most of a large fleet's boards are slow
    to take their turn (a loaded host) or idle, the few that step first must not take the
    lead that all of them share, or most boards are never granted a step (docs/scale.md)."""
    half = math.ceil(lead / 2)
    even_twice = max(min_share, math.ceil(2 * lead / max(1, online)))
    return max(1, min(half, even_twice))


# Below this interval the boards' own (at least 0.05 s, docs/protocol.md §5) keeps the bound.
MIN_STATED_INTERVAL_S = 0.05
STATUS_INTERVAL_STEP_S = 0.25  # stated intervals are whole steps: the control rarely changes
# Timeouts that read statuses (idle credit, written-off transitions, an id's silence) last at
# least this many stated status intervals: one status late or lost is not silence.
QUIET_INTERVALS = 2
# The least time the learner waits for one more board to report a control's new state (a
# board reports one at once); state_wait_s adds stated status intervals to it. While boards
# keep coming over it waits on, at most this many times that in all.
STATE_WAIT_S = 5.0
STATE_WAIT_ROUNDS = 4


def status_interval(boards: int, max_statuses_per_s: float) -> float:
    """The status interval the learner asks of every board so that ``boards`` of them send
    at most ``max_statuses_per_s`` periodic statuses a second in all: boards / rate, rounded
    up to a 0.25 s step (at most an hour); 0 (each board's own) while that is at most 0.05 s
    or there is no bound."""
    if max_statuses_per_s <= 0:
        return 0.0
    need = boards / max_statuses_per_s
    if need <= MIN_STATED_INTERVAL_S:
        return 0.0
    steps = math.ceil(need / STATUS_INTERVAL_STEP_S - 1e-9)
    return min(MAX_STATUS_INTERVAL_S, steps * STATUS_INTERVAL_STEP_S)


@dataclass(frozen=True)
class FleetStats:
    status_rejected: int  # undecodable, or not from its own actor's topic
    status_other_run: int  # of another run start (or none yet): ignored
    status_over_credit: int  # claims more env steps or transitions than its grant: refused
    actor_sessions_refused: int  # second live processes under one id (identity.py)
    credit_written_off: int  # sent, never received, granted again
    credit_reclaimed: int  # held by idle actors, not stepped yet, granted again
    grants_unsent: int  # grants the transport refused (its queue full): sent again next round
    control_unsent: int  # control messages the transport refused: sent again, as grants are
    actors: Mapping[str, ActorStatus]  # each actor's last status
    breakdowns: Mapping[str, Mapping[str, float]]  # each actor's last runtime breakdown


Received = Callable[[], tuple[int, Mapping[str, int]]]  # (total, by actor) in replay


class FleetControl:
    def __init__(
        self,
        cfg: RunConfig,
        topics: Topics,
        publish: Publish,
        received: Received,
        run_id: str,
        lost_at_learner: Callable[[], Mapping[str, int]] = dict,  # Ingest.lost
        grants: Grants | None = None,
        session_of: Mapping[str, int] | None = None,  # ingest's: whose data ``received`` counts
        quarantined: Callable[[str], bool] = lambda _actor: False,  # BoardWatch.is_quarantined
        connected: Callable[[], bool] = lambda: True,  # the learner's transport
    ) -> None:
        """``grants``: the record each grant is written to before it is published (the
        learner's, which ingest reads; default: one of its own). Statuses and credit are
        bounded by it either way. A ``quarantined`` board is granted nothing more."""
        self.cfg = cfg
        self.topics = topics
        self.run_id = run_id
        self._publish = publish
        self._received = received
        self._lost_at_learner = lost_at_learner
        self.grants = grants if grants is not None else Grants()
        self._quarantined = quarantined
        self._connected = connected
        self._session_of = session_of
        self.status_over_credit = 0  # statuses that claim more than their grant: refused
        self._lock = threading.Lock()
        self._actors: dict[str, ActorStatus] = {}
        # The last runtime breakdown of each actor: kept apart because the last will says
        # "offline" without one (it is made before the actor starts).
        self._breakdowns: dict[str, dict[str, float]] = {}
        self.status_rejected = 0
        self.status_other_run = 0  # statuses of another run start (or none yet): ignored
        self.ids = Identities(cfg.fleet.identity_window_s)
        self._grants: dict[str, CreditGrant] = {}  # the last grant published to each actor
        self._granted_at: dict[str, float] = {}  # actor -> when its last grant went out
        self._grant_rate = RateBound(cfg.fleet.max_grants_per_s)
        self.grants_unsent = 0  # grants the transport refused: sent again next round
        self.max_actors = cfg.fleet.max_actors
        self.actors_refused = 0
        self.state: RunState = "running"
        self._last: ControlMessage | None = None
        self.control_unsent = 0  # control messages the transport refused: sent again
        self._control_pending = False  # the last one was refused: the next call resends
        self._ledger = CreditLedger()
        self._progress: dict[str, tuple[int, float]] = {}  # actor -> (received, since when)
        self.written_off: dict[str, int] = {}  # actor -> in-transit transitions written off
        # What idle actors held unstepped and was granted again: the lead's overcommit, a
        # total of idle spells that ended and the most of each spell going on.
        self.reclaimed = 0
        self._reclaiming: dict[str, int] = {}
        self._stepping: dict[str, tuple[int, float]] = {}  # actor -> (env steps, since when)
        self._heard_since = 0.0  # the learner's last (re)connect: silence is timed from here

    # --- statuses (transport thread) ----------------------------------------------------

    def on_status(self, topic: str, payload: bytes) -> None:
        try:
            status = decode_status(payload)
        except CodecError:
            self.status_rejected += 1
            return
        if status.actor_id != self.topics.actor_of(topic):
            self.status_rejected += 1  # a status must come from the topic of its own actor
            return
        # A last will is made before the actor joins a run: it is matched by session alone.
        if status.run_id != self.run_id and status.state != "offline":
            self.status_other_run += 1
            return
        if self._over_credit(status):
            return
        with self._lock:
            if not self.ids.admit(status.actor_id, status.session, status.state):
                return  # a will of a process not in this run, or a duplicate id (counted)
            if status.actor_id not in self._actors and len(self._actors) >= self.max_actors:
                self.status_rejected += 1
                self.actors_refused += 1
                if self.actors_refused == 1:
                    log.warning(
                        "more than fleet.max_actors=%d actors: %s refused",
                        self.max_actors,
                        status.actor_id,
                    )
                return
            last = self._actors.get(status.actor_id)
            if status.state == "offline" and last is not None:
                # The last will is made before the actor starts: it carries no counters. A
                # killed actor keeps the ones it last reported.
                status = dataclasses.replace(last, state="offline")
            self._actors[status.actor_id] = status
            if status.breakdown:
                self._breakdowns[status.actor_id] = status.breakdown

    def stats(self) -> FleetStats:
        """For the summary: the fleet as last reported, statuses refused or ignored,
        duplicate ids refused, the credit written off, and the grants the transport refused."""
        with self._lock:
            return FleetStats(
                status_rejected=self.status_rejected,
                status_other_run=self.status_other_run,
                status_over_credit=self.status_over_credit,
                actor_sessions_refused=self.ids.refused_sessions,
                credit_written_off=sum(self.written_off.values()),
                credit_reclaimed=self.reclaimed + sum(self._reclaiming.values()),
                grants_unsent=self.grants_unsent,
                control_unsent=self.control_unsent,
                actors=dict(self._actors),
                breakdowns=dict(self._breakdowns),
            )

    def _over_credit(self, status: ActorStatus) -> bool:
        """Whether ``status`` claims more env steps or transitions than its session was
        granted (counted, logged once). A will carries no counts."""
        if status.state == "offline":
            return False
        s = status
        claimed = max(
            s.env_steps, s.transitions_sent + s.transitions_dropped + s.transitions_oversize
        )
        bound = self.grants.bound(s.actor_id, s.session)
        if claimed <= bound:
            return False
        with self._lock:
            self.status_over_credit += 1
            first = self.status_over_credit == 1
        if first:  # the counter says how often
            log.warning(
                "%s (session %d): a status claims %d env steps or transitions, granted %d: refused",
                s.actor_id,
                s.session,
                claimed,
                bound,
            )
        return True

    def actors(self) -> dict[str, ActorStatus]:
        with self._lock:
            return dict(self._actors)

    def breakdowns(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return dict(self._breakdowns)

    def stepping(self) -> list[str]:
        """Actors whose last status says they step (or are about to)."""
        with self._lock:
            return [a for a, s in self._actors.items() if s.state in ("running", "starting")]

    def wait_for_actors(self, inbox_empty: Callable[[], bool], timeout: float) -> None:
        """Once no actor may step (paused, or out of credit at the budget): let them
        flush their last batches and say so in a status (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (self.stepping() or not inbox_empty()):
            self._resend_control()
            time.sleep(0.1)
        time.sleep(0.2)
        while not inbox_empty() and time.monotonic() < deadline + 5:
            time.sleep(0.05)

    def wait_for_state(self, state: str) -> bool:
        """Until every actor online says ``state`` in its status: while boards keep coming
        over, for ``state_wait_s()`` after the last one did, and ``STATE_WAIT_ROUNDS`` times
        that in all. The summary then shows the fleet as the control left it. True if they
        all did; else the count of those that did not is logged."""
        quiet = self.state_wait_s()
        start = last = time.monotonic()
        behind_before = -1
        while True:
            with self._lock:
                online = [s for s in self._actors.values() if s.state not in ("offline", "stopped")]
            behind = sum(s.state != state for s in online)
            now = time.monotonic()
            if not behind:
                log.info("%d boards online reported %r in %.1f s", len(online), state, now - start)
                return True
            if behind != behind_before:
                behind_before, last = behind, now  # boards came over: wait on
            if now - last >= quiet or now - start >= STATE_WAIT_ROUNDS * quiet:
                break
            self._resend_control()
            time.sleep(0.1)
        log.warning(
            "%d of %d boards online had not reported %r after %.1f s",
            behind,
            len(online),
            state,
            now - start,
        )
        return False

    def state_wait_s(self) -> float:
        """How long the learner waits for one more board to report a new control state:
        ``STATE_WAIT_S`` for the report a board sends at once, plus ``QUIET_INTERVALS`` of
        the status interval stated in the control. A board that misses the report at once
        sends its next periodic status within one stated interval, and the fleet's statuses
        reach the learner at about ``fleet.max_statuses_per_s``, so a whole fleet reporting
        at once takes one interval (5 s at 1,000 boards). Simulated boards on a loaded host
        take longer still, coming over one by one (at 1,000 boards on 2 cores, 14 s to
        over 25 s: docs/scale.md), hence ``wait_for_state`` waits on while they do."""
        with self._lock:
            stated = self._last.status_interval_s if self._last is not None else 0.0
        return STATE_WAIT_S + QUIET_INTERVALS * stated

    # --- control (main thread) ----------------------------------------------------------

    def send(self, state: RunState, updates: int = 0, *, reason: str = "") -> None:
        """Publish the control message when it changes; with ``running``, new credit. After
        ``serving`` or ``stopped`` nothing else is sent: both are final for a run start."""
        with self._lock:
            if self.state in FINAL and state != self.state:
                return
            # The status interval follows the fleet's size in 0.25 s steps: a new control
            # goes out when it crosses one (a few times while a fleet connects).
            interval = status_interval(self._online(), self.cfg.fleet.max_statuses_per_s)
            msg = ControlMessage(state, self.run_id, reason, interval)
            if msg != self._last:
                self.state = state
                self._last = msg
                # An id is free for another process after silence: at least two intervals.
                self.ids.window_s = max(
                    self.cfg.fleet.identity_window_s, QUIET_INTERVALS * interval
                )
                self._send_control()
            elif self._control_pending:
                self._send_control()
            if state != "running":
                return
            if self._connected():
                self._grant(updates)
            else:  # it hears nothing now, and its grants would not go out: nothing is judged
                self._heard_since = time.monotonic()

    def _send_control(self, wait_final: bool = True) -> None:  # holds _lock
        """Publish the last control message. Under the lock: a "running" must never
        overtake the "paused" sent after it. A final state waits for the broker's
        acknowledgement (bounded): the learner leaves soon after, and its boards must have
        it retained. One the transport refuses (disconnected, queue full) is sent again by
        the next ``send`` or wait, and by ``republish`` on a reconnect."""
        assert self._last is not None
        wait = 5.0 if wait_final and self._last.state in FINAL else 0.0
        payload = encode_control(self._last)
        sent = self._publish(self.topics.control, payload, retain=True, wait=wait)
        self._control_pending = not sent
        if not sent:
            self.control_unsent += 1
            if self.control_unsent == 1:  # the counter in summary.json says how often
                log.warning(
                    "the %r control message was refused by the transport: sent again",
                    self._last.state,
                )

    def _resend_control(self) -> None:
        with self._lock:
            if self._control_pending:
                self._send_control()

    def _online(self) -> int:  # holds _lock
        """Actors whose last status is not ``offline`` or ``stopped``."""
        return sum(s.state not in ("offline", "stopped") for s in self._actors.values())

    def republish(self) -> None:
        """After a (re)connect: the control and every grant again, and every actor's silence
        timed from now. Away from the broker the learner heard no status and no batch; that
        gap says nothing of a board, so no board is idle or written off for it."""
        with self._lock:
            self._heard_since = time.monotonic()
            if self._last is not None:  # on the transport's thread: no wait for the ack
                self._send_control(wait_final=False)
            for actor, grant in self._grants.items():
                self._publish(self.topics.credit(actor), encode_credit(grant), retain=True)

    def welcome(self, actor: str) -> None:
        """A board said hello (join.py): the current control on its welcome topic, and its
        last grant again on its credit topic; neither hangs on a retained message."""
        with self._lock:
            if self._last is not None:
                self._publish(self.topics.welcome(actor), encode_control(self._last))
            grant = self._grants.get(actor)
            if grant is not None:
                self._publish(self.topics.credit(actor), encode_credit(grant), retain=True)

    def announce(self, topic: str) -> bool:
        """The learner's hello on ``topic``: the current control, which every board takes
        as its cue to publish its status at once. False before the first control."""
        with self._lock:
            if self._last is None:
                return False
            return self._publish(topic, encode_control(self._last))

    def clear(self) -> None:
        """When the learner leaves: its grants stop being retained (an empty retained
        payload clears one), so that a board that reconnects meanwhile takes no stale
        credit; the control message stays (``serving``, or ``paused`` for a resume)."""
        with self._lock:
            for actor in self._grants:
                self._publish(self.topics.credit(actor), b"", retain=True)
            self._grants.clear()

    def _grant(self, updates: int) -> None:  # holds _lock
        """Publish each actor's grant that changed: one small message per actor, at most
        ``fleet.max_grants_per_s`` over the fleet. A grant to a new session or one that
        refuses a session goes at once; more credit for a known one waits its turn
        (oldest grant first) and is still in the ledger: it goes out whole later."""
        waiting = []
        for actor, credit in self._credit(updates).items():
            owner = self.ids.owner(actor)
            if owner is None:
                continue
            grant = CreditGrant(self.run_id, owner, credit, self.ids.refused(actor))
            last = self._grants.get(actor)
            if last == grant:
                continue
            if last is None or (last.session, last.refused) != (grant.session, grant.refused):
                self._send_grant(actor, grant)
            else:
                waiting.append((self._granted_at.get(actor, 0.0), actor, grant))
        for _, actor, grant in sorted(waiting)[: self._grant_rate.take(len(waiting))]:
            self._send_grant(actor, grant)

    def _send_grant(self, actor: str, grant: CreditGrant) -> None:  # holds _lock
        """Record ``grant`` and publish it. One the transport refused (its queue full, or
        not connected) is not taken as sent, and the next round sends it again: a grant
        goes out only when it changes, so a lost one would never be repeated, and a board
        that never hears of its credit does not step, is frozen as idle, and starves."""
        self.grants.set(actor, grant.session, grant.credit)  # before it can step under it
        if not self._publish(self.topics.credit(actor), encode_credit(grant), retain=True):
            self.grants_unsent += 1
            return
        self._grants[actor] = grant
        self._granted_at[actor] = time.monotonic()

    def _lost(self, actor: str, received: int, at_learner: int) -> int:  # holds _lock
        """Transitions of ``actor``'s current process that will not arrive: what it reports
        dropped; what the learner itself dropped (``at_learner``, part of what is in transit);
        and what it reports sent that has not arrived for ``quiet_s``."""
        s = self._actors[actor]
        now = time.monotonic()
        last = self._progress.get(actor)
        if last is None or last[0] != received:
            self._progress[actor] = last = (received, now)
        lost = s.transitions_dropped + s.transitions_oversize
        in_transit = s.transitions_sent - received
        if in_transit > 0 and now - max(last[1], self._heard_since) >= self.quiet_s():
            if self.written_off.get(actor, 0) < in_transit:
                log.warning(
                    "%s: %d transitions sent but not received in %.0f s: written off",
                    actor,
                    in_transit,
                    self.quiet_s(),
                )
            self.written_off[actor] = in_transit
            return lost + in_transit
        # At once: waiting for the timeout stalled an actor that kept delivering (its progress
        # restarts the clock) every time its lost share filled the lead (ingest_queue=2: 5 s
        # stalls, a 5,000-step run 4x as long; docs/reliability.md).
        return lost + max(0, min(at_learner, in_transit))

    def _idle(self, actor: str, received: int, lost: int) -> bool:  # holds _lock
        """Whether ``actor`` holds credit and has neither stepped (by its statuses) nor
        delivered for ``quiet_s``. The clock starts when it comes to hold credit: a board
        that waited long for its first grant is not idle the moment it gets one."""
        steps = self._actors[actor].env_steps
        now = time.monotonic()
        holds = self._ledger.granted.get(actor, 0) - received - lost > 0
        last = self._stepping.get(actor)
        if last is None or last[0] != steps or not holds:
            self._stepping[actor] = last = (steps, now)
        stalled = now - max(last[1], self._progress[actor][1], self._heard_since) >= self.quiet_s()
        return holds and stalled

    def quiet_s(self) -> float:  # holds _lock
        """How long an actor may be silent before the learner concludes anything from it
        (credit idle, transitions written off): ``credit_timeout_s``, and at least
        ``QUIET_INTERVALS`` of the status interval stated in the control: a board reports
        its steps only that often, so a shorter bound judged every board stalled."""
        stated = self._last.status_interval_s if self._last is not None else 0.0
        return max(self.cfg.credit_timeout_s, QUIET_INTERVALS * stated)

    def _credit(self, updates: int) -> dict[str, int]:  # holds _lock
        cfg = self.cfg
        allowed = cfg.env_steps_paying_for(updates) + cfg.max_lag_transitions
        allowed = min(allowed, cfg.total_env_steps)
        received, by_actor = self._received()
        by_actor = self._owners_only(by_actor)
        # Only actors that announced themselves on their own status topic (which the broker's
        # ACL ties to their credentials) get credit; data from anyone else earns none.
        # A quarantined board is left out: granted nothing more, and what it holds is no
        # longer outstanding (ingest refuses its data).
        online = {
            a
            for a, s in self._actors.items()
            if s.state not in ("offline", "stopped") and not self._quarantined(a)
        }
        at_learner = self._lost_at_learner()
        lost = {a: self._lost(a, by_actor.get(a, 0), at_learner.get(a, 0)) for a in online}
        # An actor that holds credit and neither steps nor delivers (stopped, or a board that
        # announces itself and does nothing) keeps what it has and is granted no more, so
        # that it cannot sit on an ever larger share of the fleet's lead.
        idle = {a for a in online if self._idle(a, by_actor.get(a, 0), lost[a])}
        stepped = {a: self._actors[a].env_steps for a in online}
        # What an idle actor holds does not count as outstanding: ingest takes no more of
        # its data than its grant, nor past the budget, so the lead may be granted again to
        # the others (overcommitted by at most what idle actors hold). Else a board that
        # holds credit and never steps stalls the fleet at the budget's end.
        for a in [a for a in self._reclaiming if a not in idle]:  # it moved again
            self.reclaimed += self._reclaiming.pop(a)
        for a in idle:
            held = self._ledger.granted.get(a, 0) - by_actor.get(a, 0)
            if held > lost[a]:
                self._reclaiming[a] = max(self._reclaiming.get(a, 0), held - lost[a])
                lost[a] = held
        min_share = self._min_share(allowed, len(online))
        return self._ledger.grant(
            allowed,
            received,
            by_actor,
            sorted(online),
            lost,
            idle,
            stepped,
            held_at_most(allowed - received, len(online), min_share),
            min_share=min_share,
        )

    def _min_share(self, allowed: int, online: int) -> int:
        """``fleet.min_grant``, at most half the lead per online actor (the learner keeps
        data to train on while slices wait), and 1 once the budget is allowed (the last
        steps must be granted)."""
        if allowed >= self.cfg.total_env_steps:
            return 1
        half_lead = self.cfg.max_lag_transitions // (2 * max(1, online))
        return max(1, min(self.cfg.fleet.min_grant, half_lead))

    def _owners_only(self, by_actor: Mapping[str, int]) -> dict[str, int]:  # holds _lock
        """Of each actor, what the session that owns its id delivered (0 until the owner's
        first batch is in): a new owner's credit starts from what it delivered."""
        if self._session_of is None:
            return dict(by_actor)
        return {a: n for a, n in by_actor.items() if self._session_of.get(a) == self.ids.owner(a)}
