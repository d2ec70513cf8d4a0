"""Learning regression: the real update steps must reach returns a broken learner cannot.

Each test drives a learner in-process on a real gymnasium env with fixed seeds: it
collects with the agent's own exploration (epsilon-greedy on the online Q-network, or the
actor plus Gaussian noise), pays gradient updates at the replay ratio exactly as the
learner node does (``replay_ratio * (env_steps - learning_starts)``), then exports the
policy to int8 TFLite, checks it with the learner's own parity gate, and evaluates the
deployed int8 model greedily in LiteRT (``edge_rl.runtime.evaluate``): the path a fleet runs.

The thresholds, and the measurements behind them, are in each test's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import pytest

from edge_rl.agents.dqn.config import DQNConfig, epsilon_at, learning_rate_at
from edge_rl.agents.sac.config import SACConfig
from edge_rl.agents.td3.config import TD3Config
from edge_rl.export.parity import check_action_parity, check_q_parity
from edge_rl.export.tflite import export_policy
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.runtime.evaluate import evaluate
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample
from tests.harness.exploration import epsilon_greedy, gaussian

slow = pytest.mark.slow
DQN_MIN_AGREEMENT = 0.8  # examples/cartpole_dqn.yaml's export.min_greedy_agreement
TD3_MAX_ACTION_ERROR, TD3_MEAN_ACTION_ERROR = 0.75, 0.06  # ExportConfig's defaults


@dataclass(frozen=True)
class Budget:
    env_steps: int
    learning_starts: int
    replay_ratio: float
    checkpoints: int = 6  # int8 exports scored, evenly spaced over the last `tail` of it
    tail: float = 0.5
    select_episodes: int = 5
    eval_episodes: int = 10
    # A checkpoint whose export the gate refuses is exported again this many env steps
    # later, until one passes or the next checkpoint comes (0: not retried), as the learner
    # node publishes its next export that passes (every `export.every_updates`).
    retry_every: int = 0


@dataclass(frozen=True)
class Outcome:
    eval_return: float  # mean greedy return of the selected int8 model in LiteRT
    # Each checkpoint's selection score: of its first export that passed the gate (None:
    # none passed before the next checkpoint or the end).
    scores: tuple[float | None, ...]
    parity: dict[str, float]  # of the selected model
    updates: int


def train_and_evaluate(
    env_id: str, algo: str, config: DQNConfig | TD3Config | SACConfig, budget: Budget, seed: int
) -> Outcome:
    """Collect, update at the replay ratio, export int8 at checkpoints, select, evaluate.

    As the learner node does: each checkpoint's int8 export must pass the parity gate (one
    refused is exported again ``retry_every`` env steps later, as the node publishes its
    next export that passes), is scored greedily in LiteRT (seeds apart from the final
    evaluation's), and the best one is evaluated at the end (``select_every`` and
    ``_deploy_best`` in the node).
    """
    from edge_rl.agents.dqn.learning import DQNLearner
    from edge_rl.agents.sac.learning import SACLearner
    from edge_rl.agents.td3.learning import TD3Learner

    env = gym.make(env_id)
    spec = EnvSpec.from_gym(env.observation_space, env.action_space)
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    replay = ReplayBuffer(spec, budget.env_steps, seed=seed)
    learners = {"dqn": DQNLearner, "td3": TD3Learner, "sac": SACLearner}
    learner = learners[algo](spec, config, seed=seed)
    per_call = config.updates_per_call
    batch = config.batch_size * per_call
    learner.compile()
    start = int(budget.env_steps * (1.0 - budget.tail))
    at = {
        start + (i + 1) * (budget.env_steps - start) // budget.checkpoints
        for i in range(budget.checkpoints)
    }
    scores: list[float | None] = []
    best: tuple[float, bytes, dict[str, float]] | None = None
    pending, tried = False, 0  # a checkpoint whose export has not passed yet; when tried

    obs, _ = env.reset(seed=seed)
    for t in range(budget.env_steps):
        if t < budget.learning_starts:
            action = env.action_space.sample()
        elif algo == "dqn":
            epsilon = epsilon_at(config, t, budget.env_steps)
            action = epsilon_greedy(learner.q_values(obs[None])[0], epsilon, rng)
        else:  # TD3 and SAC: the boards' noise around the deterministic head
            action = gaussian(learner.act(obs[None])[0], config.exploration_sigma, spec, rng)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        replay.add(
            obs[None].astype(np.float32),
            np.asarray([action], spec.action_dtype),
            np.asarray([reward], np.float32),
            next_obs[None].astype(np.float32),
            np.asarray([terminated], np.float32),
        )
        obs = next_obs
        if terminated or truncated:
            obs, _ = env.reset()
        # Updates owed for the transitions received so far, paid in full calls of per_call
        # steps, as the node pays them while the fleet runs ahead of it.
        owed = int(budget.replay_ratio * max(0, t + 1 - budget.learning_starts))
        while learner.updates + per_call <= owed:
            learner.update(replay.sample(batch))
        if t + 1 in at:
            if pending:
                scores.append(None)  # the previous checkpoint: no export of it passed
            pending, tried = True, 0
        if pending and (tried == 0 or t + 1 - tried >= budget.retry_every > 0):
            tried = t + 1
            model, parity = _export_gated(algo, learner, spec, replay, seed + t)
            if model is not None:
                score = evaluate(model, env_id, budget.select_episodes, seed=seed + 20_000).mean
                if best is None or score >= best[0]:
                    best = (score, model, parity)
                scores.append(score)
                pending = False
    if pending:
        scores.append(None)
    env.close()
    assert best is not None, f"every checkpoint's export failed the parity gate: {scores}"
    final = evaluate(best[1], env_id, budget.eval_episodes, seed=seed + 10_000)
    return Outcome(final.mean, tuple(scores), best[2], learner.updates)


def _export_gated(
    algo: str, learner, spec: EnvSpec, replay: ReplayBuffer, seed: int
) -> tuple[bytes | None, dict[str, float]]:
    """int8 export calibrated on replay, checked by the learner's default gates in LiteRT."""
    obs = replay.observations(2_000, np.random.default_rng(seed))
    if algo == "dqn":
        network = learner.q_network
        exported = export_policy(network, obs[:1_000], "int8")
        r = check_q_parity(exported, network, obs[1_000:])
        parity = {"greedy_agreement": r.greedy_agreement}
        ok = r.greedy_agreement >= DQN_MIN_AGREEMENT
    else:
        network = learner.actor_network
        exported = export_policy(network, obs[:1_000], "int8")
        half_range = (np.asarray(spec.action_high) - np.asarray(spec.action_low)) / 2
        r = check_action_parity(exported, network, obs[1_000:], half_range)
        parity = {"max_action_error": r.max_error, "mean_action_error": r.mean_error}
        ok = r.passes(TD3_MAX_ACTION_ERROR, TD3_MEAN_ACTION_ERROR)
    return (exported.tflite if ok else None), parity


