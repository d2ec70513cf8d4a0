"""The status message's optional runtime breakdown (docs/protocol.md §5.1) on the wire."""

from __future__ import annotations

import json
import struct

import pytest

from edge_rl.types import ACTOR_LOADER_BUCKETS, ACTOR_LOOP_BUCKETS, BREAKDOWN_KEYS, ActorStatus
from edge_rl.wire.envelope import MAGIC_STATUS, SCHEMA_VERSION, CodecError
from edge_rl.wire.messages import decode_status, encode_status

FULL = {
    **{k: 0.25 * (i + 1) for i, k in enumerate(ACTOR_LOOP_BUCKETS)},
    "wall": 5.25,  # 0.25 × (1 + ... + 6)
    **dict.fromkeys(ACTOR_LOADER_BUCKETS, 0.0123),
}


def _with_raw_breakdown(raw: str) -> bytes:
    """A status payload whose header's ``breakdown`` is the JSON text ``raw``, verbatim
    (so that values json.dumps would refuse, such as 1e999, can be sent)."""
    header = json.dumps({"actor_id": "a", "state": "running"})[:-1] + f',"breakdown":{raw}}}'
    h = header.encode()
    return struct.pack("<4sHI", MAGIC_STATUS, SCHEMA_VERSION, len(h)) + h


def test_every_key_is_known_and_the_table_adds_up():
    assert set(FULL) == BREAKDOWN_KEYS
    assert sum(FULL[k] for k in ACTOR_LOOP_BUCKETS) == FULL["wall"]


def test_round_trip():
    status = ActorStatus(actor_id="a", state="running", env_steps=9, breakdown=FULL)
    out = decode_status(encode_status(status))
    assert out == status and out.breakdown == FULL
    # A sender may omit keys, and integers are numbers too.
    out = decode_status(_with_raw_breakdown('{"env_step": 3, "idle": 0}'))
    assert out.breakdown == {"env_step": 3.0, "idle": 0.0}
    assert all(type(v) is float for v in out.breakdown.values())


def test_a_status_from_an_older_actor_has_no_breakdown():
    # A status as actors sent it before the field existed (schema v2, as they are now).
    header = {
        "actor_id": "old",
        "state": "running",
        "board": "rpi4",
        "runtime": "ai_edge_litert",
        "policy_version": 3,
        "env_steps": 100,
        "episodes": 4,
        "transitions_sent": 64,
        "batches_sent": 1,
        "batches_dropped": 0,
        "policies_rejected": 0,
        "env_steps_per_s": 50.0,
        "recent_return": 20.0,
        "time_unix": 1.0,
    }
    h = json.dumps(header).encode()
    payload = struct.pack("<4sHI", MAGIC_STATUS, SCHEMA_VERSION, len(h)) + h
    status = decode_status(payload)
    assert status.actor_id == "old" and status.env_steps == 100 and status.breakdown == {}


@pytest.mark.parametrize(
    "raw",
    [
        "[1.0, 2.0]",  # not an object
        '"fast"',
        "null",
        '{"env_step": -0.5}',  # negative
        '{"env_step": 1e999}',  # parses as inf
        '{"env_step": -1e999}',
        '{"env_step": "1.5"}',  # a string
        '{"env_step": true}',  # a bool is not a number
        '{"env_step": null}',
        '{"env_step": [1.0]}',
        '{"env_step": 1.0, "gpu": 2.0}',  # unknown key
        '{"Env_Step": 1.0}',
    ],
)
def test_bad_breakdowns_reject_the_status(raw):
    with pytest.raises(CodecError) as err:
        decode_status(_with_raw_breakdown(raw))
    assert err.value.reason == "bad_header"


def test_nan_cannot_be_sent_or_received():
    with pytest.raises(ValueError):  # the encoder refuses (allow_nan=False)
        encode_status(ActorStatus("a", "running", breakdown={"idle": float("nan")}))
    with pytest.raises(CodecError) as err:
        decode_status(_with_raw_breakdown('{"idle": NaN}'))
    assert err.value.reason == "bad_header"
