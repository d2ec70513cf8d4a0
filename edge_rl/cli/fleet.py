"""``edge-rl fleet``: N simulated actors (real processes) against any broker."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import click

from edge_rl.cli.common import (
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    setup_logging,
)


@click.command()
@click.option(
    "--broker",
    required=True,
    help="mqtt[s]://HOST:PORT, or URL,URL,... of a clustered broker's nodes, tried in turn",
)
@click.option("--env", "env_id", required=True)
@click.option(
    "-n", "--boards", "n", type=int, default=4, show_default=True, help="Number of actors."
)
@click.option(
    "--procs",
    type=int,
    default=0,
    show_default=True,
    help="Spread the boards over this many processes (edge-rl actors); 0: one per actor.",
)
@click.option(
    "--start-spread",
    type=float,
    default=0.0,
    show_default=True,
    help="With --procs: each board connects after a random delay up to this many seconds.",
)
@click.option("--board", default="rpi4", show_default=True)
@click.option("--run", default="default", show_default=True)
@click.option("--root", default="edge-rl", show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--log-dir", type=click.Path(file_okay=False), help="One log file per actor.")
@click.option("--id-prefix", default="sim", show_default=True, help="Actor ids: PREFIX-00, ...")
@click.option(
    "--policy-key",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="The learner's public key (PEM), e.g. RUN_DIR/signing.pub.",
)
@auth_options("The output of `edge-rl credentials`: actor ID uses DIR/boards/ID.")
@click.pass_context
def fleet(
    ctx: click.Context,
    broker: str,
    env_id: str,
    n: int,
    procs: int,
    start_spread: float,
    board: str,
    run: str,
    root: str,
    seed: int,
    log_dir: str | None,
    id_prefix: str,
    policy_key: str,
    auth_opts: AuthOptions,
) -> None:
    """Start N simulated actors (real processes) against a broker; Ctrl-C stops them.

    With --procs P the N boards run in P processes (e.g. --boards 1000 --procs 4), each
    board still its own MQTT session, id, credentials, policy slot and status.

    With --credentials DIR each actor logs in as itself (DIR/boards/<id>: its certificate,
    password and CA); the other credentials options apply to every actor alike (a username
    given there is shared: a broker with use_username_as_clientid lets one connect at a time).
    """
    from edge_rl.boards import board_file
    from edge_rl.sim.fleet import Fleet, fleet_ids

    setup_logging(ctx.obj.verbose)
    creds = auth_opts.credentials
    # Built (and checked: a missing directory or file is an error) before any actor starts.
    auths = {}
    for actor_id in fleet_ids(n, id_prefix):
        own = dataclasses.replace(
            auth_opts, credentials=str(Path(creds) / "boards" / actor_id) if creds else None
        )
        auths[actor_id] = complete(auth_from_options(own, actor_id), actor_id, broker)
    try:
        f = Fleet(
            n,
            board_file(board),
            broker,
            env_id,
            policy_key=Path(policy_key),
            run=run,
            root=root,
            seed=seed,
            log_dir=Path(log_dir) if log_dir else None,
            id_prefix=id_prefix,
            auth=auths.get,
            procs=procs,
            start_spread_s=start_spread,
        )
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    with f:
        try:
            while f.alive():
                time.sleep(0.5)
        except KeyboardInterrupt:
            click.echo("stopping the fleet")
    click.echo(f"exit codes: {f.exit_codes()}")
