"""GST phase plan (S_shift -> phase per step) and compression-ratio accounting."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest

from edge_rl.compress.plan import (
    CIRCULANT_BLOCK_SIZES,
    CirculantLayer,
    DenseLayer,
    GSTPlan,
    Phase,
    PrunedLayer,
    TransitionMethod,
    compression_ratios,
)

C, PR = Phase.CIRCULANT, Phase.PRUNED


@pytest.mark.parametrize(
    ("total", "s_shift", "shift_step", "phases"),
    [
        # phases: the phase of steps 0, 1, ..., total - 1
        (4, 0.0, 0, [PR, PR, PR, PR]),  # pruned from the first step
        (4, 0.25, 1, [C, PR, PR, PR]),
        (4, 0.5, 2, [C, C, PR, PR]),
        (4, 1.0, None, [C, C, C, C]),  # circulant throughout: no transition
        (4, 0.9, None, [C, C, C, C]),  # 3.6 rounds to 4 = total_steps: no step left to prune
        (10, 0.25, 3, [C] * 3 + [PR] * 7),  # 2.5 rounds half up
        (10, 0.24, 2, [C] * 2 + [PR] * 8),
        (100, 0.07, 7, [C] * 7 + [PR] * 93),  # 0.07 * 100 = 7.000000000000001 in floats
    ],
)
def test_phase_of_every_step(total, s_shift, shift_step, phases) -> None:
    plan = GSTPlan(total_steps=total, s_shift=s_shift)
    assert plan.shift_step == shift_step
    assert [plan.phase(step) for step in range(total)] == phases
    transitions = [step for step in range(total) if plan.is_transition(step)]
    assert transitions == ([] if shift_step is None else [shift_step])
    assert plan.phase(total + 5) is phases[-1]  # running past the end keeps the last phase


@pytest.mark.parametrize(
    ("method", "b_c", "b_p", "expected"),
    [
        (TransitionMethod.PROJECTION, 4, None, 4),
        (TransitionMethod.PROJECTION, 8, 2, 2),
        (TransitionMethod.BLOCK4_FRIENDLY_BLOCK2, 2, None, 4),
        (TransitionMethod.BLOCK4_FRIENDLY_BLOCK4, 4, 4, 4),
    ],
)
def test_pruning_block_size_is_resolved_on_construction(method, b_c, b_p, expected) -> None:
    plan = GSTPlan(100, 0.25, circulant_block_size=b_c, method=method, pruning_block_size=b_p)
    assert plan.pruning_block_size == expected


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"total_steps": 0, "s_shift": 0.5}, "total_steps must be >= 1"),
        ({"total_steps": 10, "s_shift": -0.1}, "s_shift must be in"),
        ({"total_steps": 10, "s_shift": 1.5}, "s_shift must be in"),
        ({"total_steps": 10, "s_shift": float("nan")}, "s_shift must be in"),
        ({"total_steps": 10, "s_shift": 0.5, "method": "projection"}, "unknown method"),
        ({"total_steps": 10, "s_shift": 0.5, "circulant_block_size": 3}, "must be one of"),
        (
            {"total_steps": 10, "s_shift": 0.5, "method": TransitionMethod.BLOCK4_FRIENDLY_BLOCK2},
            "needs circulant_block_size 2",
        ),
        ({"total_steps": 10, "s_shift": 0.5, "pruning_block_size": 0}, "must be >= 1"),
    ],
)
def test_bad_plans_are_rejected(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        GSTPlan(**kwargs)


def test_plan_is_frozen_and_rejects_negative_steps() -> None:
    plan = GSTPlan(10, 0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.s_shift = 0.1  # type: ignore[misc]
    with pytest.raises(ValueError, match="step must be >= 0"):
        plan.phase(-1)


def test_plan_layer_record_follows_the_phase() -> None:
    plan = GSTPlan(100, 0.25, circulant_block_size=2)
    assert plan.layer(256, 256, 24, sparsity=0.7) == CirculantLayer(256, 256, 2)
    assert plan.layer(256, 256, 25, sparsity=0.7) == PrunedLayer(256, 256, 0.7)


def test_block_sizes_match_the_circulant_layer() -> None:
    from edge_rl.compress.circulant import BLOCK_SIZES

    assert CIRCULANT_BLOCK_SIZES == BLOCK_SIZES


def test_plan_imports_no_tensorflow() -> None:
    # The learner's config side may build a plan without pulling in TF (like controller.py).
    script = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("tensorflow", "keras"):
                    raise ImportError("imported " + name)
        sys.meta_path.insert(0, Block())
        import edge_rl.compress.plan
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-2000:]


# --- compression accounting ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("layer", "ratio"),
    [
        (CirculantLayer(256, 256, 2), 0.5),
        (CirculantLayer(256, 256, 4), 0.75),
        (CirculantLayer(256, 256, 8), 0.875),
        (CirculantLayer(256, 256, 2, sparsity=0.5), 0.75),  # 1 - (1 - s) / b
        (PrunedLayer(256, 256, 0.6), 0.6),
        (PrunedLayer(256, 256, 0.0), 0.0),
    ],
)
def test_single_layer_ratios(layer, ratio) -> None:
    ratios = compression_ratios([layer])
    assert ratios.gst_layers == pytest.approx(ratio)
    assert ratios.network == pytest.approx(ratio)
    assert ratios.gst_fraction == 1.0


def test_td3_actor_ratios_weight_layers_by_size() -> None:
    # obs 17 -> 256 -> 256 -> 6: dense first and last layers, the middle one GST.
    first, last = DenseLayer(17, 256), DenseLayer(256, 6)
    dense = Fraction(17 * 256 + 256 * 256 + 256 * 6)
    circulant = compression_ratios([first, CirculantLayer(256, 256, 4), last])
    assert circulant.gst_layers == pytest.approx(0.75)
    stored = Fraction(17 * 256 + 256 * 256 // 4 + 256 * 6)
    assert circulant.network == pytest.approx(float(1 - stored / dense))  # 0.688
    assert circulant.gst_fraction == pytest.approx(float(256 * 256 / dense))  # 0.918
    # Pruned phase, two GST layers of different sizes at different sparsities.
    mixed = compression_ratios(
        [DenseLayer(16, 64), PrunedLayer(64, 64, 0.5), PrunedLayer(64, 32, 0.25)]
    )
    gst_dense = 64 * 64 + 64 * 32
    assert mixed.gst_layers == pytest.approx((0.5 * 64 * 64 + 0.25 * 64 * 32) / gst_dense)
    assert mixed.network == pytest.approx((0.5 * 64 * 64 + 0.25 * 64 * 32) / (gst_dense + 16 * 64))


def test_all_dense_network_has_no_gst_ratio() -> None:
    assert compression_ratios([DenseLayer(4, 8), DenseLayer(8, 2)]) == (None, 0.0, 0.0)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: compression_ratios([]), "at least one layer"),
        (lambda: CirculantLayer(10, 8, 4), "dims must divide by b"),
        (lambda: CirculantLayer(8, 8, 3), "block_size must be in"),
        (lambda: CirculantLayer(8, 8, 4, sparsity=1.0), "sparsity must be in"),
        (lambda: PrunedLayer(8, 8, -0.1), "sparsity must be in"),
        (lambda: DenseLayer(0, 8), "dims must be >= 1"),
    ],
)
def test_bad_layer_records_are_rejected(build, match) -> None:
    with pytest.raises(ValueError, match=match):
        build()
