"""Build the protocol test vectors in this directory (docs/protocol.md, "Test vectors").

    PYTHONPATH=. python tests/vectors/make.py            # rebuild; keep the signed bundle
    PYTHONPATH=. python tests/vectors/make.py --resign   # also a new test key and bundle

One JSON file per message kind, each a list of cases: the payload as hex, the fields it
carries, and either ``"ok"`` or the reject reason a receiver must count. Status, control,
credit and transition payloads are deterministic, so tests/unit/wire/test_vectors.py both
decodes each payload and encodes its fields back to the same bytes.

The policy bundle is signed by a throwaway TEST key made here: its private half lives only
in this process and is never written, so nobody can sign with it; ``policy_test_key.pub``
and the signed bundle are what get committed. Without ``--resign`` the committed bundle
and key are kept as they are (they cannot be re-signed), and only checked.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from edge_rl.specs import EnvSpec
from edge_rl.types import (
    ActorStatus,
    ControlMessage,
    CreditGrant,
    PolicyBundle,
    PolicyManifest,
    PolicyTarget,
    QuantParams,
    TransitionBatch,
)
from edge_rl.wire import blocks
from edge_rl.wire.envelope import (
    MAGIC_CONTROL,
    MAGIC_STATUS,
    MAGIC_TARGET,
    MAGIC_TRANSITIONS,
    SCHEMA_VERSION,
)
from edge_rl.wire.messages import encode_control, encode_credit, encode_status, encode_target
from edge_rl.wire.policy import decode_policy, encode_policy, manifest_to_dict
from edge_rl.wire.signing import Signer, Verifier
from edge_rl.wire.transitions import encode_transitions

HERE = Path(__file__).resolve().parent
# A real int8 CartPole export (4 inputs, 2 Q-values), also the fuzz tests' seed model.
MODEL = (HERE.parent / "fuzz" / "data" / "cartpole_gst_int8.tflite").read_bytes()
RUN_ID = "5f0c2a9e71b3d846"
PUBLIC_KEY = HERE / "policy_test_key.pub"
POLICY = HERE / "policy.json"


def _case(
    name: str, payload: bytes, fields: dict[str, Any] | None, expect: str, canonical: bool = False
) -> dict:
    """``canonical``: ``payload`` is what the reference encoder writes for ``fields``."""
    case: dict[str, Any] = {"name": name, "expect": expect, "hex": payload.hex()}
    if fields is not None:
        case["fields"] = fields
    if canonical:
        case["canonical"] = True
    return case


def _raw(magic: bytes, header: bytes, version: int = SCHEMA_VERSION, body: bytes = b"") -> bytes:
    """A payload as a hostile or older peer might send it: any header bytes, any version."""
    return struct.pack("<4sHI", magic, version, len(header)) + header + body


def _header_length(payload: bytes) -> int:
    return struct.unpack_from("<I", payload, 6)[0]


def _arrays(batch: TransitionBatch) -> dict[str, Any]:
    return {
        "obs": batch.obs.tolist(),
        "action": batch.action.tolist(),
        "reward": batch.reward.tolist(),
        "next_obs": batch.next_obs.tolist(),
        "terminated": batch.terminated.astype(int).tolist(),
        "truncated": batch.truncated.astype(int).tolist(),
        **(
            {}
            if batch.intervention is None
            else {"intervention": batch.intervention.astype(int).tolist()}
        ),
    }


def _batch_fields(batch: TransitionBatch) -> dict[str, Any]:
    head = {
        k: getattr(batch, k) for k in ("actor_id", "session", "seq", "policy_version", "run_id")
    }
    return {**head, "arrays": _arrays(batch)}


def transitions() -> dict[str, Any]:
    f32 = np.float32
    cartpole = TransitionBatch(
        actor_id="pi-01",
        session=7,
        seq=0,
        policy_version=3,
        obs=np.array([[0.01, -0.02, 0.03, 0.04], [0.0102, 0.175, 0.0308, -0.255]], f32),
        action=np.array([1, 0], np.int64),
        reward=np.array([1.0, 1.0], f32),
        next_obs=np.array([[0.0102, 0.175, 0.0308, -0.255], [0.0137, -0.02, 0.0257, 0.047]], f32),
        terminated=np.array([False, False]),
        truncated=np.array([False, True]),
        run_id=RUN_ID,
    )
    pendulum = TransitionBatch(
        actor_id="jetson-7",
        session=2**53 - 1,
        seq=41,
        policy_version=12,
        obs=np.array([[0.5, -0.8660254, 1.25]], f32),
        action=np.array([[-2.0]], f32),
        reward=np.array([-4.0123], f32),
        next_obs=np.array([[0.45, -0.893, 0.97]], f32),
        terminated=np.array([False]),
        truncated=np.array([False]),
        run_id=RUN_ID,
    )
    # A teacher took over the second step (the board's teleop:, docs/protocol.md §3.1).
    taken_over = dataclasses.replace(cartpole, seq=1, intervention=np.array([False, True]))
    good = encode_transitions(cartpole)
    hlen = _header_length(good)
    header = json.loads(good[10 : 10 + hlen])
    body = good[10 + hlen :]
    nan_obs = dataclasses.replace(cartpole, obs=cartpole.obs.copy())
    nan_obs.obs[0, 0] = np.nan
    wide = dataclasses.replace(cartpole, action=np.array([2, 0], np.int64))
    flag_2 = bytearray(encode_transitions(taken_over))
    flag_2[-1] = 2  # the last byte: the second row's intervention flag
    cases = [
        _case("cartpole_n2", good, _batch_fields(cartpole), "ok", True),
        _case("pendulum_n1_box", encode_transitions(pendulum), _batch_fields(pendulum), "ok", True),
        _described(cartpole),
        _case(
            "cartpole_n2_intervention",
            encode_transitions(taken_over),
            _batch_fields(taken_over),
            "ok",
            True,
        ),
        _case("pendulum_batch_for_cartpole", encode_transitions(pendulum), None, "truncated"),
        _case(
            "version_3", _raw(MAGIC_TRANSITIONS, good[10 : 10 + hlen], 3, body), None, "bad_version"
        ),
        _case("status_magic", b"ERLS" + good[4:], None, "bad_magic"),
        _case("h_past_end", good[:6] + struct.pack("<I", len(good)) + good[10:], None, "truncated"),
        _case("body_one_byte_short", good[:-1], None, "truncated"),
        _case("one_trailing_byte", good + b"\x00", None, "bad_array"),
        _case(
            "run_id_65_chars",
            _raw(MAGIC_TRANSITIONS, _json({**header, "run_id": "a" * 65}), body=body),
            None,
            "bad_header",
        ),
        _case(
            "seq_as_float",
            _raw(MAGIC_TRANSITIONS, _json({**header, "seq": 0.0}), body=body),
            None,
            "bad_header",
        ),
        _case("nan_in_obs", encode_transitions(nan_obs), None, "non_finite"),
        _case("action_2_of_2", encode_transitions(wide), None, "action_range"),
        _case("intervention_flag_2", bytes(flag_2), None, "bad_array"),
    ]
    return {
        "kind": "ERLT transition batch (docs/protocol.md §3.1)",
        "env_specs": {
            "cartpole_n2": EnvSpec((4,), num_actions=2).to_dict(),
            "pendulum_n1_box": EnvSpec((3,), 0, (1,), (-2.0,), (2.0,)).to_dict(),
            "cartpole_n2_described": EnvSpec((4,), num_actions=2).to_dict(),
            "cartpole_n2_intervention": EnvSpec((4,), num_actions=2).to_dict(),
        },
        "spec_for_rejects": "cartpole_n2",
        "cases": cases,
    }


def _described(batch: TransitionBatch) -> dict[str, Any]:
    """The same batch with its layout listed in the header's optional ``arrays``."""
    case = _case(
        "cartpole_n2_described",
        encode_transitions(batch, describe=True),
        _batch_fields(batch),
        "ok",
        True,
    )
    return {**case, "described": True}


