"""TD3: config validation, actor bounds, Bellman target by hand, delayed and Polyak updates."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from edge_rl.agents.td3.config import TD3Config
from edge_rl.agents.td3.learning import TD3Learner, td3_target
from edge_rl.agents.td3.networks import make_actor, make_critic
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample

# --- config -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("actor_hidden", ()),
        ("critic_hidden", (64, 0)),
        ("actor_lr", 0.0),
        ("critic_lr", -1e-3),
        ("batch_size", 0),
        ("gamma", 1.0),
        ("gamma", -0.1),
        ("tau", -0.01),
        ("tau", 1.5),
        ("policy_delay", 0),
        ("target_noise", -0.2),
        ("target_noise_clip", -0.5),
        ("exploration_sigma", -0.1),
        ("updates_per_call", 0),
        ("jit_compile", 1),
        ("bc_alpha", 0.0),
        ("bc_decay_updates", 0),
        ("bc_final_weight", 1.5),
    ],
)
def test_config_rejects_bad_values(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        TD3Config(**{field: value})


def test_config_defaults_are_valid_and_frozen() -> None:
    config = TD3Config()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.tau = 0.5  # type: ignore[misc]


# --- networks -----------------------------------------------------------------------------

BOUNDS = [  # (low, high)
    ([-1.0], [1.0]),
    ([-2.0, -2.0], [2.0, 2.0]),  # Pendulum-like
    ([-0.4, 0.0, -3.0], [1.0, 0.1, 7.5]),  # asymmetric: a non-zero mid-point
]


@pytest.mark.parametrize(("low", "high"), BOUNDS)
def test_actor_stays_in_bounds_for_large_inputs(low: list, high: list) -> None:
    actor = make_actor(5, low, high, (32, 32), seed=0)
    obs = np.random.default_rng(0).normal(scale=1e3, size=(2000, 5)).astype(np.float32)
    a = actor(obs).numpy()  # [2000, act_dim]
    eps = 1e-6 * (1.0 + np.abs(np.array(high)))  # float32 rounding of half * 1 + mid
    assert a.shape == (2000, len(low))
    assert np.all(a >= np.array(low) - eps) and np.all(a <= np.array(high) + eps)
    # Huge inputs saturate the tanh: the batch reaches both ends of every dimension.
    np.testing.assert_allclose(a.min(axis=0), low, atol=1e-3)
    np.testing.assert_allclose(a.max(axis=0), high, atol=1e-3)


@pytest.mark.parametrize(("low", "high"), BOUNDS)
@pytest.mark.parametrize(("bias", "end"), [(50.0, "high"), (-50.0, "low"), (0.0, "mid")])
def test_hand_set_tanh_head_maps_to_bounds(low: list, high: list, bias: float, end: str) -> None:
    actor = make_actor(3, low, high, (4,), seed=0)
    head = actor.get_layer("tanh_action")
    head.set_weights([np.zeros_like(head.kernel.numpy()), np.full(len(low), bias, np.float32)])
    expected = {"high": high, "low": low, "mid": (np.array(low) + np.array(high)) / 2}[end]
    got = actor(np.ones((2, 3), np.float32)).numpy()
    np.testing.assert_allclose(got, [expected, expected], atol=1e-6)


def test_actor_is_a_dense_stack_with_a_frozen_rescale() -> None:
    actor = make_actor(4, [-0.4, 0.0], [1.0, 0.1], (8, 8), seed=0)
    layers = [layer for layer in actor.layers if not isinstance(layer, keras.layers.InputLayer)]
    assert all(isinstance(layer, keras.layers.Dense) for layer in layers)  # exporter's rule
    rescale = actor.get_layer("rescale")
    assert not rescale.trainable
    assert all(v is not w for v in actor.trainable_variables for w in rescale.weights)
    assert len(actor.trainable_variables) == 6  # hidden_0, hidden_1, tanh_action
    np.testing.assert_allclose(rescale.kernel.numpy(), np.diag([0.7, 0.05]), rtol=1e-6)
    np.testing.assert_allclose(rescale.bias.numpy(), [0.3, 0.05], rtol=1e-6)


@pytest.mark.parametrize(("low", "high"), [([0.0], [0.0]), ([1.0], [-1.0]), ([], [])])
def test_actor_rejects_bad_bounds(low: list, high: list) -> None:
    with pytest.raises(ValueError, match="low < high"):
        make_actor(3, low, high, (4,), seed=0)


def test_critic_takes_one_concatenated_input() -> None:
    critic = make_critic(5, 2, (8,), seed=0)
    assert critic.input_shape == (None, 7)
    assert critic(np.zeros((3, 7), np.float32)).shape == (3, 1)


# --- Bellman target -----------------------------------------------------------------------

# One action dim in [-2, 2] (half-range 2); pi_targ(s') = s'[0]; Q1 = a, Q2 = 2a, so the
# min is Q1 for a > 0 and Q2 for a < 0. gamma = 0.5, noise clip 0.5 (tanh units).
TARGET_CASES = [
    # (pi(s'), eps, r, done, expected y)
    (0.5, 0.1, 1.0, 0.0, 1.0 + 0.5 * 0.7),  # a' = 0.5 + 0.1 * 2; min(0.7, 1.4) = Q1
    (-1.0, -0.1, 0.0, 0.0, 0.5 * -2.4),  # a' = -1.2; min(-1.2, -2.4) = Q2
    (0.0, 3.0, 0.0, 0.0, 0.5 * 1.0),  # noise clipped to 0.5 -> a' = 0 + 0.5 * 2 = 1
    (0.0, -3.0, 0.0, 0.0, 0.5 * -2.0),  # clipped to -0.5 -> a' = -1, min(-1, -2) = -2
    (1.8, 0.4, 1.0, 0.0, 1.0 + 0.5 * 2.0),  # a' = 2.6 clipped to high = 2
    (-1.9, -0.5, 0.0, 0.0, 0.5 * -4.0),  # a' = -2.9 clipped to low = -2; Q2 = -4
    (1.0, 0.0, -1.0, 1.0, -1.0),  # terminal: the reward alone
]


@pytest.mark.parametrize(("pi_next", "eps", "r", "done", "expected"), TARGET_CASES)
def test_td3_target_by_hand(pi_next: float, eps: float, r: float, done: float, expected: float):
    y = td3_target(
        tf.constant([r]),
        tf.constant([done]),
        tf.constant([[pi_next, 99.0]]),  # s' = (pi_next, junk)
        tf.constant([[eps]]),
        target_actor=lambda s: s[:, :1],
        target_critics=(lambda s, a: a[:, 0], lambda s, a: 2.0 * a[:, 0]),
        action_low=[-2.0],
        action_high=[2.0],
        noise_clip=0.5,
        gamma=0.5,
    )
    np.testing.assert_allclose(y.numpy(), [expected], rtol=1e-6)


# --- learning -----------------------------------------------------------------------------

SPEC = EnvSpec(obs_shape=(3,), action_shape=(2,), action_low=(-1.0, 0.0), action_high=(1.0, 2.0))
# One step per call, plain TF: the tests below reason step by step.
SMALL = TD3Config(
    actor_hidden=(16, 16),
    critic_hidden=(16, 16),
    batch_size=32,
    updates_per_call=1,
    jit_compile=False,
)


def _batch(n: int, seed: int) -> ReplaySample:
    rng = np.random.default_rng(seed)
    return ReplaySample(
        obs=rng.normal(size=(n, 3)).astype(np.float32),
        action=rng.uniform([-1, 0], [1, 2], size=(n, 2)).astype(np.float32),
        reward=rng.normal(size=n).astype(np.float32),
        next_obs=rng.normal(size=(n, 3)).astype(np.float32),
        terminated=(rng.random(n) < 0.2).astype(np.float32),
    )


def _weights(model: keras.Model) -> list[np.ndarray]:
    return [w.copy() for w in model.get_weights()]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


def test_critic_regression_loss_falls_on_a_fixed_batch() -> None:
    # tau = 0 freezes the targets, no smoothing noise, and the actor never steps: the
    # labels y are fixed and this is plain regression.
    config = dataclasses.replace(
        SMALL, critic_hidden=(64, 64), critic_lr=3e-3, tau=0.0, target_noise=0.0, policy_delay=10**9
    )
    learner = TD3Learner(SPEC, config, seed=1)
    batch = _batch(64, seed=2)
    first = learner.update(batch)
    for _ in range(300):
        last = learner.update(batch)
    assert last["loss"] < 0.2 * first["loss"], (first, last)
    assert set(last) == {"loss", "actor_loss", "mean_q", "bc_weight"}
    assert np.isnan(last["actor_loss"]) and last["bc_weight"] == 0.0
    assert learner.updates == 301


def test_actor_steps_every_policy_delay_and_polyak_moves_targets_by_tau() -> None:
    tau = 0.3
    learner = TD3Learner(SPEC, dataclasses.replace(SMALL, tau=tau, policy_delay=2), seed=0)
    nets = [learner.actor_network, *learner.critics]
    targets = [learner.actor_target, *learner.critic_targets]
    target0 = [_weights(t) for t in targets]
    assert all(_same(_weights(n), t) for n, t in zip(nets, target0, strict=True))
    actor0 = _weights(learner.actor_network)

    learner.update(_batch(32, seed=0))  # critic step 1: no actor step, no Polyak
    assert _same(_weights(learner.actor_network), actor0)
    assert all(_same(_weights(t), t0) for t, t0 in zip(targets, target0, strict=True))
    assert not _same(_weights(learner.critics[0]), target0[1])  # but the critics did learn

    metrics = learner.update(_batch(32, seed=1))  # step 2: actor step, then Polyak
    assert not _same(_weights(learner.actor_network), actor0)
    assert np.isfinite(metrics["actor_loss"])
    for net, target, before in zip(nets, targets, target0, strict=True):
        for w, w_targ, w0 in zip(net.get_weights(), target.get_weights(), before, strict=True):
            np.testing.assert_allclose(w_targ, tau * w + (1 - tau) * w0, rtol=1e-5, atol=1e-7)
    rescale = learner.actor_target.get_layer("rescale")  # frozen, never averaged
    np.testing.assert_array_equal(rescale.bias.numpy(), [0.0, 1.0])


@pytest.mark.parametrize(
    ("k", "delay", "calls", "actor_steps"),
    [
        (1, 2, 2, 1),
        (1, 1, 3, 3),
        (3, 2, 2, 3),  # steps 1-3 then 4-6: actor at 2, 4 and 6, across the calls
        (4, 3, 2, 2),  # 8 critic steps: actor at 3 and 6
    ],
)
def test_policy_delay_is_exact_across_calls(k: int, delay: int, calls: int, actor_steps: int):
    config = dataclasses.replace(SMALL, updates_per_call=k, policy_delay=delay)
    learner = TD3Learner(SPEC, config, seed=0)
    for i in range(calls):
        learner.update(_batch(8 * k, seed=i))
    assert learner.updates == k * calls
    assert int(learner._critic_opt.iterations.numpy()) == k * calls
    assert int(learner._actor_opt.iterations.numpy()) == actor_steps


@pytest.mark.parametrize("jit_compile", [False, True])
def test_k_steps_per_call_equal_k_calls_of_one(jit_compile: bool) -> None:
    k, b = 4, 16
    one = TD3Learner(SPEC, dataclasses.replace(SMALL, target_noise=0.0), seed=3)
    many = TD3Learner(
        SPEC,
        dataclasses.replace(SMALL, target_noise=0.0, updates_per_call=k, jit_compile=jit_compile),
        seed=3,
    )
    batch = _batch(k * b, seed=4)
    losses = [one.update(ReplaySample(*(x[i * b : (i + 1) * b] for x in batch))) for i in range(k)]
    metrics = many.update(batch)
    assert one.updates == many.updates == k
    nets = lambda lr: [lr.actor_network, *lr.critics, lr.actor_target, *lr.critic_targets]  # noqa: E731
    for a, c in zip(nets(one), nets(many), strict=True):
        for wa, wc in zip(a.get_weights(), c.get_weights(), strict=True):
            np.testing.assert_allclose(wa, wc, rtol=1e-4, atol=1e-5)
    assert metrics["loss"] == pytest.approx(np.mean([m["loss"] for m in losses]), rel=1e-4)
    assert metrics["actor_loss"] == pytest.approx(losses[-1]["actor_loss"], rel=1e-4)


def test_target_noise_is_seeded_and_used() -> None:
    def critic_after_one_step(target_noise: float) -> list[np.ndarray]:
        config = dataclasses.replace(SMALL, target_noise=target_noise)
        learner = TD3Learner(SPEC, config, seed=5)
        learner.update(_batch(32, seed=6))
        return _weights(learner.critics[0])

    noisy = critic_after_one_step(0.2)
    assert _same(noisy, critic_after_one_step(0.2))  # the generator is seeded
    assert not _same(noisy, critic_after_one_step(0.0))  # and its noise reaches the target


def test_act_and_critic_values_shapes_and_bounds() -> None:
    learner = TD3Learner(SPEC, SMALL, seed=0)
    obs = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    a = learner.act(obs)
    assert a.shape == (5, 2) and a.dtype == np.float32
    assert np.all(a >= [-1.0, 0.0]) and np.all(a <= [1.0, 2.0])
    np.testing.assert_allclose(a, learner.actor_network(obs).numpy(), rtol=1e-6)
    q1, q2 = learner.critic_values(obs, a)
    assert q1.shape == q2.shape == (5,) and not np.allclose(q1, q2)  # distinct twins


def test_compile_traces_once_without_stepping() -> None:
    learner = TD3Learner(SPEC, SMALL, seed=0)
    before = _weights(learner.actor_network) + _weights(learner.critics[0])
    learner.compile()
    assert learner.updates == 0 and int(learner._critic_steps.numpy()) == 0
    assert _same(before, _weights(learner.actor_network) + _weights(learner.critics[0]))
    for i, n in enumerate([64, 32, 17]):  # batch sizes must not retrace
        learner.update(_batch(n, seed=i))
    assert learner._train.experimental_get_tracing_count() == 1


def test_rejects_discrete_specs_and_unsplittable_batches() -> None:
    with pytest.raises(ValueError, match="continuous"):
        TD3Learner(EnvSpec(obs_shape=(4,), num_actions=2), SMALL)
    learner = TD3Learner(SPEC, dataclasses.replace(SMALL, updates_per_call=4), seed=0)
    with pytest.raises(ValueError, match="updates_per_call=4"):
        learner.update(_batch(30, seed=0))


# --- pretraining on demonstrations (TD3+BC) ------------------------------------------------


def _demonstrations(n: int, action: list[float], seed: int) -> ReplaySample:
    """Rows that all take ``action``, with a reward that does not depend on it: only the
    BC term says which action to take."""
    rng = np.random.default_rng(seed)
    batch = _batch(n, seed)
    return batch._replace(
        action=np.tile(np.asarray(action, np.float32), (n, 1)),
        reward=np.full(n, -1.0, np.float32),
        terminated=np.zeros(n, np.float32),
        obs=rng.normal(size=(n, 3)).astype(np.float32),
    )


def test_pretraining_clones_the_demonstrated_action() -> None:
    shown = [0.6, 1.7]  # inside (-1, 0)..(1, 2), away from the mid-point (0, 1)
    demos = _demonstrations(64, shown, seed=4)
    config = dataclasses.replace(SMALL, actor_lr=3e-3, policy_delay=1)
    pretrained, plain = TD3Learner(SPEC, config, seed=0), TD3Learner(SPEC, config, seed=0)
    for _ in range(300):
        metrics = pretrained.pretrain(demos)
        plain.update(demos)
    assert metrics["bc_weight"] == 1.0
    error = np.abs(pretrained.act(demos.obs) - shown).mean()
    assert error < 0.1, error
    # Without the BC term the flat reward leaves the actor where Q1's slope takes it.
    assert np.abs(plain.act(demos.obs) - shown).mean() > 4 * error, error


@pytest.mark.parametrize("final", [0.0, 0.25])
def test_after_pretraining_the_bc_term_fades_to_its_final_weight(final: float) -> None:
    decay = 8
    config = dataclasses.replace(
        SMALL, policy_delay=1, bc_decay_updates=decay, bc_final_weight=final
    )
    learner = TD3Learner(SPEC, config, seed=0)
    demos = _demonstrations(32, [0.0, 1.0], seed=5)
    assert learner.update(demos)["bc_weight"] == 0.0  # never pretrained: plain TD3
    learner.pretrain(demos)
    learner.pretrain(demos)  # the fade starts after the last pretrain call
    weights = [learner.update(_batch(32, seed=i))["bc_weight"] for i in range(decay + 2)]
    fade = [1 - k / decay for k in range(1, decay + 1)] + [0, 0]
    np.testing.assert_allclose(weights, [final + (1 - final) * f for f in fade], rtol=1e-6)
    assert learner.updates == 1 + 2 + decay + 2


def test_the_fade_is_part_of_the_learners_saved_state() -> None:
    from edge_rl.agents.algo import learner_arrays, load_learner_arrays

    config = dataclasses.replace(SMALL, policy_delay=1, bc_decay_updates=4, bc_final_weight=0.0)
    saved, restored = TD3Learner(SPEC, config, seed=0), TD3Learner(SPEC, config, seed=0)
    saved.pretrain(_demonstrations(32, [0.0, 1.0], seed=6))
    saved.update(_batch(32, seed=1))
    load_learner_arrays(restored, learner_arrays(saved))
    assert (
        restored.update(_batch(32, seed=2))["bc_weight"]
        == saved.update(_batch(32, seed=2))["bc_weight"]
        == 0.5
    )
