"""Build single-op .tflite models from the LiteRT flatbuffer schema, and run them in LiteRT.

Test-only helper (it needs ai-edge-litert, a test dependency).  A model is described with the same
vocabulary quantspec's kernels use: tensors as :class:`T` (shape, type name, scale, zero point,
quantized dimension, constant data) and options as a snake_case mapping with enum values as schema
names (see ``quantspec.litert.kernels.base``).  So a test can hand the very same description to
quantspec's kernel and to LiteRT's ``BUILTIN_REF`` interpreter and compare bytes.

    m = build(op="ADD", inputs=[T((1, 4), "int8", 0.5, 3), T((1, 4), "int8", 0.25, -1)],
              outputs=[T((1, 4), "int8", 0.7, 0)], options={"fused_activation_function": "RELU"})
    (y,) = run_ref(m, [x0, x1])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from refs import require

# op name -> (schema options table name, union member name); ops without options are absent
OPTIONS_TABLE = {
    "ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "FULLY_CONNECTED": "FullyConnectedOptions", "CONCATENATION": "ConcatenationOptions",
    "L2_NORMALIZATION": "L2NormOptions", "RESHAPE": "ReshapeOptions",
    "RESIZE_BILINEAR": "ResizeBilinearOptions", "SOFTMAX": "SoftmaxOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions", "PAD": "PadOptions", "PADV2": "PadV2Options",
    "GATHER": "GatherOptions", "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions",
    "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions", "TRANSPOSE": "TransposeOptions",
    "MEAN": "ReducerOptions", "SUM": "ReducerOptions", "REDUCE_PROD": "ReducerOptions",
    "REDUCE_MAX": "ReducerOptions", "REDUCE_MIN": "ReducerOptions", "DIV": "DivOptions", "SQUEEZE": "SqueezeOptions",
    "LOG_SOFTMAX": "LogSoftmaxOptions", "MAXIMUM": "MaximumMinimumOptions",
    "MINIMUM": "MaximumMinimumOptions", "ARG_MAX": "ArgMaxOptions", "LESS": "LessOptions",
    "GREATER": "GreaterOptions", "GREATER_EQUAL": "GreaterEqualOptions",
    "LESS_EQUAL": "LessEqualOptions", "EQUAL": "EqualOptions", "NOT_EQUAL": "NotEqualOptions",
    "SLICE": "SliceOptions", "SHAPE": "ShapeOptions", "TANH": None, "LOGISTIC": None,
    "QUANTIZE": None, "DEQUANTIZE": None,
    "HARD_SWISH": None, "RSQRT": None, "RELU": None, "RELU6": None, "RELU_N1_TO_1": None, "RELU_0_TO_1": None,
    "PRELU": None, "GELU": "GeluOptions", "LEAKY_RELU": "LeakyReluOptions", "BATCH_MATMUL": "BatchMatMulOptions",
    "SQUARED_DIFFERENCE": "SquaredDifferenceOptions", "STRIDED_SLICE": "StridedSliceOptions",
    "SPLIT": "SplitOptions", "SPLIT_V": "SplitVOptions", "PACK": "PackOptions", "UNPACK": "UnpackOptions",
    "TRANSPOSE_CONV": "TransposeConvOptions", "IF": "IfOptions", "WHILE": "WhileOptions",
    "CALL_ONCE": "CallOnceOptions", "VAR_HANDLE": "VarHandleOptions", "READ_VARIABLE": "ReadVariableOptions",
    "ASSIGN_VARIABLE": "AssignVariableOptions",
}

# option field (snake_case) -> schema enum class name, for string values
ENUM_FIELDS = {
    "padding": "Padding",
    "fused_activation_function": "ActivationFunctionType",
    "output_type": "TensorType",
    "out_type": "TensorType",
    "quantized_bias_type": "TensorType",
    "weights_format": "FullyConnectedOptionsWeightsFormat",
}


@dataclass
class T:
    """A tensor of a test model."""

    shape: Sequence[int]
    dtype: str = "int8"                     # quantspec type name: int8, int32, float, bool, int64...
    scale: Any = None                       # scalar or list; None = not quantized
    zero_point: Any = 0
    quantized_dimension: int = 0
    data: np.ndarray | None = None          # constant data (weights, bias, shape, axes...)
    name: str = ""


def _schema():
    return require("ai_edge_litert.schema_py_generated")


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def make_options(op: str, options: Mapping[str, Any] | None):
    """(union type number, options object) for ``op`` from a snake_case mapping."""
    S = _schema()
    table = OPTIONS_TABLE.get(op)
    if table is None:
        if options:
            raise ValueError(f"{op} takes no options, got {dict(options)}")
        return 0, None
    obj = getattr(S, table + "T")()
    for key, value in (options or {}).items():
        attr = _camel(key)
        if not hasattr(obj, attr):
            raise ValueError(f"{table} has no field {key!r} ({attr})")
        if isinstance(value, str) and key in ENUM_FIELDS:
            value = getattr(getattr(S, ENUM_FIELDS[key]), value)
        elif isinstance(value, (list, tuple, np.ndarray)):
            value = [int(v) for v in value]
        setattr(obj, attr, value)
    return getattr(S.BuiltinOptions, table), obj


def build(op: str, inputs: Sequence[T | None], outputs: Sequence[T], options: Mapping[str, Any] | None = None,
          version: int = 1) -> bytes:
    """A one-operator model: non-constant inputs become model inputs, in order."""
    tensors = [t for t in inputs if t is not None] + list(outputs)
    k, op_inputs = 0, []
    for t in inputs:
        op_inputs.append(-1 if t is None else k)
        k += t is not None
    op_outputs = list(range(k, k + len(outputs)))
    graph_inputs = [i for i in op_inputs if i >= 0 and tensors[i].data is None]
    names = {i: f"input{n}" for n, i in enumerate(op_inputs) if i >= 0}
    names.update({i: f"output{n}" for n, i in enumerate(op_outputs)})
    return build_graph(tensors, [(op, op_inputs, op_outputs, options)], graph_inputs, op_outputs,
                       names=names, version=version)


def build_graph(tensors: Sequence[T], operators: Sequence[tuple], inputs: Sequence[int], outputs: Sequence[int],
                names: Mapping[int, str] | None = None, version: int = 1) -> bytes:
    """A model of several operators: ``operators`` lists ``(op name, input tensor indices, output
    tensor indices, options)`` in execution order (-1: an absent optional input); ``inputs`` and
    ``outputs`` are the model's tensor indices."""
    flatbuffers = require("flatbuffers")
    S = _schema()
    from quantspec.dtypes import qtype

    model = S.ModelT()
    model.version = 3
    model.buffers = [S.BufferT()]                      # buffer 0: the empty sentinel
    codes: dict[str, int] = {}
    model.operatorCodes = []
    for op, *_ in operators:
        if op not in codes:
            code = S.OperatorCodeT()
            number = getattr(S.BuiltinOperator, op)
            code.builtinCode = number
            code.deprecatedBuiltinCode = min(number, 127)
            code.version = version
            codes[op] = len(model.operatorCodes)
            model.operatorCodes.append(code)

    built = []
    for index, t in enumerate(tensors):
        qt = qtype(t.dtype)
        tt = S.TensorT()
        tt.shape = [int(s) for s in t.shape]
        tt.type = qt.tflite
        tt.name = (t.name or (names or {}).get(index) or f"t{index}").encode()
        if t.scale is not None:
            q = S.QuantizationParametersT()
            q.scale = [float(s) for s in np.atleast_1d(np.asarray(t.scale, np.float32))]
            q.zeroPoint = [int(z) for z in np.atleast_1d(np.asarray(t.zero_point))]
            if len(q.zeroPoint) == 1 and len(q.scale) > 1:
                q.zeroPoint = q.zeroPoint * len(q.scale)
            q.quantizedDimension = int(t.quantized_dimension)
            tt.quantization = q
        if t.data is not None:
            b = S.BufferT()
            if qt.is_packed:  # int4 / int2 constants: packed, element 0 in the low bits (as LiteRT unpacks them)
                from quantspec.onnx import pack

                raw = pack(np.asarray(np.asarray(t.data).astype(np.int64).astype(qt.storage), qt.dtype))
            else:
                raw = np.ascontiguousarray(np.asarray(t.data, qt.dtype)).tobytes()
            b.data = np.frombuffer(raw, np.uint8)
            model.buffers.append(b)
            tt.buffer = len(model.buffers) - 1
        else:
            tt.buffer = 0
        built.append(tt)

    ops = []
    for op, op_inputs, op_outputs, options in operators:
        operator = S.OperatorT()
        operator.opcodeIndex = codes[op]
        operator.inputs = list(op_inputs)
        operator.outputs = list(op_outputs)
        operator.builtinOptionsType, operator.builtinOptions = make_options(op, options)
        ops.append(operator)

    sg = S.SubGraphT()
    sg.tensors = built
    sg.inputs = list(inputs)
    sg.outputs = list(outputs)
    sg.operators = ops
    sg.name = b"main"
    model.subgraphs = [sg]
    model.description = b"quantspec test model"

    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def run_ref(model: bytes, inputs: Sequence[np.ndarray], resolver: str = "BUILTIN_REF") -> list[np.ndarray]:
    """Run ``model`` in the LiteRT interpreter (reference kernels by default); return the outputs.
    Inputs keep their shape, 0-d included (``np.require``, not ``np.ascontiguousarray``, which makes
    a 0-d array 1-D and the interpreter refuse it for a scalar input)."""
    interp_mod = require("ai_edge_litert.interpreter")
    it = interp_mod.Interpreter(model_content=model,
                                experimental_op_resolver_type=getattr(interp_mod.OpResolverType, resolver))
    details = it.get_input_details()
    for d, x in zip(details, inputs):
        if tuple(d["shape"]) != tuple(np.shape(x)):
            it.resize_tensor_input(d["index"], list(np.shape(x)))
    it.allocate_tensors()
    for d, x in zip(details, inputs):
        it.set_tensor(d["index"], np.require(x, requirements="C"))
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
