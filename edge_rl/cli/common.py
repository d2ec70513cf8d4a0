"""What the ``edge-rl`` commands share: logging set-up, the broker credentials options
of ``learn``, ``actor`` and ``fleet`` (``AuthOptions``), and ``user_errors``: what a user's
input made go wrong, as one line and exit status 1 (never a traceback).

Secrets never go on the command line (``ps`` shows it): a password comes from a file
(``--password-file``, mode 0600) or an environment variable (``--password-env NAME``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
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
    """The ``edge-rl`` group's own options, for every command (``ctx.obj``): ``profile``,
    the profile's keys in force (cli/profile.py)."""

    verbose: bool = False
    profile: Mapping[str, str] = dataclasses.field(default_factory=dict)


def runnable_prog(argv0: str | None = None, path: str | None = None) -> str:
    """How to run ``edge-rl`` again, as this process was run, for the commands a result
    prints next: ``edge-rl`` when that is what ``PATH`` finds, else the script's own path
    (``.venv/bin/edge-rl`` from ``make run``: the venv is not on ``PATH``), else this
    Python with ``-m edge_rl.cli``. Quoted for the shell."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    script = Path(argv0)
    if script.name == "edge-rl" and script.is_file():
        found = shutil.which("edge-rl", path=path)
        if found is not None and Path(found).resolve() == script.resolve():
            return "edge-rl"
        here = Path.cwd()
        shown = script.resolve()
        shown = shown.relative_to(here) if shown.is_relative_to(here) else shown
        return shlex.quote(str(shown))
    return f"{shlex.quote(sys.executable)} -m edge_rl.cli"


@contextlib.contextmanager
def native_output_to(log_path: Path) -> Iterator[None]:
    """File descriptor 2 goes to ``log_path`` meanwhile, and ``sys.stderr`` stays on the
    terminal: what native code writes past Python (TensorFlow's and absl's start-up lines,
    CUDA probes, the TFLite converter's, in this process and the export worker it starts)
    goes to the log, what Python says still reaches the user. ``TF_CPP_MIN_LOG_LEVEL``
    alone does not do it: the oneDNN and CUDA lines are printed before TensorFlow reads it.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    previous = sys.stderr
    encoding = getattr(previous, "encoding", None) or "utf-8"
    sys.stderr = os.fdopen(os.dup(saved), "w", buffering=1, encoding=encoding, errors="replace")
    os.dup2(log_fd, 2)
    os.close(log_fd)
    try:
        yield
    finally:  # the terminal's stream stays open: a logging handler may hold it
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        sys.stderr = previous


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


# What to do when a command that reads or writes the whole fleet cannot log in or read it.
LEARNER_LOGIN = "it logs in as the learner: give --credentials DIR/learner (edge-rl credentials)"


def quiet_transport(verbose: bool) -> None:
    """A one-shot command reports a broker it cannot reach in its error; the transport's
    "retrying" warnings are for long-lived clients (shown with -v)."""
    if not verbose:
        logging.getLogger("edge_rl.transport.mqtt").setLevel(logging.ERROR)


# What bad input raises below the commands: a broker that cannot be reached or refuses the
# login (ConnectionError), a bad value or file (ValueError: AuthError, CodecError, a config),
# a path that cannot be read or written (OSError).
USER_ERRORS = (ConnectionError, ValueError, OSError)


@contextlib.contextmanager
def user_errors(hint: str = "") -> Iterator[None]:
    """Turns ``USER_ERRORS`` into a ``click.ClickException``: one line (``Error: ...``,
    exit status 1), ``hint`` (what to do) after it."""
    try:
        yield
    except USER_ERRORS as e:
        raise click.ClickException(one_line(e) + (f"; {hint}" if hint else "")) from None


def one_line(e: BaseException) -> str:
    """An exception as one line: an ``OSError`` as ``path: reason``, any other its text."""
    if isinstance(e, OSError) and not isinstance(e, ConnectionError) and e.strerror:
        where = f"{e.filename}: " if e.filename else ""
        return f"{where}{e.strerror}"
    text = str(e).strip() or type(e).__name__
    return " ".join(text.split())
