"""Protocol v1 wire codec: one envelope for every payload (see docs/protocol.md).

    offset  size  field
    0       4     magic: b"ERLP" policy, b"ERLT" transitions, b"ERLS" status, b"ERLC" control
    4       2     schema version, uint16 little-endian (1)
    6       4     header length H, uint32 little-endian
    10      H     header: UTF-8 JSON object
    10+H    ...   body: raw bytes (policy: compressed model; transitions: arrays back to back)

Every decode error is a ``CodecError`` with a short ``reason`` that the learner counts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from edge_rl.specs import EnvSpec
from edge_rl.types import (
    BREAKDOWN_KEYS,
    ActorStatus,
    ControlMessage,
    PolicyBundle,
    PolicyManifest,
    QuantParams,
    TransitionBatch,
)

if TYPE_CHECKING:
    from edge_rl.transport import blocks

SCHEMA_VERSION = 1
MAGIC_POLICY, MAGIC_TRANSITIONS = b"ERLP", b"ERLT"
MAGIC_STATUS, MAGIC_CONTROL = b"ERLS", b"ERLC"
_PREFIX = struct.Struct("<4sHI")  # magic, version, header length
MAX_HEADER_BYTES = 64 * 1024
DEFAULT_MAX_PAYLOAD = 1_000_000  # under Mosquitto 2.1's 2 MB default max_packet_size

# Wire dtypes: little-endian numpy type strings. Booleans travel as uint8 (0/1).
_F32, _I64, _U8 = "<f4", "<i8", "|u1"
_ARRAY_DTYPES = {
    "obs": (_F32,),
    "action": (_I64, _F32),  # discrete / Box
    "reward": (_F32,),
    "next_obs": (_F32,),
    "terminated": (_U8,),
    "truncated": (_U8,),
}


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")  # Python's json accepts NaN/Infinity


class CodecError(ValueError):
    """A payload that must not reach the learner or the actor; ``reason`` is a counter key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def _pack(magic: bytes, header: dict[str, Any], body: bytes = b"") -> bytes:
    h = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    return _PREFIX.pack(magic, SCHEMA_VERSION, len(h)) + h + body


def _unpack(data: bytes, magic: bytes, max_bytes: int) -> tuple[dict[str, Any], memoryview]:
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


