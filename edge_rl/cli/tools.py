"""``edge-rl eval | report | keygen``: the commands that need no broker and no fleet.

Registered on the ``edge-rl`` group in cli.py; kept apart so cli.py holds the run commands.
"""

from __future__ import annotations

import json
from pathlib import Path

import click


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
def eval_(model, env_id, episodes, manifest, seed) -> None:
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
        json.dumps(
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


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False))
@click.option(
    "--out",
    default="report",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory for the PNGs and report.md (created; same-named files replaced).",
)
def report(run_dirs, out) -> None:
    """Plot and summarise run directories of `edge-rl learn`: PNGs and report.md in --out."""
    from edge_rl.report import load_run, write_report

    try:
        runs = [load_run(Path(d)) for d in run_dirs]
        written = write_report(runs, Path(out))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    for path in written:
        click.echo(path)


@click.command()
@click.argument("key_file", type=click.Path(dir_okay=False))
def keygen(key_file) -> None:
    """Make a policy signing key pair: KEY_FILE (private, mode 0600) and KEY_FILE.pub.

    The learner signs with it (`edge-rl learn --signing-key KEY_FILE`); every board gets the
    .pub (`edge-rl actor --policy-key`, or `policy_public_key` in its board file).
    An existing key is never overwritten.
    """
    from edge_rl.wire.signing import Signer

    path = Path(key_file)
    public = path.with_suffix(".pub")
    for p in (path, public):
        if p.exists():
            raise click.ClickException(f"{p} exists: a signing key is never overwritten")
    signer = Signer.generate()
    signer.write_private(path)
    signer.write_public(public)
    click.echo(f"private key {path} (mode 0600), public key {public}, key id {signer.key_id.hex()}")
