"""Group (block) magnitude pruning: whole ``b x b`` blocks of a kernel, ranked by L2 norm.

The same blocks as ``circulant.py``: a pruned block is one that neither the dense kernel nor
its circulant vector needs on the wire. Both GST (after its transition to pruned weights) and
the baseline, iterative gradual magnitude pruning (Zhu & Gupta 2017), use it. The learner
drives it::

    masks = MaskedWeights([layer.kernel for layer in pruned_layers], block_size=4)
    for step in count():
        optimizer.apply(grads, variables)
        masks.apply()                                 # every step, inside the compiled update
        decision = schedule(step)                     # edge_rl.compress.schedule.Schedule
        if decision.should_prune:
            masks.update(decision.target_sparsity)    # eager: a NumPy ranking

Blocks are scored by their L2 (Frobenius) norm, not L1: zeroing a set of blocks changes the
kernel by exactly the root-sum-square of their L2 norms, so zeroing the k lowest-L2 blocks is
the Frobenius-nearest kernel with k zero blocks. For a circulant block the L2 norm is
``sqrt(b) * ||c||``, so the ranking is the same whether taken on the dense kernel or on the
circulant vectors.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf


def block_norms(kernel: np.ndarray, block_size: int) -> np.ndarray:
    """``kernel [in, out] -> L2 norm of each block [in/b, out/b]``."""
    kernel = np.asarray(kernel, np.float64)
    _check_kernel(kernel.shape, block_size)
    b = block_size
    p, q = kernel.shape[0] // b, kernel.shape[1] // b
    blocks = kernel.reshape(p, b, q, b)  # [in, out] -> [p, i, q, j]
    return np.sqrt(np.sum(blocks * blocks, axis=(1, 3)))  # [p, q]


def keep_blocks(scores: np.ndarray, sparsity: float) -> np.ndarray:
    """``scores [p, q] -> keep [p, q]`` (bool), False for the lowest-scoring fraction.

    ``round(sparsity * p * q)`` blocks are dropped (half rounds up), so the achieved sparsity
    is the target to within half a block. Ties break by flat index, so the mask is
    deterministic.
    """
    _check_sparsity(sparsity)
    scores = np.asarray(scores)
    n_drop = math.floor(sparsity * scores.size + 0.5)
    order = np.argsort(scores.reshape(-1), kind="stable")  # [p*q], lowest first
    keep = np.ones(scores.size, bool)
    keep[order[:n_drop]] = False
    return keep.reshape(scores.shape)


def block_mask(kernel: np.ndarray, block_size: int, sparsity: float) -> np.ndarray:
    """``kernel [in, out] -> mask [in, out]`` (0/1 float32), lowest-L2 blocks set to 0."""
    keep = keep_blocks(block_norms(kernel, block_size), sparsity)  # [p, q]
    ones = np.ones((block_size, block_size), np.float32)  # [b, b]
    return np.kron(keep.astype(np.float32), ones)  # [p*b, q*b] = [in, out]


class MaskedWeights:
    """Block masks for a set of kernels, held as non-trainable ``tf.Variable``s.

    ``apply()`` multiplies every kernel by its mask in place; it is graph-safe, so call it in
    the compiled update right after the optimizer step (the optimizer, Adam's moments
    included, never sees the masks: they are re-imposed after every step, as in TF Model
    Optimization). ``update()`` ranks blocks in NumPy and so runs eagerly, once per pruning
    step. Each kernel gets the same target sparsity (Zhu & Gupta 2017 prune every layer to
    the same fraction); a global ranking would favour whichever layer has the larger scale.
    """

    def __init__(self, kernels: Sequence[keras.Variable | tf.Variable], block_size: int) -> None:
        if not kernels:
            raise ValueError("MaskedWeights needs at least one kernel")
        for kernel in kernels:
            _check_kernel(tuple(kernel.shape), block_size)
        self.block_size = int(block_size)
        self.kernels = list(kernels)
        self.masks = [
            tf.Variable(tf.ones(k.shape, k.dtype), trainable=False, name=f"mask_{i}")
            for i, k in enumerate(self.kernels)
        ]

    def apply(self) -> None:
        """``kernel <- kernel * mask`` for every kernel. Safe inside ``tf.function``."""
        for kernel, mask in zip(self.kernels, self.masks, strict=True):
            # where, not kernel * mask: -0.0 would survive into exported fp32/fp16 bytes.
            kernel.assign(tf.where(mask > 0, kernel, tf.zeros_like(kernel)))

    def update(self, target_sparsity: float) -> None:
        """Re-rank every kernel's blocks, prune each to ``target_sparsity``, apply. Eager only.

        Ranking the current weights lets a lower target revive blocks: they restart from
        zero and regrow under the gradient (the reward-aware controller can step back).
        """
        for kernel, mask in zip(self.kernels, self.masks, strict=True):
            weights = keras.ops.convert_to_numpy(kernel)
            mask.assign(block_mask(weights, self.block_size, target_sparsity))
        self.apply()

    def sparsity(self) -> float:
        """Fraction of all masked kernel entries that are masked out."""
        zeros = sum(int(tf.size(m)) - int(tf.math.count_nonzero(m)) for m in self.masks)
        return zeros / sum(int(tf.size(m)) for m in self.masks)


def _check_kernel(shape: tuple[int, ...], block_size: int) -> None:
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    if len(shape) != 2 or shape[0] % block_size or shape[1] % block_size:
        raise ValueError(
            f"kernel must be 2-D [in, out] with both dims divisible by block_size "
            f"{block_size}, got shape {shape}"
        )


def _check_sparsity(sparsity: float) -> None:
    if not 0.0 <= sparsity < 1.0:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity!r}")
