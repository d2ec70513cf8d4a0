"""``edge-rl retire ID...``: boards out of a deployment, their ids never issued again."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option(
    "--credentials",
    "creds",
    required=True,
    type=click.Path(exists=True, file_okay=False),
    help="The deployment's edge-rl credentials directory.",
)
@click.argument("ids", nargs=-1, required=True)
def retire(creds: str, ids: tuple[str, ...]) -> None:
    """Retire boards: their credentials move to CREDS/retired/, their passwords leave the
    broker's password file, their sections leave the generated ACL (CREDS/broker/acl), and
    their ids stay in the registry, never issued again. Install both files on the broker
    and reload mosquitto."""
    from edge_rl.deploy import board_creds
    from edge_rl.deploy.ids import Registry

    directory = Path(creds)
    try:
        with Registry.open(directory) as reg:
            reg.retire(list(ids))
            for actor_id in ids:
                moved = board_creds.retire(directory, actor_id)
                click.echo(f"retired {actor_id}" + (f": credentials in {moved}" if moved else ""))
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    broker = directory / "broker"
    regenerated = [broker / f for f in ("mosquitto.passwd", "acl") if (broker / f).exists()]
    if regenerated:
        click.echo(
            f"regenerated {' and '.join(map(str, regenerated))}: install them on the broker "
            "and reload mosquitto (SIGHUP); until then the retired boards can still log in"
        )
