"""Protocol v1 envelope: the framing every payload shares (docs/protocol.md), and the one
error type.

    offset  size  field
    0       4     magic: b"ERLP" policy, b"ERLT" transitions, b"ERLS" status, b"ERLC" control
    4       2     schema version, uint16 little-endian (1)
    6       4     header length H, uint32 little-endian
    10      H     header: UTF-8 JSON object
    10+H    ...   body: raw bytes (policy: compressed model; transitions: arrays back to back)

Every decode error is a ``CodecError`` with a short ``reason`` that the learner counts.
The payload kinds are in ``codec`` (transitions, status, control) and ``bundle`` (policy).
"""

from __future__ import annotations

import json
import struct
from typing import Any

SCHEMA_VERSION = 1
MAGIC_POLICY, MAGIC_TRANSITIONS = b"ERLP", b"ERLT"
MAGIC_STATUS, MAGIC_CONTROL = b"ERLS", b"ERLC"
_PREFIX = struct.Struct("<4sHI")  # magic, version, header length
MAX_HEADER_BYTES = 64 * 1024
DEFAULT_MAX_PAYLOAD = 1_000_000  # under Mosquitto 2.1's 2 MB default max_packet_size


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")  # Python's json accepts NaN/Infinity


class CodecError(ValueError):
    """A payload that must not reach the learner or the actor; ``reason`` is a counter key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def pack(magic: bytes, header: dict[str, Any], body: bytes = b"") -> bytes:
    h = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    return _PREFIX.pack(magic, SCHEMA_VERSION, len(h)) + h + body


def unpack(data: bytes, magic: bytes, max_bytes: int) -> tuple[dict[str, Any], memoryview]:
    if len(data) > max_bytes:
        raise CodecError("too_large", f"{len(data)} bytes > limit {max_bytes}")
    if len(data) < _PREFIX.size:
        raise CodecError("truncated", f"{len(data)} bytes is shorter than the envelope prefix")
    got_magic, version, hlen = _PREFIX.unpack_from(data)
    if got_magic != magic:
        raise CodecError("bad_magic", f"expected {magic!r}, got {got_magic!r}")
    if version != SCHEMA_VERSION:
        raise CodecError("bad_version", f"schema version {version}, this build speaks 1")
    if hlen > MAX_HEADER_BYTES or _PREFIX.size + hlen > len(data):
        raise CodecError("truncated", f"header length {hlen} exceeds the payload")
    try:
        header = json.loads(
            bytes(data[_PREFIX.size : _PREFIX.size + hlen]), parse_constant=_no_constants
        )
    except (UnicodeDecodeError, ValueError) as e:
        raise CodecError("bad_header", f"header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise CodecError("bad_header", "header is not a JSON object")
    return header, memoryview(data)[_PREFIX.size + hlen :]


def field(header: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = header.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise CodecError("bad_header", f"field {key!r} missing or not {kind}")
    return value