# --- DQN on CartPole-v1 ---------------------------------------------------------------------

# The example's hyper-parameters (examples/cartpole_dqn.yaml: DQNConfig's defaults, 16 steps
# per compiled call with XLA) on 30,000
# of its 50,000 env steps, plus a linear learning-rate decay to 0 over the 14,500 updates:
# at a constant rate the greedy return swings by 100+ between checkpoints a few hundred
# updates apart; decayed, the last checkpoints agree. 15,000 steps did not separate the
# real learner (125.8) from a sign-flipped one (39-146, the last digits of rounding decide).
# A refused checkpoint is exported again 500 env steps later: the example's export.every_updates
# (250) at its replay ratio.
DQN_BUDGET = Budget(
    env_steps=30_000,
    learning_starts=1_000,
    replay_ratio=0.5,
    checkpoints=5,
    tail=0.3,
    retry_every=500,
)
DQN = DQNConfig(
    lr_decay_updates=14_500, learning_rate_end=0.0, updates_per_call=16, jit_compile=True
)
DQN_SEEDS = (0, 1)
DQN_MIN_RETURN = 150.0


@slow
def test_dqn_learns_cartpole() -> None:
    """DQN on CartPole-v1, 30,000 env steps, seeds 0 and 1: the mean over both seeds of
    each one's int8 checkpoint mean is >= 150.

    The mean over the checkpoints (each one's first export that passes the 0.8 parity
    gate, 5 greedy episodes each in LiteRT), not the best one: CartPole is solved by lucky
    simple policies, and a sign-flipped Bellman target (y = r - gamma * Q') had one
    checkpoint at 500 (best-of-5 then 498.7 in the final evaluation). Two seeds, not one:
    one seed's figure moves with the library versions as much as with the code. Measured
    with TensorFlow 2.21, Keras 3.15, gymnasium 1.4, NumPy 2.4: the real code 189.4 on seed
    0 (101.8, 94.6, 94.4, 156.0, 500.0) and 342.0 on seed 1 (429.6, 177.2, 422.4, 500.0,
    180.8), 265.7 over both (seed 2: 230.6); the sign-flipped target 23.7 and 15.8, 19.8
    over both. With earlier versions, seed 0 alone: the real code 443.1 and 359.3, the
    sign-flipped target 45.2 and 162.5 (runs whose rounding differed); a uniformly random
    policy scores ~22. 150 is 7.6x the broken learner's mean today and 0.56x the real one's.

    Which exports the gate refuses turns on the last bits of rounding (the library versions
    and CPU kernels): one run refused four of five (None, None, None, None, 500.0), too few
    to average, where the learner node would have published its next export that passed.
    Retrying a refused checkpoint every 500 env steps, as the node exports, scores what the
    node deploys; a checkpoint none of whose exports passes stays out of the mean.
    """
    means = []
    for seed in DQN_SEEDS:
        out = train_and_evaluate("CartPole-v1", "dqn", DQN, DQN_BUDGET, seed=seed)
        print(seed, out)  # the measured return and checkpoints, in a passing run's log too
        scored = [s for s in out.scores if s is not None]
        assert len(scored) >= 2, out  # the gate passed enough checkpoints to average
        means.append(float(np.mean(scored)))
    assert float(np.mean(means)) >= DQN_MIN_RETURN, means


