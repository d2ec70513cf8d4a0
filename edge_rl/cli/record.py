"""``edge-rl record RUN_DIR --dataset ID``: a run's transitions as a Minari dataset.

    edge-rl record runs/pend --dataset edge-rl/pendulum/expert-v0 --steps 5000   # policy
    edge-rl record runs/pend --dataset edge-rl/pendulum/fleet-v0 --from replay    # fleet
    edge-rl record runs/pend --dataset edge-rl/pendulum/pi01-v0 --from replay --board pi-01

``--from policy`` (the default) runs the run's deployed policy (RUN_DIR/policy.tflite, the
int8 model the boards serve) greedily in LiteRT in the run's env; ``--from replay`` writes
what the run's checkpoint holds of the fleet's transitions (all boards, or ``--board``'s),
interventions marked (docs/demonstrations.md). The dataset goes under
MINARI_DATASETS_PATH (default ~/.minari/datasets); ``minari.load_dataset(ID)`` and
``edge-rl learn --demos ID`` read it.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("record")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--dataset",
    "dataset_id",
    required=True,
    metavar="ID",
    help="Minari dataset id to write, e.g. edge-rl/pendulum/expert-v0.",
)
@click.option(
    "--from",
    "source",
    type=click.Choice(["policy", "replay"]),
    default="policy",
    show_default=True,
    help="The deployed policy run greedily, or the transitions in the run's checkpoint.",
)
@click.option("--steps", type=int, default=5_000, show_default=True, help="--from policy.")
@click.option("--seed", type=int, default=0, show_default=True, help="--from policy.")
@click.option("--board", help="--from replay: only this board's transitions (default: all).")
def record(
    run_dir: str, dataset_id: str, source: str, steps: int, seed: int, board: str | None
) -> None:
    """Write a Minari dataset from a run: its trained policy, or its fleet's transitions."""
    from edge_rl.config import load_run_config
    from edge_rl.learner.datasets import write_dataset
    from edge_rl.learner.run_dir import RunDir

    run = RunDir(Path(run_dir))
    try:
        cfg = load_run_config(run.config)
        if source == "policy":
            episodes = _from_policy(run, cfg.env_id, steps, seed)
        else:
            episodes = _from_replay(run, cfg, board)
        dataset = write_dataset(dataset_id, episodes, cfg.env_id)
    except (OSError, ValueError) as e:  # CheckpointError, DatasetError, CodecError too
        raise click.ClickException(str(e).splitlines()[0]) from None
    rows = sum(len(e) for e in episodes)
    acted = sum(sum(e.interventions) for e in episodes)
    click.echo(
        json.dumps(
            {
                "dataset": dataset_id,
                "env_id": cfg.env_id,
                "from": source,
                "episodes": dataset.total_episodes,
                "steps": int(dataset.total_steps),
                "interventions": acted,
                "intervention_rate": round(acted / rows, 4) if rows else 0.0,
            }
        )
    )


def _from_policy(run, env_id: str, steps: int, seed: int) -> list:
    from edge_rl.learner.record import from_policy

    if not run.policy.exists():
        raise click.ClickException(f"{run.path} has no deployed policy ({run.policy.name})")
    return from_policy(run.policy.read_bytes(), env_id, steps, seed)


def _from_replay(run, cfg, board: str | None) -> list:
    from edge_rl.envs import env_spec
    from edge_rl.learner.checkpoint import Checkpoint, header_for
    from edge_rl.learner.durable import saved_run_id
    from edge_rl.learner.record import from_replay
    from edge_rl.learner.replay import ReplayBuffer

    saved = Checkpoint(run, header_for(cfg, saved_run_id(run))).load()
    replay = ReplayBuffer(env_spec(cfg.env_id), cfg.replay_capacity)
    replay.load_state(saved.parts["replay"])
    if board is not None and board not in replay.sources():
        known = ", ".join(replay.sources()) or "none"
        raise click.ClickException(f"no transitions of board {board!r} in replay ({known})")
    return from_replay(replay.rows(board))
