"""The run's summary.json, from a typed record of the run (``RunRecord``).

    record = RunRecord(cfg, run_id, ..., algo=algo.stats(), fleet=fleet.stats(), ...)
    summary = write_summary(run_dir, record)   # summary.json and breakdown.csv
    summary = run_summary(record)    # the flat dict the README's run-directory table,
                                     # ``edge-rl report`` and the benchmarks read

Each part reports itself (its ``stats()``); this module only lays the figures out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from edge_rl.agents.algo import AlgoStats
from edge_rl.boards import BoardConfig, Power, board_file, load_board
from edge_rl.config import RunConfig
from edge_rl.learner.demos import DemoStats
from edge_rl.learner.durable import DurableStats
from edge_rl.learner.fleet.control import FleetStats
from edge_rl.learner.fleet.join import JoinStats
from edge_rl.learner.fleet.quarantine import QuarantineStats
from edge_rl.learner.ingest.accounting import IngestStats
from edge_rl.learner.metrics import intervention_rate
from edge_rl.learner.outbound.broadcast import BroadcastStats
from edge_rl.learner.outbound.exporter import ExporterStats
from edge_rl.learner.outbound.packager import PackagerStats
from edge_rl.learner.outbound.selection import SelectionStats
from edge_rl.learner.run_dir import RunDir
from edge_rl.runtime.evaluate import EvalResult
from edge_rl.telemetry import breakdown, energy
from edge_rl.telemetry.energy import CarbonIntensity, HostEnergy
from edge_rl.telemetry.logs import write_json_atomic


@dataclass(frozen=True)
class InboxCounts:
    dropped: int  # payloads the full ingest queue dropped
    dropped_transitions: int  # in those payloads, as their headers claim


@dataclass(frozen=True)
class RunRecord:
    cfg: RunConfig
    run_id: str  # this start of the run (protocol §5)
    wall_s: float
    algo: AlgoStats
    ingest: IngestStats
    batches_missing: int
    inbox: InboxCounts
    broker_dropped: int
    fleet: FleetStats
    broadcast: BroadcastStats  # its current policy: what the actors run at the end
    selection: SelectionStats
    exporter: ExporterStats
    packager: PackagerStats
    runtime_breakdown: dict[str, Any]
    host_energy: HostEnergy
    intensity: CarbonIntensity
    final_eval: EvalResult | None  # the deployed policy, greedily, in LiteRT
    durable: DurableStats
    interrupted: bool = False  # ended by SIGTERM/SIGINT: checkpointed, not finished, no eval
    eval_skipped: bool = False  # a signal after the budget: finished, not evaluated
    quarantine: QuarantineStats | None = None  # per-board figures and who was isolated
    replay_rows: Mapping[str, int] = field(default_factory=dict)  # each board's rows in replay
    join: JoinStats = JoinStats(0, 0, 0, 0)  # boards' hellos and the learner's own (join.py)
    demos: DemoStats = DemoStats(0, 0, 0, 1.0)  # the demonstration buffer (demos.py)


def write_summary(run_dir: RunDir, r: RunRecord) -> dict[str, Any]:
    """summary.json and breakdown.csv in ``run_dir``; the summary."""
    summary = run_summary(r)
    write_json_atomic(run_dir.summary, summary)
    breakdown.write_report(run_dir.breakdown, summary["runtime_breakdown"])
    return summary


def run_summary(r: RunRecord) -> dict[str, Any]:
    s, p, result = r.ingest, r.broadcast.current, r.final_eval
    b, f = r.broadcast, r.fleet
    return {
        "run": r.cfg.run,
        "run_id": r.run_id,
        "env_id": r.cfg.env_id,
        "algo": r.cfg.algo,
        "seed": r.cfg.seed,
        "env_steps": s.transitions,
        "episodes": s.episodes,
        "updates": r.algo.updates,
        "updates_skipped_nonfinite": r.algo.skipped,
        "wall_s": round(r.wall_s, 2),
        "interrupted": r.interrupted,
        "resumed_from_env_steps": r.durable.resumed_from,
        "last_checkpoint_seconds": round(r.durable.last_seconds, 3),
        "final_eval_return": result.mean if result else None,
        "final_eval_skipped": r.eval_skipped,
        "final_eval_return_std": result.std if result else None,
        "eval_episodes": len(result.returns) if result else 0,
        "eval_runtime": "litert",
        "policy_version": b.version,
        "deployed_weights_of_version": r.exporter.deployed_from or b.version,
        "selection_scores": dict(r.selection.scores),
        "policy_precision": r.cfg.export.precision,
        "policy_model_bytes": len(p.model) if p else None,
        "policy_payload_bytes": len(p.payload) if p else None,
        "policy_codec": r.cfg.export.codec,
        "policy_bytes_total": b.bytes_total,
        "publishes": b.count,
        "compression": r.algo.compression,
        "parity": p.parity if p else None,
        "last_export_seconds": round(p.export_seconds, 3) if p else None,
        "exports_failed": r.packager.failed + b.refused,
        "exports_failed_suspects": dict(r.packager.suspects),
        "exports_deferred": r.exporter.deferred,
        "transitions_received": s.transitions,
        "transitions_rejected": s.rejected_transitions,
        "transitions_duplicate": s.duplicate_transitions,
        "transitions_received_by_actor": dict(sorted(s.total_by_actor.items())),
        "batches_rejected": dict(s.rejected),
        "batches_missing": r.batches_missing,
        "transitions_over_budget": s.over_budget,
        "credit_written_off": f.credit_written_off,
        "credit_reclaimed": f.credit_reclaimed,
        "credit_withheld": f.credit_withheld,
        "grants_unsent": f.grants_unsent,
        "control_unsent": f.control_unsent,
        "ingest_queue_dropped": r.inbox.dropped,
        "ingest_queue_dropped_transitions": r.inbox.dropped_transitions,
        "broker_dropped_messages": r.broker_dropped,
        "status_rejected": f.status_rejected,
        "status_other_run": f.status_other_run,
        "status_over_credit": f.status_over_credit,
        "status_clamped": f.status_clamped,
        "actor_sessions_refused": f.actor_sessions_refused,
        "hellos_answered": r.join.hellos,
        "hellos_throttled": r.join.hellos_throttled,
        "hellos_rejected": r.join.hellos_rejected,
        "learner_hellos": r.join.learner_hellos,
        **quarantine_summary(r),
        "demonstrations": asdict(r.demos),
        "intervention_rate": intervention_rate(f.actors.values()),  # the fleet's, by status
        "actors": {
            a.actor_id: {
                "state": a.state,
                "env_steps": a.env_steps,
                "transitions_sent": a.transitions_sent,
                "batches_sent": a.batches_sent,  # messages: transitions / batches is the size
                "policy_version": a.policy_version,
                # what the actor refused or could not send, by its own count
                "batches_dropped": a.batches_dropped,
                "policies_rejected": a.policies_rejected,
                "control_rejected": a.control_rejected,
                "transitions_oversize": a.transitions_oversize,
                "transitions_dropped": a.transitions_dropped,
                # steps an intervention acted (its teleop:), and their share of its steps
                "interventions": a.interventions,
                "intervention_rate": round(a.interventions / a.env_steps, 4)
                if a.env_steps
                else 0.0,
                # the board's safety shield: actions changed and safe actions, by reason
                "safety": dict(a.safety),
                "safe_reason": a.safe_reason,
                # a board with a control_hz: its steps at a deadline, misses and jitter
                "control_periods": a.control_periods,
                "deadline_misses": a.deadline_misses,
                "jitter_p50_ms": a.jitter_p50_ms,
                "jitter_p99_ms": a.jitter_p99_ms,
                # a board file's success_key / failure_key: the episodes each ended
                "episodes": a.episodes,
                "episodes_succeeded": a.episodes_succeeded,
                "episodes_failed": a.episodes_failed,
            }
            for a in f.actors.values()
        },
        "runtime_breakdown": r.runtime_breakdown,
        "energy": energy_summary(r),
    }


def quarantine_summary(r: RunRecord) -> dict[str, Any]:
    """``quarantined``: each isolated board's verdict (rule, figure, fleet median, z, env
    steps, rows evicted); ``boards``: each board's figures and its rows in replay."""
    q = r.quarantine
    if q is None:
        return {"quarantined": {}, "boards": {}}
    actors = r.fleet.actors
    boards = {
        a: {
            **asdict(f),
            "replay_rows": r.replay_rows.get(a, 0),
            "safety": dict(actors[a].safety) if a in actors else {},
        }
        for a, f in sorted(q.boards.items())
    }
    return {
        "quarantined": {a: asdict(v) for a, v in sorted(q.quarantined.items())},
        "boards": boards,
    }


