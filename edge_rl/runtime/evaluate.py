"""Evaluate a deployed ``.tflite`` policy greedily in LiteRT: the model actors run, not Keras."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

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
    """Greedy episodes: argmax of the Q-values (discrete) or the action itself (Box)."""
    if episodes < 1:
        raise ValueError("episodes must be >= 1")
    env = make_env(env_id)
    spec = EnvSpec.from_gym(env.observation_space, env.action_space)
    if manifest is not None and manifest.env_spec != spec:
        raise ValueError(f"the model was trained for {manifest.env_id}, not for {env_id}")
    policy = TFLitePolicy(model, num_threads=num_threads)
    expected_out = (spec.num_actions,) if spec.discrete else (int(np.prod(spec.action_shape)),)
    if policy.output_shape[1:] != expected_out:
        raise ValueError(f"model output {policy.output_shape} does not fit {env_id}'s actions")
    low, high = np.asarray(spec.action_low), np.asarray(spec.action_high)
    returns, lengths = [], []
    try:
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed + ep)
            total, steps, done = 0.0, 0, False
            while not done:
                out = policy(obs)
                if spec.discrete:
                    action = int(np.argmax(out))
                else:
                    action = np.clip(out, low, high).reshape(spec.action_shape)
                obs, reward, terminated, truncated, _ = env.step(action)
                total, steps, done = total + float(reward), steps + 1, terminated or truncated
            returns.append(total)
            lengths.append(steps)
    finally:
        env.close()
    return EvalResult(tuple(returns), tuple(lengths))
