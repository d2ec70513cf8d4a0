"""What ``edge-rl learn`` checks before it writes a file, starts a process or imports
TensorFlow, so that a user's mistake costs seconds and leaves nothing behind:

    check_env(cfg.env_id)                  # the env can be made
    check_out(run_dir)                     # the run directory can be made there
    check_signing_key(cfg.signing_key)     # a key given exists and loads
    check_broker(url, auth)                # --broker takes the learner's login (<= 15 s)

Each failure is a ``click.ClickException``: one line saying what is wrong and what to do
(exit status 1). No TensorFlow here: gymnasium, paho and cryptography only.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import click

from edge_rl.cli.common import one_line
from edge_rl.transport.auth import BrokerAuth

BROKER_WAIT_S = 15.0  # the most a broker that does not answer costs before the error


def check_env(env_id: str) -> None:
    """``env_id`` makes an env (a gymnasium id, or ``module:callable``)."""
    from edge_rl.envs import env_spec

    try:
        env_spec(env_id)
    except Exception as e:  # noqa: BLE001 - a user's factory may raise anything
        what = one_line(e) if isinstance(e, ValueError) else f"env_id {env_id!r}: {one_line(e)}"
        raise click.ClickException(
            f"{what} (give a gymnasium id such as CartPole-v1, or module:callable: "
            "--set env_id=...)"
        ) from None


def check_out(run_dir: Path) -> None:
    """``run_dir`` can be made: its nearest existing ancestor is a directory this process
    may write in. (The ``mkdir`` itself, after every check, can still fail: /proc.)"""
    place = run_dir
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        raise click.ClickException(
            f"--out {run_dir}: {place} is a file, not a directory; give another --out"
        )
    if not os.access(place, os.W_OK | os.X_OK):
        raise click.ClickException(
            f"--out {run_dir}: cannot write in {place} (permission denied); give another --out"
        )


def make_run_dir(run_dir: Path) -> None:
    """The run directory, once every check passed; one line if the system refuses it."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise click.ClickException(
            f"cannot make the run directory {run_dir}: {e.strerror or e}; give another --out"
        ) from None


def check_signing_key(configured: str | None) -> None:
    """A signing key given (``--signing-key``, ``signing_key:``) exists and loads: a typo
    must not make a new key that every board refuses. None: the run makes its own."""
    if configured is None:
        return
    path = Path(configured)
    if not path.is_file():
        raise click.ClickException(
            f"signing key {path} does not exist: make it with `edge-rl keygen {path}` (the "
            "boards verify with its .pub), or leave out --signing-key for a key of the run's own"
        )
    from edge_rl.wire.signing import Signer

    try:
        Signer.load_or_create(path)  # exists: only loaded
    except (ValueError, OSError) as e:
        raise click.ClickException(f"signing key {path}: {one_line(e)}") from None


def check_broker(url: str, auth: BrokerAuth | None, timeout: float = BROKER_WAIT_S) -> None:
    """One login to ``url`` with ``auth`` and a clean close. Fails once every node of the
    URL list has refused or not answered once, or after ``timeout``, naming the cause."""
    from edge_rl.transport.base import unreachable
    from edge_rl.transport.mqtt import MqttTransport

    try:
        transport = MqttTransport(url, "learner-preflight", auth=auth)
    except ValueError as e:  # a bad URL, unusable credentials files
        raise click.ClickException(f"--broker {url}: {one_line(e)}") from None
    nodes = len(transport.addresses)
    logging.disable(logging.WARNING)  # its retry warnings: the error below says it once
    transport.start()
    try:
        deadline = time.monotonic() + timeout
        while not transport.connected and time.monotonic() < deadline:
            if transport.connect_failures + transport.refusals >= nodes:
                break  # every node said no (or did not answer within paho's connect timeout)
            time.sleep(0.05)
        connected = transport.connected
    finally:
        transport.stop()
        logging.disable(logging.NOTSET)
    if not connected:
        refused = transport.refusals > 0
        what = (
            "check --credentials (the learner's: DIR/learner)"
            if refused
            else ("is the broker running there? check --broker")
        )
        raise click.ClickException(f"{unreachable(transport)}; {what}")
