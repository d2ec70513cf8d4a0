"""The "blocks" model codec: lossless, and it sees block-circulant / block-sparse weights.

Group-sparse training (GST) leaves the hidden Dense kernels made of ``b x b`` blocks that
are all zero or circulant (row ``r`` is row 0 rotated right by ``r``). zlib sees neither.
This codec cuts each weight region (found on the host by ``edge_rl.export.regions``) into
``b x b`` blocks, keeps one 2-bit class per block and only the bytes a class needs::

    ZERO       0 bytes          (every byte of the block is 0)
    CIRCULANT  b elements       (row 0; b >= 2; bit patterns compared, not float ==)
    DENSE      b * b elements

and picks, per region, the ``b`` (from ``block_sizes``, and 1) with the fewest bytes (ties:
the larger ``b``). That region is then zeroed in a copy of the model, which zlib squeezes
away, and its packed data follow the model. Payload layout (integers little-endian)::

    offset  size     field
    0       4        magic b"ERLB"
    4       2        format version (1)
    6       2        region count K
    8       4        model length N
    12      18 * K   regions, sorted by offset, not overlapping:
                     offset u32, rows u32, cols u32, dtype u8 (0 int8, 1 float16,
                     2 float32), b u8, packed length L u32
    12+18K  ...      zlib (level 9) of: the model with every region zeroed (N bytes),
                     then each region's packed data (L bytes each), in order

A region's packed data: the classes (0 zero, 1 circulant, 2 dense) of its blocks in
row-major block order, four per byte from the low bits up, then the row 0 of every
circulant block, then every dense block, all in the same order. Usage::

    payload = encode(model, weight_regions(model))  # host (weight_regions needs TF)
    model = decode(payload, max_bytes)              # actor: numpy + zlib only

``decode`` is bounded and strict: it never inflates past the size the header declares
(N <= ``max_bytes``, and each L is at most its region's bytes plus its class bytes, so at
most 2.25 N + K in all), and any malformed payload raises ``CodecError``.
"""

from __future__ import annotations

import math
import struct
import zlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from edge_rl.wire.envelope import CodecError

MAGIC, FORMAT_VERSION = b"ERLB", 1
_PREFIX = struct.Struct("<4sHHI")  # magic, version, region count, model length
_REGION = struct.Struct("<IIIBBI")  # offset, rows, cols, dtype code, b, packed length
# Bit patterns, not values: the codec never interprets a weight, so unsigned views.
DTYPES = {"int8": np.dtype("u1"), "float16": np.dtype("<u2"), "float32": np.dtype("<u4")}
_DTYPE_CODES = list(DTYPES)
ZERO, CIRCULANT, DENSE = 0, 1, 2


class Region(NamedTuple):
    """A weight matrix inside the model bytes: ``rows x cols`` row-major ``dtype`` at ``offset``."""

    offset: int
    rows: int
    cols: int
    dtype: str  # "int8" | "float16" | "float32"

    @property
    def nbytes(self) -> int:
        return self.rows * self.cols * DTYPES[self.dtype].itemsize


