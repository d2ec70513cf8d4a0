"""Signed policy bundles (protocol v2): verify before parse, and every way a bundle is refused.

The codec cases run on hand-made manifests; the PolicySlot cases load real int8 models in
LiteRT, as every actor does on receipt.
"""

from __future__ import annotations

import dataclasses
import json
import os
import struct

import numpy as np
import pytest

from edge_rl.actor.policy_slot import PolicySlot
from edge_rl.export.tflite import export_policy
from edge_rl.specs import EnvSpec
from edge_rl.types import PolicyBundle, PolicyManifest
from edge_rl.wire.envelope import MAGIC_POLICY, MAGIC_TRANSITIONS, SCHEMA_VERSION, CodecError, pack
from edge_rl.wire.policy import compress_model, decode_policy, encode_policy, manifest_to_dict
from edge_rl.wire.signing import Signer, Verifier
from tests.harness.cartpole_policies import cartpole_manifest

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
PENDULUM = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))
SIGNER = Signer.generate()
OTHER = Signer.generate()


def manifest(model: bytes = b"model", **override) -> PolicyManifest:
    fields = dict(version=4, epsilon=0.05, codec="none", learner_step=1000)
    return cartpole_manifest(model, **{**fields, **override})


def signed_header(payload_header: dict, body: bytes = b"model", signer: Signer = SIGNER) -> bytes:
    """A bundle whose (possibly invalid) manifest is genuinely signed."""
    from edge_rl.wire.envelope import MAGIC_POLICY, pack_signed

    return pack_signed(MAGIC_POLICY, payload_header, body, signer.sign, signer.key_id)


def good_header(**changes) -> dict:
    h = manifest_to_dict(manifest())
    h.update(changes)
    return h


def test_round_trip_with_the_signers_public_key():
    bundle = PolicyBundle(manifest(), b"model")
    out = decode_policy(encode_policy(bundle, SIGNER), SIGNER.verifier())
    assert out == bundle


def _flip(payload: bytes, offset: int) -> bytes:
    return payload[:offset] + bytes([payload[offset] ^ 1]) + payload[offset + 1 :]


GOOD = encode_policy(PolicyBundle(manifest(), b"model"), SIGNER)
H = struct.unpack_from("<4sHI", GOOD)[2]

