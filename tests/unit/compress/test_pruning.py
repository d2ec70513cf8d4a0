"""Block magnitude pruning: which blocks go, how many, and that masks survive Adam."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from edge_rl.compress.pruning import MaskedWeights, block_mask, block_norms, keep_blocks


def ranked_kernel(p: int, q: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    """Block (r, s) filled with a value whose L2 rank is a known permutation of r*q + s."""
    rank = np.random.default_rng(p * q * b).permutation(p * q).reshape(p, q)
    return np.kron(rank + 1.0, np.ones((b, b))), rank  # [p*b, q*b], [p, q]


def test_block_norms_are_l2_per_block() -> None:
    kernel = np.array([[3.0, 4.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0]])  # blocks of 2: [5, 1]
    np.testing.assert_allclose(block_norms(kernel, 2), [[5.0, 1.0]])


@pytest.mark.parametrize("b", (1, 2, 4, 8))
@pytest.mark.parametrize("sparsity", (0.0, 0.3, 0.5, 0.75, 0.9))
def test_mask_reaches_the_target_at_block_granularity(b: int, sparsity: float) -> None:
    p, q = 4, 5  # 20 blocks: every target above is a whole number of blocks
    kernel, rank = ranked_kernel(p, q, b)
    mask = block_mask(kernel, b, sparsity)

    blocks = mask.reshape(p, b, q, b)  # [p, i, q, j]
    per_block = blocks.max(axis=(1, 3))  # [p, q]
    np.testing.assert_array_equal(blocks.min(axis=(1, 3)), per_block)  # whole blocks only
    n_drop = round(sparsity * p * q)
    assert (per_block == 0).sum() == n_drop
    assert 1.0 - mask.mean() == pytest.approx(n_drop / (p * q))
    # The dropped blocks are exactly the n_drop smallest.
    np.testing.assert_array_equal(per_block == 0, rank < n_drop)


def test_sparsity_rounds_to_the_nearest_whole_block() -> None:
    scores = np.arange(8.0).reshape(2, 4)
    assert (~keep_blocks(scores, 0.3)).sum() == 2  # 2.4 blocks -> 2
    assert (~keep_blocks(scores, 0.32)).sum() == 3  # 2.56 blocks -> 3


def test_ties_break_by_flat_index() -> None:
    keep = keep_blocks(np.ones((2, 2)), 0.5)
    np.testing.assert_array_equal(keep, [[False, False], [True, True]])


@pytest.mark.parametrize(
    ("shape", "b", "sparsity", "match"),
    [
        ((8, 8), 4, 1.0, "sparsity must be in"),
        ((8, 8), 4, -0.1, "sparsity must be in"),
        ((8, 6), 4, 0.5, "divisible by block_size 4"),
        ((8,), 4, 0.5, "2-D"),
        ((8, 8), 0, 0.5, "block_size must be >= 1"),
    ],
)
def test_bad_arguments_are_rejected(shape: tuple, b: int, sparsity: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        block_mask(np.ones(shape), b, sparsity)


# --- masks under training -----------------------------------------------------------------


def train_steps(masked: bool, steps: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """A 2-layer net, hidden kernel pruned to 50 % once, ``steps`` Adam steps; (kernel, mask).

    Only the hidden kernel is masked: pruning a hidden unit's whole fan-in and fan-out is a
    fixed point of gradient descent (zero in, zero out, zero gradient), and the control test
    below needs the gradient to reach every pruned weight.
    """
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((8,)), keras.layers.Dense(16, activation="tanh"), keras.layers.Dense(4)]
    )
    masks = MaskedWeights([model.layers[0].kernel], block_size=4)
    masks.update(0.5)
    optimizer = keras.optimizers.Adam(1e-2)
    x = tf.random.stateless_normal((32, 8), seed=(1, 2))
    target = tf.random.stateless_normal((32, 4), seed=(3, 4))

    @tf.function
    def step() -> None:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - target))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        if masked:
            masks.apply()

    for _ in range(steps):
        step()
    return model.layers[0].kernel.numpy(), masks.masks[0].numpy()


def test_masks_hold_after_adam_steps() -> None:
    kernel, mask = train_steps(masked=True)
    assert (mask == 0).mean() == pytest.approx(0.5)
    assert np.all(kernel[mask == 0] == 0.0)
    assert np.all(kernel[mask == 1] != 0.0)


def test_without_apply_adam_regrows_the_pruned_weights() -> None:
    # Guards the test above: the gradient does reach the pruned blocks.
    kernel, mask = train_steps(masked=False)
    assert np.all(kernel[mask == 0] != 0.0)


def test_update_follows_the_target_up_and_down() -> None:
    kernel = keras.Variable(ranked_kernel(4, 4, 2)[0].astype(np.float32))
    masks = MaskedWeights([kernel], block_size=2)
    masks.update(0.75)
    assert masks.sparsity() == pytest.approx(0.75)
    assert np.count_nonzero(kernel.numpy()) == 4 * 4  # 4 blocks of 2x2 left
    masks.update(0.25)  # a step back: revived blocks restart from zero
    assert masks.sparsity() == pytest.approx(0.25)
    assert np.count_nonzero(kernel.numpy()) == 4 * 4


def test_masked_weights_rejects_indivisible_kernels() -> None:
    with pytest.raises(ValueError, match="divisible by block_size 4"):
        MaskedWeights([tf.Variable(tf.ones((8, 6)))], block_size=4)
