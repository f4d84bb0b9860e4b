"""quantspec.litert.load_model against what ai-edge-litert itself reads from the same bytes: the
flatbuffer object API (``schema_py_generated.ModelT``) and the LiteRT interpreter's
``get_tensor_details()``.  Converter-made models (the shipped examples) and builder-made single-op
models with non-default options; buffers stored outside the flatbuffer; the ways a model can be
malformed."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T, build
from litert_models import (EXAMPLES, edit, example_bytes, externalize_buffers, litert_refuses, schema, to_object,
                           unterminated_string)
from quantspec.cli import main
from quantspec.errors import ModelError
from quantspec.litert import load_model
from refs import require


def camel(snake: str) -> str:
    head, *rest = snake.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def enum_name(enum_cls, value):
    for k, v in vars(enum_cls).items():
        if not k.startswith("_") and v == value:
            return k
    return value


def buffer_bytes(obj, model_bytes: bytes, k: int) -> bytes | None:
    buf = obj.buffers[k]
    if buf.data is not None and len(buf.data):
        return bytes(np.asarray(buf.data, np.uint8))
    if buf.offset > 1:
        return model_bytes[buf.offset:buf.offset + buf.size]
    return None


def assert_matches_schema(model_bytes: bytes) -> None:
    """Every field quantspec reads equals what the generated flatbuffer code reads."""
    S = schema()
    fu = require("ai_edge_litert.tools.flatbuffer_utils")
    obj = to_object(model_bytes)
    m = load_model(model_bytes)
    assert m.version == obj.version
    assert m.description == (obj.description.decode() if obj.description else "")
    assert len(m.subgraphs) == len(obj.subgraphs)
    for sg, sgo in zip(m.subgraphs, obj.subgraphs):
        assert sg.name == (sgo.name.decode() if sgo.name else "")
        assert list(sg.inputs) == list(sgo.inputs) and list(sg.outputs) == list(sgo.outputs)
        assert len(sg.tensors) == len(sgo.tensors)
        for t, to in zip(sg.tensors, sgo.tensors):
            assert t.name == to.name.decode()
            assert list(t.shape) == list(to.shape if to.shape is not None else [])
            assert t.type_name == enum_name(S.TensorType, to.type)
            assert t.dtype is None or t.dtype.tflite == to.type
            assert t.buffer == to.buffer and t.is_variable == bool(to.isVariable)
            if to.shapeSignature is None:
                assert t.shape_signature is None
            else:
                assert list(t.shape_signature) == list(to.shapeSignature)
            q = to.quantization
            if q is None:
                assert t.quantization is None and t.params is None
            else:
                assert t.quantization.scale.tolist() == list(np.asarray(q.scale if q.scale is not None else [], np.float32))
                assert t.quantization.zero_point.tolist() == list(q.zeroPoint if q.zeroPoint is not None else [])
                assert t.quantization.quantized_dimension == q.quantizedDimension
                if q.scale is not None and len(q.scale):
                    assert t.params is not None
                    assert t.params.scale.tobytes() == np.asarray(q.scale, np.float32).tobytes()
                    assert t.params.zero_point.tolist() == list(q.zeroPoint)
                    assert t.params.quantized_dimension == q.quantizedDimension
                else:
                    assert t.params is None
            raw = buffer_bytes(obj, model_bytes, to.buffer) if to.buffer else None
            if raw is None:
                assert t.data is None
            else:
                assert t.data is not None and not t.data.flags.writeable
                assert t.data.shape == tuple(to.shape) and t.data.dtype == t.dtype.dtype
                assert t.data.tobytes() == raw
        assert len(sg.operators) == len(sgo.operators)
        for op, opo in zip(sg.operators, sgo.operators):
            assert op.name == fu.opcode_to_name(obj, opo.opcodeIndex)
            code = obj.operatorCodes[opo.opcodeIndex]
            assert op.builtin_code == code.builtinCode and op.deprecated_builtin_code == code.deprecatedBuiltinCode
            assert op.version == code.version and op.opcode_index == opo.opcodeIndex
            assert list(op.inputs) == list(opo.inputs) and list(op.outputs) == list(opo.outputs)
            if opo.builtinOptionsType:
                assert op.options_type == enum_name(S.BuiltinOptions, opo.builtinOptionsType)
                o = opo.builtinOptions
                scalars = {k: v for k, v in vars(o).items() if not isinstance(v, (list, np.ndarray)) and v is not None}
                assert {camel(k) for k in op.options} >= set(scalars)
                for key, value in op.options.items():
                    expected = getattr(o, camel(key))
                    if isinstance(value, str):
                        assert value == enum_name(_enum_of(S, key, o), expected), key
                    elif isinstance(value, tuple):
                        assert list(value) == list(expected), key
                    else:
                        assert value == expected and type(value) is type(expected), key
            else:
                assert op.options_type is None
    sigs = obj.signatureDefs or []
    assert len(m.signature_defs) == len(sigs)
    for sd, sdo in zip(m.signature_defs, sigs):
        assert sd.key == sdo.signatureKey.decode() and sd.subgraph_index == sdo.subgraphIndex
        assert dict(sd.inputs) == {tm.name.decode(): tm.tensorIndex for tm in sdo.inputs}
        assert dict(sd.outputs) == {tm.name.decode(): tm.tensorIndex for tm in sdo.outputs}


def _enum_of(S, key, options_obj):
    from quantspec.litert import _schema

    table = type(options_obj).__name__[:-1]
    (enum,) = [f[4] for f in _schema.TABLES[table] if f[0] == key]
    return getattr(S, enum)


def assert_matches_interpreter(model_bytes: bytes) -> None:
    """Every tensor's name, shape, type and quantization equal what the LiteRT interpreter reports."""
    ip = require("ai_edge_litert.interpreter")
    it = ip.Interpreter(model_content=model_bytes, experimental_op_resolver_type=ip.OpResolverType.BUILTIN_REF)
    m = load_model(model_bytes)
    details = it.get_tensor_details()
    assert details
    input_indices = {d["index"] for d in it.get_input_details()}
    for d in details:
        t = m.tensors[d["index"]]
        assert t.name == d["name"]
        assert list(t.shape) == d["shape"].tolist()
        if t.shape_signature is not None:
            assert list(t.shape_signature) == d["shape_signature"].tolist()
        assert t.dtype.dtype == np.dtype(d["dtype"])
        qp = d["quantization_parameters"]
        if t.params is None:
            assert qp["scales"].size == 0
        else:
            assert t.params.scale.tobytes() == qp["scales"].astype(np.float32).tobytes()
            assert t.params.zero_point.tolist() == qp["zero_points"].tolist()
            assert t.params.quantized_dimension == qp["quantized_dimension"]
        if t.data is not None and d["index"] not in input_indices:  # constants hold their data
            assert it.get_tensor(d["index"]).tobytes() == t.data.tobytes()
    assert list(m.inputs) == [d["index"] for d in it.get_input_details()]
    assert list(m.outputs) == [d["index"] for d in it.get_output_details()]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_models_match_schema_and_interpreter(name):
    data = example_bytes(name)
    assert_matches_schema(data)
    assert_matches_interpreter(data)
    assert load_model(EXAMPLES[name]).size == len(data)  # from a path, too


