"""Three CartPole int8 policies of known quality, for tests that deploy them: ``good`` and
``good2`` are hand-set linear controllers in a Q-network's layers (greedy return 500 from
every start tried), ``random`` a network left at its random initialisation (about 40).
All are real exports (``export_policy``), kept in tests/e2e/data so that a test needs no
TensorFlow; ``python -m tests.harness.cartpole_policies`` makes them again.

    bundle = policy_bundle(MODELS["good"].read_bytes(), run="r", run_id="s", version=2)
    payload = encode_policy(bundle, signer)
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from edge_rl.specs import EnvSpec
from edge_rl.types import PolicyBundle, PolicyManifest, QuantParams
from edge_rl.wire.policy import compress_model
from tests.harness.paths import REPO

if TYPE_CHECKING:
    from edge_rl.export.tflite import ExportedModel

CARTPOLE = EnvSpec(obs_shape=(4,), num_actions=2)
# Push right when w . obs > 0: two controllers that hold CartPole for its 500 steps.
CONTROLLERS = {"good": (0.1, 0.5, 1.0, 0.5), "good2": (0.05, 0.3, 1.0, 0.4), "random": None}
MODELS = {q: REPO / "tests" / "e2e" / "data" / f"cartpole_{q}_int8.tflite" for q in CONTROLLERS}
FLOAT_IO = QuantParams("float32", 0.0, 0)


def _network(controller: tuple[float, ...] | None):
    from edge_rl.agents.dqn.networks import make_q_network

    net = make_q_network(4, 2, (8, 8), seed=3)
    if controller is not None:
        w0 = np.zeros((4, 8), np.float32)
        w0[:, 0], w0[:, 1] = controller, -np.asarray(controller)  # relu(s), relu(-s)
        w1 = np.zeros((8, 8), np.float32)
        w1[0, 0] = w1[1, 1] = 1.0
        w2 = np.zeros((8, 2), np.float32)
        w2[1, 0] = w2[0, 1] = 1.0  # Q(left) = relu(-s), Q(right) = relu(s)
        zeros = [np.zeros(8, np.float32), np.zeros(8, np.float32), np.zeros(2, np.float32)]
        net.set_weights([w0, zeros[0], w1, zeros[1], w2, zeros[2]])
    return net


def cartpole_manifest(
    model: bytes,
    exported: ExportedModel | None = None,
    *,
    version: int = 1,
    epsilon: float = 0.0,
    codec: str = "zlib",
    run: str = "r1",
    run_id: str = "s1",
    **fields: Any,
) -> PolicyManifest:
    """A CartPole DQN manifest of ``model`` (its true hash and size): the precision,
    quantisation and observation statistics of ``exported`` (the export ``model`` came
    from), or float I/O and identity statistics without it; ``fields`` set any other."""
    quant = {
        "precision": "int8",
        "input_quant": FLOAT_IO,
        "output_quant": FLOAT_IO,
        "obs_mean": (0.0,) * 4,  # informational: the model normalises inside
        "obs_std": (1.0,) * 4,
    }
    if exported is not None:
        quant = {k: getattr(exported, k) for k in quant}
    given = {
        "policy_version": version,
        "algo": "dqn",
        "env_id": "CartPole-v1",
        "env_spec": CARTPOLE,
        **quant,
        "exploration": {"epsilon": epsilon},
        "learner_step": 0,
        "model_sha256": hashlib.sha256(model).hexdigest(),
        "model_size": len(model),
        "codec": codec,
        "run": run,
        "run_id": run_id,
    }
    return PolicyManifest(**{**given, **fields})


def policy_bundle(model: bytes, *, run: str, run_id: str, version: int) -> PolicyBundle:
    """An unsigned bundle of ``model``; ``encode_policy(bundle, signer)`` signs it."""
    manifest = cartpole_manifest(model, version=version, run=run, run_id=run_id)
    return PolicyBundle(manifest, compress_model(model, "zlib"))


def export_models() -> None:
    """Write MODELS (TensorFlow)."""
    from edge_rl.export.tflite import export_policy
    from edge_rl.export.worker import shutdown

    obs = np.random.default_rng(0).normal(scale=(1.0, 1.0, 0.1, 1.0), size=(300, 4))
    try:
        for quality, path in MODELS.items():
            net = _network(CONTROLLERS[quality])
            exported = export_policy(net, obs.astype(np.float32), "int8")
            path.write_bytes(exported.tflite)
    finally:
        shutdown()


if __name__ == "__main__":
    export_models()
