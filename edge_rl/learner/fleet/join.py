"""Pull-on-join: a board that (re)connects, to whichever node of a broker, asks the learner
for what it needs, and the learner answers on that board's own topics.

    desk = JoinDesk(topics, fleet, broadcast.send_to, max_actors)
    desk.on_hello(topic, payload)   # transport thread: <base>/actors/<id>/hello
    desk.hello()                    # after the learner's own (re)connect: boards re-announce
    desk.stats()                    # hellos answered, throttled, rejected

Retained messages make a newcomer's start easy on one broker, but a clustered broker may
keep them on one node only (RabbitMQ's MQTT plugin) or replicate them late: nothing a
board needs may hang on them. So a board publishes a hello (its status, ``ERLS``) on
connecting, and the learner answers with a welcome on ``<base>/actors/<id>/welcome``: its
current control (``ERLC``), then the current policy (``ERLP``), and the board's last
credit grant again on its credit topic. Ordinary messages cross a cluster at once, and
each answer goes to the one board that asked: a fleet reconnecting after a node failure
costs one policy per board, not one per board per board. The other way round, the
learner's hello (its control, on ``<base>/hello``) makes every board announce its status
at once, so that a learner that reconnects rebuilds its view of the fleet without the
retained statuses.

A hello is checked (decodes, names the actor of its topic) and each actor's hellos are
throttled by a token bucket (``burst`` at once, then ``rate_per_s``): a board that sends
hellos in a loop costs the learner at most one policy per second. Refusals are counted
and logged once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from edge_rl.learner.fleet.control import FleetControl
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_status
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JoinStats:
    hellos: int  # hellos answered with a welcome
    hellos_throttled: int  # past an actor's token bucket: not answered
    hellos_rejected: int  # undecodable, from another actor's topic, or past max_actors
    learner_hellos: int  # hellos the learner sent (one per (re)connect once running)


class JoinDesk:
    def __init__(
        self,
        topics: Topics,
        fleet: FleetControl,
        send_policy: Callable[[str], bool],  # PolicyBroadcast.send_to: the current one
        max_actors: int,
        *,
        burst: float = 4.0,
        rate_per_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics = topics
        self.fleet = fleet
        self.send_policy = send_policy
        self.max_buckets = 2 * max_actors  # invented ids must not grow the learner
        self.burst = burst
        self.rate_per_s = rate_per_s
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # actor -> (tokens, at)
        self.hellos = self.hellos_throttled = self.hellos_rejected = self.learner_hellos = 0

    def on_hello(self, topic: str, payload: bytes) -> None:
        """A board's hello (transport thread): checked, throttled, answered."""
        actor = self._checked(topic, payload)
        if actor is None:
            return
        if not self._take_token(actor):
            return
        self.fleet.welcome(actor)  # control on its welcome topic, its grant on its credit
        self.send_policy(self.topics.welcome(actor))  # the policy, to it alone
        with self._lock:
            self.hellos += 1

    def hello(self) -> None:
        """Ask every board of the run to announce itself (after a (re)connect)."""
        if self.fleet.announce(self.topics.hello):
            with self._lock:
                self.learner_hellos += 1

    def stats(self) -> JoinStats:
        with self._lock:
            return JoinStats(
                self.hellos, self.hellos_throttled, self.hellos_rejected, self.learner_hellos
            )

    def _checked(self, topic: str, payload: bytes) -> str | None:
        try:
            status = decode_status(payload)
        except CodecError as e:
            self._count_bad(f"undecodable hello on {topic}: {e}")
            return None
        if status.actor_id != self.topics.actor_of(topic):
            self._count_bad(f"a hello of {status.actor_id!r} on {topic}")
            return None
        return status.actor_id

    def _take_token(self, actor: str) -> bool:
        now = self._clock()
        with self._lock:
            if actor not in self._buckets and len(self._buckets) >= self.max_buckets:
                self._forget_idle(now)
                if len(self._buckets) >= self.max_buckets:
                    self.hellos_rejected += 1
                    if self.hellos_rejected == 1:
                        log.warning("hellos of more than %d actors: refused", self.max_buckets)
                    return False
            tokens, at = self._buckets.get(actor, (self.burst, now))
            tokens = min(self.burst, tokens + (now - at) * self.rate_per_s)
            if tokens < 1.0:
                self._buckets[actor] = (tokens, now)
                self.hellos_throttled += 1
                if self.hellos_throttled == 1:
                    log.warning("%s: hellos faster than %g/s: throttled", actor, self.rate_per_s)
                return False
            self._buckets[actor] = (tokens - 1.0, now)
            return True

    def _forget_idle(self, now: float) -> None:  # holds _lock
        """Drop the buckets that have refilled: such an actor is as good as new."""
        full_after = self.burst / self.rate_per_s
        self._buckets = {a: b for a, b in self._buckets.items() if now - b[1] < full_after}

    def _count_bad(self, why: str) -> None:
        with self._lock:
            self.hellos_rejected += 1
            first = self.hellos_rejected == 1
        if first:  # the counter says how often
            log.warning("hello refused: %s", why)
