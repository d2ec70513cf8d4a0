"""A converted ``.tflite`` as a template: new weights written into its flatbuffer.

The graph of an exported policy (``edge_rl.export.tflite``) depends only on its
``Structure``; what changes from one version to the next are the constants (the
normalisation, the Dense weights and biases, TD3's rescale) and, in int8, the quantisation
parameters. ``Template.parse`` reads a converter output once with the TFLite schema's
object API (``ModelT``) and finds, by walking the chain of operators, where each of those
lives::

    MUL, ADD, MAXIMUM, MINIMUM          the normalisation (float constants)
    [QUANTIZE]                          int8: its output's scale is z's calibrated range
    FULLY_CONNECTED [TANH] per layer    weights [out, in], bias; int8: output range
    [DEQUANTIZE]
    [MUL, ADD, MAXIMUM, MINIMUM]        TD3's rescale and clip to the bounds (float)

fp16 constants are each read through a DEQUANTIZE of their own. ``Template.write``
fills in a ``FoldedPolicy``'s values, in each constant's own type: float32, float16, or the
converter's int8 scheme (``edge_rl.export.quantise``) with activation ranges measured on
the calibration observations. Anything the walk does not recognise raises
``TemplateError``: such a structure is exported by the converter alone.

Every value a version changes has a fixed size (the structure fixes the shapes, the
precision and scale layout fix the quantisation vectors), so the flatbuffer is packed once,
by ``parse``, and a version is written into that one buffer in place: ``parse`` finds each
constant's data and each quantisation's scale and zero-point vectors with the schema's
reader (``Model.GetRootAs``), whose ``...AsNumpy`` accessors are NumPy views into the
packed bytes, and ``write`` assigns to those views and returns a copy of the bytes. No
flatbuffer is packed per version (packing in Python was ~40 % of an export).

The template must come from a conversion of *generic* values (``generic_policy``): the
converter drops a bias that is all zeros and may share equal constants, so a template
converted from, say, freshly initialised weights would lack the tensors a later version
needs. Constant buffers are written 16-byte aligned, as the converter writes them.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass

import flatbuffers
import numpy as np
from tensorflow.lite.python import schema_py_generated as schema

from edge_rl.export import quantise
from edge_rl.export.folded import AffineParams, DenseParams, FoldedPolicy, Structure

_ALIGN = 16  # the converter's alignment of constant data
_IDENTIFIER = b"TFL3"
_OPS = schema.BuiltinOperator
_TYPES = schema.TensorType
_FUSED = {"relu": schema.ActivationFunctionType.RELU, "linear": schema.ActivationFunctionType.NONE}
_AFFINE_OPS = (
    (_OPS.MUL, "scale"),
    (_OPS.ADD, "offset"),
    (_OPS.MAXIMUM, "low"),
    (_OPS.MINIMUM, "high"),
)
_FLOAT_TYPES = {_TYPES.FLOAT32: np.float32, _TYPES.FLOAT16: np.float16}


class TemplateError(ValueError):
    """The converter's output is not a graph this module knows how to refill."""


@dataclass(frozen=True)
class ConstSlot:
    """A constant tensor and the value it holds: ``(part, field)`` of the policy, part
    ``"normalise"``, ``"rescale"`` or the Dense layer's index, field ``"kernel"``, ``"bias"``,
    ``"scale"``, ``"offset"``, ``"low"`` or ``"high"``."""

    tensor: int
    part: str | int
    field: str


@dataclass(frozen=True)
class RangeSlot:
    """An int8 activation whose quantisation follows its calibrated range: the normalised
    input ``z`` (layer -1) or the output of Dense layer ``layer`` (ReLU applied if fused)."""

    tensor: int
    layer: int
    relu: bool


@dataclass(frozen=True)
class FCSlot:
    """A FULLY_CONNECTED layer's input, weights and bias tensors (for the int8 scales)."""

    layer: int
    input: int
    weights: int
    bias: int


