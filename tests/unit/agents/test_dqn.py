"""DQN: config validation, epsilon schedule, Bellman target, hand-set Q-values, learning."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edge_rl.agents.dqn.config import DQNConfig, epsilon_at
from edge_rl.agents.dqn.learning import DQNLearner, dqn_target
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample

# --- config -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("hidden", ()),
        ("hidden", (64, 0)),
        ("learning_rate", 0.0),
        ("batch_size", 0),
        ("gamma", 1.0),
        ("gamma", -0.1),
        ("target_update_interval", 0),
        ("huber_delta", 0.0),
        ("max_grad_norm", -1.0),
        ("epsilon_start", 1.5),
        ("epsilon_end", -0.01),
        ("exploration_fraction", 0.0),
        ("exploration_fraction", 1.5),
    ],
)
def test_config_rejects_bad_values(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        DQNConfig(**{field: value})


def test_config_defaults_are_valid_and_frozen() -> None:
    config = DQNConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.gamma = 0.5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("env_steps", "expected"),
    [
        (0, 1.0),  # start
        (4_000, 0.52),  # half-way through the decay: (1.0 + 0.04) / 2
        (8_000, 0.04),  # end of the decay: 0.16 * 50k
        (50_000, 0.04),  # flat afterwards
        (10**9, 0.04),  # and never below epsilon_end
    ],
)
def test_epsilon_schedule(env_steps: int, expected: float) -> None:
    assert epsilon_at(DQNConfig(), env_steps, total_env_steps=50_000) == pytest.approx(expected)


def test_epsilon_needs_a_budget() -> None:
    with pytest.raises(ValueError, match="total_env_steps"):
        epsilon_at(DQNConfig(), 0, total_env_steps=0)


# --- Bellman target -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("double", "expected"),
    [
        # Row 0: online picks a=1 -> target 20; row 1: online picks a=0 -> target 30 where
        # the plain max would take 40; row 2 is terminal, so it is its reward alone.
        (True, [1 + 0.5 * 20, 0 + 0.5 * 30, -1.0]),
        (False, [1 + 0.5 * 20, 0 + 0.5 * 40, -1.0]),
    ],
)
def test_dqn_target_by_hand(double: bool, expected: list[float]) -> None:
    reward = np.array([1.0, 0.0, -1.0], np.float32)
    terminated = np.array([0.0, 0.0, 1.0], np.float32)
    next_q_online = np.array([[1.0, 3.0], [2.0, 0.0], [5.0, 4.0]], np.float32)
    next_q_target = np.array([[10.0, 20.0], [30.0, 40.0], [7.0, 1.0]], np.float32)
    y = dqn_target(reward, terminated, next_q_target, 0.5, next_q_online if double else None)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)


# --- hand-set weights (Dopamine style) ----------------------------------------------------

# One step per call, plain TF: these tests reason step by step.
ONE_STEP = {"updates_per_call": 1, "jit_compile": False}
SPEC3 = EnvSpec(obs_shape=(3,), num_actions=3)


def _hand_set(learner_net, w1: np.ndarray, w2: np.ndarray, b2: np.ndarray) -> None:
    learner_net.set_weights([w1, np.zeros(w1.shape[1], np.float32), w2, b2])


@pytest.mark.parametrize(
    ("obs", "q", "action"),
    [
        # Q(s) = relu(s) @ diag(1, 2, 3) + [0.5, 0, 0]
        ([1.0, 0.0, 0.0], [1.5, 0.0, 0.0], 0),
        ([0.0, 1.0, 0.0], [0.5, 2.0, 0.0], 1),
        ([-5.0, -5.0, 1.0], [0.5, 0.0, 3.0], 2),  # the ReLU zeroes the negative features
        ([0.0, 0.0, 0.0], [0.5, 0.0, 0.0], 0),
    ],
)
def test_hand_set_q_values_and_greedy_action(obs: list, q: list, action: int) -> None:
    learner = DQNLearner(SPEC3, DQNConfig(hidden=(3,), **ONE_STEP), seed=0)
    eye = np.eye(3, dtype=np.float32)
    _hand_set(
        learner.q_network,
        eye,
        np.diag([1.0, 2.0, 3.0]).astype(np.float32),
        np.array([0.5, 0.0, 0.0], np.float32),
    )
    got = learner.q_values(np.array([obs], np.float32))
    np.testing.assert_allclose(got, [q], atol=1e-6)
    assert int(np.argmax(got[0])) == action


@pytest.mark.parametrize(("double", "expected_td"), [(True, 3.0), (False, 8.0)])
def test_td_error_uses_the_hand_set_target_net(double: bool, expected_td: float) -> None:
    # online Q(s) = relu(s); target Q(s) = 10 * relu(s)[::-1].
    # s' = (1, 2): online picks a=1, target rates it 10; the plain max is 20.
    # s = (3, 0), a = 0: Q = 3.  y = 1 + 0.5 * {10, 20} -> |y - Q| = {3, 8}.
    spec = EnvSpec(obs_shape=(2,), num_actions=2)
    learner = DQNLearner(spec, DQNConfig(hidden=(2,), gamma=0.5, double_dqn=double, **ONE_STEP))
    eye, zero2 = np.eye(2, dtype=np.float32), np.zeros(2, np.float32)
    _hand_set(learner.q_network, eye, eye, zero2)
    _hand_set(learner.target_network, eye, 10 * eye[::-1], zero2)
    batch = ReplaySample(
        obs=np.array([[3.0, 0.0]], np.float32),
        action=np.array([0]),
        reward=np.array([1.0], np.float32),
        next_obs=np.array([[1.0, 2.0]], np.float32),
        terminated=np.array([0.0], np.float32),
    )
    np.testing.assert_allclose(learner.td_errors(batch), [expected_td], rtol=1e-6)


# --- learning -----------------------------------------------------------------------------

SPEC4 = EnvSpec(obs_shape=(4,), num_actions=2)


def _random_batch(n: int, seed: int) -> ReplaySample:
    rng = np.random.default_rng(seed)
    return ReplaySample(
        obs=rng.normal(size=(n, 4)).astype(np.float32),
        action=rng.integers(0, 2, size=n),
        reward=rng.normal(size=n).astype(np.float32),
        next_obs=rng.normal(size=(n, 4)).astype(np.float32),
        terminated=(rng.random(n) < 0.2).astype(np.float32),
    )


@pytest.mark.parametrize("double", [True, False])
def test_updates_reduce_td_error_on_a_fixed_batch(double: bool) -> None:
    # The target net never syncs, so this is plain regression onto fixed labels.
    config = DQNConfig(hidden=(64, 64), target_update_interval=10**9, double_dqn=double, **ONE_STEP)
    learner = DQNLearner(SPEC4, config, seed=1)
    batch = _random_batch(64, seed=2)
    before = float(np.mean(learner.td_errors(batch)))
    for _ in range(200):
        metrics = learner.update(batch)
    after = float(np.mean(learner.td_errors(batch)))
    assert after < 0.5 * before, (before, after)
    assert set(metrics) == {"loss", "mean_q"} and all(
        isinstance(v, float) for v in metrics.values()
    )
    assert learner.updates == 200


def test_target_is_hard_copied_every_interval_and_compiled_once() -> None:
    learner = DQNLearner(
        SPEC4, DQNConfig(hidden=(8,), target_update_interval=3, **ONE_STEP), seed=0
    )

    def same() -> bool:
        online, target = learner.q_network.get_weights(), learner.target_network.get_weights()
        return all(np.array_equal(a, b) for a, b in zip(online, target, strict=True))

    assert same()  # starts as a copy
    for i, size in enumerate([64, 32, 17]):  # different batch sizes must not retrace
        learner.update(_random_batch(size, seed=i))
        assert same() == (learner.updates % 3 == 0)
    assert learner._train.experimental_get_tracing_count() == 1


def test_rejects_continuous_actions() -> None:
    spec = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-1.0,), action_high=(1.0,))
    with pytest.raises(ValueError, match="discrete"):
        DQNLearner(spec, DQNConfig())


def test_compile_traces_without_stepping():
    learner = DQNLearner(SPEC4, DQNConfig(hidden=(8,), **ONE_STEP), seed=0)
    before = [w.copy() for w in learner.q_network.get_weights()]
    learner.compile()
    assert learner.updates == 0
    for a, b in zip(before, learner.q_network.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)
    assert learner._train.experimental_get_tracing_count() == 1


# --- what the boards compute: centred Q-values ----------------------------------------------


def wide_q_narrow_gaps():
    """A hand-set 4-4-2 Q-network: Q(s, a) = 60 relu(s0) -/+ 0.1 (relu(s1) - relu(-s1)), so
    Q spans 0..60 over the states while the action gap is 0.2 s1: CartPole's shape."""
    import keras

    from edge_rl.agents.dqn.networks import make_q_network

    model = make_q_network(4, 2, (4,), seed=0)
    hidden = np.zeros((4, 4), np.float32)
    hidden[0, 0], hidden[1, 1], hidden[1, 2] = 1.0, 1.0, -1.0
    head = np.array([[60, 60], [-0.1, 0.1], [0.1, -0.1], [0, 0]], np.float32)
    model.set_weights([hidden, np.zeros(4, np.float32), head, np.zeros(2, np.float32)])
    assert isinstance(model, keras.Model)
    return model


