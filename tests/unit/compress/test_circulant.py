"""Block-circulant layer against a dense circulant matrix built by loops; projection."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from edge_rl.compress.circulant import (
    BlockCirculantDense,
    expand_circulant,
    project_to_block_circulant,
)

BLOCKS = (2, 4, 8)


def dense_by_loops(vectors: np.ndarray) -> np.ndarray:
    """The documented convention, written out: W[p*b + i, q*b + j] = c[p, q, (j - i) mod b]."""
    p_n, q_n, b = vectors.shape
    kernel = np.zeros((p_n * b, q_n * b), vectors.dtype)
    for p in range(p_n):
        for q in range(q_n):
            for i in range(b):
                for j in range(b):
                    kernel[p * b + i, q * b + j] = vectors[p, q, (j - i) % b]
    return kernel


def sum_over_diagonals(grad_kernel: np.ndarray, b: int) -> np.ndarray:
    """Chain rule through the expansion: dL/dc[p, q, k] = sum of dL/dW over diagonal k."""
    p_n, q_n = grad_kernel.shape[0] // b, grad_kernel.shape[1] // b
    out = np.zeros((p_n, q_n, b), grad_kernel.dtype)
    for p in range(p_n):
        for q in range(q_n):
            for i in range(b):
                for j in range(b):
                    out[p, q, (j - i) % b] += grad_kernel[p * b + i, q * b + j]
    return out


def test_expansion_follows_the_documented_convention() -> None:
    c = np.array([[[0.0, 1.0, 2.0, 3.0]]])  # one 4x4 block
    expected = [[0, 1, 2, 3], [3, 0, 1, 2], [2, 3, 0, 1], [1, 2, 3, 0]]  # rows rotate right
    np.testing.assert_array_equal(expand_circulant(c, 4), expected)


@pytest.mark.parametrize("b", BLOCKS)
def test_expansion_matches_loops_and_is_a_circular_convolution(b: int) -> None:
    rng = np.random.default_rng(b)
    c = rng.standard_normal((3, 2, b))
    np.testing.assert_array_equal(expand_circulant(c, b), dense_by_loops(c))
    # x @ block == x (*) c: the FFT identity the module docstring promises.
    x = rng.standard_normal(b)
    conv = np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(c[0, 0]), n=b)
    np.testing.assert_allclose(x @ expand_circulant(c[:1, :1], b), conv, atol=1e-12)


@pytest.mark.parametrize("b", BLOCKS)
def test_layer_forward_and_gradients_equal_a_dense_layer(b: int) -> None:
    in_dim, units, batch = 16, 24, 5
    layer = BlockCirculantDense(units, b, activation="tanh")
    layer.build((None, in_dim))
    rng = np.random.default_rng(10 + b)
    layer.circulant.assign(rng.standard_normal(layer.circulant.shape).astype(np.float32))
    layer.bias.assign(rng.standard_normal(units).astype(np.float32))
    dense = keras.layers.Dense(units, activation="tanh")
    dense.build((None, in_dim))
    dense.set_weights([dense_by_loops(layer.circulant.numpy()), layer.bias.numpy()])

    x = tf.constant(rng.standard_normal((batch, in_dim)).astype(np.float32))
    weights = tf.constant(rng.standard_normal((batch, units)).astype(np.float32))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y_circ, y_dense = layer(x), dense(x)
        loss_circ = tf.reduce_sum(weights * y_circ)  # non-uniform weights: a non-trivial grad
        loss_dense = tf.reduce_sum(weights * y_dense)

    np.testing.assert_allclose(y_circ, y_dense, atol=1e-5)
    np.testing.assert_allclose(tape.gradient(loss_circ, x), tape.gradient(loss_dense, x), atol=1e-5)
    g_c, g_bias = tape.gradient(loss_circ, [layer.circulant, layer.bias])
    g_kernel, g_dense_bias = tape.gradient(loss_dense, [dense.kernel, dense.bias])
    np.testing.assert_allclose(g_c, sum_over_diagonals(g_kernel.numpy(), b), atol=1e-4)
    np.testing.assert_allclose(g_bias, g_dense_bias, atol=1e-5)


def test_layer_stores_b_times_fewer_kernel_parameters() -> None:
    layer = BlockCirculantDense(32, 8, use_bias=False)
    layer.build((None, 64))
    assert [w.name for w in layer.weights] == ["circulant"]
    assert tuple(layer.circulant.shape) == (8, 4, 8)  # 64 * 32 / 8 entries
    np.testing.assert_array_equal(layer.effective_kernel(), expand_circulant(layer.circulant, 8))


def test_initializer_draws_row_zero_of_the_dense_initializer() -> None:
    init = keras.initializers.GlorotUniform(seed=3)  # seeded: the same values on every call
    layer = BlockCirculantDense(8, 4, kernel_initializer=init)
    layer.build((None, 12))
    dense = np.asarray(init((12, 8)))  # [in, out]
    np.testing.assert_array_equal(layer.circulant, dense.reshape(3, 4, 2, 4)[:, 0])


def test_layer_survives_a_keras_save_and_load(tmp_path) -> None:
    model = keras.Sequential([keras.Input((8,)), BlockCirculantDense(4, 2, activation="relu")])
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    np.testing.assert_allclose(loaded(x), model(x), atol=1e-6)
    assert loaded.layers[0].block_size == 2


@pytest.mark.parametrize(
    ("units", "block_size", "in_dim", "match"),
    [
        (16, 3, 16, "block_size must be one of"),
        (16, 16, 16, "block_size must be one of"),
        (10, 4, 16, "units 10 is not divisible by block_size 4"),
        (16, 4, 6, "input dim 6 is not divisible by block_size 4"),
    ],
)
def test_layer_rejects_bad_shapes(units: int, block_size: int, in_dim: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BlockCirculantDense(units, block_size).build((None, in_dim))


# --- projection ---------------------------------------------------------------------------


@pytest.mark.parametrize("b", BLOCKS)
def test_projection_returns_a_circulant_matrix_unchanged(b: int) -> None:
    c = np.random.default_rng(b).standard_normal((4, 3, b))
    np.testing.assert_allclose(project_to_block_circulant(dense_by_loops(c), b), c, atol=1e-12)


@pytest.mark.parametrize("b", BLOCKS)
def test_projection_of_a_random_matrix_is_the_least_squares_optimum(b: int) -> None:
    rng = np.random.default_rng(100 + b)
    kernel = rng.standard_normal((2 * b, 3 * b))
    c = project_to_block_circulant(kernel, b)
    best = np.linalg.norm(kernel - dense_by_loops(c))
    # Normal equations: the residual is orthogonal to the circulant subspace.
    residual = kernel - dense_by_loops(c)
    np.testing.assert_allclose(sum_over_diagonals(residual, b), 0.0, atol=1e-12)
    # And every circulant perturbation, large or small, is worse.
    for scale in (1e-3, 1e-1, 1.0):
        for _ in range(5):
            nudged = c + scale * rng.standard_normal(c.shape)
            assert np.linalg.norm(kernel - dense_by_loops(nudged)) > best


def test_projection_is_the_mean_of_each_diagonal() -> None:
    kernel = np.arange(4.0).reshape(2, 2)  # [[0, 1], [2, 3]]
    # diagonal 0: (0,0), (1,1) -> (0 + 3) / 2; diagonal 1: (0,1), (1,0) -> (1 + 2) / 2
    np.testing.assert_array_equal(project_to_block_circulant(kernel, 2), [[[1.5, 1.5]]])


def test_projection_rejects_indivisible_kernels() -> None:
    with pytest.raises(ValueError, match="output dim 6 is not divisible by block_size 4"):
        project_to_block_circulant(np.zeros((8, 6)), 4)
