"""Mutated transition batches (§3.1) from the seeds: byte-level, header-level, and wrong
dtype strings, shapes, entries, order and values in the arrays. ``payloads(seeds)`` draws
``(payload, the env spec of its seed)``."""

from __future__ import annotations

import json
import math

import numpy as np
from hypothesis import strategies as st

from tests.fuzz import fuzzkit as fk

MAX = 1_000_000  # the decoders' limit in the tests: byte mutations may grow a payload past it
DTYPES = [
    "<f4",
    "<f8",
    ">f4",
    "<i8",
    ">i8",
    "<i4",
    "|u1",
    "|i1",
    "|b1",
    "<f2",
    "<c8",
    "O",
    "<U4",
    "V8",
    "",
    "f4",
    "float32",
    None,
    4,
    ["<f4"],
]
FLOATS = st.floats(width=32) | st.sampled_from([np.nan, np.inf, -np.inf, 3e38, -0.0, 2.5])


@st.composite
def array_mutation(draw, seeds: list[bytes]) -> bytes:
    """Wrong dtype strings, shapes, entries, order, and non-finite or out-of-range values."""
    magic, header, body = fk.split(draw(st.sampled_from(seeds)))
    arrays, body = header["arrays"], bytearray(body)
    i = draw(st.integers(0, len(arrays) - 1))
    op = draw(st.sampled_from(["dtype", "shape", "drop", "dup", "swap", "value", "value"]))
    if op == "dtype":
        arrays[i]["dtype"] = draw(st.sampled_from(DTYPES))
    elif op == "shape":
        shape = list(arrays[i]["shape"])
        arrays[i]["shape"] = draw(
            st.sampled_from(
                [
                    [],
                    [0],
                    shape + [1],
                    shape[:1],
                    [shape[0] + 1, *shape[1:]],
                    [-1, *shape[1:]],
                    [shape[0], 2**62],
                    [*shape, 0],
                    [shape[0]] * 9,
                    [float(shape[0]), *shape[1:]],
                    [True, *shape[1:]],
                ]
            )
            | st.lists(st.integers(-2, 2**40), max_size=4)
        )
    elif op == "drop":
        del arrays[i]
    elif op == "dup":
        arrays.insert(i, dict(arrays[i]))
    elif op == "swap":
        j = draw(st.integers(0, len(arrays) - 1))
        arrays[i], arrays[j] = arrays[j], arrays[i]
    else:  # overwrite one element in the body, with the bytes of its declared dtype
        at = sum(math.prod(a["shape"]) * np.dtype(a["dtype"]).itemsize for a in arrays[:i])
        dtype, count = np.dtype(arrays[i]["dtype"]), math.prod(arrays[i]["shape"])
        k = draw(st.integers(0, count - 1))
        if dtype.kind == "f":
            value = np.float32(draw(FLOATS))
        elif dtype.itemsize == 8:
            value = np.int64(draw(st.integers(-(2**63), 2**63 - 1) | st.sampled_from([-1, 2, 3])))
        else:
            value = np.uint8(draw(st.integers(0, 255)))
        body[at + k * dtype.itemsize : at + (k + 1) * dtype.itemsize] = value.tobytes()
    return fk.frame(magic, json.dumps(header, separators=(",", ":")).encode(), bytes(body))


def payloads(seeds) -> st.SearchStrategy[tuple[bytes, object]]:
    described = [seeds.cartpole, seeds.pendulum]
    both = [*described, seeds.cartpole_compact, seeds.pendulum_compact]
    spec_of = {
        seeds.cartpole: seeds.cartpole_spec,
        seeds.pendulum: seeds.pendulum_spec,
        seeds.cartpole_compact: seeds.cartpole_spec,
        seeds.pendulum_compact: seeds.pendulum_spec,
    }

    @st.composite
    def one(draw):
        seed = draw(st.sampled_from(both))
        kinds = (
            ["bytes", "header", "arrays", "arrays"] if seed in described else ["bytes", "header"]
        )
        kind = draw(st.sampled_from(kinds))
        if kind == "bytes":
            data = draw(fk.byte_mutation([seed, *both], MAX))
            data = draw(st.sampled_from([data, seed[:10] + data[10:]]))  # keep the prefix, too
        elif kind == "header":
            data = draw(fk.header_mutation([seed]))
        else:
            data = draw(array_mutation([seed]))
        return data, spec_of[seed]

    return one()