# single-op models with non-default options: (op, inputs, outputs, options)
rng = np.random.default_rng(5)
_W = rng.integers(-127, 128, (4, 3, 3, 2), dtype=np.int8)
SINGLE_OPS = [
    ("CONV_2D", [T((1, 7, 7, 2), "int8", 0.5, 3), T((4, 3, 3, 2), "int8", [0.1, 0.2, 0.3, 0.4], 0, 0, _W),
                 T((4,), "int32", [0.05, 0.1, 0.15, 0.2], 0, 0, np.arange(4, dtype=np.int32) * -1000)],
     [T((1, 3, 2, 4), "int8", 0.25, -5)],
     {"padding": "VALID", "stride_w": 3, "stride_h": 2, "dilation_w_factor": 1, "dilation_h_factor": 1,
      "fused_activation_function": "RELU6"}),
    ("DEPTHWISE_CONV_2D", [T((1, 5, 5, 2), "int8", 0.5, 0), T((1, 3, 3, 4), "int8", [0.1] * 4, 0, 3,
                                                              rng.integers(-127, 128, (1, 3, 3, 4), dtype=np.int8)),
                           None],
     [T((1, 5, 5, 4), "int8", 0.3, 1)],
     {"padding": "SAME", "stride_w": 1, "stride_h": 1, "depth_multiplier": 2, "dilation_w_factor": 2,
      "dilation_h_factor": 2}),
    ("FULLY_CONNECTED", [T((2, 3, 4), "int8", 0.5, 0), T((5, 4), "int8", 0.1, 0, 0,
                                                         rng.integers(-127, 128, (5, 4), dtype=np.int8)), None],
     [T((2, 3, 5), "int8", 0.7, 2)], {"keep_num_dims": True, "fused_activation_function": "RELU"}),
    ("RESHAPE", [T((2, 6), "int8", 0.5, 1), T((2,), "int32", data=np.array([3, 4], np.int32))],
     [T((3, 4), "int8", 0.5, 1)], {"new_shape": [3, 4]}),
    ("SQUEEZE", [T((1, 4, 1), "int8", 0.5, 1)], [T((4,), "int8", 0.5, 1)], {"squeeze_dims": [0, 2]}),
    ("SOFTMAX", [T((1, 6), "int8", 0.1, 0)], [T((1, 6), "int8", 1 / 256, -128)], {"beta": 0.75}),
    ("CONCATENATION", [T((1, 2), "int8", 0.5, 0), T((1, 3), "int8", 0.5, 0)], [T((1, 5), "int8", 0.5, 0)],
     {"axis": -1}),
    ("RESIZE_BILINEAR", [T((1, 2, 2, 1), "int8", 0.5, 0), T((2,), "int32", data=np.array([3, 3], np.int32))],
     [T((1, 3, 3, 1), "int8", 0.5, 0)], {"align_corners": True}),
    ("ARG_MAX", [T((2, 5), "int8", 0.5, 0), T((1,), "int32", data=np.array([1], np.int32))],
     [T((2,), "int64")], {"output_type": "INT64"}),
    ("MEAN", [T((1, 4, 4, 2), "int8", 0.5, 0), T((2,), "int32", data=np.array([1, 2], np.int32))],
     [T((1, 1, 1, 2), "int8", 0.4, 1)], {"keep_dims": True}),
    ("SPACE_TO_DEPTH", [T((1, 4, 4, 1), "int8", 0.5, 0)], [T((1, 2, 2, 4), "int8", 0.5, 0)], {"block_size": 2}),
    ("GATHER", [T((3, 4), "int8", 0.5, 0), T((2,), "int32", data=np.array([2, 0], np.int32))],
     [T((3, 2), "int8", 0.5, 0)], {"axis": 1, "batch_dims": 0}),
    ("SHAPE", [T((2, 3), "int8", 0.5, 0)], [T((2,), "int64")], {"out_type": "INT64"}),
    ("ADD", [T((1, 4), "int8", 0.5, 0), T((1, 4), "int8", 0.25, 1)], [T((1, 4), "int8", 0.7, 0)],
     {"fused_activation_function": "RELU_N1_TO_1", "pot_scale_int16": False}),
    ("QUANTIZE", [T((1, 4), "float")], [T((1, 4), "int8", 0.5, -3)], None),
    ("DEQUANTIZE", [T((1, 4), "int8", 0.5, -3)], [T((1, 4), "float")], None),
]