def _json(header: dict[str, Any]) -> bytes:
    return json.dumps(header, separators=(",", ":")).encode()


def status() -> dict[str, Any]:
    minimal = ActorStatus(actor_id="pi-01", state="starting")
    full = ActorStatus(
        actor_id="pi-01",
        state="running",
        board="rpi4",
        runtime="ai_edge_litert",
        policy_version=3,
        env_steps=1200,
        episodes=41,
        transitions_sent=1184,
        batches_sent=190,
        batches_dropped=0,
        policies_rejected=1,
        control_rejected=0,
        transitions_oversize=0,
        transitions_dropped=0,
        env_steps_per_s=212.5,
        recent_return=28.25,
        time_unix=1760000000.5,
        breakdown={"env_step": 0.75, "inference": 1.5, "idle": 2.25, "wall": 4.5},
        run_id=RUN_ID,
        session=7,
    )
    will = ActorStatus(actor_id="pi-01", state="offline", time_unix=1759999000.0, session=7)
    safe = ActorStatus(  # a watchdog's safe state (§5.6)
        actor_id="pi-01",
        state="safe",
        env_steps=900,
        run_id=RUN_ID,
        session=7,
        safety={"clipped": 12, "rate_limited": 30, "broker_lost": 25},
        safe_reason="broker_lost",
    )
    cases = [
        _case("starting_minimal", encode_status(minimal), dataclasses.asdict(minimal), "ok", True),
        _case("running_full", encode_status(full), dataclasses.asdict(full), "ok", True),
        _case("last_will", encode_status(will), dataclasses.asdict(will), "ok", True),
        _case("safe_broker_lost", encode_status(safe), dataclasses.asdict(safe), "ok", True),
        _case(
            "unknown_safety_key",
            _raw(MAGIC_STATUS, b'{"actor_id":"pi-01","state":"safe","safety":{"brake":1}}'),
            None,
            "bad_header",
        ),
        _case(
            "safe_reason_unknown",
            _raw(MAGIC_STATUS, b'{"actor_id":"pi-01","state":"safe","safe_reason":"tired"}'),
            None,
            "bad_header",
        ),
        _case(
            "only_required_keys",
            _raw(MAGIC_STATUS, b'{"actor_id":"pi-01","state":"paused"}'),
            dataclasses.asdict(ActorStatus(actor_id="pi-01", state="paused")),
            "ok",
        ),
        _case(
            "unknown_key_ignored",
            _raw(MAGIC_STATUS, b'{"actor_id":"pi-01","state":"serving","new_field":[1]}'),
            dataclasses.asdict(ActorStatus(actor_id="pi-01", state="serving")),
            "ok",
        ),
        _case(
            "state_waiting",
            _raw(MAGIC_STATUS, b'{"actor_id":"pi-01","state":"waiting"}'),
            None,
            "bad_header",
        ),
        _case(
            "count_as_float",
            _raw(MAGIC_STATUS, b'{"actor_id":"pi-01","state":"running","env_steps":1.0}'),
            None,
            "bad_header",
        ),
        _case(
            "unknown_breakdown_key",
            _raw(MAGIC_STATUS, b'{"actor_id":"pi-01","state":"running","breakdown":{"gpu":1}}'),
            None,
            "bad_header",
        ),
        _case(
            "nan_constant",
            _raw(MAGIC_STATUS, b'{"actor_id":"pi-01","state":"running","time_unix":NaN}'),
            None,
            "bad_header",
        ),
    ]
    return {"kind": "ERLS status (docs/protocol.md §5)", "cases": cases}


