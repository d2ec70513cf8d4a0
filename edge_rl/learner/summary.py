"""The run's summary.json, from a typed record of the run (``RunRecord``).

    record = record_of(node)          # a LearnerNode at its end: every figure, read once
    summary = run_summary(record)     # the flat dict the README's run-directory table,
                                      # ``edge-rl report`` and the benchmarks read

Kept apart from the node: a long flat record is not part of the node's data flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edge_rl.boards import BoardConfig, Power, board_file, load_board
from edge_rl.config import RunConfig
from edge_rl.learner.ingest.accounting import IngestStats
from edge_rl.learner.outbound.packager import Published
from edge_rl.learner.outbound.selection import evaluate_policy
from edge_rl.runtime.evaluate import EvalResult
from edge_rl.telemetry import breakdown, energy
from edge_rl.telemetry.energy import CarbonIntensity, HostEnergy
from edge_rl.telemetry.logs import write_json_atomic
from edge_rl.types import ActorStatus


@dataclass(frozen=True)
class RunRecord:
    cfg: RunConfig
    run_id: str  # this start of the run (protocol §5)
    wall_s: float
    updates: int
    updates_skipped: int  # not applied: a loss or gradient was not finite
    ingest: IngestStats
    batches_missing: int
    inbox_dropped: int
    inbox_dropped_transitions: int
    broker_dropped: int
    fleet_counts: Mapping[str, int]  # FleetControl.counts(): statuses refused or ignored
    credit_written_off: int  # sent, never received, granted again (fleet_control.py)
    policy_version: int
    deployed_from: int | None  # version whose weights the last publish redeployed
    selection_scores: Mapping[int, float]
    published: Published | None  # what the actors run at the end
    policy_bytes_total: int
    publishes: int
    exports_failed: int
    compression: dict[str, Any] | None  # the compressor's summary, without compression None
    actors: Mapping[str, ActorStatus]
    runtime_breakdown: dict[str, Any]
    actor_breakdowns: Mapping[str, Mapping[str, float]]
    host_energy: HostEnergy
    intensity: CarbonIntensity
    final_eval: EvalResult | None  # the deployed policy, greedily, in LiteRT
    interrupted: bool = False  # ended by SIGTERM/SIGINT: checkpointed, not finished, no eval
    resumed_from: int | None = None  # env steps of the checkpoint this process resumed from
    checkpoint_seconds: float = 0.0  # what the last checkpoint took to write


def record_of(node: Any, evaluate: bool = True) -> RunRecord:
    """A ``LearnerNode`` at its end; with ``evaluate``, the deployed policy's final evaluation."""
    lap = node.clocks["main"].lap
    lap("other")
    published, cfg = node.broadcast.current, node.cfg
    result = None
    if published is not None and evaluate:
        result = evaluate_policy(published, cfg.eval_episodes, cfg.seed + 10_000)
    lap("evaluate")  # the main thread's breakdown ends here
    actor_breakdowns = node.fleet.breakdowns()
    compressor = node.agent.compressor
    return RunRecord(
        cfg=cfg,
        run_id=node.run_id,
        wall_s=node.meter.elapsed(),
        updates=node.agent.updates,
        updates_skipped=node.agent.skipped,
        ingest=node.ingest.stats(),
        batches_missing=node.ingest.missing_batches,
        inbox_dropped=node.inbox.dropped,
        broker_dropped=node.broker_dropped,
        inbox_dropped_transitions=node.inbox.dropped_transitions,
        fleet_counts=node.fleet.counts(),
        policy_version=node.broadcast.version,
        credit_written_off=sum(node.fleet.written_off.values()),
        deployed_from=node.deployed_from,
        selection_scores=dict(node.selection.scores),
        published=published,
        policy_bytes_total=node.broadcast.bytes_total,
        publishes=node.broadcast.count,
        exports_failed=node.publisher.failed + node.broadcast.refused,
        compression=compressor.summary() if compressor else None,
        actors=node.fleet.actors(),
        actor_breakdowns=actor_breakdowns,
        runtime_breakdown=breakdown.runtime_breakdown(node.clocks, actor_breakdowns),
        host_energy=node.carbon.stop(),
        intensity=node.carbon.intensity,
        final_eval=result,
        interrupted=node.stop.is_set(),
        resumed_from=node.durable.resumed_from,
        checkpoint_seconds=node.durable.last_seconds,
    )


