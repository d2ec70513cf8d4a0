"""Export the policy network to TFLite, check it in LiteRT, and make a signed policy bundle.

    packager = PolicyPackager(cfg.export, Stamp(algo, env_id, run, run_id), spec, replay, ...)
    published = packager.export(algo, snapshot(net), version, step, exploration)
    packager.save(published)      # policy.tflite, manifest.json and policy.bundle

A failing export is counted and not published: actors keep the previous policy. It
packages and signs; PolicyBroadcast (broadcast.py) publishes.

Calibration and parity observations are drawn from replay across boards (no board more
than its share: ``ReplayBuffer.drawn``) and clipped to the env's plausible bounds
(ingest/plausible.py), so that one board's data cannot make the int8 ranges. When an
export fails anyway, the board whose observation lies farthest off the others' in the
draw (a robust z of at least ``SUSPECT_Z``) is named in the warning and counted
(``PackagerStats.suspects``): the board whose data preceded the failures.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from edge_rl.agents.algo import Algo
from edge_rl.config import ExportConfig
from edge_rl.export.parity import check_exportable
from edge_rl.export.remote import export_checked, prepare_checked
from edge_rl.export.tflite import ExportedModel, start_export_worker
from edge_rl.export.worker import CALL_TIMEOUT_S
from edge_rl.learner.ingest.plausible import Bounds
from edge_rl.learner.run_dir import RunDir
from edge_rl.specs import EnvSpec
from edge_rl.telemetry.logs import write_bytes_atomic, write_json_atomic
from edge_rl.types import PartState, PolicyBundle, PolicyManifest
from edge_rl.wire.policy import decode_policy, encode_policy, manifest_to_dict
from edge_rl.wire.signing import Signer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stamp:
    """Whose policy a manifest carries: the run's algorithm, env, name and the run id of
    this start of the run (protocol §5)."""

    algo: str
    env_id: str
    run: str
    run_id: str = ""


@dataclass(frozen=True)
class Published:
    bundle: PolicyBundle
    payload: bytes  # the encoded bundle as sent
    model: bytes  # uncompressed .tflite
    parity: dict[str, float]  # the algorithm's parity figures (Algo.judge)
    export_seconds: float
    # Network compression ratio of the exported snapshot (None without compression); set
    # by the learner, and carried along when reversion() redeploys these weights.
    compression: float | None = None


def snapshot(network: Any) -> Any:
    """A copy of a Keras network with its current weights: what a background export
    converts while training goes on changing the original."""
    import keras

    copy = keras.models.clone_model(network)
    copy.set_weights(network.get_weights())
    return copy


@dataclass(frozen=True)
class PackagerStats:
    failed: int  # exports that raised or failed their parity check
    suspects: dict[str, int] = field(default_factory=dict)  # board -> failed exports it led


class Observations(Protocol):
    """What an export draws its calibration and parity observations from: a
    ``ReplayBuffer``, or ``demos.ExportObservations`` (replay, then demonstrations)."""

    def __len__(self) -> int: ...

    def drawn(
        self, n: int, rng: np.random.Generator | None = None
    ) -> tuple[np.ndarray, list[str]]: ...


SUSPECT_Z = 10.0  # robust z of an observation past which its board is named
FLEET_QUANTILES = (0.01, 0.99)  # each board's range of an observation dimension
FLEET_MARGIN = 1.0  # the fleet's range widened by this many times its width on each side
MIN_FLEET = 3  # boards in a draw for the fleet's range to hold against one of them


def clip_to_fleet(obs: np.ndarray, sources: list[str]) -> np.ndarray:
    """``obs`` [n, *shape] clipped, per dimension, to the fleet's robust range: each
    board's ``FLEET_QUANTILES`` of it, the median of those over the boards (one board of
    three or more cannot move it), widened by ``FLEET_MARGIN`` times its width (at least
    1e-3). A draw of fewer than ``MIN_FLEET`` boards is returned as it is.

    The int8 export normalises by the calibration's mean and std: a quarter of the rows at
    ±40 (inside CartPole's plausible bounds) squeezes the honest rows into one int8 step."""
    boards = sorted(set(sources) - {""})
    if len(boards) < MIN_FLEET:
        return obs
    flat = obs.reshape(len(obs), -1)  # [n, obs_dim]
    names = np.asarray(sources)
    ranges = np.stack(
        [np.quantile(flat[names == b], FLEET_QUANTILES, axis=0) for b in boards]
    )  # [boards, 2, obs_dim]
    low, high = np.median(ranges[:, 0], axis=0), np.median(ranges[:, 1], axis=0)  # [obs_dim]
    pad = FLEET_MARGIN * np.maximum(high - low, 1e-3)
    return np.clip(flat, low - pad, high + pad).astype(obs.dtype).reshape(obs.shape)


def suspect_of(obs: np.ndarray, sources: list[str]) -> tuple[str, float] | None:
    """The board of the observation farthest off the draw's median, by its largest robust
    z over the dimensions, and that z; None below ``SUSPECT_Z`` or without a board."""
    if len(obs) < 3:
        return None
    flat = obs.reshape(len(obs), -1).astype(np.float64)  # [n, obs_dim]
    median = np.median(flat, axis=0)  # [obs_dim]
    mad = np.median(np.abs(flat - median), axis=0)  # [obs_dim]
    z = np.abs(flat - median) / np.maximum(1.4826 * mad, 1e-6)  # [n, obs_dim]
    worst = int(np.argmax(z.max(axis=1)))
    score = float(z[worst].max())
    if score < SUSPECT_Z or not sources[worst]:
        return None
    return sources[worst], score


def version_of(published: Published) -> int:
    return published.bundle.manifest.policy_version


class PolicyPackager:
    def __init__(
        self,
        export: ExportConfig,
        stamp: Stamp,
        spec: EnvSpec,
        replay: Observations,  # calibration and parity draws
        run_dir: RunDir,
        signer: Signer,
        *,
        seed: int = 0,
        max_packet_bytes: int = 2_000_000,  # the largest bundle a reopened checkpoint holds
        bounds: Bounds | None = None,  # the env's plausible observations (ingest's)
    ) -> None:
        self.export_cfg = export
        self.stamp = stamp
        self.max_packet_bytes = max_packet_bytes
        self.spec = spec
        self.replay = replay
        self.run_dir = run_dir
        self.signer = signer  # every bundle is signed (docs/protocol.md §4)
        self.rng = np.random.default_rng(seed + 1)
        self.failed = 0
        self.bounds = bounds
        self.suspects: dict[str, int] = {}
        self._warm_up = start_export_worker()  # conversions run in a child process: start it

    def prepare(self, network: Any) -> None:
        """Convert ``network``'s template in the background once the worker is up, so that
        the first export (on the exporter thread, while training runs) writes into it
        instead of converting: 1-5 s of the exporter's time, and of the fleet's wait for
        its first policy. A failure is logged; the first export then converts. ValueError,
        here and now, for a network the export cannot take (an activation it does not
        support): the run stops at set-up rather than publishing nothing."""
        check_exportable(network)
        warm_up, e = self._warm_up, self.export_cfg

        def run() -> None:
            warm_up.join(CALL_TIMEOUT_S)  # the worker bounds its own calls too
            t0 = time.perf_counter()
            try:
                made = prepare_checked(network, e.precision, e.per_channel)
            except Exception:  # noqa: BLE001 - the first export makes the template instead
                log.exception("export template not prepared; the first export converts it")
                return
            seconds = time.perf_counter() - t0
            log.info(
                "export: template %s at set-up (%.1f s)", "made" if made else "refused", seconds
            )

        self._warm_up = threading.Thread(target=run, name="export-template", daemon=True)
        self._warm_up.start()

    def wait_ready(self, timeout: float) -> None:
        """Until the export worker has imported TensorFlow and, after ``prepare``, made the
        template (bounded): a first export that waits for them (10-28 s on a busy 2-core
        host) would leave the fleet on random actions."""
        self._warm_up.join(timeout)

    def export(
        self,
        algo: Algo,
        model: Any,
        version: int,
        learner_step: int,
        exploration: dict[str, float],
    ) -> Published | None:
        """Export ``model`` (a snapshot of the policy network, see ``snapshot``) and check it
        in LiteRT against the same snapshot; the bundle, or None when the check fails."""
        t0 = time.perf_counter()
        e = self.export_cfg
        # Calibration and parity observations are disjoint draws from replay, across
        # boards, clipped to the env's plausible bounds.
        obs, sources = self.replay.drawn(e.calibration_size + e.parity_size, self.rng)
        if self.bounds is not None and len(obs):
            obs = self.bounds.clip(obs)
        obs = clip_to_fleet(obs, sources)
        n_cal = max(1, len(obs) * e.calibration_size // (e.calibration_size + e.parity_size))
        cal, held_out = obs[:n_cal], obs[n_cal:]
        try:
            checked = export_checked(model, cal, held_out, e.precision, e.per_channel, e.codec)
        except Exception:
            log.warning("export v%d raised%s", version, self._blame(obs, sources))
            raise
        exported = checked.exported
        ok, parity = algo.judge(checked.lite, checked.reference)
        if not ok:
            self.failed += 1
            log.warning(
                "export v%d not published: %s%s",
                version,
                parity_sentence(parity),
                self._blame(obs, sources),
            )
            return None
        manifest = self._manifest(exported, version, learner_step, exploration, algo.output_kind)
        bundle = PolicyBundle(manifest, checked.payload)
        payload = encode_policy(bundle, self.signer)
        return Published(bundle, payload, exported.tflite, parity, time.perf_counter() - t0)

    def _manifest(
        self,
        exported: ExportedModel,
        version: int,
        step: int,
        exploration: dict[str, float],
        output_kind: str,
    ) -> PolicyManifest:
        return PolicyManifest(
            policy_version=version,
            algo=self.stamp.algo,
            env_id=self.stamp.env_id,
            env_spec=self.spec,
            precision=exported.precision,
            input_quant=exported.input_quant,
            output_quant=exported.output_quant,
            obs_mean=exported.obs_mean,
            obs_std=exported.obs_std,
            exploration={k: float(v) for k, v in exploration.items()},
            learner_step=step,
            model_sha256=hashlib.sha256(exported.tflite).hexdigest(),
            model_size=len(exported.tflite),
            codec=self.export_cfg.codec,
            output_kind=output_kind,
            run=self.stamp.run,
            run_id=self.stamp.run_id,
            created_unix=time.time(),
        )

    def reversion(self, published: Published, version: int) -> Published:
        """The same model under a new policy version (to redeploy earlier weights)."""
        import dataclasses

        manifest = dataclasses.replace(
            published.bundle.manifest, policy_version=version, created_unix=time.time()
        )
        bundle = PolicyBundle(manifest, published.bundle.payload)
        payload = encode_policy(bundle, self.signer)
        return dataclasses.replace(published, bundle=bundle, payload=payload)

    def save(self, published: Published) -> None:
        """The run directory always holds the last published model, its manifest and its
        signed bundle as sent."""
        write_bytes_atomic(self.run_dir.policy, published.model)
        write_json_atomic(self.run_dir.manifest, manifest_to_dict(published.bundle.manifest))
        write_bytes_atomic(self.run_dir.bundle, published.payload)

    def _blame(self, obs: np.ndarray, sources: list[str]) -> str:
        """The suspect board of a failed export's draw (counted), as a clause of its warning."""
        found = suspect_of(obs, sources)
        if found is None:
            return ""
        board, z = found
        self.suspects[board] = self.suspects.get(board, 0) + 1
        return f"; its calibration's farthest observation (robust z {z:.3g}) came from {board}"

    def count_failure(self) -> None:
        """An export that raised (a failed parity check is counted by ``export``)."""
        self.failed += 1

    def stats(self) -> PackagerStats:
        return PackagerStats(self.failed, dict(sorted(self.suspects.items())))

    # --- durable runs (edge_rl/learner/durable.py) ----------------------------------------

    def state(self) -> PartState:
        return PartState({"rng": self.rng.bit_generator.state, "failed": self.failed})

    def load_state(self, state: PartState) -> None:
        self.rng.bit_generator.state = state.json["rng"]
        self.failed = int(state.json["failed"])

    def reopen(self, saved: PartState) -> dict[int, Published]:
        """The policies of ``policies_state``, by version, each bundle verified with the
        run's key as it was sent; ``CodecError`` for one another key signed."""
        max_bytes = self.max_packet_bytes
        found = {}
        for v, meta in saved.json.items():
            payload = saved.blobs[f"v{v}.bundle"]
            bundle = decode_policy(payload, self.signer.verifier(), max_bytes)
            found[int(v)] = Published(
                bundle,
                payload,
                saved.blobs[f"v{v}.tflite"],
                meta["parity"],
                meta["export_seconds"],
                meta["compression"],
            )
        return found


def policies_state(policies: Iterable[Published]) -> PartState:
    """Published policies as a checkpoint keeps them: the bundles as sent (signed) and the
    models, and what the learner measured of each (``PolicyPackager.reopen`` reads it)."""
    meta: dict[str, Any] = {}
    blobs: dict[str, bytes] = {}
    for p in policies:
        v = version_of(p)
        blobs[f"v{v}.bundle"], blobs[f"v{v}.tflite"] = p.payload, p.model
        meta[str(v)] = {
            "parity": p.parity,
            "export_seconds": p.export_seconds,
            "compression": p.compression,
        }
    return PartState(meta, blobs=blobs)


def parity_sentence(figures: dict[str, float]) -> str:
    """The parity gate's figures (``Algo.judge``) as a sentence for a log line: ``its int8
    model in LiteRT is too far from the float network (greedy agreement 0.87, max abs
    error 0.31)``."""
    said = ", ".join(f"{k.replace('_', ' ')} {v:.6g}" for k, v in figures.items())
    return f"its exported model in LiteRT is too far from the float network ({said})"
