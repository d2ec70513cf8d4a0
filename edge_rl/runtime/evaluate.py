"""Evaluate a deployed ``.tflite`` policy greedily in LiteRT: the model actors run, not Keras."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edge_rl.envs import make_env
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.specs import EnvSpec
from edge_rl.types import PolicyManifest
from edge_rl.wire.policy import manifest_from_dict


@dataclass(frozen=True)
class EvalResult:
    returns: tuple[float, ...]
    lengths: tuple[int, ...]
    # False: stopped once the mean return could no longer reach ``stop_below`` (``Evaluator.
    # run``); returns and lengths are then the episodes' so far, not a score.
    complete: bool = True

    @property
    def mean(self) -> float:
        return float(np.mean(self.returns))

    @property
    def std(self) -> float:
        return float(np.std(self.returns))


def load_manifest_beside(model_path: Path) -> PolicyManifest | None:
    """``manifest.json`` next to a ``policy.tflite`` (as in a run directory), if any."""
    path = model_path.with_name("manifest.json")
    return manifest_from_dict(json.loads(path.read_text())) if path.exists() else None


def evaluate(
    model: bytes,
    env_id: str,
    episodes: int,
    *,
    manifest: PolicyManifest | None = None,
    seed: int = 10_000,
    num_threads: int = 1,
) -> EvalResult:
    """Greedy episodes: argmax of the Q-values (discrete) or the action itself (Box).
    Episode ``i`` starts from ``reset(seed=seed + i)``."""
    evaluator = Evaluator(env_id)
    try:
        return evaluator.run(model, episodes, manifest=manifest, seed=seed, num_threads=num_threads)
    finally:
        evaluator.close()


_kept: dict[str, Evaluator] = {}  # evaluate_kept's, by env id


def evaluate_kept(
    model: bytes,
    env_id: str,
    episodes: int,
    manifest: PolicyManifest | None,
    seed: int,
    stop_below: float | None = None,
) -> EvalResult:
    """``evaluate`` on envs this process keeps for ``env_id`` (an ``Evaluator`` made on first
    use, kept until the process exits). The learner's model selection has its export worker
    process run it (``ExportWorker.call``): scoring is then no thread of the learner's, so
    it neither waits for the learner's GIL nor holds it while the updates need it."""
    evaluator = _kept.get(env_id)
    if evaluator is None:
        evaluator = _kept.setdefault(env_id, Evaluator(env_id))
    return evaluator.run(model, episodes, manifest=manifest, seed=seed, stop_below=stop_below)


class Evaluator:
    """``evaluate`` for many models on one env id, its envs made once (making a gymnasium
    env costs ~10 ms, as much as 10 short episodes): the learner's model selection scores
    every published policy with one. Episode ``i`` runs on env ``i``, reset with
    ``seed + i`` (a reset with a seed starts an env afresh, so the result is a fresh env's),
    and every episode steps at once: one batched invoke per step for all of them
    (``TFLitePolicy.batch_at_once``, whose rows equal the one-row calls). A finished
    episode's row is computed and ignored. One caller at a time (a lock).

    CartPole (an env id whose gymnasium spec has ``CartPoleVectorEnv`` as its vector entry
    point) steps all episodes in one call of that vector env: ~60 % of the time of stepping
    the envs one by one for 10 episodes, ~20 % for 50 (docs/benchmarks.md). Each episode
    starts from the state of env ``i`` reset with ``seed + i``, copied into the vector env,
    whose physics, termination and time limit are the single env's, so each return is
    still a fresh env's (a test compares them episode by episode).

    ``stop_below`` (CartPole's vector path only, where a step's reward is at most 1 and the
    time limit is known): the run stops as soon as the mean return cannot reach it even if
    every live episode went on to the time limit, and returns ``complete=False``. Model
    selection uses it to drop a candidate that provably cannot enter its top list."""

    def __init__(self, env_id: str) -> None:
        self.env_id = env_id
        self._envs: list[Any] = []
        self._vector: dict[int, Any] = {}  # episodes -> CartPole's vector env of that many
        self._lock = threading.Lock()

    def run(
        self,
        model: bytes,
        episodes: int,
        *,
        manifest: PolicyManifest | None = None,
        seed: int = 10_000,
        num_threads: int = 1,
        stop_below: float | None = None,
    ) -> EvalResult:
        if episodes < 1:
            raise ValueError("episodes must be >= 1")
        with self._lock:
            envs = self._make(episodes)
            spec = EnvSpec.from_gym(envs[0].observation_space, envs[0].action_space)
            if manifest is not None and manifest.env_spec != spec:
                raise ValueError(
                    f"the model was trained for {manifest.env_id}, not for {self.env_id}"
                )
            policy = TFLitePolicy(model, num_threads=num_threads)
            out = (spec.num_actions,) if spec.discrete else (int(np.prod(spec.action_shape)),)
            if policy.output_shape[1:] != out:
                raise ValueError(
                    f"model output {policy.output_shape} does not fit {self.env_id}'s actions"
                )
            envs = envs[:episodes]
            vector = self._vector_env(episodes, envs[0], spec)
            if vector is not None:
                return _vector_lockstep(vector, envs, policy, seed, stop_below)
            return _lockstep(envs, policy, spec, seed)

    def close(self) -> None:
        with self._lock:
            for env in [*self._envs, *self._vector.values()]:
                env.close()
            self._envs = []
            self._vector = {}

    def _vector_env(self, n: int, env: Any, spec: EnvSpec) -> Any | None:
        """CartPole's vector env of ``n`` episodes (made once), or None for any other env."""
        if n in self._vector:
            return self._vector[n]
        import gymnasium as gym
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv, CartPoleVectorEnv

        gym_spec = getattr(env, "spec", None)
        vector_entry = getattr(gym_spec, "vector_entry_point", None)
        if (
            not isinstance(env.unwrapped, CartPoleEnv)
            or vector_entry != f"{CartPoleVectorEnv.__module__}:{CartPoleVectorEnv.__name__}"
            or gym_spec.kwargs
            or not spec.discrete
        ):
            return None
        vector = gym.make_vec(self.env_id, num_envs=n, vectorization_mode="vector_entry_point")
        if vector.unwrapped.max_episode_steps != gym_spec.max_episode_steps:
            vector.close()
            return None
        self._vector[n] = vector
        return vector

    def _make(self, n: int) -> list[Any]:
        while len(self._envs) < n:
            self._envs.append(make_env(self.env_id))
        return self._envs


