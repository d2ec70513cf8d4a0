"""The direct export (weights written into a template) against the converter, on real
Keras nets in real LiteRT: the same tensors, the same outputs to within one quantisation
step, for DQN and TD3, dense and GST-compressed, int8 / fp16 / fp32."""

from __future__ import annotations

import logging

import keras
import numpy as np
import pytest
from tensorflow.lite.python import schema_py_generated as schema

from edge_rl.agents.dqn.networks import make_q_network
from edge_rl.agents.td3.networks import make_actor
from edge_rl.compress.circulant import expand_circulant
from edge_rl.compress.pruning import block_mask
from edge_rl.export import direct as direct_module
from edge_rl.export.direct import DirectExporter
from edge_rl.export.folded import fold
from edge_rl.export.template import Template
from edge_rl.export.tflite import MIN_OBS_STD, ExportedModel, export_policy
from edge_rl.runtime.litert import TFLitePolicy

# CartPole-like features on very different scales, off-centre.
DQN_SCALE = np.array([2.0, 3.0, 0.2, 3.0], np.float32)
DQN_OFFSET = np.array([0.5, 0.0, 0.05, -1.0], np.float32)
# A 17-dim observation, 6-dim action with bounds that differ per dimension (HalfCheetah-like).
TD3_LOW = np.array([-1.0, -2.0, -0.5, -1.0, -3.0, 0.0])
TD3_HIGH = np.array([1.0, 1.0, 0.5, 2.0, 3.0, 1.0])
PRECISIONS = [("int8", True), ("int8", False), ("fp16", True), ("fp32", True)]
B = 4  # GST block size
N_OBS = 10_000