def _blocks(a: np.ndarray, b: int) -> np.ndarray:
    rows, cols = a.shape
    return a.reshape(rows // b, b, cols // b, b).transpose(0, 2, 1, 3)  # [R, C, i, j]


def _roll_index(b: int) -> np.ndarray:
    """``idx [b, b]``, ``idx[r, j] = (j - r) mod b``: row r of a block is ``np.roll(row0, r)``."""
    return (np.arange(b)[None, :] - np.arange(b)[:, None]) % b


def _classify(a: np.ndarray, b: int) -> np.ndarray:
    """``a [rows, cols] -> classes [R * C]`` for ``b x b`` blocks."""
    blocks = _blocks(a, b).reshape(-1, b, b)  # [R * C, b, b]
    classes = np.full(len(blocks), DENSE, np.uint8)
    if b >= 2:
        circulant = (blocks == blocks[:, 0, :][:, _roll_index(b)]).all(axis=(1, 2))
        classes[circulant] = CIRCULANT
    classes[~blocks.any(axis=(1, 2))] = ZERO
    return classes


def _cost(classes: np.ndarray, b: int, itemsize: int) -> int:
    counts = np.bincount(classes, minlength=3)
    return math.ceil(len(classes) / 4) + itemsize * (b * counts[CIRCULANT] + b * b * counts[DENSE])


def _pack(a: np.ndarray, b: int, classes: np.ndarray) -> bytes:
    blocks = _blocks(a, b).reshape(-1, b, b)  # [R * C, b, b]
    codes = np.zeros(math.ceil(len(classes) / 4) * 4, np.uint8)
    codes[: len(classes)] = classes
    quads = codes.reshape(-1, 4)  # four 2-bit classes per byte, low bits first
    packed = quads[:, 0] | quads[:, 1] << 2 | quads[:, 2] << 4 | quads[:, 3] << 6
    circulant = blocks[classes == CIRCULANT][:, 0, :]  # [n_circ, b]
    dense = blocks[classes == DENSE]  # [n_dense, b, b]
    return packed.astype(np.uint8).tobytes() + circulant.tobytes() + dense.tobytes()


def _check_regions(regions: Sequence[Region], model_len: int) -> list[Region]:
    ordered = sorted(regions, key=lambda r: r.offset)
    end = 0
    for r in ordered:
        if r.dtype not in DTYPES or r.rows < 1 or r.cols < 1 or r.offset < end:
            raise ValueError(f"bad or overlapping region {r}")
        end = r.offset + r.nbytes
        if end > model_len:
            raise ValueError(f"region {r} runs past the model's {model_len} bytes")
    return ordered


def encode(
    model: bytes, regions: Sequence[Region], block_sizes: Sequence[int] = (1, 2, 4, 8)
) -> bytes:
    """The "blocks" payload of ``model``; ``decode`` gives ``model`` back byte for byte.

    A region whose packing would not be smaller than its raw bytes (no zero or circulant
    blocks to speak of) stays in the base model as it is and is left out of the table.
    """
    if not all(isinstance(b, int) and 1 <= b <= 255 for b in block_sizes):
        raise ValueError(f"block sizes must be integers in [1, 255], got {block_sizes}")
    if len(model) >= 2**32 or len(regions) >= 2**16:
        raise ValueError("model or region list too large for format version 1")
    sizes = sorted({1, *block_sizes}, reverse=True)
    base = bytearray(model)
    table, data = [], []
    for r in _check_regions(regions, len(model)):
        dtype = DTYPES[r.dtype]
        a = np.frombuffer(model, dtype, r.rows * r.cols, r.offset).reshape(r.rows, r.cols)
        candidates = [(b, _classify(a, b)) for b in sizes if r.rows % b == 0 and r.cols % b == 0]
        # min() keeps the first of equal costs: the larger b.
        b, classes = min(candidates, key=lambda bc: _cost(bc[1], bc[0], dtype.itemsize))
        if _cost(classes, b, dtype.itemsize) >= r.nbytes:
            continue
        packed = _pack(a, b, classes)
        base[r.offset : r.offset + r.nbytes] = bytes(r.nbytes)  # zlib squeezes the hole away
        code = _DTYPE_CODES.index(r.dtype)
        table.append(_REGION.pack(r.offset, r.rows, r.cols, code, b, len(packed)))
        data.append(packed)
    prefix = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(table), len(model))
    return prefix + b"".join(table) + zlib.compress(bytes(base) + b"".join(data), 9)


def decode(payload: bytes, max_bytes: int) -> bytes:
    """The model ``encode`` packed; ``CodecError`` for anything malformed or over ``max_bytes``."""
    if len(payload) < _PREFIX.size:
        raise CodecError("truncated", f"{len(payload)} bytes is shorter than the blocks prefix")
    magic, version, count, model_len = _PREFIX.unpack_from(payload)
    if magic != MAGIC:
        raise CodecError("bad_magic", f"expected {MAGIC!r}, got {magic!r}")
    if version != FORMAT_VERSION:
        raise CodecError("bad_version", f"blocks format {version}, this build speaks 1")
    if model_len > max_bytes:
        raise CodecError("too_large", f"model of {model_len} bytes > limit {max_bytes}")
    table_end = _PREFIX.size + count * _REGION.size
    if len(payload) < table_end:
        raise CodecError("truncated", f"region table of {count} entries runs past the payload")
    table = [_read_region(payload, _PREFIX.size + k * _REGION.size) for k in range(count)]
    end = 0
    for r, _, _ in table:
        if r.offset < end or r.offset + r.nbytes > model_len:
            raise CodecError("bad_region", f"{r} overlaps another or runs past {model_len} bytes")
        end = r.offset + r.nbytes
    body = _inflate(payload[table_end:], model_len + sum(length for _, _, length in table))
    model, at = bytearray(body[:model_len]), model_len
    for r, b, length in table:
        if body[r.offset : r.offset + r.nbytes] != bytes(r.nbytes):
            raise CodecError("bad_region", f"{r} is not zeroed in the base model")
        model[r.offset : r.offset + r.nbytes] = _unpack(body[at : at + length], r, b)
        at += length
    return bytes(model)


