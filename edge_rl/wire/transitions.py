"""Protocol v5 transition batches (``ERLT``, docs/protocol.md §3.1): a ``TransitionBatch``
to bytes and back, checked against the run's ``EnvSpec`` on the way in.

The envelope, and ``CodecError``, are in ``envelope``; status, control and credit payloads
in ``messages``; the signed policy bundle in ``policy``.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from edge_rl.specs import EnvSpec
from edge_rl.types import TransitionBatch
from edge_rl.wire.envelope import (
    DEFAULT_MAX_PAYLOAD,
    MAGIC_TRANSITIONS,
    CodecError,
)
from edge_rl.wire.envelope import field as _field
from edge_rl.wire.envelope import pack as _pack
from edge_rl.wire.envelope import unpack as _unpack
from edge_rl.wire.messages import run_id_field

# Wire dtypes: little-endian numpy type strings. Booleans travel as uint8 (0/1).
_F32, _I64, _U8 = "<f4", "<i8", "|u1"
_ARRAY_DTYPES = {
    "obs": (_F32,),
    "action": (_I64, _F32),  # discrete / Box
    "reward": (_F32,),
    "next_obs": (_F32,),
    "terminated": (_U8,),
    "truncated": (_U8,),
    "intervention": (_U8,),
}


def peek_count(data: bytes) -> int:
    """The ``n`` a transition payload claims, or 0 if unreadable (to count rejects)."""
    try:
        header, _ = _unpack(data, MAGIC_TRANSITIONS, max(len(data), 1))
        n = header.get("n", 0)
        return n if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 10**7 else 0
    except CodecError:
        return 0


def peek_batch(data: bytes) -> tuple[str, int, int] | None:
    """``(actor_id, session, n)`` a transition payload's header claims, unchecked beyond
    their types; None if unreadable. For the learner's own drops (``edge_rl.learner.inbox``)."""
    try:
        header, _ = _unpack(data, MAGIC_TRANSITIONS, max(len(data), 1))
    except CodecError:
        return None
    actor, session, n = header.get("actor_id"), header.get("session"), peek_count(data)
    if not isinstance(actor, str) or type(session) is not int or n <= 0:
        return None
    return actor, session, n


# --- transitions ----------------------------------------------------------------------


def encode_transitions(batch: TransitionBatch, describe: bool = False) -> bytes:
    """The batch as sent. The body's layout is the canonical one for the batch's shapes
    (§3.1), which the learner derives from its env spec; ``describe`` also lists it in the
    header's ``arrays`` (about 310 bytes more per message for CartPole)."""
    arrays = {
        "obs": np.ascontiguousarray(batch.obs, _F32),
        "action": np.ascontiguousarray(
            batch.action, _I64 if batch.action.dtype.kind in "iu" else _F32
        ),
        "reward": np.ascontiguousarray(batch.reward, _F32),
        "next_obs": np.ascontiguousarray(batch.next_obs, _F32),
        "terminated": np.ascontiguousarray(batch.terminated, _U8),
        "truncated": np.ascontiguousarray(batch.truncated, _U8),
        "intervention": np.ascontiguousarray(batch.interventions, _U8),
    }
    header = {
        "actor_id": batch.actor_id,
        "session": batch.session,
        "seq": batch.seq,
        "policy_version": batch.policy_version,
        "run_id": batch.run_id,
        "n": len(batch),
    }
    if describe:
        header["arrays"] = [
            {"name": k, "dtype": a.dtype.str, "shape": list(a.shape)} for k, a in arrays.items()
        ]
    return _pack(MAGIC_TRANSITIONS, header, b"".join([a.tobytes() for a in arrays.values()]))


# Room for an encoded batch's envelope and header (ids, counters, the run id in JSON): a
# few hundred bytes.
HEADER_ROOM = 1024


