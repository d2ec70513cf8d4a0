"""A small CartPole DQN run for tests that drive a real learner: the shape of it once,
each test saying only what its scenario changes."""

from __future__ import annotations

from typing import Any

from edge_rl.agents.dqn.config import DQNConfig
from edge_rl.config import ExportConfig, FleetConfig, RunConfig


def small_cartpole(
    run: str,
    *,
    total_env_steps: int = 3_000,
    learning_starts: int = 300,
    max_lag_transitions: int = 500,
    hidden: tuple[int, ...] = (32, 32),
    dqn: dict[str, Any] | None = None,
    every_updates: int = 60,
    sample: int = 100,
    **fields: Any,
) -> RunConfig:
    """CartPole DQN with small networks, updates at a quarter of the env steps, and no fleet
    of its own (the test brings its boards); an int8 export every ``every_updates`` updates,
    calibrated and checked on ``sample`` observations, each published (no parity gate).
    ``dqn``: other ``DQNConfig`` fields; ``fields``: any ``RunConfig`` field, these
    included (e.g. ``fleet``, ``replay_ratio``, or ``env_id`` with ``algo``)."""
    given: dict[str, Any] = {
        "env_id": "CartPole-v1",
        "run": run,
        "total_env_steps": total_env_steps,
        "learning_starts": learning_starts,
        "replay_ratio": 0.25,
        "max_lag_transitions": max_lag_transitions,
        "dqn": DQNConfig(hidden=hidden, batch_size=32, **(dqn or {})),
        "fleet": FleetConfig(actors=0),
        "export": ExportConfig(
            every_updates=every_updates,
            calibration_size=sample,
            parity_size=sample,
            min_greedy_agreement=0.0,
        ),
    }
    return RunConfig(**{**given, **fields})