def _obs(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "dqn":
        return (rng.normal(size=(n, 4)) * DQN_SCALE + DQN_OFFSET).astype(np.float32)
    scale = np.linspace(0.5, 10.0, 17)  # joint angles ~±0.5 to velocities ~±10
    return (rng.normal(size=(n, 17)) * scale).astype(np.float32)


def _trained(model: keras.Model, seed: int) -> keras.Model:
    """Moves every trainable weight and bias off its initial value, as training does."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if layer.trainable:
            kernel = np.asarray(layer.kernel)
            layer.kernel.assign(kernel + rng.normal(0, 0.02, kernel.shape).astype(np.float32))
            layer.bias.assign(rng.normal(0, 0.05, layer.bias.shape).astype(np.float32))
    return model


def _gst(model: keras.Model, seed: int) -> keras.Model:
    """The middle kernel block-circulant, 75 % of its blocks pruned, and one output unit
    pruned whole (its weights all zero, its bias not)."""
    middle = model.layers[1].kernel  # [in, out]
    p, q = middle.shape[0] // B, middle.shape[1] // B
    vectors = np.random.default_rng(seed).normal(0, 0.1, (p, q, B)).astype(np.float32)
    kernel = expand_circulant(vectors, B) * block_mask(expand_circulant(vectors, B), B, 0.75)
    kernel[:, 5] = 0.0
    middle.assign(kernel)
    return model


def _net(kind: str, compressed: bool) -> keras.Model:
    if kind == "dqn":
        model = make_q_network(4, 2, (256, 256), seed=3)
    else:
        model = make_actor(17, TD3_LOW, TD3_HIGH, (256, 256), seed=3)
    model = _trained(model, seed=4)
    return _gst(model, seed=5) if compressed else model


def _tensors(tflite: bytes) -> list[schema.TensorT]:
    return schema.ModelT.InitFromPackedBuf(bytearray(tflite), 0).subgraphs[0].tensors


def _output_step(tflite: bytes, half_range: np.ndarray | None) -> np.ndarray:
    """One quantisation step of the int8 network's output, in output units ``[out]``.

    DQN: the scale of the tensor that the last DEQUANTIZE reads (the head's output). TD3:
    the head's output goes through TANH (slope <= 1) and TANH's own int8 output (1/128),
    then the float rescale by ``|half|``; a one-level difference in the head's output moves
    the action by up to ``(head step + 1/128) * |half|``.
    """
    model = schema.ModelT.InitFromPackedBuf(bytearray(tflite), 0)
    graph = model.subgraphs[0]
    codes = [max(c.builtinCode, c.deprecatedBuiltinCode) for c in model.operatorCodes]

    def scale(tensor: int) -> float:
        return float(graph.tensors[tensor].quantization.scale[0])

    ops = {codes[op.opcodeIndex]: op for op in graph.operators}  # the last of each kind
    if half_range is None:
        return np.array([scale(ops[schema.BuiltinOperator.DEQUANTIZE].inputs[0])])
    tanh = ops[schema.BuiltinOperator.TANH]
    return (scale(tanh.inputs[0]) + scale(tanh.outputs[0])) * np.abs(half_range)


@pytest.fixture(scope="module", params=["dqn", "td3"])
def kind(request) -> str:
    return request.param


@pytest.fixture(scope="module", params=[False, True], ids=["dense", "gst"])
def net(request, kind: str) -> keras.Model:
    return _net(kind, request.param)


@pytest.mark.parametrize(("precision", "per_channel"), PRECISIONS)
def test_direct_export_matches_the_converter(
    kind: str, net: keras.Model, precision: str, per_channel: bool
) -> None:
    calibration = _obs(kind, 1_000, seed=0)
    direct = export_policy(net, calibration, precision, per_channel)
    converted = export_policy(net, calibration, precision, per_channel, direct=False)
    assert direct.path == "direct", "the direct path fell back to the converter"
    assert converted.path == "converter"
    _same_tensors(direct, converted)
    _same_outputs(direct, converted, kind, precision)


def _same_tensors(direct: ExportedModel, converted: ExportedModel) -> None:
    """Names, shapes, dtypes and quantisation (within float rounding); constants equal."""
    ours, theirs = _tensors(direct.tflite), _tensors(converted.tflite)
    assert [t.name for t in ours] == [t.name for t in theirs]
    direct_model = schema.ModelT.InitFromPackedBuf(bytearray(direct.tflite), 0)
    converted_model = schema.ModelT.InitFromPackedBuf(bytearray(converted.tflite), 0)
    for a, b in zip(ours, theirs, strict=True):
        assert list(a.shape) == list(b.shape) and a.type == b.type, a.name
        qa, qb = a.quantization, b.quantization
        if qb is None or qb.scale is None:
            assert qa is None or qa.scale is None, a.name
        else:
            np.testing.assert_allclose(qa.scale, qb.scale, rtol=1e-6, err_msg=str(a.name))
            np.testing.assert_array_equal(qa.zeroPoint, qb.zeroPoint, err_msg=str(a.name))
            assert qa.quantizedDimension == qb.quantizedDimension, a.name
        data_a = direct_model.buffers[a.buffer].data
        data_b = converted_model.buffers[b.buffer].data
        assert (data_a is None) == (data_b is None), a.name
        if data_b is not None and a.type in (schema.TensorType.INT8, schema.TensorType.INT32):
            # Rounding ties may differ by one level; a pruned unit's int32 bias sits near
            # 2^30 levels, where one float ulp of its scale is ~100 levels.
            dtype = np.int8 if a.type == schema.TensorType.INT8 else np.int32
            ref = data_b.view(dtype).astype(np.int64)
            diff = np.abs(data_a.view(dtype).astype(np.int64) - ref)
            assert np.all(diff <= np.maximum(1, 1e-6 * np.abs(ref))), a.name
            assert np.mean(diff > 0) < 1e-2, a.name
        elif data_b is not None:
            assert data_a.tobytes() == data_b.tobytes(), a.name


def _same_outputs(
    direct: ExportedModel, converted: ExportedModel, kind: str, precision: str
) -> None:
    obs = _obs(kind, N_OBS, seed=1)  # not the calibration set
    ours = TFLitePolicy(direct.tflite).batch(obs)
    theirs = TFLitePolicy(converted.tflite).batch(obs)
    if precision == "int8":
        half = None if kind == "dqn" else (TD3_HIGH - TD3_LOW) / 2
        step = _output_step(converted.tflite, half)  # [out]
        assert np.all(np.abs(ours - theirs) <= step * (1 + 1e-5)), step
        # Beyond float rounding, a level flips only where the two calibrations' ranges
        # differ by their last bit (the converter's float kernels against NumPy's).
        flipped = np.any(np.abs(ours - theirs) > 1e-3 * step, axis=1)  # [n]
        assert np.mean(flipped) < 0.02
    else:  # the same float graph holding the same constants
        np.testing.assert_array_equal(ours, theirs)
    assert direct.input_quant == converted.input_quant
    assert direct.output_quant == converted.output_quant
    assert direct.obs_mean == converted.obs_mean and direct.obs_std == converted.obs_std


def test_one_conversion_per_structure_and_precision() -> None:
    from edge_rl.export.tflite import _convert

    calls: list[str] = []

    def counting(policy, obs, precision, per_channel):
        calls.append(precision)
        return _convert(policy, obs, precision, per_channel)

    exporter = DirectExporter(counting)
    model = make_q_network(4, 2, (16, 16), seed=0)
    obs = _obs("dqn", 200, seed=0)
    for version in range(4):
        _trained(model, seed=version)
        policy = fold(model, obs.mean(axis=0), np.maximum(obs.std(axis=0), MIN_OBS_STD))
        for precision in ("int8", "fp32"):
            assert exporter.export(policy, obs, precision, True)[1] == "direct"
    assert sorted(calls) == ["fp32", "int8"]  # the two templates, nothing else
    wider = fold(make_q_network(4, 2, (16, 32), seed=0), obs.mean(axis=0), obs.std(axis=0))
    assert exporter.export(wider, obs, "int8", True)[1] == "direct"
    assert len(calls) == 3  # a new structure: a new template


def test_a_failed_self_check_falls_back_to_the_converter_and_says_why(monkeypatch, caplog) -> None:
    model = _trained(make_q_network(4, 2, (16, 16), seed=1), seed=0)
    obs = _obs("dqn", 200, seed=0)
    assert export_policy(model, obs, "int8").path == "direct"
    real_write = Template.write

    def wrong_sign(self, policy, calibration_obs):  # every kernel negated: wrong weights
        dense = tuple(
            type(layer)(layer.name, -layer.kernel, layer.bias, layer.activation)
            for layer in policy.dense
        )
        return real_write(
            self, type(policy)(policy.model_name, policy.normalise, dense, None), calibration_obs
        )

    monkeypatch.setattr(Template, "write", wrong_sign)
    with caplog.at_level(logging.INFO, logger=direct_module.__name__):
        exported = export_policy(model, obs, "int8")
    assert exported.path == "converter"
    assert "direct path failed" in caplog.text and "SelfCheckFailed" in caplog.text


def test_a_structure_without_a_template_is_converted_and_logged_once(caplog) -> None:
    model = keras.Sequential(
        [
            keras.Input((4,)),
            keras.layers.Dense(8, activation="sigmoid", name="sigmoid_hidden"),
            keras.layers.Dense(2, name="head"),
        ],
        name="sigmoid_net",
    )
    obs = _obs("dqn", 100, seed=0)
    with caplog.at_level(logging.INFO, logger=direct_module.__name__):
        paths = [export_policy(model, obs, "int8").path for _ in range(2)]
    assert paths == ["converter", "converter"]
    assert caplog.text.count("no template for sigmoid_net") == 1
    assert caplog.text.count("converter path for sigmoid_net") == 1


def test_the_paths_in_use_are_logged_once_per_structure(caplog) -> None:
    model = _trained(make_q_network(4, 2, (24, 24), seed=2), seed=0)
    obs = _obs("dqn", 200, seed=0)
    with caplog.at_level(logging.INFO, logger=direct_module.__name__):
        for _ in range(3):
            assert export_policy(model, obs, "fp16").path == "direct"
    assert caplog.text.count("direct path for q_network 4-24-24-2 fp16") == 1


def test_written_constants_start_on_16_byte_boundaries() -> None:
    from edge_rl.export.regions import weight_regions

    model = _trained(make_q_network(4, 2, (32, 32), seed=0), seed=1)
    exported = export_policy(model, _obs("dqn", 200, seed=0), "int8")
    assert exported.path == "direct"
    regions = weight_regions(exported.tflite)
    assert len(regions) == 3 and all(r.offset % 16 == 0 for r in regions), regions


@pytest.mark.parametrize(("precision", "per_channel"), PRECISIONS)
def test_versions_are_written_in_place_without_packing_a_flatbuffer(
    monkeypatch, precision: str, per_channel: bool
) -> None:
    """A version is assigned into the template's one packed buffer: no flatbuffer is built
    per version, each write returns its own bytes, and nothing of an earlier version is
    left in a later one (A, B, A again gives A's bytes)."""
    from edge_rl.export import template as template_module
    from edge_rl.export.template import generic_policy
    from edge_rl.export.tflite import _convert

    obs = _obs("dqn", 300, seed=0)
    versions = []
    for seed in (1, 2):
        model = _trained(make_q_network(4, 2, (16, 16), seed=0), seed=seed)
        versions.append(fold(model, obs.mean(axis=0), np.maximum(obs.std(axis=0), MIN_OBS_STD)))
    structure = versions[0].structure
    tflite = _convert(generic_policy(structure), obs[:64], precision, per_channel)
    template = Template.parse(tflite, structure, precision, per_channel)

    def no_builder(*args, **kwargs):
        raise AssertionError("a flatbuffer was packed for a version")

    monkeypatch.setattr(template_module.flatbuffers, "Builder", no_builder)
    a = template.write(versions[0], obs)
    b = template.write(versions[1], obs[::-1].copy() * 1.5)
    again = template.write(versions[0], obs)
    assert isinstance(a, bytes) and a == again and a != b and len(a) == len(b)
    for written, policy in ((a, versions[0]), (b, versions[1])):
        lite = TFLitePolicy(written).batch(obs[:32])
        _, _, expected = policy.activations(obs[:32])
        assert np.abs(lite - expected).max() < 0.1 * np.abs(expected).max()


def test_a_prepared_template_spares_the_first_export_its_conversion(monkeypatch) -> None:
    """``prepare_template`` converts a network's template ahead (the learner does it while
    it sets up): the first export of a snapshot of that network converts nothing."""
    from edge_rl.export import tflite as tflite_module
    from edge_rl.export.tflite import prepare_template
    from edge_rl.learner.outbound.packager import snapshot

    network = make_q_network(4, 2, (12, 20), seed=0)  # a structure no other test exports
    assert prepare_template(network, "int8", True)

    class NoConversions:
        def call(self, *args, **kwargs):
            raise AssertionError("the first export converted a model")

    monkeypatch.setattr(tflite_module, "default_worker", NoConversions)
    exported = export_policy(snapshot(_trained(network, seed=2)), _obs("dqn", 300, seed=0), "int8")
    assert exported.path == "direct"
