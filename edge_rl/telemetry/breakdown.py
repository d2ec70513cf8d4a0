"""Runtime breakdown: where a node's wall time goes (ActorQ's step / policy pull /
deserialize / model load split, QuaRL, TMLR 2022). Numpy-free: boards import it.

    clock = LapClock(("env_step", "inference", "idle"))   # starts now
    while running:
        ...; clock.lap("inference")    # the time since the previous lap was inference
        ...; clock.lap("env_step")
    clock.totals()                     # {"env_step": s, "inference": s, "idle": s, "wall": s}

Lap accounting: one clock per thread, and every instant between the start and the last lap
is charged to exactly one bucket, so the buckets add up to ``wall`` (that thread's wall
time up to its last lap) by construction. The cost is one ``perf_counter`` and a dict
update per lap (~0.3 µs); a code path that forgets to lap charges its time to the next
lap's bucket, which is what the tests check against outside clocks. ``clock=`` takes any
other monotonic clock (a test's fake one makes every lap exact). A loop too hot for a lap
per piece times its pieces on ``now`` and charges them with one ``lap_split`` per block:
the same partition, at a few float additions per piece.
"""

from __future__ import annotations

import csv
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# The learner's threads, each with its own clock started when LearnerNode.run() begins;
# each thread's buckets add up to its own wall (up to its last lap):
#   main      setup: tf.function tracing, connecting, the wait for a retained policy,
#             until the fleet is told to run · updates: agent.update calls ·
#             export: the snapshots, and the final export · publish: policy publishes
#             done here (the final one, a redeploy) · evaluate: model-selection scoring and
#             the final evaluation done here · idle: no update due (2 ms sleeps), waiting
#             for actors or for an export in flight · other: control and flow control,
#             metrics and the live view, the summary's bookkeeping
#   ingest    ingest: Ingest.handle (decode, validate, dedup, replay.add) · idle: waiting
#   exporter  export: conversion + LiteRT parity + bundle encoding · publish: MQTT publish
#             and saving the run's policy files · evaluate: scoring · idle: no job
LEARNER_THREADS = {
    "main": ("setup", "updates", "export", "publish", "evaluate", "other", "idle"),
    "ingest": ("ingest", "idle"),
    "exporter": ("export", "publish", "evaluate", "idle"),
}


class LapClock:
    """Wall time of one thread, split into named buckets by laps. Write from that thread
    only; ``totals()`` may be read from any (consistent to within the lap in progress)."""

    def __init__(
        self, buckets: Iterable[str], clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.now = clock  # the clock laps read; a hot loop times its parts on it too
        self._acc = dict.fromkeys(buckets, 0.0)
        self.start = self._last = clock()

    def restart(self) -> None:
        """Zero every bucket and start again from now."""
        self._acc = dict.fromkeys(self._acc, 0.0)
        self.start = self._last = self.now()

    def lap(self, bucket: str) -> float:
        """Charge the time since the previous lap to ``bucket``; returns that time."""
        now = self.now()
        dt = now - self._last
        self._last = now
        self._acc[bucket] += dt
        return dt

    def lap_split(self, parts: Mapping[str, float], rest: str) -> None:
        """One lap for many pieces of work: ``parts`` (seconds per bucket, timed on
        ``now`` since the previous lap) go to their buckets, the rest of the time since
        that lap to ``rest``. A loop that reads ``now`` around its pieces and laps once
        per block of iterations keeps every bucket of a lap per piece, for a few float
        additions per piece instead of a method call and a dict update."""
        now = self.now()
        dt = now - self._last
        self._last = now
        acc = self._acc
        for bucket, seconds in parts.items():
            acc[bucket] += seconds
            dt -= seconds
        acc[rest] += dt

    def totals(self, digits: int = 6) -> dict[str, float]:
        """Seconds per bucket, and ``wall``: their sum, measured as last lap − start."""
        out = {k: round(v, digits) for k, v in self._acc.items()}
        out["wall"] = round(self._last - self.start, digits)
        return out


def busy(breakdown: Mapping[str, float]) -> float:
    """Seconds a thread's breakdown charges to work: every bucket but ``idle`` (and the
    ``wall`` they add up to)."""
    return sum(v for k, v in breakdown.items() if k not in ("idle", "wall"))


def learner_clocks() -> dict[str, LapClock]:
    return {thread: LapClock(buckets) for thread, buckets in LEARNER_THREADS.items()}


def fleet_total(actors: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Bucket-wise sum over actors (actor-seconds; ``wall`` sums the actors' walls)."""
    total: dict[str, float] = {}
    for breakdown in actors.values():
        for k, v in breakdown.items():
            total[k] = round(total.get(k, 0.0) + v, 6)
    return total


def describe(name: str, breakdown: Mapping[str, float]) -> str:
    """One log line, largest bucket first: ``name: wall 12.00 s; env_step 4.10 s (34%), ...``
    (shares of ``wall``; for an actor's loader buckets, the loader thread's busy share)."""
    wall = breakdown.get("wall", 0.0)
    parts = sorted(((v, k) for k, v in breakdown.items() if k != "wall"), reverse=True)
    return f"{name}: wall {wall:.2f} s; " + ", ".join(
        f"{k} {v:.2f} s ({100 * v / max(wall, 1e-9):.0f}%)" for v, k in parts
    )


def runtime_breakdown(
    learner: Mapping[str, LapClock], actors: Mapping[str, Mapping[str, float]]
) -> dict[str, Any]:
    """``summary.json``'s ``runtime_breakdown``: per learner thread, per actor, fleet sum."""
    actors = {a: dict(b) for a, b in sorted(actors.items()) if b}
    return {
        "learner": {name: clock.totals() for name, clock in learner.items()},
        "actors": actors,
        "fleet_total": fleet_total(actors),
    }


def write_report(path: Path, breakdown: Mapping[str, Any]) -> None:
    """The breakdown as CSV at ``path`` (long format: source, bucket, seconds), and a log
    line per learner thread and for the fleet's total."""
    sources = {f"learner/{k}": v for k, v in breakdown["learner"].items()}
    sources |= {f"actor/{k}": v for k, v in breakdown["actors"].items()}
    sources["fleet_total"] = breakdown["fleet_total"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["source", "bucket", "seconds"])
        for source, buckets in sources.items():
            w.writerows([source, k, v] for k, v in buckets.items())
    for source, buckets in sources.items():
        if not source.startswith("actor/"):  # one line per actor would flood a fleet's log
            log.info("runtime breakdown %s", describe(source, buckets))
