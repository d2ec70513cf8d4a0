"""The learner's once-a-second row: metrics.csv, TensorBoard and the live view.

    meter = Meter(ingest, trainer, broadcast, fleet, inbox, view, selection.last_score)
    meter.start()              # the run's clock (summary.json's wall_s) starts here
    meter.tick(metrics_log)    # at most once a second unless forced
    meter.elapsed()            # the run's wall time, a resumed run's earlier starts included

The losses are the trainer's last; the run's wall time before this process is the
meter's checkpointed state (``state``/``load_state``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from edge_rl.learner.fleet.control import FleetControl
from edge_rl.learner.inbox import Inbox
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.outbound.broadcast import PolicyBroadcast
from edge_rl.learner.trainer import Trainer
from edge_rl.telemetry.logs import MetricsLog
from edge_rl.telemetry.progress import LiveView
from edge_rl.types import ActorStatus, PartState

METRICS = [
    "wall_s",
    "env_steps",
    "episodes",
    "recent_return",
    "updates",
    "updates_per_s",
    "loss",
    "mean_q",
    "policy_version",
    "actors_online",
    "transitions_rejected",
    "transitions_duplicate",
    "ingest_queue_dropped",
    "fleet_state",
    "quarantined",
    "exports_failed",
    "compression",
    "policy_bytes",
    "intervention_rate",
    "epsilon",
    "sigma",
]


def intervention_rate(actors: Iterable[ActorStatus]) -> float:
    """The share of the fleet's env steps an intervention acted, by the boards' statuses."""
    steps = interventions = 0
    for a in actors:
        steps += a.env_steps
        interventions += min(a.interventions, a.env_steps)
    return round(interventions / steps, 4) if steps else 0.0


class Meter:
    def __init__(
        self,
        ingest: Ingest,
        trainer: Trainer,
        broadcast: PolicyBroadcast,
        fleet: FleetControl,
        inbox: Inbox,
        view: LiveView | None = None,
        greedy: Callable[[], tuple[int, float] | None] = lambda: None,
        exports_failed: Callable[[], int] = lambda: 0,  # the packager's and broadcast's
    ) -> None:
        self.ingest = ingest
        self.exports_failed = exports_failed
        self.trainer = trainer
        self.algo = trainer.algo
        self.broadcast = broadcast
        self.fleet = fleet
        self.inbox = inbox
        self.view = view
        self.greedy = greedy  # the newest policy's greedy score (ModelSelection.last_score)
        self._t0 = time.monotonic()
        self._rate = (self._t0, 0)  # (time, updates) at the last tick
        self._next_tick = 0.0
        self._before = 0.0  # the run's wall time before this process (a resumed run)

    def start(self) -> None:
        self._t0 = time.monotonic() - self._before
        self._rate = (time.monotonic(), self.algo.updates)

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def tick(self, log: MetricsLog, force: bool = False) -> None:
        now = time.monotonic()
        if now < self._next_tick and not force:
            return
        self._next_tick = now + 1.0
        t_prev, u_prev = self._rate
        self._rate = (now, self.algo.updates)
        row = self.row(now, (self.algo.updates - u_prev) / max(now - t_prev, 1e-9))
        log.write(row, step=row["env_steps"])
        if self.view is not None:
            self.view.update(row, self.fleet.actors(), self.greedy())

    def row(self, now: float, updates_per_s: float) -> dict[str, Any]:
        s = self.ingest.stats()
        ret = self.ingest.recent_return()
        current = self.broadcast.current
        return {
            "wall_s": round(now - self._t0, 2),
            "env_steps": s.transitions,
            "episodes": s.episodes,
            "recent_return": float("nan") if ret is None else ret,
            "updates": self.algo.updates,
            "updates_per_s": round(updates_per_s, 1),
            "loss": self.trainer.losses.get("loss", float("nan")),
            "mean_q": self.trainer.losses.get("mean_q", float("nan")),
            "policy_version": self.broadcast.version,
            "actors_online": sum(a.state != "offline" for a in self.fleet.actors().values()),
            "transitions_rejected": s.rejected_transitions,
            "transitions_duplicate": s.duplicate_transitions,
            "ingest_queue_dropped": self.inbox.dropped,
            "fleet_state": self.fleet.state,
            "quarantined": len(self.ingest.watch.quarantined()) if self.ingest.watch else 0,
            "exports_failed": self.exports_failed(),
            "compression": self.algo.compression(),
            "policy_bytes": len(current.payload) if current else 0,
            "intervention_rate": intervention_rate(self.fleet.actors().values()),
            **self.algo.exploration(s.transitions),
        }

    # --- durable runs (edge_rl/learner/durable.py) ----------------------------------------

    def state(self) -> PartState:
        return PartState({"wall_s": self.elapsed()})

    def load_state(self, state: PartState) -> None:
        """Before ``start``: the run's clock goes on from the saved wall time."""
        self._before = float(state.json["wall_s"])
        self._t0 = time.monotonic() - self._before