# --- TD3 on Pendulum-v1 ---------------------------------------------------------------------

# examples/pendulum_td3.yaml's hyper-parameters (TD3Config's defaults, 16 steps per compiled
# call with XLA) on 6,000 of its 20,000 env steps.
TD3_BUDGET = Budget(env_steps=6_000, learning_starts=1_000, replay_ratio=1.0)
TD3 = TD3Config(updates_per_call=16, jit_compile=True)
TD3_MIN_RETURN = -500.0


@slow
def test_td3_learns_pendulum() -> None:
    """TD3 on Pendulum-v1, 6,000 env steps, seed 0: deployed int8 return >= -500.

    Measured (best of 6 int8 checkpoints over the second half, then 10 greedy episodes in
    LiteRT): a random policy scores about -1,200 to -1,500; a sign-flipped Bellman target
    -1,621 (every checkpoint below -1,600); the real code -147.7, -171.2 and -162.4 on
    seeds 0, 1, 2 (its checkpoints pass -500 from 5,000-5,500 steps on). -500 keeps ~320
    below the worst real run and ~1,100 above the broken one.
    """
    out = train_and_evaluate("Pendulum-v1", "td3", TD3, TD3_BUDGET, seed=0)
    print(out)
    assert out.eval_return >= TD3_MIN_RETURN, out


# --- the example's learning-rate schedule ---------------------------------------------------


def test_dqn_learning_rate_decays_linearly_then_stays() -> None:
    """``lr_decay_updates``: Adam applies ``learning_rate_at(updates)``, the end value after."""
    from edge_rl.agents.dqn.learning import DQNLearner

    cfg = DQNConfig(
        hidden=(8,),
        batch_size=4,
        learning_rate=1e-3,
        learning_rate_end=1e-4,
        lr_decay_updates=10,
        updates_per_call=1,  # one step per update() call: the rate is read before each
    )
    assert learning_rate_at(cfg, 0) == pytest.approx(1e-3)
    assert learning_rate_at(cfg, 5) == pytest.approx(5.5e-4)
    assert learning_rate_at(cfg, 10) == learning_rate_at(cfg, 99) == pytest.approx(1e-4)
    assert learning_rate_at(DQNConfig(learning_rate=1e-3), 10**6) == 1e-3  # off by default
    learner = DQNLearner(EnvSpec(obs_shape=(2,), num_actions=2), cfg, seed=0)
    rng = np.random.default_rng(0)
    batch = ReplaySample(
        rng.normal(size=(4, 2)).astype(np.float32),
        np.array([0, 1, 0, 1]),
        np.ones(4, np.float32),
        rng.normal(size=(4, 2)).astype(np.float32),
        np.zeros(4, np.float32),
    )
    applied = []
    for _ in range(12):
        applied.append(float(learner._optimizer.learning_rate))  # the rate of the next step
        learner.update(batch)
    expected = [learning_rate_at(cfg, n) for n in range(12)]
    assert applied == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="learning_rate_end"):
        DQNConfig(learning_rate=1e-3, learning_rate_end=2e-3)


# --- SAC on Pendulum-v1 ---------------------------------------------------------------------

# examples/pendulum_sac.yaml's hyper-parameters (SACConfig's defaults: SB3's, 16 steps per
# compiled call with XLA), collected as its boards do (Gaussian noise around the deployed
# deterministic head), on SAC_BUDGET's env steps.
SAC_BUDGET = Budget(env_steps=6_000, learning_starts=1_000, replay_ratio=1.0)
SAC = SACConfig(updates_per_call=16, jit_compile=True)
SAC_MIN_RETURN = -500.0


@slow
def test_sac_learns_pendulum() -> None:
    """SAC on Pendulum-v1, 6,000 env steps, seed 0: deployed int8 return >= -500.

    Measured (best of 6 int8 checkpoints over the second half, then 10 greedy episodes in
    LiteRT): the real code -124.0 on seed 0 (checkpoints -250.8, -676.8, -316.4, -341.1,
    -124.8, -124.7; parity 0.23 max, 0.029 mean; 316 s at a load of ~7). A policy that
    has learned nothing scores like a random one, about -1,200 to -1,500 (TD3's test above).
    -500 keeps ~375 below the real run and ~700 above an unlearned policy, as TD3's does.
    The loss pieces each have a unit test that fails without them (tests/unit/agents/
    test_sac.py: the tanh log-density correction, the soft target, the temperature).
    """
    out = train_and_evaluate("Pendulum-v1", "sac", SAC, SAC_BUDGET, seed=0)
    print(out)
    assert out.eval_return >= SAC_MIN_RETURN, out