def _control_fields(m: ControlMessage) -> dict[str, Any]:
    """A canonical control's fields: exactly the keys its bytes carry (the encoder leaves
    ``status_interval_s`` out when it is 0, the learner asking for none)."""
    fields = dataclasses.asdict(m)
    if not m.status_interval_s:
        del fields["status_interval_s"]
    return fields


def control() -> dict[str, Any]:
    cases = [
        _case(
            f"{state}",
            encode_control(m := ControlMessage(state, RUN_ID, reason)),
            _control_fields(m),
            "ok",
            True,
        )
        for state, reason in (
            ("running", ""),
            ("paused", "the learner is gone"),
            ("serving", "budget reached"),
            ("stopped", "operator"),
        )
    ]
    cases += [
        _case(
            "status_interval",
            encode_control(m := ControlMessage("running", RUN_ID, "", 5.25)),
            _control_fields(m),
            "ok",
            True,
        ),
        _case(
            "status_interval_negative",
            _raw(MAGIC_CONTROL, b'{"state":"running","run_id":"r","status_interval_s":-1}'),
            None,
            "bad_header",
        ),
        _case(
            "status_interval_over_an_hour",
            _raw(MAGIC_CONTROL, b'{"state":"running","run_id":"r","status_interval_s":3601}'),
            None,
            "bad_header",
        ),
        _case(
            "status_interval_string",
            _raw(MAGIC_CONTROL, b'{"state":"running","run_id":"r","status_interval_s":"5"}'),
            None,
            "bad_header",
        ),
    ]
    cases += [
        _case(
            "no_reason",
            _raw(MAGIC_CONTROL, b'{"state":"running","run_id":"' + RUN_ID.encode() + b'"}'),
            dataclasses.asdict(ControlMessage("running", RUN_ID, "")),
            "ok",
        ),
        _case(
            "state_done", _raw(MAGIC_CONTROL, b'{"state":"done","run_id":"r"}'), None, "bad_header"
        ),
        _case("no_run_id", _raw(MAGIC_CONTROL, b'{"state":"running"}'), None, "bad_header"),
        _case(
            "reason_null",
            _raw(MAGIC_CONTROL, b'{"state":"paused","run_id":"r","reason":null}'),
            None,
            "bad_header",
        ),
        _case("header_is_a_list", _raw(MAGIC_CONTROL, b'["running"]'), None, "bad_header"),
        _case(
            "version_3",
            _raw(MAGIC_CONTROL, b'{"state":"running","run_id":"r"}', 3),
            None,
            "bad_version",
        ),
    ]
    return {"kind": "ERLC control (docs/protocol.md §5)", "cases": cases}


