"""GST and iterative pruning as the learner runs them: the constraint inside the update,
the phase transition, the schedules, and the compression accounting."""

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
from edge_rl.compress.compressor import Compressor
from edge_rl.compress.config import CompressionConfig
from edge_rl.compress.kernels import KernelConstraint, project


def stack(widths: tuple[int, ...] = (8, 16, 16, 4), seed: int = 0) -> keras.Model:
    """``widths[0] -> ... -> widths[-1]``, ReLU between, plain Dense layers."""
    layers = [
        keras.layers.Dense(
            w,
            activation="relu" if i < len(widths) - 2 else None,
            kernel_initializer=keras.initializers.GlorotUniform(seed + i),
        )
        for i, w in enumerate(widths[1:])
    ]
    return keras.Sequential([keras.Input((widths[0],)), *layers])


def is_block_circulant(w: np.ndarray, b: int) -> bool:
    return np.array_equal(w, expand_circulant(project_to_block_circulant(w, b), b).astype(w.dtype))


def zero_block_fraction(w: np.ndarray, b: int) -> float:
    p, q = w.shape[0] // b, w.shape[1] // b
    blocks = np.abs(w.reshape(p, b, q, b)).max(axis=(1, 3))  # [p, q]
    return float(np.mean(blocks == 0))


@pytest.mark.parametrize("b", (2, 4, 8))
def test_graph_projection_matches_numpy(b: int) -> None:
    w = np.random.default_rng(b).normal(size=(16, 24)).astype(np.float32)
    expected = expand_circulant(project_to_block_circulant(w, b), b)
    np.testing.assert_allclose(project(tf.constant(w), b).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_constrained_adam_on_a_dense_kernel_trains_like_the_circulant_layer() -> None:
    """The claim in kernels.py: projected gradients + Adam on W == Adam on the vectors c."""
    b, rng = 4, np.random.default_rng(0)
    x = tf.constant(rng.normal(size=(32, 16)), tf.float32)
    y = tf.constant(rng.normal(size=(32, 8)), tf.float32)
    init = keras.initializers.GlorotUniform(seed=0)  # a fixed draw: the test is repeatable
    circ = BlockCirculantDense(8, block_size=b, use_bias=False, kernel_initializer=init)
    circ.build((None, 16))
    dense = keras.layers.Dense(8, use_bias=False)
    dense.build((None, 16))
    dense.kernel.assign(circ.effective_kernel())
    constraint = KernelConstraint([dense.kernel], circulant_block=b, pruning_block=b)
    # Adam's epsilon is the one place the factor b between the vectors' gradient (a sum over
    # each diagonal) and the projected one (its mean) shows; a tiny epsilon takes it out,
    # where the default 1e-7 let one coefficient drift by 1e-4 on some draws.
    opt_c, opt_d = (keras.optimizers.Adam(1e-2, epsilon=1e-12) for _ in range(2))
    for _ in range(20):
        for layer, opt, con in ((circ, opt_c, None), (dense, opt_d, constraint)):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(layer(x) - y))
            grads = tape.gradient(loss, layer.trainable_variables)
            if con is not None:
                grads = con.gradients(grads, layer.trainable_variables)
            opt.apply_gradients(zip(grads, layer.trainable_variables, strict=True))
            if con is not None:
                con.apply()
    w = dense.kernel.numpy()
    assert is_block_circulant(w, b)
    moved = np.abs(w - expand_circulant(project_to_block_circulant(w, b), b)).max()
    assert moved == 0.0
    # Equal to the layer trained on its vectors, up to Adam's epsilon and float rounding.
    np.testing.assert_allclose(w, circ.effective_kernel().numpy(), atol=2e-5)


def test_unconstrained_variables_pass_through() -> None:
    net = stack()
    first, middle = net.layers[0], net.layers[1]
    constraint = KernelConstraint([middle.kernel], circulant_block=4, pruning_block=4)
    g = [tf.ones(first.kernel.shape), tf.ones(first.bias.shape)]
    out = constraint.gradients(g, [first.kernel, first.bias])
    assert all(a is b for a, b in zip(out, g, strict=True))


def gst(**kw) -> CompressionConfig:
    return CompressionConfig(method="gst", prune_every=10, window=2, **kw)


def test_gst_starts_circulant_and_keeps_first_and_last_layers_dense() -> None:
    net = stack((8, 16, 16, 16, 4))
    before = [layer.kernel.numpy() for layer in net.layers]
    comp = Compressor(gst(s_shift=0.5), net, total_updates=100)
    assert [rec.compressed for rec in comp.layers] == [False, True, True, False]
    np.testing.assert_array_equal(net.layers[0].kernel.numpy(), before[0])
    np.testing.assert_array_equal(net.layers[-1].kernel.numpy(), before[-1])
    for layer in net.layers[1:-1]:
        w = layer.kernel.numpy()
        assert is_block_circulant(w, 4)
        # Row 0 of each block kept: the entries have the initialiser's spread, not 1/b of it.
        assert np.std(w) > 0.7 * np.std(before[1])
    r = comp.ratios()
    assert r.gst_layers == pytest.approx(0.75)
    dense, gst_entries = 8 * 16 + 16 * 4, 2 * 16 * 16
    assert r.network == pytest.approx(0.75 * gst_entries / (dense + gst_entries))


