"""The demonstration buffer: what ingest copies into it, how a batch draws from it and
online replay (learner/demos.py), and that it comes back from a checkpoint."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from edge_rl.learner.demos import BatchMixer
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions
from tests.harness.batches import small_batch

SPEC = EnvSpec(obs_shape=(2,), num_actions=3)


def filled(reward: float, n: int = 50, seed: int = 0) -> ReplayBuffer:
    """A buffer of ``n`` rows, every reward ``reward`` (to tell the sources apart)."""
    buf = ReplayBuffer(SPEC, 1_000, seed=seed)
    b = small_batch(n=n, reward=reward)
    buf.add(b.obs, b.action, b.reward, b.next_obs, b.terminated)
    return buf


@pytest.mark.parametrize(
    ("ratio", "online_rows"),
    [(None, 128), (0.5, 128), (0.25, 64), (1.0, 256), (0.0, 0)],
)
def test_a_batch_is_drawn_at_the_online_ratio(ratio, online_rows):
    mixer = BatchMixer(filled(1.0), filled(-1.0), ratio, seed=3)
    sample = mixer.sample(256)
    assert sample.obs.shape == (256, 2)
    assert int((sample.reward == 1.0).sum()) == online_rows
    assert mixer.stats().online_ratio == (0.5 if ratio is None else ratio)


def test_both_sources_are_shuffled_through_the_batch():
    """The update slices the batch into K minibatches in order: each must hold both."""
    sample = BatchMixer(filled(1.0), filled(-1.0), seed=1).sample(256)
    for chunk in sample.reward.reshape(4, 64):  # 4 minibatches of 64
        assert 16 < int((chunk == 1.0).sum()) < 48


def test_without_demonstrations_every_row_is_online():
    empty = ReplayBuffer(SPEC, 100)
    mixer = BatchMixer(filled(1.0), empty, 0.5)
    assert np.all(mixer.sample(64).reward == 1.0)
    assert mixer.stats() == dataclasses.replace(mixer.stats(), rows=0, online_ratio=1.0)


def test_with_online_replay_empty_every_row_is_a_demonstration():
    mixer = BatchMixer(ReplayBuffer(SPEC, 100), filled(-1.0))
    assert len(mixer) == 0  # training starts on the fleet's data, not on demonstrations
    assert np.all(mixer.sample(32).reward == -1.0)


def test_the_ratio_is_checked():
    with pytest.raises(ValueError, match="online_ratio"):
        BatchMixer(filled(1.0), filled(-1.0), 1.5)


def test_ingest_copies_intervention_rows_into_the_demonstrations():
    replay, demos = ReplayBuffer(SPEC, 100), ReplayBuffer(SPEC, 100)
    mixer = BatchMixer(replay, demos)
    topics = Topics("edge-rl", "demo")
    ingest = Ingest(SPEC, replay, topics, latest_version=lambda: 0, demos=mixer)
    acted = np.array([False, True, True, False, True, False])
    batch = dataclasses.replace(small_batch("a0", n=6), intervention=acted)
    assert ingest.handle(topics.transitions("a0"), encode_transitions(batch))
    plain = small_batch("a0", seq=1, n=4, start=100.0)
    assert ingest.handle(topics.transitions("a0"), encode_transitions(plain))
    assert (len(replay), replay.interventions()) == (10, 3)  # online replay keeps all
    assert len(demos) == 3 and demos.interventions() == 3
    rows = demos.rows()
    np.testing.assert_array_equal(rows.obs, batch.obs[acted])
    np.testing.assert_array_equal(rows.action, batch.action[acted])
    assert rows.source == ["a0"] * 3
    assert mixer.stats().intervention_rows == 3


def test_demonstrations_are_saved_and_restored():
    mixer = BatchMixer(filled(1.0), filled(-1.0, n=7), 0.25, seed=5)
    saved = mixer.state()
    fresh = BatchMixer(filled(1.0), ReplayBuffer(SPEC, 1_000), 0.25, seed=99)
    fresh.load_state(saved)
    assert len(fresh.demos) == 7
    np.testing.assert_array_equal(fresh.sample(64).reward, mixer.sample(64).reward)


def test_the_replay_section_is_checked_on_construction():
    from edge_rl.config import ReplayConfig

    assert ReplayConfig(online_ratio=0.25, demo_capacity=10).online_ratio == 0.25
    with pytest.raises(ValueError, match="online_ratio"):
        ReplayConfig(online_ratio=-0.1)
    with pytest.raises(ValueError, match="demo_capacity"):
        ReplayConfig(demo_capacity=0)
    with pytest.raises(ValueError, match="pretrain_updates"):
        ReplayConfig(pretrain_updates=-1)


def test_pretraining_is_refused_without_a_dataset_or_a_pretraining_loss():
    from edge_rl.config import ReplayConfig, RunConfig

    replay = ReplayConfig(pretrain_updates=100)
    cfg = RunConfig(env_id="Pendulum-v1", algo="td3", demos="d-v0", replay=replay)
    assert cfg.total_updates == cfg.updates_paid_by(cfg.total_env_steps) + 100
    with pytest.raises(ValueError, match="needs demos"):
        RunConfig(env_id="Pendulum-v1", algo="td3", replay=replay)
    with pytest.raises(ValueError, match="sac has no pretraining loss; .*: td3"):
        RunConfig(env_id="Pendulum-v1", algo="sac", demos="d-v0", replay=replay)


class CountingAlgo:
    """The ``Algo`` seam as ``BatchMixer.pretrain`` calls it: records each call."""

    updates_per_call, batch_size = 4, 8

    def __init__(self) -> None:
        self.updates, self.calls = 0, []

    def pretrain(self, batch, steps):
        self.calls.append((steps, set(batch.reward.tolist())))
        self.updates += steps


def test_pretraining_takes_exactly_its_updates_on_the_demonstrations_alone():
    mixer = BatchMixer(filled(1.0), filled(-1.0, n=7), 0.5, seed=5)
    algo = CountingAlgo()
    algo.updates = 30  # updates done before (a count, not a start)
    seen = []
    mixer.pretrain(algo, 10, progress=seen.append)
    assert [steps for steps, _ in algo.calls] == [4, 4, 2]
    assert all(rewards == {-1.0} for _, rewards in algo.calls)  # never an online row
    assert seen == [4, 8, 10] and mixer.pretrained == 10 and algo.updates == 40
    assert mixer.stats().pretrain_updates == 10
    fresh = BatchMixer(filled(1.0), ReplayBuffer(SPEC, 1_000), 0.5)
    fresh.load_state(mixer.state())
    assert fresh.pretrained == 10  # the head start survives a resume


def test_without_demonstrations_pretraining_does_nothing():
    mixer = BatchMixer(filled(1.0), ReplayBuffer(SPEC, 1_000), 0.5)
    algo = CountingAlgo()
    mixer.pretrain(algo, 10)
    assert algo.calls == [] and mixer.pretrained == 0


def test_an_export_calibrates_on_demonstrations_until_online_replay_fills():
    from edge_rl.learner.demos import ExportObservations

    online = ReplayBuffer(SPEC, 1_000)
    demos = filled(-1.0, n=40)
    pool = ExportObservations(online, demos)
    obs, sources = pool.drawn(30)
    assert len(obs) == 30 and len(pool) == 40  # the fleet has sent nothing yet
    b = small_batch(n=50, reward=1.0)
    online.add(b.obs, b.action, b.reward, b.next_obs, b.terminated, "sim-00")
    obs, sources = pool.drawn(60)
    assert len(obs) == 60 and sources.count("sim-00") == 50  # online first, then the rest
    obs, sources = pool.drawn(30)
    assert sources == ["sim-00"] * 30  # enough online rows: only those
