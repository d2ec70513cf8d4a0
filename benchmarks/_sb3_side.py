"""Stable-Baselines3's side of ``vs_sb3.py``: one SB3 training run, in the SB3 venv.

    SB3_VENV/bin/python benchmarks/_sb3_side.py SPEC.json RESULT.json

Runs with the SB3 venv's interpreter (torch, stable-baselines3, gymnasium; no edge-rl, no
TensorFlow). ``SPEC.json`` (written by ``vs_sb3.py``): ``env_id``, ``algo`` (``dqn``, ``td3`` or
``sac``), ``total_timesteps``, ``seed``, ``threads``, ``kwargs`` (the algorithm's
constructor arguments, JSON-able), ``noise_std`` (TD3: Gaussian action noise in SB3's
scaled [-1, 1] action space, as RL Zoo's ``noise_type: normal``), ``select`` (``null`` or
``{"every_steps", "episodes"}``: an ``EvalCallback`` that keeps the best policy, as RL Zoo's
``--eval-freq``/``--eval-episodes`` do), ``final_episodes`` and, for SAC, ``explore``
(``policy``: SB3's own, a sample of its stochastic policy; ``board``: as edge-rl's boards,
its deterministic action plus ``noise_std`` Gaussian noise). ``RESULT.json``: env steps,
gradient updates, the final return (greedy, deterministic) of the kept policy and of the last
one, and where the wall time went.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

T_START = time.monotonic()

import gymnasium as gym  # noqa: E402 - the import time is part of what is measured
import numpy as np  # noqa: E402
import stable_baselines3  # noqa: E402
import torch  # noqa: E402
from stable_baselines3 import DQN, SAC, TD3  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback  # noqa: E402
from stable_baselines3.common.noise import NormalActionNoise  # noqa: E402

FINAL_SEED_OFFSET = 10_000  # final evaluation episodes: seeds no training episode used


class RolloutClock(BaseCallback):
    """Seconds spent collecting rollouts (env steps, acting, replay adds, the eval callback)."""

    def __init__(self) -> None:
        super().__init__()
        self.rollout_s = 0.0
        self._t = 0.0

    def _on_rollout_start(self) -> None:
        self._t = time.monotonic()

    def _on_rollout_end(self) -> None:
        self.rollout_s += time.monotonic() - self._t

    def _on_step(self) -> bool:
        return True


class TimedEval(EvalCallback):
    """SB3's EvalCallback, with the seconds its evaluations took."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.eval_s = 0.0

    def _on_step(self) -> bool:
        t = time.monotonic()
        try:
            return super()._on_step()
        finally:
            self.eval_s += time.monotonic() - t


def greedy_return(model: object, env_id: str, episodes: int, seed: int) -> tuple[float, float]:
    """Mean and std of ``episodes`` deterministic episodes, one seed each."""
    env = gym.make(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + FINAL_SEED_OFFSET + i)
        total, done = 0.0, False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns)), float(np.std(returns))


class CountedDQN(DQN):
    """SB3's DQN, counting the gradient steps it trains."""

    updates_done = 0

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        self.updates_done += gradient_steps
        super().train(gradient_steps, batch_size)


class CountedTD3(TD3):
    """SB3's TD3, counting the gradient steps it trains."""

    updates_done = 0

    def train(self, gradient_steps: int, batch_size: int = 100) -> None:
        self.updates_done += gradient_steps
        super().train(gradient_steps, batch_size)


class CountedSAC(SAC):
    """SB3's SAC, counting the gradient steps it trains."""

    updates_done = 0

    def train(self, gradient_steps: int, batch_size: int = 64) -> None:
        self.updates_done += gradient_steps
        super().train(gradient_steps, batch_size)


class BoardSAC(CountedSAC):
    """SB3's SAC acting as edge-rl's boards do: the deterministic action (the mean's tanh)
    plus the action noise, instead of a sample of the policy; the update is SB3's own."""

    def _sample_action(self, learning_starts, action_noise=None, n_envs=1):  # noqa: ANN001
        if self.num_timesteps < learning_starts:
            return super()._sample_action(learning_starts, action_noise, n_envs)
        unscaled, _ = self.predict(self._last_obs, deterministic=True)
        scaled = self.policy.scale_action(unscaled)
        if action_noise is not None:
            scaled = np.clip(scaled + action_noise(), -1, 1)
        return self.policy.unscale_action(scaled), scaled


def build(spec: dict) -> DQN | TD3 | SAC:
    env = gym.make(spec["env_id"])
    kwargs = dict(spec["kwargs"])
    if spec["algo"] == "dqn":
        return CountedDQN("MlpPolicy", env, seed=spec["seed"], device="cpu", verbose=0, **kwargs)
    n = env.action_space.shape[0]
    noise = NormalActionNoise(np.zeros(n), spec["noise_std"] * np.ones(n))
    if spec["algo"] == "sac":
        board = spec.get("explore", "policy") == "board"
        cls, noise = (BoardSAC, noise) if board else (CountedSAC, None)
        return cls(
            "MlpPolicy", env, action_noise=noise, seed=spec["seed"], device="cpu", verbose=0,
            **kwargs,
        )  # fmt: skip
    return CountedTD3(
        "MlpPolicy", env, action_noise=noise, seed=spec["seed"], device="cpu", verbose=0, **kwargs
    )


def main(spec_path: str, result_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    torch.set_num_interop_threads(spec["threads"])
    t_import = time.monotonic() - T_START
    model = build(spec)
    clock = RolloutClock()
    callbacks: list[BaseCallback] = [clock]
    select = spec.get("select")
    best_dir = Path(result_path).parent / "sb3_best"
    evaluator = None
    if select:
        evaluator = TimedEval(
            gym.make(spec["env_id"]),
            eval_freq=select["every_steps"],
            n_eval_episodes=select["episodes"],
            best_model_save_path=str(best_dir),
            deterministic=True,
            verbose=0,
        )
        callbacks.append(evaluator)
    t0 = time.monotonic()
    model.learn(total_timesteps=spec["total_timesteps"], callback=callbacks)
    learn_s = time.monotonic() - t0
    t1 = time.monotonic()
    n = spec["final_episodes"]
    last_mean, last_std = greedy_return(model, spec["env_id"], n, spec["seed"])
    kept_mean, kept_std, kept = last_mean, last_std, "last"
    best_file = best_dir / "best_model.zip"
    if best_file.exists():
        best = type(model).load(str(best_file), device="cpu")
        best_mean, best_std = greedy_return(best, spec["env_id"], n, spec["seed"])
        if best_mean > last_mean:  # the zoo's best_model.zip, unless the last one scores more
            kept_mean, kept_std, kept = best_mean, best_std, "best"
    eval_s = evaluator.eval_s if evaluator else 0.0
    result = {
        "env_steps": int(model.num_timesteps),
        "updates": int(model.updates_done),
        "final_return": kept_mean,
        "final_return_std": kept_std,
        "kept": kept,
        "last_return": last_mean,
        "breakdown_s": {
            "import": t_import,
            "rollout": clock.rollout_s - eval_s,
            "select": eval_s,
            "train": learn_s - clock.rollout_s,
            "final_eval": time.monotonic() - t1,
        },
        "versions": {
            "torch": torch.__version__,
            "stable_baselines3": stable_baselines3.__version__,
            "gymnasium": gym.__version__,
            "torch_threads": torch.get_num_threads(),
        },
    }
    Path(result_path).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
