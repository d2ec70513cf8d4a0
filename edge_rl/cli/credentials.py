"""``edge-rl credentials``: a CA, certificates and passwords for a deployment
(edge_rl/deploy/credentials.py makes them)."""

from __future__ import annotations

from pathlib import Path

import click

from edge_rl.wire.topics import DEFAULT_ROOT


@click.command()
@click.argument("directory", type=click.Path(file_okay=False))
@click.option(
    "--actors",
    required=True,
    metavar="ID,ID,...",
    help="Actor ids of the boards (one directory each; the ACL's username).",
)
@click.option("--tls", is_flag=True, help="A CA, the broker's server certificate, client certs.")
@click.option(
    "--server-name",
    "server_names",
    multiple=True,
    metavar="HOST|IP",
    help="Name or IP boards reach the broker by (repeatable; with --tls).",
)
@click.option("--passwords", is_flag=True, help="Passwords and the broker's password file.")
@click.option("--days", type=int, default=825, show_default=True, help="Certificate validity.")
@click.option(
    "--run",
    "run_name",
    metavar="RUN",
    help="Enroll the boards in this run: DIR/broker/acl lets each write only its own topics "
    "of RUN (without it they may do nothing until edge-rl flash --run enrolls them).",
)
@click.option(
    "--root", default=DEFAULT_ROOT, show_default=True, help="Topic root (transport.root) of RUN."
)
def credentials(
    directory: str,
    actors: str,
    tls: bool,
    server_names: tuple[str, ...],
    passwords: bool,
    days: int,
    run_name: str | None,
    root: str,
) -> None:
    """Create what a broker and its boards need: a CA (key 0600) and per-board client
    certificates (common name = actor id), the broker's certificate, and/or password files
    (one per board, 0600) with the broker's hashed password file. Existing keys and
    passwords are never overwritten; run again with new ids to add boards. DIR/broker/acl,
    the broker's ACL, names each board enrolled with --run (or by edge-rl flash)."""
    try:
        from edge_rl.deploy.credentials import make_credentials
        from edge_rl.deploy.ids import Registry
        from edge_rl.wire.topics import Topics
    except ImportError as e:  # a board's edge-rl[edge] has no cryptography
        raise click.ClickException(f"{e}: run this on the learner host (edge-rl[host])") from None

    ids = [a.strip() for a in actors.split(",") if a.strip()]
    try:
        if run_name is not None:
            Topics(root, run_name)  # ValueError before anything is written
        with Registry.open(Path(directory)) as reg:
            if ids:
                reg.check_new(ids)  # a retired or flashed id is never made again
            written = make_credentials(
                Path(directory),
                ids,
                tls=tls,
                passwords=passwords,
                server_names=list(server_names),
                days=days,
            )
            if run_name is not None:
                reg.enroll(ids, run=run_name, root=root)
            acl = reg.write_acl()
    except (ValueError, FileExistsError, FileNotFoundError, RuntimeError) as e:
        raise click.ClickException(str(e)) from None
    for path in written.created:
        click.echo(f"created {path}")
    for path in written.updated:
        click.echo(f"updated {path}")
    for path in written.kept:
        click.echo(f"kept    {path}")
    if run_name is None:
        click.echo(f"not enrolled in a run: {acl} grants them nothing until edge-rl flash --run")
    click.echo(f"wrote   {acl}")
    click.echo(
        f"boards: {Path(directory) / 'boards'}/<id>/ (copy one directory to each board); "
        f"broker: {Path(directory) / 'broker'}/ (see host/mosquitto.conf)"
    )
