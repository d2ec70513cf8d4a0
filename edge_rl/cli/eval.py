"""``edge-rl eval MODEL --env ID``: a .tflite policy's greedy return in LiteRT."""

from __future__ import annotations

import json
from pathlib import Path

import click

from edge_rl.telemetry.logs import strict_json


@click.command("eval")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--env", "env_id", required=True)
@click.option("--episodes", type=int, default=10, show_default=True)
@click.option(
    "--manifest",
    type=click.Path(exists=True, dir_okay=False),
    help="Manifest JSON (default: manifest.json beside the model).",
)
@click.option("--seed", type=int, default=10_000, show_default=True)
def eval_(model: str, env_id: str, episodes: int, manifest: str | None, seed: int) -> None:
    """Evaluate a .tflite policy greedily in LiteRT."""
    from edge_rl.runtime.evaluate import evaluate, load_manifest_beside
    from edge_rl.wire.envelope import CodecError
    from edge_rl.wire.policy import manifest_from_dict

    path = Path(model)
    try:
        m = (
            manifest_from_dict(json.loads(Path(manifest).read_text()))
            if manifest
            else load_manifest_beside(path)
        )
        result = evaluate(path.read_bytes(), env_id, episodes, manifest=m, seed=seed)
    except (ValueError, CodecError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(
        strict_json(
            {
                "env_id": env_id,
                "episodes": episodes,
                "mean_return": result.mean,
                "std_return": result.std,
                "returns": list(result.returns),
            },
            indent=2,
        )
    )
