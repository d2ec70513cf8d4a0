"""Several gradient steps per compiled call: the same updates as one step per call, exact
counts for the replay ratio, and the examples running that way."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from edge_rl.agents.algo import learner_arrays
from edge_rl.agents.dqn.config import DQNConfig
from edge_rl.agents.dqn.learning import DQNLearner
from edge_rl.agents.sac.config import SACConfig
from edge_rl.agents.sac.learning import SACLearner
from edge_rl.agents.td3.config import TD3Config
from edge_rl.agents.td3.learning import TD3Learner
from edge_rl.config import RunConfig, load_run_config
from edge_rl.learner.node import algo_for_run
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.learner.trainer import Trainer
from edge_rl.specs import EnvSpec
from edge_rl.telemetry.breakdown import learner_clocks
from edge_rl.types import ReplaySample
from tests.harness.paths import REPO

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
PENDULUM = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))
# target_update_interval 3 with K = 4: the hard copy falls inside a call (after steps 3, 6).
# One step per call, plain TF: the unit the K-step call is compared against.
DQN = DQNConfig(
    hidden=(16, 16), batch_size=8, target_update_interval=3, updates_per_call=1, jit_compile=False
)
# target_noise 0: the smoothing noise is drawn per step in either case, but this keeps the
# comparison about the update math alone.
TD3 = TD3Config(
    actor_hidden=(16, 16),
    critic_hidden=(16, 16),
    batch_size=8,
    target_noise=0.0,
    updates_per_call=1,
    jit_compile=False,
)
SAC = SACConfig(
    actor_hidden=(16, 16),
    critic_hidden=(16, 16),
    batch_size=8,
    updates_per_call=1,
    jit_compile=False,
)
ALGOS = {"dqn": (DQNLearner, CARTPOLE, DQN), "td3": (TD3Learner, PENDULUM, TD3)}
ALGOS["sac"] = (SACLearner, PENDULUM, SAC)


def batch(spec: EnvSpec, n: int, seed: int) -> ReplaySample:
    rng = np.random.default_rng(seed)
    if spec.discrete:
        action = rng.integers(0, spec.num_actions, n)
    else:
        action = rng.uniform(-2, 2, (n, *spec.action_shape)).astype(np.float32)
    return ReplaySample(
        obs=rng.normal(size=(n, *spec.obs_shape)).astype(np.float32),
        action=action,
        reward=rng.normal(size=n).astype(np.float32),
        next_obs=rng.normal(size=(n, *spec.obs_shape)).astype(np.float32),
        terminated=(rng.random(n) < 0.2).astype(np.float32),
    )


def minibatch(b: ReplaySample, i: int, size: int) -> ReplaySample:
    return ReplaySample(*(x[i * size : (i + 1) * size] for x in b))


def learners(algo: str, k: int, jit_compile: bool):
    """One learner stepping once per call, one taking up to k steps: same seed, same init."""
    cls, spec, cfg = ALGOS[algo]
    one = cls(spec, dataclasses.replace(cfg, jit_compile=jit_compile), seed=3)
    many = cls(spec, dataclasses.replace(cfg, updates_per_call=k, jit_compile=jit_compile), seed=3)
    return one, many, spec, cfg.batch_size


def assert_same_state(one, many, exact: bool) -> None:
    """Every variable: weights, targets, Adam slots and step counters, generator state."""
    a, b = learner_arrays(one), learner_arrays(many)
    assert set(a) == set(b)
    for name in a:
        if exact:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        else:
            np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("algo", ["dqn", "td3", "sac"])
@pytest.mark.parametrize("jit_compile", [False, True])
def test_k_steps_in_one_call_equal_k_calls_of_one_step(algo: str, jit_compile: bool) -> None:
    """Bit-equal without XLA: the K-step call runs the one-step body K times in a
    tf.while_loop, the same kernels on the same minibatches in the same order. With XLA the
    loop and the one-step call are separate compilations; XLA fuses each as it sees fit and
    may reorder a float reduction (Adam's, the global norm's), so that case is held to
    float32 rounding, 1e-5 relative, over every variable of the learner."""
    k = 4
    one, many, spec, b = learners(algo, k, jit_compile)
    data = batch(spec, k * b, seed=4)
    singles = [one.update(minibatch(data, i, b)) for i in range(k)]
    metrics = many.update(data)
    assert one.updates == many.updates == k
    assert_same_state(one, many, exact=not jit_compile)
    assert metrics["loss"] == pytest.approx(np.mean([m["loss"] for m in singles]), rel=1e-5)
    assert metrics["mean_q"] == pytest.approx(np.mean([m["mean_q"] for m in singles]), rel=1e-5)


@pytest.mark.parametrize("algo", ["dqn", "td3", "sac"])
def test_fewer_steps_than_k_train_on_the_first_minibatches(algo: str) -> None:
    """A call owed 3 of its 4 steps takes 3, on minibatches 0-2, and counts 3."""
    k, steps = 4, 3
    one, many, spec, b = learners(algo, k, jit_compile=False)
    data = batch(spec, k * b, seed=5)
    for i in range(steps):
        one.update(minibatch(data, i, b))
    many.update(data, steps)
    assert one.updates == many.updates == steps
    assert_same_state(one, many, exact=True)


@pytest.mark.parametrize("algo", ["dqn", "td3", "sac"])
def test_steps_outside_one_to_k_are_refused(algo: str) -> None:
    _, many, spec, b = learners(algo, 4, jit_compile=False)
    for steps in (0, 5):
        with pytest.raises(ValueError, match=r"steps must be in \[1, updates_per_call=4\]"):
            many.update(batch(spec, 4 * b, seed=0), steps)
    with pytest.raises(ValueError, match="updates_per_call=4"):
        many.update(batch(spec, 4 * b - 1, seed=0))
    assert many.updates == 0


@pytest.mark.parametrize("algo", ["dqn", "td3", "sac"])
def test_xla_compiles_one_program_for_every_step_count(algo: str) -> None:
    """The step count is an input of the compiled update, not a constant in it: a call
    owed fewer than K steps (the learner caught up with the fleet, the end of a run) runs
    the program compile() made. A count folded in as a constant (``for i in
    tf.range(steps)``) cost a new XLA compile per count, ~6 CPU-s for the TD3 examples'."""
    _, many, spec, b = learners(algo, 4, jit_compile=True)
    data = batch(spec, 4 * b, seed=8)
    ir = many._train.experimental_get_compiler_ir
    hlo = [ir(*data, np.int32(steps))(stage="hlo") for steps in (1, 3, 4)]
    assert hlo[0] == hlo[1] == hlo[2]


