"""An actor's side of the learner's control and credit messages (docs/protocol.md §5).

    rc = RunControl(actor_id, session, serve_paused=False)
    rc.on_control(payload)           # network thread: <base>/control
    rc.on_credit(payload)            # network thread: <base>/actors/<id>/credit
    run_id = rc.take_join()          # loop thread, between steps: a new run start to join
    rc.may_step(env_steps)           # train: "running" and below this process's credit
    rc.serves()                      # act greedily with the policy held, send nothing
    rc.state                         # waiting | running | paused | serving | stopped | refused
    rc.status_every(own_s)           # the board's status interval, or the learner's if longer
    rc.stop()                        # SIGTERM: the process ends (``done``)

The newest control message names the run start (``run_id``) the actor takes part in. A
control of another run start that says ``running``, ``paused`` or ``serving`` is joined:
the loop drops what it held of the old one and counts from zero again (``take_join``). A
``stopped`` of another run start is the end of a run this process is not in (or an
earlier run's leftover, retained): ignored.

Of its own run start: ``running`` trains; ``paused`` (the learner is away: interrupted, or
its last will) holds the last good policy, serving it greedily if ``serve_paused`` (the
board file's ``on_pause: serve``), else idle, and voids the credit not used (the learner
that comes back grants anew); ``serving`` (the run is done) serves the deployed policy;
``stopped`` (an operator ended the run) idles until a new run start. Both ``serving`` and
``stopped`` are final for their run start: a later control of it is ignored (after
``serving``, all but ``stopped``). Only SIGTERM (``stop``) or a refusal
ends the process.

Credit is per process: a grant applies when its ``run_id`` is the current run start and
its ``session`` is this process's. A grant for a run start not joined yet is kept until
the join (messages on two topics may arrive in either order). A grant that lists this
session in ``refused`` means another live process owns the actor id: the actor stops.
Empty payloads are cleared retained messages: ignored. Undecodable ones are counted.
"""

from __future__ import annotations

import logging
import threading

from edge_rl.types import ActorState, ControlMessage, CreditGrant
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_control, decode_credit

log = logging.getLogger(__name__)


class RunControl:
    def __init__(self, actor_id: str, session: int, *, serve_paused: bool = False) -> None:
        self.actor_id = actor_id
        self.session = session
        self.serve_paused = serve_paused  # paused: serve the policy held (else idle)
        self.run_id: str | None = None  # the run start this process takes part in
        self.state = "waiting"  # until a control message of a run start says otherwise
        self.credit = 0  # env steps since the join this process may have taken in all
        # The least status interval the learner asks of its boards (0: the board's own).
        self.status_interval_s = 0.0
        self.rejected = 0  # control and credit payloads that failed to decode
        self.exiting = False  # SIGTERM: the loop ends, the process exits
        self._join: ControlMessage | None = None  # a newer run start, for the loop
        self._grant: CreditGrant | None = None  # the newest grant of a run start not joined
        self._lock = threading.Lock()
        self._news = threading.Event()  # a control, a grant or a stop came in
        # The control's state changed (paused, running): the loop reports it at once.
        self._state_changed = False

    # --- network thread ---------------------------------------------------------------

    def on_control(self, payload: bytes) -> None:
        msg = self._decode(decode_control, payload, "control")
        if msg is None:
            return
        self._news.set()
        with self._lock:
            if self.done:
                return  # a redelivered control must not restart a stopping actor
            if msg.run_id != self.run_id:
                self._other_run(msg)
            elif self.state == "stopped" or (self.state == "serving" and msg.state != "stopped"):
                return  # both are final for a run start (a late will must not idle a served run)
            else:
                if msg.state == "paused" and self.state != "paused":
                    self.credit = 0  # the learner that comes back grants anew
                    if msg.reason:  # e.g. this board's quarantine, and how it is lifted
                        log.warning("the learner pauses this board: %s", msg.reason)
                self._state_changed |= msg.state != self.state
                self.state = msg.state
                self.status_interval_s = msg.status_interval_s

    def _other_run(self, msg: ControlMessage) -> None:  # holds _lock
        if msg.state != "stopped":
            self._join = msg  # the loop joins it between two steps
        elif self._join is not None and self._join.run_id == msg.run_id:
            self._join = None  # that run start ended before the loop joined it

    def on_credit(self, payload: bytes) -> None:
        grant = self._decode(decode_credit, payload, "credit")
        if grant is None:
            return
        self._news.set()
        with self._lock:
            if grant.run_id == self.run_id:
                self._apply(grant)
            else:
                self._grant = grant

    def _decode(self, decode, payload: bytes, kind: str):
        if not payload:
            return None  # a cleared retained message
        try:
            return decode(payload)
        except CodecError as e:
            self.rejected += 1
            if self.rejected == 1:
                log.warning("%s message rejected: %s", kind, e)
            return None

    def _apply(self, grant: CreditGrant) -> None:  # holds _lock
        if self.session in grant.refused:
            if self.state != "refused":
                log.error(
                    "actor id %r is in use by another live actor (session %d) in this run: "
                    "this one (session %d) stops. Give every board its own id.",
                    self.actor_id,
                    grant.session,
                    self.session,
                )
            self.state = "refused"
        elif grant.session == self.session:
            self.credit = grant.credit

    # --- loop thread ------------------------------------------------------------------

    def take_join(self) -> str | None:
        """The run start to join now, if a control message named a new one."""
        with self._lock:
            msg, self._join = self._join, None
            if msg is None or self.done:
                return None
            self.run_id = msg.run_id
            self.state = msg.state
            self.status_interval_s = msg.status_interval_s
            self.credit = 0
            grant, self._grant = self._grant, None
            if grant is not None and grant.run_id == msg.run_id:
                self._apply(grant)
            return msg.run_id

    def stop(self) -> None:
        """SIGTERM, or a test: the loop ends and the process exits."""
        self.exiting = True
        self._news.set()

    def status_every(self, own_s: float) -> float:
        """The status interval to keep: the board's own, or the learner's if longer."""
        return max(own_s, self.status_interval_s)

    def take_state_change(self) -> bool:
        """Whether a control message changed the run's state since the last call: a
        status is due at once (the learner waits for its boards to say ``paused``)."""
        if not self._state_changed:  # the loop's common case: no lock taken
            return False
        with self._lock:
            changed, self._state_changed = self._state_changed, False
        return changed

    def nudge(self) -> None:
        """Any thread: end the loop's wait (a policy was loaded: its status is due)."""
        self._news.set()

    def wait_news(self, timeout: float) -> None:
        """Sleep until a control message, a grant or a stop comes in, or ``timeout``: a
        board that may not step wakes when that may have changed, not a hundred times a
        second (a thousand waiting boards in one process would spin on the GIL)."""
        self._news.wait(timeout)
        self._news.clear()

    @property
    def done(self) -> bool:
        return self.exiting or self.state == "refused"

    def serves(self) -> bool:
        """Act greedily with the policy held and send nothing: the run is served (or
        paused, on a board that serves while paused), and no new run start waits."""
        if self._join is not None or self.done:
            return False
        return self.state == "serving" or (self.state == "paused" and self.serve_paused)

    def may_step(self, env_steps: int) -> bool:
        return self.state == "running" and env_steps < self.credit

    def status_state(self, env_steps: int) -> ActorState:
        if self.state == "waiting":
            return "starting"  # no control message of a run start yet
        if self.done or self.state == "stopped":
            return "stopped"
        if self.serves():
            return "serving"
        return "running" if self.may_step(env_steps) else "paused"
