"""An update whose loss is not finite is skipped and counted, and leaves the weights alone.

Ingest refuses non-finite and out-of-bounds transitions; this is the learner's second line:
a batch is sampled here straight into the update step with a NaN reward in it.
"""

from __future__ import annotations

import numpy as np

from edge_rl.agents.dqn.config import DQNConfig
from edge_rl.agents.dqn.learning import DQNLearner
from edge_rl.agents.td3.config import TD3Config
from edge_rl.agents.td3.learning import TD3Learner
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
PENDULUM = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))


def sample(n: int, obs_dim: int, action, reward: float) -> ReplaySample:
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(n, obs_dim)).astype(np.float32)
    return ReplaySample(
        obs, action, np.full(n, reward, np.float32), obs.copy(), np.zeros(n, np.float32)
    )


def weights(nets) -> list[np.ndarray]:
    return [w.copy() for net in nets for w in net.get_weights()]


def test_dqn_skips_a_nan_update_and_applies_a_finite_one():
    agent = DQNLearner(
        CARTPOLE,
        DQNConfig(hidden=(16, 16), batch_size=8, updates_per_call=1, jit_compile=False),
        seed=0,
    )
    before = weights([agent.q_network])
    agent.update(sample(8, 4, np.zeros(8, np.int64), reward=float("nan")))
    assert agent.skipped == 1
    assert all(unchanged(before, weights([agent.q_network])))
    agent.update(sample(8, 4, np.zeros(8, np.int64), reward=1.0))
    assert agent.skipped == 1
    assert not all(unchanged(before, weights([agent.q_network])))


def test_td3_skips_a_nan_critic_step_and_keeps_every_weight_finite():
    # A NaN reward poisons the critics' loss; the actor's (through the untouched critic Q1)
    # stays finite, so its step may go on.
    cfg = TD3Config(
        actor_hidden=(16, 16),
        critic_hidden=(16, 16),
        batch_size=8,
        policy_delay=1,
        updates_per_call=1,
        jit_compile=False,
    )
    agent = TD3Learner(PENDULUM, cfg, seed=0)
    n = 8 * cfg.updates_per_call
    before = weights(agent.critics)
    agent.update(sample(n, 3, np.zeros((n, 1), np.float32), float("nan")))
    assert agent.skipped == cfg.updates_per_call  # every critic step of the call
    assert all(unchanged(before, weights(agent.critics)))
    nets = [agent.actor_network, *agent.critics, agent.actor_target, *agent.critic_targets]
    assert all(np.isfinite(w).all() for w in weights(nets))
    agent.update(sample(n, 3, np.zeros((n, 1), np.float32), 1.0))
    assert agent.skipped == cfg.updates_per_call and not all(
        unchanged(before, weights(agent.critics))
    )


def unchanged(before: list[np.ndarray], after: list[np.ndarray]) -> list[bool]:
    return [np.array_equal(a, b) for a, b in zip(before, after, strict=True)]
