"""Protocol v5 policy bundle (``ERLP``): the manifest as the envelope's header, the packed
model as its body, signed (docs/protocol.md §4). The "blocks" model codec is in ``blocks``.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Sequence
from typing import Any

from edge_rl.specs import EnvSpec
from edge_rl.types import PolicyBundle, PolicyManifest, QuantParams
from edge_rl.wire import blocks
from edge_rl.wire.envelope import (
    DEFAULT_MAX_PAYLOAD,
    MAGIC_POLICY,
    CodecError,
    pack_signed,
    unpack_signed,
)
from edge_rl.wire.signing import Signer, Verifier

CODECS = ("zlib", "none", "blocks")
# The "zlib" codec's level. An int8 model is mostly weight bytes that deflate barely
# shrinks: on the CartPole example's 85 KB model level 6 is 0.01 % larger than level 9 in
# ~60 % of its time (docs/benchmarks.md, pipeline bubbles); any level inflates alike.
ZLIB_LEVEL = 6


def compress_model(
    model: bytes, codec: str, regions: Sequence[blocks.Region] | None = None
) -> bytes:
    """``model`` packed by ``codec``. "blocks" needs the model's weight ``regions``, found on
    the host by ``edge_rl.export.regions.weight_regions``; the others ignore them."""
    if codec == "zlib":
        return zlib.compress(model, ZLIB_LEVEL)
    if codec == "none":
        return model
    if codec == "blocks":
        if regions is None:
            raise ValueError("the 'blocks' codec needs the model's weight regions")
        return blocks.encode(model, regions)
    raise ValueError(f"unknown model codec {codec!r}, expected one of {CODECS}")


def decompress_model(payload: bytes, codec: str, max_bytes: int) -> bytes:
    if codec == "none":
        if len(payload) > max_bytes:  # "none" is bounded like the others (§6: too_large)
            raise CodecError("too_large", f"model of {len(payload)} bytes > limit {max_bytes}")
        return bytes(payload)
    if codec == "blocks":
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
    # One complete RFC 1950 stream and nothing after it: zlib inflates a cut stream (even
    # b"") to its first bytes without an error, and ignores bytes after the end marker.
    if not d.eof:
        raise CodecError("truncated", "the zlib stream ends before its end marker")
    if d.unused_data:
        raise CodecError("bad_model", f"{len(d.unused_data)} bytes after the zlib stream")
    return out


def manifest_to_dict(m: PolicyManifest) -> dict[str, Any]:
    d = dataclasses.asdict(m)
    d["env_spec"] = m.env_spec.to_dict()
    return d


# Exploration values an actor will act on (docs/protocol.md §4): epsilon is a probability,
# sigma a fraction of the action half-range (more than 1 is noise wider than the range).
EXPLORATION_RANGES = {"epsilon": (0.0, 1.0), "sigma": (0.0, 1.0)}
MAX_POLICY_VERSION = 2**53 - 1  # exact in every JSON reader


# docs/protocol.md §4: a missing or ill-typed field is bad_manifest, so every field's JSON
# type is checked before it is read. The conversions that build the manifest would otherwise
# coerce: "algo": null to "None", "learner_step": 1.5 to 1, "obs_mean": "123" to
# (1.0, 2.0, 3.0), "obs_shape": ["4"] to (4,), "created_unix": 1e999 to inf.
_STRINGS = ("algo", "env_id", "precision", "model_sha256", "codec")
_OPTIONAL_STRINGS = ("output_kind", "run", "run_id")
_QUANT_KEYS = frozenset(("dtype", "scale", "zero_point"))


def _number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def _ints(v: Any, low: int) -> bool:
    return isinstance(v, list) and all(type(x) is int and x >= low for x in v)


def _numbers(v: Any) -> bool:
    return isinstance(v, list) and all(_number(x) for x in v)


def _finite_json(value: Any) -> bool:
    """No inf anywhere inside (JSON's 1e999 parses as inf, and a free-form ``extra``
    holding one could not be encoded again). Iterative: the header parser allows nesting as
    deep as the recursion limit."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return False
        stack.extend(v.values() if isinstance(v, dict) else v if isinstance(v, list) else ())
    return True


