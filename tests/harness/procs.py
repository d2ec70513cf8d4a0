"""Processes seen through Linux /proc: a process's direct children, whether a PID still
runs, and what it runs (for an assertion's message when one outlives its parent)."""

from __future__ import annotations

from pathlib import Path

from tests.harness.waits import until


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid``."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited meanwhile
        if int(fields[1]) == pid:  # fields: state, ppid, ...
            kids.append(int(stat.parent.name))
    return kids


def alive(pid: int) -> bool:
    """Running or sleeping; a zombie (exited, not yet reaped) counts as gone."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "(gone)"


def survivors(pids: list[int], within_s: float) -> dict[int, str]:
    """Those of ``pids`` still alive after waiting up to ``within_s`` for all to exit,
    each with its command line."""
    until(lambda: not any(alive(p) for p in pids), within_s, step=0.2)
    return {p: cmdline(p) for p in pids if alive(p)}
