"""Protocol v5 envelope: the framing every payload shares (docs/protocol.md), and the one
error type.

    offset  size  field
    0       4     magic: b"ERLP" policy, b"ERLT" transitions, b"ERLS" status, b"ERLC" control,
                  b"ERLG" credit grant, b"ERLD" deployment target
    4       2     schema version, uint16 little-endian (4)
    6       4     header length H, uint32 little-endian
    10      H     header: UTF-8 JSON object
    10+H    ...   body: raw bytes (transitions: arrays back to back)
  a policy bundle (signed; see pack_signed):
    10+H    8     key id of the signer
    18+H    64    Ed25519 signature over bytes 0 .. 10+H (prefix and header)
    82+H    ...   body: the compressed model

Every decode error is a ``CodecError`` with a short ``reason`` that the learner counts.
The payload kinds are in ``transitions``, ``messages`` (status, control, credit) and
``policy`` (the signed policy bundle).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any

# 2: signed bundles; 3: run ids, credit per actor; 4: serving; 5: safety, interventions (§8)
SCHEMA_VERSION = 5
MAGIC_POLICY, MAGIC_TRANSITIONS = b"ERLP", b"ERLT"
MAGIC_STATUS, MAGIC_CONTROL, MAGIC_CREDIT = b"ERLS", b"ERLC", b"ERLG"
MAGIC_TARGET = b"ERLD"  # a board's deployment target (messages.encode_target)
_PREFIX = struct.Struct("<4sHI")  # magic, version, header length
MAX_HEADER_BYTES = 64 * 1024
DEFAULT_MAX_PAYLOAD = 1_000_000  # under Mosquitto 2.1's 2 MB default max_packet_size
KEY_ID_BYTES, SIGNATURE_BYTES = 8, 64  # Ed25519 (signing.py)
# The header's JSON: compact, no NaN/Infinity. Built once (json.dumps with arguments builds
# an encoder per call); an encoder holds no state between calls, so threads share it.
_HEADER_JSON = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")  # Python's json accepts NaN/Infinity


class CodecError(ValueError):
    """A payload that must not reach the learner or the actor; ``reason`` is a counter key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def pack(magic: bytes, header: dict[str, Any], body: bytes = b"") -> bytes:
    h = _HEADER_JSON(header).encode()
    return _PREFIX.pack(magic, SCHEMA_VERSION, len(h)) + h + body


def pack_signed(
    magic: bytes, header: dict[str, Any], body: bytes, sign: Callable[[bytes], bytes], key: bytes
) -> bytes:
    """``prefix | header | key id (8) | signature (64) | body``; the signature covers the
    prefix and the header, which holds the body's hash."""
    signed = pack(magic, header)
    return signed + key + sign(signed) + body


def unpack(data: bytes, magic: bytes, max_bytes: int) -> tuple[dict[str, Any], memoryview]:
    hlen = _frame(data, magic, max_bytes)
    return _header(data, hlen), memoryview(data)[_PREFIX.size + hlen :]


def unpack_signed(
    data: bytes, magic: bytes, max_bytes: int, check: Callable[[bytes, bytes, bytes], None]
) -> tuple[dict[str, Any], memoryview]:
    """Verify, then parse: ``check(key_id, signed_bytes, signature)`` raises ``CodecError``
    unless the signature is genuine, and nothing of the header is read before it returns."""
    if len(data) >= _PREFIX.size and _PREFIX.unpack_from(data)[1] == 1:
        raise CodecError(
            "unsigned", f"a protocol v1 payload: unsigned; this build speaks v{SCHEMA_VERSION}"
        )
    hlen = _frame(data, magic, max_bytes)
    end = _PREFIX.size + hlen
    if end + KEY_ID_BYTES + SIGNATURE_BYTES > len(data):
        raise CodecError("unsigned", "no key id and signature after the header")
    key = bytes(data[end : end + KEY_ID_BYTES])
    signature = bytes(data[end + KEY_ID_BYTES : end + KEY_ID_BYTES + SIGNATURE_BYTES])
    check(key, bytes(data[:end]), signature)
    return _header(data, hlen), memoryview(data)[end + KEY_ID_BYTES + SIGNATURE_BYTES :]


def _frame(data: bytes, magic: bytes, max_bytes: int) -> int:
    """Checks the prefix; the header length."""
    if len(data) > max_bytes:
        raise CodecError("too_large", f"{len(data)} bytes > limit {max_bytes}")
    if len(data) < _PREFIX.size:
        raise CodecError("truncated", f"{len(data)} bytes is shorter than the envelope prefix")
    got_magic, version, hlen = _PREFIX.unpack_from(data)
    if got_magic != magic:
        raise CodecError("bad_magic", f"expected {magic!r}, got {got_magic!r}")
    if version != SCHEMA_VERSION:
        raise CodecError(
            "bad_version", f"schema version {version}, this build speaks {SCHEMA_VERSION}"
        )
    if hlen > MAX_HEADER_BYTES or _PREFIX.size + hlen > len(data):
        raise CodecError("truncated", f"header length {hlen} exceeds the payload")
    return hlen


def _header(data: bytes, hlen: int) -> dict[str, Any]:
    try:
        header = json.loads(
            bytes(data[_PREFIX.size : _PREFIX.size + hlen]), parse_constant=_no_constants
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as e:  # deep nesting: RecursionError
        raise CodecError("bad_header", f"header is not JSON: {type(e).__name__}") from None
    if not isinstance(header, dict):
        raise CodecError("bad_header", "header is not a JSON object")
    return header


def field(header: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = header.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise CodecError("bad_header", f"field {key!r} missing or not {kind}")
    return value
