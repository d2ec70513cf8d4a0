"""``edge-rl actors``: many simulated actors in one process (what ``edge-rl fleet --procs``
starts, one per process). Each board is its own actor: id, credentials, MQTT session,
last will, policy slot, env and status; the boards file names them (sim/boards_file.py).

No TensorFlow, like ``edge-rl actor``.
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
import threading
from pathlib import Path

import click

from edge_rl.cli.common import complete, setup_logging
from edge_rl.cli.shutdown import BOARD_STOP_BOUND_S, exit_if_orphaned, stop_on_sigterm

log = logging.getLogger("edge_rl")

# A board's threads (its loop and its policy slot) run shallow Python: a small stack keeps
# a process of a thousand boards' threads small in address space.
THREAD_STACK_BYTES = 512 * 1024


@click.command()
@click.option(
    "--boards-file",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="JSON list of this process's boards: id, seed, auth (sim/boards_file.py).",
)
@click.option("--board", required=True, help="Board file or a shipped board's name.")
@click.option("--broker", required=True, help="mqtt[s]://HOST:PORT")
@click.option("--env", "env_id", required=True)
@click.option("--run", default="default", show_default=True)
@click.option("--root", default="edge-rl", show_default=True)
@click.option(
    "--policy-key", required=True, type=click.Path(exists=True, dir_okay=False), help="PEM."
)
@click.option("--emulate", is_flag=True, help="Apply the board file's emulation slow-down.")
@click.option(
    "--start-spread",
    type=float,
    default=0.0,
    show_default=True,
    help="Start each board after a random delay up to this many seconds.",
)
@click.option(
    "--no-shared-models",
    is_flag=True,
    help="One LiteRT interpreter per board, none shared (for measuring).",
)
@click.pass_context
def actors(
    ctx: click.Context,
    boards_file: str,
    board: str,
    broker: str,
    env_id: str,
    run: str,
    root: str,
    policy_key: str,
    emulate: bool,
    start_spread: float,
    no_shared_models: bool,
) -> None:
    """Run the boards of BOARDS_FILE in this process until SIGTERM."""
    from edge_rl.actor.group import BoardGroup
    from edge_rl.actor.node import ActorOptions
    from edge_rl.boards import board_file, load_board
    from edge_rl.broker.config import raise_fd_limit
    from edge_rl.sim.boards_file import read_boards_file
    from edge_rl.transport.auth import BrokerAuth
    from edge_rl.transport.mqtt import mqtt_connect
    from edge_rl.transport.netloop import NetLoop

    exit_if_orphaned()  # started by a learner that has died meanwhile: nothing to do
    setup_logging(ctx.obj.verbose)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(threadName)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.setFormatter(fmt)
    threading.stack_size(THREAD_STACK_BYTES)
    try:
        board_cfg = load_board(board_file(board))
        boards = read_boards_file(Path(boards_file))
        auths = {b.actor_id: complete(b.auth or BrokerAuth(), b.actor_id, broker) for b in boards}
        opts = [
            ActorOptions(b.actor_id, env_id, broker, root, run, b.seed, None, policy_key, emulate)
            for b in boards
        ]
        fds = raise_fd_limit(len(boards) * 2 + 256)
        net = NetLoop()  # every board's connection, served by one thread (no thread per board)
        group = BoardGroup(
            board_cfg,
            opts,
            lambda o: mqtt_connect(broker, auths[o.actor_id], net=net),
            share_models=not no_shared_models,
            start_spread_s=start_spread,
        )
    except (ValueError, FileNotFoundError) as e:
        raise click.ClickException(str(e)) from None
    log.info("board group: %d boards, open-files limit %d", len(boards), fds)
    stop_on_sigterm(group.stop, BOARD_STOP_BOUND_S)  # every board stops; exit within the bound
    # `kill -USR1 PID` writes every thread's stack to the log: where a thousand boards'
    # threads are when a group slows down, without a debugger.
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
    net.start()
    try:
        group.run()
    except KeyboardInterrupt:
        group.stop()
        group.join()
    finally:
        net.stop()
    refused = [i for i, s in group.states().items() if s == "refused"]
    if refused:
        log.warning("%d boards refused (another process has their id): %s", len(refused), refused)
