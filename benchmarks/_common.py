"""What the backbone benchmark sections share: constants, markdown tables, CPU clocks.

numpy only at import time: the ingest section's publisher child process imports this too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

SEED = 0
EPSILON = 0.04  # the actor's exploration late in training (DQNConfig.epsilon_end)
BATCH = 64  # transitions per MQTT message, as firmware_configs/rpi4.yaml
NETS = (  # (label, obs_dim, outputs); the first is the one the actor ladder runs
    ("CartPole DQN 4-256-256-2", 4, 2),
    ("reference MLP 17-256-256-6", 17, 6),
)
PRECISIONS = ("int8", "fp16", "fp32")

Clock = Callable[[], float]  # CPU seconds so far; nan if it cannot be read


def md_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A markdown pipe table, numbers right-aligned."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    numeric = [all(_is_num(r[i]) for r in cells) for i in range(len(headers))]

    def fmt(row: list[str]) -> str:
        out = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(row, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(out) + " |"

    sep = ["-" * (w - 1) + ":" if num else "-" * w for w, num in zip(widths, numeric, strict=True)]
    return "\n".join([fmt(headers), "| " + " | ".join(sep) + " |", *(fmt(r) for r in cells)])


def _is_num(s: str) -> bool:
    try:
        float(s.replace(",", "").rstrip("×%x").lstrip("+"))
        return True
    except ValueError:
        return False


def pct(samples_ns: list[int] | np.ndarray, q: float) -> float:
    """Percentile of nanosecond samples, in µs."""
    return float(np.percentile(np.asarray(samples_ns), q)) / 1e3


def thread_clock(ident: int | None) -> Clock:
    """CPU seconds of another thread of this process (pthread CPU clock, ns resolution)."""
    if ident is None or not hasattr(time, "pthread_getcpuclockid"):
        return lambda: float("nan")
    clock = time.pthread_getcpuclockid(ident)

    def read() -> float:
        try:
            return time.clock_gettime(clock)
        except OSError:  # the thread has exited
            return float("nan")

    return read


def paho_clock(transport: Any) -> Clock:
    """CPU clock of the network thread behind an ``MqttTransport``.

    paho has no public handle on the thread that ``loop_start`` starts, hence ``_thread``.
    """
    paho = getattr(transport._client, "_thread", None)
    return thread_clock(paho.ident if paho else None)


def process_clock(pid: int | None) -> Clock:
    """CPU seconds (user + system) of another process, from ``/proc/PID/stat``."""

    def read() -> float:
        if pid is None:
            return float("nan")
        try:
            with open(f"/proc/{pid}/stat") as f:
                # Fields after the ")" that closes the command name; utime, stime are 14, 15.
                rest = f.read().rsplit(")", 1)[1].split()
            return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return float("nan")

    return read


def read_clocks(clocks: dict[str, Clock]) -> dict[str, float]:
    return {name: read() for name, read in clocks.items()}
