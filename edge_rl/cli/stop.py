"""``edge-rl stop``: end a run: its boards stop acting and wait for the next run start.

It finds the run's current run start and publishes ``stopped`` for it, retained
(docs/protocol.md §5.4). The run start comes from the run's retained control message; a
broker that keeps no retained message (a cluster node that lost it) has none, so it also
asks the boards: an empty hello on ``<base>/hello`` makes every board publish its status at
once (§2.1), and each status names the run start the board joined. ``--run-dir`` names it
from the learner's own run directory instead. The boards stay connected and idle; the next
``edge-rl learn`` under the same run name moves them on, without a restart. ``stopped`` is
final for a run start: a learner resumed after it gets no board back. It writes the control
topic, which the broker's ACL grants the learner alone: it logs in with the learner's
credentials, and so it refuses a run whose learner is running (one login would push the
other off the broker), as its control or a board's ``running`` status says.
"""

from __future__ import annotations

import json
import secrets
import threading
from collections.abc import Iterable
from pathlib import Path

import click

from edge_rl.cli.common import (
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    setup_logging,
)
from edge_rl.transport.base import Connect, unreachable
from edge_rl.types import ActorStatus, ControlMessage
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_control, decode_status, encode_control
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN, Topics


class NothingToStop(Exception):
    """No run start to end: none found, several, or its learner is running."""


@click.command()
@click.option("--broker", required=True, help="mqtt[s]://HOST:PORT of the run's broker.")
@click.option("--run", default=DEFAULT_RUN, show_default=True, help="The run name.")
@click.option("--root", default=DEFAULT_ROOT, show_default=True, help="The topic root.")
@click.option(
    "--wait",
    "wait_s",
    type=float,
    default=5.0,
    show_default=True,
    help="Seconds to wait for the broker and the run's retained control message.",
)
@click.option(
    "--run-dir",
    type=click.Path(file_okay=False, exists=True),
    help="The run's directory (edge-rl learn's RUN_DIR): its run start, for a broker that "
    "keeps no retained control and whose boards do not answer.",
)
@auth_options("The learner's directory of `edge-rl credentials` (DIR/learner).")
@click.pass_context
def stop(
    ctx: click.Context,
    broker: str,
    run: str,
    root: str,
    wait_s: float,
    run_dir: str | None,
    auth_opts: AuthOptions,
) -> None:
    """End a run: its boards stop serving (or holding) its policy and wait, connected,
    for the next run start. The run's learner must not be running."""
    from edge_rl.transport.mqtt import mqtt_connect

    setup_logging(ctx.obj.verbose)
    auth = complete(auth_from_options(auth_opts, "learner"), "learner", broker)
    try:
        run_id = run_start_in(Path(run_dir), run) if run_dir else None
        ended = stop_run(mqtt_connect(broker, auth), Topics(root, run), wait_s, run_id)
    except (ConnectionError, NothingToStop, ValueError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"run {run!r}, start {ended.run_id}: stopped")


def run_start_in(run_dir: Path, run: str) -> str:
    """The run start a learner's run directory holds: its summary's, else its checkpoint's
    (a learner killed outright wrote no summary). ``ValueError``: none, or another run's."""
    from edge_rl.learner.run_dir import RunDir

    d = RunDir(run_dir)
    places = (d.summary, d.checkpoint / "header.json", d.checkpoint_old / "header.json")
    for path in places:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        ident = data.get("identity", data) if isinstance(data, dict) else {}
        name, run_id = ident.get("run"), ident.get("run_id")
        if isinstance(run_id, str) and run_id:
            if name != run:
                raise ValueError(f"{run_dir} is a directory of run {name!r}, not {run!r}")
            return run_id
    raise ValueError(f"{run_dir} names no run start (no summary.json, no checkpoint)")


def stop_run(
    connect: Connect, topics: Topics, wait_s: float, run_id: str | None = None
) -> ControlMessage:
    """Publish ``stopped``, retained, for the current run start (the retained control's,
    else ``run_id``, else the one the boards' statuses name); the message now retained.
    ``NothingToStop``: no run start found, several, or its learner is running (its control
    or a board says ``running``); ``ConnectionError``: no broker within ``wait_s``."""
    controls: list[ControlMessage] = []
    statuses: dict[str, ActorStatus] = {}
    arrived = threading.Event()

    def on_message(topic: str, payload: bytes) -> None:
        try:
            if topic == topics.control:
                controls.append(decode_control(payload))
                arrived.set()
            else:
                status = decode_status(payload)
                statuses[status.actor_id] = status
        except CodecError:
            pass  # a cleared (empty) or foreign message: it names no run start

    transport = connect(
        f"edge-rl-stop-{secrets.token_hex(4)}",
        subscriptions=[(topics.control, 1), (topics.all_status, 1)],
        on_message=on_message,
    )
    transport.start()
    try:
        if not transport.wait_connected(wait_s):
            raise unreachable(transport)
        transport.publish(topics.hello, b"", wait=wait_s)  # boards announce themselves (§2.1)
        arrived.wait(wait_s)  # a retained control comes at once after the subscription
        current = current_run_start(controls, statuses.values(), run_id, topics)
        if current.state == "stopped":
            return current
        if current.state == "running":
            raise NothingToStop(
                f"run start {current.run_id} is running: stop its learner first (Ctrl-C "
                "or SIGTERM pauses the run), then edge-rl stop"
            )
        msg = ControlMessage("stopped", current.run_id, "edge-rl stop")
        if not transport.publish(topics.control, encode_control(msg), retain=True, wait=wait_s):
            raise ConnectionError(f"the broker at {transport.url} took no message")
        return msg
    finally:
        transport.stop()


def current_run_start(
    controls: list[ControlMessage],
    statuses: Iterable[ActorStatus],
    run_id: str | None,
    topics: Topics,
) -> ControlMessage:
    """The run start to end and its state: the retained control's, else the boards' view of
    ``run_id`` (or of the one run start their statuses name): ``running`` if any board
    runs, ``stopped`` if every one has stopped, else ``paused``."""
    if controls:
        if run_id is not None and controls[-1].run_id != run_id:
            raise NothingToStop(
                f"{topics.control} names run start {controls[-1].run_id}, not the run "
                f"directory's {run_id}: that run start is over"
            )
        return controls[-1]
    joined = [s for s in statuses if s.run_id]  # "": a board that joined nothing (a will)
    if run_id is None:
        starts = sorted({s.run_id for s in joined})
        if len(starts) != 1:
            found = f"boards of run starts {', '.join(starts)}" if starts else "no board"
            raise NothingToStop(
                f"no run start on {topics.control} and {found}: nothing to stop; "
                "give the run's directory (--run-dir)"
            )
        run_id = starts[0]
    states = {s.state for s in joined if s.run_id == run_id}
    if "running" in states:
        return ControlMessage("running", run_id)
    if states == {"stopped"}:
        return ControlMessage("stopped", run_id, "edge-rl stop")
    return ControlMessage("paused", run_id)
