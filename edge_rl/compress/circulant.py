"""Block-circulant dense layer (GST, Lee et al. 2021) and its dense <-> circulant maps.

Convention, used by every function here and by the layer. A kernel ``W [in, out]`` (Keras
``Dense`` layout, ``y = x @ W``) is cut into ``b x b`` blocks ``W[p, q]`` (input block ``p``,
output block ``q``); each block is circulant and stored as one vector ``c = c[p, q, :]``::

    W[p, q][i, j] = c[(j - i) mod b]        # row i (input), column j (output)

Row 0 of a block is ``c`` itself and each row below is ``c`` rotated right by one. With this
convention ``x_block @ W[p, q]`` is the circular convolution ``x_block (*) c``, i.e.
``irfft(rfft(x_block) * rfft(c))`` with no conjugate or flip.

The parameters are ``[in/b, out/b, b]``: ``b`` times fewer than the dense kernel.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import ops

BLOCK_SIZES = (2, 4, 8)


def circulant_index(b: int) -> np.ndarray:
    """``idx [b, b]`` with ``idx[i, j] = (j - i) mod b``: the entry of ``c`` at block (i, j)."""
    _check_block_size(b)
    i, j = np.arange(b)[:, None], np.arange(b)[None, :]
    return (j - i) % b


def expand_circulant(vectors: np.ndarray, b: int) -> np.ndarray:
    """``vectors [in/b, out/b, b] -> kernel [in, out]``: the dense matrix the layer applies.

    NumPy, for export and tests; the layer builds the same matrix with ``keras.ops``.
    """
    vectors = np.asarray(vectors)
    if vectors.ndim != 3 or vectors.shape[-1] != b:
        raise ValueError(f"vectors must be [in/b, out/b, b={b}], got shape {vectors.shape}")
    p, q, _ = vectors.shape
    blocks = vectors[:, :, circulant_index(b)]  # [p, q, b, b] = [p, q, i, j]
    return blocks.transpose(0, 2, 1, 3).reshape(p * b, q * b)  # [p, i, q, j] -> [in, out]


def project_to_block_circulant(kernel: np.ndarray, b: int) -> np.ndarray:
    """``kernel [in, out] -> vectors [in/b, out/b, b]``: the nearest block-circulant matrix.

    Nearest in the Frobenius norm. The b "circulant diagonals" ``{(i, j): (j - i) mod b = k}``
    of a block have disjoint supports, so their indicator matrices are an orthogonal basis of
    the circulant subspace and the least-squares coefficient of each is the mean of the b
    entries it covers.
    """
    kernel = np.asarray(kernel)
    if kernel.ndim != 2:
        raise ValueError(f"kernel must be 2-D [in, out], got shape {kernel.shape}")
    _check_divisible(kernel.shape[0], b, "input dim")
    _check_divisible(kernel.shape[1], b, "output dim")
    p, q = kernel.shape[0] // b, kernel.shape[1] // b
    blocks = kernel.reshape(p, b, q, b).transpose(0, 2, 1, 3)  # [in, out] -> [p, q, i, j]
    flat = blocks.reshape(p, q, b * b)  # [p, q, i*b + j]
    onehot = np.eye(b)[circulant_index(b).reshape(-1)]  # [b*b, b]: entry (i, j) -> diagonal k
    return (flat @ onehot) / b  # [p, q, b]: sum over each diagonal / its b entries


@keras.saving.register_keras_serializable(package="edge_rl")
class BlockCirculantDense(keras.layers.Layer):
    """``y = activation(x @ expand(c) + bias)`` for ``x [..., in] -> y [..., units]``.

    ``c [in/b, out/b, b]`` is the only kernel variable (named ``circulant``). Each kernel
    entry is drawn like the same entry of a ``Dense`` with ``kernel_initializer``: the
    initializer is called on the dense shape ``[in, out]`` and row 0 of each block is kept
    (row 0 of a circulant block is ``c``).
    """

    def __init__(
        self,
        units: int,
        block_size: int,
        activation: str | None = None,
        use_bias: bool = True,
        kernel_initializer: str | keras.initializers.Initializer = "glorot_uniform",
        bias_initializer: str | keras.initializers.Initializer = "zeros",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        _check_block_size(block_size)
        _check_divisible(units, block_size, "units")
        self.units = int(units)
        self.block_size = int(block_size)
        self.activation = keras.activations.get(activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        # [i, j, k] = 1 where block entry (i, j) holds c[k]: the expansion as a contraction.
        self._onehot = np.eye(self.block_size, dtype="float32")[circulant_index(self.block_size)]

    def build(self, input_shape: tuple[int | None, ...]) -> None:
        in_dim, b = input_shape[-1], self.block_size
        if in_dim is None:
            raise ValueError("BlockCirculantDense needs a known last input dimension")
        _check_divisible(in_dim, b, "input dim")

        def init(shape: tuple[int, ...], dtype: str | None = None) -> tf.Tensor:
            dense = self.kernel_initializer((in_dim, self.units), dtype=dtype)  # [in, out]
            dense = ops.reshape(dense, (in_dim // b, b, self.units // b, b))  # [p, i, q, j]
            return dense[:, 0, :, :]  # row i = 0 of every block: [p, q, b] = c

        self.circulant = self.add_weight(
            name="circulant", shape=(in_dim // b, self.units // b, b), initializer=init
        )
        self.bias = (
            self.add_weight(name="bias", shape=(self.units,), initializer=self.bias_initializer)
            if self.use_bias
            else None
        )

    def effective_kernel(self) -> tf.Tensor:
        """The dense ``[in, out]`` kernel this layer applies (for export and pruning)."""
        p, q, b = self.circulant.shape
        # Expand then one dense matmul, rather than rfft -> complex einsum -> irfft. Measured
        # forward + backward at 256x256, batch 256, 1 thread on the 2-core dev box (loaded):
        # this one-hot expansion 1.0-1.6 ms at b = 8 (1.7-2.2 ms at b = 2), an index gather
        # 1.5-2.2 ms (its gradient is a scatter), the FFT 1.7-2.9 ms (5-8 ms at b = 2), a
        # plain Dense 0.7-1.2 ms. At b <= 8 the FFT saves too few flops to pay for its op
        # count and complex arithmetic. The contraction costs p*q*b^3 flops, its gradient is a
        # dense matmul (a gather's is a scatter into IndexedSlices), and the dense kernel it
        # builds is what export needs anyway.
        onehot = ops.cast(self._onehot, self.circulant.dtype)  # [b, b, b] = [i, j, k]
        blocks = ops.einsum("pqk,ijk->piqj", self.circulant, onehot)  # [p, i, q, j]
        return ops.reshape(blocks, (p * b, q * b))  # [in, out]

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        y = ops.matmul(inputs, self.effective_kernel())  # [..., in] @ [in, out] -> [..., out]
        if self.bias is not None:
            y = y + self.bias
        return self.activation(y)

    def compute_output_shape(self, input_shape: tuple[int | None, ...]) -> tuple[int | None, ...]:
        return (*input_shape[:-1], self.units)

    def get_config(self) -> dict:
        return {
            **super().get_config(),
            "units": self.units,
            "block_size": self.block_size,
            "activation": keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }


def _check_block_size(b: int) -> None:
    if b not in BLOCK_SIZES:
        raise ValueError(f"block_size must be one of {BLOCK_SIZES}, got {b!r}")


def _check_divisible(n: int, b: int, what: str) -> None:
    if n % b != 0:
        raise ValueError(
            f"{what} {n} is not divisible by block_size {b}: block-circulant layers need "
            f"whole b x b blocks (keep such layers dense, or pick a size that divides {n})"
        )
