"""Checks of a decoded transition batch against the run (protocol.md §3.1, §7).

    check = Validator(topics, run_id, latest_version=lambda: broadcast.version)
    check.origin(topic, batch)   # its own actor's topic, this run start, values plausible
    check.version(batch)         # a policy the learner published, not older than max_policy_lag

Each raises ``Rejected(reason)``: the bytes decoded (the codec raises ``CodecError`` for
those that do not), but the batch does not belong in replay. The two checks run on either
side of deduplication: a batch that passes ``origin`` is trusted to be its actor's, so its
``seq`` is marked seen even if ``version`` then refuses it (a reject, not also a gap).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edge_rl.learner.ingest.plausible import Bounds
from edge_rl.types import TransitionBatch
from edge_rl.wire.topics import Topics


class Rejected(Exception):
    """A well-formed batch the run refuses; ``reason`` is its counter key (protocol.md §7)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


class Validator:
    def __init__(
        self,
        topics: Topics,
        run_id: str | None,
        latest_version: Callable[[], int],
        max_policy_lag: int | None = None,
        max_abs_observation: float = 1e6,
        max_abs_reward: float = 1e6,
        bounds: Bounds | None = None,
    ) -> None:
        """``run_id``: only batches stepped for this start of the run pass (None: any).
        ``bounds``: the env's observation space and per-step rewards (plausible.py); None:
        the generic magnitudes only."""
        self.topics = topics
        self.run_id = run_id
        self.latest_version = latest_version
        self.max_policy_lag = max_policy_lag
        self.max_abs_observation = max_abs_observation
        self.max_abs_reward = max_abs_reward
        self.bounds = bounds

    def origin(self, topic: str, batch: TransitionBatch) -> None:
        """Published by the actor it names, for this run start, with values in bounds."""
        if batch.actor_id != self.topics.actor_of(topic):
            raise Rejected("actor_mismatch", f"{batch.actor_id!r} published on {topic}")
        if self.run_id is not None and batch.run_id != self.run_id:
            raise Rejected("wrong_run", f"stepped for run {batch.run_id!r}")
        self._magnitudes(batch)
        self._plausible(batch)

    def version(self, batch: TransitionBatch) -> None:
        """Acted under a policy the learner published, at most ``max_policy_lag`` behind."""
        latest = self.latest_version()
        if batch.policy_version > latest:
            raise Rejected("unknown_policy", f"v{batch.policy_version} > latest v{latest}")
        lag = latest - batch.policy_version
        if self.max_policy_lag is not None and lag > self.max_policy_lag:
            raise Rejected("stale", f"v{batch.policy_version} is {lag} behind")

    def _magnitudes(self, batch: TransitionBatch) -> None:
        """Finite is not enough: one reward of 3e38 poisons every TD target it reaches."""
        if len(batch) == 0:
            return
        big = max(np.abs(batch.obs).max(), np.abs(batch.next_obs).max())
        if big > self.max_abs_observation:
            raise Rejected("out_of_bounds", f"|obs| {big:.3g} > {self.max_abs_observation:g}")
        big = np.abs(batch.reward).max()
        if big > self.max_abs_reward:
            raise Rejected("out_of_bounds", f"|reward| {big:.3g} > {self.max_abs_reward:g}")

    def _plausible(self, batch: TransitionBatch) -> None:
        """Inside the env's observation space, and rewards the env can give per step."""
        b = self.bounds
        if b is None or len(batch) == 0:
            return
        if b.obs_outside(batch.obs) or b.obs_outside(batch.next_obs):
            raise Rejected("out_of_bounds", "an observation outside the observation space")
        if b.obs_implausible(batch.obs) or b.obs_implausible(batch.next_obs):
            big = float(max(np.abs(batch.obs).max(), np.abs(batch.next_obs).max()))
            raise Rejected(
                "implausible_obs",
                f"an observation (|obs| up to {big:.3g}) outside the env's warm-up bounds",
            )
        if b.reward_outside(batch.reward):
            lo, hi = float(batch.reward.min()), float(batch.reward.max())
            raise Rejected(
                "implausible_reward",
                f"rewards in [{lo:.3g}, {hi:.3g}], the env gives [{b.reward_low:.3g}, "
                f"{b.reward_high:.3g}] per step ({b.reward_source})",
            )
