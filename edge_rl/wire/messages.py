"""Protocol v5 status, control and credit payloads (docs/protocol.md §5): small JSON
headers with an empty body.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

from edge_rl.types import (
    BREAKDOWN_KEYS,
    SAFE_REASONS,
    SAFETY_KEYS,
    ActorState,
    ActorStatus,
    ControlMessage,
    CreditGrant,
    PolicyTarget,
    RunState,
)
from edge_rl.wire.envelope import (
    MAGIC_CONTROL,
    MAGIC_CREDIT,
    MAGIC_STATUS,
    MAGIC_TARGET,
    CodecError,
)
from edge_rl.wire.envelope import pack as _pack
from edge_rl.wire.envelope import unpack as _unpack

MAX_RUN_ID = 64  # characters of a run id (RunIdentity makes 16 hex digits)


# --- status and control ---------------------------------------------------------------


def encode_status(status: ActorStatus) -> bytes:
    return _pack(MAGIC_STATUS, dataclasses.asdict(status))


def _known(cls: type, header: dict[str, Any]) -> dict[str, Any]:
    """Drop fields this build does not know: a newer peer may add fields within v5."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in header.items() if k in names}


_ACTOR_STATES = typing.get_args(ActorState)
_RUN_STATES = typing.get_args(RunState)
_STATUS_TEXT = ("actor_id", "board", "runtime")  # strings of at most 128 characters
_STATUS_COUNTS = (  # integers in [0, 2^53)
    "policy_version",
    "env_steps",
    "episodes",
    "transitions_sent",
    "batches_sent",
    "batches_dropped",
    "policies_rejected",
    "control_rejected",
    "transitions_oversize",
    "transitions_dropped",
    "session",
    "served_episodes",
    "interventions",
    "policies_failed",
    "control_periods",
    "deadline_misses",
    "episodes_succeeded",
    "episodes_failed",
)


def _check_status_texts(fields: dict) -> None:
    for k in (*_STATUS_TEXT, "run_id"):
        v = fields.get(k, "")
        if not isinstance(v, str) or len(v) > 128:
            raise CodecError("bad_header", f"status {k!r} must be a string of <= 128 chars")
    if not _digest(fields.get("policy_digest", ""), empty=True):
        raise CodecError("bad_header", "status policy_digest must be 64 lowercase hex or empty")
    if len(fields.get("run_id", "")) > MAX_RUN_ID:  # a string: checked with the texts above
        raise CodecError("bad_header", f"status run_id must be <= {MAX_RUN_ID} chars")


def decode_status(data: bytes, max_bytes: int = 64 * 1024) -> ActorStatus:
    """Every field type- and range-checked: a status feeds the live view, the summary and
    the credit ledger, and a string where a count belongs must not reach any of them."""
    header, _ = _unpack(data, MAGIC_STATUS, max_bytes)
    fields = _known(ActorStatus, header)
    if "breakdown" in fields:  # optional (§5.1): an actor may leave it out
        fields["breakdown"] = _breakdown(fields["breakdown"])
    if "safety" in fields:  # optional (§5.6)
        fields["safety"] = _safety(fields["safety"])
    if fields.get("safe_reason", "") not in ("", *SAFE_REASONS):
        raise CodecError("bad_header", f"status safe_reason {fields.get('safe_reason')!r}")
    if fields.get("state") not in _ACTOR_STATES:
        raise CodecError("bad_header", f"status state {fields.get('state')!r}")
    _check_status_texts(fields)
    for k in _STATUS_COUNTS:
        v = fields.get(k, 0)
        if type(v) is not int or not 0 <= v < 2**53:
            raise CodecError("bad_header", f"status {k!r}: {v!r} is not a count")
    for k in ("env_steps_per_s", "time_unix", "recent_return", "jitter_p50_ms", "jitter_p99_ms"):
        v = fields.get(k, 0.0)
        if v is None and k == "recent_return":
            continue
        if type(v) not in (int, float) or not math.isfinite(v) or k != "recent_return" and v < 0:
            raise CodecError("bad_header", f"status {k!r}: {v!r} is not a finite number")
    try:
        return ActorStatus(**fields)
    except TypeError as e:
        raise CodecError("bad_header", f"status: {e}") from None


_HEX = frozenset("0123456789abcdef")


def _digest(v: Any, *, empty: bool = False) -> bool:
    """A SHA-256 as the manifest writes it: 64 lowercase hex digits (or "", if ``empty``)."""
    if not isinstance(v, str):
        return False
    return (empty and v == "") or (len(v) == 64 and set(v) <= _HEX)


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


