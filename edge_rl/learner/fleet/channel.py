"""The control channel: the run's control message (run state, run id, stated status
interval), retained on the control topic, and getting it out.

    channel = ControlChannel(topics, publish, run_id)
    if channel.update(state, reason, interval):   # a new message: publish it
        channel.send()
    channel.resend()                # the transport refused the last one: again
    channel.heartbeat()             # running: the same message again every HEARTBEAT_S
    channel.welcome("pi-01")        # to one board, on its welcome topic
    channel.announce(topics.hello)  # the learner's hello

A final state (``serving``, ``stopped``) waits for the broker's acknowledgement (bounded):
the learner leaves soon after, and its boards must have it retained. One the transport
refuses (disconnected, queue full) is sent again by the next send or wait, and by
``FleetControl.republish`` on a reconnect.

FleetControl calls it under its lock: a "running" must never overtake the "paused" sent
after it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from edge_rl.types import ControlMessage, RunState
from edge_rl.wire.messages import encode_control
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)

FINAL: tuple[RunState, ...] = ("serving", "stopped")  # no other state follows either
MAX_REASON = 512  # characters of a reason told to one board
FINAL_ACK_WAIT_S = 5.0
# While running, the control goes out again at least this often (or every stated status
# interval, if longer): a board's learner_silent watchdog (docs/robots.md) tells a learner
# that has nothing new to say from one that is gone. A board's stale_after_s must exceed it.
HEARTBEAT_S = 0.25


class ControlChannel:
    def __init__(
        self,
        topics: Topics,
        publish: Callable[..., bool],
        run_id: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics = topics
        self._clock = clock
        self._publish = publish
        self.run_id = run_id
        self.state: RunState = "running"
        self.last: ControlMessage | None = None
        self.unsent = 0  # control messages the transport refused: sent again
        self._pending = False  # the last one was refused: the next call resends
        self._sent_at = clock()  # when the last message went out

    def update(self, state: RunState, reason: str, interval: float) -> bool:
        """Whether the message ``state``, ``reason`` and ``interval`` make is new (then it
        is the last one, to be sent)."""
        msg = ControlMessage(state, self.run_id, reason, interval)
        if msg == self.last:
            return False
        self.state = state
        self.last = msg
        return True

    def stated_interval(self) -> float:
        """The status interval stated in the last message (0 before the first)."""
        return self.last.status_interval_s if self.last is not None else 0.0

    def send(self, wait_final: bool = True) -> None:
        """Publish the last control message, retained; a final one waits for the broker's
        acknowledgement (``wait_final``: not on the transport's own thread)."""
        assert self.last is not None
        wait = FINAL_ACK_WAIT_S if wait_final and self.last.state in FINAL else 0.0
        payload = encode_control(self.last)
        self._sent_at = self._clock()
        sent = self._publish(self.topics.control, payload, retain=True, wait=wait)
        self._pending = not sent
        if not sent:
            self.unsent += 1
            if self.unsent == 1:  # the counter in summary.json says how often
                log.warning(
                    "the %r control message was refused by the transport: sent again",
                    self.last.state,
                )

    def resend(self) -> None:
        """The last message again if the transport refused it."""
        if self._pending:
            self.send()

    def heartbeat(self) -> None:
        """While running, the last message again once ``HEARTBEAT_S`` (or the stated status
        interval) has passed since the last went out: the learner is there."""
        if self.last is None or self.last.state != "running":
            return
        if self._clock() - self._sent_at >= max(HEARTBEAT_S, self.last.status_interval_s):
            self.send()

    def republish(self) -> None:
        """After a (re)connect, the last message again, not waiting for the ack (on the
        transport's thread)."""
        if self.last is not None:
            self.send(wait_final=False)

    def welcome(self, actor: str) -> None:
        """The last message to ``actor``'s welcome topic (not retained), if there is one."""
        if self.last is not None:
            self._publish(self.topics.welcome(actor), encode_control(self.last))

    def tell(self, actor: str, state: RunState, reason: str) -> None:
        """A control of this run start for ``actor`` alone, on its welcome topic (not
        retained): ``state`` and why."""
        msg = ControlMessage(state, self.run_id, reason[:MAX_REASON])
        self._publish(self.topics.welcome(actor), encode_control(msg))

    def announce(self, topic: str) -> bool:
        """The last message on ``topic``; False before the first."""
        if self.last is None:
            return False
        return self._publish(topic, encode_control(self.last))
