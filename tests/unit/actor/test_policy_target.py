"""A board's side of a rollout (docs/protocol.md §5.5) in PolicySlot alone: a target's
bundle is verified and loaded like any policy, the policy it replaced is held, and a
target without a bundle swaps that one back in; everything refused is counted."""

from __future__ import annotations

import pytest

from edge_rl.actor.policy_slot import PolicySlot
from edge_rl.types import PolicyTarget
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import decode_target, encode_target
from edge_rl.wire.policy import encode_policy
from edge_rl.wire.signing import Signer
from tests.harness.cartpole_policies import CARTPOLE, MODELS, policy_bundle

RUN, START = "r1", "s1"
LIMIT = 8_000_000


def signed(quality: str, version: int, signer: Signer, run_id: str = START) -> bytes:
    bundle = policy_bundle(MODELS[quality].read_bytes(), run=RUN, run_id=run_id, version=version)
    return encode_policy(bundle, signer)


def digest_of(payload: bytes, signer: Signer) -> str:
    from edge_rl.wire.policy import decode_policy

    return decode_policy(payload, signer.verifier()).manifest.model_sha256


def slot_serving(signer: Signer) -> PolicySlot:
    slot = PolicySlot(CARTPOLE, signer.verifier(), run=RUN, run_id=START)
    slot.offer(signed("good", 3, signer))
    slot.load_pending()
    assert slot.version == 3 and slot.previous is None
    return slot


def target(payload: bytes, version: int, digest: str, run_id: str = START) -> bytes:
    return encode_target(PolicyTarget(run_id, version, digest, "v4", payload))


def test_a_target_s_bundle_is_loaded_and_the_previous_policy_swapped_back(policy_keys):
    signer, _ = policy_keys
    slot = slot_serving(signer)
    old = slot.digest
    bad = signed("random", 4, signer)
    slot.target(target(bad, 4, digest_of(bad, signer)), LIMIT)
    slot.load_pending()
    assert (slot.version, slot.digest) == (4, digest_of(bad, signer))
    assert slot.previous.manifest.model_sha256 == old
    slot.target(target(b"", 3, old), LIMIT)  # the rollback: no payload, nothing verified
    assert (slot.version, slot.digest) == (3, old) and slot.previous.manifest.policy_version == 4
    slot.target(target(b"", 3, old), LIMIT)  # again (QoS 1): the same policy stays
    assert (slot.version, slot.digest) == (3, old)
    assert not slot.rejected and slot.failed == 0
    good2 = signed("good2", 4, signer)  # the next rollout may use the number again
    slot.target(target(good2, 4, digest_of(good2, signer)), LIMIT)
    slot.load_pending()
    assert (slot.version, slot.digest) == (4, digest_of(good2, signer))


def test_refusals_are_counted_and_only_what_a_policy_is_counts_as_failed(policy_keys):
    signer, _ = policy_keys
    slot = slot_serving(signer)
    forged = signed("random", 4, Signer.generate())  # signed, by a key the board does not trust
    slot.target(target(forged, 4, "0" * 64), LIMIT)
    slot.load_pending()
    assert slot.rejected["unknown_key"] == 1 and slot.failed == 1 and slot.version == 3
    slot.target(target(b"", 2, "1" * 64), LIMIT)  # a policy it never held
    assert slot.rejected["not_held"] == 1 and slot.failed == 2 and slot.version == 3
    slot.target(target(b"", 3, slot.digest, run_id="another start"), LIMIT)
    slot.offer(signed("good", 2, signer))  # older than the one it serves
    slot.load_pending()
    assert slot.rejected["wrong_run"] == 1 and slot.rejected["stale_version"] == 1
    assert slot.failed == 2  # those say when a policy came, not what it is
    slot.target(b"ERLD garbage", LIMIT)
    assert slot.rejected["bad_version"] == 1 and slot.failed == 3 and slot.version == 3


def test_a_new_run_start_drops_the_previous_policy_too(policy_keys):
    signer, _ = policy_keys
    slot = slot_serving(signer)
    slot.offer(signed("good2", 4, signer))
    slot.load_pending()
    assert slot.previous is not None
    slot.set_run("s2")
    assert slot.current is None and slot.previous is None


