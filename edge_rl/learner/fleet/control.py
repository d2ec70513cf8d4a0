"""Fleet control: who is in the fleet, and how far each actor may run.

    fleet = FleetControl(cfg.fleet, cfg.pacing, topics, publish, ingest.received, rid,
                         ingest.lost)
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
topic, are retained: an actor that (re)connects reads both at once. Each round of ``send``
("running") puts the parts together, each with its own job and state:

* ``Roster`` (roster.py): the statuses, checked (one that claims more than its session's
  grant is refused: ``status_over_credit``) and recorded; one process per id (identity.py).
  An actor not known yet gets no credit: it announces itself with a status of this run on
  its own topic and is granted credit in the next round.
* ``WriteOff`` (write_off.py): of each actor online, what will not arrive (reported
  dropped, dropped by the learner, or sent and not received for ``Quiet.bound_s``), and
  how much of what it claimed it delivered (``delivery``: its share of the lead).
* ``IdleWatch`` (idle.py): an actor that holds credit and neither steps nor delivers for
  ``credit_timeout_s`` (at least two stated status intervals; the clock starts when it
  comes to hold credit) is granted no more, and what it holds is granted again to the
  others (the lead is overcommitted by at most what idle actors hold: ingest takes no more
  than a grant, nor past the budget).
* ``Shares`` (shares.py): the fleet may produce at most ``max_lag_transitions`` more
  transitions than the updates done so far have paid for
  (``Pacing.env_steps_paying_for``), never more than the budget; no actor holds more than
  half the lead (``CreditLedger``, credit.py).
* ``GrantPublisher`` (publisher.py): each grant that changed, written to ``Grants`` before
  it is published (ingest bounds an actor's data by it), at most
  ``fleet.max_grants_per_s``.
* ``ControlChannel`` (channel.py): the control message, with the status interval
  (timing.py) that keeps the fleet's statuses under ``fleet.max_statuses_per_s``.

A quarantined board (learner/fleet/quarantine.py) is granted nothing more. A learner away
from its broker judges no board by its own deafness (``Quiet.heard_since``).

Statuses are recorded on the transport's thread and read on the main thread (the live
view, the summary): every access to the parts holds ``_lock``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from edge_rl.config import FleetConfig, Pacing
from edge_rl.learner.fleet.channel import FINAL, ControlChannel
from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.figures import StatusLimits
from edge_rl.learner.fleet.identity import Identities
from edge_rl.learner.fleet.idle import IdleWatch
from edge_rl.learner.fleet.publisher import GrantPublisher, Publish
from edge_rl.learner.fleet.roster import Roster
from edge_rl.learner.fleet.shares import Shares
from edge_rl.learner.fleet.timing import QUIET_INTERVALS, STATE_WAIT_ROUNDS, Quiet, status_interval
from edge_rl.learner.fleet.write_off import WriteOff
from edge_rl.types import ActorStatus, ControlMessage, RunState
from edge_rl.wire.messages import encode_control
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)


def control_will(
    topics: Topics, run_id: str, state: RunState = "paused", interval: float = 0.0
) -> tuple[str, bytes]:
    """The learner's last will (retained): a learner that vanishes while the run goes on
    leaves it paused, so the boards hold their policy and wait for it to come back, as after
    SIGTERM. Once the run is final (``serving``, ``stopped``) the will is that final state
    (``LearnerNode`` replaces it before sending it), so no close can take it back."""
    reason = "the learner is gone" if state == "paused" else ""
    return topics.control, encode_control(ControlMessage(state, run_id, reason, interval))


@dataclass(frozen=True)
class FleetStats:
    status_rejected: int  # undecodable, or not from its own actor's topic
    status_other_run: int  # of another run start (or none yet): ignored
    status_over_credit: int  # claims more env steps or transitions than its grant: refused
    status_clamped: int  # a figure outside what the env makes possible: clamped (figures.py)
    actor_sessions_refused: int  # second live processes under one id (identity.py)
    credit_written_off: int  # sent, never received, granted again
    credit_reclaimed: int  # held by idle actors, not stepped yet, granted again
    credit_withheld: (
        int  # most steps held back at once from boards that delivered less than claimed
    )
    grants_unsent: int  # grants the transport refused (its queue full): sent again next round
    control_unsent: int  # control messages the transport refused: sent again, as grants are
    actors: Mapping[str, ActorStatus]  # each actor's last status
    breakdowns: Mapping[str, Mapping[str, float]]  # each actor's last runtime breakdown


Received = Callable[[], tuple[int, Mapping[str, int]]]  # (total, by actor) in replay


class FleetControl:
    def __init__(
        self,
        cfg: FleetConfig,
        pacing: Pacing,
        topics: Topics,
        publish: Publish,
        received: Received,
        run_id: str,
        lost_at_learner: Callable[[], Mapping[str, int]] = dict,  # Ingest.lost
        grants: Grants | None = None,
        session_of: Mapping[str, int] | None = None,  # ingest's: whose data ``received`` counts
        quarantined: Callable[[str], bool] = lambda _actor: False,  # BoardWatch.is_quarantined
        connected: Callable[[], bool] = lambda: True,  # the learner's transport
        limits: StatusLimits | None = None,  # what a status may say (figures.py)
        quarantine_reason: Callable[[str], str] = lambda _actor: "",  # BoardWatch.reason
    ) -> None:
        """``grants``: the record each grant is written to before it is published (the
        learner's, which ingest reads; default: one of its own). Statuses and credit are
        bounded by it either way. A ``quarantined`` board is granted nothing more."""
        self.cfg = cfg
        self.topics = topics
        self.run_id = run_id
        self.grants = grants if grants is not None else Grants()
        self._received = received
        self._lost_at_learner = lost_at_learner
        self._session_of = session_of
        self._quarantined = quarantined
        self._connected = connected
        self._quarantine_reason = quarantine_reason
        self.told: set[str] = set()  # quarantined boards told why (once each, and on hello)
        self._lock = threading.Lock()
        self.roster = Roster(
            topics, run_id, self.grants, cfg.max_actors, cfg.identity_window_s, limits
        )
        self.channel = ControlChannel(topics, publish, run_id)
        self.publisher = GrantPublisher(topics, publish, self.grants, cfg.max_grants_per_s)
        self.quiet = Quiet(pacing.credit_timeout_s)
        self.write_off = WriteOff(self.quiet)
        self.idle = IdleWatch(self.quiet)
        self.shares = Shares(pacing, cfg.min_grant)

    @property
    def state(self) -> RunState:
        """The run state of the last control message (``running`` before the first)."""
        return self.channel.state

    @property
    def ids(self) -> Identities:
        return self.roster.ids

    # --- statuses (transport thread) ----------------------------------------------------

    def on_status(self, topic: str, payload: bytes) -> None:
        status = self.roster.check(topic, payload)
        if status is None:
            return
        with self._lock:
            self.roster.record(status)

    def stats(self) -> FleetStats:
        """For the summary: the fleet as last reported, statuses refused or ignored,
        duplicate ids refused, the credit written off, and the grants the transport refused."""
        with self._lock:
            r = self.roster
            return FleetStats(
                status_rejected=r.status_rejected,
                status_other_run=r.status_other_run,
                status_over_credit=r.status_over_credit,
                status_clamped=r.status_clamped,
                actor_sessions_refused=r.ids.refused_sessions,
                credit_written_off=self.write_off.total(),
                credit_reclaimed=self.idle.reclaimed(),
                credit_withheld=self.shares.ledger.withheld,
                grants_unsent=self.publisher.unsent,
                control_unsent=self.channel.unsent,
                actors=dict(r.actors),
                breakdowns=dict(r.breakdowns),
            )

    def actors(self) -> dict[str, ActorStatus]:
        with self._lock:
            return dict(self.roster.actors)

    def breakdowns(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return dict(self.roster.breakdowns)

    def stepping(self) -> list[str]:
        """Actors whose last status says they step (or are about to)."""
        with self._lock:
            return self.roster.stepping()

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
                online, behind = self.roster.behind(state)
            now = time.monotonic()
            if not behind:
                log.info("%d boards online reported %r in %.1f s", online, state, now - start)
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
            online,
            state,
            now - start,
        )
        return False

    def state_wait_s(self) -> float:
        """How long the learner waits for one more board to report a new control state
        (``Quiet.state_wait_s``)."""
        with self._lock:
            return self.quiet.state_wait_s()

    # --- control (main thread) ----------------------------------------------------------

    def send(self, state: RunState, updates: int = 0, *, reason: str = "") -> None:
        """Publish the control message when it changes; with ``running``, new credit. After
        ``serving`` or ``stopped`` nothing else is sent: both are final for a run start."""
        with self._lock:
            if self.channel.state in FINAL and state != self.channel.state:
                return
            # The status interval follows the fleet's size in 0.25 s steps: a new control
            # goes out when it crosses one (a few times while a fleet connects).
            interval = status_interval(self.roster.online(), self.cfg.max_statuses_per_s)
            if self.channel.update(state, reason, interval):
                self.quiet.stated = interval
                # An id is free for another process after silence: at least two intervals.
                self.roster.ids.window_s = max(
                    self.cfg.identity_window_s, QUIET_INTERVALS * interval
                )
                self.channel.send()
            else:
                self.channel.resend()
                self.channel.heartbeat()
            if state != "running":
                return
            now = time.monotonic()
            if self._connected():
                self._tell_quarantined()
                credits = self._credit(updates, now)
                self.publisher.publish(credits, self.roster.ids, self.run_id, now)
            else:  # it hears nothing now, and its grants would not go out: nothing is judged
                self.quiet.heard_since = now

    def will_for(self, state: RunState) -> tuple[str, bytes]:
        """The learner's last will once the run is ``state`` (final): that control message,
        at the status interval stated last."""
        with self._lock:
            return control_will(self.topics, self.run_id, state, self.channel.stated_interval())

    def _resend_control(self) -> None:
        with self._lock:
            self.channel.resend()

    def republish(self) -> None:
        """After a (re)connect: the control and every grant again, and every actor's silence
        timed from now. Away from the broker the learner heard no status and no batch; that
        gap says nothing of a board, so no board is idle or written off for it."""
        with self._lock:
            self.quiet.heard_since = time.monotonic()
            self.channel.republish()
            self.publisher.republish()

    def welcome(self, actor: str) -> None:
        """A board said hello (join.py): the current control on its welcome topic, and its
        last grant again on its credit topic; neither hangs on a retained message. A
        quarantined board is told why instead."""
        with self._lock:
            if reason := self._quarantine_reason(actor):
                self.channel.tell(actor, "paused", reason)
                return
            self.channel.welcome(actor)
            self.publisher.resend(actor)

    def _tell_quarantined(self) -> None:  # holds _lock
        """Each board newly in quarantine gets a ``paused`` control on its welcome topic
        whose ``reason`` says why (protocol §5: a board logs a control's reason): it holds,
        and its operator learns what the learner saw."""
        for actor in self.roster.online_ids(lambda _a: False) - self.told:
            if reason := self._quarantine_reason(actor):
                self.channel.tell(actor, "paused", reason)
                self.told.add(actor)

    def announce(self, topic: str) -> bool:
        """The learner's hello on ``topic``: the current control, which every board takes
        as its cue to publish its status at once. False before the first control."""
        with self._lock:
            return self.channel.announce(topic)

    def clear(self) -> None:
        """When the learner leaves: its grants stop being retained, so that a board that
        reconnects meanwhile takes no stale credit; the control message stays
        (``serving``, or ``paused`` for a resume)."""
        with self._lock:
            self.publisher.clear()

    def _credit(self, updates: int, now: float) -> dict[str, int]:  # holds _lock
        """Each online actor's credit this round: what is lost is written off, what idle
        actors hold is free again, and the lead is shared."""
        received, by_actor = self._received()
        by_actor = self._owners_only(by_actor)
        # Only actors that announced themselves on their own status topic (which the broker's
        # ACL ties to their credentials) get credit; data from anyone else earns none.
        # A quarantined board is left out: granted nothing more, and what it holds is no
        # longer outstanding (ingest refuses its data).
        online = self.roster.online_ids(self._quarantined)
        actors = self.roster.actors
        at_learner = self._lost_at_learner()
        got = {a: by_actor.get(a, 0) for a in online}
        lost = {
            a: self.write_off.lost(actors[a], got[a], at_learner.get(a, 0), now) for a in online
        }
        # An actor that holds credit and neither steps nor delivers (stopped, or a board that
        # announces itself and does nothing) keeps what it has and is granted no more, so
        # that it cannot sit on an ever larger share of the fleet's lead.
        held = {a: self.shares.held(a, got[a]) for a in online}
        idle = {
            a
            for a in online
            if self.idle.idle(
                a, actors[a].env_steps, held[a] - lost[a] > 0, self.write_off.delivered_at(a), now
            )
        }
        lost = self.idle.reclaim(idle, held, lost)
        stepped = {a: actors[a].env_steps for a in online}
        # Credit against delivery: a board that claims more than it delivers holds less of
        # the lead.
        trust = {a: self.write_off.delivery(a, actors[a].session, got[a]) for a in online}
        return self.shares.grant(updates, received, by_actor, online, lost, idle, stepped, trust)

    def _owners_only(self, by_actor: Mapping[str, int]) -> dict[str, int]:  # holds _lock
        """Of each actor, what the session that owns its id delivered (0 until the owner's
        first batch is in): a new owner's credit starts from what it delivered."""
        if self._session_of is None:
            return dict(by_actor)
        ids = self.roster.ids
        return {a: n for a, n in by_actor.items() if self._session_of.get(a) == ids.owner(a)}
