"""Demonstrations in replay: the learner's second buffer, and how a batch draws from both.

    demos = ReplayBuffer(spec, cfg.replay.demo_capacity, seed=cfg.seed + 1)
    mixer = BatchMixer(replay, demos, cfg.replay.online_ratio, seed=cfg.seed + 2)
    trainer = Trainer(algo, mixer, ...)   # mixer.sample(B): about ratio·B online rows
    mixer.pretrain(algo, cfg.replay.pretrain_updates)   # before the fleet: demos alone
    packager = PolicyPackager(..., ExportObservations(replay, demos), ...)

What goes into ``demos``: every transition an intervention acted (ingest copies it there;
it stays in online replay too, as LeRobot's HIL-SERL keeps ``is_intervention`` steps in
both), and a Minari dataset loaded with ``--demos`` (learner/datasets.py).

How a batch is drawn: while ``demos`` is empty, all from online replay, as before. Once it
holds rows, ``online_ratio`` of each batch from online replay and the rest from
``demos`` (0.5 unless set: RLPD's symmetric sampling, Ball et al. 2023; HIL-SERL's
``OnlineOfflineMixer``). The two draws are shuffled together, so that each of the update's
K minibatches (agents/minibatches.py slices the batch in order) holds both in about the
ratio.

Pretraining (``replay.pretrain_updates``): before the fleet starts, that many gradient
steps on the demonstrations alone with the algorithm's pretraining loss (TD3: TD3+BC),
then an export, so that the boards' first policy is the pretrained one. Those updates are
the run's head start: fleet transitions pay for the online updates after them, as without
(``Trainer.target``), and fleet credit is paced by the online updates alone. Until online
replay holds enough observations, an export calibrates on the demonstrations' as well
(``ExportObservations``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from edge_rl.agents.algo import Algo
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.types import PartState, ReplaySample

log = logging.getLogger(__name__)

DEFAULT_ONLINE_RATIO = 0.5  # when demonstrations exist and replay.online_ratio is unset


@dataclass(frozen=True)
class DemoStats:
    rows: int  # in the demonstration buffer at the end
    added: int  # ever added: interventions and datasets
    intervention_rows: int  # of the rows, those an intervention on a board acted
    online_ratio: float  # of each batch drawn from online replay (1.0: no demonstrations)
    pretrain_updates: int = 0  # gradient steps on them alone before the fleet started
    pretrain_seconds: float = 0.0  # their wall time


class BatchMixer:
    """``sample`` for the trainer: online replay and demonstrations at ``online_ratio``.
    ``len()`` is online replay's: training starts on what the fleet sent."""

    def __init__(
        self,
        online: ReplayBuffer,
        demos: ReplayBuffer,
        online_ratio: float | None = None,
        seed: int = 0,
    ) -> None:
        if online_ratio is not None and not 0.0 <= online_ratio <= 1.0:
            raise ValueError(f"online_ratio must be in [0, 1], got {online_ratio}")
        self.online = online
        self.demos = demos
        self._ratio = DEFAULT_ONLINE_RATIO if online_ratio is None else online_ratio
        self._rng = np.random.default_rng(seed)
        self.pretrained = 0  # updates before the fleet started: the run's head start
        self.pretrain_seconds = 0.0

    def __len__(self) -> int:
        return len(self.online)

    @property
    def online_ratio(self) -> float:
        """The share of a batch drawn from online replay now."""
        return self._ratio if len(self.demos) else 1.0

    def add_interventions(self, rows: tuple[np.ndarray, ...], source: str) -> None:
        """Copy ``(obs, action, reward, next_obs, terminated, truncated)`` of rows an
        intervention acted into the demonstration buffer (ingest thread)."""
        obs, action, reward, next_obs, terminated, truncated = rows
        n = len(reward)
        self.demos.add(
            obs, action, reward, next_obs, terminated, source, truncated, np.ones(n, np.uint8)
        )

    def sample(self, batch_size: int) -> ReplaySample:
        """``batch_size`` rows: ``round(online_ratio × batch_size)`` from online replay, the
        rest from the demonstrations, shuffled together. With one of the two empty, all
        from the other."""
        n_online = round(self.online_ratio * batch_size)
        if len(self.online) == 0:
            n_online = 0
        elif len(self.demos) == 0:
            n_online = batch_size
        if n_online == batch_size:
            return self.online.sample(batch_size)
        if n_online == 0:
            return self.demos.sample(batch_size)
        a, b = self.online.sample(n_online), self.demos.sample(batch_size - n_online)
        order = self._rng.permutation(batch_size)  # [B]: both sources in every minibatch
        return ReplaySample(*(np.concatenate([x, y])[order] for x, y in zip(a, b, strict=True)))

    def pretrain(
        self, algo: Algo, updates: int, progress: Callable[[int], None] | None = None
    ) -> None:
        """``updates`` gradient steps of ``algo.pretrain`` on the demonstrations alone
        (main thread, before the fleet starts); ``progress(done)`` after each call."""
        if updates <= 0 or len(self.demos) == 0:
            return
        t0, start = time.monotonic(), algo.updates
        log.info("pretraining on %d demonstration rows: %d updates", len(self.demos), updates)
        while algo.updates - start < updates:
            steps = min(algo.updates_per_call, updates - (algo.updates - start))
            algo.pretrain(self.demos.sample(algo.batch_size), steps)
            if progress is not None:
                progress(algo.updates - start)
        self.pretrained = algo.updates - start
        self.pretrain_seconds = round(time.monotonic() - t0, 2)
        log.info("pretrained: %d updates in %.1f s", self.pretrained, self.pretrain_seconds)

    def stats(self) -> DemoStats:
        return DemoStats(
            len(self.demos),
            self.demos.added,
            self.demos.interventions(),
            self.online_ratio,
            self.pretrained,
            self.pretrain_seconds,
        )

    # --- durable runs: the demonstration buffer and the mixing draws -------------------

    def state(self) -> PartState:
        saved = self.demos.state()
        mix = {"mix_rng": self._rng.bit_generator.state, "pretrained": self.pretrained}
        mix["pretrain_seconds"] = self.pretrain_seconds
        return PartState({**saved.json, **mix}, saved.arrays)

    def load_state(self, state: PartState) -> None:
        self.demos.load_state(state)
        self._rng.bit_generator.state = state.json["mix_rng"]
        self.pretrained = int(state.json.get("pretrained", 0))  # absent before pretraining
        self.pretrain_seconds = float(state.json.get("pretrain_seconds", 0.0))


class ExportObservations:
    """What an export calibrates int8 on and checks parity with: ``drawn(n)`` from online
    replay, and while it holds fewer than ``n``, the demonstrations' observations fill the
    rest (a pretrained policy is exported before the fleet has sent anything)."""

    def __init__(self, online: ReplayBuffer, demos: ReplayBuffer) -> None:
        self.online = online
        self.demos = demos

    def __len__(self) -> int:
        return len(self.online) + len(self.demos)

    def drawn(self, n: int, rng: np.random.Generator | None = None) -> tuple[np.ndarray, list[str]]:
        obs, sources = self.online.drawn(n, rng)
        if len(obs) >= n or len(self.demos) == 0:
            return obs, sources
        more, more_sources = self.demos.drawn(n - len(obs), rng)
        return np.concatenate([obs, more]), sources + more_sources
