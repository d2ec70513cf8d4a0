"""Graph-side GST constraint: keep kernels block-circulant, then masked, across steps.

GST trains its compressed layers as plain ``Dense`` kernels under a constraint, rather than
swapping in ``BlockCirculantDense`` and back (docs/gst.md, "Training"):

    grads = constraint.gradients(grads, variables)   # in the compiled update
    optimizer.apply_gradients(zip(grads, variables))
    constraint.apply()                               # kernel <- C(kernel)

with ``C(W) = (P(W) if circulant else W) * mask``, ``P`` the projection onto block-circulant
matrices. Projecting the gradient makes every entry of a circulant diagonal receive the same
gradient, hence the same Adam moments and the same step: training the kernel this way is
training the circulant vectors with Adam (Adam does not see the factor ``b`` between the
mean and the sum of a diagonal's gradients). ``apply`` then only removes float drift.

One variable per layer across both phases keeps the optimizer state, the compiled update,
the target networks and the exporter, which accepts plain Dense stacks only, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
import tensorflow as tf

from edge_rl.compress.circulant import circulant_index
from edge_rl.compress.pruning import MaskedWeights


def project(kernel: tf.Tensor, b: int) -> tf.Tensor:
    """``kernel [in, out] -> [in, out]``, the nearest block-circulant matrix (graph-safe)."""
    n_in, n_out = kernel.shape
    p, q = n_in // b, n_out // b
    onehot = tf.constant(np.eye(b, dtype=np.float32)[circulant_index(b)])  # [i, j, k]
    blocks = tf.reshape(kernel, [p, b, q, b])  # [in, out] -> [p, i, q, j]
    vectors = tf.einsum("piqj,ijk->pqk", blocks, onehot) / b  # mean of each diagonal k
    return tf.reshape(tf.einsum("pqk,ijk->piqj", vectors, onehot), [n_in, n_out])


class KernelConstraint:
    """``C(W) = (P_b(W) if circulant else W) * mask`` for a set of kernels.

    ``circulant`` is one graph variable for all kernels (GST's phase is global); the masks
    are a ``MaskedWeights`` over ``pruning_block`` blocks, all ones until something prunes.
    """

    def __init__(
        self,
        kernels: Sequence[keras.Variable],
        circulant_block: int | None,
        pruning_block: int,
    ) -> None:
        self.masked = MaskedWeights(kernels, pruning_block)
        self.kernels = self.masked.kernels
        self.b = circulant_block
        self.circulant = tf.Variable(circulant_block is not None, trainable=False)
        self._index = {id(k): i for i, k in enumerate(self.kernels)}

    def _constrain(self, x: tf.Tensor, i: int) -> tf.Tensor:
        if self.b is not None:
            on = tf.cast(self.circulant, x.dtype)
            x = on * project(x, self.b) + (1.0 - on) * x
        # where, not x * mask: a negative weight times 0 is -0.0, whose bits the lossless
        # "blocks" codec must keep, so a pruned fp32 block would not count as zero.
        return tf.where(self.masked.masks[i] > 0, x, tf.zeros_like(x))

    def gradients(
        self, grads: Sequence[tf.Tensor], variables: Sequence[keras.Variable]
    ) -> list[tf.Tensor]:
        """The gradient of each constrained kernel, constrained; others pass through."""
        out = []
        for g, v in zip(grads, variables, strict=True):
            i = self._index.get(id(v))
            out.append(g if i is None else self._constrain(g, i))
        return out

    def apply(self) -> None:
        """``kernel <- C(kernel)`` for every kernel. Safe inside ``tf.function``."""
        for i, kernel in enumerate(self.kernels):
            kernel.assign(self._constrain(kernel.value, i))
