"""tests/vectors/ against the code: every payload decodes to its fields (or is refused with
its reason), and every canonical one is what the encoder writes for those fields.

A board maker tests a decoder and an encoder of their own against the same files
(docs/protocol.md, "Test vectors"); if the code changes what goes on the wire, these fail
until the vectors are rebuilt with tests/vectors/make.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from edge_rl.specs import EnvSpec
from edge_rl.types import ActorStatus, ControlMessage, CreditGrant, PolicyTarget, TransitionBatch
from edge_rl.wire import blocks
from edge_rl.wire.envelope import MAGIC_POLICY, CodecError, pack
from edge_rl.wire.messages import (
    decode_control,
    decode_credit,
    decode_status,
    decode_target,
    encode_control,
    encode_credit,
    encode_status,
    encode_target,
)
from edge_rl.wire.policy import decode_policy, decompress_model, manifest_to_dict
from edge_rl.wire.signing import Verifier
from edge_rl.wire.transitions import decode_transitions, encode_transitions
from tests.harness.paths import REPO

VECTORS = REPO / "tests" / "vectors"
KINDS = ("transitions", "status", "control", "credit", "policy", "blocks", "target")


def _load(kind: str) -> dict[str, Any]:
    return json.loads((VECTORS / f"{kind}.json").read_text())


def _cases(kind: str, expect_ok: bool) -> list[dict[str, Any]]:
    return [c for c in _load(kind)["cases"] if (c["expect"] == "ok") == expect_ok]


def _ids(case: dict[str, Any]) -> str:
    return case["name"]


def test_every_message_kind_has_accepted_and_refused_vectors():
    for kind in KINDS:
        assert _cases(kind, True), f"{kind}: no vector a receiver accepts"
        assert _cases(kind, False), f"{kind}: no vector a receiver refuses"
    assert {p.stem for p in VECTORS.glob("*.json")} == set(KINDS)


def _refused(decode: Callable[[bytes], object], case: dict[str, Any]) -> None:
    with pytest.raises(CodecError) as e:
        decode(bytes.fromhex(case["hex"]))
    assert e.value.reason == case["expect"], case["name"]


# --- transitions ----------------------------------------------------------------------------

TRANSITIONS = _load("transitions")
SPECS = {k: EnvSpec.from_dict(v) for k, v in TRANSITIONS["env_specs"].items()}


def _batch(fields: dict[str, Any], spec: EnvSpec) -> TransitionBatch:
    a = fields["arrays"]
    return TransitionBatch(
        **{k: v for k, v in fields.items() if k != "arrays"},
        obs=np.asarray(a["obs"], np.float32),
        action=np.asarray(a["action"], spec.action_dtype),
        reward=np.asarray(a["reward"], np.float32),
        next_obs=np.asarray(a["next_obs"], np.float32),
        terminated=np.asarray(a["terminated"], bool),
        truncated=np.asarray(a["truncated"], bool),
        intervention=np.asarray(a["intervention"], bool) if "intervention" in a else None,
    )


@pytest.mark.parametrize("case", _cases("transitions", True), ids=_ids)
def test_transition_vectors_decode_to_their_fields_and_encode_to_their_bytes(case):
    spec = SPECS[case["name"]]
    payload, want = bytes.fromhex(case["hex"]), _batch(case["fields"], spec)
    got = decode_transitions(payload, spec)
    for name in ("actor_id", "session", "seq", "policy_version", "run_id"):
        assert getattr(got, name) == getattr(want, name), name
    for name in TransitionBatch.ARRAYS:
        if getattr(want, name) is None:  # no intervention: none decoded either
            assert getattr(got, name) is None, name
            continue
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
        assert getattr(got, name).dtype == getattr(want, name).dtype, name
    assert case["canonical"]
    assert encode_transitions(want, describe=case.get("described", False)) == payload


@pytest.mark.parametrize("case", _cases("transitions", False), ids=_ids)
def test_refused_transition_vectors_give_their_reason(case):
    spec = SPECS[TRANSITIONS["spec_for_rejects"]]
    _refused(lambda p: decode_transitions(p, spec), case)


# --- status, control, credit ----------------------------------------------------------------

SMALL = {
    "status": (decode_status, encode_status, lambda f: ActorStatus(**f)),
    "control": (decode_control, encode_control, lambda f: ControlMessage(**f)),
    "credit": (
        decode_credit,
        encode_credit,
        lambda f: CreditGrant(**{**f, "refused": tuple(f["refused"])}),
    ),
    "target": (
        lambda p: decode_target(p, _load("target")["max_bytes"]),
        encode_target,
        lambda f: PolicyTarget(**{**f, "bundle": bytes.fromhex(f["bundle"])}),
    ),
}


def test_a_target_vector_s_bundle_is_the_signed_policy_vector():
    """with_bundle carries policy.json's bundle: a board verifies it with the test key."""
    (case,) = [c for c in _load("target")["cases"] if c["name"] == "with_bundle"]
    body = bytes.fromhex(case["fields"]["bundle"])
    assert body == bytes.fromhex(_load("policy")["cases"][0]["hex"])
    manifest = decode_policy(body, VERIFIER).manifest
    assert (manifest.policy_version, manifest.model_sha256) == (
        case["fields"]["policy_version"],
        case["fields"]["model_sha256"],
    )


