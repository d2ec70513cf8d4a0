"""Which path makes an export: the whole TFLite converter, or weights written into a template.

The graph of a policy is fixed for a whole run; only its values change between versions
(``edge_rl.export.template``). ``DirectExporter.export`` converts once per ``Structure``,
precision and weight-scale layout, from generic values, and writes every version into that
template, milliseconds instead of the converter's second. The converter
(``convert``, given by ``edge_rl.export.tflite``) still makes the export when:

* the structure has no usable template (the converter's graph is not one the template
  walk knows: an unusual activation, say), remembered for the rest of the run;
* writing raises (e.g. a per-tensor int8 scale that needs the converter's bias adjustment);
* the written model fails the self-check: it must load in LiteRT and, on a few calibration
  observations, stay near the float network (a gross-error check, well inside what any
  correct export meets; the learner's parity gate then checks it like any other export).

The first use of each path per structure, and every fallback with its reason, are logged
at INFO.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import numpy as np

from edge_rl.export.blas import single_threaded
from edge_rl.export.folded import FoldedPolicy, Structure
from edge_rl.export.template import Template, TemplateError, generic_policy
from edge_rl.runtime.litert import TFLitePolicy

log = logging.getLogger(__name__)

PATHS = ("converter", "direct")

# Largest |lite - float| over the self-check rows, as a fraction of the largest |float|
# output there. The converter's own exports stay far inside (fp32: float rounding; fp16:
# ~1e-3; int8: ~1e-2 of the range); wrong weights or scales land near or above 1.
SELF_CHECK_TOLERANCE = {"fp32": 1e-3, "fp16": 5e-2, "int8": 0.25}
SELF_CHECK_ROWS = 8
TEMPLATE_ROWS = 64  # calibration rows for the template (its ranges are all rewritten)

Convert = Callable[[FoldedPolicy, np.ndarray, str, bool], bytes]
_Key = tuple[Structure, str, bool]


class SelfCheckFailed(RuntimeError):
    """A written model does not compute what the float network computes."""


class DirectExporter:
    """Exports through templates, one per structure, with the converter as the fallback."""

    def __init__(self, convert: Convert) -> None:
        self._convert = convert
        self._lock = threading.Lock()
        self._templates: dict[_Key, Template] = {}
        self._no_template: set[_Key] = set()
        self._announced: set[tuple[_Key, str]] = set()

    def export(
        self, policy: FoldedPolicy, obs: np.ndarray, precision: str, per_channel: bool
    ) -> tuple[bytes, str]:
        """``policy`` as ``.tflite`` bytes, and the path that made them (``PATHS``)."""
        key = (policy.structure, precision, per_channel)
        template = self._template(key, obs)
        if template is not None:
            try:
                with single_threaded():  # the forward passes: see edge_rl.export.blas
                    tflite = template.write(policy, obs)
                    self_check(tflite, policy, obs, precision)
            except Exception as e:  # noqa: BLE001 - any failure falls back, with its reason
                log.info("export: direct path failed, the converter exports instead: %r", e)
            else:
                self._announce(key, "direct")
                return tflite, "direct"
        tflite = self._convert(policy, obs, precision, per_channel)
        self._announce(key, "converter")
        return tflite, "converter"

    def prepare(
        self, structure: Structure, obs: np.ndarray, precision: str, per_channel: bool
    ) -> bool:
        """Make the template of ``structure`` now (a conversion, ~1-5 s), not at its first
        export; whether there is one. ``obs [n, obs_dim]``: any observations of the right
        width (the template's values and ranges are all rewritten by every export)."""
        return self._template((structure, precision, per_channel), obs) is not None

    def _template(self, key: _Key, obs: np.ndarray) -> Template | None:
        with self._lock:
            if key in self._templates or key in self._no_template:
                return self._templates.get(key)
        structure, precision, per_channel = key
        tflite = self._convert(generic_policy(structure), obs[:TEMPLATE_ROWS], *key[1:])
        try:
            template = Template.parse(tflite, structure, precision, per_channel)
        except TemplateError as e:
            name = structure.model_name
            log.info(
                "export: no template for %s %s, the converter exports it: %s", name, precision, e
            )
            with self._lock:
                self._no_template.add(key)
            return None
        with self._lock:
            self._templates[key] = template
        return template

    def _announce(self, key: _Key, path: str) -> None:
        with self._lock:
            if (key, path) in self._announced:
                return
            self._announced.add((key, path))
        structure, precision, per_channel = key
        layers = "-".join(str(units) for _, units, _ in structure.layers)
        log.info(
            "export: %s path for %s %d-%s %s%s",
            path,
            structure.model_name,
            structure.obs_dim,
            layers,
            precision,
            "" if precision != "int8" else (" per-channel" if per_channel else " per-tensor"),
        )


def self_check(tflite: bytes, policy: FoldedPolicy, obs: np.ndarray, precision: str) -> None:
    """``SelfCheckFailed`` unless ``tflite`` loads in LiteRT and its output on the first
    ``SELF_CHECK_ROWS`` observations is within ``SELF_CHECK_TOLERANCE`` of the float
    network's."""
    rows = np.asarray(obs[:SELF_CHECK_ROWS], np.float32)
    lite = TFLitePolicy(tflite).batch(rows)  # [n, out]
    _, _, expected = policy.activations(rows)  # [n, out]
    reference = max(float(np.abs(expected).max()), 1e-6)
    error = float(np.abs(lite - expected).max()) if np.all(np.isfinite(lite)) else np.inf
    if error > SELF_CHECK_TOLERANCE[precision] * reference:
        raise SelfCheckFailed(
            f"{precision}: max |lite - float| {error:.3g} over {len(rows)} observations, "
            f"allowed {SELF_CHECK_TOLERANCE[precision]:g} x {reference:.3g}"
        )
