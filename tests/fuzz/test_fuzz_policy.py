"""Fuzz ``decode_policy``: the signature check, and the manifest parser behind it (§4, §4.4).

Two kinds of cases: byte-level mutations of real signed bundles, as an attacker could send
them (almost all must fail the signature; a change in the unsigned body is accepted by the
decoder and caught by the model hash in the slot); and mutated manifests *re-signed* with
the test's own key, so the mutation really reaches ``manifest_from_dict``.

How each case is judged: ``fuzzkit.policy_violation`` checks the prefix, the key id and the
Ed25519 signature (with ``cryptography`` directly), then the manifest against §4's table.
A violation -> ``CodecError`` with a §7 reason; none -> accepted, with the body as sent,
and the bundle round-trips ``encode_policy``.
"""

from __future__ import annotations

import json

from edge_rl.wire.envelope import CodecError
from edge_rl.wire.policy import decode_policy, encode_policy, manifest_to_dict
from tests.fuzz import fuzzkit as fk
from tests.fuzz.budgets import BUDGETS
from tests.fuzz.policy_cases import payloads, split_signed

MAX = 1_000_000


def check_policy(payload: bytes, seeds) -> None:
    verifier = seeds.signer.verifier()
    why = fk.policy_violation(payload, verifier, MAX)
    try:
        bundle = decode_policy(payload, verifier, MAX)
    except CodecError as e:
        assert e.reason in fk.CODEC_REASONS, e.reason
        assert why is None or e.reason != "internal_error"
        assert why is not None, f"a valid bundle was refused: {e}"
        return
    assert why is None, f"a malformed bundle was accepted: {why}: {bundle.manifest}"
    assert bundle.payload == split_signed(payload)[2]
    as_json = json.loads(json.dumps(manifest_to_dict(bundle.manifest)))
    assert fk.manifest_violation(as_json) is None
    assert decode_policy(encode_policy(bundle, seeds.signer), verifier) == bundle


def test_the_seeds_are_valid(seeds):
    for payload in (seeds.policy_zlib, seeds.policy_blocks):
        assert fk.policy_violation(payload, seeds.signer.verifier(), MAX) is None
        check_policy(payload, seeds)


@BUDGETS
def test_fuzz_decode_policy(seeds, budget):
    fk.fuzz(budget, payloads(seeds), lambda payload: check_policy(payload, seeds))
