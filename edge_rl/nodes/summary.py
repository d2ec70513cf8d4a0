"""The run's summary.json, as LearnerNode writes it at the end of a run.

Kept apart from the node: it is a long flat record (what the README's run-directory table
and ``edge-rl report`` read), not part of the node's data flow.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edge_rl.edge.board import BoardConfig, Power, load_board
from edge_rl.fleet.fleet import board_file
from edge_rl.telemetry import breakdown, energy

if TYPE_CHECKING:
    from edge_rl.edge.evaluate import EvalResult
    from edge_rl.nodes.learner_node import LearnerNode


def run_summary(node: LearnerNode, result: EvalResult | None) -> dict[str, Any]:
    """``result``: the final greedy evaluation of the deployed policy, if there is one."""
    s = node.ingest.stats
    p = node._published
    return {
        "env_id": node.cfg.env_id,
        "algo": node.cfg.algo,
        "seed": node.cfg.seed,
        "env_steps": s.transitions,
        "episodes": s.episodes,
        "updates": node.agent.updates,
        "wall_s": round(time.monotonic() - node._t0, 2),
        "final_eval_return": result.mean if result else None,
        "final_eval_return_std": result.std if result else None,
        "eval_episodes": len(result.returns) if result else 0,
        "eval_runtime": "litert",
        "policy_version": node.version,
        "deployed_weights_of_version": node.deployed_from or node.version,
        "selection_scores": node.selection_scores,
        "policy_precision": node.cfg.export.precision,
        "policy_model_bytes": len(p.model) if p else None,
        "policy_payload_bytes": len(p.payload) if p else None,
        "policy_codec": node.cfg.export.codec,
        "policy_bytes_total": node.policy_bytes_total,
        "publishes": node.publishes,
        "compression": node.agent.compressor and node.agent.compressor.summary(),
        "parity": p.parity if p else None,
        "last_export_seconds": round(p.export_seconds, 3) if p else None,
        "exports_failed": node.publisher.failed,
        "transitions_received": s.transitions,
        "transitions_rejected": s.rejected_transitions,
        "transitions_duplicate": s.duplicate_transitions,
        "batches_rejected": dict(s.rejected),
        "batches_missing": node.ingest.missing_batches,
        "ingest_queue_dropped": node.inbox_dropped,
        "broker_dropped_messages": node.broker_dropped,
        "status_rejected": node.status_rejected,
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
            }
            for a in node.actors.values()
        },
        "runtime_breakdown": breakdown.runtime_breakdown(node._clocks, node.breakdowns),
        "energy": energy_summary(node),
    }


def energy_summary(node: LearnerNode) -> dict[str, Any]:
    """The learner host as codecarbon measured it; each actor's board from its power model,
    looked up by the board name in its status (a real fleet may mix boards), falling back to
    the run's ``fleet.board`` for an actor that reported none."""
    cfg = node.cfg
    fleet_board = _board(board_file(cfg.fleet.board))
    default = fleet_board.board if fleet_board else cfg.fleet.board
    boards = {a: getattr(node.actors.get(a), "board", "") or default for a in node.breakdowns}
    powers: dict[str, Power | None] = {}
    for name in set(boards.values()):
        b = fleet_board if fleet_board and fleet_board.board == name else _board_named(name)
        powers[name] = b.power if b else None
    return energy.energy_block(
        node.carbon.stop(),
        energy.fleet_energy(node.breakdowns, boards, powers),
        default,
        fleet_board.power if fleet_board else None,
        node.carbon.intensity,
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
