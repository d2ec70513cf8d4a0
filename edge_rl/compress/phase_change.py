"""GST's phase change from block-circulant to pruned weights (Lee et al. 2021).

At ``GSTPlan.shift_step`` each GST layer trades its circulant vectors ``c [in/b_c, out/b_c,
b_c]`` for a dense kernel ``W [in, out]`` under a ``b_p x b_p`` block mask::

    t = transition(layer.circulant.numpy(), plan.method, plan.pruning_block_size)
    dense = circulant_to_dense(layer)             # same weights, a plain keras Dense
    masks = MaskedWeights([dense.kernel], t.block_size)
    masks.masks[0].assign(t.mask); masks.apply()  # then the reward-aware schedule prunes

Our reading of the paper's three block-size transition methods (its method text was not
available to us; it says a friendly matrix transformation keeps parameter values from
shifting at the block transition):

* Every method starts the pruned phase from the exact expansion ``W = expand(c)``: the
  circulant matrix already *is* a dense matrix, so the effective weights, and every layer
  output, are unchanged at the transition. Only the grid of pruning blocks differs.
* ``PROJECTION``: the circulant weights are projected (embedded) into the dense space and
  pruned with any block size ``b_p`` (default ``b_c``). If ``b_p`` is not a multiple of
  ``b_c`` a pruning block cuts a circulant block, and pruning it leaves a partial block:
  the kept weights stop being block-circulant, so the first prune shifts the structure.
* ``BLOCK4_FRIENDLY_BLOCK2`` (``b_c = 2``) and ``BLOCK4_FRIENDLY_BLOCK4`` (``b_c = 4``):
  4x4 pruning groups, each exactly ``(4/b_c)^2`` whole circulant blocks. Every prune
  removes whole circulant blocks, the kept entries keep their circulant values, the pruned
  kernel at any sparsity is still block-circulant at ``b_c``, and a group's L2 score is
  ``sqrt(b_c) * ||its circulant vectors||`` (computable on ``c``). ``b_c = 8`` has no
  block-4-friendly form: a 4x4 group is a quarter of an 8x8 circulant block.

``initial_sparsity`` (default 0: all-ones mask, nothing shifts) prunes at the transition
itself; the shift it causes is reported as ``relative_shift``.
"""

from __future__ import annotations

from typing import NamedTuple

import keras
import numpy as np

from edge_rl.compress.circulant import BlockCirculantDense, expand_circulant
from edge_rl.compress.plan import TransitionMethod, resolve_pruning_block_size
from edge_rl.compress.pruning import block_mask


class Transition(NamedTuple):
    kernel: np.ndarray  # [in, out] float32, expand(c): the pruned phase's starting kernel
    mask: np.ndarray  # [in, out] 0/1 float32, whole block_size x block_size blocks
    block_size: int  # b_p, for MaskedWeights
    relative_shift: float  # ||kernel * (1 - mask)|| / ||kernel||; 0.0 when nothing is pruned


def transition(
    vectors: np.ndarray,
    method: TransitionMethod,
    pruning_block_size: int | None = None,
    initial_sparsity: float = 0.0,
) -> Transition:
    """``vectors [in/b_c, out/b_c, b_c]`` (``b_c`` = last dim) -> the pruned phase's start.

    The mask drops the ``initial_sparsity`` fraction of ``b_p`` blocks with the lowest L2
    norm (``pruning.block_mask``), so the later masks and this one rank alike.
    """
    vectors = np.asarray(vectors, np.float32)
    if vectors.ndim != 3:
        raise ValueError(f"vectors must be [in/b, out/b, b], got shape {vectors.shape}")
    b_c = vectors.shape[-1]
    b_p = resolve_pruning_block_size(method, b_c, pruning_block_size)
    kernel = expand_circulant(vectors, b_c)  # [in/b_c, out/b_c, b_c] -> [in, out]
    mask = block_mask(kernel, b_p, initial_sparsity)  # [in, out]
    norm = float(np.linalg.norm(kernel))
    removed = float(np.linalg.norm(kernel * (1.0 - mask)))
    return Transition(kernel, mask, b_p, removed / norm if norm > 0.0 else 0.0)


def circulant_to_dense(layer: BlockCirculantDense, name: str | None = None) -> keras.layers.Dense:
    """A built ``keras.layers.Dense`` with ``layer``'s effective kernel, bias and activation.

    For the pruned phase (its kernel is what ``MaskedWeights`` masks) and for export, which
    then sees a plain ``Dense``. The weights are copied: later training of one does not
    touch the other.
    """
    if not layer.built:
        raise ValueError(f"{layer.name} is not built: no weights to copy")
    kernel = keras.ops.convert_to_numpy(layer.effective_kernel())  # [in, out]
    dense = keras.layers.Dense(
        layer.units,
        activation=layer.activation,
        use_bias=layer.use_bias,
        dtype=layer.dtype_policy,
        name=name,
    )
    dense.build((None, kernel.shape[0]))
    weights = [kernel]
    if layer.use_bias:
        weights.append(keras.ops.convert_to_numpy(layer.bias))  # [out]
    dense.set_weights(weights)
    return dense
