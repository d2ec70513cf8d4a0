"""TD3 actor export: raw observation in, action inside the env's bounds out, any LiteRT user.

The deployed model must not need our code or the manifest: these tests feed raw
observations straight into the LiteRT interpreter.
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from edge_rl.agents.td3.networks import make_actor
from edge_rl.export.parity import check_action_parity
from edge_rl.export.tflite import ExportedModel, export_policy
from tests.harness.lite import lite_outputs

# Bounds that differ per dimension (one not centred on 0), and features on scales from
# 0.05 to 20 (HalfCheetah's joint angles against its joint velocities).
LOW = np.array([-1.0, -0.4, 0.0], np.float32)
HIGH = np.array([1.0, 0.4, 10.0], np.float32)
SCALE = np.array([0.05, 0.3, 1.0, 5.0, 20.0], np.float32)
OFFSET = np.array([1.0, 0.0, -0.5, 0.0, 3.0], np.float32)


def _obs(n: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).normal(size=(n, 5)) * SCALE + OFFSET).astype(np.float32)


@pytest.fixture(scope="module")
def actor() -> keras.Model:
    model = make_actor(5, LOW, HIGH, (64, 64), seed=7)
    # Sharpen the tanh head so that actions reach the bounds (a trained actor saturates).
    head = model.get_layer("tanh_action")
    kernel, bias = head.get_weights()
    head.set_weights([kernel * 3.0, bias])
    return model


@pytest.fixture(scope="module")
def exports(actor: keras.Model) -> dict[str, ExportedModel]:
    return {p: export_policy(actor, _obs(500, seed=0), p) for p in ("int8", "fp16", "fp32")}


def _run_raw(tflite: bytes, obs: np.ndarray) -> np.ndarray:
    """Plain LiteRT, no edge-rl wrapper: what any user of the file would write."""
    return lite_outputs(tflite, obs)


@pytest.mark.parametrize("precision", ["int8", "fp16", "fp32"])
def test_raw_obs_to_action_in_bounds_in_plain_litert(
    exports: dict[str, ExportedModel], actor: keras.Model, precision: str
) -> None:
    obs = _obs(300, seed=1)
    obs[:20] *= 50.0  # far outside the calibration range: still inside the bounds
    actions = _run_raw(exports[precision].tflite, obs)
    assert actions.shape == (300, 3)
    assert np.all(actions >= LOW) and np.all(actions <= HIGH), (actions.min(0), actions.max(0))


@pytest.mark.parametrize(
    ("precision", "max_error", "mean_error"),
    [("fp32", 1e-5, 1e-6), ("fp16", 0.02, 2e-3), ("int8", 0.4, 0.03)],
)
def test_action_parity_on_held_out_observations(
    exports: dict[str, ExportedModel],
    actor: keras.Model,
    precision: str,
    max_error: float,
    mean_error: float,
) -> None:
    report = check_action_parity(exports[precision], actor, _obs(400, seed=2), (HIGH - LOW) / 2)
    assert report.max_error <= max_error and report.mean_error <= mean_error, report


def test_a_quantile_gate_passes_an_export_that_a_few_observations_fail_on_the_maximum(
    exports: dict[str, ExportedModel], actor: keras.Model
) -> None:
    obs = _obs(400, seed=3)
    obs[:3] *= 50.0  # 3 of 400 far outside the calibration range: int8 clips them
    half = (HIGH - LOW) / 2
    full = check_action_parity(exports["int8"], actor, obs, half)
    q99 = check_action_parity(exports["int8"], actor, obs, half, quantile=0.99)
    # each observation's largest error, in fractions of the half-range, computed here
    errors = (np.abs(_run_raw(exports["int8"].tflite, obs) - actor(obs).numpy()) / half).max(1)
    assert full.quantile_error == full.max_error == pytest.approx(errors.max(), abs=1e-6)
    assert q99.quantile_error == pytest.approx(np.quantile(errors, 0.99), abs=1e-6)
    assert q99.max_error == full.max_error and q99.quantile_error < full.max_error
    gate = (q99.quantile_error + full.max_error) / 2  # between the two statistics
    assert q99.passes(gate, 1.0) and not full.passes(gate, 1.0)
    assert not q99.passes(gate, q99.mean_error / 2)  # the mean gate still applies


def test_int8_actor_is_int8_inside_with_a_float_rescale(exports: dict[str, ExportedModel]) -> None:
    interp = Interpreter(
        model_content=exports["int8"].tflite,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
    )
    names = [op["op_name"] for op in interp._get_ops_details()]
    assert names[:5] == ["MUL", "ADD", "MAXIMUM", "MINIMUM", "QUANTIZE"], names
    # tanh in int8 (one scale fits [-1, 1] in every dimension), then bounds in float.
    assert names[-6:] == ["TANH", "DEQUANTIZE", "MUL", "ADD", "MAXIMUM", "MINIMUM"], names
    assert names.count("FULLY_CONNECTED") == 3, names


def test_a_frozen_last_layer_that_is_not_a_diagonal_rescale_is_rejected() -> None:
    model = make_actor(5, LOW, HIGH, (8,), seed=0)
    rescale = model.get_layer("rescale")
    kernel, bias = rescale.get_weights()
    rescale.set_weights([kernel + 0.1, bias])  # off-diagonal terms
    with pytest.raises(ValueError, match="diagonal"):
        export_policy(model, _obs(16, seed=0), "fp32")
