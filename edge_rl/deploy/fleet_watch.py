"""A run's fleet as the broker tells it: the retained control message and every board's
latest status, from a subscriber of its own (``edge-rl deploy`` and ``edge-rl
fleet-status``).

    with FleetWatch(connect, Topics(root, run)) as watch:
        watch.wait_control(5)           # the run start and its state, or None
        watch.reports()                 # actor id -> BoardReport (rollout.py)
        watch.statuses()                # actor id -> (ActorStatus, when it came)
        watch.policy                    # the run's retained policy, verified (policy_key)

Retained statuses arrive at once on subscribing, so a board that said anything since the
run began is listed, offline ones too (their last will). A status that does not decode, or
names another board than its topic, is counted (``rejected``), logged once and ignored;
the board's previous one stands. Every figure of a status is clamped to what is possible
(learner/fleet/figures.py: the return to ``limits``' range; ``clamped`` counts such
statuses), so a board that says its return is 1e308 is shown, and judged, at the bound.
Given ``policy_key`` (the key the boards trust), the watch also reads the run's retained
policy and keeps it if its signature holds (``policy_rejected`` counts those that do not).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable

from edge_rl.deploy.rollout import BoardReport
from edge_rl.learner.fleet.figures import GENERIC_LIMITS, StatusLimits, bound_status
from edge_rl.transport.base import Connect, unreachable
from edge_rl.types import ActorStatus, ControlMessage, PolicyBundle
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_control, decode_status
from edge_rl.wire.policy import decode_policy
from edge_rl.wire.signing import Verifier
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)

MAX_BUNDLE_BYTES = 16_000_000 + 64 * 1024  # the largest board limit (rpi5) plus the header


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
        policy: bool = False,
        limits: StatusLimits = GENERIC_LIMITS,
        policy_key: Verifier | None = None,
    ) -> None:
        """``policy``: keep the run's retained policy's bytes too (``policy_payload``);
        ``policy_key``: decode and verify it with that key (``policy``). ``limits``: the
        run's env's return range (``limits_for_env``), when known."""
        self.topics = topics
        self.policy_key = policy_key
        self.policy: PolicyBundle | None = None
        self.policy_rejected = 0
        self.clock = clock
        self.limits = limits
        self.rejected = 0
        self.clamped = 0  # statuses with a figure outside what is possible
        self.control: ControlMessage | None = None
        self._statuses: dict[str, tuple[ActorStatus, float]] = {}
        self._lock = threading.Lock()
        self._control_seen = threading.Event()
        self.policy_payload = b""  # the run's retained (signed) policy, with ``policy``
        subscriptions = [(topics.control, 1), (topics.all_status, 1)]
        if policy or policy_key is not None:
            subscriptions.append((topics.policy, 1))
        self.transport = connect(
            f"{client_prefix}-{secrets.token_hex(4)}",
            subscriptions=subscriptions,
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
        if topic == self.topics.policy:
            self.policy_payload = payload  # verified by whoever reads it, or just below
        try:
            if topic == self.topics.control:
                self.control = decode_control(payload)
                self._control_seen.set()
                return
            if topic == self.topics.policy and self.policy_key is not None:
                self.policy = decode_policy(payload, self.policy_key, MAX_BUNDLE_BYTES)
                return
            status = decode_status(payload)
        except CodecError as e:
            if topic == self.topics.policy:
                self.policy_rejected += 1
            self._count_bad(f"{topic}: {e}")
            return
        if self.topics.actor_of(topic) != status.actor_id:
            self._count_bad(f"{topic}: status of {status.actor_id!r}")  # it must name its board
            return
        status, changed = bound_status(status, self.limits)
        if changed:
            self.clamped += 1
            if self.clamped == 1:  # logged once, counted always
                log.warning("%s: %s clamped to what is possible", topic, ", ".join(changed))
        with self._lock:
            self._statuses[status.actor_id] = (status, self.clock())

    def _count_bad(self, detail: str) -> None:
        self.rejected += 1
        if self.rejected == 1:  # logged once, counted always
            log.warning("ignored a message that does not decode (%s)", detail)

    def wait_connected(self, timeout: float) -> None:
        if not self.transport.wait_connected(timeout):
            raise unreachable(self.transport)

    def wait_control(self, timeout: float) -> ControlMessage | None:
        """The run's retained control message (it comes at once after the subscription)."""
        self._control_seen.wait(timeout)
        return self.control

    def statuses(self) -> dict[str, tuple[ActorStatus, float]]:
        with self._lock:
            return dict(self._statuses)

    def reports(self) -> dict[str, BoardReport]:
        return {a: report_of(s, seen) for a, (s, seen) in self.statuses().items()}
