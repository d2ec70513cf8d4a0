"""The run config's limits on what ingest takes reach it: ``max_abs_observation`` and
``max_abs_reward`` through the learner's wiring (``learner.node.ingest_for``), and
``ingest.warmup_margin`` and the generic ``max_abs_reward`` through the reward bounds
(learner/ingest/plausible.py)."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.config import IngestConfig, RunConfig
from edge_rl.envs import env_spec
from edge_rl.learner.fleet.credit import Grants
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.ingest.plausible import Bounds, bounds_for_env
from edge_rl.learner.node import ingest_for as learner_ingest
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.types import TransitionBatch
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions

RID = "c0ffee0123456789"


def ingest_for(cfg: RunConfig) -> tuple[Ingest, Topics]:
    """The learner's ingest for ``cfg``, with a grant to board ``pi``'s session 7."""
    spec = env_spec(cfg.env_id)
    grants = Grants()
    grants.set("pi", 7, 10_000)
    ingest = learner_ingest(cfg, spec, ReplayBuffer(spec, 1_000), lambda: 0, RID, grants)
    return ingest, Topics(cfg.transport.root, cfg.run)


def bounds_of(cfg: RunConfig) -> Bounds:
    return bounds_for_env(cfg.env_id, cfg.ingest, cfg.seed, cfg.max_abs_reward)


def batch(env_id: str, obs: float = 0.0, reward: float = 1.0, n: int = 4) -> TransitionBatch:
    spec = env_spec(env_id)
    o = np.full((n, *spec.obs_shape), obs, np.float32)
    return TransitionBatch(
        "pi",
        7,
        0,
        0,
        o,
        np.zeros(n, np.int64),
        np.full(n, reward, np.float32),
        o,
        np.zeros(n, bool),
        np.zeros(n, bool),
        run_id=RID,
    )


@pytest.mark.parametrize(("limit", "taken"), [(1e6, True), (50.0, False)])
def test_max_abs_observation_bounds_what_the_space_leaves_unbounded(limit, taken):
    # CartPole's cart velocity (and the pole's) is unbounded in its space: 100 is in it.
    # Without a warm-up, only the generic magnitude bounds it.
    cfg = RunConfig(
        env_id="CartPole-v1", max_abs_observation=limit, ingest=IngestConfig(warmup_steps=0)
    )
    ingest, topics = ingest_for(cfg)
    b = batch("CartPole-v1")
    b.obs[:, 1] = 100.0
    assert ingest.handle(topics.transitions("pi"), encode_transitions(b)) is taken
    assert dict(ingest.stats().rejected) == ({} if taken else {"out_of_bounds": 1})


@pytest.mark.parametrize(("velocity", "taken"), [(30.0, True), (100.0, False), (9.9e5, False)])
def test_the_warm_up_bounds_what_the_space_leaves_unbounded(velocity, taken):
    # A random policy's cart velocities, widened by 10 widths: about +-40 (the space: inf).
    ingest, topics = ingest_for(RunConfig(env_id="CartPole-v1"))
    b = batch("CartPole-v1")
    b.obs[:, 1] = velocity
    assert ingest.handle(topics.transitions("pi"), encode_transitions(b)) is taken
    assert dict(ingest.stats().rejected) == ({} if taken else {"implausible_obs": 1})


@pytest.mark.parametrize(("limit", "taken"), [(1e6, True), (5.0, False)])
def test_max_abs_reward_bounds_an_env_of_unknown_rewards(limit, taken):
    # Acrobot without a warm-up: no reward range but the generic one, +-max_abs_reward.
    cfg = RunConfig(env_id="Acrobot-v1", max_abs_reward=limit, ingest=IngestConfig(warmup_steps=0))
    bounds = bounds_of(cfg)
    assert (bounds.reward_low, bounds.reward_high, bounds.reward_source) == (
        -limit,
        limit,
        "generic",
    )
    ingest, topics = ingest_for(cfg)
    b = batch(cfg.env_id, reward=6.0)
    assert ingest.handle(topics.transitions("pi"), encode_transitions(b)) is taken
    assert sum(ingest.stats().rejected.values()) == (0 if taken else 1)


@pytest.mark.parametrize(("margin", "low", "high"), [(10.0, -11.0, 9.0), (2.0, -3.0, 1.0)])
def test_the_warm_up_widens_the_rewards_it_saw_by_warmup_margin_widths(margin, low, high):
    # A random Acrobot policy sees only -1 (its 0 is the goal): a width of 1.
    cfg = RunConfig(env_id="Acrobot-v1", ingest=IngestConfig(warmup_margin=margin))
    bounds = bounds_of(cfg)
    assert (bounds.reward_low, bounds.reward_high, bounds.reward_source) == (
        pytest.approx(low),
        pytest.approx(high),
        "warm-up",
    )
