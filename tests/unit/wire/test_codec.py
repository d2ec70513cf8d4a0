"""Protocol v4 codec: round trips and every rejection the learner relies on."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from edge_rl.specs import EnvSpec
from edge_rl.types import (
    ActorStatus,
    ControlMessage,
    CreditGrant,
    PolicyManifest,
    QuantParams,
    TransitionBatch,
)
from edge_rl.wire.envelope import MAGIC_POLICY, CodecError
from edge_rl.wire.messages import (
    decode_control,
    decode_credit,
    decode_status,
    encode_control,
    encode_credit,
    encode_status,
)
from edge_rl.wire.policy import compress_model, decompress_model
from edge_rl.wire.transitions import decode_transitions, encode_transitions, peek_count

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
PENDULUM = EnvSpec(obs_shape=(3,), action_shape=(1,), action_low=(-2.0,), action_high=(2.0,))


def make_batch(spec: EnvSpec = CARTPOLE, n: int = 5, **override) -> TransitionBatch:
    rng = np.random.default_rng(0)
    if spec.discrete:
        action = rng.integers(0, spec.num_actions, n).astype(np.int64)
    else:
        action = rng.uniform(-1, 1, (n, *spec.action_shape)).astype(np.float32)
    fields = dict(
        actor_id="pi-01",
        session=123,
        seq=7,
        policy_version=3,
        obs=rng.normal(size=(n, *spec.obs_shape)).astype(np.float32),
        action=action,
        reward=np.ones(n, np.float32),
        next_obs=rng.normal(size=(n, *spec.obs_shape)).astype(np.float32),
        terminated=np.array([False] * (n - 1) + [True]),
        truncated=np.zeros(n, bool),
    )
    fields.update(override)
    return TransitionBatch(**fields)


@pytest.mark.parametrize("describe", [False, True], ids=["compact", "described"])
@pytest.mark.parametrize("spec", [CARTPOLE, PENDULUM], ids=["discrete", "box"])
def test_transitions_round_trip(spec, describe):
    batch = make_batch(spec)
    out = decode_transitions(encode_transitions(batch, describe=describe), spec)
    assert (out.actor_id, out.session, out.seq, out.policy_version) == ("pi-01", 123, 7, 3)
    for name in TransitionBatch.ARRAYS:
        np.testing.assert_array_equal(getattr(out, name), getattr(batch, name))
    assert out.action.dtype == spec.action_dtype
    assert out.terminated.dtype == bool and out.terminated[-1] and not out.truncated.any()


def _replace_header(payload: bytes, **changes) -> bytes:
    import json

    magic, version, hlen = struct.unpack_from("<4sHI", payload)
    header = json.loads(payload[10 : 10 + hlen])
    header.update(changes)
    h = json.dumps(header).encode()
    return struct.pack("<4sHI", magic, version, len(h)) + h + payload[10 + hlen :]


def _raw_header(payload: bytes, edit) -> bytes:
    magic, version, hlen = struct.unpack_from("<4sHI", payload)
    h = edit(payload[10 : 10 + hlen])
    return struct.pack("<4sHI", magic, version, len(h)) + h + payload[10 + hlen :]


def described(batch: TransitionBatch) -> bytes:
    """With the header's ``arrays``: what the decoder checks of a layout a sender lists."""
    return encode_transitions(batch, describe=True)


GOOD = described(make_batch())
assert b'"seq":7' in GOOD and b'"arrays"' in GOOD
COMPACT = encode_transitions(make_batch())
assert b'"arrays"' not in COMPACT

