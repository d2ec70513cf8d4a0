"""Fuzz the transition decoder (``decode_transitions``, ``peek_count``, ``validate_batch``).

How each case is judged: ``fuzzkit.transition_violation`` reads the payload as
docs/protocol.md §3.1 says, independently of the decoder. If it names a violation the
payload is malformed and the decoder must raise ``CodecError`` with a §7 reason; if it
finds none (a mutation that kept the payload valid, e.g. a changed float), the decoder must
accept it, every stated invariant must hold, and the batch must round-trip the encoder.
"""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from edge_rl.types import TransitionBatch
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.transitions import (
    decode_transitions,
    encode_transitions,
    peek_count,
    validate_batch,
)
from tests.fuzz import fuzzkit as fk
from tests.fuzz.budgets import BUDGETS
from tests.fuzz.transition_cases import payloads

MAX = 1_000_000


def check_transitions(payload: bytes, spec) -> None:
    why = fk.transition_violation(payload, spec, MAX)
    count = peek_count(payload)  # the ingest's reject path: must never raise
    assert type(count) is int and 0 <= count < 10**7
    try:
        batch = decode_transitions(payload, spec, MAX)
    except CodecError as e:
        assert e.reason in fk.CODEC_REASONS, e.reason
        assert why is not None, f"a valid payload was refused: {e}"
        return
    assert why is None, f"a malformed payload was accepted: {why}"
    validate_batch(batch, spec)  # every invariant of §3.1 on the record
    assert count == len(batch) > 0
    again = decode_transitions(encode_transitions(batch), spec, MAX)
    assert (again.actor_id, again.session, again.seq, again.policy_version) == (
        batch.actor_id,
        batch.session,
        batch.seq,
        batch.policy_version,
    )
    for name in TransitionBatch.ARRAYS:
        a, b = getattr(batch, name), getattr(again, name)
        if a is None:  # no intervention: none after the round trip either
            assert b is None, name
            continue
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()


def test_the_seeds_are_valid(seeds):
    for payload, spec in (
        (seeds.cartpole, seeds.cartpole_spec),
        (seeds.pendulum, seeds.pendulum_spec),
        (seeds.cartpole_compact, seeds.cartpole_spec),
        (seeds.pendulum_compact, seeds.pendulum_spec),
    ):
        assert fk.transition_violation(payload, spec, MAX) is None
        batch = decode_transitions(payload, spec)
        assert batch.terminated.any() or batch.truncated.any() or not spec.discrete
        assert batch.intervention is not None and batch.intervention.sum() >= 2
        check_transitions(payload, spec)


@BUDGETS
def test_fuzz_decode_transitions(seeds, budget):
    fk.fuzz(budget, payloads(seeds), lambda case: check_transitions(*case))


# --- validate_batch on records (not payloads): what a caller may build by hand ----------


@st.composite
def batches(draw, spec):
    n = draw(st.integers(0, 4))
    act = (n,) if spec.discrete else (n, *spec.action_shape)
    want = {
        "obs": ((n, *spec.obs_shape), np.float32),
        "next_obs": ((n, *spec.obs_shape), np.float32),
        "action": (act, spec.action_dtype),
        "reward": ((n,), np.float32),
        "terminated": ((n,), np.bool_),
        "truncated": ((n,), np.bool_),
        "intervention": ((n,), np.bool_),  # v5; None (no row an intervention's) below
    }
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    arrays = {}
    for name, (shape, dtype) in want.items():
        if draw(st.integers(0, 5)) == 0:
            shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5))
        if draw(st.integers(0, 5)) == 0:
            dtype = draw(st.sampled_from([np.float64, np.int64, np.int32, np.uint8, np.float32]))
        if np.dtype(dtype).kind in "iub":  # in range for a discrete action, with a bit over
            a = rng.integers(0, max(spec.num_actions, 1) + 1, shape).astype(dtype)
        else:  # in the bounds of a Box action, with a bit over
            a = rng.uniform(-2.2, 2.2, shape).astype(dtype)
        if a.size and draw(st.integers(0, 3)) == 0:  # one special value somewhere
            special = draw(st.sampled_from([np.nan, np.inf, -np.inf, -1, 2, 3e38]))
            with np.errstate(invalid="ignore", over="ignore"):
                a.flat[draw(st.integers(0, a.size - 1))] = np.asarray(special).astype(dtype)
        arrays[name] = a
    if draw(st.integers(0, 2)) == 0:
        arrays["intervention"] = None
    return TransitionBatch("sim-00", 0, 0, 0, **arrays)


def record_violation(b: TransitionBatch, spec) -> str | None:
    n = b.reward.shape[0] if b.reward.ndim else None
    if not n:
        return "no transitions"
    act = (n,) if spec.discrete else (n, *spec.action_shape)
    shapes = {
        "obs": (n, *spec.obs_shape),
        "next_obs": (n, *spec.obs_shape),
        "action": act,
        "reward": (n,),
        "terminated": (n,),
        "truncated": (n,),
    }
    if any(getattr(b, k).shape != s for k, s in shapes.items()):
        return "shape"
    if b.intervention is not None and b.intervention.shape != (n,):  # None: no row was
        return "intervention shape"
    if b.obs.dtype != np.float32 or b.next_obs.dtype != np.float32:
        return "obs dtype"
    if b.action.dtype != spec.action_dtype:
        return "action dtype"
    floats = [b.obs, b.next_obs, b.reward] + ([] if spec.discrete else [b.action])
    if not all(np.isfinite(a).all() for a in floats):
        return "non-finite"
    if spec.discrete and not ((b.action >= 0) & (b.action < spec.num_actions)).all():
        return "action range"
    if not spec.discrete and not (
        (b.action.reshape(n, -1) >= np.float32(spec.action_low)).all()
        and (b.action.reshape(n, -1) <= np.float32(spec.action_high)).all()
    ):
        return "action range"
    return None


@BUDGETS
def test_fuzz_validate_batch(seeds, budget):
    specs = st.sampled_from([seeds.cartpole_spec, seeds.pendulum_spec])

    def check(case):
        spec, batch = case
        why = record_violation(batch, spec)
        try:
            validate_batch(batch, spec)
        except CodecError as e:
            assert e.reason in fk.CODEC_REASONS
            assert why is not None, f"a valid record was refused: {e}"
            return
        assert why is None, f"an invalid record was accepted: {why}"

    fk.fuzz(budget, specs.flatmap(lambda s: st.tuples(st.just(s), batches(s))), check)


def test_a_header_length_past_the_end_is_truncated(seeds):
    payload = bytearray(seeds.cartpole)
    payload[6:10] = struct.pack("<I", 2**32 - 1)
    assert peek_count(bytes(payload)) == 0
