"""One profile for the fleet's commands: broker, run, topic root and credentials given once.

A profile is a YAML mapping of the keys in ``KEYS``; each key also has an environment
variable (``EDGE_RL_BROKER``, ``EDGE_RL_RUN``, ...). A command's value is its flag, else the
environment's, else the profile file's, else the command's own default (``actor``: its
board file). The ``edge-rl`` group turns them into click's ``default_map``, so a value
from the profile counts as given (a required ``--broker`` is satisfied) and a flag still
overrides it:

    edge-rl --profile fleet.yaml fleet-status     # or EDGE_RL_PROFILE=fleet.yaml
    EDGE_RL_BROKER=mqtts://pi-hub:8883 edge-rl stop --run lab

Only ``PROFILE_COMMANDS`` take it; ``learn`` does not (its broker is embedded by default).
``credentials`` is the top directory of ``edge-rl credentials``: the learner's commands use
its ``learner/``, ``actor`` its ``boards/<id>/``, ``fleet`` the whole of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
import yaml

PROFILE_ENV = "EDGE_RL_PROFILE"
PROFILE_COMMANDS = ("fleet", "fleet-status", "deploy", "stop", "actor", "doctor")

# profile key -> the parameter it fills in a command, when the command has it
KEYS: dict[str, tuple[str, ...]] = {
    "broker": ("broker",),
    "run": ("run",),
    "root": ("root",),
    "credentials": ("credentials_dir",),
    "ca_file": ("ca_file",),
    "cert": ("cert_file",),
    "key": ("key_file",),
    "username": ("username",),
    "password_file": ("password_file",),
    "password_env": ("password_env",),
    "signing_key": ("signing_key",),  # deploy
    "policy_key": ("policy_key",),  # fleet, actor
    "env": ("env_id",),  # fleet, actor
    "board": ("board", "config"),  # actor and fleet --board, doctor --config
    "run_dir": ("run_dir",),  # fleet-status: the run directory whose deployments it shows
}
# the credentials directory's part each command logs in with (actor's: boards/<its id>)
_IDENTITY = {"fleet-status": "learner", "deploy": "learner", "stop": "learner"}


def env_name(key: str) -> str:
    """The environment variable of a profile key: ``EDGE_RL_`` and the key in capitals."""
    return f"EDGE_RL_{key.upper()}"


def default_path() -> Path:
    """``~/.config/edge-rl/profile.yaml`` (under ``$XDG_CONFIG_HOME`` when it is set), read
    if it exists."""
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "edge-rl" / "profile.yaml"


def load_file(path: Path) -> dict[str, str]:
    """The profile file's keys. ``click.ClickException`` (one line) if it cannot be read, is
    not YAML, not a mapping, names an unknown key or gives a value that is not a scalar."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise click.ClickException(f"profile {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise click.ClickException(f"profile {path} is not valid YAML{line}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise click.ClickException(f"profile {path} must be a mapping of keys to values")
    unknown = sorted(str(k) for k in data if k not in KEYS)
    if unknown:
        raise click.ClickException(
            f"profile {path}: unknown key {', '.join(unknown)}; known: {', '.join(KEYS)}"
        )
    for key, value in data.items():
        if isinstance(value, (Mapping, list)) or value is None:
            raise click.ClickException(f"profile {path}: {key} must be one value")
    return {str(k): str(v) for k, v in data.items()}


def from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The profile keys the environment sets (an empty variable sets nothing)."""
    return {k: environ[env_name(k)] for k in KEYS if environ.get(env_name(k))}


def resolve(given: str | None, environ: Mapping[str, str]) -> dict[str, str]:
    """The profile in force: the file (``given``, else ``EDGE_RL_PROFILE``, else
    ``default_path()`` if it exists) under the environment's keys."""
    name = given or environ.get(PROFILE_ENV)
    path = Path(name) if name else default_path()
    values = load_file(path) if name or path.is_file() else {}
    return values | from_env(environ)


def default_map(profile: Mapping[str, str], commands: Mapping[str, click.Command]) -> dict:
    """click's ``default_map`` for the group: each of ``PROFILE_COMMANDS`` gets the profile's
    values of the parameters it has."""
    out: dict[str, dict[str, Any]] = {}
    for name in PROFILE_COMMANDS:
        command = commands.get(name)
        if command is None:
            continue
        params = {p.name for p in command.params}
        defaults: dict[str, Any] = {}
        for key, value in profile.items():
            for param in KEYS[key]:
                filled = _for_command(name, key, value)
                if param in params and filled is not None:
                    defaults[param] = filled
        out[name] = defaults
    return out


def _for_command(command: str, key: str, value: str) -> str | None:
    if key != "credentials":
        return value
    if command == "actor":
        return None  # its part is boards/<id>: cli/actor.py takes it (the id may come later)
    identity = _IDENTITY.get(command)
    return str(Path(value) / identity) if identity else value


def board_credentials(profile: Mapping[str, str], actor_id: str) -> str | None:
    """An actor's part of the profile's credentials directory, ``boards/<id>``, if any."""
    top = profile.get("credentials")
    return str(Path(top) / "boards" / actor_id) if top else None
