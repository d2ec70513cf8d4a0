"""Episodes for ``edge-rl record``: from a trained policy run greedily, or from a run's replay.

    episodes = from_policy(model, "Pendulum-v1", steps=5_000, seed=0)   # LiteRT, greedy
    episodes = from_replay(replay.rows("pi-01"))    # one board's rows (or all: the fleet)
    write_dataset("edge-rl/pendulum/expert-v0", episodes, "Pendulum-v1")   # datasets.py

From a policy: the model the boards run (int8 TFLite in LiteRT), its greedy action,
``steps`` env steps in all; the last episode is cut there (truncated).

From replay: a checkpoint keeps each row's board, flags (terminated, truncated,
intervention) and the order rows arrived in, which for one board is the order it stepped
(its batches are consecutive steps, docs/protocol.md §3.1). A board's rows are cut into
episodes at each end, and also where a row's ``obs`` is not the previous row's
``next_obs`` (a batch lost on the way, or rows overwritten by the ring): that episode is
closed as truncated. Rows of several boards are split board by board.
"""

from __future__ import annotations

import numpy as np

from edge_rl.envs import make_env
from edge_rl.learner.datasets import Episode
from edge_rl.learner.replay import Rows
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.specs import EnvSpec


def from_policy(model: bytes, env_id: str, steps: int, seed: int = 0) -> list[Episode]:
    """``steps`` env steps of ``model`` acting greedily in ``env_id``; episode ``i`` starts
    from ``reset(seed=seed + i)``."""
    if steps < 1:
        raise ValueError("record at least 1 step")
    env = make_env(env_id)
    try:
        spec = EnvSpec.from_gym(env.observation_space, env.action_space)
        policy = TFLitePolicy(model)
        low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high)
        episodes: list[Episode] = []
        ep = None
        for _ in range(steps):
            if ep is None:
                ep = Episode()
                obs, _ = env.reset(seed=seed + len(episodes))
                ep.observations.append(np.asarray(obs, np.float32))
                episodes.append(ep)
            out = policy(np.asarray(obs, np.float32))
            if spec.discrete:
                action = np.int64(np.argmax(out))
            else:
                action = np.clip(np.asarray(out, np.float32).reshape(-1), low, high)
                action = action.astype(np.float32).reshape(spec.action_shape)
            obs, reward, terminated, truncated, _ = env.step(action)
            ep.observations.append(np.asarray(obs, np.float32))
            ep.actions.append(action)
            ep.rewards.append(float(reward))
            ep.terminations.append(bool(terminated))
            ep.truncations.append(bool(truncated))
            ep.interventions.append(False)
            if terminated or truncated:
                ep = None
        if ep is not None and not (ep.terminations[-1] or ep.truncations[-1]):
            ep.truncations[-1] = True  # cut at the step budget
        return episodes
    finally:
        env.close()


def from_replay(rows: Rows) -> list[Episode]:
    """``rows`` (``ReplayBuffer.rows``, oldest first) as episodes, board by board."""
    episodes: list[Episode] = []
    for board in dict.fromkeys(rows.source):  # in order of first appearance
        idx = np.flatnonzero(np.asarray(rows.source) == board)  # [m]: this board's rows
        ep: Episode | None = None
        for k, i in enumerate(idx):
            if ep is not None and not np.array_equal(rows.obs[i], rows.next_obs[idx[k - 1]]):
                ep.truncations[-1] = True  # a gap: what came next is not this episode's
                ep = None
            if ep is None:
                ep = Episode(observations=[rows.obs[i]])
                episodes.append(ep)
            ep.observations.append(rows.next_obs[i])
            ep.actions.append(rows.action[i])
            ep.rewards.append(float(rows.reward[i]))
            ep.terminations.append(bool(rows.terminated[i]))
            ep.truncations.append(bool(rows.truncated[i]))
            ep.interventions.append(bool(rows.intervention[i]))
            if rows.terminated[i] or rows.truncated[i]:
                ep = None
        if ep is not None:
            ep.truncations[-1] = True  # the run ended inside this episode
    return episodes