def _field(header: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = header.get(key)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise CodecError("bad_header", f"field {key!r} missing or not {kind}")
    return value


def peek_count(data: bytes) -> int:
    """The ``n`` a transition payload claims, or 0 if unreadable (to count rejects)."""
    try:
        header, _ = _unpack(data, MAGIC_TRANSITIONS, max(len(data), 1))
        n = header.get("n", 0)
        return n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 10**7 else 0
    except CodecError:
        return 0


# --- transitions ----------------------------------------------------------------------


def encode_transitions(batch: TransitionBatch) -> bytes:
    arrays = {
        "obs": np.ascontiguousarray(batch.obs, _F32),
        "action": np.ascontiguousarray(
            batch.action, _I64 if np.issubdtype(batch.action.dtype, np.integer) else _F32
        ),
        "reward": np.ascontiguousarray(batch.reward, _F32),
        "next_obs": np.ascontiguousarray(batch.next_obs, _F32),
        "terminated": np.ascontiguousarray(batch.terminated, _U8),
        "truncated": np.ascontiguousarray(batch.truncated, _U8),
    }
    header = {
        "actor_id": batch.actor_id,
        "session": batch.session,
        "seq": batch.seq,
        "policy_version": batch.policy_version,
        "n": len(batch),
        "arrays": [
            {"name": k, "dtype": a.dtype.str, "shape": list(a.shape)} for k, a in arrays.items()
        ],
    }
    return _pack(MAGIC_TRANSITIONS, header, b"".join(a.tobytes() for a in arrays.values()))


def decode_transitions(
    data: bytes, spec: EnvSpec | None = None, max_bytes: int = DEFAULT_MAX_PAYLOAD
) -> TransitionBatch:
    """Decode a batch; with ``spec``, also check shapes, dtypes, finiteness and action bounds."""
    header, body = _unpack(data, MAGIC_TRANSITIONS, max_bytes)
    actor_id = _field(header, "actor_id", str)
    session, seq = _field(header, "session", int), _field(header, "seq", int)
    version, n = _field(header, "policy_version", int), _field(header, "n", int)
    if seq < 0 or version < 0 or session < 0 or n <= 0:
        raise CodecError("bad_header", "seq, session and policy_version >= 0, n > 0")
    specs = _field(header, "arrays", list)
    arrays: dict[str, np.ndarray] = {}
    offset = 0
    for item in specs:
        if not isinstance(item, dict) or item.get("name") not in TransitionBatch.ARRAYS:
            raise CodecError("bad_array", f"unexpected array entry {item!r}")
        name, dtype_str, shape = item["name"], item.get("dtype"), item.get("shape")
        if dtype_str not in _ARRAY_DTYPES[name] or name in arrays:
            raise CodecError("dtype", f"array {name!r} has dtype {dtype_str!r}")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise CodecError("shape", f"array {name!r} has shape {shape!r}")
        if not shape or shape[0] != n or len(shape) > 8:
            raise CodecError("shape", f"array {name!r} shape {shape} does not start with n={n}")
        dtype = np.dtype(dtype_str)
        count = math.prod(shape)  # exact Python ints: a crafted shape cannot overflow
        size = count * dtype.itemsize
        if offset + size > len(body):
            raise CodecError("truncated", f"array {name!r} runs past the end of the payload")
        arrays[name] = np.frombuffer(body, dtype, count=count, offset=offset).reshape(shape)
        offset += size
    if set(arrays) != set(TransitionBatch.ARRAYS):
        missing = sorted(set(TransitionBatch.ARRAYS) - set(arrays))
        raise CodecError("bad_array", f"missing arrays {missing}")
    if offset != len(body):
        raise CodecError("bad_array", f"{len(body) - offset} trailing bytes after the arrays")
    batch = TransitionBatch(
        actor_id=actor_id,
        session=session,
        seq=seq,
        policy_version=version,
        obs=arrays["obs"],
        action=arrays["action"],
        reward=arrays["reward"],
        next_obs=arrays["next_obs"],
        terminated=arrays["terminated"].astype(bool),
        truncated=arrays["truncated"].astype(bool),
    )
    if spec is not None:
        validate_batch(batch, spec, raw_flags=(arrays["terminated"], arrays["truncated"]))
    return batch


def validate_batch(
    batch: TransitionBatch, spec: EnvSpec, raw_flags: tuple[np.ndarray, ...] = ()
) -> None:
    """Shapes and dtypes against ``spec``, finite values, actions inside the action space."""
    n = len(batch)
    obs_shape = (n, *spec.obs_shape)
    for name in ("obs", "next_obs"):
        a = getattr(batch, name)
        if a.shape != obs_shape:
            raise CodecError("shape", f"{name} shape {a.shape}, expected {obs_shape}")
        if a.dtype != np.float32:
            raise CodecError("dtype", f"{name} dtype {a.dtype}, expected float32")
    act_shape = (n,) if spec.discrete else (n, *spec.action_shape)
    if batch.action.shape != act_shape:
        raise CodecError("shape", f"action shape {batch.action.shape}, expected {act_shape}")
    if batch.action.dtype != spec.action_dtype:
        raise CodecError(
            "dtype", f"action dtype {batch.action.dtype}, expected {spec.action_dtype}"
        )
    for name in ("reward", "terminated", "truncated"):
        if getattr(batch, name).shape != (n,):
            raise CodecError("shape", f"{name} shape {getattr(batch, name).shape}, expected ({n},)")
    for flags in raw_flags:
        if flags.size and flags.max() > 1:
            raise CodecError("bad_array", "terminated/truncated must be 0 or 1")
    for name in ("obs", "next_obs", "reward") + (() if spec.discrete else ("action",)):
        if not np.all(np.isfinite(getattr(batch, name))):
            raise CodecError("non_finite", f"{name} holds NaN or inf")
    if spec.discrete:
        if batch.action.min() < 0 or batch.action.max() >= spec.num_actions:
            raise CodecError("action_range", f"action outside [0, {spec.num_actions})")
    else:
        a = batch.action.reshape(n, -1)
        if np.any(a < np.asarray(spec.action_low, np.float32)) or np.any(
            a > np.asarray(spec.action_high, np.float32)
        ):
            raise CodecError("action_range", "action outside the Box bounds")


# --- policy bundle --------------------------------------------------------------------

CODECS = ("zlib", "none", "blocks")


def compress_model(
    model: bytes, codec: str, regions: Sequence[blocks.Region] | None = None
) -> bytes:
    """``model`` packed by ``codec``. "blocks" needs the model's weight ``regions``, found on
    the host by ``edge_rl.export.regions.weight_regions``; the others ignore them."""
    if codec == "zlib":
        return zlib.compress(model, 9)
    if codec == "none":
        return model
    if codec == "blocks":
        from edge_rl.transport import blocks  # lazily: blocks imports CodecError from here

        if regions is None:
            raise ValueError("the 'blocks' codec needs the model's weight regions")
        return blocks.encode(model, regions)
    raise ValueError(f"unknown model codec {codec!r}, expected one of {CODECS}")


def decompress_model(payload: bytes, codec: str, max_bytes: int) -> bytes:
    if codec == "none":
        return bytes(payload)
    if codec == "blocks":
        from edge_rl.transport import blocks

        return blocks.decode(payload, max_bytes)
    if codec != "zlib":
        raise CodecError("bad_codec", f"unknown model codec {codec!r}")
    d = zlib.decompressobj()
    try:
        out = d.decompress(payload, max_bytes + 1)  # bounded: no zip bombs
    except zlib.error as e:
        raise CodecError("bad_model", f"model does not decompress: {e}") from None
    if len(out) > max_bytes or d.unconsumed_tail:
        raise CodecError("too_large", f"model decompresses past {max_bytes} bytes")
    return out


def manifest_to_dict(m: PolicyManifest) -> dict[str, Any]:
    d = dataclasses.asdict(m)
    d["env_spec"] = m.env_spec.to_dict()
    return d


def manifest_from_dict(d: dict[str, Any]) -> PolicyManifest:
    try:
        return PolicyManifest(
            policy_version=int(d["policy_version"]),
            algo=str(d["algo"]),
            env_id=str(d["env_id"]),
            env_spec=EnvSpec.from_dict(d["env_spec"]),
            precision=str(d["precision"]),
            input_quant=QuantParams(**d["input_quant"]),
            output_quant=QuantParams(**d["output_quant"]),
            obs_mean=tuple(float(x) for x in d["obs_mean"]),
            obs_std=tuple(float(x) for x in d["obs_std"]),
            exploration={str(k): float(v) for k, v in d["exploration"].items()},
            learner_step=int(d["learner_step"]),
            model_sha256=str(d["model_sha256"]),
            model_size=int(d["model_size"]),
            codec=str(d["codec"]),
            output_kind=str(d.get("output_kind", "q_values")),
            run_id=str(d.get("run_id", "")),
            created_unix=float(d.get("created_unix", 0.0)),
            extra=dict(d.get("extra", {})),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CodecError("bad_manifest", f"{type(e).__name__}: {e}") from None


def encode_policy(bundle: PolicyBundle) -> bytes:
    return _pack(MAGIC_POLICY, manifest_to_dict(bundle.manifest), bundle.payload)


def decode_policy(data: bytes, max_bytes: int = DEFAULT_MAX_PAYLOAD) -> PolicyBundle:
    header, body = _unpack(data, MAGIC_POLICY, max_bytes)
    return PolicyBundle(manifest_from_dict(header), bytes(body))


# --- status and control ---------------------------------------------------------------


def encode_status(status: ActorStatus) -> bytes:
    return _pack(MAGIC_STATUS, dataclasses.asdict(status))


def _known(cls: type, header: dict[str, Any]) -> dict[str, Any]:
    """Drop fields this build does not know: a newer peer may add fields within v1."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in header.items() if k in names}


def decode_status(data: bytes, max_bytes: int = 64 * 1024) -> ActorStatus:
    header, _ = _unpack(data, MAGIC_STATUS, max_bytes)
    fields = _known(ActorStatus, header)
    if "breakdown" in fields:  # optional: older actors do not send it
        fields["breakdown"] = _breakdown(fields["breakdown"])
    try:
        return ActorStatus(**fields)
    except TypeError as e:
        raise CodecError("bad_header", f"status: {e}") from None


def _breakdown(d: Any) -> dict[str, float]:
    """Seconds per bucket: known keys, finite numbers >= 0 (JSON cannot carry NaN here, but
    a header may still hold strings, booleans, negatives or 1e999, which parses as inf)."""
    if not isinstance(d, dict):
        raise CodecError("bad_header", "status breakdown must be an object")
    unknown = set(d) - BREAKDOWN_KEYS
    if unknown:
        raise CodecError("bad_header", f"status breakdown: unknown keys {sorted(unknown)}")
    for k, v in d.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
            raise CodecError("bad_header", f"status breakdown {k!r}: {v!r} is not seconds >= 0")
    return {k: float(v) for k, v in d.items()}


def encode_control(msg: ControlMessage) -> bytes:
    return _pack(MAGIC_CONTROL, dataclasses.asdict(msg))


def decode_control(data: bytes, max_bytes: int = 64 * 1024) -> ControlMessage:
    header, _ = _unpack(data, MAGIC_CONTROL, max_bytes)
    if header.get("state") not in ("running", "paused", "stopped"):
        raise CodecError("bad_header", f"control state {header.get('state')!r}")
    credits, default = header.get("credits", {}), header.get("default_credit")
    if not isinstance(credits, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in credits.values()
    ):
        raise CodecError("bad_header", "control credits must map actor ids to integers")
    if default is not None and (not isinstance(default, int) or isinstance(default, bool)):
        raise CodecError("bad_header", "control default_credit must be an integer or null")
    try:
        return ControlMessage(**_known(ControlMessage, header))
    except TypeError as e:
        raise CodecError("bad_header", f"control: {e}") from None
