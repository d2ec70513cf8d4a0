"""Fuzz the status, control and credit decoders (docs/protocol.md §5).

How each case is judged: ``fuzzkit.status_violation`` / ``control_violation`` /
``credit_violation`` read the
header as §5's tables say. A violation -> ``CodecError`` with a §7 reason; none (unknown keys
added, a counter changed to another int ...) -> accepted, and the record round-trips.
"""

from __future__ import annotations

import dataclasses

from hypothesis import strategies as st

from edge_rl.wire.envelope import CodecError
from edge_rl.wire.messages import (
    decode_control,
    decode_credit,
    decode_status,
    encode_control,
    encode_credit,
    encode_status,
)
from tests.fuzz import fuzzkit as fk
from tests.fuzz.budgets import BUDGETS

MAX = 64 * 1024


def payloads(*seeds: bytes) -> st.SearchStrategy[bytes]:
    seeds = list(seeds)
    return fk.byte_mutation(seeds, MAX) | fk.header_mutation(seeds) | fk.header_mutation(seeds)


def check(payload: bytes, decode, encode, violation) -> None:
    why = violation(payload)
    try:
        record = decode(payload)
    except CodecError as e:
        assert e.reason in fk.CODEC_REASONS, e.reason
        assert why is not None, f"a valid payload was refused: {e}"
        return
    assert why is None, f"a malformed payload was accepted: {why}: {record}"
    assert decode(encode(record)) == record
    assert violation(encode(record)) is None


@BUDGETS
def test_fuzz_decode_status(seeds, budget):
    fk.fuzz(
        budget,
        payloads(seeds.status, seeds.status_safe),
        lambda p: check(p, decode_status, encode_status, fk.status_violation),
    )


@BUDGETS
def test_fuzz_decode_control(seeds, budget):
    fk.fuzz(
        budget,
        payloads(seeds.control),
        lambda p: check(p, decode_control, encode_control, fk.control_violation),
    )


@BUDGETS
def test_fuzz_decode_credit(seeds, budget):
    fk.fuzz(
        budget,
        fk.byte_mutation([seeds.credit], 4096) | fk.header_mutation([seeds.credit]),
        lambda p: check(p, decode_credit, encode_credit, fk.credit_violation),
    )


def test_the_seeds_are_valid(seeds):
    status = decode_status(seeds.status)
    assert fk.status_violation(seeds.status) is None and status.breakdown
    assert status.safety["clipped"] == 14 and status.interventions and status.jitter_p99_ms
    safe = decode_status(seeds.status_safe)
    assert fk.status_violation(seeds.status_safe) is None
    assert (safe.state, safe.safe_reason, safe.safety) == (
        "safe",
        "estop",
        {"estop": 12, "nonfinite": 1},
    )
    control = decode_control(seeds.control)
    assert fk.control_violation(seeds.control) is None and control.run_id
    credit = decode_credit(seeds.credit)
    assert fk.credit_violation(seeds.credit) is None and credit.refused == (17, 99)
    assert dataclasses.asdict(status)["session"] == credit.session
