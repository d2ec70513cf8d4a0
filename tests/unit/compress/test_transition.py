"""Circulant -> pruned transition: weights and outputs unchanged, friendly masks aligned."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from edge_rl.compress.circulant import (
    BlockCirculantDense,
    expand_circulant,
    project_to_block_circulant,
)
from edge_rl.compress.phase_change import circulant_to_dense, transition
from edge_rl.compress.plan import TransitionMethod
from edge_rl.compress.pruning import MaskedWeights

P = TransitionMethod
# (method, circulant block size, requested pruning block size, expected pruning block size)
CASES = [
    (P.PROJECTION, 2, None, 2),
    (P.PROJECTION, 4, None, 4),
    (P.PROJECTION, 8, None, 8),
    (P.PROJECTION, 8, 4, 4),
    (P.PROJECTION, 4, 1, 1),
    (P.BLOCK4_FRIENDLY_BLOCK2, 2, None, 4),
    (P.BLOCK4_FRIENDLY_BLOCK4, 4, None, 4),
]


def trained_layer(b: int, in_dim: int = 16, units: int = 24, seed: int = 0) -> BlockCirculantDense:
    layer = BlockCirculantDense(units, b, activation="tanh")
    layer.build((None, in_dim))
    rng = np.random.default_rng(seed + b)
    layer.circulant.assign(rng.standard_normal(layer.circulant.shape).astype(np.float32))
    layer.bias.assign(rng.standard_normal(units).astype(np.float32))
    return layer


def is_block_circulant(kernel: np.ndarray, b: int) -> bool:
    return np.allclose(expand_circulant(project_to_block_circulant(kernel, b), b), kernel)


@pytest.mark.parametrize(("method", "b_c", "b_p", "expected_b_p"), CASES)
def test_effective_weights_and_outputs_are_unchanged(method, b_c, b_p, expected_b_p) -> None:
    layer = trained_layer(b_c)
    t = transition(layer.circulant.numpy(), method, b_p)
    assert t.block_size == expected_b_p
    np.testing.assert_array_equal(t.kernel, layer.effective_kernel())
    np.testing.assert_array_equal(t.mask, np.ones_like(t.kernel))
    assert t.relative_shift == 0.0

    # The pruned phase's layer: a Dense holding kernel * mask, under MaskedWeights.
    dense = circulant_to_dense(layer)
    masks = MaskedWeights([dense.kernel], t.block_size)
    masks.masks[0].assign(t.mask)
    masks.apply()
    x = np.random.default_rng(1).standard_normal((7, 16)).astype(np.float32)
    np.testing.assert_allclose(dense(x), layer(x), atol=1e-6)


@pytest.mark.parametrize(
    ("method", "b_c"), [(P.BLOCK4_FRIENDLY_BLOCK2, 2), (P.BLOCK4_FRIENDLY_BLOCK4, 4)]
)
@pytest.mark.parametrize("sparsity", (0.25, 0.5, 0.75))
def test_friendly_masks_remove_whole_circulant_blocks(method, b_c, sparsity) -> None:
    vectors = trained_layer(b_c, in_dim=16, units=32).circulant.numpy()  # [16/b, 32/b, b]
    t = transition(vectors, method, initial_sparsity=sparsity)
    pruned = t.kernel * t.mask
    # Kept entries keep their values, and the pruned kernel is still block-circulant at b_c.
    np.testing.assert_array_equal(pruned[t.mask == 1], t.kernel[t.mask == 1])
    assert is_block_circulant(pruned, b_c)
    # Each 4x4 group was scored on its circulant vectors: sqrt(b_c) * ||c in the group||.
    r = 4 // b_c  # circulant blocks per group side
    p, q = vectors.shape[0] // r, vectors.shape[1] // r
    grouped = vectors.reshape(p, r, q, r, b_c)  # [P, Q, b_c] -> [p, r, q, r, b_c]
    scores = np.sqrt(b_c * np.sum(grouped.astype(np.float64) ** 2, axis=(1, 3, 4)))  # [p, q]
    n_drop = round(sparsity * p * q)
    dropped = t.mask[::4, ::4] == 0  # [p, q]: one entry per group
    np.testing.assert_array_equal(dropped, scores <= np.sort(scores.ravel())[n_drop - 1])
    # The shift is exactly the energy of the dropped circulant blocks.
    expected = np.sqrt(np.sum(scores[dropped] ** 2)) / np.linalg.norm(t.kernel)
    assert t.relative_shift == pytest.approx(expected, rel=1e-5)


def test_projection_to_smaller_blocks_cuts_circulant_blocks() -> None:
    # The contrast the friendly methods exist for: b_p = 2 inside 4x4 circulant blocks.
    vectors = trained_layer(4, in_dim=16, units=32).circulant.numpy()
    t = transition(vectors, P.PROJECTION, pruning_block_size=2, initial_sparsity=0.5)
    assert not is_block_circulant(t.kernel * t.mask, 4)
    friendly = transition(vectors, P.BLOCK4_FRIENDLY_BLOCK4, initial_sparsity=0.5)
    assert is_block_circulant(friendly.kernel * friendly.mask, 4)


def test_shift_of_a_hand_set_kernel() -> None:
    # An 8x4 kernel of 2x2 circulant blocks: two 4x4 groups, each four whole blocks.
    vectors = np.zeros((4, 2, 2), np.float32)  # [in/2, out/2, 2]
    vectors[:2] = 1.0  # group 0 (rows 0-3): 16 entries of 1, norm^2 16
    vectors[2:] = 3.0  # group 1 (rows 4-7): 16 entries of 3, norm^2 144
    t = transition(vectors, P.BLOCK4_FRIENDLY_BLOCK2, initial_sparsity=0.5)
    np.testing.assert_array_equal(t.mask[:4], 0.0)
    np.testing.assert_array_equal(t.mask[4:], 1.0)
    assert t.relative_shift == pytest.approx(np.sqrt(16 / (16 + 144)))


@pytest.mark.parametrize(
    ("method", "b_c", "b_p", "match"),
    [
        (P.BLOCK4_FRIENDLY_BLOCK2, 4, None, "needs circulant_block_size 2"),
        (P.BLOCK4_FRIENDLY_BLOCK4, 2, None, "needs circulant_block_size 4"),
        (P.BLOCK4_FRIENDLY_BLOCK4, 8, None, "needs circulant_block_size 4"),
        (P.BLOCK4_FRIENDLY_BLOCK2, 2, 2, "prunes 4x4 groups"),
        (P.PROJECTION, 4, 0, "pruning_block_size must be >= 1"),
        (P.PROJECTION, 4, 3, "divisible by block_size 3"),
    ],
)
def test_undefined_combinations_are_rejected(method, b_c, b_p, match) -> None:
    with pytest.raises(ValueError, match=match):
        transition(np.ones((4, 4, b_c)), method, b_p)


def test_vectors_must_be_three_dimensional() -> None:
    with pytest.raises(ValueError, match="vectors must be"):
        transition(np.ones((8, 8)), P.PROJECTION)


# --- circulant_to_dense -------------------------------------------------------------------


@pytest.mark.parametrize("b", (2, 4, 8))
def test_circulant_to_dense_matches_outputs(b: int) -> None:
    layer = trained_layer(b)
    dense = circulant_to_dense(layer, name="dense_copy")
    assert isinstance(dense, keras.layers.Dense) and dense.name == "dense_copy"
    np.testing.assert_array_equal(dense.kernel.numpy(), layer.effective_kernel())
    x = np.random.default_rng(b).standard_normal((5, 16)).astype(np.float32)
    np.testing.assert_allclose(dense(x), layer(x), atol=1e-6)
    # A copy: training the Dense leaves the circulant layer alone.
    dense.kernel.assign(np.zeros_like(dense.kernel.numpy()))
    assert np.any(layer.effective_kernel().numpy() != 0.0)


def test_circulant_to_dense_without_bias_and_relu() -> None:
    layer = BlockCirculantDense(8, 4, activation="relu", use_bias=False)
    layer.build((None, 8))
    dense = circulant_to_dense(layer)
    assert dense.bias is None and len(dense.weights) == 1
    x = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
    np.testing.assert_allclose(dense(x), layer(x), atol=1e-6)
    assert np.any(dense(x).numpy() == 0.0)  # relu carried over


def test_circulant_to_dense_needs_a_built_layer() -> None:
    with pytest.raises(ValueError, match="not built"):
        circulant_to_dense(BlockCirculantDense(8, 4))
