"""Minari datasets in and out with real parts: a real int8 policy in LiteRT recorded by
``edge-rl record``, read back by ``minari.load_dataset``, loaded into a demonstration
buffer, and refused by ``edge-rl learn --demos`` for another env's spaces."""

from __future__ import annotations

import json
import shutil

import minari
import numpy as np
import pytest

from edge_rl.envs import env_spec
from edge_rl.learner.datasets import DatasetError, Episode, load_demos, write_dataset
from edge_rl.learner.record import from_replay
from edge_rl.learner.replay import ReplayBuffer
from tests.harness.cartpole_policies import MODELS

GOOD = "edge-rl/cartpole/good-v0"


@pytest.fixture
def datasets(tmp_path, monkeypatch):
    """Minari's datasets under this test's own directory (the subprocesses inherit it)."""
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    return tmp_path / "datasets"


@pytest.fixture
def teacher_run(tmp_path):
    """A run directory as `edge-rl learn` leaves it, as far as `record` reads it: its
    config and its deployed policy (a hand-set controller that holds CartPole 500 steps)."""
    run = tmp_path / "teacher"
    run.mkdir()
    (run / "config.yaml").write_text("env_id: CartPole-v1\n")
    shutil.copy(MODELS["good"], run / "policy.tflite")
    return run


def test_record_writes_what_minari_and_the_demonstration_buffer_read(datasets, teacher_run, cli):
    proc = cli("record", str(teacher_run), "--dataset", GOOD, "--steps", "700", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    said = json.loads(proc.stdout)
    assert (said["steps"], said["episodes"], said["interventions"]) == (700, 2, 0)
    assert (datasets / "edge-rl" / "cartpole" / "good-v0" / "data").is_dir()

    ds = minari.load_dataset(GOOD)
    assert ds.total_steps == 700 and ds.total_episodes == 2
    first, second = list(ds.iterate_episodes())
    assert len(first.rewards) == 500 and first.truncations[-1]  # the controller holds it
    assert len(second.rewards) == 200 and second.truncations[-1]  # cut at --steps
    assert first.infos["intervention"].shape == (501,) and not first.infos["intervention"].any()

    spec = env_spec("CartPole-v1")
    demos = ReplayBuffer(spec, 1_000)
    assert load_demos(GOOD, "CartPole-v1", demos) == 700
    rows = demos.rows()
    np.testing.assert_array_equal(rows.obs[:500], first.observations[:-1])
    np.testing.assert_array_equal(rows.action[:500], first.actions)
    assert rows.source[0] == f"dataset:{GOOD}" and rows.truncated.sum() == 2
    # A dataset's directory works as well as its id.
    assert load_demos(str(datasets / "edge-rl" / "cartpole" / "good-v0"), "CartPole-v1", demos)


def test_a_dataset_of_other_spaces_is_refused_in_one_line(datasets, teacher_run, cli, tmp_path):
    proc = cli("record", str(teacher_run), "--dataset", GOOD, "--steps", "50", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    with pytest.raises(DatasetError, match="observation space"):
        load_demos(GOOD, "Pendulum-v1", ReplayBuffer(env_spec("Pendulum-v1"), 10))
    run = tmp_path / "run"
    argv = ["learn", "--config", "examples/pendulum_td3.yaml", "--out", str(run)]
    proc = cli(*argv, "--demos", GOOD, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "observation space" in proc.stderr and GOOD in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not run.exists()  # refused before anything was made
    proc = cli(*argv, "--demos", "edge-rl/none-v0", timeout=120)
    assert proc.returncode != 0 and "no Minari dataset" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_dataset_with_a_non_finite_step_is_refused(datasets):
    obs = [np.zeros(4, np.float32), np.full(4, np.nan, np.float32)]
    bad = Episode(obs, [np.int64(0)], [1.0], [False], [True], [False])
    write_dataset("edge-rl/cartpole/nan-v0", [bad], "CartPole-v1")
    demos = ReplayBuffer(env_spec("CartPole-v1"), 10)
    with pytest.raises(DatasetError, match="episode 0: .*NaN"):
        load_demos("edge-rl/cartpole/nan-v0", "CartPole-v1", demos)
    assert len(demos) == 0


def test_replay_rows_become_episodes_board_by_board_with_interventions(datasets):
    """What `record --from replay` writes: each board's rows cut at its episode ends and
    at a gap, interventions kept, read back by Minari."""
    spec = env_spec("CartPole-v1")
    replay = ReplayBuffer(spec, 100)

    def add(board: str, start: int, n: int, end: bool, acted: int | None = None) -> None:
        obs = (start + np.arange(n + 1, dtype=np.float32))[:, None].repeat(4, 1)  # [n+1, 4]
        term = np.zeros(n, np.float32)
        term[-1] = end
        flags = np.zeros(n, np.uint8)
        if acted is not None:
            flags[acted] = 1
        act = np.zeros(n, np.int64)
        replay.add(obs[:-1], act, np.ones(n, np.float32), obs[1:], term, board, None, flags)

    add("pi-01", 0, 3, end=True, acted=1)  # one episode, its second step acted
    add("pi-02", 100, 2, end=False)
    add("pi-01", 10, 2, end=False)  # pi-01's next episode
    add("pi-01", 50, 2, end=False)  # a gap (a lost batch): a new episode
    episodes = from_replay(replay.rows())
    assert [len(e) for e in episodes] == [3, 2, 2, 2]  # pi-01's three, then pi-02's
    assert [e.truncations[-1] for e in episodes] == [False, True, True, True]
    assert episodes[0].interventions == [False, True, False]
    write_dataset("edge-rl/cartpole/fleet-v0", episodes, "CartPole-v1")
    ds = minari.load_dataset("edge-rl/cartpole/fleet-v0")
    assert ds.total_steps == 9
    flags = next(ds.iterate_episodes()).infos["intervention"]
    assert flags.tolist() == [False, False, True, False]  # step 1's, at entry 2
    only = from_replay(replay.rows("pi-02"))
    assert len(only) == 1 and only[0].observations[0][0] == 100
