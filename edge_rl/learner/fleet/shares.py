"""Shares: the fleet's lead, and how much of it each actor is granted.

    shares = Shares(cfg.pacing, cfg.fleet.min_grant)
    shares.allowed(updates)          # env steps the fleet may have taken in all
    shares.held("pi-01", received)   # granted and not delivered
    shares.grant(updates, received, by_actor, online, lost, idle, stepped)  # new credits

The fleet may produce at most ``max_lag_transitions`` more transitions than the updates done
so far have paid for (``Pacing.env_steps_paying_for``), never more than the budget. The
ledger (``CreditLedger``) shares what is neither received nor outstanding among the actors
online; no actor holds more than half the lead (``held_at_most``), and a share is at least
``fleet.min_grant`` while there is that much for it.

Pure bookkeeping: FleetControl calls it under its lock.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

from edge_rl.config import Pacing
from edge_rl.learner.fleet.credit import CreditLedger


def held_at_most(lead: int, online: int, min_share: int) -> int:
    """What one actor may hold granted and not delivered: half the ``lead`` (one that never
    delivers, a compromised board, cannot take all of it and stall the fleet), and twice an
    even share of it, at least ``min_share``: while most of a large fleet's boards are slow
    to take their turn (a loaded host) or idle, the few that step first must not take the
    lead that all of them share, or most boards are never granted a step (docs/scale.md)."""
    half = math.ceil(lead / 2)
    even_twice = max(min_share, math.ceil(2 * lead / max(1, online)))
    return max(1, min(half, even_twice))


class Shares:
    def __init__(self, pacing: Pacing, min_grant: int) -> None:
        self.pacing = pacing
        self.min_grant = min_grant
        self.ledger = CreditLedger()

    def allowed(self, updates: int) -> int:
        """The env steps the fleet may have taken once ``updates`` are done: what they paid
        for and the lead (``max_lag_transitions``), at most the budget."""
        p = self.pacing
        return min(p.env_steps_paying_for(updates) + p.max_lag_transitions, p.total_env_steps)

    def min_share(self, allowed: int, online: int) -> int:
        """``fleet.min_grant``, at most half the lead per online actor (the learner keeps
        data to train on while slices wait), and 1 once the budget is allowed (the last
        steps must be granted)."""
        if allowed >= self.pacing.total_env_steps:
            return 1
        half_lead = self.pacing.max_lag_transitions // (2 * max(1, online))
        return max(1, min(self.min_grant, half_lead))

    def held(self, actor: str, received: int) -> int:
        """What ``actor`` was granted and has not delivered (``received`` of it)."""
        return self.ledger.granted.get(actor, 0) - received

    def grant(
        self,
        updates: int,
        received: int,
        by_actor: Mapping[str, int],
        online: Sequence[str],
        lost: Mapping[str, int],
        idle: Collection[str],
        stepped: Mapping[str, int],
        trust: Mapping[str, float] | None = None,
    ) -> dict[str, int]:
        """Each ``online`` actor's credit once ``updates`` are done and ``received``
        transitions are in (``by_actor``); ``lost``, ``idle`` and ``stepped`` as
        ``CreditLedger.grant`` reads them (``idle``: its ``frozen``)."""
        allowed = self.allowed(updates)
        min_share = self.min_share(allowed, len(online))
        return self.ledger.grant(
            allowed,
            received,
            by_actor,
            sorted(online),
            lost,
            idle,
            stepped,
            held_at_most(allowed - received, len(online), min_share),
            min_share=min_share,
            trust=trust,
        )
