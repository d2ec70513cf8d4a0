"""Minari datasets in and out: demonstrations for the learner, a run's transitions for others.

    n = load_demos("edge-rl/pendulum/expert-v0", "Pendulum-v1", demos)   # or a directory
    write_dataset("edge-rl/pendulum/expert-v0", episodes, "Pendulum-v1")  # edge-rl record

Minari (Farama) is the standard format of offline RL datasets on Gymnasium spaces:
``minari.load_dataset(id)`` reads one from ``MINARI_DATASETS_PATH`` (default
``~/.minari/datasets``). An episode of ``n`` steps holds ``n + 1`` observations, ``n``
actions, rewards, terminations and truncations; here also ``infos["intervention"]``,
``n + 1`` flags aligned with the observations (entry ``t + 1``: step ``t``'s action was an
intervention's; entry 0, the reset's, is False). Datasets are written in Minari's ``hdf5``
format (h5py); ``minari.load_dataset`` reads it like any other.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from edge_rl.envs import make_env
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec
from edge_rl.types import TransitionBatch
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.transitions import validate_batch


class DatasetError(ValueError):
    """A dataset that cannot be used here: missing, malformed, or of other spaces."""


@dataclass
class Episode:
    """One episode's steps as Minari lays them out (``n`` steps)."""

    observations: list[np.ndarray] = field(default_factory=list)  # n + 1
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminations: list[bool] = field(default_factory=list)
    truncations: list[bool] = field(default_factory=list)
    interventions: list[bool] = field(default_factory=list)  # n: step t's action

    def __len__(self) -> int:
        return len(self.rewards)


def open_dataset(ref: str) -> Any:
    """A ``MinariDataset``: ``ref`` is a dataset's directory (holding ``data/``) or an id
    under ``MINARI_DATASETS_PATH``. DatasetError if there is none."""
    import minari

    path = Path(ref)
    try:
        if path.is_dir():
            return minari.MinariDataset(path / "data" if (path / "data").is_dir() else path)
        return minari.load_dataset(ref)
    except (FileNotFoundError, ValueError, KeyError, OSError) as e:
        raise DatasetError(f"no Minari dataset {ref!r}: {str(e).splitlines()[0]}") from None


def load_demos(ref: str, env_id: str, demos: ReplayBuffer) -> int:
    """Every step of dataset ``ref`` into ``demos`` (its source ``dataset:<ref>``); how
        many. DatasetError, before anything is added, if its spaces are not ``env_id``'s; on an
    episode with a non-finite value or an action outside the space (those before it stay)."""
    dataset = check_dataset(ref, env_id)
    spec = demos.spec
    added = 0
    for ep in dataset.iterate_episodes():
        n = len(ep.rewards)
        if n == 0:
            continue
        obs = np.asarray(ep.observations, np.float32)  # [n + 1, *obs_shape]
        episode = TransitionBatch(
            "dataset",
            0,
            int(ep.id),
            0,
            obs[:-1],
            np.asarray(ep.actions, spec.action_dtype).reshape(_action_shape(spec, n)),
            np.asarray(ep.rewards, np.float32),
            obs[1:],
            np.asarray(ep.terminations, bool),
            np.asarray(ep.truncations, bool),
        )
        try:  # a file is no more trusted than the bus: finite, inside the action space
            validate_batch(episode, spec)
        except CodecError as e:
            raise DatasetError(f"dataset {ref!r}, episode {ep.id}: {e}") from None
        e = episode
        demos.add(
            e.obs, e.action, e.reward, e.next_obs, e.terminated, f"dataset:{ref}", e.truncated
        )
        added += n
    return added


def check_dataset(ref: str, env_id: str) -> Any:
    """Dataset ``ref``, opened; DatasetError if there is none or its observation or action
    space is not ``env_id``'s (a one-line message naming both)."""
    dataset = open_dataset(ref)
    env = make_env(env_id)
    try:
        for what, theirs, ours in (
            ("observation", dataset.observation_space, env.observation_space),
            ("action", dataset.action_space, env.action_space),
        ):
            if theirs != ours:
                raise DatasetError(
                    f"dataset {ref!r}: its {what} space {theirs} is not the env's {ours} "
                    f"({env_id}); record it from this env"
                )
    finally:
        env.close()
    return dataset


def _action_shape(spec: EnvSpec, n: int) -> tuple[int, ...]:
    return (n,) if spec.discrete else (n, *spec.action_shape)


def write_dataset(
    dataset_id: str, episodes: list[Episode], env_id: str, algorithm: str = "edge-rl"
) -> Any:
    """A Minari dataset of ``episodes`` stepped in ``env_id``, under
    ``MINARI_DATASETS_PATH``; the ``MinariDataset``. DatasetError if the id is taken or
    malformed, or there is no step to write."""
    import minari
    from minari.data_collector import EpisodeBuffer

    episodes = [e for e in episodes if len(e)]
    if not episodes:
        raise DatasetError("no transitions to write")
    buffers = [
        EpisodeBuffer(
            id=i,
            observations=np.asarray(e.observations, np.float32),
            actions=np.asarray(e.actions),
            rewards=np.asarray(e.rewards, np.float64),
            terminations=np.asarray(e.terminations, bool),
            truncations=np.asarray(e.truncations, bool),
            infos={"intervention": np.asarray([False, *e.interventions], bool)},
        )
        for i, e in enumerate(episodes)
    ]
    env = make_env(env_id)
    spaces = {"observation_space": env.observation_space, "action_space": env.action_space}
    env.close()
    try:
        with warnings.catch_warnings():  # author, code_permalink, ...: metadata we leave out
            warnings.simplefilter("ignore", UserWarning)
            return minari.create_dataset_from_buffers(
                dataset_id,
                buffers,
                env=None if ":" in env_id else env_id,  # a gymnasium id Minari can remake
                algorithm_name=algorithm,
                data_format="hdf5",
                **spaces,
            )
    except ValueError as e:
        raise DatasetError(f"cannot write dataset {dataset_id!r}: {e}") from None
