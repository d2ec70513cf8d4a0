"""Durable runs: the learner's checkpoint, when it is written, and how it comes back.

    durable = Durable(parts, run_dir, header_for(cfg, rid), cfg.checkpoint, pause=.., headline=..)
    durable.restore()             # `edge-rl learn --resume`: before the transport starts
    durable.maybe_save()          # main loop: on the config's schedule (checkpoint.every_*)
    durable.save()                # at SIGTERM/SIGINT and at the end of the run

``parts`` names every part that owns checkpointed state (``types.Saveable``: ``state()``
and ``load_state()``, as DeepMind Acme's ``core.Saveable``); each part says what it keeps
(the algo adapter: the TF learner's networks, optimiser slots, rng and counters and a
compressor's masks, schedule and controller, so the next update after a restore is the
one the run would have taken; replay: its filled part as it lies and its rng; ingest:
counters, sessions and sequence trackers; broadcast and selection: versions, scores and
their policies as sent, signed; exporter and packager: their counters and rng; the
meter: the run's wall time). The states are taken in the map's order with ingest paused
(``pause``), so that replay and the ingest counters agree.
Not saved: the credit ledger and actor identities (an actor that kept running gets credit
again once what it sent to the killed learner is written off, after credit_timeout_s)
and codecarbon's measurement (each process measures its own part).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from edge_rl.config import CheckpointConfig
from edge_rl.learner.checkpoint import Checkpoint, CheckpointError
from edge_rl.learner.run_dir import RunDir
from edge_rl.types import PartState, Saveable

log = logging.getLogger(__name__)


class StopRequest:
    """The signal handler of ``edge-rl learn``: once ``armed`` (the learner's loop starts;
    it stays so to the command's end), the first SIGTERM/SIGINT is a request: before the
    budget it ends the loop (checkpoint, fleet paused, summary), after it it cuts the
    finishing short (the updates still owed, the final evaluation); before that, or a
    second time, it raises KeyboardInterrupt as Python's own does."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.armed = False
        self.signum: int | None = None

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self)
        # SIGINT explicitly too: a shell starts a background job (`&`) with SIGINT ignored.
        signal.signal(signal.SIGINT, self)

    def __call__(self, signum: int, frame: Any) -> None:
        if self.armed and not self.event.is_set():
            self.signum = signum
            self.event.set()
            return
        raise KeyboardInterrupt(f"signal {signum}")

    def is_set(self) -> bool:
        return self.event.is_set()


@dataclass(frozen=True)
class Headline:
    """The counters a checkpoint's header shows a person (and resume reports)."""

    env_steps: int
    updates: int
    policy_version: int
    wall_s: float


@dataclass(frozen=True)
class DurableStats:
    resumed_from: int | None  # env steps of the checkpoint this process resumed from
    last_seconds: float  # what the last checkpoint took to take and write


@dataclass(frozen=True)
class JsonPart:
    """A part whose state is one JSON-able value, through its own two methods (Ingest's
    ``state()`` and ``load_state()``)."""

    get: Callable[[], Any]
    put: Callable[[Any], None]

    def state(self) -> PartState:
        return PartState(self.get())

    def load_state(self, state: PartState) -> None:
        self.put(state.json)


class Durable:
    def __init__(
        self,
        parts: Mapping[str, Saveable],
        run_dir: RunDir,
        header: dict[str, Any],  # checkpoint.header_for: what a resume must agree on
        schedule: CheckpointConfig,
        *,
        pause: AbstractContextManager,  # held while the states are taken: ingest paused
        headline: Callable[[], Headline],
    ) -> None:
        self.parts = dict(parts)
        self.checkpoint = Checkpoint(run_dir, header)
        self.every_s = schedule.every_s
        self.every_steps = schedule.every_env_steps
        self._pause = pause
        self._headline = headline
        self.saves = 0
        self.last_seconds = 0.0
        self.resumed_from: int | None = None
        self._last = (time.monotonic(), 0)  # (when, env steps) of the last save

    def maybe_save(self) -> None:
        when, steps = self._last
        by_time = self.every_s and time.monotonic() - when >= self.every_s
        by_steps = self.every_steps and self._headline().env_steps - steps >= self.every_steps
        if by_time or by_steps:
            self.save()

    def save(self, finished: bool = False) -> None:
        t0 = time.perf_counter()  # what the main thread spends on it: copies and the write
        with self._pause:
            states = {name: part.state() for name, part in self.parts.items()}
            head = self._headline()
        self._last = (time.monotonic(), head.env_steps)
        self.checkpoint.save(states, **dataclasses.asdict(head), finished=finished)
        self.last_seconds = time.perf_counter() - t0
        self.saves += 1
        log.info(
            "checkpoint at %d env steps, %d updates, v%d: %.3f s",
            head.env_steps,
            head.updates,
            head.policy_version,
            self.last_seconds,
        )

    def restore(self) -> dict[str, Any]:
        """Put the checkpoint back into the parts; its header."""
        saved = self.checkpoint.load()
        path = self.checkpoint.path
        if saved.header.get("finished"):
            raise CheckpointError(
                f"{self.checkpoint.run_dir.path} is a finished run "
                f"({saved.header['env_steps']} env steps)"
            )
        missing = sorted(set(self.parts) - set(saved.parts))
        if missing:
            raise CheckpointError(f"checkpoint {path} has no state of {', '.join(missing)}")
        for name, part in self.parts.items():
            try:
                part.load_state(saved.parts[name])
            except (ValueError, KeyError, TypeError) as e:  # CodecError is a ValueError
                raise CheckpointError(f"checkpoint {path}, part {name!r}: {e}") from None
        h = saved.header
        self.resumed_from = int(h["env_steps"])
        self._last = (time.monotonic(), self.resumed_from)
        log.info(
            "resumed from %s: %d env steps, %d updates, policy v%d",
            path,
            self.resumed_from,
            h["updates"],
            h["policy_version"],
        )
        return h

    def stats(self) -> DurableStats:
        return DurableStats(self.resumed_from, self.last_seconds)


def saved_run_id(run_dir: RunDir) -> str | None:
    """The run id of the checkpoint in ``run_dir`` (its header's identity), or None."""
    for path in (run_dir.checkpoint, run_dir.checkpoint_old):
        try:
            header = json.loads((path / "header.json").read_text())
            return header["identity"].get("run_id")
        except (OSError, ValueError, KeyError, AttributeError):
            continue
    return None
