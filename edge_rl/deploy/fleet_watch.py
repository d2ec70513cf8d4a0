"""A run's fleet as the broker tells it: the retained control message and every board's
latest status, from a subscriber of its own (``edge-rl deploy`` and ``edge-rl
fleet-status``).

    with FleetWatch(connect, Topics(root, run)) as watch:
        watch.wait_control(5)           # the run start and its state, or None
        watch.reports()                 # actor id -> BoardReport (rollout.py)
        watch.statuses()                # actor id -> (ActorStatus, when it came)

Retained statuses arrive at once on subscribing, so a board that said anything since the
run began is listed, offline ones too (their last will). A status that does not decode, or
names another board than its topic, is counted (``rejected``), logged once and ignored;
the board's previous one stands.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable

from edge_rl.deploy.rollout import BoardReport
from edge_rl.transport.base import Connect
from edge_rl.types import ActorStatus, ControlMessage
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_control, decode_status
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)


def report_of(status: ActorStatus, seen: float) -> BoardReport:
    return BoardReport(
        actor_id=status.actor_id,
        state=status.state,
        run_id=status.run_id,
        policy_version=status.policy_version,
        digest=status.policy_digest,
        recent_return=status.recent_return,
        served_episodes=status.served_episodes,
        policies_failed=status.policies_failed,
        seen=seen,
    )


class FleetWatch:
    def __init__(
        self,
        connect: Connect,
        topics: Topics,
        clock: Callable[[], float] = time.monotonic,
        client_prefix: str = "edge-rl-watch",
    ) -> None:
        self.topics = topics
        self.clock = clock
        self.rejected = 0
        self.control: ControlMessage | None = None
        self._statuses: dict[str, tuple[ActorStatus, float]] = {}
        self._lock = threading.Lock()
        self._control_seen = threading.Event()
        self.transport = connect(
            f"{client_prefix}-{secrets.token_hex(4)}",
            subscriptions=[(topics.control, 1), (topics.all_status, 1)],
            on_message=self._on_message,
        )

    def __enter__(self) -> FleetWatch:
        self.transport.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.transport.stop()

    def _on_message(self, topic: str, payload: bytes) -> None:
        if not payload:
            return  # a cleared retained message
        try:
            if topic == self.topics.control:
                self.control = decode_control(payload)
                self._control_seen.set()
                return
            status = decode_status(payload)
        except CodecError as e:
            self._count_bad(f"{topic}: {e}")
            return
        if self.topics.actor_of(topic) != status.actor_id:
            self._count_bad(f"{topic}: status of {status.actor_id!r}")  # it must name its board
            return
        with self._lock:
            self._statuses[status.actor_id] = (status, self.clock())

    def _count_bad(self, detail: str) -> None:
        self.rejected += 1
        if self.rejected == 1:  # logged once, counted always
            log.warning("ignored a message that does not decode (%s)", detail)

    def wait_connected(self, timeout: float) -> None:
        if not self.transport.wait_connected(timeout):
            raise ConnectionError(f"cannot reach the MQTT broker at {self.transport.url}")

    def wait_control(self, timeout: float) -> ControlMessage | None:
        """The run's retained control message (it comes at once after the subscription)."""
        self._control_seen.wait(timeout)
        return self.control

    def statuses(self) -> dict[str, tuple[ActorStatus, float]]:
        with self._lock:
            return dict(self._statuses)

    def reports(self) -> dict[str, BoardReport]:
        return {a: report_of(s, seen) for a, (s, seen) in self.statuses().items()}
