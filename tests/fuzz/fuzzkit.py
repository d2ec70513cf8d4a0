"""The fuzz suite's parts: real seed payloads, mutation strategies, and protocol oracles.

Seeds are made by the real encoders from real data (gymnasium rollouts, a real int8 export).
Mutations are byte-level (flip, overwrite, insert, delete, truncate, splice, a rewritten
header-length field, a payload grown past its limit) or structure-aware (the JSON header
decoded, a value replaced by a generated one of the wrong type, a huge int, deep nesting,
a NaN-producing literal such as ``1e999``, then re-encoded with a correct prefix; for
transition arrays, wrong dtype strings and shapes, and non-finite values in the body).

The oracles (``*_violation``) are written from docs/protocol.md, not from the decoders:
each returns ``None`` for a payload the protocol allows, else what is wrong with it. A fuzz
test decides "malformed" by the oracle: malformed -> the decoder must raise ``CodecError``;
allowed (a mutation can land on a valid payload, e.g. a changed float) -> the decoder must
accept it, and its record must round-trip through the encoder.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
import zlib
from typing import Any

import numpy as np
from hypothesis import strategies as st

# Every reason docs/protocol.md §7 lists for a codec: a CodecError must carry one of them.
CODEC_REASONS = frozenset(
    "too_large truncated bad_magic bad_version unsigned unknown_key bad_signature bad_header "
    "bad_array dtype shape non_finite action_range bad_codec bad_model bad_region "
    "bad_manifest".split()
)
SLOT_REASONS = CODEC_REASONS | frozenset(
    "wrong_run stale_version model_shape spec_mismatch bad_hash load_failed".split()
)
PREFIX = struct.Struct("<4sHI")
VERSION = 5  # §3 and §8: the schema version every payload carries (not the decoder's constant)
RUN_ID = "5f0c2a9e71b3d846"  # the run start every seed belongs to
MAGICS = (b"ERLP", b"ERLT", b"ERLS", b"ERLC", b"ERLB", b"XXXX", b"\0\0\0\0")

# §5's status states (v5 added safe and resetting) and §5.6's safety keys: the shield's
# counts, then the watchdogs' reasons (which are also what safe_reason may say).
STATES = ("starting", "running", "paused", "serving", "stopped", "safe", "resetting", "offline")
SHIELD_KEYS = ("nonfinite", "clipped", "rate_limited")
SAFE_REASONS = ("estop", "broker_lost", "learner_silent", "no_policy", "inference_late")
# Words a mutation may write as a key or a string, so that it lands on one a decoder knows.
WORDS = (*STATES, *SHIELD_KEYS, *SAFE_REASONS, "safety", "safe_reason", "intervention")

# --- byte-level mutations --------------------------------------------------------------


def _u32_candidates(data: bytes) -> st.SearchStrategy[int]:
    hlen = PREFIX.unpack_from(data)[2] if len(data) >= PREFIX.size else 0
    special = [0, 1, hlen - 1, hlen + 1, len(data) - 10, len(data) - 9, 65536, 65537]
    special += [2**31 - 1, 2**31, 2**32 - 1]
    return st.sampled_from([v for v in special if 0 <= v < 2**32]) | st.integers(0, 2**32 - 1)


@st.composite
def byte_mutation(draw, seeds: list[bytes], max_bytes: int) -> bytes:
    """One to four byte-level edits of one of ``seeds``."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(
            st.sampled_from(
                "flip overwrite insert delete truncate splice hlen magic version grow".split()
            )
        )
        n = len(data)
        pos = draw(st.integers(0, max(n - 1, 0)))
        if op == "flip" and n:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "overwrite" and n:
            chunk = draw(st.binary(min_size=1, max_size=8))
            data[pos : pos + len(chunk)] = chunk
        elif op == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "delete" and n:
            del data[pos : pos + draw(st.integers(1, 64))]
        elif op == "truncate":
            del data[pos:]
        elif op == "splice":
            other = draw(st.sampled_from(seeds))
            at = draw(st.integers(0, len(other)))
            data = data[:pos] + bytearray(other[at:])
        elif op == "hlen" and n >= 10:
            data[6:10] = struct.pack("<I", draw(_u32_candidates(bytes(data))))
        elif op == "magic" and n >= 4:
            data[0:4] = draw(st.sampled_from(MAGICS))
        elif op == "version" and n >= 6:
            versions = [0, 1, VERSION - 1, VERSION + 1, 255, 65535]  # v4 and v6 peers' too
            data[4:6] = struct.pack("<H", draw(st.sampled_from(versions)))
        elif op == "grow":  # past the size limit: must be too_large, never parsed
            data += bytes(max_bytes + 1 - n) if n <= max_bytes else b"\0"
    return bytes(data)


