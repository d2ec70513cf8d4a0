"""Greedy evaluation in LiteRT: every episode at once, on envs kept between models, gives
what each episode gives alone on a fresh env."""

from __future__ import annotations

import numpy as np
import pytest

from edge_rl.agents.dqn.networks import make_q_network
from edge_rl.envs import make_env
from edge_rl.export.tflite import export_policy
from edge_rl.runtime.evaluate import Evaluator, evaluate
from edge_rl.runtime.litert import TFLitePolicy


def alone(model: bytes, episodes: int, seed: int) -> tuple[float, ...]:
    """The reference: one episode after the other, a fresh env each, one-row calls."""
    returns = []
    for ep in range(episodes):
        env, policy = make_env("CartPole-v1"), TFLitePolicy(model)
        obs, _ = env.reset(seed=seed + ep)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(np.argmax(policy(obs))))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
        env.close()
    return tuple(returns)


@pytest.fixture(scope="module")
def models() -> list[bytes]:
    obs = np.random.default_rng(0).normal(size=(500, 4)).astype(np.float32) * 0.3
    nets = [make_q_network(4, 2, (32, 32), seed=s) for s in (1, 2, 3)]
    return [
        export_policy(net, obs, p).tflite
        for net, p in zip(nets, ("int8", "fp32", "int8"), strict=True)
    ]


def test_lockstep_episodes_on_kept_envs_equal_fresh_envs_one_at_a_time(models) -> None:
    evaluator = Evaluator("CartPole-v1")
    try:
        for i, model in enumerate(models):
            for episodes in (10, 3):  # fewer episodes than envs made: the first ones
                result = evaluator.run(model, episodes, seed=100 * i)
                assert result.returns == alone(model, episodes, 100 * i)
                assert result.lengths == tuple(int(r) for r in result.returns)  # CartPole: 1/step
        assert evaluate(models[0], "CartPole-v1", 4, seed=7).returns == alone(models[0], 4, 7)
    finally:
        evaluator.close()
    with pytest.raises(ValueError, match="episodes"):
        evaluate(models[0], "CartPole-v1", 0)


def controller(w: list[float]) -> bytes:
    """A Q-network whose greedy action is a linear controller's, ``w . obs > 0`` (push
    right), exported in fp32: long episodes, unlike an untrained net's."""
    net = make_q_network(4, 2, (8, 8), seed=0)
    first, second, head = np.zeros((4, 8)), np.zeros((8, 8)), np.zeros((8, 2))
    first[:, 0], first[:, 1] = w, np.negative(w)  # relu(w . obs), relu(-w . obs)
    second[0, 0] = second[1, 1] = 1.0
    head[0], head[1] = (-1.0, 1.0), (1.0, -1.0)  # Q = (-w . obs, w . obs)
    for layer, kernel in zip(net.layers, (first, second, head), strict=True):
        layer.kernel.assign(kernel.astype(np.float32))
        layer.bias.assign(np.zeros(layer.bias.shape, np.float32))
    obs = np.random.default_rng(0).normal(size=(500, 4)).astype(np.float32) * 0.3
    return export_policy(net, obs, "fp32").tflite


def test_cartpole_episodes_step_in_gymnasiums_vector_env(monkeypatch) -> None:
    """CartPole's episodes run in its vector env, and each return is a fresh env's: a
    controller that balances to the time limit, and one whose episodes end at many lengths."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    evaluator = Evaluator("CartPole-v1")
    try:
        lengths = set()
        for w, seed in (([0.1, 0.5, 3.0, 1.0], 20_000), ([0.0, -0.2, 1.0, 0.1], 30_000)):
            model = controller(w)
            expected = alone(model, 12, seed)
            with monkeypatch.context() as m:
                m.setattr(CartPoleEnv, "step", lambda *a: pytest.fail("a single env stepped"))
                result = evaluator.run(model, 12, seed=seed)
            assert result.returns == expected
            assert result.lengths == tuple(int(r) for r in expected)
            lengths |= set(result.lengths)
        assert 500 in lengths and len(lengths) > 4  # the time limit, and falls at many steps
    finally:
        evaluator.close()
