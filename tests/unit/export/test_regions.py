"""Weight regions of real exports, and the "blocks" codec on a GST-shaped policy."""

from __future__ import annotations

import zlib

import keras
import numpy as np
import pytest

from edge_rl.compress.circulant import expand_circulant
from edge_rl.compress.pruning import block_mask
from edge_rl.export.regions import weight_regions
from edge_rl.export.tflite import MIN_OBS_STD, ExportedModel, deployable_model, export_policy
from edge_rl.runtime.litert import TFLitePolicy
from edge_rl.wire import blocks
from edge_rl.wire.blocks import Region
from edge_rl.wire.policy import CODECS, compress_model, decompress_model

B = 4  # GST block size


def _stack(sizes: tuple[int, ...], seed: int) -> keras.Model:
    """A plain Dense stack, ReLU hidden layers and a tanh head, as a TD3 actor's trunk."""
    acts = ["relu"] * (len(sizes) - 2) + ["tanh"]
    return keras.Sequential(
        [keras.Input((sizes[0],))]
        + [
            keras.layers.Dense(
                n, activation=a, kernel_initializer=keras.initializers.GlorotUniform(seed + i)
            )
            for i, (n, a) in enumerate(zip(sizes[1:], acts, strict=True))
        ]
    )


def _gst(model: keras.Model, sparsity: float, seed: int) -> keras.Model:
    """Middle kernel block-circulant (b = 4), then ``sparsity`` of its blocks masked out."""
    middle = model.layers[1].kernel  # [in, out]
    p, q = middle.shape[0] // B, middle.shape[1] // B
    vectors = np.random.default_rng(seed).normal(0, 0.1, (p, q, B)).astype(np.float32)
    kernel = expand_circulant(vectors, B)  # [in, out]
    # Masked as MaskedWeights.apply does (kernel * mask): negative entries become -0.0.
    middle.assign(kernel * block_mask(kernel, B, sparsity))
    return model


def _obs(n: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)


def _matrix(tflite: bytes, r: Region) -> np.ndarray:
    dtype = {"int8": np.int8, "float16": np.float16, "float32": np.float32}[r.dtype]
    return np.frombuffer(tflite, dtype, r.rows * r.cols, r.offset).reshape(r.rows, r.cols)


def _block_classes(w: np.ndarray, b: int) -> np.ndarray:
    """``w [rows, cols]`` -> class (0 zero, 1 circulant, 2 dense) per ``b x b`` block."""
    return blocks._classify(w.view(blocks.DTYPES[w.dtype.name]), b)


@pytest.fixture(scope="module")
def small() -> tuple[keras.Model, np.ndarray, dict[str, ExportedModel]]:
    model = _gst(_stack((8, 16, 16, 4), seed=0), sparsity=0.5, seed=1)
    obs = _obs(200, 8, seed=2)
    return model, obs, {p: export_policy(model, obs, p) for p in ("int8", "fp16", "fp32")}


@pytest.mark.parametrize("precision", ["int8", "fp16", "fp32"])
def test_regions_are_the_transposed_kernels(small, precision: str) -> None:
    model, obs, exports = small
    tflite = exports[precision].tflite
    # The kernels the converter saw: the first one has the normalisation folded in.
    std = np.maximum(obs.std(axis=0), MIN_OBS_STD)
    deployable = deployable_model(model, obs.mean(axis=0), std)
    kernels = [
        layer.kernel.numpy() for layer in deployable.layers if isinstance(layer, keras.layers.Dense)
    ]
    regions = weight_regions(tflite)
    dtype = {"int8": "int8", "fp16": "float16", "fp32": "float32"}[precision]
    assert all(r.dtype == dtype for r in regions)
    by_shape = {(r.rows, r.cols): r for r in regions}
    assert len(by_shape) == len(regions) == 3
    for kernel in kernels:
        w = _matrix(tflite, by_shape[kernel.T.shape])  # TFLite FC weights are [out, in]
        if precision == "int8":
            zero = kernel.T == 0
            assert np.all(w[zero] == 0) and np.all(np.sign(w) == np.sign(kernel.T) * (w != 0))
        else:  # bit for bit (fp16: the converter's rounding is numpy's)
            assert w.tobytes() == kernel.T.astype(w.dtype).tobytes()