@pytest.mark.parametrize("op,inputs,outputs,options", SINGLE_OPS, ids=[s[0] for s in SINGLE_OPS])
def test_single_op_models(op, inputs, outputs, options):
    data = build(op, inputs, outputs, options)
    assert_matches_schema(data)
    assert_matches_interpreter(data)
    m = load_model(data)
    (operator,) = m.operators
    assert operator.name == op
    for key, value in (options or {}).items():  # the options as the test wrote them
        got = operator.options[key]
        assert (list(got) if isinstance(got, tuple) else got) == value, key
    assert list(operator.inputs) == [-1 if t is None else i for i, t in enumerate(inputs)]


def test_options_defaults_fill_absent_fields():
    m = load_model(build("CONV_2D", SINGLE_OPS[0][1], SINGLE_OPS[0][2], {}, version=3))
    opts = m.operators[0].options
    assert opts["padding"] == "SAME" and opts["fused_activation_function"] == "NONE"
    assert opts["dilation_w_factor"] == 1 and opts["stride_w"] == 0


def test_external_buffers():
    """Constant buffers stored behind the flatbuffer (Buffer.offset/size from the start of the file)."""
    for name in sorted(EXAMPLES):
        data = example_bytes(name)
        ext = externalize_buffers(data)
        obj = to_object(ext)
        assert any(b.offset > 1 for b in obj.buffers) and not any(b.data is not None and len(b.data) for b in obj.buffers)
        a, b = load_model(data), load_model(ext)
        for ta, tb in zip(a.tensors, b.tensors):
            assert (ta.data is None) == (tb.data is None)
            if ta.data is not None:
                assert ta.data.tobytes() == tb.data.tobytes() and ta.data.shape == tb.data.shape
        assert_matches_schema(ext)
        assert_matches_interpreter(ext)  # LiteRT reads the same bytes from the same places