def credit() -> dict[str, Any]:
    grants = [
        ("first_grant", CreditGrant(RUN_ID, 4503599627370495, 2331, ())),
        ("with_refused", CreditGrant(RUN_ID, 7, 96, (11, 2**53 - 1))),
    ]
    cases = [
        _case(
            name,
            encode_credit(g),
            {**dataclasses.asdict(g), "refused": list(g.refused)},
            "ok",
            True,
        )
        for name, g in grants
    ]
    nine = ",".join(str(i) for i in range(9))
    cases += [
        _case(
            "refused_left_out",
            _raw(b"ERLG", b'{"run_id":"r","session":7,"credit":5}'),
            {"run_id": "r", "session": 7, "credit": 5, "refused": []},
            "ok",
        ),
        _case(
            "nine_refused",
            _raw(b"ERLG", f'{{"run_id":"r","session":7,"credit":5,"refused":[{nine}]}}'.encode()),
            None,
            "bad_header",
        ),
        _case(
            "negative_credit",
            _raw(b"ERLG", b'{"run_id":"r","session":7,"credit":-1}'),
            None,
            "bad_header",
        ),
        _case(
            "over_4096_bytes",
            _raw(b"ERLG", _json({"run_id": "r", "session": 7, "credit": 5, "pad": "x" * 4096})),
            None,
            "too_large",
        ),
    ]
    return {"kind": "ERLG credit grant (docs/protocol.md §5.2)", "cases": cases}


def blocks_codec() -> dict[str, Any]:
    from edge_rl.export.regions import weight_regions  # needs TensorFlow: build time only

    payload = blocks.encode(MODEL, weight_regions(MODEL))
    count = struct.unpack_from("<H", payload, 6)[0]
    regions = [
        dict(zip(("offset", "rows", "cols", "dtype", "b", "packed_length"), r, strict=True))
        for r in struct.iter_unpack("<IIIBBI", payload[12 : 12 + 18 * count])
    ]
    return {
        "kind": "blocks model codec (docs/protocol.md §4.3)",
        "model_hex": MODEL.hex(),
        "model_sha256": hashlib.sha256(MODEL).hexdigest(),
        "cases": [
            _case("cartpole_gst_int8", payload, {"regions": regions}, "ok"),
            _case("bad_magic", b"ERLX" + payload[4:], None, "bad_magic"),
            _case("format_version_2", payload[:4] + b"\x02\x00" + payload[6:], None, "bad_version"),
            _case("cut_in_the_table", payload[:20], None, "truncated"),
        ],
    }


def policy(resign: bool) -> dict[str, Any]:
    """The signed bundle; kept as committed unless ``resign`` (it cannot be re-signed)."""
    if not resign and POLICY.exists():
        return json.loads(POLICY.read_text())
    signer = Signer.generate()  # the throwaway test key: its private half is never written
    manifest = PolicyManifest(
        policy_version=3,
        algo="dqn",
        env_id="CartPole-v1",
        env_spec=EnvSpec((4,), num_actions=2),
        precision="int8",
        input_quant=QuantParams("float32"),
        output_quant=QuantParams("float32"),
        obs_mean=(-0.0029, -0.0251, 0.0132, 0.0633),
        obs_std=(0.0654, 0.5531, 0.105, 0.8706),
        exploration={"epsilon": 0.05},
        learner_step=1500,
        model_sha256=hashlib.sha256(MODEL).hexdigest(),
        model_size=len(MODEL),
        codec="zlib",
        output_kind="q_values",
        run="default",
        run_id=RUN_ID,
        created_unix=1760000000.0,
    )
    good = encode_policy(PolicyBundle(manifest, zlib.compress(MODEL, 9)), signer)
    tampered = bytearray(good)
    tampered[good.index(b'"policy_version":3') + 17] = ord("9")  # the version, after signing
    other = encode_policy(PolicyBundle(manifest, zlib.compress(MODEL, 9)), Signer.generate())
    PUBLIC_KEY.write_bytes(signer.public_pem())
    return {
        "kind": "ERLP signed policy bundle (docs/protocol.md §4, §4.4)",
        "note": "signed by a throwaway TEST key whose private half was never stored",
        "public_key_file": PUBLIC_KEY.name,
        "key_id": signer.key_id.hex(),
        "model_hex": MODEL.hex(),
        "cases": [
            _case("cartpole_dqn_v3", good, manifest_to_dict(manifest), "ok"),
            _case("version_edited_after_signing", bytes(tampered), None, "bad_signature"),
            _case("signed_by_another_key", other, None, "unknown_key"),
            _case("signature_cut_off", good[: 10 + _header_length(good) + 40], None, "unsigned"),
        ],
    }


