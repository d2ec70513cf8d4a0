"""The "blocks" model codec: exact round trips, sizes that show the structure, strict decode."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import numpy as np
import pytest

from edge_rl.wire import blocks
from edge_rl.wire.blocks import Region
from edge_rl.wire.envelope import CodecError
from edge_rl.wire.policy import compress_model, decompress_model

MAX = 1 << 20


def _random_regions(rng: np.random.Generator, size: int) -> list[Region]:
    """Non-overlapping regions of random shapes and dtypes, in random order."""
    regions, at = [], int(rng.integers(0, 64))
    while True:
        dtype = str(rng.choice(list(blocks.DTYPES)))
        rows, cols = (int(n) for n in rng.choice([1, 2, 3, 4, 6, 8, 16, 24], size=2))
        r = Region(at, rows, cols, dtype)
        if at + r.nbytes > size:
            break
        regions.append(r)
        at += r.nbytes + int(rng.integers(0, 64))
    rng.shuffle(regions)
    return regions


def _with_structure(model: bytearray, r: Region, rng: np.random.Generator) -> None:
    """Overwrite some 2x2 / 4x4 blocks of ``r`` with zero or circulant blocks."""
    dtype = blocks.DTYPES[r.dtype]
    a = np.frombuffer(model, dtype, r.rows * r.cols, r.offset).reshape(r.rows, r.cols).copy()
    b = 4 if r.rows % 4 == 0 and r.cols % 4 == 0 else 2
    if r.rows % b or r.cols % b:
        return
    for p in range(r.rows // b):
        for q in range(r.cols // b):
            kind = rng.integers(3)
            block = a[p * b : (p + 1) * b, q * b : (q + 1) * b]  # view [b, b]
            if kind == 0:
                block[:] = 0
            elif kind == 1:
                block[:] = [np.roll(block[0], r_) for r_ in range(b)]
    model[r.offset : r.offset + r.nbytes] = a.tobytes()


@pytest.mark.parametrize("seed", range(12))
def test_round_trip_is_exact_on_random_bytes_and_regions(seed: int) -> None:
    rng = np.random.default_rng(seed)
    model = bytearray(rng.integers(0, 256, size=int(rng.integers(200, 6000)), dtype=np.uint8))
    regions = _random_regions(rng, len(model))
    if seed % 2:  # half the cases with blocks to find
        for r in regions:
            _with_structure(model, r, rng)
    model = bytes(model)
    payload = blocks.encode(model, regions)
    assert blocks.decode(payload, len(model)) == model
    via_codec = compress_model(model, "blocks", regions)
    assert decompress_model(via_codec, "blocks", MAX) == model


def test_round_trip_without_regions_and_of_an_empty_model() -> None:
    for model in (b"", b"\x01\x02\x03", bytes(1000)):
        assert blocks.decode(blocks.encode(model, []), MAX) == model


def _known_matrix(rng: np.random.Generator, classes: np.ndarray, b: int) -> np.ndarray:
    """``classes [R, C]`` (0 zero, 1 circulant, 2 dense) -> int8 ``[R*b, C*b]`` of those blocks."""
    out = []
    for row in classes:
        cells = []
        for kind in row:
            dense = rng.integers(-127, 128, size=(b, b)).astype(np.int8)
            dense[dense == 0] = 1  # no accidental zeros or circulants in a dense block
            if kind == 0:
                cells.append(np.zeros((b, b), np.int8))
            elif kind == 1:
                cells.append(np.stack([np.roll(dense[0], r) for r in range(b)]))
            else:
                cells.append(dense)
        out.append(np.concatenate(cells, axis=1))
    return np.concatenate(out, axis=0)  # [R*b, C*b]


def test_size_follows_the_block_counts_and_beats_zlib() -> None:
    rng = np.random.default_rng(0)
    classes = rng.choice(3, size=(64, 64), p=[0.6, 0.3, 0.1])  # 4096 blocks of 4 x 4
    w = _known_matrix(rng, classes, 4)  # [256, 256] int8
    head, tail = rng.integers(0, 256, 300, dtype=np.uint8), rng.integers(0, 256, 100, np.uint8)
    model = head.tobytes() + w.tobytes() + tail.tobytes()
    region = Region(len(head), 256, 256, "int8")
    payload = blocks.encode(model, [region])

    (entry,) = [blocks._REGION.unpack_from(payload, blocks._PREFIX.size)]
    n_zero, n_circ, n_dense = (int((classes == k).sum()) for k in range(3))
    expected = 4096 // 4 + 4 * n_circ + 16 * n_dense  # 2-bit classes + row 0s + dense blocks
    assert entry[4:] == (4, expected)  # b = 4 chosen, packed length exact
    # The values are random bytes: zlib cannot shrink them, nor the 400 of head and tail.
    assert abs(len(payload) - (expected + 400)) < 0.05 * expected, (len(payload), expected)
    assert len(payload) < 0.6 * len(zlib.compress(model, 9))
    assert blocks.decode(payload, len(model)) == model


def test_ties_go_to_the_larger_block() -> None:
    # All zero 8 x 8: one byte of classes at b = 4 (4 blocks) and at b = 8 (1 block).
    payload = blocks.encode(bytes(256), [Region(0, 8, 8, "float32")])
    assert blocks._REGION.unpack_from(payload, blocks._PREFIX.size)[4] == 8


def test_a_region_that_would_not_shrink_stays_in_the_base_model() -> None:
    noise = np.random.default_rng(1).integers(1, 256, 64 * 64, dtype=np.uint8).tobytes()
    payload = blocks.encode(noise, [Region(0, 64, 64, "int8")])
    assert struct.unpack_from("<H", payload, 6)[0] == 0  # no region in the table
    assert blocks.decode(payload, len(noise)) == noise


def test_floats_are_compared_as_bit_patterns() -> None:
    # -0.0 == 0.0 and NaN != NaN as floats; the codec must keep every bit of both.
    w = np.zeros((4, 4), np.float32)
    w[1, 2], w[3, 0] = -0.0, np.nan
    model = w.tobytes()
    assert blocks.decode(blocks.encode(model, [Region(0, 4, 4, "float32")]), MAX) == model


def test_encode_rejects_bad_regions() -> None:
    for regions in (
        [Region(0, 4, 4, "int4")],
        [Region(-1, 2, 2, "int8")],
        [Region(10, 4, 4, "float32")],  # past the end
        [Region(0, 4, 4, "int8"), Region(8, 2, 2, "int8")],  # overlapping
    ):
        with pytest.raises(ValueError):
            blocks.encode(bytes(64), regions)
    with pytest.raises(ValueError, match="regions"):
        compress_model(bytes(64), "blocks")


# --- malformed payloads ---------------------------------------------------------------

_MODEL_REGIONS = [Region(16, 8, 8, "int8"), Region(96, 4, 8, "float16")]


def _valid() -> tuple[bytes, bytes]:
    rng = np.random.default_rng(7)
    model = bytearray(rng.integers(1, 256, 200, dtype=np.uint8))
    model[16:80] = bytes(64)  # region 0 all zero: b = 8, a single ZERO block
    w = _known_matrix(rng, np.array([[1, 2]]), 4).view(np.uint8)  # [4, 8] int8 bytes
    model[96:160] = np.repeat(w, 2, axis=1).tobytes()  # float16 bit patterns, circulant + dense
    model = bytes(model)
    return model, blocks.encode(model, _MODEL_REGIONS)


def _table_end(p: bytes) -> int:
    return blocks._PREFIX.size + struct.unpack_from("<H", p, 6)[0] * blocks._REGION.size


def _edit(k: int, field: int, value: int) -> Callable[[bytes], bytes]:
    """Set field ``field`` (offset, rows, cols, dtype, b, length) of table entry ``k``."""

    def mutate(p: bytes) -> bytes:
        at = blocks._PREFIX.size + k * blocks._REGION.size
        entry = list(blocks._REGION.unpack_from(p, at))
        entry[field] = value
        return p[:at] + blocks._REGION.pack(*entry) + p[at + blocks._REGION.size :]

    return mutate


def _rebody(change: Callable[[bytearray], None]) -> Callable[[bytes], bytes]:
    """Inflate the body, ``change`` it, deflate it again (to reach checks past zlib)."""

    def mutate(p: bytes) -> bytes:
        body = bytearray(zlib.decompress(p[_table_end(p) :]))
        change(body)
        return p[: _table_end(p)] + zlib.compress(bytes(body), 9)

    return mutate


def _set(at: int, value: int) -> Callable[[bytearray], None]:
    def change(body: bytearray) -> None:
        body[at] = value

    return change


# _valid()'s body: the 200-byte base model; at 200 region 0's one class byte (b = 8, one
# ZERO block); at 201 region 1's (b = 4: CIRCULANT, DENSE = 0b1001), then its 4 + 16
# float16 (41 bytes in all).
# A 1 x 1 int8 region at b = 1 whose one block claims CIRCULANT (encode never writes it).
_B1_CIRCULANT = (
    blocks._PREFIX.pack(b"ERLB", 1, 1, 1)
    + blocks._REGION.pack(0, 1, 1, 0, 1, 2)
    + zlib.compress(b"\x00" + b"\x01\x07")
)
CASES = {
    "short prefix": (lambda p: p[:7], "truncated"),
    "bad magic": (lambda p: b"ERLZ" + p[4:], "bad_magic"),
    "unknown version": (lambda p: p[:4] + struct.pack("<H", 2) + p[6:], "bad_version"),
    "model over the limit": (lambda p: p[:8] + struct.pack("<I", MAX + 1) + p[12:], "too_large"),
    "table cut short": (lambda p: p[:30], "truncated"),
    "more regions than the table": (lambda p: p[:6] + struct.pack("<H", 900) + p[8:], "truncated"),
    "unknown dtype": (_edit(1, 3, 7), "bad_region"),
    "zero rows": (_edit(0, 1, 0), "bad_region"),
    "b does not divide": (_edit(1, 4, 3), "bad_region"),
    "b is zero": (_edit(0, 4, 0), "bad_region"),
    "region past the model": (_edit(1, 0, 190), "bad_region"),
    "overlapping regions": (_edit(1, 0, 20), "bad_region"),
    "unsorted regions": (lambda p: _edit(1, 0, 16)(_edit(0, 0, 96)(p)), "bad_region"),
    "length too small for the classes": (_edit(0, 5, 0), "bad_region"),
    "length longer than the body": (_edit(1, 5, 41 + 1), "truncated"),
    "length shorter than the body": (_edit(1, 5, 41 - 1), "bad_model"),
    "body not zlib": (lambda p: p[: _table_end(p)] + b"not zlib at all", "bad_model"),
    "body cut short": (lambda p: p[:-5], "truncated"),
    "bytes after the stream": (lambda p: p + b"\x00", "bad_model"),
    "zip bomb": (lambda p: p[: _table_end(p)] + zlib.compress(bytes(10**7)), "bad_model"),
    "region not zeroed in the base": (_rebody(_set(20, 1)), "bad_region"),
    "class 3": (_rebody(_set(200, 3)), "bad_region"),
    "padding bits set": (_rebody(_set(200, 0b0100)), "bad_region"),
    "classes disagree with the length": (_rebody(_set(201, 0b1010)), "bad_region"),
    "circulant block at b = 1": (lambda p: _B1_CIRCULANT, "bad_region"),
}


@pytest.mark.parametrize("mutate,reason", CASES.values(), ids=CASES.keys())
def test_decode_rejects_malformed_payloads(mutate: Callable[[bytes], bytes], reason: str) -> None:
    model, payload = _valid()
    assert blocks.decode(payload, MAX) == model  # the unmutated payload is fine
    with pytest.raises(CodecError) as err:
        blocks.decode(mutate(payload), MAX)
    assert err.value.reason == reason
