"""The deployable policy as numbers: normalisation folded into a Dense stack, in NumPy.

``fold(model, mean, std)`` reads a Keras Dense stack once and returns a ``FoldedPolicy``:
the float normalisation ``z = clip(obs * scale + offset, -Z_CLIP, Z_CLIP)``, the Dense
layers (the first one holding the inverse of the normalisation), and TD3's frozen rescale
as a float affine map clipped to the bounds. Everything that builds a ``.tflite`` reads
this record: the Keras model handed to the converter (``edge_rl.export.tflite``) and the
template writer (``edge_rl.export.template``), which also calibrates int8 on
``activations``, the same float network run in NumPy.

The fold, first Dense layer ``W [obs_dim, units]``, bias ``b``; with obs = z * std + mean:
    obs @ W + b = z @ (W * std[:, None]) + (b + mean @ W)
so  W' = W * std[:, None],  b' = b + mean @ W  (in float64, then float32). The other layers
are copied unchanged. A final Dense layer that is *not trainable* (the TD3 actor's frozen
rescale from tanh units to the env's bounds, ``a = t * half + mid`` with a diagonal kernel)
becomes the affine ``(half, mid)`` clipped to ``mid ± |half|``.
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import numpy as np

# Normalised features are clipped to +-Z_CLIP standard deviations. int8 saturates far
# earlier (at the calibration range); for fp32/fp16 it bounds what a broken sensor can do.
Z_CLIP = 100.0

# The activations that the exported stack may use, in NumPy (the converter fuses ReLU into
# FULLY_CONNECTED and emits TANH as an op of its own).
ACTIVATIONS = {
    "linear": lambda x: x,
    "relu": lambda x: np.maximum(x, np.float32(0.0)),
    "tanh": np.tanh,
}


@dataclass(frozen=True)
class AffineParams:
    """``y = clip(x * scale + offset, low, high)`` per feature, in float32."""

    name: str
    scale: np.ndarray  # [features]
    offset: np.ndarray  # [features]
    low: np.ndarray  # [features], or [] for one bound shared by every feature
    high: np.ndarray

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """The float ops in the converter's order: MUL, ADD, MAXIMUM, MINIMUM."""
        return np.minimum(np.maximum(x * self.scale + self.offset, self.low), self.high)


@dataclass(frozen=True)
class DenseParams:
    name: str
    kernel: np.ndarray  # [in, units] float32 (Keras layout)
    bias: np.ndarray  # [units] float32
    activation: str  # a key of ACTIVATIONS, or any other Keras activation's name


@dataclass(frozen=True)
class Structure:
    """What fixes the graph of a conversion; the values inside it may change freely."""

    model_name: str
    obs_dim: int
    layers: tuple[tuple[str, int, str], ...]  # (name, units, activation) per Dense layer
    rescale: tuple[str, int] | None  # (name, act_dim) of the frozen rescale, if any
    z_clip: float


@dataclass(frozen=True)
class FoldedPolicy:
    model_name: str
    normalise: AffineParams
    dense: tuple[DenseParams, ...]
    rescale: AffineParams | None

    @property
    def structure(self) -> Structure:
        layers = tuple((d.name, int(d.kernel.shape[1]), d.activation) for d in self.dense)
        rescale = None
        if self.rescale is not None:
            rescale = (self.rescale.name, int(self.rescale.scale.shape[0]))
        obs_dim = int(self.dense[0].kernel.shape[0])
        return Structure(self.model_name, obs_dim, layers, rescale, Z_CLIP)

    def activations(self, obs: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """``obs [n, obs_dim]`` through the float network in float32: ``z [n, obs_dim]``,
        each Dense layer's output ``[n, units]`` before its activation, and the output."""
        z = self.normalise(np.asarray(obs, np.float32))
        pre: list[np.ndarray] = []
        x = z
        for layer in self.dense:
            pre.append(x @ layer.kernel + layer.bias)
            x = ACTIVATIONS[layer.activation](pre[-1])
        out = x if self.rescale is None else self.rescale(x)
        return z, pre, out


def fold(model: keras.Model, mean: np.ndarray, std: np.ndarray) -> FoldedPolicy:
    """The deployable policy of a plain Dense stack ``model`` on raw observations."""
    dense = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)]
    if not dense or not all(isinstance(layer, keras.layers.Dense) for layer in dense):
        kinds = [type(layer).__name__ for layer in dense]
        raise ValueError(f"export needs a plain stack of Dense layers, got {kinds}")
    obs_dim = int(dense[0].kernel.shape[0])
    if mean.shape != (obs_dim,) or std.shape != (obs_dim,):
        raise ValueError(f"the model takes {obs_dim} features, calibration has {mean.shape}")
    rescale = None
    if len(dense) > 1 and not dense[-1].trainable:
        rescale, dense = _rescale(dense[-1]), dense[:-1]
    z_clip = np.float32(Z_CLIP)
    scale, offset = np.asarray(1.0 / std, np.float32), np.asarray(-mean / std, np.float32)
    normalise = AffineParams("normalise", scale, offset, -z_clip, z_clip)
    layers = []
    for i, layer in enumerate(dense):
        kernel = np.asarray(layer.kernel, np.float64)  # [in, units]; float64 for an exact fold
        bias = np.asarray(layer.bias, np.float64) if layer.use_bias else np.zeros(kernel.shape[1])
        if i == 0:
            kernel, bias = kernel * std[:, None], bias + mean @ kernel
        name = keras.activations.serialize(layer.activation)
        layers.append(
            DenseParams(layer.name, kernel.astype(np.float32), bias.astype(np.float32), name)
        )
    return FoldedPolicy(model.name, normalise, tuple(layers), rescale)


def _rescale(layer: keras.layers.Dense) -> AffineParams:
    kernel = np.asarray(layer.kernel, np.float64)  # [act, act], diagonal
    half = np.diag(kernel)
    if not np.allclose(kernel, np.diag(half)) or layer.activation is not keras.activations.linear:
        raise ValueError(f"a frozen last layer must be a linear diagonal rescale: {layer.name}")
    mid = np.asarray(layer.bias, np.float64)
    low, high = mid - np.abs(half), mid + np.abs(half)
    f32 = [np.asarray(v, np.float32) for v in (half, mid, low, high)]
    return AffineParams(layer.name, *f32)
