"""SAC's pieces: the squashed Gaussian's log-density, the soft target, the temperature, the
update's order and bookkeeping, and the deterministic head through the int8 export."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import tensorflow as tf

from edge_rl.agents.algo import AlgoSetup, ParityGate
from edge_rl.agents.registry import make_algo
from edge_rl.agents.sac.config import SACConfig
from edge_rl.agents.sac.learning import (
    SACLearner,
    sac_target,
    squashed_gaussian,
    temperature_loss,
)
from edge_rl.compress.config import CompressionConfig
from edge_rl.export.parity import check_action_parity
from edge_rl.export.tflite import export_policy
from edge_rl.specs import EnvSpec
from edge_rl.types import ReplaySample

PENDULUM = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))
TWO_D = EnvSpec(obs_shape=(5,), action_shape=(2,), action_low=(-1.0, 0.0), action_high=(1.0, 3.0))
SMALL = SACConfig(
    actor_hidden=(16, 16), critic_hidden=(16, 16), batch_size=16, updates_per_call=1,
    jit_compile=False,
)  # fmt: skip


def batch(spec: EnvSpec, n: int, seed: int) -> ReplaySample:
    rng = np.random.default_rng(seed)
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    return ReplaySample(
        obs=rng.normal(size=(n, *spec.obs_shape)).astype(np.float32),
        action=rng.uniform(low, high, (n, *spec.action_shape)).astype(np.float32),
        reward=rng.normal(size=n).astype(np.float32),
        next_obs=rng.normal(size=(n, *spec.obs_shape)).astype(np.float32),
        terminated=(rng.random(n) < 0.2).astype(np.float32),
    )


# --- config ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("actor_hidden", ()),
        ("critic_hidden", (0, 4)),
        ("actor_lr", 0.0),
        ("alpha_lr", -1e-3),
        ("init_alpha", 0.0),
        ("batch_size", 0),
        ("gamma", 1.0),
        ("tau", 1.5),
        ("log_std_min", 3.0),
        ("exploration_sigma", -0.1),
        ("updates_per_call", 0),
        ("autotune", "yes"),
    ],
)
def test_config_rejects_bad_values(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=f"SACConfig: {field}"):
        SACConfig(**{field: value})


def test_the_entropy_target_is_minus_the_action_dimension_unless_set() -> None:
    assert SACConfig().entropy_target(6) == -6.0
    assert SACConfig(target_entropy=-0.5).entropy_target(6) == -0.5
    assert SACLearner(TWO_D, SMALL, seed=0).target_entropy == -2.0


# --- the squashed Gaussian ------------------------------------------------------------------


@pytest.mark.parametrize(("mu", "log_std"), [(0.0, 0.0), (0.7, -1.0), (-1.5, 0.5)])
def test_the_log_density_is_that_of_the_tanh_action(mu: float, log_std: float) -> None:
    """``exp(log pi(a))`` integrates to 1 over a in (-1, 1), and equals the change of
    variables ``N(atanh(a); mu, sigma) / (1 - a^2)`` point by point. Without the tanh
    correction it is the density of the pre-tanh u evaluated at a's points, which
    integrates (over a) to well under 1 (0.68 for mu 0, sigma 1)."""
    a = np.linspace(-1 + 1e-6, 1 - 1e-6, 200_001)
    u = np.arctanh(a)
    sigma = math.exp(log_std)
    eps = ((u - mu) / sigma).astype(np.float32)[:, None]  # [n, 1]
    n = len(a)
    action, log_prob = squashed_gaussian(
        tf.fill([n, 1], np.float32(mu)), tf.fill([n, 1], np.float32(log_std)), eps
    )
    np.testing.assert_allclose(action.numpy()[:, 0], a, atol=1e-5)
    density = np.exp(log_prob.numpy().astype(np.float64))
    assert np.trapezoid(density, a) == pytest.approx(1.0, abs=2e-3)
    gauss = np.exp(-0.5 * ((u - mu) / sigma) ** 2) / (sigma * math.sqrt(2 * math.pi))
    middle = np.abs(a) < 0.99  # float32 tanh loses 1 - a^2 near the ends
    np.testing.assert_allclose(density[middle], (gauss / (1 - a**2))[middle], rtol=1e-3)


def test_the_log_density_sums_over_action_dimensions_and_stays_finite_when_saturated() -> None:
    mu = tf.constant([[0.0, 30.0]])  # tanh(30) is 1.0 in float32
    log_std = tf.constant([[0.0, -3.0]])
    eps = tf.constant([[0.5, 0.0]])
    action, log_prob = squashed_gaussian(mu, log_std, eps)
    u = np.array([0.5, 30.0])
    expected = sum(
        -0.5 * e**2
        - ls
        - 0.5 * math.log(2 * math.pi)
        - math.log(4.0)
        + 2 * x
        + 2 * math.log1p(math.exp(-2 * x))
        for e, ls, x in zip((0.5, 0.0), (0.0, -3.0), u, strict=True)
    )  # log(1 - tanh(x)^2) = log 4 - 2x - 2 log(1 + e^-2x), in float64
    assert np.isfinite(log_prob.numpy()).all()
    assert log_prob.numpy()[0] == pytest.approx(expected, rel=1e-5)
    assert action.numpy()[0, 1] == 1.0


# --- the soft target ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q1", "q2", "log_prob", "alpha", "r", "done", "expected"),
    [
        (10.0, 12.0, -1.0, 0.5, 1.0, 0.0, 1.0 + 0.9 * (10.0 + 0.5)),  # min, minus alpha logp
        (12.0, 10.0, 2.0, 0.5, 1.0, 0.0, 1.0 + 0.9 * (10.0 - 1.0)),
        (10.0, 12.0, -1.0, 0.0, 1.0, 0.0, 1.0 + 0.9 * 10.0),  # alpha 0: TD3's clipped double-Q
        (10.0, 12.0, -1.0, 0.5, -3.0, 1.0, -3.0),  # terminated: no bootstrap
    ],
)
def test_sac_target_by_hand(q1, q2, log_prob, alpha, r, done, expected) -> None:
    seen = {}

    def policy(s, eps):
        seen["eps"] = eps.numpy()
        return tf.fill([1, 1], 0.25), tf.fill([1], np.float32(log_prob))

    y = sac_target(
        tf.constant([r]),
        tf.constant([done]),
        tf.zeros([1, 3]),
        tf.constant([[0.7]]),
        policy=policy,
        target_critics=(lambda s, a: tf.fill([1], np.float32(q1)), lambda s, a: q2 + 0 * a[:, 0]),
        alpha=tf.constant(alpha),
        gamma=0.9,
    )
    assert float(y.numpy()[0]) == pytest.approx(expected, rel=1e-6)
    assert seen["eps"][0, 0] == pytest.approx(0.7)  # the sample's noise is the caller's


# --- the temperature ------------------------------------------------------------------------


def test_temperature_loss_raises_alpha_when_entropy_is_below_target() -> None:
    """dJ/dlog(alpha) = -mean(log pi + target): negative (alpha goes up) when the entropy
    -log pi is below the target, positive when above; log pi gets no gradient."""
    log_alpha = tf.Variable(0.3)
    for log_prob, target, sign in (([2.0, 1.0], -1.0, -1.0), ([-3.0, -2.0], -1.0, 1.0)):
        lp = tf.Variable(log_prob)
        with tf.GradientTape() as tape:
            loss = temperature_loss(log_alpha, lp, target)
        g_alpha, g_lp = tape.gradient(loss, [log_alpha, lp])
        assert float(g_alpha) == pytest.approx(-np.mean(np.add(log_prob, target)))
        assert np.sign(float(g_alpha)) == sign
        assert g_lp is None
        assert float(loss) == pytest.approx(-0.3 * np.mean(np.add(log_prob, target)))


@pytest.mark.parametrize(("target", "moves"), [(5.0, "up"), (-5.0, "down")])
def test_the_learner_tunes_alpha_towards_the_target_entropy(target: float, moves: str) -> None:
    """A 1-D policy's entropy starts near 0.5 nats: a target of +5 is above it (alpha
    rises), -5 below (alpha falls). Without the temperature step alpha would stay 1."""
    learner = SACLearner(PENDULUM, dataclasses.replace(SMALL, target_entropy=target), seed=0)
    data = batch(PENDULUM, 16, seed=1)
    for _ in range(20):
        metrics = learner.update(data)
    assert (learner.alpha > 1.0) == (moves == "up")
    assert abs(math.log(learner.alpha)) == pytest.approx(20 * SMALL.alpha_lr, rel=0.2)
    assert metrics["alpha"] == pytest.approx(learner.alpha)


def test_without_autotune_alpha_stays_put() -> None:
    cfg = dataclasses.replace(SMALL, autotune=False, init_alpha=0.2)
    learner = SACLearner(PENDULUM, cfg, seed=0)
    for _ in range(5):
        learner.update(batch(PENDULUM, 16, seed=2))
    assert learner.alpha == pytest.approx(0.2)


def test_the_entropy_bonus_keeps_the_policy_wide() -> None:
    """The actor loss's alpha * log pi term: with a large fixed alpha the policy stays near
    the widest a tanh-squashed 1-D policy can be (uniform on [-1, 1]: log 2 = 0.69 nats);
    with alpha ~0 the critics alone pull it narrow (measured: 0.62 -> -2.3 nats)."""
    entropies = {}
    for alpha in (1e-6, 20.0):
        cfg = dataclasses.replace(SMALL, autotune=False, init_alpha=alpha, actor_lr=1e-3)
        learner = SACLearner(PENDULUM, cfg, seed=0)
        data = batch(PENDULUM, 16, seed=3)
        first = learner.update(data)["entropy"]
        for _ in range(200):
            last = learner.update(data)["entropy"]
        entropies[alpha] = (first, last)
    assert entropies[20.0][1] > 0.55, entropies
    assert entropies[1e-6][1] < entropies[20.0][1] - 1.0, entropies


# --- the update -----------------------------------------------------------------------------


def test_critics_move_targets_follow_by_tau_and_the_actor_steps_every_step() -> None:
    learner = SACLearner(PENDULUM, dataclasses.replace(SMALL, tau=0.1), seed=0)
    q1, q1_target = learner.critics[0], learner.critic_targets[0]
    before, target_before = q1.get_weights(), q1_target.get_weights()
    actor_before = learner.actor_network.get_weights()
    log_std_before = learner.log_std_head.get_weights()
    metrics = learner.update(batch(PENDULUM, 16, seed=4))
    after, target_after = q1.get_weights(), q1_target.get_weights()
    for w0, w1, t0, t1 in zip(before, after, target_before, target_after, strict=True):
        assert not np.array_equal(w0, w1)
        np.testing.assert_allclose(t1, 0.1 * w1 + 0.9 * t0, rtol=1e-5, atol=1e-7)
    for w0, w1 in zip(actor_before[:-2], learner.actor_network.get_weights()[:-2], strict=True):
        assert not np.array_equal(w0, w1)  # hidden layers and the tanh head
    for w0, w1 in zip(actor_before[-2:], learner.actor_network.get_weights()[-2:], strict=True):
        np.testing.assert_array_equal(w0, w1)  # the frozen rescale
    assert not np.array_equal(log_std_before[0], learner.log_std_head.get_weights()[0])
    assert np.isfinite(metrics["actor_loss"]) and learner.updates == 1 and learner.skipped == 0


def test_critic_loss_falls_on_a_fixed_batch() -> None:
    learner = SACLearner(PENDULUM, dataclasses.replace(SMALL, critic_lr=1e-2, tau=0.0), seed=0)
    data = batch(PENDULUM, 16, seed=5)
    losses = [learner.update(data)["loss"] for _ in range(150)]
    assert np.mean(losses[-10:]) < 0.3 * np.mean(losses[:10])


def test_the_sample_at_zero_noise_is_the_deployed_action() -> None:
    """The deterministic head (what is exported) is the policy's mode: tanh(mu) rescaled,
    the reparameterised sample at eps = 0, inside the bounds of each dimension."""
    learner = SACLearner(TWO_D, SMALL, seed=0)
    obs = np.random.default_rng(6).normal(size=(64, 5)).astype(np.float32) * 10
    action, _ = learner.sample(obs, np.zeros((64, 2), np.float32))
    np.testing.assert_allclose(learner.act(obs), action, rtol=1e-5, atol=1e-6)
    assert (action >= [-1.0, 0.0]).all() and (action <= [1.0, 3.0]).all()


def test_critic_values_take_env_actions() -> None:
    learner = SACLearner(TWO_D, SMALL, seed=0)
    obs = np.zeros((3, 5), np.float32)
    action = np.array([[-1.0, 0.0], [0.0, 1.5], [1.0, 3.0]], np.float32)
    q1, q2 = learner.critic_values(obs, action)
    direct = learner.critics[0](np.concatenate([obs, [[-1, -1], [0, 0], [1, 1]]], 1))
    np.testing.assert_allclose(q1, direct.numpy()[:, 0], rtol=1e-5)  # tanh space, [-1, 1]
    assert q1.shape == q2.shape == (3,)


def test_rejects_discrete_specs() -> None:
    with pytest.raises(ValueError, match="SAC needs a continuous"):
        SACLearner(EnvSpec(obs_shape=(4,), num_actions=2), SMALL)


# --- the deployed head ----------------------------------------------------------------------


def test_the_int8_export_of_the_trained_head_passes_the_parity_gate() -> None:
    """The mean head exports through the TD3 path (a Dense stack with a frozen rescale) and
    runs in LiteRT within the default gate (ExportConfig: 0.75 max, 0.06 mean)."""
    learner = SACLearner(PENDULUM, SMALL, seed=0)
    for seed in range(30):
        learner.update(batch(PENDULUM, 16, seed=seed))
    obs = np.random.default_rng(7).normal(size=(600, 3)).astype(np.float32)
    exported = export_policy(learner.actor_network, obs[:300], "int8")
    report = check_action_parity(exported, learner.actor_network, obs[300:], np.array([2.0]))
    assert report.passes(0.75, 0.06), report


def test_make_algo_builds_sac_with_gst_on_the_deployed_head() -> None:
    """Compression applies to the mean actor (what is deployed), as TD3's; updates keep
    its constrained kernels in place."""
    gate = ParityGate(0.9, 0.75, 0.06, 1.0)
    setup = AlgoSetup(0, 1_000, 50, gate, CompressionConfig(method="gst", prune_every=5))
    cfg = dataclasses.replace(SMALL, actor_hidden=(16, 16, 16))
    algo = make_algo("sac", cfg, PENDULUM, setup)
    assert algo.policy_network is algo.learner.actor_network
    assert algo.exploration(0) == {"sigma": cfg.exploration_sigma}
    for seed in range(12):
        algo.update(batch(PENDULUM, 16, seed=seed))
    assert algo.compression() is not None and algo.skipped == 0
    assert algo.stats().compression is not None


def test_a_restored_checkpoint_takes_the_same_next_update() -> None:
    """``Algo.state()`` holds every variable SAC adds (the log-std head, log alpha and its
    Adam, the generator): a fresh learner loaded from it takes the same next step."""
    gate = ParityGate(0.9, 0.75, 0.06, 1.0)
    setup = AlgoSetup(0, 1_000, 50, gate, CompressionConfig())
    saved = make_algo("sac", SMALL, PENDULUM, setup)
    for seed in range(3):
        saved.update(batch(PENDULUM, 16, seed=seed))
    names = set(saved.state().arrays)
    assert any(n.startswith("learner/_log_alpha/") for n in names)
    assert any(n.startswith("learner/_alpha_opt/") for n in names)
    assert any(n.startswith("learner/_log_std/") for n in names)
    restored = make_algo("sac", SMALL, PENDULUM, dataclasses.replace(setup, seed=9))
    restored.load_state(saved.state())
    assert restored.updates == 3 and restored.learner.alpha == saved.learner.alpha
    data = batch(PENDULUM, 16, seed=11)
    assert restored.update(data) == saved.update(data)


def test_the_log_std_clip_bounds_the_policy_spread() -> None:
    """``log_std_max`` caps sigma: at eps = 0 the sample is the mean either way, and the
    density there rises by exactly the log-std the cap took off (-log sigma per dimension)."""
    obs = np.random.default_rng(8).normal(size=(32, 3)).astype(np.float32)
    zeros = np.zeros((32, 1), np.float32)
    free = SACLearner(PENDULUM, SMALL, seed=0)
    capped = SACLearner(PENDULUM, dataclasses.replace(SMALL, log_std_max=-3.0), seed=0)
    a_free, lp_free = free.sample(obs, zeros)
    a_capped, lp_capped = capped.sample(obs, zeros)
    np.testing.assert_allclose(a_capped, a_free, rtol=1e-6)  # same mean head
    h = obs
    for i in range(len(SMALL.actor_hidden)):
        h = free.actor_network.get_layer(f"hidden_{i}")(h)
    log_std = np.clip(free.log_std_head(h).numpy()[:, 0], -20.0, 2.0)
    assert (log_std > -3.0).all()  # the cap binds on every row
    np.testing.assert_allclose(lp_capped - lp_free, log_std + 3.0, rtol=1e-4, atol=1e-4)
