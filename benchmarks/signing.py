"""What signed policies cost: the learner's signing per publish, the actor's verification per
policy, side by side with the rest of an actor's load (decompress, hash, interpreter).

    .venv/bin/python benchmarks/signing.py            # ~30 s
    .venv/bin/python benchmarks/signing.py --rounds 50 --quick

For each policy size (CartPole's int8 Q-network, a HalfCheetah-sized int8 MLP, and a
3x2048 int8 MLP), one round times, in turn: ``encode_policy`` (manifest JSON + Ed25519
signature), the signature check alone, ``decode_policy`` (check + manifest parse), and a
full ``PolicySlot.load`` (everything an actor does before the swap). The steps of a round
run back to back so that load on the machine hits them alike; medians over the rounds.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from _common import md_table  # noqa: E402

NETS = (  # label, obs dim, outputs, hidden
    ("CartPole DQN 4-256-256-2", 4, 2, (256, 256)),
    ("HalfCheetah-sized 17-256-256-6", 17, 6, (256, 256)),
    ("3x2048 MLP 17-2048x3-6", 17, 6, (2048, 2048, 2048)),
)


def export(obs_dim: int, outputs: int, hidden: tuple[int, ...]) -> bytes:
    import keras

    from edge_rl.export.tflite import export_policy

    layers = [keras.Input((obs_dim,))]
    layers += [keras.layers.Dense(h, activation="relu") for h in hidden]
    net = keras.Sequential([*layers, keras.layers.Dense(outputs)])
    obs = np.random.default_rng(0).normal(size=(200, obs_dim)).astype(np.float32)
    return export_policy(net, obs, "int8").tflite


def bench(label: str, model: bytes, obs_dim: int, outputs: int, rounds: int) -> list:
    from edge_rl.actor.policy_slot import PolicySlot
    from edge_rl.specs import EnvSpec
    from edge_rl.types import PolicyBundle, PolicyManifest, QuantParams
    from edge_rl.wire.envelope import KEY_ID_BYTES, SIGNATURE_BYTES
    from edge_rl.wire.policy import compress_model, decode_policy, encode_policy
    from edge_rl.wire.signing import Signer

    spec = EnvSpec(obs_shape=(obs_dim,), num_actions=outputs)
    signer = Signer.generate()
    verifier = signer.verifier()
    packed = compress_model(model, "zlib")
    manifest = PolicyManifest(
        policy_version=1,
        algo="dqn",
        env_id="bench",
        env_spec=spec,
        precision="int8",
        input_quant=QuantParams("float32", 0.0, 0),
        output_quant=QuantParams("float32", 0.0, 0),
        obs_mean=(0.0,) * obs_dim,
        obs_std=(1.0,) * obs_dim,
        exploration={"epsilon": 0.05},
        learner_step=0,
        model_sha256=hashlib.sha256(model).hexdigest(),
        model_size=len(model),
        codec="zlib",
        run="bench",
        run_id="b1",
    )
    bundle = PolicyBundle(manifest, packed)
    times: dict[str, list[float]] = {k: [] for k in ("sign", "verify", "decode", "load")}
    for _ in range(rounds):
        t0 = time.perf_counter()
        payload = encode_policy(bundle, signer)
        t1 = time.perf_counter()
        h = int.from_bytes(payload[6:10], "little")
        end = 10 + h
        verifier.check(
            payload[end : end + KEY_ID_BYTES],
            payload[:end],
            payload[end + KEY_ID_BYTES : end + KEY_ID_BYTES + SIGNATURE_BYTES],
        )
        t2 = time.perf_counter()
        decode_policy(payload, verifier, max_bytes=len(payload))
        t3 = time.perf_counter()
        slot = PolicySlot(spec, verifier, run="bench", run_id="b1", max_model_bytes=len(model) + 1)
        slot.load(payload)
        t4 = time.perf_counter()
        for k, dt in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            times[k].append(dt)
    med = {k: float(np.median(v)) for k, v in times.items()}
    return [
        label,
        f"{len(model):,}",
        f"{len(payload):,}",
        f"{med['sign'] * 1e6:.0f}",
        f"{med['verify'] * 1e6:.0f}",
        f"{med['decode'] * 1e6:.0f}",
        f"{med['load'] * 1e3:.2f}",
        f"{100 * med['verify'] / med['load']:.1f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="skip the 3x2048 policy")
    args = parser.parse_args()
    rows = []
    for label, obs_dim, outputs, hidden in NETS[:2] if args.quick else NETS:
        rows.append(bench(label, export(obs_dim, outputs, hidden), obs_dim, outputs, args.rounds))
    print(f"load average {os.getloadavg()[0]:.2f}, {args.rounds} rounds, medians\n")
    headers = [
        "policy (int8)",
        "model B",
        "bundle B",
        "learner: encode + sign µs",
        "actor: verify µs",
        "actor: verify + parse µs",
        "actor: full load ms",
        "verify % of load",
    ]
    print(md_table(headers, rows))


if __name__ == "__main__":
    main()
