"""The TFLite converter's int8 arithmetic, in NumPy: what its quantiser computes from a
calibration range or a weight tensor, so that a template can be refilled without it.

The rules are those of TensorFlow's MLIR quantiser (``tensorflow/compiler/mlir/
quantization``, as called by ``tf.lite.experimental.QuantizationDebugger`` in TF 2.21):

* activations: asymmetric int8 in [-128, 127] over the calibrated ``[min, max]``, widened
  to hold 0; scale ``(max - min) / 255`` computed in float32 (its ``legacy_float_scale``),
  zero point ``round(-128 - min / scale)`` clamped to the storage range; a range narrower
  than double epsilon has scale 1 and zero point -128 (``fakeQuantAttrsToType``);
* weights: symmetric int8 in [-127, 127], zero point 0, scale ``max|w| / 127`` per output
  channel (row of the ``[out, in]`` FULLY_CONNECTED weights) or per tensor; a channel whose
  range is under 1e-6 is widened to [-5e-7, 5e-7] (``ExpandVerySmallRange``);
* biases: int32, zero point 0, scale ``input_scale * weight_scale`` per channel; where the
  bias would not fit in 2^30 steps of that scale, the channel's weight scale is raised to
  ``|bias| / (input_scale * (2^30 - 1))``;
* values are rounded half away from zero (``std::round``) in double, then clamped.
"""

from __future__ import annotations

import numpy as np

_EPS = np.finfo(np.float64).eps
_NEAR_ZERO = 1.0e-6  # ExpandVerySmallRange's tolerance
_BIAS_MAX = np.float32(2**30 - 1)  # the largest |int32 bias| the quantiser lets stand


def activation_params(rmin: float, rmax: float) -> tuple[float, int]:
    """``(scale, zero_point)`` of an int8 activation calibrated to ``[rmin, rmax]``."""
    qmin, qmax = -128, 127
    rmin, rmax = min(float(rmin), 0.0), max(float(rmax), 0.0)
    if abs(rmax - rmin) < _EPS:
        return 1.0, qmin
    scale = np.float32(np.float32(rmax) - np.float32(rmin)) / np.float32(qmax - qmin)
    zero_point = np.float32(qmin) - np.float32(rmin) / scale
    return float(scale), int(np.clip(_round(float(zero_point)), qmin, qmax))


def fc_scales(
    weights: np.ndarray, bias: np.ndarray, input_scale: float, per_channel: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Scales of int8 ``weights [out, in]`` and of their int32 ``bias [out]``: ``[out]``
    each per channel, else ``[1]``."""
    w = np.asarray(weights, np.float64)
    if per_channel:
        max_abs = np.abs(w).max(axis=1) if w.size else np.zeros(w.shape[0])
        max_abs = np.where(2 * max_abs < _NEAR_ZERO, _NEAR_ZERO / 2, max_abs)
    else:
        max_abs = np.array([np.abs(w).max()])
        if max_abs[0] < _EPS:
            # The converter's per-tensor zero range has zero point -127, which no int8
            # FULLY_CONNECTED accepts as weights: not a scheme to reproduce.
            raise ValueError("an all-zero weight tensor has no per-tensor int8 scale")
    hi = max_abs.astype(np.float32)
    scales = (hi - (-hi)) / np.float32(254)  # [out] or [1]
    # A bias too large for int32 at input_scale * weight_scale (a channel whose weights are
    # all but zero) raises that channel's weight scale until the bias fits in 2^30.
    b = np.abs(np.asarray(bias, np.float32))
    in_scale = np.float32(input_scale)
    too_big = b / (in_scale * scales) > _BIAS_MAX
    if np.any(too_big):
        if not per_channel:
            raise ValueError("the per-tensor weight scale would need the bias adjustment")
        scales = np.where(too_big, b / (in_scale * np.float32(_BIAS_MAX)), scales)
    return scales, in_scale * scales


def quantise(
    values: np.ndarray, scale: np.ndarray | float, zero_point: np.ndarray | int, dtype: type
) -> np.ndarray:
    """``round(values / scale + zero_point)`` clamped to ``dtype``'s range.

    ``scale`` and ``zero_point`` broadcast against ``values`` (per-channel: ``[out, 1]``)."""
    info = np.iinfo(dtype)
    lo = -127 if dtype is np.int8 else info.min  # int8 weights use the narrow range
    scaled = np.asarray(values, np.float32).astype(np.float64) / np.asarray(scale, np.float64)
    q = _round(scaled + np.asarray(zero_point, np.float64))
    return np.clip(q, lo, info.max).astype(dtype)


def _round(x):
    """Half away from zero, as ``std::round``."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)