@pytest.mark.parametrize(("per_channel", "scales"), [(True, 16), (False, 1)])
def test_int8_middle_kernel_stays_block_circulant(per_channel: bool, scales: int) -> None:
    model = _gst(_stack((8, 16, 16, 4), seed=3), sparsity=0.0, seed=4)
    tflite = export_policy(model, _obs(200, 8, seed=5), "int8", per_channel=per_channel).tflite
    middle = next(r for r in weight_regions(tflite) if (r.rows, r.cols) == (16, 16))
    assert np.all(_block_classes(_matrix(tflite, middle), B) == blocks.CIRCULANT)
    # Per channel (TFLite's default) is one scale per output unit = per row of [out, in].
    # Every row of a block-row holds each block's circulant vector once, in a rotated
    # order, so its max |w| and hence its scale are the same: circulance survives both.
    from ai_edge_litert.interpreter import Interpreter

    details = Interpreter(model_content=tflite).get_tensor_details()
    (weights,) = [d for d in details if tuple(d["shape"]) == (16, 16)]
    assert len(weights["quantization_parameters"]["scales"]) == scales


def test_decoded_model_runs_in_litert_like_the_original(small) -> None:
    _, obs, exports = small
    for exported in exports.values():
        regions = weight_regions(exported.tflite)
        payload = compress_model(exported.tflite, "blocks", regions=regions)
        decoded = decompress_model(payload, "blocks", 1 << 20)
        original, restored = TFLitePolicy(exported.tflite), TFLitePolicy(decoded)
        for row in obs[:20]:
            np.testing.assert_array_equal(restored(row), original(row))


# --- the wire size of a GST policy ------------------------------------------------------

# (precision, per_channel) -> max blocks / zlib. Measured (seed 0, 17->256->256->6, middle
# 75 % of 4x4 blocks zeroed): int8 per tensor 0.52, int8 per channel 0.55, fp32 0.65
# (fp32's masked blocks hold -0.0 entries: circulant, not ZERO, to a lossless codec).
# Measured without circulant detection (ZERO blocks only): int8 0.72-0.73, fp32 1.03.
RATIO = {("int8", False): 0.6, ("int8", True): 0.65, ("fp32", True): 0.75}


@pytest.fixture(scope="module")
def gst_policy() -> tuple[keras.Model, np.ndarray]:
    return _gst(_stack((17, 256, 256, 6), seed=0), sparsity=0.75, seed=0), _obs(300, 17, seed=1)


@pytest.mark.parametrize(("precision", "per_channel"), RATIO.keys(), ids=lambda v: str(v))
def test_blocks_codec_shrinks_a_gst_policy(gst_policy, precision: str, per_channel: bool) -> None:
    model, obs = gst_policy
    tflite = export_policy(model, obs, precision, per_channel=per_channel).tflite
    regions = weight_regions(tflite)
    payloads = {c: compress_model(tflite, c, regions=regions) for c in CODECS}
    sizes = {c: len(p) for c, p in payloads.items()}
    print(f"\n{precision} per_channel={per_channel}: payload bytes {sizes}")
    assert sizes["blocks"] < RATIO[precision, per_channel] * sizes["zlib"], sizes
    # "zlib" is a plain zlib stream of the model, at the codec's level (6: as small as 9 to
    # 0.01 % on int8 models, in less time; docs/benchmarks.md)
    assert payloads["zlib"] == zlib.compress(tflite, 6)
    assert zlib.decompress(payloads["zlib"]) == tflite
    assert decompress_model(payloads["blocks"], "blocks", len(tflite)) == tflite