def write_summary(run_dir: Path, r: RunRecord) -> dict[str, Any]:
    """summary.json and breakdown.csv in ``run_dir``; the summary."""
    summary = run_summary(r)
    write_json_atomic(run_dir / "summary.json", summary)
    breakdown.write_report(run_dir, summary["runtime_breakdown"])
    return summary


def run_summary(r: RunRecord) -> dict[str, Any]:
    s, p, result = r.ingest, r.published, r.final_eval
    return {
        "run": r.cfg.run,
        "run_id": r.run_id,
        "env_id": r.cfg.env_id,
        "algo": r.cfg.algo,
        "seed": r.cfg.seed,
        "env_steps": s.transitions,
        "episodes": s.episodes,
        "updates": r.updates,
        "updates_skipped_nonfinite": r.updates_skipped,
        "wall_s": round(r.wall_s, 2),
        "interrupted": r.interrupted,
        "resumed_from_env_steps": r.resumed_from,
        "last_checkpoint_seconds": round(r.checkpoint_seconds, 3),
        "final_eval_return": result.mean if result else None,
        "final_eval_return_std": result.std if result else None,
        "eval_episodes": len(result.returns) if result else 0,
        "eval_runtime": "litert",
        "policy_version": r.policy_version,
        "deployed_weights_of_version": r.deployed_from or r.policy_version,
        "selection_scores": dict(r.selection_scores),
        "policy_precision": r.cfg.export.precision,
        "policy_model_bytes": len(p.model) if p else None,
        "policy_payload_bytes": len(p.payload) if p else None,
        "policy_codec": r.cfg.export.codec,
        "policy_bytes_total": r.policy_bytes_total,
        "publishes": r.publishes,
        "compression": r.compression,
        "parity": p.parity if p else None,
        "last_export_seconds": round(p.export_seconds, 3) if p else None,
        "exports_failed": r.exports_failed,
        "transitions_received": s.transitions,
        "transitions_rejected": s.rejected_transitions,
        "transitions_duplicate": s.duplicate_transitions,
        "transitions_received_by_actor": dict(sorted(s.total_by_actor.items())),
        "batches_rejected": dict(s.rejected),
        "batches_missing": r.batches_missing,
        "transitions_over_budget": s.over_budget,
        "credit_written_off": r.credit_written_off,
        "ingest_queue_dropped": r.inbox_dropped,
        "ingest_queue_dropped_transitions": r.inbox_dropped_transitions,
        "broker_dropped_messages": r.broker_dropped,
        **r.fleet_counts,
        "actors": {
            a.actor_id: {
                "state": a.state,
                "env_steps": a.env_steps,
                "transitions_sent": a.transitions_sent,
                "policy_version": a.policy_version,
                # what the actor refused or could not send, by its own count
                "batches_dropped": a.batches_dropped,
                "policies_rejected": a.policies_rejected,
                "control_rejected": a.control_rejected,
                "transitions_oversize": a.transitions_oversize,
                "transitions_dropped": a.transitions_dropped,
            }
            for a in r.actors.values()
        },
        "runtime_breakdown": r.runtime_breakdown,
        "energy": energy_summary(r),
    }


def energy_summary(r: RunRecord) -> dict[str, Any]:
    """The learner host as codecarbon measured it; each actor's board from its power model,
    looked up by the board name in its status (a real fleet may mix boards), falling back to
    the run's ``fleet.board`` for an actor that reported none."""
    cfg = r.cfg
    fleet_board = _board(board_file(cfg.fleet.board))
    default = fleet_board.board if fleet_board else cfg.fleet.board
    boards = {
        a: (r.actors[a].board if a in r.actors else "") or default for a in r.actor_breakdowns
    }
    powers: dict[str, Power | None] = {}
    for name in set(boards.values()):
        b = fleet_board if fleet_board and fleet_board.board == name else _board_named(name)
        powers[name] = b.power if b else None
    return energy.energy_block(
        r.host_energy,
        energy.fleet_energy(r.actor_breakdowns, boards, powers),
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