def test_centred_q_keeps_the_greedy_action_and_cancels_over_actions():
    from edge_rl.agents.dqn.adapter import centred_q

    model = wide_q_narrow_gaps()
    obs = np.random.default_rng(0).uniform(-1, 1, size=(256, 4)).astype(np.float32)
    q = model(obs).numpy()
    model.set_weights(centred_q(model.get_weights()))
    centred = model(obs).numpy()
    np.testing.assert_allclose(centred, q - q.mean(axis=1, keepdims=True), atol=1e-5)
    assert (centred.argmax(axis=1) == q.argmax(axis=1)).all()


def test_int8_keeps_the_greedy_action_only_when_q_is_centred():
    """Exported int8, the wide Q-values round the 0.2 gaps away; centred, they do not."""
    from edge_rl.agents.dqn.adapter import centred_q
    from edge_rl.export.tflite import export_policy
    from tests.harness.lite import lite_outputs

    rng = np.random.default_rng(1)
    obs = np.column_stack([rng.uniform(0, 1, 600), rng.uniform(-1, 1, 600), np.zeros((600, 2))])
    obs = obs.astype(np.float32)
    cal, held_out = obs[:300], obs[300:]
    model = wide_q_narrow_gaps()
    truth = model(held_out).numpy().argmax(axis=1)

    def agreement() -> float:
        lite = lite_outputs(export_policy(model, cal, "int8").tflite, held_out)
        return float((lite.argmax(axis=1) == truth).mean())

    raw = agreement()
    model.set_weights(centred_q(model.get_weights()))
    centred = agreement()
    assert raw < 0.8 and centred > 0.97, (raw, centred)