def test_gst_transition_prunes_to_the_circulant_compression_then_follows_the_reward() -> None:
    net = stack((8, 32, 32, 4))
    comp = Compressor(gst(s_shift=0.5, step_up=0.1, min_sparsity=0.0), net, total_updates=100)
    kernel = net.layers[1].kernel
    comp.on_updates(48)
    assert comp.circulant
    comp.on_updates(50)  # shift_step = 50: transition, then the schedule's first update
    assert not comp.circulant and comp.transition_step == 50
    assert zero_block_fraction(kernel.numpy(), 4) == pytest.approx(0.75)
    assert comp.ratios().gst_layers == pytest.approx(0.75)  # no jump at the transition
    for r in (100.0, 100.0, 101.0, 102.0):  # two windows of 2: HOLD (first), then RAISE
        comp.observe_return(r)
    assert comp.controller is not None and comp.controller.target_sparsity == pytest.approx(0.85)
    comp.on_updates(55)  # no mask update due between 51 and 55
    assert zero_block_fraction(kernel.numpy(), 4) == pytest.approx(0.75)
    comp.on_updates(60)  # due at 60
    assert zero_block_fraction(kernel.numpy(), 4) == pytest.approx(0.85, abs=1 / 64)
    for r in (50.0, 50.0, 40.0, 40.0):  # drops, then drops further: LOWER by step_down
        comp.observe_return(r)
    assert comp.controller.target_sparsity == pytest.approx(0.80)
    assert [d["action"] for d in comp.decisions] == ["hold", "raise", "hold", "lower"]


def test_by_default_the_controller_never_steps_below_the_transition_sparsity() -> None:
    comp = Compressor(gst(s_shift=0.5), stack((8, 32, 32, 4)), total_updates=100)
    comp.on_updates(50)
    for r in (100.0, 100.0, 50.0, 50.0, 40.0, 40.0, 30.0, 30.0):  # drops further and further
        comp.observe_return(r)
    assert [d["action"] for d in comp.decisions] == ["hold", "hold", "lower", "lower"]
    assert comp.controller is not None and comp.controller.target_sparsity == 0.75


def test_returns_before_the_transition_do_not_drive_the_controller() -> None:
    comp = Compressor(gst(s_shift=0.5), stack(), total_updates=100)
    for r in range(10):
        comp.observe_return(float(r))
    assert comp.decisions == []


def test_iterative_follows_the_polynomial_schedule_and_ends_at_its_target() -> None:
    net = stack((8, 32, 32, 4))
    cfg = CompressionConfig(method="iterative", block_size=4, prune_every=10, final_sparsity=0.5)
    comp = Compressor(cfg, net, total_updates=100)  # prunes from update 20 to 80
    assert not comp.circulant
    comp.on_updates(19)
    assert comp.ratios().network == 0.0
    comp.on_updates(50)
    s_mid = comp.sparsities()[0]
    assert 0.0 < s_mid < 0.5
    assert s_mid == pytest.approx(0.5 * (1 - (1 - 30 / 60) ** 3), abs=1 / 64)
    comp.on_updates(100)
    assert comp.sparsities()[0] == pytest.approx(0.5)
    assert zero_block_fraction(net.layers[1].kernel.numpy(), 4) == pytest.approx(0.5)


def test_average_ratio_weights_each_step_by_the_ratio_in_force() -> None:
    net = stack((8, 32, 32, 4))
    comp = Compressor(gst(s_shift=0.4), net, total_updates=100)
    r_circ = comp.ratios().network
    comp.on_updates(40)  # 40 steps circulant, then the transition (same stored count)
    comp.controller._target = 0.5  # noqa: SLF001 - force a lower target for the arithmetic
    comp.on_updates(50)  # 10 more at the transition's ratio; due at 50: prune to 0.5
    r_half = comp.ratios().network
    comp.on_updates(100)  # 50 steps at 0.5
    assert comp.average_ratio() == pytest.approx((50 * r_circ + 50 * r_half) / 100)


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"method": "magic"}, "method"),
        ({"method": "gst", "transition": "nope"}, "transition"),
        ({"method": "gst", "block_size": 8, "transition": "block4_friendly_block4"}, "needs"),
        ({"method": "gst", "s_shift": 1.5}, "s_shift"),
        ({"method": "gst", "transition_sparsity": 0.95}, "max_sparsity"),
        ({"method": "iterative", "begin": 0.8, "end": 0.2}, "begin"),
        ({"method": "iterative", "final_sparsity": 1.0}, "final_sparsity"),
        ({"prune_every": 0}, "prune_every"),
    ],
)
def test_bad_config_is_a_clear_error(kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CompressionConfig(**kw)


def test_a_network_without_a_middle_layer_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="two hidden layers"):
        Compressor(gst(), stack((8, 16, 4)), total_updates=100)
    with pytest.raises(ValueError, match="divisible"):
        Compressor(gst(), stack((8, 18, 18, 4)), total_updates=100)