def _mistyped(d: dict[str, Any]) -> str | None:
    """The first field of ``d`` whose JSON type (or range) §4 does not allow, or None."""
    for check in (_mistyped_scalar, _mistyped_env_spec, _mistyped_quant, _mistyped_obs_stats):
        wrong = check(d)
        if wrong:
            return wrong
    return None


def _mistyped_scalar(d: dict[str, Any]) -> str | None:
    """The strings, ``created_unix``, ``extra`` and the non-negative ints."""
    for key in _STRINGS + tuple(k for k in _OPTIONAL_STRINGS if k in d):
        if not isinstance(d.get(key), str):
            return key
    if "created_unix" in d and not _number(d["created_unix"]):
        return "created_unix"
    if "extra" in d and not (isinstance(d["extra"], dict) and _finite_json(d["extra"])):
        return "extra"
    for key in ("learner_step", "model_size"):
        if type(d.get(key)) is not int or d[key] < 0:
            return key
    return None


def _mistyped_env_spec(d: dict[str, Any]) -> str | None:
    spec = d.get("env_spec")
    if not isinstance(spec, dict) or not (
        _ints(spec.get("obs_shape"), 1)
        and _ints(spec.get("action_shape", []), 1)
        and type(spec.get("num_actions", 0)) is int
        and spec.get("num_actions", 0) >= 0
        and _numbers(spec.get("action_low", []))
        and _numbers(spec.get("action_high", []))
    ):
        return "env_spec"
    return None


def _mistyped_quant(d: dict[str, Any]) -> str | None:
    for key in ("input_quant", "output_quant"):
        q = d.get(key)
        if (
            not isinstance(q, dict)
            or not set(q) <= _QUANT_KEYS
            or not (
                isinstance(q.get("dtype"), str)
                and _number(q.get("scale", 0.0))
                and type(q.get("zero_point", 0)) is int
            )
        ):
            return key
    return None


def _mistyped_obs_stats(d: dict[str, Any]) -> str | None:
    for key in ("obs_mean", "obs_std"):  # informational (§4.1): their length is not checked
        if not _numbers(d.get(key)):
            return key
    if not all(s > 0 for s in d["obs_std"]):
        return "obs_std"
    return None


def manifest_from_dict(d: dict[str, Any]) -> PolicyManifest:
    version = d.get("policy_version") if isinstance(d, dict) else None
    if type(version) is not int or not 1 <= version <= MAX_POLICY_VERSION:
        raise CodecError("bad_manifest", f"policy_version {version!r} is not an int in [1, 2^53)")
    exploration = d.get("exploration")
    if not isinstance(exploration, dict) or not all(
        k in EXPLORATION_RANGES
        and type(v) in (int, float)
        and EXPLORATION_RANGES[k][0] <= v <= EXPLORATION_RANGES[k][1]
        for k, v in exploration.items()
    ):
        raise CodecError(
            "bad_manifest", f"exploration {exploration!r}: known keys, in {EXPLORATION_RANGES}"
        )
    wrong = _mistyped(d)
    if wrong:
        raise CodecError("bad_manifest", f"field {wrong!r} missing, mistyped or out of range")
    try:
        return PolicyManifest(
            policy_version=version,
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
            run=str(d.get("run", "")),
            run_id=str(d.get("run_id", "")),
            created_unix=float(d.get("created_unix", 0.0)),
            extra=dict(d.get("extra", {})),
        )
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
        raise CodecError("bad_manifest", f"{type(e).__name__}: {e}") from None


def encode_policy(bundle: PolicyBundle, signer: Signer) -> bytes:
    """The bundle as sent: signed by ``signer`` over the envelope's prefix and manifest."""
    header = manifest_to_dict(bundle.manifest)
    return pack_signed(MAGIC_POLICY, header, bundle.payload, signer.sign, signer.key_id)


def decode_policy(
    data: bytes, verifier: Verifier, max_bytes: int = DEFAULT_MAX_PAYLOAD
) -> PolicyBundle:
    """Verify the signature, then parse: ``CodecError`` (``unsigned``, ``unknown_key``,
    ``bad_signature``, ...) for a bundle ``verifier``'s key did not sign as it is."""
    header, body = unpack_signed(data, MAGIC_POLICY, max_bytes, verifier.check)
    return PolicyBundle(manifest_from_dict(header), bytes(body))
