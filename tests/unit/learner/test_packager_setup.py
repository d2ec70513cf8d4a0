"""The packager refuses, at set-up, a policy network the export cannot take: the run stops
before training instead of failing every export after it."""

from __future__ import annotations

import keras
import pytest

from edge_rl.config import RunConfig
from edge_rl.learner.outbound.packager import PolicyPackager, Stamp
from edge_rl.learner.replay import ReplayBuffer
from edge_rl.learner.run_dir import RunDir
from edge_rl.specs import EnvSpec
from edge_rl.wire.signing import Signer

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)


def test_an_activation_the_export_cannot_run_is_refused_at_prepare(tmp_path) -> None:
    cfg = RunConfig(env_id="CartPole-v1")
    replay = ReplayBuffer(CARTPOLE, 100, seed=0)
    stamp = Stamp(cfg.algo, cfg.env_id, cfg.run)
    packager = PolicyPackager(
        cfg.export, stamp, CARTPOLE, replay, RunDir(tmp_path), Signer.generate()
    )
    network = keras.Sequential(
        [keras.Input(shape=(4,)), keras.layers.Dense(8, activation="gelu", name="h")],
        name="q_network",
    )
    with pytest.raises(ValueError, match="q_network: export supports the activations .* 'gelu'"):
        packager.prepare(network)


def test_a_refused_export_is_told_in_a_sentence() -> None:
    from edge_rl.learner.outbound.packager import parity_sentence

    said = parity_sentence({"greedy_agreement": 0.8671875, "max_abs_error": 0.3125})
    assert said == (
        "its exported model in LiteRT is too far from the float network "
        "(greedy agreement 0.867188, max abs error 0.3125)"
    )
    assert "{" not in parity_sentence({"max_action_error": 0.5, "mean_action_error": 0.1})
