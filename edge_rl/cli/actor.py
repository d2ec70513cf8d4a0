"""``edge-rl actor``: one actor, what a board runs (``edge-rl doctor`` checks it can).

No TensorFlow: a board has ``edge-rl[edge]`` only. A board made by
``edge-rl flash`` has its whole set-up in one file (``/etc/edge-rl/board.yaml``, with an
``actor:`` section), so its service runs ``edge-rl actor --config /etc/edge-rl/board.yaml``.
"""

from __future__ import annotations

import dataclasses
import logging
import sys

import click

from edge_rl.cli.common import (
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    setup_logging,
)
from edge_rl.cli.profile import board_credentials
from edge_rl.cli.shutdown import BOARD_STOP_BOUND_S, exit_if_orphaned, stop_on_sigterm

log = logging.getLogger("edge_rl")


def _setting(given, board_cfg, name: str, option: str, default=None):
    """A command-line value, else the board file's ``actor.<name>``, else ``default``."""
    if given is not None:
        return given
    if board_cfg.actor is not None:
        return getattr(board_cfg.actor, name)
    if default is None:
        raise click.ClickException(f"{option} is required (or an actor: section in the board file)")
    return default


@click.command()
@click.option(
    "--board",
    "--config",
    "board",
    required=True,
    help="Board file (a flashed board's own, e.g. /etc/edge-rl/board.yaml), or a "
    "shipped board's name: rpi4, rpi5.",
)
@click.option(
    "--broker",
    help="mqtt[s]://HOST:PORT, or URL,URL,... of a clustered broker's nodes, tried in "
    "turn (default: the board file's actor.broker).",
)
@click.option("--env", "env_id", help="Gymnasium id or package.module:callable (or actor.env).")
@click.option("--id", "actor_id", help="This actor's id, one topic level (or actor.id).")
@click.option("--run", help="Run name, a topic level (or actor.run; else 'default').")
@click.option("--root", help="Topic root (or actor.root; else 'edge-rl').")
@click.option("--seed", type=int, help="Environment and exploration seed.")
@click.option("--max-env-steps", type=int, help="Exit after this many env steps.")
@click.option(
    "--policy-key",
    type=click.Path(exists=True, dir_okay=False),
    help="The learner's public key (PEM); default: the board file's policy_public_key.",
)
@click.option(
    "--emulate",
    is_flag=True,
    help="Apply the board file's emulation slow-down: a simulated board on a faster "
    "host (the fleet sets it). A real board never should: it runs at its own speed.",
)
@auth_options("This board's directory of `edge-rl credentials` (DIR/boards/ID).")
@click.pass_context
def actor(
    ctx: click.Context,
    board: str,
    broker: str | None,
    env_id: str | None,
    actor_id: str | None,
    run: str | None,
    root: str | None,
    seed: int | None,
    max_env_steps: int | None,
    policy_key: str | None,
    emulate: bool,
    auth_opts: AuthOptions,
) -> None:
    """Run one actor: LiteRT policy, on-device exploration, transitions to the learner."""
    from edge_rl.actor.node import ActorNode, ActorOptions
    from edge_rl.boards import board_file, load_board
    from edge_rl.transport.mqtt import mqtt_connect

    exit_if_orphaned()  # started by a learner that has died meanwhile: nothing to do
    setup_logging(ctx.obj.verbose)
    try:
        board_cfg = load_board(board_file(board))
        actor_id = _setting(actor_id, board_cfg, "id", "--id")
        broker = _setting(broker, board_cfg, "broker", "--broker")
        env_id = _setting(env_id, board_cfg, "env", "--env")
        run = _setting(run, board_cfg, "run", "--run", "default")
        root = _setting(root, board_cfg, "root", "--root", "edge-rl")
        if auth_opts.credentials is None:  # the profile's, boards/<id> (cli/profile.py)
            own = board_credentials(ctx.obj.profile, actor_id)
            auth_opts = dataclasses.replace(auth_opts, credentials=own)
        auth = board_cfg.auth.merged(auth_from_options(auth_opts, actor_id))
        auth = complete(auth, actor_id, broker)
        if auth.username not in (None, actor_id):
            log.warning(
                "username %r is not the actor id %r: the ACL of host/acl refuses "
                "this actor's publishes",
                auth.username,
                actor_id,
            )
        opts = ActorOptions(
            actor_id, env_id, broker, root, run, seed, max_env_steps, policy_key, emulate=emulate
        )
        node = ActorNode(board_cfg, opts, connect=mqtt_connect(broker, auth))
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    # SIGTERM (systemd, the fleet, a learner's death) stops like the learner's "stopped":
    # flush, say goodbye; the process ends within the bound, however the stop goes.
    stop_on_sigterm(node.stop, BOARD_STOP_BOUND_S)
    if node.watchdog is not None:  # SIGUSR2: the local emergency stop (docs/robots.md)
        node.estop.install_signal()
    try:
        node.run()
    except KeyboardInterrupt:
        pass
    if node.rc.state == "refused":  # another live actor has this id (logged): not a crash,
        sys.exit(3)  # but not a success either (the unit does not restart on 3)
