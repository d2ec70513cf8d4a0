"""Fuzz ``decompress_model`` for every model codec: "zlib", "none" and "blocks" (§4, §4.3).

How each case is judged: a reference decoder written from the protocol (``fuzzkit.
zlib_reference``: one complete RFC 1950 stream, nothing after it, at most ``max_bytes``;
``fuzzkit.blocks_reference``: §4.3 decoded block by block; "none": at most ``max_bytes``)
returns the model or None. None -> the decoder must raise ``CodecError``; a model -> the
decoder must return exactly those bytes.
"""

from __future__ import annotations

import functools
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_rl.wire.envelope import CodecError
from edge_rl.wire.policy import CODECS, decompress_model
from tests.fuzz import fuzzkit as fk
from tests.fuzz.budgets import BUDGETS

_TABLE = struct.Struct("<IIIBBI")


def limits(model: bytes) -> st.SearchStrategy[int]:
    return st.sampled_from([len(model), len(model) - 1, len(model) + 1, 100, 8_000_000])


@functools.cache
def _wrapped(model: bytes) -> list[bytes]:
    """The model as raw deflate and as gzip, and 9 MB of zeros as a zlib bomb."""
    out = []
    for body, wbits in ((model, -15), (model, 31), (bytes(9_000_000), 15)):
        c = zlib.compressobj(9, zlib.DEFLATED, wbits)
        out.append(c.compress(body) + c.flush())
    return out


@st.composite
def zlib_case(draw, seeds):
    stream = seeds.zlib_model
    op = draw(st.sampled_from(["bytes", "bytes", "cut", "trail", "recompress", "wrappers"]))
    if op == "bytes":
        data = draw(fk.byte_mutation([stream], 20_000))
    elif op == "cut":
        data = stream[: draw(st.integers(0, len(stream) - 1))]
    elif op == "trail":
        data = stream + draw(st.binary(min_size=1, max_size=8) | st.just(stream))
    elif op == "recompress":  # a valid stream of other bytes: accepted, and those bytes
        model = bytearray(seeds.model)
        del model[draw(st.integers(0, len(model))) :]
        data = zlib.compress(bytes(model) + draw(st.binary(max_size=64)), draw(st.integers(0, 9)))
    else:  # raw deflate, gzip, and a bomb
        data = draw(st.sampled_from(_wrapped(seeds.model)))
    return data, draw(limits(seeds.model))


@st.composite
def blocks_case(draw, seeds):
    payload = bytearray(seeds.blocks_model)
    count = struct.unpack_from("<H", payload, 6)[0]
    op = draw(st.sampled_from(["bytes", "table", "table", "body", "count"]))
    if op == "bytes":
        payload = bytearray(draw(fk.byte_mutation([bytes(payload)], 20_000)))
    elif op == "table":  # one field of one region entry
        k, field = draw(st.integers(0, count - 1)), draw(st.integers(0, 5))
        values = list(_TABLE.unpack_from(payload, 12 + 18 * k))
        bits = (32, 32, 32, 8, 8, 32)[field]
        values[field] = (
            draw(
                st.sampled_from([0, 1, 2, 3, values[field] - 1, values[field] + 1, 2**bits - 1])
                | st.integers(0, 2**bits - 1)
            )
            % 2**bits
        )
        _TABLE.pack_into(payload, 12 + 18 * k, *values)
    elif op == "count":
        struct.pack_into(
            "<HI",
            payload,
            6,
            draw(st.integers(0, 2**16 - 1)),
            draw(
                st.sampled_from(
                    [0, len(seeds.model) - 1, len(seeds.model), len(seeds.model) + 1, 2**32 - 1]
                )
            ),
        )
    else:  # a valid zlib stream of a changed inner body: the region checks are reached
        at = 12 + 18 * count
        body = bytearray(zlib.decompress(bytes(payload[at:])))
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(body) - 1))
            body[i] = draw(st.integers(0, 255))
        if draw(st.booleans()):
            del body[draw(st.integers(0, len(body))) :]
        payload[at:] = zlib.compress(bytes(body))
    return bytes(payload), draw(limits(seeds.model))


def check(payload: bytes, name: str, max_bytes: int, expected: bytes | None) -> None:
    try:
        out = decompress_model(payload, name, max_bytes)
    except CodecError as e:
        assert e.reason in fk.CODEC_REASONS, e.reason
        assert expected is None, f"a valid {name} payload was refused: {e}"
        return
    assert expected is not None, f"a malformed {name} payload was accepted"
    assert out == expected


@BUDGETS
def test_fuzz_zlib(seeds, budget):
    def run(case):
        data, max_bytes = case
        check(data, "zlib", max_bytes, fk.zlib_reference(data, max_bytes))

    fk.fuzz(budget, zlib_case(seeds), run)


@BUDGETS
def test_fuzz_none(seeds, budget):
    def run(case):
        data, max_bytes = case
        check(data, "none", max_bytes, data if len(data) <= max_bytes else None)

    fk.fuzz(budget, st.tuples(fk.byte_mutation([seeds.model], 20_000), limits(seeds.model)), run)


@BUDGETS
def test_fuzz_blocks(seeds, budget):
    def run(case):
        data, max_bytes = case
        check(data, "blocks", max_bytes, fk.blocks_reference(data, max_bytes))

    fk.fuzz(budget, blocks_case(seeds), run)


@pytest.mark.parametrize("name", ["zlib", "none", "blocks"])
def test_the_seeds_decode_to_the_model(seeds, name):
    payload = {"zlib": seeds.zlib_model, "none": seeds.model, "blocks": seeds.blocks_model}[name]
    assert decompress_model(payload, name, len(seeds.model)) == seeds.model
    reference = {"zlib": fk.zlib_reference, "blocks": fk.blocks_reference}.get(name)
    assert reference is None or reference(payload, len(seeds.model)) == seeds.model


def test_unknown_codec_names_are_bad_codec(seeds):
    @fk_settings()
    @given(name=st.text(max_size=8).filter(lambda s: s not in CODECS))
    def run(name):
        with pytest.raises(CodecError) as err:
            decompress_model(seeds.zlib_model, name, 10**7)
        assert err.value.reason == "bad_codec"

    run()


def fk_settings():
    from tests.fuzz.budgets import NORMAL

    return NORMAL
