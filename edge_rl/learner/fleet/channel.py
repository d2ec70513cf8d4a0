"""The control channel: the run's control message (run state, run id, stated status
interval), retained on the control topic, and getting it out.

    channel = ControlChannel(topics, publish, run_id)
    if channel.update(state, reason, interval):   # a new message: publish it
        channel.send()
    channel.resend()                # the transport refused the last one: again
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
from collections.abc import Callable

from edge_rl.types import ControlMessage, RunState
from edge_rl.wire.messages import encode_control
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)

FINAL: tuple[RunState, ...] = ("serving", "stopped")  # no other state follows either
FINAL_ACK_WAIT_S = 5.0


class ControlChannel:
    def __init__(self, topics: Topics, publish: Callable[..., bool], run_id: str) -> None:
        self.topics = topics
        self._publish = publish
        self.run_id = run_id
        self.state: RunState = "running"
        self.last: ControlMessage | None = None
        self.unsent = 0  # control messages the transport refused: sent again
        self._pending = False  # the last one was refused: the next call resends

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

    def republish(self) -> None:
        """After a (re)connect, the last message again, not waiting for the ack (on the
        transport's thread)."""
        if self.last is not None:
            self.send(wait_final=False)

    def welcome(self, actor: str) -> None:
        """The last message to ``actor``'s welcome topic (not retained), if there is one."""
        if self.last is not None:
            self._publish(self.topics.welcome(actor), encode_control(self.last))

    def announce(self, topic: str) -> bool:
        """The last message on ``topic``; False before the first."""
        if self.last is None:
            return False
        return self._publish(topic, encode_control(self.last))