# (case id, payload, spec, expected reason)
REJECTIONS = [
    ("empty", b"", CARTPOLE, "truncated"),
    ("prefix only", GOOD[:8], CARTPOLE, "truncated"),
    ("cut arrays", GOOD[:-3], CARTPOLE, "truncated"),
    ("cut header", GOOD[:20], CARTPOLE, "truncated"),
    ("wrong magic", b"XXXX" + GOOD[4:], CARTPOLE, "bad_magic"),
    ("policy magic", MAGIC_POLICY + GOOD[4:], CARTPOLE, "bad_magic"),
    ("version 1", GOOD[:4] + struct.pack("<H", 1) + GOOD[6:], CARTPOLE, "bad_version"),
    ("version 2", GOOD[:4] + struct.pack("<H", 2) + GOOD[6:], CARTPOLE, "bad_version"),
    ("version 4", GOOD[:4] + struct.pack("<H", 4) + GOOD[6:], CARTPOLE, "bad_version"),
    ("version 6", GOOD[:4] + struct.pack("<H", 6) + GOOD[6:], CARTPOLE, "bad_version"),
    ("version 0", GOOD[:4] + struct.pack("<H", 0) + GOOD[6:], CARTPOLE, "bad_version"),
    ("header not json", GOOD[:10] + b"{" * (len(GOOD) - 10), CARTPOLE, "bad_header"),
    ("trailing bytes", GOOD + b"\0\0\0\0", CARTPOLE, "bad_array"),
    ("negative seq", _replace_header(GOOD, seq=-1), CARTPOLE, "bad_header"),
    ("seq not int", _replace_header(GOOD, seq="7"), CARTPOLE, "bad_header"),
    ("n mismatch", _replace_header(GOOD, n=4), CARTPOLE, "shape"),
    (
        "obs wrong shape",
        described(make_batch(obs=np.zeros((5, 3), np.float32))),
        CARTPOLE,
        "shape",
    ),
    (
        "next_obs 2-d extra",
        described(make_batch(next_obs=np.zeros((5, 4, 1), np.float32))),
        CARTPOLE,
        "shape",
    ),
    (
        "float action for discrete",
        described(make_batch(action=np.zeros(5, np.float32))),
        CARTPOLE,
        "dtype",
    ),
    (
        "obs float64",
        _replace_header(
            GOOD,
            arrays=[
                {**a, "dtype": "<f8"} if a["name"] == "obs" else a
                for a in __import__("json").loads(
                    GOOD[10 : 10 + struct.unpack_from("<I", GOOD, 6)[0]]
                )["arrays"]
            ],
        ),
        CARTPOLE,
        "dtype",
    ),
    (
        "nan obs",
        described(make_batch(obs=np.full((5, 4), np.nan, np.float32))),
        CARTPOLE,
        "non_finite",
    ),
    (
        "inf reward",
        described(make_batch(reward=np.array([1, 1, np.inf, 1, 1], np.float32))),
        CARTPOLE,
        "non_finite",
    ),
    (
        "action 2 of 2",
        described(make_batch(action=np.array([0, 1, 2, 0, 1], np.int64))),
        CARTPOLE,
        "action_range",
    ),
    (
        "negative action",
        described(make_batch(action=np.array([0, -1, 0, 0, 1], np.int64))),
        CARTPOLE,
        "action_range",
    ),
    (
        "box action out of bounds",
        described(make_batch(PENDULUM, action=np.full((5, 1), 2.5, np.float32))),
        PENDULUM,
        "action_range",
    ),
    (
        "box action nan",
        described(make_batch(PENDULUM, action=np.full((5, 1), np.nan, np.float32))),
        PENDULUM,
        "non_finite",
    ),
    ("oversized", GOOD + b"\0" * 2_000_000, CARTPOLE, "too_large"),
    (
        "overflowing shape",
        _replace_header(
            GOOD,
            arrays=[
                {**a, "shape": [5, 2**32, 2**32]} if a["name"] == "obs" else a
                for a in __import__("json").loads(
                    GOOD[10 : 10 + struct.unpack_from("<I", GOOD, 6)[0]]
                )["arrays"]
            ],
        ),
        CARTPOLE,
        "truncated",
    ),
    (
        "int reward",
        _replace_header(
            GOOD,
            arrays=[
                {**a, "dtype": "<i8"} if a["name"] == "reward" else a
                for a in __import__("json").loads(
                    GOOD[10 : 10 + struct.unpack_from("<I", GOOD, 6)[0]]
                )["arrays"]
            ],
        ),
        CARTPOLE,
        "dtype",
    ),
    (
        "NaN in header",
        _raw_header(GOOD, lambda h: h.replace(b'"seq":7', b'"seq":NaN')),
        CARTPOLE,
        "bad_header",
    ),
    ("compact n mismatch", _replace_header(COMPACT, n=4), CARTPOLE, "bad_array"),
    ("compact n too large", _replace_header(COMPACT, n=6), CARTPOLE, "truncated"),
    ("compact, other env", encode_transitions(make_batch(PENDULUM)), CARTPOLE, "truncated"),
    ("compact, cut", COMPACT[:-1], CARTPOLE, "truncated"),
    ("compact, trailing", COMPACT + b"\0", CARTPOLE, "bad_array"),
]


