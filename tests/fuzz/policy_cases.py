"""Mutated signed policy bundles (§4, §4.4) from the seeds: raw byte mutations, and
manifests mutated then framed and signed again (by the seeds' key, or another one)."""

from __future__ import annotations

from hypothesis import strategies as st

from edge_rl.wire.signing import Signer
from tests.fuzz import fuzzkit as fk

MAX = 1_000_000  # the decoders' limit in the tests: byte mutations may grow a payload past it
OTHER = Signer.generate()


def split_signed(data: bytes) -> tuple[bytes, bytes, bytes]:
    """``(prefix + header, key id + signature, body)``."""
    end = 10 + fk.PREFIX.unpack_from(data)[2]
    return data[:end], data[end : end + 72], data[end + 72 :]


@st.composite
def resigned(draw, seeds) -> bytes:
    """A mutated manifest, framed and signed by the seeds' key (or another key)."""
    signed, _, body = split_signed(draw(st.sampled_from([seeds.policy_zlib, seeds.policy_blocks])))
    if draw(st.integers(0, 4)):
        magic, header, _ = fk.split(signed)
        text = fk.dumps_raw(draw(fk.mutate_json(header)))
    else:  # raw bytes of the header text: broken JSON, bad UTF-8
        magic, text = signed[:4], bytearray(signed[10:])
        for _ in range(draw(st.integers(1, 3))):
            i = draw(st.integers(0, len(text) - 1))
            text[i : i + 1] = draw(st.binary(max_size=3))
        text = bytes(text)
    # Mostly this schema version, so the manifest reaches its parser; now and then a v4 one.
    version = draw(st.sampled_from([fk.VERSION] * 4 + [fk.VERSION - 1]))
    framed = fk.frame(magic, text, version=version)
    signer = seeds.signer if draw(st.integers(0, 9)) else OTHER
    if draw(st.integers(0, 9)) == 0:
        body = draw(fk.byte_mutation([body], MAX))
    return fk.sign(framed, signer) + body


def payloads(seeds) -> st.SearchStrategy[bytes]:
    raw = fk.byte_mutation([seeds.policy_zlib, seeds.policy_blocks], MAX)
    return raw | resigned(seeds) | resigned(seeds) | resigned(seeds)