# --- structure-aware mutations of the JSON header --------------------------------------

RAW_LITERALS = (
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "-Infinity",
    "1.0",
    "0.0",
    "-0",
    "true",
    "false",
    "null",
    "9" * 5000,
    "[" * 20000 + "]" * 20000,
    '{"a":' * 5000 + "1" + "}" * 5000,
    '"\\ud800"',
    "1E400",
    "-1e-999",
)
_RAW = "\x00raw-literal-%d\x00"

json_scalars = (
    st.none()
    | st.booleans()
    | st.sampled_from([-1, 0, 1, 2, 2**31, 2**53, 2**63, 2**64, -(2**63) - 1, 10**30])
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(WORDS)
    | st.sampled_from([_RAW % i for i in range(len(RAW_LITERALS))])
)
json_keys = st.text(max_size=8) | st.sampled_from(WORDS)
json_values = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(json_keys, kids, max_size=4),
    max_leaves=8,
)


def dumps_raw(header: Any) -> bytes:
    """``json.dumps``, with each raw-literal placeholder written as its literal text."""
    text = json.dumps(header, separators=(",", ":"))
    for i, literal in enumerate(RAW_LITERALS):
        text = text.replace(json.dumps(_RAW % i), literal)
    return text.encode("utf-8", "surrogatepass")


def split(data: bytes) -> tuple[bytes, dict, bytes]:
    magic, _version, hlen = PREFIX.unpack_from(data)
    return magic, json.loads(data[10 : 10 + hlen]), data[10 + hlen :]


def frame(magic: bytes, header_text: bytes, rest: bytes = b"", version: int = VERSION) -> bytes:
    return PREFIX.pack(magic, version, len(header_text)) + header_text + rest


@st.composite
def mutate_json(draw, value: Any, depth: int = 0) -> Any:
    """``value`` with one node somewhere inside replaced, removed or added to."""
    if isinstance(value, dict) and value and draw(st.integers(0, 3)) and depth < 6:
        key = draw(st.sampled_from(sorted(value)))
        op = draw(st.sampled_from(["descend", "descend", "delete", "add"]))
        out = dict(value)
        if op == "descend":
            out[key] = draw(mutate_json(value[key], depth + 1))
        elif op == "delete":
            del out[key]
        else:
            out[draw(json_keys)] = draw(json_values)
        return out
    if isinstance(value, list) and value and draw(st.integers(0, 3)) and depth < 6:
        i = draw(st.integers(0, len(value) - 1))
        op = draw(st.sampled_from(["descend", "descend", "delete", "append", "dup"]))
        out = list(value)
        if op == "descend":
            out[i] = draw(mutate_json(value[i], depth + 1))
        elif op == "delete":
            del out[i]
        elif op == "append":
            out.append(draw(json_values))
        else:
            out.insert(i, value[i])
        return out
    return draw(json_values)


@st.composite
def header_mutation(draw, seeds: list[bytes], rest_after_header: bool = True) -> bytes:
    """A seed with its JSON header mutated and re-encoded under a correct prefix."""
    magic, header, rest = split(draw(st.sampled_from(seeds)))
    return frame(magic, dumps_raw(draw(mutate_json(header))), rest if rest_after_header else b"")


# --- oracle helpers ---------------------------------------------------------------------


def _no_constant(name: str) -> Any:
    raise ValueError(name)


