"""The learner's export of one policy version, in the export worker's process.

    checked = export_checked(model, calibration_obs, parity_obs, "int8", True, "zlib")
    ok, figures = algo.judge(checked.lite, checked.reference)   # the parity gate
    bundle_payload = checked.payload                            # the model, packed by codec
    prepare_checked(model, "int8", True)                        # at set-up: the template

Why a process: on the learner's exporter thread this work (the template write with its
int8 calibration pass, the self-check, 1,000 rows through LiteRT and through the float
network, zlib) is a few dozen NumPy and LiteRT calls that each let go of the GIL and
then wait to get it back from the learner's main thread; in a run of the CartPole
example the thread used ~15 ms of CPU per export over ~60-120 ms of wall
(docs/benchmarks.md, pipeline). In the worker it waits for no one's GIL and holds none
the updates need; the exporter thread only sends the network and reads the answer.

This is the learner's only route for an export: the template write, self-check and
converter fallback (``DirectExporter``: the worker's own templates), LiteRT's outputs
through ``TFLitePolicy.batch_at_once`` and the float network's in NumPy
(``parity.stack_forward``, on one BLAS thread), on the parity observations; the gate then
judges those outputs (``Algo.judge``). The fold and the calibration statistics are
computed here, before the call. The network must be a plain Dense stack whose activations
NumPy computes (``folded.ACTIVATIONS``): anything else is a ValueError, from
``prepare_checked`` at set-up and from ``export_checked``, before anything reaches the
worker. ``WorkerDied`` / ``TimeoutError`` as for any worker call.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import keras
import numpy as np

from edge_rl.export import convert
from edge_rl.export.blas import single_threaded
from edge_rl.export.direct import DirectExporter
from edge_rl.export.folded import FoldedPolicy, Structure, fold
from edge_rl.export.parity import DenseStep, check_exportable, parity_rows, stack_forward
from edge_rl.export.regions import weight_regions
from edge_rl.export.tflite import (
    PRECISIONS,
    ExportedModel,
    calibration,
    exported_model,
    keras_model,
    template_rows,
)
from edge_rl.export.worker import ExportWorker, default_worker
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.wire.policy import compress_model


@dataclass(frozen=True)
class CheckedExport:
    exported: ExportedModel
    lite: np.ndarray  # [n, out]: the exported model in LiteRT on the parity observations
    reference: np.ndarray  # [n, out]: the float network on the same observations
    payload: bytes  # exported.tflite packed by the codec asked for


def export_checked(
    model: keras.Model,
    calibration_obs: np.ndarray,
    parity_obs: np.ndarray,
    precision: str,
    per_channel: bool,
    codec: str,
    worker: ExportWorker | None = None,
) -> CheckedExport:
    """``model`` exported, run on ``parity_obs`` beside its float network, and packed, in
    ``worker`` (the process-wide one by default); ValueError for a network the export
    cannot take (``parity.check_exportable``)."""
    stack = check_exportable(model)
    obs, mean, std = calibration(calibration_obs, precision)
    rows = parity_rows(parity_obs)
    policy = fold(model, mean, std)
    args = (policy, obs, mean, std, rows, stack, precision, bool(per_channel), codec)
    return (worker or default_worker()).call(_export_here, *args)


def prepare_checked(
    model: keras.Model, precision: str, per_channel: bool, worker: ExportWorker | None = None
) -> bool:
    """``tflite.prepare_template`` for the worker's templates: whether there is one;
    ValueError for a network the export cannot take (``parity.check_exportable``)."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; expected one of {PRECISIONS}")
    check_exportable(model)
    policy, rows = template_rows(model)
    args = (policy.structure, rows, precision, bool(per_channel))
    return (worker or default_worker()).call(_prepare_here, *args)


def _export_here(
    policy: FoldedPolicy,
    obs: np.ndarray,
    mean: np.ndarray,
    std: np.ndarray,
    rows: np.ndarray,
    stack: tuple[DenseStep, ...],
    precision: str,
    per_channel: bool,
    codec: str,
) -> CheckedExport:
    """In the worker: ``export_policy``'s direct path, then the parity outputs."""
    t0 = time.perf_counter()
    tflite, path = _exporter.export(policy, obs, precision, per_channel)
    exported = exported_model(tflite, precision, mean, std, time.perf_counter() - t0, path)
    lite = TFLitePolicy(tflite)
    with single_threaded():
        lite_out, reference = lite.batch_at_once(rows), stack_forward(stack, rows)
    regions = weight_regions(tflite) if codec == "blocks" else None
    return CheckedExport(exported, lite_out, reference, compress_model(tflite, codec, regions))


def _prepare_here(
    structure: Structure, rows: np.ndarray, precision: str, per_channel: bool
) -> bool:
    return _exporter.prepare(structure, rows, precision, per_channel)


def _convert_here(
    policy: FoldedPolicy, obs: np.ndarray, precision: str, per_channel: bool
) -> bytes:
    """In the worker: ``policy`` converted whole (its template, or a fallback export)."""
    model = keras_model(policy)
    config = keras.saving.serialize_keras_object(model)
    return convert.convert(config, model.get_weights(), obs, precision, per_channel)


_exporter = DirectExporter(_convert_here)  # the worker process's templates
