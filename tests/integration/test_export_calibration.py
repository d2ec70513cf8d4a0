"""A board whose CartPole velocities are ±9.9e5 (inside the observation space, which
leaves them unbounded) does not break exports: ingest refuses its batches
(``implausible_obs``), and even with such rows in replay the export's calibration is drawn
across boards and clipped to the fleet's range, so the int8 model passes its parity check
in LiteRT. Real parts: gymnasium's CartPole, TensorFlow's converter in the export worker,
LiteRT."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from edge_rl.config import RunConfig
from edge_rl.envs import env_spec
from edge_rl.learner.ingest.ingest import Ingest
from edge_rl.learner.ingest.plausible import bounds_for_env
from edge_rl.learner.node import algo_for_run
from edge_rl.learner.outbound.packager import PolicyPackager, Stamp, snapshot
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.learner.run_dir import RunDir
from edge_rl.wire.signing import Signer
from edge_rl.wire.topics import Topics
from edge_rl.wire.transitions import encode_transitions
from tests.harness.attackers import cartpole_batch

CFG = RunConfig(env_id="CartPole-v1")
SPEC = env_spec("CartPole-v1")
HONEST = ("sim-00", "sim-01", "sim-02")
SPOOFED = 9.9e5


def honest_rows(seed: int, n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    env, rng = gym.make("CartPole-v1"), np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    before, after = [], []
    for _ in range(n):
        nxt, _, terminated, truncated, _ = env.step(int(rng.integers(2)))
        before.append(obs)
        after.append(nxt)
        obs = env.reset()[0] if terminated or truncated else nxt
    return np.array(before, np.float32), np.array(after, np.float32)


def spoofed_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    """CartPole observations whose two velocities are ±9.9e5, the rest near 0."""
    obs = rng.normal(scale=0.05, size=(n, 4)).astype(np.float32)
    obs[:, 1] = rng.choice([-SPOOFED, SPOOFED], n)
    obs[:, 3] = rng.choice([-SPOOFED, SPOOFED], n)
    return obs


def test_ingest_refuses_velocities_inside_the_space_but_outside_the_envs_warm_up():
    bounds = bounds_for_env(CFG.env_id, CFG.ingest, CFG.seed, CFG.max_abs_reward)
    assert all(np.isfinite(bounds.plausible_low)) and all(np.isfinite(bounds.plausible_high))
    assert bounds.plausible_high[1] < 100 and bounds.plausible_high[3] < 100  # not 1e6
    topics = Topics("edge-rl", "calibration")
    ingest = Ingest(SPEC, ReplayBuffer(SPEC, 1_000), topics, lambda: 0, bounds=bounds)
    evil = cartpole_batch("evil", obs=0.0, n=8)
    evil.obs[:, 1] = SPOOFED
    assert not bounds.obs_outside(evil.obs)  # inside the observation space
    assert not ingest.handle(topics.transitions("evil"), encode_transitions(evil))
    honest_obs, honest_next = honest_rows(0, 8)
    honest = cartpole_batch("sim-00", n=8)
    honest.obs[:], honest.next_obs[:] = honest_obs, honest_next
    assert ingest.handle(topics.transitions("sim-00"), encode_transitions(honest))
    assert dict(ingest.stats().rejected) == {"implausible_obs": 1}
    assert len(ingest.replay) == 8


def test_exports_pass_with_a_boards_spoofed_velocities_in_replay(tmp_path):
    """Its rows outnumber the honest ones two to one: before, every export failed its
    parity check (the calibration's std of ~1e6 squeezed honest inputs into one int8
    step)."""
    replay, rng = ReplayBuffer(SPEC, 20_000, seed=0), np.random.default_rng(1)
    for i, board in enumerate(HONEST):
        obs, nxt = honest_rows(i)
        n = len(obs)
        replay.add(
            obs, np.zeros(n, np.int64), np.ones(n, np.float32), nxt, np.zeros(n, bool), board
        )
    evil = spoofed_rows(3_600, rng)
    n = len(evil)
    replay.add(evil, np.zeros(n, np.int64), np.ones(n, np.float32), evil, np.zeros(n, bool), "evil")
    _, sources = replay.drawn(400, np.random.default_rng(2))
    assert sources.count("evil") <= 100  # its share of four boards, not two thirds

    bounds = bounds_for_env(CFG.env_id, CFG.ingest, CFG.seed, CFG.max_abs_reward)
    algo = algo_for_run(CFG, SPEC)
    stamp = Stamp(CFG.algo, CFG.env_id, "calibration")
    packager = PolicyPackager(
        CFG.export, stamp, SPEC, replay, RunDir(tmp_path), Signer.generate(), bounds=bounds
    )
    published = [packager.export(algo, snapshot(algo.policy_network), v, 0, {}) for v in (1, 2)]
    assert all(p is not None for p in published), packager.stats()
    assert packager.stats().failed == 0