def _safety(d: Any) -> dict[str, int]:
    """The shield's counts (§5.6): known reasons, each a count."""
    if not isinstance(d, dict):
        raise CodecError("bad_header", "status safety must be an object")
    unknown = set(d) - SAFETY_KEYS
    if unknown:
        raise CodecError("bad_header", f"status safety: unknown keys {sorted(unknown)}")
    for k, v in d.items():
        if not _count(v):
            raise CodecError("bad_header", f"status safety {k!r}: {v!r} is not a count")
    return dict(d)


def run_id_field(header: dict[str, Any]) -> str:
    v = header.get("run_id")
    if not isinstance(v, str) or len(v) > MAX_RUN_ID:
        raise CodecError("bad_header", f"run_id must be a string of <= {MAX_RUN_ID} chars")
    return v


# The longest status interval a control message may ask of a board (an hour).
MAX_STATUS_INTERVAL_S = 3600.0


def encode_control(msg: ControlMessage) -> bytes:
    header = dataclasses.asdict(msg)
    if not msg.status_interval_s:  # optional (§5): absent when the learner asks none
        del header["status_interval_s"]
    return _pack(MAGIC_CONTROL, header)


def decode_control(data: bytes, max_bytes: int = 64 * 1024) -> ControlMessage:
    header, _ = _unpack(data, MAGIC_CONTROL, max_bytes)
    if header.get("state") not in _RUN_STATES:
        raise CodecError("bad_header", f"control state {header.get('state')!r}")
    if not isinstance(header.get("reason", ""), str):  # null is not a string (§5)
        raise CodecError("bad_header", "control reason must be a string")
    interval = header.get("status_interval_s", 0.0)
    if (
        type(interval) not in (int, float)
        or not math.isfinite(interval)
        or not 0 <= interval <= MAX_STATUS_INTERVAL_S
    ):
        raise CodecError("bad_header", "control status_interval_s must be a number in [0, 3600]")
    return ControlMessage(
        header["state"], run_id_field(header), header.get("reason", ""), float(interval)
    )


MAX_REFUSED = 8  # sessions refused under one actor id, listed in its grant


def encode_credit(grant: CreditGrant) -> bytes:
    return _pack(MAGIC_CREDIT, {**dataclasses.asdict(grant), "refused": list(grant.refused)})


def _count(v: Any) -> bool:
    return type(v) is int and 0 <= v < 2**53


def decode_credit(data: bytes, max_bytes: int = 4096) -> CreditGrant:
    header, _ = _unpack(data, MAGIC_CREDIT, max_bytes)
    session, credit = header.get("session"), header.get("credit")
    refused = header.get("refused", [])
    if not _count(session) or not _count(credit):
        raise CodecError("bad_header", "credit: session and credit must be counts")
    if (
        not isinstance(refused, list)
        or len(refused) > MAX_REFUSED
        or not all(_count(r) for r in refused)
    ):
        raise CodecError("bad_header", f"credit: refused must list <= {MAX_REFUSED} sessions")
    return CreditGrant(run_id_field(header), session, credit, tuple(refused))


# --- deployment target (docs/protocol.md §5.5) ----------------------------------------------

MAX_ROLLOUT_NAME = 64


def encode_target(target: PolicyTarget) -> bytes:
    header = {k: v for k, v in dataclasses.asdict(target).items() if k != "bundle"}
    return _pack(MAGIC_TARGET, header, target.bundle)


def decode_target(data: bytes, max_bytes: int) -> PolicyTarget:
    """The header checked field by field; the body, if any, is a policy bundle the policy
    slot verifies like any other (its signature first)."""
    header, body = _unpack(data, MAGIC_TARGET, max_bytes)
    version, digest = header.get("policy_version"), header.get("model_sha256")
    if type(version) is not int or not 1 <= version < 2**53:
        raise CodecError("bad_header", f"target policy_version {version!r} is not in [1, 2^53)")
    if not _digest(digest):
        raise CodecError("bad_header", "target model_sha256 must be 64 lowercase hex digits")
    rollout = header.get("rollout", "")
    if not isinstance(rollout, str) or len(rollout) > MAX_ROLLOUT_NAME:
        raise CodecError("bad_header", f"target rollout must be a string of <= {MAX_ROLLOUT_NAME}")
    return PolicyTarget(run_id_field(header), version, digest, rollout, bytes(body))
