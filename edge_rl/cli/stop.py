"""``edge-rl stop``: end a run: its boards stop acting and wait for the next run start.

It reads the run's retained control message, which names the current run start, and
publishes ``stopped`` for that run start, retained (docs/protocol.md §5.4). The boards
stay connected and idle; the next ``edge-rl learn`` under the same run name moves them on,
without a restart. ``stopped`` is final for a run start: a learner resumed after it gets
no board back. It writes the control topic, which the broker's ACL grants the learner
alone: it logs in with the learner's credentials, and so it refuses a run whose learner is
running (one login would push the other off the broker).
"""

from __future__ import annotations

import secrets
import threading

import click

from edge_rl.cli.common import (
    AuthOptions,
    auth_from_options,
    auth_options,
    complete,
    setup_logging,
)
from edge_rl.transport.base import Connect
from edge_rl.types import ControlMessage
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_control, encode_control
from edge_rl.wire.topics import DEFAULT_ROOT, DEFAULT_RUN, Topics


class NothingToStop(Exception):
    """No run start to end: none retained, or its learner is running."""


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
@auth_options("The learner's directory of `edge-rl credentials` (DIR/learner).")
@click.pass_context
def stop(
    ctx: click.Context, broker: str, run: str, root: str, wait_s: float, auth_opts: AuthOptions
) -> None:
    """End a run: its boards stop serving (or holding) its policy and wait, connected,
    for the next run start. The run's learner must not be running."""
    from edge_rl.transport.mqtt import mqtt_connect

    setup_logging(ctx.obj.verbose)
    auth = complete(auth_from_options(auth_opts, "learner"), "learner", broker)
    try:
        ended = stop_run(mqtt_connect(broker, auth), Topics(root, run), wait_s)
    except (ConnectionError, NothingToStop, ValueError) as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"run {run!r}, start {ended.run_id}: stopped")


def stop_run(connect: Connect, topics: Topics, wait_s: float) -> ControlMessage:
    """Publish ``stopped``, retained, for the run start the retained control names; the
    message now retained. ``NothingToStop``: no run start there, or its learner is running
    (it says ``running``); ``ConnectionError``: no broker within ``wait_s``."""
    seen: list[ControlMessage] = []
    arrived = threading.Event()

    def on_message(_topic: str, payload: bytes) -> None:
        try:
            seen.append(decode_control(payload))
        except CodecError:
            pass  # a cleared (empty) or foreign retained message: no run start
        arrived.set()

    transport = connect(
        f"edge-rl-stop-{secrets.token_hex(4)}",
        subscriptions=[(topics.control, 1)],
        on_message=on_message,
    )
    transport.start()
    try:
        if not transport.wait_connected(wait_s):
            raise ConnectionError(f"cannot reach the MQTT broker at {transport.url}")
        arrived.wait(wait_s)  # a retained message comes at once after the subscription
        if not seen:
            raise NothingToStop(f"no run start on {topics.control}: nothing to stop")
        current = seen[-1]
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