def prefix_violation(data: bytes, magic: bytes, max_bytes: int) -> str | None:
    """§3's prefix: size, magic, version 5, a header length that fits."""
    if len(data) > max_bytes:
        return "too large"
    if len(data) < 10:
        return "shorter than the prefix"
    got, version, hlen = PREFIX.unpack_from(data)
    if got != magic or version != VERSION:
        return f"magic {got!r} version {version}"
    if hlen > 65536 or 10 + hlen > len(data):
        return "header length"
    return None


def parse_header(data: bytes) -> dict | None:
    """The header as a JSON object (no NaN/Infinity literals), or None."""
    hlen = PREFIX.unpack_from(data)[2]
    try:
        header = json.loads(data[10 : 10 + hlen].decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    return header if isinstance(header, dict) else None


def strict_header(data: bytes, magic: bytes, max_bytes: int) -> tuple[dict | None, str]:
    """The header if the prefix and JSON are sound, else ``(None, what is wrong)``."""
    why = prefix_violation(data, magic, max_bytes)
    if why:
        return None, why
    header = parse_header(data)
    return (header, "") if header is not None else (None, "header not a JSON object")


def is_int(v: Any, lo: int | None = 0) -> bool:
    return type(v) is int and (lo is None or v >= lo)


def is_num(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def is_run_id(v: Any) -> bool:
    """§3.1/§5: a run id is a string of at most 64 characters (required in v3)."""
    return isinstance(v, str) and len(v) <= 64


# --- transitions (§3.1) -------------------------------------------------------------------


def _transition_fields_violation(header: dict) -> str | None:
    """§3.1's scalar fields: who sent it, in which session and run, how many rows."""
    if not isinstance(header.get("actor_id"), str):
        return "actor_id"
    for key in ("session", "seq", "policy_version"):
        if not is_int(header.get(key)):
            return key
    if not is_run_id(header.get("run_id")):
        return "run_id"
    return None if is_int(header.get("n"), 1) else "n"


def _transition_layout(spec, n: int) -> dict[str, tuple[str, tuple[int, ...]]]:
    """§3.1's arrays for ``n`` rows of ``spec``: name -> (dtype, shape)."""
    act = (n,) if spec.discrete else (n, *spec.action_shape)
    return {
        "obs": ("<f4", (n, *spec.obs_shape)),
        "action": ("<i8" if spec.discrete else "<f4", act),
        "reward": ("<f4", (n,)),
        "next_obs": ("<f4", (n, *spec.obs_shape)),
        "terminated": ("|u1", (n,)),
        "truncated": ("|u1", (n,)),
        "intervention": ("|u1", (n,)),
    }


def _array_entry_violation(a: dict, dtype: str, shape: tuple[int, ...]) -> str | None:
    got_shape = a.get("shape")
    if a.get("dtype") != dtype or not isinstance(got_shape, list):
        return f"{a['name']} dtype"
    if not all(is_int(d) for d in got_shape) or tuple(got_shape) != shape:
        return f"{a['name']} shape"
    return None


def _transition_arrays(data: bytes, arrays: list[dict], want: dict) -> tuple[dict, str | None]:
    """The body cut into the header's arrays, in its order: ``(name -> array, None)``, or
    ``({}, what is wrong)``."""
    body, at, values = data[10 + PREFIX.unpack_from(data)[2] :], 0, {}
    for a in arrays:
        dtype, shape = want[a["name"]]
        why = _array_entry_violation(a, dtype, shape)
        if why:
            return {}, why
        size = math.prod(shape) * np.dtype(dtype).itemsize
        if at + size > len(body):
            return {}, "body too short"
        values[a["name"]] = np.frombuffer(body[at : at + size], dtype).reshape(shape)
        at += size
    return (values, None) if at == len(body) else ({}, "trailing body bytes")


def _transition_values_violation(values: dict, spec, n: int) -> str | None:
    """§3.1's values: flags 0/1, finite floats, actions inside the env's action space."""
    if any(values[k].max() > 1 for k in ("terminated", "truncated", "intervention")):
        return "flag > 1"
    floats = ["obs", "next_obs", "reward"] + ([] if spec.discrete else ["action"])
    if not all(np.isfinite(values[k]).all() for k in floats):
        return "non-finite"
    a = values["action"]
    if spec.discrete and (a.min() < 0 or a.max() >= spec.num_actions):
        return "action range"
    if not spec.discrete:
        flat = a.reshape(n, -1)
        if (flat < np.float32(spec.action_low)).any() or (
            flat > np.float32(spec.action_high)
        ).any():
            return "action range"
    return None


def read_transitions(data: bytes, spec, max_bytes: int) -> tuple[dict, str | None]:
    """The batch as §3.1 reads it: ``(name -> array, None)`` for a valid one, else
    ``({}, what is wrong)``."""
    header, why = strict_header(data, b"ERLT", max_bytes)
    if header is None:
        return {}, why
    why = _transition_fields_violation(header)
    if why:
        return {}, why
    n = header["n"]
    want = _transition_layout(spec, n)
    # Left out, the arrays are §3.1's canonical layout for the spec.
    canonical = [{"name": k, "dtype": d, "shape": list(s)} for k, (d, s) in want.items()]
    arrays = header.get("arrays", canonical)
    if not isinstance(arrays, list) or not all(isinstance(a, dict) for a in arrays):
        return {}, "arrays"
    if sorted(str(a.get("name")) for a in arrays) != sorted(want):
        return {}, "array names"
    values, why = _transition_arrays(data, arrays, want)
    why = why or _transition_values_violation(values, spec, n)
    return ({}, why) if why else (values, None)


def transition_violation(data: bytes, spec, max_bytes: int) -> str | None:
    return read_transitions(data, spec, max_bytes)[1]


# --- policy bundles (§4, §4.4) --------------------------------------------------------------

_QUANT_KEYS = {"dtype", "scale", "zero_point"}


def _json_finite(v: Any) -> bool:
    todo = [v]
    while todo:
        x = todo.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return False
        if isinstance(x, dict):
            todo.extend(x.values())
        elif isinstance(x, list):
            todo.extend(x)
    return True


def _manifest_fields_violation(d: dict) -> str | None:
    """§4's scalar fields: the version, the strings, the optional ones, the counts."""
    v = d.get("policy_version")
    if not is_int(v, 1) or v >= 2**53:
        return "policy_version"
    for key in ("algo", "env_id", "precision", "model_sha256", "codec"):
        if not isinstance(d.get(key), str):
            return key
    for key in ("output_kind", "run", "run_id"):
        if key in d and not isinstance(d[key], str):
            return key
    if "created_unix" in d and not is_num(d["created_unix"]):
        return "created_unix"
    if "extra" in d and (not isinstance(d["extra"], dict) or not _json_finite(d["extra"])):
        return "extra"  # free-form, but §3: no NaN or Infinity in a header (1e999 is inf)
    for key in ("learner_step", "model_size"):
        if not is_int(d.get(key)):
            return key
    return None


def _action_space_violation(spec: dict) -> str | None:
    """``env_spec``'s action space: discrete (a count, nothing else) or a box with bounds."""
    num = spec.get("num_actions", 0)
    shape = spec.get("action_shape", [])
    low, high = spec.get("action_low", []), spec.get("action_high", [])
    if not is_int(num) or not isinstance(shape, list) or not all(is_int(x, 1) for x in shape):
        return "action space types"
    if not all(isinstance(b, list) and all(is_num(x) for x in b) for b in (low, high)):
        return "action bounds"
    if num > 0 and (shape or low or high):
        return "discrete with a shape or bounds"
    if num == 0 and (not shape or len(low) != math.prod(shape) or len(high) != len(low)):
        return "box bounds"
    if any(lo >= hi for lo, hi in zip(low, high, strict=True)):
        return "low >= high"
    return None


def _env_spec_violation(spec: Any) -> str | None:
    if not isinstance(spec, dict):
        return "env_spec"
    obs_shape = spec.get("obs_shape")
    if not isinstance(obs_shape, list) or not obs_shape or not all(is_int(x, 1) for x in obs_shape):
        return "obs_shape"
    return _action_space_violation(spec)


def _quant_violation(d: dict) -> str | None:
    """The model's input and output quantization: a dtype, a finite scale, an int zero point."""
    for key in ("input_quant", "output_quant"):
        q = d.get(key)
        if (
            not isinstance(q, dict)
            or not set(q) <= _QUANT_KEYS
            or not isinstance(q.get("dtype"), str)
        ):
            return key
        if not is_num(q.get("scale", 0.0)) or not is_int(q.get("zero_point", 0), None):
            return key
    return None


def _obs_norm_violation(d: dict) -> str | None:
    for key in ("obs_mean", "obs_std"):  # §4 says "× obs_dim"; the decoder does not check it
        x = d.get(key)
        if not isinstance(x, list) or not all(is_num(e) for e in x):
            return key
    return None if all(s > 0 for s in d["obs_std"]) else "obs_std <= 0"


def _exploration_violation(ex: Any) -> str | None:
    if not isinstance(ex, dict) or not all(
        k in ("epsilon", "sigma") and is_num(x) and 0 <= x <= 1 for k, x in ex.items()
    ):
        return "exploration"
    return None


def manifest_violation(d: dict) -> str | None:
    """§4's table: required fields present with their JSON types, values in range."""
    return (
        _manifest_fields_violation(d)
        or _env_spec_violation(d.get("env_spec"))
        or _quant_violation(d)
        or _obs_norm_violation(d)
        or _exploration_violation(d.get("exploration"))
    )


def policy_violation(data: bytes, verifier, max_bytes: int) -> str | None:
    """§4.4 then §4: signed by ``verifier``'s key over prefix + header, a valid manifest."""
    from cryptography.exceptions import InvalidSignature

    why = prefix_violation(data, b"ERLP", max_bytes)
    if why:
        return why
    end = 10 + PREFIX.unpack_from(data)[2]
    if end + 72 > len(data):
        return "no key id and signature"
    if data[end : end + 8] != verifier.key_id:
        return "key id"
    try:
        verifier.public.verify(data[end + 8 : end + 72], data[:end])
    except InvalidSignature:
        return "signature"
    header = parse_header(data)
    return "header not a JSON object" if header is None else manifest_violation(header)


def sign(magic_header: bytes, signer) -> bytes:
    """``prefix | header`` bytes -> the same, followed by key id and signature."""
    return magic_header + signer.key_id + signer.sign(magic_header)


# --- model codecs (§4, §4.3) ---------------------------------------------------------------


def zlib_reference(payload: bytes, max_bytes: int) -> bytes | None:
    """An RFC 1950 stream, complete, with nothing after it, inflating to <= max_bytes."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(payload, max_bytes + 1)
    except zlib.error:
        return None
    ok = d.eof and not d.unused_data and not d.unconsumed_tail and len(out) <= max_bytes
    return out if ok else None


Region = tuple[int, int, int, int, int, int]  # offset, rows, cols, item bytes, b, length


def _blocks_regions(payload: bytes, count: int, n: int) -> list[Region] | None:
    """§4.3's region table: in order, not overlapping, inside the model, whole blocks."""
    regions, end = [], 0
    for k in range(count):
        off, rows, cols, code, b, length = struct.unpack_from("<IIIBBI", payload, 12 + 18 * k)
        if code > 2 or rows < 1 or cols < 1 or b < 1 or rows % b or cols % b:
            return None
        item = (1, 2, 4)[code]
        nbytes = rows * cols * item
        if off < end or off + nbytes > n:
            return None
        end = off + nbytes
        regions.append((off, rows, cols, item, b, length))
    return regions


def _blocks_classes(data: bytes, nb: int, b: int) -> list[int] | None:
    """The 2-bit block classes (0 zero, 1 circulant, 2 dense) of ``nb`` blocks, or None if
    a padding code is set, a code is 3, or a 1x1 block claims to be circulant."""
    ncodes = (nb + 3) // 4
    if len(data) < ncodes:
        return None
    classes = [(data[i // 4] >> (2 * (i % 4))) & 3 for i in range(ncodes * 4)]
    if any(classes[nb:]) or any(c == 3 or (c == 1 and b == 1) for c in classes[:nb]):
        return None
    return classes[:nb]


def _blocks_region(data: bytes, rows: int, cols: int, item: int, b: int) -> bytes | None:
    """One region's weights from its codes and values, element by element."""
    nb = (rows // b) * (cols // b)
    classes = _blocks_classes(data, nb, b)
    if classes is None:
        return None
    ncodes = (nb + 3) // 4
    need = ncodes + item * sum(b if c == 1 else b * b if c == 2 else 0 for c in classes)
    if len(data) != need:
        return None
    circ = memoryview(data)[ncodes:]
    dense = circ[sum(c == 1 for c in classes) * b * item :]
    ci = di = 0
    a = [[b"\0" * item] * cols for _ in range(rows)]
    for i, c in enumerate(classes):
        br, bc = divmod(i, cols // b)
        for r in range(b):
            for j in range(b):
                if c == 1:
                    e = circ[(ci * b + (j - r) % b) * item :][:item]
                elif c == 2:
                    e = dense[((di * b + r) * b + j) * item :][:item]
                else:
                    continue
                a[br * b + r][bc * b + j] = bytes(e)
        ci += c == 1
        di += c == 2
    return b"".join(b"".join(row) for row in a)


def _blocks_body(payload: bytes, start: int, total: int) -> bytes | None:
    """The zlib body after the table: complete, nothing after it, exactly ``total`` bytes."""
    d = zlib.decompressobj()
    try:
        body = d.decompress(payload[start:], total + 1)
    except zlib.error:
        return None
    return body if len(body) == total and d.eof and not d.unused_data else None


def blocks_reference(payload: bytes, max_bytes: int) -> bytes | None:
    """§4.3 decoded the slow way, one block at a time; None for anything malformed."""
    if len(payload) < 12:
        return None
    magic, version, count, n = struct.unpack_from("<4sHHI", payload)
    if magic != b"ERLB" or version != 1 or n > max_bytes or len(payload) < 12 + 18 * count:
        return None
    regions = _blocks_regions(payload, count, n)
    if regions is None:
        return None
    body = _blocks_body(payload, 12 + 18 * count, n + sum(r[5] for r in regions))
    if body is None:
        return None
    model, at = bytearray(body[:n]), n
    for off, rows, cols, item, b, length in regions:
        if any(body[off : off + rows * cols * item]):
            return None
        weights = _blocks_region(body[at : at + length], rows, cols, item, b)
        at += length
        if weights is None:
            return None
        model[off : off + rows * cols * item] = weights
    return bytes(model)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- status and control (§5) ------------------------------------------------------------------

_COUNTERS = (
    "policy_version env_steps episodes transitions_sent batches_sent batches_dropped "
    "policies_rejected control_rejected transitions_oversize transitions_dropped session "
    "served_episodes policies_failed interventions control_periods deadline_misses "
    "episodes_succeeded episodes_failed".split()
)
_RATES = ("env_steps_per_s", "time_unix", "jitter_p50_ms", "jitter_p99_ms")  # numbers >= 0
_BREAKDOWN = set(
    "env_step inference exploration publish emulation idle wall policy_receive model_load".split()
)


def _is_count(v: Any) -> bool:
    """§5: a count is a JSON integer in [0, 2^53)."""
    return is_int(v) and v < 2**53


def _status_v5_violation(h: dict) -> str | None:
    """§5's v5 fields and §5.6: ``safety`` maps its table's keys (any subset) to counts;
    ``safe_reason`` is a watchdog reason or empty. Its tie to ``state`` (a reason while
    ``safe``) is the meaning column's, not the type and range a receiver checks."""
    safety = h.get("safety", {})
    if not isinstance(safety, dict) or not set(safety) <= {*SHIELD_KEYS, *SAFE_REASONS}:
        return "safety keys"
    if not all(_is_count(v) for v in safety.values()):
        return "safety counts"
    return None if h.get("safe_reason", "") in ("", *SAFE_REASONS) else "safe_reason"


def status_violation(data: bytes, max_bytes: int = 65536) -> str | None:
    h, why = strict_header(data, b"ERLS", max_bytes)
    if h is None:
        return why
    # §5: strings of at most 128 characters, counts in [0, 2^53), rates and times >= 0.
    if not isinstance(h.get("actor_id"), str) or h.get("state") not in STATES:
        return "actor_id/state"
    text = [h.get(k, "") for k in ("actor_id", "board", "runtime", "run_id")]
    if not all(isinstance(t, str) and len(t) <= 128 for t in text):
        return "board/runtime"
    if not all(_is_count(h.get(k, 0)) for k in _COUNTERS):
        return "counter"
    if not all(is_num(h.get(k, 0.0)) and h.get(k, 0.0) >= 0 for k in _RATES):
        return "number field"
    if h.get("recent_return") is not None and not is_num(h["recent_return"]):
        return "recent_return"
    digest = h.get("policy_digest", "")  # §5: a SHA-256 in lowercase hex, or empty
    if not isinstance(digest, str) or not re.fullmatch(r"(?:[0-9a-f]{64})?", digest):
        return "policy_digest"
    bd = h.get("breakdown", {})
    if not isinstance(bd, dict) or not set(bd) <= _BREAKDOWN:
        return "breakdown keys"
    if not all(is_num(v) and v >= 0 for v in bd.values()):
        return "breakdown values"
    return _status_v5_violation(h)


def control_violation(data: bytes, max_bytes: int = 65536) -> str | None:
    h, why = strict_header(data, b"ERLC", max_bytes)
    if h is None:
        return why
    # §5's control table: v5 added no control state (safe and resetting are a board's own)
    if h.get("state") not in ("running", "paused", "serving", "stopped"):
        return "state"
    if not is_run_id(h.get("run_id")):
        return "run_id"
    if not isinstance(h.get("reason", ""), str):
        return "reason"
    interval = h.get("status_interval_s", 0)
    if not is_num(interval) or not 0 <= interval <= 3600:
        return "status_interval_s"
    return None


def credit_violation(data: bytes, max_bytes: int = 4096) -> str | None:
    """§5.2: run_id, session and credit required; refused: at most 8 sessions."""
    h, why = strict_header(data, b"ERLG", max_bytes)
    if h is None:
        return why
    if not is_run_id(h.get("run_id")):
        return "run_id"
    if not all(is_int(h.get(k)) and h.get(k) < 2**53 for k in ("session", "credit")):
        return "session/credit"
    refused = h.get("refused", [])
    if not isinstance(refused, list) or len(refused) > 8:
        return "refused"
    if not all(is_int(r) and r < 2**53 for r in refused):
        return "refused entry"
    return None


# --- running LiteRT where a crash cannot take the test process with it ----------------------


def in_child(fn) -> tuple[str, Any]:
    """``fn()`` in a forked child: ``("ok", its result)``, ``("raised", "Type: message")``,
    or ``("crashed", signal number)`` when the child died (LiteRT segfaults on some models)."""
    import os
    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(r)
        try:
            out = ("ok", fn())
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out = ("raised", f"{type(e).__name__}: {e}")
        with os.fdopen(w, "wb") as f:
            f.write(pickle.dumps(out))
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "crashed", os.WTERMSIG(status)
    return pickle.loads(data)


def fuzz(budget, strategy: st.SearchStrategy, check) -> int:
    """Run ``check(case)`` on ``budget.max_examples`` cases of ``strategy`` (hypothesis with
    the profile ``budget``), and fail unless that many were run: the suite promises them."""
    from hypothesis import given

    calls = [0]

    @budget
    @given(case=strategy)
    def run(case):
        calls[0] += 1
        check(case)

    run()
    assert calls[0] >= budget.max_examples, f"only {calls[0]} cases ran"
    return calls[0]
