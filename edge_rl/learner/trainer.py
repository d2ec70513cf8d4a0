"""Updates at the replay ratio: the learner trains on what the fleet delivered, no faster.

    trainer = Trainer(algo, mixer, cfg.updates_paid_by, lambda: ingest.transitions, clocks)
    trainer.train_for(0.05)     # main thread: updates until the target or the deadline
    trainer.pay_in_full()       # at the end of a run: every update the data has paid for

The target is the updates the transitions received pay for (``RunConfig.updates_paid_by``),
after the updates of a pretraining on demonstrations (``head_start``, learner/demos.py):
a count of transitions, not of seconds, so a busy machine trains later, never less. A call
takes up to ``updates_per_call`` steps and never more than are owed, so the count of
updates meets the target exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from edge_rl.agents.algo import Algo
from edge_rl.telemetry.breakdown import LapClock
from edge_rl.types import ReplaySample


class Batches(Protocol):
    """Where batches come from: a ``ReplayBuffer``, or a ``BatchMixer`` (learner/demos.py)
    of online replay and demonstrations. ``len()``: the online rows."""

    def __len__(self) -> int: ...

    def sample(self, batch_size: int) -> ReplaySample: ...


class Trainer:
    def __init__(
        self,
        algo: Algo,
        replay: Batches,
        updates_paid_by: Callable[[int], int],  # RunConfig.updates_paid_by
        env_steps: Callable[[], int],
        clocks: dict[str, LapClock],  # its laps go to "main"
        head_start: Callable[[], int] = lambda: 0,  # updates done before the fleet started
    ) -> None:
        self.algo = algo
        self.replay = replay
        self._paid_by = updates_paid_by
        self._head_start = head_start
        self._env_steps = env_steps
        self._lap = clocks["main"].lap
        self.losses: dict[str, float] = {"loss": float("nan"), "mean_q": float("nan")}

    def target(self) -> int:
        return self._head_start() + self._paid_by(self._env_steps())

    @property
    def online_updates(self) -> int:
        """Updates the fleet's transitions paid for: what fleet credit is paced by."""
        return self.algo.updates - self._head_start()

    def train_for(self, seconds: float) -> None:
        self._lap("other")  # what the main thread did since its last lap: control, ticks
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            owed = self.target() - self.algo.updates
            if owed <= 0 or len(self.replay) == 0:
                time.sleep(0.002)
                self._lap("idle")
                return
            steps = min(owed, self.algo.updates_per_call)
            self.losses = self.algo.update(self.replay.sample(self.algo.batch_size), steps)
            self._lap("updates")

    def pay_in_full(self, stop: Callable[[], bool] = lambda: False) -> None:
        """Every update the data has paid for, unless ``stop()`` turns true first."""
        while self.algo.updates < self.target() and not stop():
            self.train_for(0.5)