def test_external_buffer_outside_the_file():
    ext = externalize_buffers(example_bytes("mlp_softmax"))
    with pytest.raises(ModelError, match="outside the"):
        load_model(ext[:-3])


def _set_codes(builtin, deprecated):
    def change(obj):
        obj.operatorCodes[0].builtinCode = builtin
        obj.operatorCodes[0].deprecatedBuiltinCode = deprecated
    return change


def test_operator_name_uses_the_larger_code():
    S = schema()
    base = build("ADD", [T((1, 2), "int8", 0.5, 0), T((1, 2), "int8", 0.5, 0)], [T((1, 2), "int8", 0.5, 0)], {})
    # an old model: only deprecated_builtin_code is set
    assert load_model(edit(base, _set_codes(0, S.BuiltinOperator.SUB))).operators[0].name == "SUB"
    # a new op code beyond 127: deprecated_builtin_code holds the placeholder 127
    m = load_model(edit(base, _set_codes(S.BuiltinOperator.STABLEHLO_ADD, 127)))
    assert m.operators[0].name == "STABLEHLO_ADD"
    assert load_model(edit(base, _set_codes(S.BuiltinOperator.SUB, 0))).operators[0].name == "SUB"


def test_custom_operator_is_named():
    S = schema()

    def change(obj):
        obj.operatorCodes[0].builtinCode = S.BuiltinOperator.CUSTOM
        obj.operatorCodes[0].deprecatedBuiltinCode = S.BuiltinOperator.CUSTOM
        obj.operatorCodes[0].customCode = b"MyOp"
        obj.subgraphs[0].operators[0].builtinOptionsType = 0
        obj.subgraphs[0].operators[0].builtinOptions = None
        obj.subgraphs[0].operators[0].customOptions = [1, 2, 3]

    base = build("ADD", [T((1, 2), "int8", 0.5, 0), T((1, 2), "int8", 0.5, 0)], [T((1, 2), "int8", 0.5, 0)], {})
    op = load_model(edit(base, change)).operators[0]
    assert op.name == "CUSTOM:MyOp" and op.custom_code == "MyOp" and op.custom_options == b"\x01\x02\x03"
    assert op.is_custom


def test_options_of_the_wrong_table_read_as_defaults():
    """LiteRT reads ``builtin_options_as_<Table>()`` for the op, which is null for another table, and
    then uses the defaults; quantspec does the same."""
    S = schema()
    base = build("ADD", [T((1, 2), "int8", 0.5, 0), T((1, 2), "int8", 0.5, 0)], [T((1, 2), "int8", 0.5, 0)],
                 {"fused_activation_function": "RELU"})

    def change(obj):
        o = S.SubOptionsT()
        o.fusedActivationFunction = S.ActivationFunctionType.RELU6
        obj.subgraphs[0].operators[0].builtinOptionsType = S.BuiltinOptions.SubOptions
        obj.subgraphs[0].operators[0].builtinOptions = o

    op = load_model(edit(base, change)).operators[0]
    assert op.options_type == "SubOptions" and op.options.get("fused_activation_function", "NONE") == "NONE"


def test_quantization_as_stored():
    """Quantization LiteRT refuses to load is still read (the checker reports it); params are None."""
    base = build("ADD", [T((1, 2), "int8", 0.5, 0), T((1, 2), "int8", 0.5, 0)], [T((1, 2), "int8", 0.5, 0)], {})

    def change(obj):
        q = obj.subgraphs[0].tensors[0].quantization
        q.scale = [0.5, 0.25]
        q.zeroPoint = [1]

    t = load_model(edit(base, change)).tensors[0]
    assert t.params is None and t.quantization.scale.tolist() == [0.5, 0.25] and t.quantization.zero_point.tolist() == [1]

    def no_zero_point(obj):
        obj.subgraphs[0].tensors[0].quantization.zeroPoint = None

    t = load_model(edit(base, no_zero_point)).tensors[0]
    assert t.params is None and not t.quantization.zero_point_present


# --- malformed input ---------------------------------------------------------------------------

def _mlp_edit(change):
    return edit(example_bytes("mlp_softmax"), change)


