"""The export's calibration draw (learner/replay.py ``drawn``, learner/outbound/packager.py): across
boards, no board more than its share, clipped to the fleet's robust range; a failed
export names the board whose observation lay farthest off."""

from __future__ import annotations

import numpy as np

from edge_rl.learner.outbound.packager import SUSPECT_Z, clip_to_fleet, suspect_of
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.specs import EnvSpec

SPEC = EnvSpec(obs_shape=(2,), num_actions=2)


def filled(rows: dict[str, int]) -> ReplayBuffer:
    replay = ReplayBuffer(SPEC, 10_000, seed=0)
    for i, (board, n) in enumerate(rows.items()):
        obs = np.full((n, 2), float(i), np.float32)
        replay.add(
            obs, np.zeros(n, np.int64), np.ones(n, np.float32), obs, np.zeros(n, bool), board
        )
    return replay


def test_no_board_gives_more_than_its_share_of_a_draw():
    replay = filled({"a": 100, "b": 100, "big": 5_000})
    obs, sources = replay.drawn(90, np.random.default_rng(0))
    assert len(obs) == len(sources) == 90
    assert {s: sources.count(s) for s in set(sources)} == {"a": 30, "b": 30, "big": 30}
    assert np.all(obs[np.array(sources) == "big"] == 2.0)  # each row with its own board
    few, _ = filled({"a": 5, "big": 5_000}).drawn(90, np.random.default_rng(0))
    assert len(few) == 50  # a's 5 and big's share of 45: not filled up with big's rows


def test_the_fleets_range_holds_against_one_board_of_three_or_more():
    rng = np.random.default_rng(0)
    honest = rng.normal(size=(300, 2))
    evil = np.full((100, 2), 9.9e5)
    obs = np.concatenate([honest, evil]).astype(np.float32)
    sources = ["a"] * 100 + ["b"] * 100 + ["c"] * 100 + ["evil"] * 100
    clipped = clip_to_fleet(obs, sources)
    assert np.abs(clipped).max() < 20  # the fleet's 1-99 % range, widened by its width
    assert np.array_equal(clipped[:300], obs[:300])  # the honest rows as they were
    two = clip_to_fleet(obs[200:], ["c"] * 100 + ["evil"] * 100)
    assert np.array_equal(two, obs[200:])  # two boards: no fleet to hold against one


def test_a_failed_exports_suspect_is_the_board_farthest_off():
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(200, 4))
    sources = ["a", "b"] * 100
    assert suspect_of(obs, sources) is None  # nobody far off
    obs[17, 1] = 9.9e5
    sources[17] = "evil"
    board, z = suspect_of(obs, sources)
    assert board == "evil" and z > SUSPECT_Z
