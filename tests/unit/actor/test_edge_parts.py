"""Actor-side seams without a broker: batching, spool bounds, throttle, exploration, boards."""

from __future__ import annotations

import types

import numpy as np
import pytest

from edge_rl.actor import batching
from edge_rl.actor.batching import Batcher, Spool
from edge_rl.actor.emulation import Throttle
from edge_rl.boards import load_board
from edge_rl.envs import make_env
from edge_rl.specs import EnvSpec
from tests.harness.exploration import epsilon_greedy, random_action
from tests.harness.paths import REPO


def add(b: Batcher, version: int, i: int = 0):
    return b.add(version, np.zeros(4), np.int64(i % 2), 1.0, np.ones(4), False, False)


class FakeTime:
    """``clock()`` and ``sleep(s)`` on a time that moves only when slept or advanced."""

    def __init__(self, oversleep: float = 0.0) -> None:
        self.t = 1000.0
        self.oversleep = oversleep
        self.sleeps = []

    def clock(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds + self.oversleep


def test_batcher_by_count_by_time_and_by_version(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(batching, "time", types.SimpleNamespace(monotonic=fake.clock))
    b = Batcher("a", 9, batch_size=3, flush_interval_s=0.0625)
    for i in range(3):
        assert add(b, 1, i) is None
    assert b.ready()
    first = b.take()
    assert (len(first), first.seq, first.policy_version, first.session) == (3, 0, 1, 9)
    assert first.obs.dtype == np.float32 and first.action.dtype == np.int64
    add(b, 1)
    fake.t += 0.0625 - 2**-10
    assert not b.ready()
    fake.t += 2**-10
    assert b.ready()  # by age: flush_interval_s after its first transition
    done = add(b, 2)  # a new policy version closes the batch
    assert done is not None and done.policy_version == 1 and done.seq == 1 and len(done) == 1
    assert b.take().policy_version == 2 and b.take() is None


def test_spool_is_bounded_and_drops_oldest_first():
    s = Spool(limit_bytes=25)
    for i in range(5):
        s.push(bytes([i]) * 10, n=i + 1)
    assert s.bytes <= 25 and len(s) == 2
    assert (s.dropped_batches, s.dropped_transitions) == (3, 1 + 2 + 3)
    sent = []
    assert s.drain(lambda p: (sent.append(p[0]), len(sent) < 2)[1]) == 4  # 2nd send refused
    assert sent == [3, 4] and len(s) == 1


def test_throttle_owes_time_in_proportion():
    fake = FakeTime()
    t = Throttle(slowdown=3.0, min_sleep_s=0.001, clock=fake.clock, sleep=fake.sleep)
    for _ in range(10):
        t.charge(0.25)  # 0.25 s of "compute" -> 0.5 s of debt each, over the threshold
    assert fake.sleeps == [0.5] * 10 and t.slept_s == 5.0
    idle = Throttle(slowdown=1.0, clock=fake.clock, sleep=fake.sleep)
    idle.charge(1.0)
    assert idle.slept_s == 0.0 and len(fake.sleeps) == 10


def test_throttle_waits_for_its_threshold_and_pays_back_oversleep():
    fake = FakeTime()
    t = Throttle(slowdown=1.5, min_sleep_s=2**-9, clock=fake.clock, sleep=fake.sleep)
    for _ in range(3):
        t.charge(2**-10)  # 2**-11 s of debt each: below the threshold, no sleep yet
    assert fake.sleeps == []
    t.charge(2**-10)
    assert fake.sleeps == [2**-9] and t.slept_s == 2**-9  # the whole debt at once
    late = FakeTime(oversleep=0.25)  # a loaded machine: every sleep runs 0.25 s long
    t = Throttle(slowdown=2.0, min_sleep_s=0.125, clock=late.clock, sleep=late.sleep)
    t.charge(0.5)
    assert late.sleeps == [0.5] and t.slept_s == 0.75  # slept_s is what was measured
    t.charge(0.125)  # debt 0.125 - 0.25 < threshold: the oversleep pays for this one
    t.charge(0.125)
    assert late.sleeps == [0.5]
    t.charge(0.125)  # debt back to 0.125: sleep again
    assert late.sleeps == [0.5, 0.125] and t.slept_s == 0.75 + 0.375


def test_throttle_defaults_to_the_real_clock():
    import time

    t = Throttle(slowdown=2.0, min_sleep_s=0.001)
    before = time.perf_counter()
    t.charge(0.002)
    assert time.perf_counter() - before >= t.slept_s >= 0.002  # slept at least its debt


def test_exploration():
    rng = np.random.default_rng(0)
    q = np.array([0.0, 5.0, 1.0])
    assert all(epsilon_greedy(q, 0.0, rng) == 1 for _ in range(20))
    picks = {int(epsilon_greedy(q, 1.0, rng)) for _ in range(200)}
    assert picks == {0, 1, 2}
    box = EnvSpec(obs_shape=(3,), action_shape=(2,), action_low=(-1, 0), action_high=(1, 2))
    a = np.stack([random_action(box, rng) for _ in range(200)])
    assert a.shape == (200, 2) and (a[:, 0] >= -1).all() and (a[:, 1] <= 2).all()


@pytest.mark.parametrize("board", ["rpi4", "rpi5"])
def test_shipped_boards_load(board):
    cfg = load_board(REPO / "firmware_configs" / f"{board}.yaml")
    assert cfg.board == board and cfg.emulation.compute_slowdown >= 1


@pytest.mark.parametrize(
    "text,match",
    [
        ("board: x\nbatch_sise: 3\n", "batch_sise"),
        ("board: x\nbatch_size: 0\n", "batch_size"),
        ("board: x\nruntime: onnx\n", "runtime"),
        ("board: x\nemulation: {compute_slowdown: 0.5}\n", "compute_slowdown"),
    ],
)
def test_bad_board_files_are_rejected(tmp_path, text, match):
    p = tmp_path / "b.yaml"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_board(p)


def test_env_factory_forms():
    assert make_env("CartPole-v1").action_space.n == 2
    env = make_env("gymnasium.envs.classic_control.cartpole:CartPoleEnv")
    assert env.observation_space.shape == (4,)
    with pytest.raises(ValueError):
        make_env("NoSuchEnv-v0")
    with pytest.raises(ValueError):
        make_env("no.such.module:make")


def test_gaussian_exploration_is_scaled_and_clipped():
    from tests.harness.exploration import gaussian

    rng = np.random.default_rng(0)
    box = EnvSpec(obs_shape=(3,), action_shape=(2,), action_low=(-2, 0), action_high=(2, 1))
    centre = np.array([0.0, 0.5], np.float32)
    a = np.stack([gaussian(centre, 0.1, box, rng) for _ in range(4000)])
    # sigma is a fraction of the half-range: 0.1 * 2 = 0.2 and 0.1 * 0.5 = 0.05
    np.testing.assert_allclose(a.std(axis=0), [0.2, 0.05], rtol=0.1)
    edge = np.stack([gaussian(np.array([2.0, 1.0]), 0.5, box, rng) for _ in range(500)])
    assert edge[:, 0].max() <= 2.0 and edge[:, 1].max() <= 1.0 and edge.dtype == np.float32
    assert np.array_equal(gaussian(centre, 0.0, box, rng), centre)


def test_batcher_by_blocks_of_rows(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(batching, "time", types.SimpleNamespace(monotonic=fake.clock))
    b = Batcher("a", 9, batch_size=4, flush_interval_s=0.5)
    assert b.open(1) is None and b.room() == 4 and b.due() == fake.t + 0.5
    row = (np.zeros(4), np.int64(1), 1.0, np.ones(4), False, True, False)
    for _ in range(3):
        b.append(row)
    fake.t += 0.25
    assert b.room() == 1 and b.due() == fake.t + 0.25 and not b.ready()  # age: first row
    assert b.open(1) is None and len(b) == 3  # the same version: the batch stays open
    done = b.open(2)  # another version closes it
    assert done is not None and len(done) == 3 and done.policy_version == 1
    assert done.truncated.tolist() == [True] * 3 and done.next_obs.dtype == np.float32
    assert b.room() == 4 and len(b) == 0


def test_explorer_follows_epsilon_greedy_by_blocks():
    from edge_rl.actor.exploration import Explorer

    spec = EnvSpec(obs_shape=(3,), num_actions=3)
    rng = np.random.default_rng(0)
    e = Explorer(spec, rng)
    q = np.array([0.0, 5.0, 1.0], np.float32)
    e.plan({"epsilon": 0.0}, 50)
    assert [int(e.act(q, i)) for i in range(50)] == [1] * 50
    e.plan({"epsilon": 1.0}, 3000)
    picks = np.array([e.act(q, i) for i in range(3000)])
    assert picks.dtype == np.int64 and set(picks.tolist()) == {0, 1, 2}
    assert np.abs(np.bincount(picks) / 3000 - 1 / 3).max() < 0.04  # uniform
    e.plan({"epsilon": 0.25}, 4000)
    explored = np.mean([e.act(q, i) != 1 for i in range(4000)])
    assert abs(explored - 0.25 * 2 / 3) < 0.03  # a random action is the greedy one 1/3
    e.plan(None, 200)  # no policy: uniform random, no model output needed
    assert {int(e.act(None, i)) for i in range(200)} == {0, 1, 2}
    calls = []
    e.rng = types.SimpleNamespace(random=lambda n: calls.append(n) or rng.random(n))
    e.plan({"epsilon": 0.5}, 64)
    assert calls == [64]  # one draw for the whole block


def test_explorer_plan_is_the_per_draw_rule_draw_for_draw():
    """The block's plan takes, for each draw ``u``, the action the per-step rule gives:
    ``floor(u / epsilon * k)`` (at most ``k - 1``) if ``u < epsilon``, else the greedy
    one; the same RNG state gives the same actions, as numpy int64."""
    from edge_rl.actor.exploration import Explorer

    for k, epsilon, n in [(2, 0.04, 640), (3, 0.25, 300), (7, 1.0, 200), (5, 0.0, 50)]:
        q = np.arange(k, dtype=np.float32)  # greedy: the last action
        e = Explorer(EnvSpec(obs_shape=(3,), num_actions=k), np.random.default_rng(k))
        e.plan({"epsilon": epsilon}, n)
        draws = np.random.default_rng(k).random(n).tolist()
        rule = [k - 1 if u >= epsilon else min(int(u / epsilon * k), k - 1) for u in draws]
        acts = [e.act(q, i) for i in range(n)]
        assert [int(a) for a in acts] == rule
        assert all(type(a) is np.int64 for a in acts)


def test_explorer_adds_scaled_clipped_noise_by_blocks():
    from edge_rl.actor.exploration import Explorer

    box = EnvSpec(obs_shape=(3,), action_shape=(2,), action_low=(-2, 0), action_high=(2, 1))
    e = Explorer(box, np.random.default_rng(0))
    centre = np.array([0.0, 0.5], np.float32)
    e.plan({"sigma": 0.1}, 4000)
    a = np.stack([e.act(centre, i) for i in range(4000)])
    np.testing.assert_allclose(a.std(axis=0), [0.2, 0.05], rtol=0.1)  # as gaussian()
    assert a.dtype == np.float32 and a.shape == (4000, 2)
    e.plan({"sigma": 0.5}, 500)
    edge = np.stack([e.act(np.array([2.0, 1.0]), i) for i in range(500)])
    assert edge[:, 0].max() <= 2.0 and edge[:, 1].max() <= 1.0
    e.plan({"sigma": 0.0}, 1)
    assert np.array_equal(e.act(centre, 0), centre)
    e.plan(None, 200)
    r = np.stack([e.act(None, i) for i in range(200)])
    assert (r[:, 0] >= -2).all() and (r[:, 0] <= 2).all() and (r[:, 1] >= 0).all()
    assert (r[:, 1] <= 1).all() and r[:, 0].std() > 0.5