MALFORMED = {
    "empty": (b"", "too short"),
    "not a flatbuffer": (b"hello, this is not a model at all", "TFL3"),
    "npy file": (b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }" + b" " * 60,
                 "TFL3"),
    "root offset past the end": (b"\xff\xff\x00\x00TFL3" + b"\0" * 16, "outside the file"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_not_a_model(case):
    data, match = MALFORMED[case]
    with pytest.raises(ModelError, match=match):
        load_model(data)


def test_unreadable_path(tmp_path):
    with pytest.raises(ModelError, match="cannot be read"):
        load_model(tmp_path / "missing.tflite")
    with pytest.raises(ModelError, match="must be a path"):
        load_model(12)


def test_structural_errors_name_the_part():
    def version(obj):
        obj.version = 2

    def buffer_index(obj):
        obj.subgraphs[0].tensors[1].buffer = 99

    def opcode_index(obj):
        obj.subgraphs[0].operators[1].opcodeIndex = 7

    def tensor_index(obj):
        obj.subgraphs[0].operators[1].inputs = [0, 40, 1]

    def graph_output(obj):
        obj.subgraphs[0].outputs = [8]

    def data_size(obj):
        obj.buffers[obj.subgraphs[0].tensors[1].buffer].data = np.zeros(3, np.uint8)

    def tensor_type(obj):
        obj.subgraphs[0].tensors[0].type = 77

    def no_subgraphs(obj):
        obj.subgraphs = []

    def negative_dim(obj):
        obj.subgraphs[0].tensors[5].shape = [1, -32]

    cases = [(version, "version"), (buffer_index, "tensor 1 buffer"), (opcode_index, "operator 1 opcode_index"),
             (tensor_index, "operator 1 inputs"), (graph_output, "subgraph 0 outputs"),
             (data_size, "tensor 1 .*needs 40"), (tensor_type, "tensor 0 type"), (no_subgraphs, "subgraphs"),
             (negative_dim, "tensor 5 shape")]
    for change, match in cases:
        with pytest.raises(ModelError, match=match):
            load_model(_mlp_edit(change))


def test_reprs_are_readable():
    m = load_model(EXAMPLES["mlp_softmax"])
    assert "FULLY_CONNECTED" in repr(m) and "SOFTMAX" in repr(m)
    assert repr(m.tensors[0]).startswith("Tensor(#0 'features' int8[1x20] scale=")
    assert "fused_activation_function='RELU'" in repr(m.operators[0])
    assert "tensors:" in m.summary()
    assert m.tensor("features") is m.tensors[0]
    with pytest.raises(ModelError):
        m.tensor("nope")


# --- the .tflite reader requires what LiteRT's flatbuffer verifier requires -----------------------

def _patched(name: str, at: int, old: bytes, new: bytes) -> bytes:
    data = bytearray(example_bytes(name))
    assert data[at:at + len(old)] == old, "the bundled model changed: find a new place for this patch"
    data[at:at + len(new)] = new
    return bytes(data)


#: single patches of the bundled mlp_softmax.tflite that quantspec's reader accepted and LiteRT's
#: flatbuffer verifier refuses (found by the mutation fuzzer)
VERIFIER_CASES = {
    "string without its NUL": (unterminated_string, "not terminated by a NUL byte"),
    # the root table's signature_defs field: an offset of 0
    "offset of 0": (lambda: _patched("mlp_softmax", 32, b"\x1c\x00\x00\x00", b"\x00"), "offset of 0"),
    # the subgraph's vtable names a field at an odd place: a misaligned int32 field
    "misaligned field": (lambda: _patched("mlp_softmax", 1566, b"\x0e\x00", b"\x80"), "not aligned"),
}


@pytest.mark.parametrize("case", sorted(VERIFIER_CASES))
def test_what_litert_verifier_refuses_is_unreadable(case, tmp_path, capsys):
    """Found by the .tflite mutation fuzzer: models quantspec's reader accepted and LiteRT's flatbuffer
    verifier refuses are unreadable (a ModelError naming the verifier's rule; `check` exits 2)."""
    make, match = VERIFIER_CASES[case]
    data = make()
    assert "not a valid Flatbuffer buffer" in litert_refuses(data)
    with pytest.raises(ModelError, match=match):
        load_model(data)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    assert main(["check", str(path)]) == 2                      # not "conformant"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "flatbuffer verifier" in err


def test_a_table_referenced_more_than_a_million_times_is_refused():
    """Found by fuzzing the .tflite reader: the verifier counts every table it walks, shared ones each
    time (at most 1,000,000)."""
    from test_litert_model_fuzz import _shared_tensor_model

    data = _shared_tensor_model(1_000_001, 1)
    assert "not a valid Flatbuffer buffer" in litert_refuses(data)
    with pytest.raises(ModelError, match="more than 1000000"):
        load_model(data)
    load_model(_shared_tensor_model(1000, 1))
