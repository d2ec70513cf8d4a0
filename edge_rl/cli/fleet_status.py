"""``edge-rl fleet-status``: one line per board of a run, from the broker's retained
statuses: id, state, the policy it serves (version and digest), its last return, and how
long ago it last spoke."""

from __future__ import annotations

import time

import click

from edge_rl.cli.common import (
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    setup_logging,
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
@auth_options("The learner's directory of `edge-rl credentials` (DIR/learner).")
@click.pass_context
def fleet_status(
    ctx: click.Context, broker: str, run: str, root: str, wait_s: float, auth_opts: AuthOptions
) -> None:
    """Every board of --run: id, state, served policy version and digest, last return,
    last seen."""
    from edge_rl.deploy.fleet_watch import FleetWatch
    from edge_rl.transport.mqtt import mqtt_connect
    from edge_rl.wire.topics import Topics

    setup_logging(ctx.obj.verbose)
    auth = complete(auth_from_options(auth_opts, "learner"), "learner", broker)
    try:
        with FleetWatch(mqtt_connect(broker, auth), Topics(root, run)) as watch:
            watch.wait_connected(wait_s)
            control = watch.wait_control(wait_s)
            time.sleep(wait_s)
            statuses = watch.statuses()
    except ConnectionError as e:
        raise click.ClickException(str(e)) from None
    state = "none" if control is None else f"{control.state} (start {control.run_id})"
    click.echo(f"run {run!r}: {state}; {len(statuses)} boards")
    click.echo(f"{'id':<20} {'state':<9} {'policy':>7} {'digest':<12} {'return':>9} {'seen':>8}")
    now = time.time()
    for actor_id in sorted(statuses):
        s = statuses[actor_id][0]
        ret = "-" if s.recent_return is None else f"{s.recent_return:.1f}"
        seen = f"{max(0.0, now - s.time_unix):.0f}s ago" if s.time_unix else "-"
        digest = s.policy_digest[:12] or "-"
        click.echo(
            f"{actor_id:<20} {s.state:<9} {s.policy_version:>7} {digest:<12} {ret:>9} {seen:>8}"
        )