def test_the_target_codec_round_trips_and_refuses_what_is_not_a_target():
    t = PolicyTarget("s1", 7, "ab" * 32, "v7", b"bundle bytes")
    assert decode_target(encode_target(t), LIMIT) == t
    rollback = PolicyTarget("s1", 6, "cd" * 32)
    assert decode_target(encode_target(rollback), LIMIT) == rollback
    for bad in (
        PolicyTarget("s1", 0, "ab" * 32),
        PolicyTarget("s1", 7, "AB" * 32),
        PolicyTarget("s1", 7, "ab" * 31),
        PolicyTarget("x" * 65, 7, "ab" * 32),
        PolicyTarget("s1", 7, "ab" * 32, "r" * 65),
    ):
        with pytest.raises(CodecError) as e:
            decode_target(encode_target(bad), LIMIT)
        assert e.value.reason == "bad_header"
    with pytest.raises(CodecError) as e:
        decode_target(encode_target(t), 20)
    assert e.value.reason == "too_large"


def test_a_board_that_restarts_mid_rollout_serves_its_retained_target(policy_keys):
    """A restarted process gets its retained target before it has joined the run start
    (its control is handled between two steps): the target waits for the join, whatever
    policy the run's topic or a welcome brings meanwhile, and is not refused as wrong_run."""
    signer, _ = policy_keys
    slot = PolicySlot(CARTPOLE, signer.verifier(), run=RUN)  # a new process: no run start yet
    new = signed("good2", 4, signer)
    slot.target(target(new, 4, digest_of(new, signer)), LIMIT)
    slot.offer(signed("good", 3, signer))  # the retained policy, or the welcome's, after it
    slot.load_pending()
    assert slot.version == 0 and not slot.rejected  # nothing before the join
    slot.set_run(START)
    slot.load_pending()
    assert (slot.version, slot.digest) == (4, digest_of(new, signer))
    assert not slot.rejected and slot.failed == 0


def test_a_target_of_the_next_run_start_waits_for_the_join(policy_keys):
    signer, _ = policy_keys
    slot = slot_serving(signer)  # in START
    new = signed("good2", 4, signer, run_id="s2")
    slot.target(target(new, 4, digest_of(new, signer), run_id="s2"), LIMIT)
    assert slot.rejected["wrong_run"] == 1 and slot.version == 3  # not this run start's
    slot.set_run("s2")  # its control is handled: the kept target is this run start's now
    slot.load_pending()
    assert (slot.version, slot.digest) == (4, digest_of(new, signer))
    slot.set_run("s3")  # a target is for one run start only
    slot.load_pending()
    assert slot.version == 0


# --- what docs/protocol.md §5.5 states (its Limits, disagreements and repeats) ---------


def test_a_target_whose_header_and_bundle_disagree_serves_the_bundle(policy_keys):
    """With a body the bundle is checked alone; the statuses then name the bundle's policy."""
    signer, _ = policy_keys
    slot = slot_serving(signer)
    good2 = signed("good2", 5, signer)
    slot.target(target(good2, 9, "f" * 64), LIMIT)  # the header names another version/digest
    slot.load_pending()
    assert (slot.version, slot.digest) == (5, digest_of(good2, signer)) and not slot.rejected


def test_the_same_policy_again_is_no_refusal_another_of_its_version_is_stale(policy_keys):
    signer, _ = policy_keys
    slot = slot_serving(signer)
    same = signed("good", 3, signer)  # the very bytes it serves (Ed25519 is deterministic)
    for _ in range(2):
        slot.offer(same)
        slot.load_pending()
    assert not slot.rejected and slot.failed == 0 and slot.version == 3  # no news, no count
    other = signed("good2", 3, signer)  # another policy under the version it serves
    slot.target(target(other, 3, digest_of(other, signer)), LIMIT)
    slot.load_pending()
    assert dict(slot.rejected) == {"stale_version": 1} and slot.failed == 0
    assert slot.digest == digest_of(same, signer)


def test_a_target_s_size_limits(policy_keys):
    signer, _ = policy_keys
    slot = slot_serving(signer)
    limit = LIMIT + 128 * 1024  # what the actor passes: max_policy_bytes + 128 KiB
    big = encode_target(PolicyTarget(START, 4, "0" * 64, "v4", b"\0" * (limit + 1)))
    slot.target(big, limit)
    assert slot.rejected["too_large"] == 1
    long_header = b"ERLD\x05\x00" + (65_537).to_bytes(4, "little") + b" " * 65_537
    slot.target(long_header, limit)
    assert slot.rejected["truncated"] == 1 and slot.version == 3
