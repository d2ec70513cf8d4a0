"""The roster: who is in the fleet, as each actor's last status says.

    roster = Roster(topics, run_id, grants, fleet.max_actors, fleet.identity_window_s)
    status = roster.check(topic, payload)   # transport thread: None if refused or ignored
    roster.record(status)                   # under FleetControl's lock: the owner's, kept
    roster.actors                           # {actor_id: ActorStatus}
    roster.online()                         # actors not offline or stopped

A status must decode and come from its own actor's topic (``status_rejected``); one of
another run start is ignored (``status_other_run``); one that claims more env steps or
transitions than its session was granted (``Grants``) is refused (``status_over_credit``):
an actor steps only under credit, so such a status is false, and its claim must not become
credit. Every other figure is clamped to what the env and the status's own counts make
possible (figures.py: a return of 1e308 becomes the env's highest; ``status_clamped``
counts such statuses, each still recorded). Of two live processes under one id the
newcomer is refused (identity.py); past ``fleet.max_actors`` a new actor is refused.

``check`` runs on the transport's thread alone (its counters have that one writer);
``record`` and every read hold FleetControl's lock.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.fleet.figures import GENERIC_LIMITS, StatusLimits, bound_status
from edge_rl.learner.fleet.identity import Identities
from edge_rl.types import ActorStatus
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_status
from edge_rl.wire.topics import Topics

log = logging.getLogger(__name__)


class Roster:
    def __init__(
        self,
        topics: Topics,
        run_id: str,
        grants: Grants,
        max_actors: int,
        identity_window_s: float,
        limits: StatusLimits | None = None,
    ) -> None:
        """``limits``: the run's env's return range (figures.py); None: ``GENERIC_LIMITS``."""
        self.limits = limits or GENERIC_LIMITS
        self.topics = topics
        self.run_id = run_id
        self.grants = grants
        self.max_actors = max_actors
        self.ids = Identities(identity_window_s)
        self.actors: dict[str, ActorStatus] = {}
        # The last runtime breakdown of each actor: kept apart because the last will says
        # "offline" without one (it is made before the actor starts).
        self.breakdowns: dict[str, dict[str, float]] = {}
        self.status_rejected = 0  # undecodable, not from its own topic, past max_actors
        self.status_other_run = 0  # statuses of another run start (or none yet): ignored
        self.status_over_credit = 0  # statuses that claim more than their grant: refused
        self.actors_refused = 0  # new actors past max_actors
        self.status_clamped = 0  # statuses with a figure outside what is possible: clamped

    def check(self, topic: str, payload: bytes) -> ActorStatus | None:
        """The status in ``payload`` if it is to be recorded; else None (counted)."""
        try:
            status = decode_status(payload)
        except CodecError:
            self.status_rejected += 1
            return None
        if status.actor_id != self.topics.actor_of(topic):
            self.status_rejected += 1  # a status must come from the topic of its own actor
            return None
        # A last will is made before the actor joins a run: it is matched by session alone.
        if status.run_id != self.run_id and status.state != "offline":
            self.status_other_run += 1
            return None
        if self._over_credit(status):
            return None
        return self._bounded(status)

    def _bounded(self, status: ActorStatus) -> ActorStatus:
        """``status`` with its figures clamped (figures.py); counted, logged once."""
        bounded, clamped = bound_status(status, self.limits)
        if clamped:
            self.status_clamped += 1
            if self.status_clamped == 1:  # the counter says how often
                log.warning(
                    "%s: a status with %s outside what is possible: clamped",
                    status.actor_id,
                    ", ".join(clamped),
                )
        return bounded

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
        self.status_over_credit += 1
        if self.status_over_credit == 1:  # the counter says how often
            log.warning(
                "%s (session %d): a status claims %d env steps or transitions, granted %d: refused",
                s.actor_id,
                s.session,
                claimed,
                bound,
            )
        return True

    def record(self, status: ActorStatus) -> None:
        """Keep ``status`` as its actor's last, if it is the owner's of the id and the
        actor is known or there is room for it."""
        if not self.ids.admit(status.actor_id, status.session, status.state):
            return  # a will of a process not in this run, or a duplicate id (counted)
        if status.actor_id not in self.actors and len(self.actors) >= self.max_actors:
            self.status_rejected += 1
            self.actors_refused += 1
            if self.actors_refused == 1:
                log.warning(
                    "more than fleet.max_actors=%d actors: %s refused",
                    self.max_actors,
                    status.actor_id,
                )
            return
        last = self.actors.get(status.actor_id)
        if status.state == "offline" and last is not None:
            # The last will is made before the actor starts: it carries no counters. A
            # killed actor keeps the ones it last reported.
            status = dataclasses.replace(last, state="offline")
        self.actors[status.actor_id] = status
        if status.breakdown:
            self.breakdowns[status.actor_id] = status.breakdown

    def online(self) -> int:
        """Actors whose last status is not ``offline`` or ``stopped``."""
        return sum(s.state not in ("offline", "stopped") for s in self.actors.values())

    def online_ids(self, left_out: Callable[[str], bool]) -> set[str]:
        """The ids of the actors online, but those ``left_out`` (quarantined)."""
        return {
            a
            for a, s in self.actors.items()
            if s.state not in ("offline", "stopped") and not left_out(a)
        }

    def stepping(self) -> list[str]:
        """Actors whose last status says they step (or are about to)."""
        return [a for a, s in self.actors.items() if s.state in ("running", "starting")]

    def behind(self, state: str) -> tuple[int, int]:
        """(online, of them not in ``state``), by their last statuses."""
        online = [s for s in self.actors.values() if s.state not in ("offline", "stopped")]
        return len(online), sum(s.state != state for s in online)
