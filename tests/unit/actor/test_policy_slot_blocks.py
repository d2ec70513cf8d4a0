"""An actor's PolicySlot loads a GST-compressed policy shipped with the "blocks" codec.

The learner-side pieces (Compressor, int8 export, weight_regions, the codec) produce the
bundle exactly as PolicyPackager does; the slot is what every actor runs on receipt.
"""

from __future__ import annotations

import numpy as np

from edge_rl.actor.policy_slot import PolicySlot
from edge_rl.agents.dqn.networks import make_q_network
from edge_rl.compress.compressor import Compressor
from edge_rl.compress.config import CompressionConfig
from edge_rl.export.regions import weight_regions
from edge_rl.export.tflite import export_policy
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.specs import EnvSpec
from edge_rl.types import PolicyBundle
from edge_rl.wire.policy import compress_model, encode_policy
from tests.harness.cartpole_policies import cartpole_manifest

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)


def test_slot_loads_a_blocks_coded_gst_policy(policy_keys) -> None:
    signer, _ = policy_keys
    net = make_q_network(4, 2, (32, 32), seed=0)
    comp = Compressor(CompressionConfig(method="gst", s_shift=0.0), net, total_updates=10)
    comp.on_updates(1)  # s_shift 0: the transition prunes 75 % of the 4x4 blocks at once
    obs = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    exported = export_policy(net, obs, "int8", per_channel=False)
    payload = compress_model(exported.tflite, "blocks", weight_regions(exported.tflite))
    assert len(payload) < len(compress_model(exported.tflite, "zlib"))
    manifest = cartpole_manifest(exported.tflite, exported, epsilon=0.1, codec="blocks")
    slot = PolicySlot(CARTPOLE, signer.verifier(), run="r1", run_id="s1")
    loaded = slot.load(encode_policy(PolicyBundle(manifest, payload), signer))
    assert loaded.manifest.codec == "blocks" and not slot.rejected
    reference = TFLitePolicy(exported.tflite)
    for x in obs[:20]:
        np.testing.assert_array_equal(loaded.runner(x), reference(x))
