"""``edge-rl fleet-status``: one view of a run and its fleet, from the broker's retained
control and statuses: the run's state, its boards by state, the policies they serve
(version and digest), one line per board (id, state, policy, last return, last seen), and
with ``--run-dir`` the run's last deployments and how each ended (deploy/fleet_view.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from edge_rl.cli.common import (
    LEARNER_LOGIN,
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    quiet_transport,
    setup_logging,
    user_errors,
)
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN


@click.command("fleet-status")
@click.option("--broker", required=True, help="mqtt[s]://HOST:PORT of the fleet's broker.")
@click.option("--run", default=DEFAULT_RUN, show_default=True, help="The run name.")
@click.option("--root", default=DEFAULT_ROOT, show_default=True, help="The topic root.")
@click.option(
    "--wait",
    "wait_s",
    type=float,
    default=2.0,
    show_default=True,
    help="Seconds to collect the retained statuses.",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The run's directory (or a deployed bundle's): its last deployments "
    "(deployments.jsonl, written by edge-rl deploy).",
)
@click.option(
    "--deployments",
    "n_deployments",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="How many of the last deployments to show.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the view as JSON.")
@auth_options("The learner's directory of `edge-rl credentials` (DIR/learner).")
@click.pass_context
def fleet_status(
    ctx: click.Context,
    broker: str,
    run: str,
    root: str,
    wait_s: float,
    run_dir: Path | None,
    n_deployments: int,
    as_json: bool,
    auth_opts: AuthOptions,
) -> None:
    """The run's state, its boards by state, the policies they serve, every board of --run
    (state, served policy version and digest, last return, last seen) and, with --run-dir,
    its last deployments. Exit status 0 when shown, 1 when the broker cannot be reached,
    refuses the login, or holds nothing of --run that the login may read."""
    from edge_rl.deploy.fleet_view import FleetView
    from edge_rl.deploy.fleet_watch import FleetWatch
    from edge_rl.deploy.history import history_file, last
    from edge_rl.transport.mqtt import mqtt_connect
    from edge_rl.wire.topics import Topics

    setup_logging(ctx.obj.verbose)
    quiet_transport(ctx.obj.verbose)
    auth = complete(auth_from_options(auth_opts, "learner"), "learner", broker)
    deployments = last(history_file(run_dir), n_deployments) if run_dir else []
    with user_errors(LEARNER_LOGIN):
        with FleetWatch(mqtt_connect(broker, auth), Topics(root, run)) as watch:
            watch.wait_connected(wait_s)
            control = watch.wait_control(wait_s)
            time.sleep(wait_s)  # every retained status, after the control
            statuses = watch.statuses()
    if control is None and not statuses:  # nothing this login may read, or no such run
        raise click.ClickException(
            f"nothing of run {run!r} on {broker} (no control, no board status): check --run "
            f"and --root; {LEARNER_LOGIN}"
        )
    view = FleetView.of(run, control, statuses, deployments)
    if as_json:
        click.echo(json.dumps(view.as_dict(time.time()), indent=2))
    else:
        click.echo("\n".join(view.lines(time.time())))