CASES = [
    ("truncated", GOOD[:6], "truncated"),
    ("magic", MAGIC_TRANSITIONS + GOOD[4:], "bad_magic"),
    ("future version", GOOD[:4] + struct.pack("<H", 9) + GOOD[6:], "bad_version"),
    (
        "v1, unsigned",
        pack(MAGIC_POLICY, good_header())[:4]
        + struct.pack("<H", 1)
        + pack(MAGIC_POLICY, good_header())[6:]
        + b"model",
        "unsigned",
    ),
    ("no signature", pack(MAGIC_POLICY, good_header()), "unsigned"),
    ("another key", encode_policy(PolicyBundle(manifest(), b"model"), OTHER), "unknown_key"),
    ("manifest byte flipped", _flip(GOOD, 10 + H // 2), "bad_signature"),
    ("header length past the end", _flip(GOOD, 9), "truncated"),
    ("signature byte flipped", _flip(GOOD, 10 + H + 8 + 3), "bad_signature"),
    ("key id byte flipped", _flip(GOOD, 10 + H + 1), "unknown_key"),
    ("signed, bad spec", signed_header(good_header(env_spec={"obs_shape": []})), "bad_manifest"),
    ("signed, version a string", signed_header(good_header(policy_version="7")), "bad_manifest"),
    ("signed, version 10^400", signed_header(good_header(policy_version=10**400)), "bad_manifest"),
    ("signed, version 0", signed_header(good_header(policy_version=0)), "bad_manifest"),
    (
        "signed, epsilon -0.5",
        signed_header(good_header(exploration={"epsilon": -0.5})),
        "bad_manifest",
    ),
    ("signed, epsilon 2", signed_header(good_header(exploration={"epsilon": 2.0})), "bad_manifest"),
    (
        "signed, unknown exploration",
        signed_header(good_header(exploration={"tau": 0.1})),
        "bad_manifest",
    ),
    (
        "signed, exploration a string",
        signed_header(good_header(exploration={"sigma": "x"})),
        "bad_manifest",
    ),
]


@pytest.mark.parametrize("payload,reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_refusals_by_reason(payload, reason):
    with pytest.raises(CodecError) as err:
        decode_policy(payload, SIGNER.verifier())
    assert err.value.reason == reason


def test_a_signed_1e999_exploration_is_refused_as_a_manifest_error():
    # JSON's 1e999 parses as inf: a validly signed manifest may still carry it.
    raw = json.dumps(good_header()).replace('"epsilon": 0.05', '"epsilon": 1e999').encode()
    from edge_rl.wire.envelope import _PREFIX

    signed = _PREFIX.pack(MAGIC_POLICY, SCHEMA_VERSION, len(raw)) + raw
    payload = signed + SIGNER.key_id + SIGNER.sign(signed) + b"model"
    with pytest.raises(CodecError) as err:
        decode_policy(payload, SIGNER.verifier())
    assert err.value.reason == "bad_manifest"


def test_the_header_is_not_parsed_before_the_signature_holds(monkeypatch):
    import edge_rl.wire.envelope as envelope

    parsed = []
    real = envelope._header
    monkeypatch.setattr(envelope, "_header", lambda d, h: parsed.append(h) or real(d, h))
    with pytest.raises(CodecError):
        decode_policy(_flip(GOOD, 10 + H // 2), SIGNER.verifier())
    assert parsed == []
    decode_policy(GOOD, SIGNER.verifier())
    assert parsed == [H]


# --- key files ---------------------------------------------------------------------------


def test_a_key_is_made_0600_reloaded_and_refused_when_others_can_read_it(tmp_path):
    path = tmp_path / "keys" / "learner.key"
    made = Signer.load_or_create(path)
    assert (path.stat().st_mode & 0o777) == 0o600
    assert Signer.load_or_create(path).key_id == made.key_id
    made.write_public(tmp_path / "learner.pub")
    assert Verifier.from_file(tmp_path / "learner.pub").key_id == made.key_id
    os.chmod(path, 0o644)
    with pytest.raises(ValueError, match="chmod 600"):
        Signer.load_or_create(path)
    with pytest.raises(FileExistsError):
        made.write_private(path)  # never overwritten
    (tmp_path / "bad.pub").write_text("not a key")
    with pytest.raises(ValueError, match="not a PEM public key"):
        Verifier.from_file(tmp_path / "bad.pub")


# --- the policy slot: what an actor does on receipt -----------------------------------------


@pytest.fixture(scope="module")
def cartpole_model() -> bytes:
    import keras

    net = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(2)]
    )
    obs = np.random.default_rng(0).normal(size=(100, 4)).astype(np.float32)
    return export_policy(net, obs, "int8").tflite


def bundle_for(model: bytes, signer: Signer = SIGNER, **override) -> bytes:
    m = manifest(model, **override)
    return encode_policy(PolicyBundle(m, compress_model(model, "none")), signer)


def test_the_slot_loads_signed_newer_policies_of_its_run_and_keeps_the_last_good_one(
    cartpole_model,
):
    slot = PolicySlot(CARTPOLE, SIGNER.verifier(), run="r1", run_id="s1")
    slot.current = slot.load(bundle_for(cartpole_model, policy_version=2))
    attempts = {
        "unknown_key": bundle_for(cartpole_model, OTHER, policy_version=3),
        "wrong_run": bundle_for(cartpole_model, policy_version=3, run="another-run"),
        "stale_version": bundle_for(cartpole_model, policy_version=2),
        "spec_mismatch": bundle_for(cartpole_model, policy_version=3, env_spec=PENDULUM),
        "bad_hash": bundle_for(cartpole_model, policy_version=3, model_sha256="00" * 32),
    }
    # The same run name, but an earlier start of it (a retained policy left by a learner
    # that was restarted from scratch): refused too.
    earlier_start = bundle_for(cartpole_model, policy_version=3, run_id="s0")
    for reason, payload in [*attempts.items(), ("wrong_run", earlier_start)]:
        before = slot.rejected[reason]
        slot.offer(payload)
        slot.load_pending()  # what the slot's thread does after each offer
        assert slot.rejected[reason] == before + 1, (reason, dict(slot.rejected))
        assert slot.version == 2  # still the last good policy
    slot.offer(bundle_for(cartpole_model, policy_version=3))
    slot.load_pending()
    assert slot.version == 3 and sum(slot.rejected.values()) == len(attempts) + 1


def test_the_slot_loads_nothing_before_the_actor_joins_a_run_start(cartpole_model):
    """A policy that arrives before the control message naming the run start waits; the
    join tries it again, and a join of another start drops the loaded policy."""
    slot = PolicySlot(CARTPOLE, SIGNER.verifier(), run="r1")
    slot.offer(bundle_for(cartpole_model, policy_version=5))
    slot.load_pending()
    assert slot.current is None and not slot.rejected
    slot.set_run("s1")
    slot.load_pending()
    assert slot.version == 5
    slot.set_run("s2")  # a new run start: its own policies only, from none
    assert slot.current is None
    slot.load_pending()  # the newest payload again: of start s1, so refused
    assert slot.current is None and slot.rejected["wrong_run"] == 1


def test_the_slot_refuses_a_model_that_does_not_fit_the_env_or_the_board(cartpole_model):
    slot = PolicySlot(PENDULUM, SIGNER.verifier(), run="r1", run_id="s1")
    pendulum = dict(env_spec=PENDULUM, output_kind="action", exploration={"sigma": 0.1})
    with pytest.raises(CodecError) as err:  # a 4 -> 2 model for a 3 -> 1 env
        slot.load(bundle_for(cartpole_model, **pendulum))
    assert err.value.reason == "model_shape"
    tiny = PolicySlot(CARTPOLE, SIGNER.verifier(), run="r1", run_id="s1", max_tensor_bytes=100)
    with pytest.raises(CodecError) as err:
        tiny.load(bundle_for(cartpole_model))
    assert err.value.reason == "bad_model" and "max_tensor_bytes" in str(err.value)
    q_for_box = dataclasses.replace(manifest(cartpole_model), output_kind="action")
    with pytest.raises(CodecError) as err:
        PolicySlot(CARTPOLE, SIGNER.verifier(), run="r1", run_id="s1").load(
            encode_policy(PolicyBundle(q_for_box, cartpole_model), SIGNER)
        )
    assert err.value.reason == "spec_mismatch"
