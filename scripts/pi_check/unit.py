"""What systemd would run for an installed unit: the few [Service] keys the actor's unit uses.

    service = read_service(rootfs / "etc/systemd/system/edge-rl-actor.service")
    service.exec_start      # ["/opt/edge-rl/venv/bin/edge-rl", "actor", "--config", ...]
    service.user, service.working_directory, service.environment

There is no systemd in the chroot: the check starts the unit's ExecStart itself, as its
User=, in its WorkingDirectory= with its Environment=, so that what runs is what the board
would run at boot. A key the check cannot honour (more than one ExecStart, an
EnvironmentFile) is an error, not a silent difference.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

UNSUPPORTED = ("environmentfile", "execstartpre", "execstartpost", "rootdirectory")


@dataclass(frozen=True)
class Service:
    exec_start: list[str]
    user: str = "root"
    working_directory: str = "/"
    environment: dict[str, str] = field(default_factory=dict)


def service_keys(text: str) -> dict[str, list[str]]:
    """``[Service]``'s keys (lower-cased) and every value each was given, in order: systemd
    lets a key repeat (Environment=), joins lines ending in a backslash, and skips # and ;
    comments."""
    keys: dict[str, list[str]] = {}
    section, pending = "", ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
        elif section == "Service" and "=" in line:
            key, _, value = line.partition("=")
            keys.setdefault(key.strip().lower(), []).append(value.strip())
    return keys


def read_service(path: Path) -> Service:
    keys = service_keys(path.read_text())
    if not keys:
        raise ValueError(f"{path}: no [Service] keys")
    for key in UNSUPPORTED:
        if key in keys:
            raise ValueError(f"{path}: {key} is set; the emulated-Pi check does not run it")
    starts = keys.get("execstart", [])
    if len(starts) != 1:
        raise ValueError(f"{path}: expected one ExecStart=, found {len(starts)}")
    argv = shlex.split(starts[0].lstrip("-@:+!"))  # systemd's prefixes: none change argv here
    env: dict[str, str] = {}
    for value in keys.get("environment", []):
        for item in shlex.split(value):
            name, _, setting = item.partition("=")
            env[name] = setting
    last = {k: v[-1] for k, v in keys.items()}
    return Service(
        exec_start=argv,
        user=last.get("user", "root"),
        working_directory=last.get("workingdirectory", "/").lstrip("-"),
        environment=env,
    )


def command(service: Service) -> list[str]:
    """The unit's ExecStart with its environment and working directory, as a board command
    (run as its user by chroot.as_user)."""
    env = [f"{k}={v}" for k, v in service.environment.items()]
    return ["env", f"--chdir={service.working_directory}", *env, *service.exec_start]
