"""A learner node in the test's process and a fleet of real actor processes, each logged
in as itself on an embedded broker with accounts: the set-up of the attack tests."""

from __future__ import annotations

from pathlib import Path

from edge_rl.broker.embedded import EmbeddedBroker
from edge_rl.config import RunConfig
from edge_rl.learner.node import LearnerNode
from edge_rl.sim.fleet import Fleet
from edge_rl.transport.mqtt import mqtt_connect


def fleet_and_learner(
    cfg: RunConfig,
    broker: EmbeddedBroker,
    boards: int,
    board: Path,
    policy_keys: tuple,
    tmp_path: Path,
    *,
    fleet_logs: str = "fleet",
    resume: bool = False,
) -> tuple[Fleet, LearnerNode]:
    """``boards`` actors (not started: ``with fleet:``) of ``cfg``'s run on ``broker``,
    logs in ``tmp_path/fleet_logs``, and the learner node (run directory ``tmp_path/run``)
    that signs with ``policy_keys``'s key and knows whether the fleet is alive."""
    signer, public_key = policy_keys
    fleet = Fleet(
        boards,
        board,
        broker.url,
        cfg.env_id,
        policy_key=public_key,
        run=cfg.run,
        log_dir=tmp_path / fleet_logs,
        auth=broker.auth,
    )
    node = LearnerNode(
        cfg,
        mqtt_connect(broker.url, broker.auth("learner")),
        tmp_path / "run",
        signer=signer,
        fleet_alive=fleet.alive,
        resume=resume,
    )
    return fleet, node