@pytest.mark.parametrize(
    "payload,spec,reason", [c[1:] for c in REJECTIONS], ids=[c[0] for c in REJECTIONS]
)
def test_transition_rejections(payload, spec, reason):
    with pytest.raises(CodecError) as err:
        decode_transitions(payload, spec)
    assert err.value.reason == reason


def test_unknown_status_and_control_fields_are_ignored():
    # A newer peer may add fields within schema v1; older readers must keep working.
    status = encode_status(ActorStatus(actor_id="a", state="running"))
    assert decode_status(_replace_header(status, battery_volts=3.7)).actor_id == "a"
    ctrl = encode_control(ControlMessage("running"))
    assert decode_control(_replace_header(ctrl, future_knob=1)).state == "running"


def test_a_compact_batch_needs_the_env_spec_to_decode():
    with pytest.raises(CodecError) as err:
        decode_transitions(COMPACT)
    assert err.value.reason == "bad_header"
    assert decode_transitions(GOOD).seq == 7  # a described one lays itself out


def test_the_compact_header_is_the_described_one_without_its_arrays():
    h_compact = struct.unpack_from("<I", COMPACT, 6)[0]
    h_described = struct.unpack_from("<I", GOOD, 6)[0]
    assert COMPACT[10 + h_compact :] == GOOD[10 + h_described :]  # the same body
    assert h_described - h_compact > 200  # the arrays list is most of the header


def test_peek_count_reads_n_or_zero():
    assert peek_count(GOOD) == 5
    assert peek_count(b"garbage") == 0


def make_manifest(**override) -> PolicyManifest:
    fields = dict(
        policy_version=4,
        algo="dqn",
        env_id="CartPole-v1",
        env_spec=CARTPOLE,
        precision="int8",
        input_quant=QuantParams("int8", 0.02, -3),
        output_quant=QuantParams("int8", 0.1, 5),
        obs_mean=(0.0, 0.1, 0.0, -0.1),
        obs_std=(1.0, 0.5, 0.1, 0.7),
        exploration={"epsilon": 0.05},
        learner_step=1000,
        model_sha256="ab" * 32,
        model_size=1234,
        codec="zlib",
        run_id="r1",
    )
    fields.update(override)
    return PolicyManifest(**fields)


def test_decompress_is_bounded():
    bomb = compress_model(b"\0" * 5_000_000, "zlib")
    with pytest.raises(CodecError) as err:
        decompress_model(bomb, "zlib", 1_000_000)
    assert err.value.reason == "too_large"
    with pytest.raises(CodecError):
        decompress_model(b"not zlib", "zlib", 1000)


def test_status_and_control_round_trip_and_reject():
    status = ActorStatus(actor_id="a", state="running", env_steps=5, recent_return=12.5)
    assert decode_status(encode_status(status)) == status
    ctrl = ControlMessage("running", run_id="0123abcd")
    assert decode_control(encode_control(ctrl)) == ctrl
    for bad in ({"state": "exploding"}, {"run_id": None}, {"run_id": "x" * 65}, {"reason": 1}):
        with pytest.raises(CodecError):
            decode_control(_replace_header(encode_control(ctrl), **bad))
    grant = CreditGrant("0123abcd", session=2**52, credit=640, refused=(3, 4))
    assert decode_credit(encode_credit(grant)) == grant
    for bad in (
        {"credit": -1},
        {"credit": 1.0},
        {"session": True},
        {"refused": [1] * 9},
        {"refused": ["a"]},
        {"run_id": 5},
    ):
        with pytest.raises(CodecError):
            decode_credit(_replace_header(encode_credit(grant), **bad))
    with pytest.raises(CodecError):
        decode_status(b"offline")
