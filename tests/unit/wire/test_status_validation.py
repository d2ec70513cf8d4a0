"""A status is type- and range-checked field by field: it feeds the live view, the summary
and the credit ledger (a string where a count belongs used to crash the live view)."""

from __future__ import annotations

import json
import struct

import pytest

from edge_rl.types import ActorStatus
from edge_rl.wire.envelope import MAGIC_STATUS, SCHEMA_VERSION, CodecError
from edge_rl.wire.messages import decode_status

GOOD = dict(
    actor_id="a0",
    state="running",
    board="rpi4",
    runtime="ai_edge_litert",
    policy_version=3,
    env_steps=100,
    episodes=4,
    transitions_sent=64,
    batches_sent=1,
    env_steps_per_s=50.0,
    recent_return=20.0,
    time_unix=1.0,
)


def raw(**changes) -> bytes:
    header = {**GOOD, **changes}
    h = json.dumps(header).encode()
    return struct.pack("<4sHI", MAGIC_STATUS, SCHEMA_VERSION, len(h)) + h


def test_a_well_formed_status_decodes_and_optional_fields_take_defaults():
    s = decode_status(raw(recent_return=None))
    assert s == ActorStatus(**{**GOOD, "recent_return": None})
    minimal = decode_status(raw())
    assert minimal.batches_dropped == 0 and minimal.breakdown == {}


BAD = [
    ("env_steps a string", {"env_steps": "1000"}),
    ("env_steps negative", {"env_steps": -1}),
    ("env_steps a float", {"env_steps": 10.0}),
    ("env_steps 2^53", {"env_steps": 2**53}),
    ("policy_version a bool", {"policy_version": True}),
    ("state unknown", {"state": "hacked"}),
    ("state missing", {"state": None}),
    ("board a number", {"board": 5}),
    ("board too long", {"board": "x" * 129}),
    ("actor_id a list", {"actor_id": ["a0"]}),
    ("steps per s a string", {"env_steps_per_s": "fast"}),
    ("steps per s negative", {"env_steps_per_s": -3.0}),
    ("recent_return a string", {"recent_return": "high"}),
    ("time_unix an object", {"time_unix": {"t": 1}}),
    ("breakdown not seconds", {"breakdown": {"wall": "long"}}),
]


@pytest.mark.parametrize("changes", [c for _, c in BAD], ids=[i for i, _ in BAD])
def test_a_mistyped_status_is_refused(changes):
    with pytest.raises(CodecError) as err:
        decode_status(raw(**changes))
    assert err.value.reason == "bad_header"


def test_an_infinite_return_is_refused():
    payload = raw().replace(b'"recent_return": 20.0', b'"recent_return": 1e999')
    with pytest.raises(CodecError):
        decode_status(payload)