@pytest.mark.parametrize("algo", ["dqn", "td3", "sac"])
def test_compile_with_xla_takes_no_step_and_changes_nothing(algo: str) -> None:
    """compile() XLA-compiles the update by a call of zero steps: every variable (weights,
    Adam slots, step counters, the generator) is as it was, and the updates after it are
    bit-equal to those of a learner that compiled in its first update."""
    _, compiled, spec, b = learners(algo, 4, jit_compile=True)
    _, lazy, _, _ = learners(algo, 4, jit_compile=True)
    before = learner_arrays(compiled)
    compiled.compile()
    assert compiled.updates == 0
    after = learner_arrays(compiled)
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    for seed, steps in ((9, 4), (10, 3)):
        data = batch(spec, 4 * b, seed=seed)
        compiled.update(data, steps)
        lazy.update(data, steps)
    assert compiled.updates == lazy.updates == 7
    assert_same_state(lazy, compiled, exact=True)


def test_dqn_target_is_copied_on_exact_multiples_inside_a_call() -> None:
    """K = 4, interval 3: after 4 steps the target holds the weights of step 3, not 4."""
    _, many, spec, b = learners("dqn", 4, jit_compile=False)
    _, probe, _, _ = learners("dqn", 4, jit_compile=False)
    data = batch(spec, 4 * b, seed=6)
    probe.update(data, 3)
    at_step_3 = probe.q_network.get_weights()
    many.update(data)
    for w3, target, online in zip(
        at_step_3, many.target_network.get_weights(), many.q_network.get_weights(), strict=True
    ):
        np.testing.assert_array_equal(target, w3)
        assert not np.array_equal(online, w3)


@pytest.mark.parametrize("algo", ["dqn", "td3", "sac"])
def test_the_trainer_pays_exactly_the_updates_owed(algo: str) -> None:
    """K = 16 and 0.5 updates per transition: the count lands on the target each time,
    never past it, however many steps are owed."""
    spec = CARTPOLE if algo == "dqn" else PENDULUM
    cfg = RunConfig(
        env_id="CartPole-v1" if algo == "dqn" else "Pendulum-v1",
        algo=algo,
        learning_starts=10,
        replay_ratio=0.5,
        dqn=dataclasses.replace(DQN, updates_per_call=16),
        td3=dataclasses.replace(TD3, updates_per_call=16),
        sac=dataclasses.replace(SAC, updates_per_call=16),
    )
    algo_ = algo_for_run(cfg, spec)
    replay = ReplayBuffer(spec, 1_000, seed=0)
    replay.add(*batch(spec, 200, seed=7))
    received = [0]
    trainer = Trainer(algo_, replay, cfg.updates_paid_by, lambda: received[0], learner_clocks())
    for env_steps in (11, 47, 52, 110, 111):  # owed: 0, 18, 21, 50, 50
        received[0] = env_steps
        trainer.pay_in_full()
        assert algo_.updates == cfg.updates_paid_by(env_steps)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_the_examples_take_16_xla_compiled_steps_per_call(path: Path) -> None:
    cfg = load_run_config(path)
    algo_cfg = getattr(cfg, cfg.algo)  # the section of the example's algorithm
    assert algo_cfg.updates_per_call == 16 and algo_cfg.jit_compile is True, path.name


def test_the_fast_path_is_the_default() -> None:
    """A config that says nothing about execution (the CLI without a file, a test's
    RunConfig) takes 16 XLA-compiled steps per call, as the examples do."""
    for algo_cfg in (
        DQNConfig(),
        TD3Config(),
        SACConfig(),
        RunConfig("CartPole-v1").dqn,
        RunConfig("Pendulum-v1", algo="td3").td3,
        RunConfig("Pendulum-v1", algo="sac").sac,
    ):
        assert algo_cfg.updates_per_call == 16 and algo_cfg.jit_compile is True