def rows_within(spec: EnvSpec, max_bytes: int) -> int:
    """The most transitions of ``spec`` that one encoded batch holds within ``max_bytes``
    (at least 1): a board caps its ``batch_size`` by it, so that no batch it closes by count
    is too large to send."""
    row = sum(
        np.dtype(a["dtype"]).itemsize * math.prod(a["shape"][1:])  # type: ignore[arg-type,index]
        for a in canonical_layout(spec, 1)
    )
    return max(1, (max_bytes - HEADER_ROOM) // row)


def canonical_layout(spec: EnvSpec, n: int) -> list[dict[str, object]]:
    """The ``arrays`` a header leaves out: every array in §3.1's order, ``n`` rows."""
    action = ("<i8", [n]) if spec.discrete else ("<f4", [n, *spec.action_shape])
    return [
        {"name": "obs", "dtype": _F32, "shape": [n, *spec.obs_shape]},
        {"name": "action", "dtype": action[0], "shape": action[1]},
        {"name": "reward", "dtype": _F32, "shape": [n]},
        {"name": "next_obs", "dtype": _F32, "shape": [n, *spec.obs_shape]},
        {"name": "terminated", "dtype": _U8, "shape": [n]},
        {"name": "truncated", "dtype": _U8, "shape": [n]},
        {"name": "intervention", "dtype": _U8, "shape": [n]},
    ]


def decode_transitions(
    data: bytes, spec: EnvSpec | None = None, max_bytes: int = DEFAULT_MAX_PAYLOAD
) -> TransitionBatch:
    """Decode a batch; with ``spec``, also check shapes, dtypes, finiteness and action bounds."""
    header, body = _unpack(data, MAGIC_TRANSITIONS, max_bytes)
    actor_id = _field(header, "actor_id", str)
    session, seq = _field(header, "session", int), _field(header, "seq", int)
    version, n = _field(header, "policy_version", int), _field(header, "n", int)
    run_id = run_id_field(header)
    if seq < 0 or version < 0 or session < 0 or n <= 0:
        raise CodecError("bad_header", "seq, session and policy_version >= 0, n > 0")
    arrays = _read_arrays(_layout(header, spec, n), n, body)
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
        run_id=run_id,
        intervention=arrays["intervention"].astype(bool),
    )
    if spec is not None:
        flags = (arrays["terminated"], arrays["truncated"], arrays["intervention"])
        validate_batch(batch, spec, raw_flags=flags)
    if not batch.intervention.any():  # checked: None says no row was an intervention's
        batch = dataclasses.replace(batch, intervention=None)
    return batch


def _layout(header: dict, spec: EnvSpec | None, n: int) -> list:
    """The header's ``arrays``, or the canonical layout for ``spec`` when it leaves them out."""
    if "arrays" in header:
        return _field(header, "arrays", list)
    if spec is None:
        raise CodecError("bad_header", "no 'arrays' in the header and no env spec to lay out")
    return canonical_layout(spec, n)


def _read_arrays(specs: list, n: int, body: memoryview) -> dict[str, np.ndarray]:
    """Each array of ``specs`` read from ``body``, checked: known names once each, wire
    dtypes, shapes that start with ``n``, and exactly the body's bytes."""
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
    return arrays


def validate_batch(
    batch: TransitionBatch, spec: EnvSpec, raw_flags: tuple[np.ndarray, ...] = ()
) -> None:
    """Shapes and dtypes against ``spec``, finite values, actions inside the action space."""
    _check_shapes(batch, spec)
    _check_values(batch, spec, raw_flags)


def _check_shapes(batch: TransitionBatch, spec: EnvSpec) -> None:
    """Every array's shape and dtype is what ``spec`` says for ``n`` rows, ``n > 0``."""
    # A hand-built record with a 0-d reward would make len() raise IndexError, and one with
    # no rows the discrete range check's min() raise ValueError (both found by fuzzing).
    if batch.reward.ndim != 1 or batch.reward.shape[0] == 0:
        raise CodecError("shape", f"reward shape {batch.reward.shape}, expected (n,), n > 0")
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
    if batch.intervention is not None and np.shape(batch.intervention) != (n,):
        shape = np.shape(batch.intervention)
        raise CodecError("shape", f"intervention shape {shape}, expected ({n},)")


def _check_values(batch: TransitionBatch, spec: EnvSpec, raw_flags: tuple[np.ndarray, ...]) -> None:
    """Flags 0 or 1, every float finite, every action inside the action space."""
    for flags in raw_flags:
        if flags.size and flags.max() > 1:
            raise CodecError("bad_array", "terminated/truncated/intervention must be 0 or 1")
    for name in ("obs", "next_obs", "reward") + (() if spec.discrete else ("action",)):
        if not np.all(np.isfinite(getattr(batch, name))):
            raise CodecError("non_finite", f"{name} holds NaN or inf")
    if spec.discrete:
        if batch.action.min() < 0 or batch.action.max() >= spec.num_actions:
            raise CodecError("action_range", f"action outside [0, {spec.num_actions})")
        return
    a = batch.action.reshape(len(batch), -1)
    if np.any(a < np.asarray(spec.action_low, np.float32)) or np.any(
        a > np.asarray(spec.action_high, np.float32)
    ):
        raise CodecError("action_range", "action outside the Box bounds")