class _AlignedBufferT(schema.BufferT):
    """A ``BufferT`` whose data starts on a 16-byte boundary of the packed model."""

    def Pack(self, builder: flatbuffers.Builder) -> int:  # noqa: N802 - the schema's name
        if isinstance(self.data, np.ndarray) and self.data.size:
            builder.Prep(_ALIGN, self.data.nbytes)  # the vector's data ends up aligned
        return super().Pack(builder)


class Template:
    """One structure's converted model, ready to take new values (see module doc)."""

    def __init__(
        self,
        model: schema.ModelT,
        structure: Structure,
        precision: str,
        consts: list[ConstSlot],
        ranges: list[RangeSlot],
        layers: list[FCSlot],
        per_channel: bool,
        size: int,
    ) -> None:
        self.structure = structure
        self.precision = precision
        self._model = model
        self._consts = consts
        self._ranges = ranges
        self._layers = layers
        self._check_slots(per_channel)
        self._lock = threading.Lock()  # one write at a time: they share self._bytes
        quantised = _quant_slots(consts, layers, ranges, model)
        self._bytes = _pack(model, quantised, size)
        self._views = _Views.find(self._bytes, consts, quantised)

    @classmethod
    def parse(
        cls, tflite: bytes, structure: Structure, precision: str, per_channel: bool
    ) -> Template:
        """Find the slots of a converter output of ``structure``, or ``TemplateError``."""
        model = schema.ModelT.InitFromPackedBuf(bytearray(tflite), 0)
        if model.subgraphs is None or len(model.subgraphs) != 1:
            raise TemplateError("expected exactly one subgraph")
        walk = _Walk(model, precision)
        walk.run(structure)
        template = cls(
            model,
            structure,
            precision,
            walk.consts,
            walk.ranges,
            walk.layers,
            per_channel,
            len(tflite),
        )
        return template

    def write(self, policy: FoldedPolicy, calibration_obs: np.ndarray) -> bytes:
        """A new ``.tflite`` of this structure holding ``policy``'s values; int8
        activation ranges from ``calibration_obs [n, obs_dim]``."""
        if policy.structure != self.structure:
            raise TemplateError("the policy's structure is not the template's")
        graph = self._model.subgraphs[0]
        with self._lock:
            scales: dict[int, float] = {}  # int8 activation tensor -> its new scale
            if self.precision == "int8":
                scales = self._write_ranges(policy, calibration_obs)
            weight_quant = self._fc_quant(graph, policy, scales)
            for slot in self._consts:
                if slot.tensor in weight_quant:
                    scale, data = weight_quant[slot.tensor]
                    _assign(self._views.scales[slot.tensor], scale, slot)
                else:
                    data = _value(policy, slot).astype(
                        _FLOAT_TYPES[graph.tensors[slot.tensor].type]
                    )
                _assign(
                    self._views.data[slot.tensor], np.ascontiguousarray(data).view(np.uint8), slot
                )
            return bytes(self._bytes)

    def _write_ranges(self, policy: FoldedPolicy, obs: np.ndarray) -> dict[int, float]:
        """The int8 activations' scale and zero point from the float network's ranges on
        the calibration observations (the converter's calibrator: min and max)."""
        z, pre, _ = policy.activations(obs)
        scales = {}
        for slot in self._ranges:
            x = z if slot.layer < 0 else pre[slot.layer]
            low, high = float(x.min()), float(x.max())
            if slot.relu:
                low, high = max(low, 0.0), max(high, 0.0)
            scale, zero_point = quantise.activation_params(low, high)
            self._views.scales[slot.tensor][0] = scale
            self._views.zero_points[slot.tensor][0] = zero_point
            scales[slot.tensor] = scale
        return scales

    def _fc_quant(
        self, graph: schema.SubGraphT, policy: FoldedPolicy, scales: dict[int, float]
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Per int8 weights / int32 bias tensor: its scales and data (zero points are 0)."""
        out: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        for slot in self._layers:
            if graph.tensors[slot.weights].type != _TYPES.INT8:
                continue
            layer = policy.dense[slot.layer]
            per_channel = len(graph.tensors[slot.weights].quantization.scale) > 1
            input_scale = scales.get(slot.input)
            if input_scale is None:  # a fixed-range input (a TANH output)
                input_scale = float(graph.tensors[slot.input].quantization.scale[0])
            weights = layer.kernel.T  # [out, in]
            w_scale, b_scale = quantise.fc_scales(weights, layer.bias, input_scale, per_channel)
            qw = quantise.quantise(weights, w_scale[:, None], 0, np.int8)
            qb = quantise.quantise(layer.bias, b_scale, 0, np.int32)
            out[slot.weights] = (w_scale.astype(np.float32), qw)
            out[slot.bias] = (b_scale.astype(np.float32), qb)
        return out

    def _check_slots(self, per_channel: bool) -> None:
        """Every constant slot owns its buffer, has the value's shape, and int8 weights have
        the scale layout asked for."""
        graph = self._model.subgraphs[0]
        owners: dict[int, int] = {}
        for tensor in graph.tensors:
            owners[tensor.buffer] = owners.get(tensor.buffer, 0) + 1
        for slot in self._consts:
            tensor = graph.tensors[slot.tensor]
            if owners[tensor.buffer] != 1:
                raise TemplateError(f"tensor {tensor.name!r} shares its buffer")
            if tensor.type not in (*_FLOAT_TYPES, _TYPES.INT8, _TYPES.INT32):
                raise TemplateError(f"tensor {tensor.name!r} has type {tensor.type}")
        for slot in self._layers:
            weights = graph.tensors[slot.weights]
            if weights.type == _TYPES.INT8:
                scales = weights.quantization.scale
                expected = int(weights.shape[0]) if per_channel else 1
                if scales is None or len(scales) != expected:
                    raise TemplateError(f"{weights.name!r}: not {expected} weight scales")


class _Walk:
    """The operator chain of a template, from the graph input to its output."""

    def __init__(self, model: schema.ModelT, precision: str) -> None:
        codes = model.operatorCodes or []
        self.model = model
        self.graph = model.subgraphs[0]
        self.precision = precision
        self.ops = [
            (
                max(codes[op.opcodeIndex].builtinCode, codes[op.opcodeIndex].deprecatedBuiltinCode),
                op,
            )
            for op in self.graph.operators
        ]
        # fp16: each constant is float16 data behind a DEQUANTIZE of its own.
        self.dequantized = {
            int(op.outputs[0]): int(op.inputs[0])
            for code, op in self.ops
            if code == _OPS.DEQUANTIZE and self._has_data(int(op.inputs[0]))
        }
        self.ops = [(c, op) for c, op in self.ops if int(op.outputs[0]) not in self.dequantized]
        self.position = 0
        self.tensor = -1  # the chain's current tensor
        self.consts: list[ConstSlot] = []
        self.ranges: list[RangeSlot] = []
        self.layers: list[FCSlot] = []

    def run(self, structure: Structure) -> None:
        inputs, outputs = list(self.graph.inputs), list(self.graph.outputs)
        if len(inputs) != 1 or len(outputs) != 1:
            raise TemplateError(f"expected one input and one output, got {inputs}, {outputs}")
        self.tensor = int(inputs[0])
        self._affine("normalise")
        int8 = self.precision == "int8"
        if int8:
            self._next(_OPS.QUANTIZE)
            self.ranges.append(RangeSlot(self.tensor, -1, relu=False))
        for i, (_, _, activation) in enumerate(structure.layers):
            self._dense(i, activation, int8)
        if int8:
            self._next(_OPS.DEQUANTIZE)
        if structure.rescale is not None:
            self._affine("rescale")
        if self.position != len(self.ops) or self.tensor != int(outputs[0]):
            raise TemplateError("the operators go on past the policy's last layer")

    def _affine(self, part: str) -> None:
        for code, field in _AFFINE_OPS:
            op = self._next(code)
            self.consts.append(ConstSlot(self._const(op, 1), part, field))

    def _dense(self, i: int, activation: str, int8: bool) -> None:
        op = self._next(_OPS.FULLY_CONNECTED)
        inputs = [int(t) for t in op.inputs]
        if len(inputs) != 3 or inputs[2] < 0:
            raise TemplateError(f"layer {i}: FULLY_CONNECTED without a bias")
        fused = op.builtinOptions.fusedActivationFunction
        expected = _FUSED.get(activation, schema.ActivationFunctionType.NONE)
        if fused != expected:
            raise TemplateError(f"layer {i} ({activation}): fused activation {fused}")
        weights, bias = self._const(op, 1), self._const(op, 2)
        self.consts += [ConstSlot(weights, i, "kernel"), ConstSlot(bias, i, "bias")]
        self.layers.append(FCSlot(i, inputs[0], weights, bias))
        if int8:
            self.ranges.append(RangeSlot(self.tensor, i, relu=activation == "relu"))
        if activation == "tanh":
            self._next(_OPS.TANH)  # int8: a fixed output range (1/128), kept as converted
        elif activation not in _FUSED:
            raise TemplateError(f"layer {i}: no template for activation {activation!r}")

    def _next(self, code: int) -> schema.OperatorT:
        """The next operator, which must be ``code`` and read the chain's tensor."""
        if self.position >= len(self.ops):
            raise TemplateError(f"the graph ends where operator {code} was expected")
        found, op = self.ops[self.position]
        if found != code or int(op.inputs[0]) != self.tensor or len(op.outputs) != 1:
            raise TemplateError(f"operator {self.position}: {found}, expected {code}")
        self.position += 1
        self.tensor = int(op.outputs[0])
        return op

    def _const(self, op: schema.OperatorT, i: int) -> int:
        tensor = int(op.inputs[i])
        tensor = self.dequantized.get(tensor, tensor)
        if not self._has_data(tensor):
            raise TemplateError(f"operator input {i} ({tensor}) is not a constant")
        return tensor

    def _has_data(self, tensor: int) -> bool:
        data = self.model.buffers[self.graph.tensors[tensor].buffer].data
        return data is not None and len(data) > 0


def _value(policy: FoldedPolicy, slot: ConstSlot) -> np.ndarray:
    """The float value of a slot, in the layout of its tensor (FC weights are [out, in])."""
    if isinstance(slot.part, int):
        layer: DenseParams = policy.dense[slot.part]
        return layer.kernel.T if slot.field == "kernel" else layer.bias
    affine: AffineParams | None = getattr(policy, slot.part)
    if affine is None:
        raise TemplateError(f"the policy has no {slot.part}")
    return np.asarray(getattr(affine, slot.field), np.float32)


def _quant(
    scale: np.ndarray, zero_point: np.ndarray, dimension: int
) -> schema.QuantizationParametersT:
    q = schema.QuantizationParametersT()
    q.scale = scale
    q.zeroPoint = zero_point
    q.quantizedDimension = dimension
    return q


def _with_quant(tensor: schema.TensorT, q: schema.QuantizationParametersT) -> schema.TensorT:
    tensor = copy.copy(tensor)
    tensor.quantization = q
    return tensor


def _quant_slots(
    consts: list[ConstSlot], layers: list[FCSlot], ranges: list[RangeSlot], model: schema.ModelT
) -> set[int]:
    """The tensors whose quantisation ``write`` refills: int8 activations, weights, biases."""
    tensors = model.subgraphs[0].tensors
    int8 = {s.tensor for s in consts if tensors[s.tensor].type in (_TYPES.INT8, _TYPES.INT32)}
    fc = {t for layer in layers for t in (layer.weights, layer.bias) if t in int8}
    return fc | {r.tensor for r in ranges}


def _pack(model: schema.ModelT, quantised: set[int], size: int) -> bytearray:
    """The template packed once: constant data 16-byte aligned, and each tensor in
    ``quantised`` with a quantisation of scales and zero points alone, on dimension 0 (the
    vectors ``write`` refills; the converter's min / max, if any, no longer hold)."""
    graph = copy.copy(model.subgraphs[0])
    graph.tensors = list(graph.tensors)
    for t in sorted(quantised):
        tensor = graph.tensors[t]
        q = tensor.quantization
        if q is None or q.scale is None or len(q.scale) == 0:
            raise TemplateError(f"tensor {tensor.name!r} has no quantisation to refill")
        n = len(q.scale)
        zero = np.zeros(n, np.int64) if q.zeroPoint is None else np.asarray(q.zeroPoint, np.int64)
        if len(zero) != n:
            raise TemplateError(f"tensor {tensor.name!r}: {n} scales, {len(zero)} zero points")
        graph.tensors[t] = _with_quant(tensor, _quant(np.asarray(q.scale, np.float32), zero, 0))
    packed = copy.copy(model)
    packed.subgraphs = [graph]
    packed.buffers = [_aligned(b) for b in model.buffers]
    builder = flatbuffers.Builder(size + 4096)
    builder.Finish(packed.Pack(builder), file_identifier=_IDENTIFIER)
    return bytearray(builder.Output())


@dataclass(frozen=True)
class _Views:
    """NumPy views into a packed template, by tensor index: what ``write`` assigns to."""

    data: dict[int, np.ndarray]  # constant tensor -> its buffer's bytes (uint8)
    scales: dict[int, np.ndarray]  # quantised tensor -> its scales (float32)
    zero_points: dict[int, np.ndarray]  # quantised tensor -> its zero points (int64)

    @classmethod
    def find(cls, packed: bytearray, consts: list[ConstSlot], quantised: set[int]) -> _Views:
        """The views, read with the schema's reader; ``TemplateError`` if any is missing,
        read-only, or overlaps another (each slot must own its bytes)."""
        model = schema.Model.GetRootAs(packed, 0)
        graph = model.Subgraphs(0)
        data = {
            s.tensor: model.Buffers(graph.Tensors(s.tensor).Buffer()).DataAsNumpy() for s in consts
        }
        scales, zero_points = {}, {}
        for t in quantised:
            q = graph.Tensors(t).Quantization()
            scales[t], zero_points[t] = q.ScaleAsNumpy(), q.ZeroPointAsNumpy()
        views = [*data.values(), *scales.values(), *zero_points.values()]
        if not all(isinstance(v, np.ndarray) and v.size and v.flags.writeable for v in views):
            raise TemplateError("a constant or quantisation vector is empty in the packed model")
        for i, a in enumerate(views):
            if any(np.shares_memory(a, b) for b in views[i + 1 :]):
                raise TemplateError("two refilled vectors share bytes in the packed model")
        return cls(data, scales, zero_points)


def _assign(view: np.ndarray, values: np.ndarray, slot: ConstSlot) -> None:
    """``values`` into ``view``, which must hold exactly as many."""
    values = np.ascontiguousarray(values).reshape(-1)
    if values.size != view.size:
        raise TemplateError(f"{slot}: {values.size} values for a slot of {view.size}")
    view[:] = values


def _aligned(buffer: schema.BufferT) -> _AlignedBufferT:
    aligned = _AlignedBufferT()
    aligned.data = buffer.data
    aligned.offset = buffer.offset
    aligned.size = buffer.size
    return aligned


def generic_policy(structure: Structure, seed: int = 0) -> FoldedPolicy:
    """Values of ``structure`` that no converter simplification can touch: every weight
    and bias non-zero and distinct, no scale of 1, no offset of 0."""
    rng = np.random.default_rng(seed)

    def draw(*shape: int, low: float = 0.5, high: float = 1.5) -> np.ndarray:
        sign = rng.choice([-1.0, 1.0], size=shape)
        return (sign * rng.uniform(low, high, size=shape)).astype(np.float32)

    obs_dim = structure.obs_dim
    z = np.float32(structure.z_clip)
    normalise = AffineParams("normalise", abs(draw(obs_dim)), draw(obs_dim), -z, z)
    dense, width = [], obs_dim
    for name, units, activation in structure.layers:
        kernel = draw(width, units) / np.float32(np.sqrt(width))
        dense.append(DenseParams(name, kernel, draw(units, low=0.01, high=0.1), activation))
        width = units
    rescale = None
    if structure.rescale is not None:
        name, act_dim = structure.rescale
        half, mid = abs(draw(act_dim, low=1.5, high=2.5)), draw(act_dim)
        rescale = AffineParams(name, half, mid, mid - half, mid + half)
    return FoldedPolicy(structure.model_name, normalise, tuple(dense), rescale)
