"""Where the FULLY_CONNECTED weight matrices lie inside a ``.tflite`` flatbuffer (host only).

The "blocks" model codec (``edge_rl.wire.blocks``) needs, for every Dense kernel, the
byte offset of its constant data in the model, its shape and dtype::

    regions = weight_regions(exported.tflite)
    payload = compress_model(exported.tflite, "blocks", regions=regions)

TFLite stores FULLY_CONNECTED weights (operator input 1) as ``[out, in]`` row-major, the
transpose of the Keras kernel. In an fp16 export the FC reads the output of a DEQUANTIZE
whose input is the float16 constant: that constant is the region. Tensors whose data are
not inside the flatbuffer (empty buffer, e.g. >2 GB models with external offset / size)
and buffers shared by several operators (counted once) are skipped.
"""

from __future__ import annotations

import numpy as np

from edge_rl.wire.blocks import DTYPES, Region

_TENSOR_TYPES = {0: "float32", 1: "float16", 9: "int8"}  # schema TensorType -> Region.dtype
_BUFFER_DATA_FIELD = 4  # vtable offset of Buffer.data (first field), as in Buffer.Data()


def weight_regions(tflite: bytes) -> list[Region]:
    """One ``Region`` per distinct constant FULLY_CONNECTED weight, sorted by offset."""
    from tensorflow.lite.python import schema_py_generated as schema_fb

    ops = schema_fb.BuiltinOperator
    model = schema_fb.Model.GetRootAs(tflite, 0)
    codes = [model.OperatorCodes(i) for i in range(model.OperatorCodesLength())]
    # BuiltinCode is an int32 added when the int8 DeprecatedBuiltinCode ran out (op >= 127);
    # old models leave it 0, new ones may leave the deprecated one at its cap: take the max.
    builtin = [max(c.BuiltinCode(), c.DeprecatedBuiltinCode()) for c in codes]
    regions: dict[int, Region] = {}  # buffer index -> region
    for g in range(model.SubgraphsLength()):
        graph = model.Subgraphs(g)
        operators = [graph.Operators(i) for i in range(graph.OperatorsLength())]
        dequantized = {  # DEQUANTIZE output tensor -> its input tensor (fp16 weights)
            int(op.Outputs(0)): int(op.Inputs(0))
            for op in operators
            if builtin[op.OpcodeIndex()] == ops.DEQUANTIZE and op.InputsLength() == 1
        }
        for op in operators:
            if builtin[op.OpcodeIndex()] != ops.FULLY_CONNECTED or op.InputsLength() < 2:
                continue
            index = int(op.Inputs(1))
            if index < 0:  # an optional input left out
                continue
            tensor = graph.Tensors(dequantized.get(index, index))
            buffer_index = tensor.Buffer()
            if tensor.Type() not in _TENSOR_TYPES or buffer_index in regions:
                continue
            region = _region(tflite, tensor, model.Buffers(buffer_index))
            if region is not None:
                regions[buffer_index] = region
    return sorted(regions.values(), key=lambda r: r.offset)


def _region(tflite: bytes, tensor, buffer) -> Region | None:  # schema_fb.Tensor, .Buffer
    """The region of ``tensor``'s data, or None when its buffer holds no matrix."""
    shape = tensor.ShapeAsNumpy()
    if buffer is None or buffer.DataLength() == 0 or not isinstance(shape, np.ndarray):
        return None
    if len(shape) != 2:
        return None
    dtype = _TENSOR_TYPES[tensor.Type()]
    rows, cols = int(shape[0]), int(shape[1])  # [out, in]
    if rows * cols * DTYPES[dtype].itemsize != buffer.DataLength():
        return None
    # Table.Vector: the absolute position of the vector's first byte, past its length.
    offset = buffer._tab.Vector(buffer._tab.Offset(_BUFFER_DATA_FIELD))
    region = Region(offset, rows, cols, dtype)
    # Guards the offset arithmetic against a schema change: the bytes must be the data.
    assert tflite[offset : offset + region.nbytes] == buffer.DataAsNumpy().tobytes()
    return region
