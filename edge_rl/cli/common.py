"""What the ``edge-rl`` commands share: logging set-up, and the broker credentials options
of ``learn``, ``actor`` and ``fleet`` (``AuthOptions``).

Secrets never go on the command line (``ps`` shows it): a password comes from a file
(``--password-file``, mode 0600) or an environment variable (``--password-env NAME``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from edge_rl.transport.auth import AuthError, BrokerAuth

_FILE = click.Path(dir_okay=False)
_SINGLE = ("ca_file", "cert_file", "key_file", "username", "password_file", "password_env")
Command = Callable[..., Any]


@dataclasses.dataclass(frozen=True)
class AuthOptions:
    """The credentials options as given: the single ones, and ``--credentials DIR`` (one
    identity's directory of ``edge-rl credentials``). ``auth_from_options`` checks them."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    password_env: str | None = None
    credentials: str | None = None


@dataclasses.dataclass(frozen=True)
class GroupOptions:
    """The ``edge-rl`` group's own options, for every command (``ctx.obj``)."""

    verbose: bool = False


def setup_logging(
    verbose: bool, file: Path | None = None, terminal: logging.Handler | None = None
) -> None:
    """Records to stderr (or the ``terminal`` handler given) and, with ``file``, to it."""
    handlers: list[logging.Handler] = [terminal or logging.StreamHandler(sys.stderr)]
    if file is not None:
        handlers.append(logging.FileHandler(file))
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )


def auth_options(credentials_help: str) -> Callable[[Command], Command]:
    """Adds --ca-file --cert --key --username --password-file --password-env --credentials,
    handed to the command as one ``auth_opts: AuthOptions``."""

    def decorate(command: Command) -> Command:
        options = [
            click.option(
                "--ca-file",
                help="CA certificate (PEM) the broker's must chain to "
                "(mqtts://; default: the system's CAs).",
                type=_FILE,
            ),
            click.option(
                "--cert",
                "cert_file",
                type=_FILE,
                help="Client certificate (PEM), for a broker that requires one.",
            ),
            click.option("--key", "key_file", type=_FILE, help="Its private key (PEM, mode 0600)."),
            click.option("--username", help="MQTT username (an actor's is its id)."),
            click.option(
                "--password-file",
                type=_FILE,
                help="File with the password on its first line (mode 0600).",
            ),
            click.option(
                "--password-env", metavar="NAME", help="Environment variable holding the password."
            ),
            click.option(
                "--credentials",
                "credentials_dir",
                type=click.Path(file_okay=False),
                help=credentials_help,
            ),
        ]
        for option in reversed(options):
            command = option(command)

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            given = {n: kwargs.pop(n) for n in _SINGLE}
            kwargs["auth_opts"] = AuthOptions(**given, credentials=kwargs.pop("credentials_dir"))
            return command(*args, **kwargs)

        return wrapper

    return decorate


def auth_from_options(opts: AuthOptions, identity: str | None = None) -> BrokerAuth:
    """A ``BrokerAuth`` from the options: ``--credentials`` first (one identity's directory,
    username ``identity``), the single options over it. Bad input is a ``ClickException``.
    Merge it over a config's, then ``complete`` it."""
    try:
        base = BrokerAuth()
        if opts.credentials is not None:
            if identity is None:
                raise AuthError("--credentials needs an identity")
            base = BrokerAuth.from_directory(opts.credentials, identity)
        return base.merged(BrokerAuth(**{n: getattr(opts, n) for n in _SINGLE}))
    except AuthError as e:
        raise click.ClickException(str(e)) from None


def complete(auth: BrokerAuth, identity: str, url: str | None) -> BrokerAuth:
    """With a password and no username, the username is ``identity`` (the ACL keys on it);
    then checked against the broker ``url`` (files there and private, password readable):
    a ``ClickException`` now rather than a failure at connect."""
    if auth.has_password and auth.username is None:
        auth = dataclasses.replace(auth, username=identity)
    try:
        auth.check(url)
    except ValueError as e:  # AuthError, or a bad URL
        raise click.ClickException(str(e)) from None
    return auth