def energy_summary(r: RunRecord) -> dict[str, Any]:
    """The learner host as codecarbon measured it; each actor's board from its power model,
    looked up by the board name in its status (a real fleet may mix boards), falling back to
    the run's ``fleet.board`` for an actor that reported none."""
    cfg, actors = r.cfg, r.fleet.actors
    fleet_board = _board(board_file(cfg.fleet.board))
    default = fleet_board.board if fleet_board else cfg.fleet.board
    boards = {a: (actors[a].board if a in actors else "") or default for a in r.fleet.breakdowns}
    powers: dict[str, Power | None] = {}
    for name in set(boards.values()):
        b = fleet_board if fleet_board and fleet_board.board == name else _board_named(name)
        powers[name] = b.power if b else None
    return energy.energy_block(
        r.host_energy,
        energy.fleet_energy(r.fleet.breakdowns, boards, powers),
        default,
        fleet_board.power if fleet_board else None,
        r.intensity,
        cfg.energy.country_iso_code,
        cfg.energy.region,
    )


def _board_named(name: str) -> BoardConfig | None:
    """``firmware_configs/<name>.yaml``; the name comes from an actor's status, so it is
    never taken as a path."""
    if not name.replace("-", "").replace("_", "").isalnum():
        return None
    return _board(board_file(name))


def _board(path: Path) -> BoardConfig | None:
    try:
        return load_board(path)
    except (FileNotFoundError, ValueError):
        return None
