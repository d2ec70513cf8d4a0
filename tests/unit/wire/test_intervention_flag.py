"""The transition batch's ``intervention`` flag (docs/protocol.md §3.1) on the wire."""

from __future__ import annotations

import dataclasses
import json
import struct

import numpy as np
import pytest

from edge_rl.specs import EnvSpec
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.transitions import decode_transitions, encode_transitions
from tests.harness.batches import small_batch

SPEC = EnvSpec(obs_shape=(2,), num_actions=3)


def test_the_flag_round_trips_and_none_means_no_row():
    acted = np.array([False, True, False, True])
    batch = dataclasses.replace(small_batch(n=4), intervention=acted)
    got = decode_transitions(encode_transitions(batch), SPEC)
    assert got.intervention.tolist() == acted.tolist()
    plain = decode_transitions(encode_transitions(small_batch(n=4)), SPEC)
    assert plain.intervention is None and plain.interventions.tolist() == [False] * 4


def test_a_listed_intervention_of_another_shape_is_refused_even_all_zero():
    """Found by fuzzing: an all-zero flag of shape [n, 1] decoded to None unchecked."""
    payload = encode_transitions(small_batch(n=4), describe=True)
    (hlen,) = struct.unpack_from("<I", payload, 6)
    header = json.loads(payload[10 : 10 + hlen])
    header["arrays"][-1]["shape"] = [4, 1]
    h = json.dumps(header, separators=(",", ":")).encode()
    bad = payload[:6] + struct.pack("<I", len(h)) + h + payload[10 + hlen :]
    with pytest.raises(CodecError) as e:
        decode_transitions(bad, SPEC)
    assert e.value.reason == "shape"
