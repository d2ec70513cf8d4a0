"""The learner host's side of the check: the edge-rl CLI, and Mosquitto as a deployment runs it.

    broker = TlsBroker(repo, creds, workdir)   # host/mosquitto.conf + creds/broker/* on a free port
    broker.url                                 # mqtts://127.0.0.1:PORT
    learner = cli_popen(repo, ["learn", ...], log)
    broker.stop()

The broker is the shipped host/mosquitto.conf (TLS, passwords, the deployment's generated
creds/broker/acl, no anonymous client) with only its listener and file paths changed, like
tests/harness/mosquitto_auth.py's ``shipped_config``: the board meets what a real
deployment runs. Every child is started by
PID under ``setpriv --pdeathsig`` (it dies with this script, ``kill -9`` included) and
stopped by PID, each wait bounded.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from edge_rl.broker.executables import die_with_parent, find_mosquitto
from edge_rl.transport.address import free_port

BROKER_START_S = 15.0


def cli(repo: Path, args: list[str], log: Path, timeout: float = 300) -> str:
    """``edge-rl ARGS`` to completion (bounded); its output, or a clear error with its tail."""
    with open(log, "w") as out:
        p = subprocess.run(
            [sys.executable, "-m", "edge_rl.cli", *args],
            cwd=repo,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout,
        )
    text = log.read_text()
    if p.returncode != 0:
        raise RuntimeError(f"edge-rl {args[0]} failed ({p.returncode}); {log}:\n{text[-3000:]}")
    return text


def cli_popen(repo: Path, args: list[str], log: Path) -> subprocess.Popen:
    """``edge-rl ARGS`` in the background, output to ``log`` (a file: no pipe to fill)."""
    with open(log, "w") as out:
        return subprocess.Popen(
            die_with_parent([sys.executable, "-m", "edge_rl.cli", *args]),
            cwd=repo,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


class TlsBroker:
    """host/mosquitto.conf with ``creds/broker/*`` (its generated ACL included) installed
    under ``workdir``."""

    def __init__(self, repo: Path, creds: Path, workdir: Path, port: int | None = None) -> None:
        mosquitto = find_mosquitto()
        if mosquitto is None:
            raise RuntimeError("mosquitto not found: apt-get install mosquitto")
        etc = workdir / "broker-etc"
        if etc.exists():
            shutil.rmtree(etc)
        shutil.copytree(creds / "broker", etc)  # acl: each board scoped to its run
        persist = workdir / "broker-persist"
        persist.mkdir(exist_ok=True)
        self.port = port or free_port()  # the bundles were flashed for it
        text = (repo / "host" / "mosquitto.conf").read_text()
        for old, new in (
            ("listener 8883\n", f"listener {self.port} 127.0.0.1\n"),
            ("/etc/mosquitto/edge-rl/", f"{etc}/"),
            ("/var/lib/mosquitto/", f"{persist}/"),
        ):
            if old not in text:
                raise RuntimeError(f"host/mosquitto.conf changed: no {old.strip()!r} to replace")
            text = text.replace(old, new)
        text += "log_dest stderr\nlog_type all\n"
        if os.geteuid() == 0:  # as root Mosquitto switches to user "mosquitto" otherwise
            text += f"user {pwd.getpwuid(os.geteuid()).pw_name}\n"
        self.conf = workdir / "mosquitto.conf"
        self.conf.write_text(text)
        self.log = workdir / "mosquitto.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                die_with_parent([mosquitto, "-c", str(self.conf)]),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + BROKER_START_S
        while not re.search(r"mosquitto version \S+ running", self.log.read_text()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"mosquitto did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"mqtts://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.proc, 10)


def stop_process(proc: subprocess.Popen, grace_s: float = 30.0) -> int:
    """SIGTERM by PID, SIGKILL after ``grace_s``: the exit code, always bounded."""
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(10)