# What the reference actor accepts on its target topic: max_policy_bytes (8,000,000 by
# default) + 128 KiB (docs/protocol.md §5.5); a larger payload is refused too_large.
TARGET_MAX_BYTES = 8_000_000 + 128 * 1024


def target() -> dict[str, Any]:
    """``ERLD`` targets: a rollback (no body) and a step that carries the signed bundle of
    policy.json (its bytes as committed: they cannot be signed again without --resign)."""
    policy_case = json.loads(POLICY.read_text())["cases"][0]
    bundle, manifest = bytes.fromhex(policy_case["hex"]), policy_case["fields"]
    digest = manifest["model_sha256"]

    def fields(t: PolicyTarget) -> dict[str, Any]:
        return {**dataclasses.asdict(t), "bundle": t.bundle.hex()}

    rollback = PolicyTarget(RUN_ID, 3, digest, "v4")
    step = PolicyTarget(RUN_ID, manifest["policy_version"], digest, "v4", bundle)
    head = b'{"run_id":"' + RUN_ID.encode() + b'","policy_version":3,"model_sha256":"'
    cases = [
        _case("rollback", encode_target(rollback), fields(rollback), "ok", True),
        _case("with_bundle", encode_target(step), fields(step), "ok", True),
        _case(
            "no_rollout_name",
            _raw(MAGIC_TARGET, head + digest.encode() + b'"}'),
            fields(PolicyTarget(RUN_ID, 3, digest)),
            "ok",
        ),
        _case(
            "version_0",
            _raw(MAGIC_TARGET, head.replace(b":3,", b":0,") + digest.encode() + b'"}'),
            None,
            "bad_header",
        ),
        _case(
            "digest_upper_case",
            _raw(MAGIC_TARGET, head + digest.upper().encode() + b'"}'),
            None,
            "bad_header",
        ),
        _case(
            "no_run_id",
            _raw(MAGIC_TARGET, b'{"policy_version":3,"model_sha256":"' + digest.encode() + b'"}'),
            None,
            "bad_header",
        ),
        _case(  # H > 65536: refused before any header byte is read
            "header_over_64_KiB",
            struct.pack("<4sHI", MAGIC_TARGET, SCHEMA_VERSION, 65_537) + b" " * 65_537,
            None,
            "truncated",
        ),
        _case(
            "version_3", _raw(MAGIC_TARGET, head + digest.encode() + b'"}', 3), None, "bad_version"
        ),
    ]
    return {
        "kind": "ERLD deployment target (docs/protocol.md §5.5)",
        "max_bytes": TARGET_MAX_BYTES,
        "note": "fields.bundle is the body, hex (empty: a rollback); with_bundle carries "
        "policy.json's signed bundle, which verifies with policy_test_key.pub",
        "cases": cases,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resign", action="store_true", help="a new test key and signed bundle")
    args = ap.parse_args()
    for name, build in (
        ("transitions", transitions),
        ("status", status),
        ("control", control),
        ("credit", credit),
        ("blocks", blocks_codec),
    ):
        (HERE / f"{name}.json").write_text(json.dumps(build(), indent=1) + "\n")
    vectors = policy(args.resign)
    verifier = Verifier.from_pem(PUBLIC_KEY.read_bytes())
    decode_policy(bytes.fromhex(vectors["cases"][0]["hex"]), verifier)  # still verifies
    POLICY.write_text(json.dumps(vectors, indent=1) + "\n")
    (HERE / "target.json").write_text(json.dumps(target(), indent=1) + "\n")  # policy's bytes


if __name__ == "__main__":
    main()