@pytest.mark.parametrize(
    ("kind", "case"), [(k, c) for k in SMALL for c in _cases(k, True)], ids=lambda x: str(x)[:40]
)
def test_small_message_vectors_decode_to_their_fields(kind, case):
    decode, encode, build = SMALL[kind]
    payload = bytes.fromhex(case["hex"])
    assert decode(payload) == build(case["fields"])
    if case.get("canonical"):
        assert encode(build(case["fields"])) == payload


def test_each_small_message_kind_has_canonical_vectors():
    for kind in SMALL:
        assert any(c.get("canonical") for c in _cases(kind, True)), kind


@pytest.mark.parametrize(
    ("kind", "case"), [(k, c) for k in SMALL for c in _cases(k, False)], ids=lambda x: str(x)[:40]
)
def test_refused_small_message_vectors_give_their_reason(kind, case):
    _refused(SMALL[kind][0], case)


# --- the signed policy bundle and the blocks codec ------------------------------------------

POLICY = _load("policy")
VERIFIER = Verifier.from_pem((VECTORS / POLICY["public_key_file"]).read_bytes())
MODEL = bytes.fromhex(POLICY["model_hex"])


def test_the_policy_vector_s_key_id_is_the_hash_of_its_public_key():
    assert VERIFIER.key_id.hex() == POLICY["key_id"]
    raw = VERIFIER.public.public_bytes_raw()
    assert hashlib.sha256(raw).digest()[:8].hex() == POLICY["key_id"]
    pem_private = "-----BEGIN " + "PRIVATE KEY-----"  # split: this file holds no key either
    assert pem_private not in "".join(p.read_text() for p in VECTORS.iterdir() if p.is_file())


@pytest.mark.parametrize("case", _cases("policy", True), ids=_ids)
def test_the_signed_policy_vector_verifies_and_decodes_to_its_manifest(case):
    payload = bytes.fromhex(case["hex"])
    bundle = decode_policy(payload, VERIFIER)
    assert json.loads(json.dumps(manifest_to_dict(bundle.manifest))) == case["fields"]
    # The signed part (prefix and manifest) is what the encoder writes for those fields,
    # followed by the key id and a signature over it.
    signed = pack(MAGIC_POLICY, case["fields"])
    assert payload.startswith(signed + VERIFIER.key_id)
    VERIFIER.check(VERIFIER.key_id, signed, payload[len(signed) + 8 : len(signed) + 72])
    model = decompress_model(bundle.payload, bundle.manifest.codec, 1 << 20)
    assert model == MODEL == zlib.decompress(payload[len(signed) + 72 :])
    assert hashlib.sha256(model).hexdigest() == bundle.manifest.model_sha256
    assert len(model) == bundle.manifest.model_size


@pytest.mark.parametrize("case", _cases("policy", False), ids=_ids)
def test_refused_policy_vectors_give_their_reason(case):
    _refused(lambda p: decode_policy(p, VERIFIER), case)


BLOCKS = _load("blocks")


@pytest.mark.parametrize("case", _cases("blocks", True), ids=_ids)
def test_the_blocks_vector_decodes_to_the_model_through_its_region_table(case):
    payload = bytes.fromhex(case["hex"])
    assert blocks.decode(payload, 1 << 20) == MODEL == bytes.fromhex(BLOCKS["model_hex"])
    assert hashlib.sha256(MODEL).hexdigest() == BLOCKS["model_sha256"]
    magic, version, count, length = struct.unpack_from("<4sHHI", payload)
    assert (magic, version, length) == (b"ERLB", 1, len(MODEL))
    table = [
        dict(zip(("offset", "rows", "cols", "dtype", "b", "packed_length"), r, strict=True))
        for r in struct.iter_unpack("<IIIBBI", payload[12 : 12 + 18 * count])
    ]
    assert table == case["fields"]["regions"] and count > 0
    regions = [
        blocks.Region(r["offset"], r["rows"], r["cols"], list(blocks.DTYPES)[r["dtype"]])
        for r in table
    ]
    # zlib's bytes depend on its build; the table before the stream does not.
    assert blocks.encode(MODEL, regions)[: 12 + 18 * count] == payload[: 12 + 18 * count]


@pytest.mark.parametrize("case", _cases("blocks", False), ids=_ids)
def test_refused_blocks_vectors_give_their_reason(case):
    _refused(lambda p: blocks.decode(p, 1 << 20), case)


def test_no_vector_hex_is_left_over_from_another_schema_version():
    """Every accepted payload's envelope says the version this build speaks."""
    from edge_rl.wire.envelope import SCHEMA_VERSION

    for kind in ("transitions", "status", "control", "credit", "policy"):
        for case in _cases(kind, True):
            assert struct.unpack_from("<H", bytes.fromhex(case["hex"]), 4)[0] == SCHEMA_VERSION


def test_vector_fields_are_the_record_fields():
    """Field names in the vectors are the wire names, which are the records' names; a
    canonical case lists exactly the keys its bytes carry, in their order (an optional key
    the encoder leaves out at its default is not listed), any other every record field."""
    for kind, cls in (
        ("status", ActorStatus),
        ("control", ControlMessage),
        ("credit", CreditGrant),
    ):
        names = [f.name for f in dataclasses.fields(cls)]
        for case in _cases(kind, True):
            if case.get("canonical"):
                payload = bytes.fromhex(case["hex"])
                header = json.loads(payload[10 : 10 + struct.unpack_from("<I", payload, 6)[0]])
                assert list(case["fields"]) == list(header), (kind, case["name"])
                assert set(header) <= set(names), (kind, case["name"])
            else:
                assert list(case["fields"]) == names, (kind, case["name"])
