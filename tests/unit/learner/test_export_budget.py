"""The exporter's budget: a due export goes out only while the exporter has been busy at
most ``max_busy_share`` of the run's wall time and none is in flight; otherwise it waits,
counted once, and the main thread goes on training."""

from __future__ import annotations

import threading
import types

import pytest

from edge_rl.learner.outbound import exporter as exporter_module
from edge_rl.learner.outbound.exporter import Exporter
from edge_rl.telemetry.breakdown import LEARNER_THREADS, LapClock
from tests.harness.clocks import FakeClock

EVERY = 100


class Packager:
    """Each export takes ``cost`` seconds of the fake clock, or blocks until released."""

    def __init__(self, clock: FakeClock, cost: float) -> None:
        self.clock, self.cost = clock, cost
        self.calls = 0
        self.release = threading.Event()
        self.release.set()

    def export(self, *_):
        self.calls += 1
        assert self.release.wait(10)
        self.clock.t += self.cost
        return None  # a parity refusal: nothing published, nothing scored


class Shadow:
    def set_weights(self, _weights) -> None:
        pass


def make(
    monkeypatch: pytest.MonkeyPatch, share: float, cost: float = 1.0
) -> tuple[Exporter, types.SimpleNamespace, FakeClock, Packager]:
    monkeypatch.setattr(exporter_module, "snapshot", lambda network: Shadow())
    clock = FakeClock(0.0)
    clocks = {name: LapClock(buckets, clock=clock) for name, buckets in LEARNER_THREADS.items()}
    algo = types.SimpleNamespace(
        updates=0,
        policy_network=types.SimpleNamespace(get_weights=lambda: []),
        deployable_weights=lambda weights: weights,
        exploration=lambda env_steps: {"epsilon": 0.1},
    )
    packager = Packager(clock, cost)
    exporter = Exporter(
        algo,  # type: ignore[arg-type]
        [0] * 100,  # replay: only its length is read here
        packager,  # type: ignore[arg-type]
        types.SimpleNamespace(version=0),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]  # nothing is published, so nothing is scored
        clocks,
        lambda: 0,
        EVERY,
        share,
    )
    return exporter, algo, clock, packager


def test_a_due_export_waits_until_the_exporter_is_within_its_share(monkeypatch):
    exporter, algo, clock, packager = make(monkeypatch, share=0.1, cost=1.0)
    try:
        algo.updates = EVERY
        exporter.maybe_export(None)  # busy 0 of 0 s: within
        exporter.wait()
        assert packager.calls == 1 and clock.t == 1.0

        algo.updates = 2 * EVERY
        for t in (1.0, 5.0, 9.9):  # busy 1 s > 10 % of t
            clock.t = t
            exporter.maybe_export(None)
            assert packager.calls == 1
        assert exporter.deferred == 1  # one due export, counted once

        clock.t = 10.0  # 1 s of 10: within
        exporter.maybe_export(None)
        exporter.wait()
        assert packager.calls == 2
        assert exporter.stats().deferred == 1
        assert exporter.state().json["deferred"] == 1
    finally:
        exporter.shutdown()


def test_share_one_exports_at_every_due_point(monkeypatch):
    exporter, algo, clock, packager = make(monkeypatch, share=1.0, cost=1.0)
    try:
        for k in range(1, 4):
            algo.updates = k * EVERY
            exporter.maybe_export(None)
            exporter.wait()
        assert packager.calls == 3 and exporter.deferred == 0
    finally:
        exporter.shutdown()


def test_an_export_in_flight_defers_the_next_without_waiting_for_it(monkeypatch):
    exporter, algo, clock, packager = make(monkeypatch, share=1.0, cost=0.0)
    try:
        packager.release.clear()  # the first export hangs in the worker
        algo.updates = EVERY
        exporter.maybe_export(None)
        algo.updates = 2 * EVERY
        clock.t = 100.0
        done = threading.Event()
        thread = threading.Thread(target=lambda: (exporter.maybe_export(None), done.set()))
        thread.start()
        assert done.wait(5), "the main thread waited for the export in flight"
        assert packager.calls == 1 and exporter.deferred == 1
        packager.release.set()
        exporter.wait()
        exporter.maybe_export(None)  # free now: the deferred one goes out
        exporter.wait()
        assert packager.calls == 2
    finally:
        packager.release.set()
        exporter.shutdown()
