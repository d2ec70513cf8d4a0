"""Finding Mosquitto's programs and starting children that die with their parent.
Standard library only."""

from __future__ import annotations

import os
import shutil

# The environment variable that names the PID of the process that started this one, for a
# child that must die with it: ``edge-rl actor``/``actors`` exit at once if their parent is
# not that PID any more (cli/shutdown.py), as a parent that died before ``setpriv`` armed
# the signal sends none.
PARENT_ENV = "EDGE_RL_PARENT_PID"

# Debian/Ubuntu install the daemon into /usr/sbin, which is not on a non-root PATH.
_MOSQUITTO_FALLBACK_DIRS = ("/usr/sbin", "/usr/local/sbin", "/opt/homebrew/sbin")


def die_with_parent(argv: list[str]) -> list[str]:
    """``argv`` run so that the child gets SIGTERM when its parent dies, ``kill -9`` included.

    util-linux's ``setpriv --pdeathsig`` sets the signal and execs ``argv`` (same pid). The
    kernel sends it when the *thread* that spawned the child exits: spawn from a thread that
    lives as long as the child should (the CLI's main thread). Where ``setpriv`` is missing
    (not Linux), ``argv`` is returned unchanged and a killed parent leaves an orphan.
    """
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", *argv] if setpriv else list(argv)


def parent_env() -> dict[str, str]:
    """The environment entry that tells a child started now who its parent is."""
    return {PARENT_ENV: str(os.getpid())}


def _find(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(_MOSQUITTO_FALLBACK_DIRS))


def find_mosquitto() -> str | None:
    """Path of the ``mosquitto`` executable, also looking in the sbin directories."""
    return _find("mosquitto")


def find_mosquitto_passwd() -> str:
    """Path of ``mosquitto_passwd`` (it hashes Mosquitto's password files), or a clear error."""
    found = _find("mosquitto_passwd")
    if found is None:
        raise FileNotFoundError(
            "mosquitto_passwd not found on PATH or in /usr/sbin (it hashes Mosquitto's password "
            "file): apt-get install mosquitto (Debian/Ubuntu) or brew install mosquitto (macOS)"
        )
    return found
