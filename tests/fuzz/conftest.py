"""The fuzz suite's seeds: real payloads of real encoders (its budgets: budgets.py)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace

import numpy as np
import pytest

from tests.fuzz.fuzzkit import RUN_ID
from tests.harness.cartpole_policies import cartpole_manifest


@dataclass(frozen=True)
class Seeds:
    """Real payloads: transition batches from gymnasium rollouts (some rows an
    intervention's), signed policy bundles around a real int8 export (zlib and blocks
    coded), statuses with v5's safety figures (one of a board in its safe state), a control
    message and a credit grant."""

    cartpole: bytes  # with the header's optional "arrays" (what array mutations edit)
    pendulum: bytes
    cartpole_compact: bytes  # without: the learner lays the body out from its spec
    pendulum_compact: bytes
    model: bytes  # the int8 .tflite, uncompressed
    zlib_model: bytes
    blocks_model: bytes
    policy_zlib: bytes
    policy_blocks: bytes
    status: bytes
    status_safe: bytes  # state "safe", with a safe_reason
    control: bytes
    credit: bytes
    signer: object
    cartpole_spec: object
    pendulum_spec: object


def _rollout(env_id: str, steps: int, actor_id: str):
    import gymnasium as gym

    from edge_rl.specs import EnvSpec
    from edge_rl.types import TransitionBatch

    env = gym.make(env_id)
    spec = EnvSpec.from_gym(env.observation_space, env.action_space)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    rows = []
    for _ in range(steps):
        action = env.action_space.sample()
        next_obs, reward, term, trunc, _ = env.step(action)
        rows.append((obs, action, reward, next_obs, term, trunc, len(rows) % 7 == 3))
        obs = env.reset()[0] if term or trunc else next_obs
    env.close()
    cols = list(zip(*rows, strict=True))
    batch = TransitionBatch(
        actor_id=actor_id,
        session=4_503_599_627_370_495,
        seq=11,
        policy_version=3,
        obs=np.asarray(cols[0], np.float32),
        action=np.asarray(cols[1], np.int64 if spec.discrete else np.float32),
        reward=np.asarray(cols[2], np.float32),
        next_obs=np.asarray(cols[3], np.float32),
        terminated=np.asarray(cols[4], bool),
        truncated=np.asarray(cols[5], bool),
        run_id=RUN_ID,
        intervention=np.asarray(cols[6], bool),  # v5 (§3.1): a teleop took some steps
    )
    return spec, batch


def _int8_model() -> tuple[bytes, bytes, object]:
    """A GST-pruned 4-32-32-2 int8 Q-network as the learner exports it (as in
    tests/unit/actor/test_policy_slot_blocks.py): its .tflite, its blocks payload, its export."""
    from edge_rl.agents.dqn.networks import make_q_network
    from edge_rl.compress.compressor import Compressor
    from edge_rl.compress.config import CompressionConfig
    from edge_rl.export.regions import weight_regions
    from edge_rl.export.tflite import export_policy
    from edge_rl.wire.policy import compress_model

    net = make_q_network(4, 2, (32, 32), seed=0)
    comp = Compressor(CompressionConfig(method="gst", s_shift=0.0), net, total_updates=10)
    comp.on_updates(1)
    obs = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    exported = export_policy(net, obs, "int8", per_channel=False)
    blocks = compress_model(exported.tflite, "blocks", weight_regions(exported.tflite))
    return exported.tflite, blocks, exported


@pytest.fixture(scope="session")
def seeds() -> Seeds:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from edge_rl.types import (
        ActorStatus,
        ControlMessage,
        CreditGrant,
        PolicyBundle,
    )
    from edge_rl.wire.messages import encode_control, encode_credit, encode_status
    from edge_rl.wire.policy import compress_model, encode_policy
    from edge_rl.wire.signing import Signer
    from edge_rl.wire.transitions import encode_transitions

    t0 = time.perf_counter()
    cart_spec, cart = _rollout("CartPole-v1", 48, "sim-00")  # holds an episode end
    pend_spec, pend = _rollout("Pendulum-v1", 16, "sim-01")
    model, blocks, exported = _int8_model()
    # Fixed key and times: the seeds are byte-identical on every run, so derandomized cases
    # are too (a fresh key would change every signature byte the mutations land on).
    signer = Signer(Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"fuzz").digest()))

    def bundle(payload: bytes, codec_name: str) -> bytes:
        manifest = cartpole_manifest(
            model,
            exported,
            version=3,
            epsilon=0.05,
            codec=codec_name,
            run="fuzz",
            run_id=RUN_ID,
            env_spec=cart_spec,
            learner_step=1500,
            created_unix=1_760_000_000.0,
            extra={"seed": 0},
        )
        return encode_policy(PolicyBundle(manifest, payload), signer)

    zlib_model = compress_model(model, "zlib")
    status = ActorStatus(
        actor_id="sim-00",
        state="running",
        board="rpi4",
        runtime="ai_edge_litert",
        policy_version=3,
        policy_digest="6171c59d32f0682946a10d4444d4b952240bca95e8f7abd0e585acdb088b7ab9",
        served_episodes=4,
        policies_failed=1,
        env_steps=2331,
        episodes=97,
        transitions_sent=2304,
        batches_sent=36,
        batches_dropped=1,
        policies_rejected=2,
        control_rejected=0,
        transitions_oversize=0,
        env_steps_per_s=412.5,
        recent_return=23.4,
        time_unix=1_760_000_000.25,
        breakdown={
            "env_step": 1.25,
            "inference": 0.5,
            "exploration": 0.01,
            "publish": 0.2,
            "emulation": 0.0,
            "idle": 3.04,
            "wall": 5.0,
            "policy_receive": 0.02,
            "model_load": 0.07,
        },
        run_id=RUN_ID,
        session=4_503_599_627_370_495,
        interventions=120,
        safety={"clipped": 14, "rate_limited": 3, "learner_silent": 40},
        control_periods=2300,
        deadline_misses=31,
        jitter_p50_ms=0.42,
        jitter_p99_ms=3.5,
    )
    status_safe = replace(
        status, state="safe", safe_reason="estop", safety={"estop": 12, "nonfinite": 1}
    )
    control = ControlMessage("running", run_id=RUN_ID, reason="credit")
    credit = CreditGrant(RUN_ID, session=4_503_599_627_370_495, credit=2331, refused=(17, 99))
    out = Seeds(
        cartpole=encode_transitions(cart, describe=True),
        pendulum=encode_transitions(pend, describe=True),
        cartpole_compact=encode_transitions(cart),
        pendulum_compact=encode_transitions(pend),
        model=model,
        zlib_model=zlib_model,
        blocks_model=blocks,
        policy_zlib=bundle(zlib_model, "zlib"),
        policy_blocks=bundle(blocks, "blocks"),
        status=encode_status(status),
        status_safe=encode_status(status_safe),
        control=encode_control(control),
        credit=encode_credit(credit),
        signer=signer,
        cartpole_spec=cart_spec,
        pendulum_spec=pend_spec,
    )
    print(f"fuzz seeds made in {time.perf_counter() - t0:.1f} s")
    return out