def _lockstep(envs: list[Any], policy: TFLitePolicy, spec: EnvSpec, seed: int) -> EvalResult:
    n, row = len(envs), policy.input_shape[1:]
    obs = np.zeros((n, *row), np.float32)
    for i, env in enumerate(envs):
        obs[i] = np.asarray(env.reset(seed=seed + i)[0], np.float32).reshape(row)
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    returns, lengths = [0.0] * n, [0] * n
    live = list(range(n))
    while live:
        q = policy.batch_at_once(obs)  # [n, out]
        still = []
        for i in live:
            if spec.discrete:
                action = int(np.argmax(q[i]))
            else:
                action = np.clip(q[i], low, high).reshape(spec.action_shape)
            o, reward, terminated, truncated, _ = envs[i].step(action)
            returns[i], lengths[i] = returns[i] + float(reward), lengths[i] + 1
            if not (terminated or truncated):
                obs[i] = np.asarray(o, np.float32).reshape(row)
                still.append(i)
        live = still
    return EvalResult(tuple(returns), tuple(lengths))


def _vector_lockstep(
    vector: Any,
    envs: list[Any],
    policy: TFLitePolicy,
    seed: int,
    stop_below: float | None = None,
) -> EvalResult:
    """``_lockstep`` for CartPole: env ``i`` reset with ``seed + i`` gives episode ``i``'s
    start, then the vector env steps every episode at once from those states. A finished
    episode's row goes on (the vector env restarts it) and is ignored. With ``stop_below``:
    stopped when even a reward of 1 on every step left to the time limit would leave the
    mean below it."""
    n = len(envs)
    obs = np.stack(
        [np.asarray(env.reset(seed=seed + i)[0], np.float32) for i, env in enumerate(envs)]
    )
    vector.reset()  # step counts and done flags back to zero; the states are replaced next
    vector.unwrapped.state = np.stack(
        [np.asarray(env.unwrapped.state, np.float64) for env in envs], axis=1
    )
    returns, lengths = np.zeros(n), np.zeros(n, np.int64)
    live = np.ones(n, bool)
    limit = vector.unwrapped.max_episode_steps
    complete = True
    while live.any():
        actions = policy.batch_at_once(obs).argmax(axis=1)  # [n]
        obs, reward, terminated, truncated, _ = vector.step(actions)
        returns += np.where(live, reward, 0.0)
        lengths += live
        ended = live & (terminated | truncated)
        live &= ~ended
        if stop_below is not None and ended.any():  # the bound falls only when one ends
            best_case = returns + np.where(live, limit - lengths, 0)  # each episode's most
            if float(np.mean(best_case)) < stop_below:  # EvalResult.mean's own arithmetic
                complete = False
                break
    return EvalResult(tuple(float(r) for r in returns), tuple(int(k) for k in lengths), complete)
