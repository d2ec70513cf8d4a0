"""Background export: snapshot -> int8 conversion + parity -> broadcast -> score.

    exporter = Exporter(algo, replay, packager, broadcast, selection, clocks, env_steps,
                        every, max_busy_share)
    exporter.maybe_export(compression)   # main thread: when export.every_updates have passed
    exporter.export(compression, wait=True)  # the end of a run: on the calling thread
    exporter.deploy_best()   # then: republish the best-scoring policy if the last scores lower
    exporter.shutdown()

The network is snapshotted on the main thread (milliseconds); the rest runs on the
exporter thread while training goes on. That thread mostly waits: the export itself (the
template write, the self-check, LiteRT's and the float network's outputs on the parity
observations, compression; ``export.remote``) and the scoring (``ModelSelection``) run in
the export worker's process, off the learner's GIL; the thread judges the parity outputs,
signs, publishes and writes the run directory. One export at a time.

An export is due every ``every_updates`` updates, and goes out at the first due check at
which the exporter is within its budget: busy (export, publish, scoring) at most
``max_busy_share`` of the run's wall time so far, and no export in flight. Otherwise it
waits, and training goes on: the main thread never waits for an export. Each version costs
the worker's CPU and one of the host's cores for its wall time (~40 ms of a quiet 2-core
host, 2-3x that next to a CPU hog), so a fixed cadence would take a share of the run that
grows with the learner's speed and the host's load; the budget bounds it. A busy machine
makes each version and the run slower alike, so it publishes about as many versions as a
quiet one. The deferrals are counted (``exports_deferred``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from edge_rl.agents.algo import Algo
from edge_rl.learner.outbound.broadcast import PolicyBroadcast
from edge_rl.learner.outbound.packager import Observations, PolicyPackager, snapshot
from edge_rl.learner.outbound.selection import ModelSelection
from edge_rl.telemetry.breakdown import LapClock, busy
from edge_rl.types import PartState

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExporterStats:
    deployed_from: int | None  # version whose weights the last publish redeployed
    deferred: int  # due exports that waited for the exporter's budget (or one in flight)


class Exporter:
    def __init__(
        self,
        algo: Algo,
        replay: Observations,  # calibration and parity draws
        packager: PolicyPackager,
        broadcast: PolicyBroadcast,
        selection: ModelSelection,
        clocks: dict[str, LapClock],  # "main" and "exporter"
        env_steps: Callable[[], int],
        every_updates: int,
        max_busy_share: float,  # export.max_busy_share
    ) -> None:
        self.algo = algo
        self.replay = replay
        self.packager = packager
        self.broadcast = broadcast
        self.selection = selection
        self._main = clocks["main"]
        self._clock = clocks["exporter"]
        self._env_steps = env_steps
        self.every_updates = every_updates
        self.max_busy_share = max_busy_share
        self.deferred = 0  # due exports that waited (each counted once)
        self._waiting = False  # the export due now has waited at least once
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="exporter")
        self._job: Future | None = None
        self._shadow: Any = None  # the copy exports read (_snapshot)
        self._last_updates = 0
        self.deployed_from: int | None = None  # version whose weights were redeployed

    def maybe_export(self, compression: float | None) -> None:
        """Export if one is due and the exporter is free and within its budget."""
        if self.algo.updates - self._last_updates < self.every_updates:
            return
        if self.busy_now():
            if not self._waiting:
                self._waiting = True
                self.deferred += 1
                if self.deferred == 1:
                    log.info(
                        "export: a due version waits for the exporter (busy over %.0f %% of "
                        "the run's wall time, export.max_busy_share, or one in flight)",
                        100 * self.max_busy_share,
                    )
            return
        self.export(compression)

    def busy_now(self) -> bool:
        """An export in flight, or the exporter's busy time over its share of the wall."""
        if self._job is not None and not self._job.done():
            return True
        clock = self._clock
        return busy(clock.totals()) > self.max_busy_share * (clock.now() - clock.start)

    def export(self, compression: float | None, wait: bool = False) -> None:
        """``compression``: the network's ratio now (the compressor changes only here).
        Waits for an export in flight first; ``wait``: this one runs on the calling thread."""
        self._last_updates = self.algo.updates
        self._waiting = False
        if len(self.replay) < 20:  # too few observations to calibrate int8 on
            return
        lap = self._main.lap
        lap("other")
        self.wait()  # the previous export, if it is still in flight
        lap("idle")
        args = (
            self._snapshot(),
            self.broadcast.version + 1,
            self.algo.updates,
            self.algo.exploration(self._env_steps()),
            compression,
        )
        lap("export")  # the snapshot
        if wait:
            self._job_body(*args, clock=self._main)
        else:
            self._job = self._pool.submit(self._job_body, *args, clock=self._clock)

    def _snapshot(self) -> Any:
        """The policy network's weights now, in a copy the export reads while training goes
        on. One copy serves every export (each waits for the one before it): setting its
        weights takes ~1 ms, cloning the network anew ~20-90 ms of the main thread."""
        network = self.algo.policy_network
        weights = self.algo.deployable_weights(network.get_weights())
        if self._shadow is not None:
            try:
                self._shadow.set_weights(weights)
                return self._shadow
            except ValueError:  # the network's shapes changed: clone it again
                self._shadow = None
        self._shadow = snapshot(network)
        self._shadow.set_weights(weights)
        return self._shadow

    def wait(self) -> None:
        if self._job is not None:
            self._job.result()
            self._job = None

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)

    def _job_body(
        self,
        model: Any,
        version: int,
        step: int,
        exploration: dict[str, float],
        compression: float | None,
        *,
        clock: LapClock,  # of the thread this runs on
    ) -> None:
        clock.lap("idle")  # waiting for this job (on the main thread: ~0, it just lapped)
        try:
            published = self.packager.export(self.algo, model, version, step, exploration)
        except Exception:  # noqa: BLE001 - a failed export must not end the run
            published = None
            self.packager.count_failure()
            log.exception("export v%d failed", version)
        clock.lap("export")
        if published is not None:
            published = dataclasses.replace(published, compression=compression)
            if self.broadcast.publish(published, self._env_steps()):
                clock.lap("publish")
                if self.selection.due(version):
                    self.selection.score(published)
                    clock.lap("evaluate")
        clock.lap("publish")  # a refused publish, if any

    def deploy_best(self) -> int | None:
        """Republish the best-scoring policy's weights under a new version if the last
        policy scores lower; the version whose weights went out, or None."""
        last = self.broadcast.current
        better = None if last is None else self.selection.better_than(last)
        self._main.lap("evaluate")
        if better is None:
            return None
        best, best_score, score = better
        again = self.packager.reversion(best, self.broadcast.version + 1)
        published = self.broadcast.publish(again, self._env_steps())
        self._main.lap("publish")
        if not published:
            return None
        v_best = self.deployed_from = best.bundle.manifest.policy_version
        log.info(
            "deployed v%d: the weights of v%d (score %.1f) over the last v%d (%.1f)",
            self.broadcast.version,
            v_best,
            best_score,
            last.bundle.manifest.policy_version,
            score,
        )
        return v_best

    def stats(self) -> ExporterStats:
        return ExporterStats(self.deployed_from, self.deferred)

    # --- durable runs (edge_rl/learner/durable.py) ----------------------------------------

    def state(self) -> PartState:
        """Waits for an export in flight first: the broadcast and the selection hold still."""
        self.wait()
        return PartState({"last_updates": self._last_updates, "deferred": self.deferred})

    def load_state(self, state: PartState) -> None:
        self._last_updates = int(state.json["last_updates"])
        self.deferred = int(state.json.get("deferred", 0))