def _read_region(payload: bytes, at: int) -> tuple[Region, int, int]:
    offset, rows, cols, code, b, length = _REGION.unpack_from(payload, at)
    if code >= len(_DTYPE_CODES) or rows < 1 or cols < 1:
        raise CodecError("bad_region", f"dtype code {code}, shape {rows}x{cols}")
    if b < 1 or rows % b or cols % b:
        raise CodecError("bad_region", f"block size {b} does not divide {rows}x{cols}")
    r = Region(offset, rows, cols, _DTYPE_CODES[code])
    n_blocks = (rows // b) * (cols // b)
    if not math.ceil(n_blocks / 4) <= length <= math.ceil(n_blocks / 4) + r.nbytes:
        raise CodecError("bad_region", f"{r} cannot pack into {length} bytes")
    return r, b, length


def _inflate(data: bytes, size: int) -> bytes:
    """Exactly ``size`` bytes from the zlib stream ``data``, never more (no zip bombs)."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, size + 1)
    except zlib.error as e:
        raise CodecError("bad_model", f"body does not decompress: {e}") from None
    if len(out) > size or d.unconsumed_tail:
        raise CodecError("bad_model", f"body inflates past the declared {size} bytes")
    if len(out) < size or not d.eof:
        raise CodecError("truncated", f"body inflates to {len(out)} of {size} bytes")
    if d.unused_data:
        raise CodecError("bad_model", f"{len(d.unused_data)} bytes after the zlib stream")
    return out


def _unpack(data: bytes, r: Region, b: int) -> bytes:
    """Packed data of one region -> its ``rows x cols`` bytes (inverse of ``_pack``)."""
    dtype, n_rows, n_cols = DTYPES[r.dtype], r.rows // b, r.cols // b
    n_blocks = n_rows * n_cols
    n_codes = math.ceil(n_blocks / 4)
    packed = np.frombuffer(data, np.uint8, n_codes)
    codes = (packed[:, None] >> np.array([0, 2, 4, 6], np.uint8)) & 3  # [n_codes, 4]
    classes, padding = codes.reshape(-1)[:n_blocks], codes.reshape(-1)[n_blocks:]
    if padding.any() or (classes == 3).any() or (b == 1 and (classes == CIRCULANT).any()):
        raise CodecError("bad_region", f"{r}: invalid block classes")
    counts = np.bincount(classes, minlength=3)
    n_circ, n_dense = int(counts[CIRCULANT]), int(counts[DENSE])
    if len(data) != n_codes + dtype.itemsize * (b * n_circ + b * b * n_dense):
        raise CodecError("bad_region", f"{r}: {len(data)} bytes do not match its block classes")
    rows0 = np.frombuffer(data, dtype, n_circ * b, n_codes).reshape(n_circ, b)
    dense = np.frombuffer(data, dtype, n_dense * b * b, n_codes + rows0.nbytes)
    blocks = np.zeros((n_blocks, b, b), dtype)  # [R * C, i, j]
    blocks[classes == CIRCULANT] = rows0[:, _roll_index(b)]  # [n_circ, b] -> [n_circ, b, b]
    blocks[classes == DENSE] = dense.reshape(n_dense, b, b)
    # [R * C, i, j] -> [R, i, C, j] -> [rows, cols]
    return blocks.reshape(n_rows, n_cols, b, b).transpose(0, 2, 1, 3).tobytes()
