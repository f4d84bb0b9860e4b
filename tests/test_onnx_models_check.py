"""quantspec.onnxmodels.check_model: models built with onnx.helper that break one rule each (at every
opset where the rule differs, with the same model at an opset that allows it passing), and models
made by onnxruntime's quantization tools, which pass.

Where onnx's own checker (``full_check``: strict type and shape inference) or onnxruntime refuses a
broken model too, the test says so and checks it, so these rules are not quantspec's opinion."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from onnx_models import model, nbits_model, node, onnx_api, static_quantized, tensor
from refs import require

from quantspec import onnxmodels
from quantspec.dtypes import qtype
from quantspec.errors import ModelError
from quantspec.onnxmodels import check_model
from quantspec.onnxmodels import RULES

F8 = ml_dtypes.float8_e4m3fn


def qdq(opset, what="q", *, x_type="float", x_shape=(2, 6), scale=np.float32(0.5), zp=np.uint8(3), attrs=None,
        dq_scale=None, dq_zp=None, dq_attrs=None, dq_x_type=None, ir=None, q_inputs=None):
    """Identity(x) then the node(s) under test: "q" QuantizeLinear (node 1); "dq" DequantizeLinear
    of a graph input (node 1, after an unrelated Identity); "qdq" QuantizeLinear (node 1) then
    DequantizeLinear (node 2)."""
    inits, nodes = [], []
    zero = [] if zp is None else ["z"]
    zp_type = "uint8" if zp is None else (qtype(zp.data_type).name if not isinstance(zp, (np.ndarray, np.generic))
                                          else qtype(np.asarray(zp).dtype).name)
    q_type = qtype((attrs or {}).get("output_dtype") or zp_type).name if what != "dq" else None
    scale_type = qtype(np.asarray(dq_scale if dq_scale is not None else scale).dtype).name
    dq_out = (dq_attrs if what == "qdq" else attrs or {}).get("output_dtype") if what != "q" else None
    y_type = qtype(dq_out).name if dq_out else scale_type
    if y_type not in ("float", "float16", "bfloat16"):
        y_type = None
    if scale is not None:
        inits.append(tensor("s", scale))
    if zp is not None:
        inits.append(zp if not isinstance(zp, (np.ndarray, np.generic)) else tensor("z", zp))
    if what == "dq":
        xq_type = dq_x_type or (str(np.asarray(zp).dtype) if zp is not None else "int8")
        nodes = [node("Identity", ["f"], ["g"]), node("DequantizeLinear", ["xq", "s", *zero], ["y"], **(attrs or {}))]
        return model(nodes, [("f", "float", [1]), ("xq", xq_type, list(x_shape))],
                     [("g", "float", [1]), ("y", y_type, list(x_shape))],
                     inits, opset=opset, ir=ir)
    q_in = q_inputs if q_inputs is not None else ["r", "s", *zero]
    nodes = [node("Identity", ["x"], ["r"]), node("QuantizeLinear", q_in, ["q"], **(attrs or {}))]
    outputs = [("q", q_type, list(x_shape))]
    if what == "qdq":
        inits += [tensor("s2", dq_scale if dq_scale is not None else scale)]
        dq_in = ["q", "s2"]
        if dq_zp is not None or zp is not None:
            inits.append(tensor("z2", dq_zp if dq_zp is not None else zp))
            dq_in.append("z2")
        nodes.append(node("DequantizeLinear", dq_in, ["y"], **(dq_attrs or {})))
        outputs = [("y", y_type, list(x_shape))]
    return model(nodes, [("x", x_type, list(x_shape))], outputs, inits, opset=opset, ir=ir)


def one(m):
    report = check_model(m)
    assert len(report.violations) == 1, report.render()
    return report.violations[0]


def out_of_range_int8_zero_point():
    onnx = require("onnx")
    t = onnx.TensorProto(name="z", data_type=onnx.TensorProto.INT8)
    t.int32_data.append(200)          # int8 data is stored in int32_data: 200 is kept there, and reads as -56
    return t


# (id, model builder, opset where it breaks, opset where the same model passes or None,
#  (rule, node index, tensor), what onnx's checker does with the broken model: True = refuses it)
CASES = [
    # attributes each version has
    ("saturate-before-19", lambda o: qdq(o, attrs={"saturate": 1}), 13, 19,
     ("attribute", 1, None), True),
    ("block-size-before-21", lambda o: qdq(o, attrs={"block_size": 0}), 19, 21, ("attribute", 1, None), True),
    ("dq-output-dtype-before-23", lambda o: qdq(o, "dq", zp=np.int8(1), attrs={"output_dtype": 1}), 21, 23,
     ("attribute", 1, None), True),
    ("precision-before-23", lambda o: qdq(o, attrs={"precision": 1}), 21, 23, ("attribute", 1, None), True),
    ("unknown-attribute", lambda o: qdq(o, "dq", zp=np.int8(1), attrs={"foo": 1}), 21, None,
     ("attribute", 1, None), True),
    # types each version accepts
    ("int16-before-21", lambda o: qdq(o, zp=np.int16(3)), 19, 21, ("dtype", 1, "z"), True),
    ("int4-dq-before-21", lambda o: qdq(o, "dq", zp=np.asarray(1, ml_dtypes.int4)), 19, 21, ("dtype", 1, "xq"), True),
    ("float8-before-19", lambda o: qdq(o, zp=np.zeros((), F8)), 13, 19, ("dtype", 1, "z"), True),
    ("float4-before-23", lambda o: qdq(o, zp=np.zeros((), ml_dtypes.float4_e2m1fn)), 21, 23, ("dtype", 1, "z"), True),
    ("uint2-before-25", lambda o: qdq(o, zp=np.asarray(1, ml_dtypes.uint2)), 24, 25, ("dtype", 1, "z"), True),
    ("float6-before-28", lambda o: qdq(o, zp=np.zeros((), ml_dtypes.float6_e2m3fn)), 25, 28, ("dtype", 1, "z"), True),
    ("e8m0-scale-before-24", lambda o: qdq(o, "dq", scale=np.asarray(0.5, ml_dtypes.float8_e8m0fnu), zp=np.int8(0),
                                           attrs={"output_dtype": 1}), 23, 24, ("dtype", 1, "s"), True),
    ("scale-type-before-23", lambda o: qdq(o, scale=np.float16(0.5)), 21, 23, ("dtype", 1, "s"), True),
    ("float16-x-before-19", lambda o: qdq(o, x_type="float16"), 13, None, ("dtype", 1, "r"), True),
    # per-axis quantization arrived in opset 13
    ("per-axis-before-13", lambda o: qdq(o, scale=np.full(6, 0.5, np.float32), zp=np.full(6, 3, np.uint8)), 10, 13,
     ("scale-shape", 1, "s"), False),
    ("quantize-before-10", lambda o: qdq(o), 9, 10, ("op-version", 1, None), False),
    # output_dtype, saturate, precision
    ("output-dtype-vs-zero-point", lambda o: qdq(o, attrs={"output_dtype": 3}), 21, None, ("output-dtype", 1, "z"), True),
    ("dq-output-dtype-int8", lambda o: qdq(o, "dq", zp=np.int8(1), attrs={"output_dtype": 3}), 23, None,
     ("output-dtype", 1, None), True),
    ("e8m0-without-output-dtype", lambda o: qdq(o, "dq", scale=np.asarray(0.5, ml_dtypes.float8_e8m0fnu),
                                                zp=np.int8(0)), 24, None, ("output-dtype", 1, "s"), True),
    ("saturate-int8", lambda o: qdq(o, zp=np.int8(0), attrs={"saturate": 0}), 19, None, ("saturate", 1, None), False),
    ("precision-int8", lambda o: qdq(o, attrs={"precision": 3}), 23, None, ("precision", 1, None), False),
    # shapes
    ("axis-out-of-range", lambda o: qdq(o, scale=np.full(6, 0.5, np.float32), zp=np.full(6, 3, np.uint8),
                                        attrs={"axis": 2}), 21, None, ("axis", 1, None), False),
    ("per-axis-length", lambda o: qdq(o, scale=np.full(5, 0.5, np.float32), zp=np.full(5, 3, np.uint8)), 21, None,
     ("scale-shape", 1, "s"), False),
    ("rank-2-scale-no-block", lambda o: qdq(o, scale=np.full((2, 6), 0.5, np.float32), zp=None), 21, None,
     ("scale-shape", 1, "s"), False),
    ("block-size-range", lambda o: qdq(o, scale=np.full((2, 2), 0.5, np.float32), zp=None,
                                       attrs={"axis": 1, "block_size": 2}), 21, None, ("block-size", 1, None), False),
    ("block-size-per-tensor", lambda o: qdq(o, attrs={"block_size": 2}), 21, None, ("block-size", 1, None), False),
    ("zero-point-shape", lambda o: qdq(o, scale=np.full(6, 0.5, np.float32), zp=np.uint8(3)), 21, None,
     ("zero-point-shape", 1, "z"), False),
    ("zero-point-type", lambda o: qdq(o, "dq", zp=np.uint8(1), dq_x_type="int8"), 21, None,
     ("zero-point-type", 1, "z"), True),
    # constant values
    ("zero-scale", lambda o: qdq(o, scale=np.float32(0)), 21, None, ("scale", 1, "s"), False),
    ("infinite-dq-scale", lambda o: qdq(o, "dq", scale=np.float32(np.inf), zp=np.int8(1)), 21, None,
     ("scale", 1, "s"), False),
    ("nan-scale", lambda o: qdq(o, scale=np.array([0.5, np.nan, 1, 1, 1, 1], np.float32), zp=np.zeros(6, np.uint8)),
     21, None, ("scale", 1, "s"), False),
    ("zero-point-stored-out-of-range", lambda o: qdq(o, zp=out_of_range_int8_zero_point()), 21, None,
     ("zero-point-range", 1, "z"), False),
    ("int32-zero-point", lambda o: qdq(o, "dq", zp=np.int32(3)), 21, None, ("zero-point-range", 1, "z"), False),
    ("float8-dq-zero-point", lambda o: qdq(o, "dq", zp=np.asarray(1.0, F8)), 21, None,
     ("zero-point-range", 1, "z"), False),
    ("missing-scale", lambda o: qdq(o, q_inputs=["r"]), 21, None, ("inputs", 1, None), True),
    ("no-output", lambda o: without_output(qdq(o)), 21, None, ("inputs", 1, None), True),
]


def without_output(m):
    del m.graph.node[1].output[:]
    del m.graph.output[:]
    m.graph.output.extend([onnx_api()[1].make_tensor_value_info("r", 1, [2, 6])])
    return m


@pytest.mark.parametrize("name, build, bad, good, where, onnx_refuses", CASES, ids=[c[0] for c in CASES])
def test_each_rule_is_reported_at_its_node(name, build, bad, good, where, onnx_refuses):
    v = one(build(bad))
    assert (v.rule, v.node_index, v.tensor) == where, str(v)
    assert v.rule in RULES and v.message and v.expected is not None and v.found is not None, str(v)
    if good is not None:
        ok = check_model(build(good))
        assert ok.ok, ok.render()


@pytest.mark.parametrize("name, build, bad, good, where, onnx_refuses",
                         [c for c in CASES if c[5] or c[3] is not None], ids=[c[0] for c in CASES if c[5] or c[3]])
def test_onnx_checker_agrees(name, build, bad, good, where, onnx_refuses):
    """onnx's own checker (strict inference) refuses the broken models it can see, and accepts the
    same model at the opset that allows it."""
    onnx = require("onnx")
    if onnx_refuses:
        with pytest.raises(Exception):
            onnx.checker.check_model(build(bad), full_check=True)
    if good is not None:
        onnx.checker.check_model(build(good), full_check=True)


# ------------------------------------------------------------------------------------------------
# QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger, com.microsoft MatMulNBits / DequantizeLinear
# ------------------------------------------------------------------------------------------------

def qlinear_conv(x_scale=np.float32(0.1), y_scale=np.float32(0.2), w_zp=np.zeros(3, np.int8), bias=np.zeros(3, np.int32)):
    inits = [tensor("xs", x_scale), tensor("xz", np.uint8(128)), tensor("w", np.ones((3, 2, 3, 3), np.int8)),
             tensor("ws", np.full(3, 0.01, np.float32)), tensor("wz", w_zp), tensor("ys", y_scale),
             tensor("yz", np.uint8(128)), tensor("b", bias)]
    nodes = [node("Identity", ["f"], ["g"]),
             node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"])]
    return model(nodes, [("f", "float", [1]), ("x", "uint8", [1, 2, 5, 5])], [("g", "float", [1]), ("y", "uint8", None)],
                 inits, opset=13)


def qlinear_matmul(opset=13, a_type="uint8", b_zp=np.int8(0), b_scale=np.float32(0.01)):
    a_zp = np.zeros((), ml_dtypes.float8_e4m3fn) if a_type == "float8e4m3fn" else np.uint8(128)
    inits = [tensor("as", np.float32(0.1)), tensor("az", a_zp), tensor("b", np.ones((4, 3), np.int8)),
             tensor("bs", b_scale), tensor("bz", b_zp), tensor("ys", np.float32(0.2)), tensor("yz", np.uint8(128))]
    nodes = [node("Identity", ["f"], ["g"]), node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])]
    return model(nodes, [("f", "float", [1]), ("a", a_type, [2, 4])], [("g", "float", [1]), ("y", "uint8", None)],
                 inits, opset=opset)


def matmul_integer(a_zp=np.uint8(3)):
    nodes = [node("Identity", ["f"], ["g"]), node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])]
    inits = [tensor("b", np.ones((4, 3), np.int8)), tensor("az", a_zp), tensor("bz", np.zeros(3, np.int8))]
    return model(nodes, [("f", "float", [1]), ("a", "uint8", [2, 4])], [("g", "float", [1]), ("y", "int32", None)], inits,
                 opset=13)


def conv_integer(w_zp=np.zeros(3, np.int8)):
    nodes = [node("Identity", ["f"], ["g"]), node("ConvInteger", ["x", "w", "xz", "wz"], ["y"])]
    inits = [tensor("w", np.ones((3, 2, 3, 3), np.int8)), tensor("xz", np.uint8(3)), tensor("wz", w_zp)]
    return model(nodes, [("f", "float", [1]), ("x", "uint8", [1, 2, 5, 5])], [("g", "float", [1]), ("y", "int32", None)],
                 inits, opset=13)


def matmul_nbits(block_size=32, scales_shape=(40, 2)):
    k_blocks = -(-64 // block_size)
    inits = [tensor("B", np.zeros((40, k_blocks, block_size // 2), np.uint8)),
             tensor("S", np.full(scales_shape, 0.1, np.float32))]
    nodes = [node("Identity", ["f"], ["g"]),
             node("MatMulNBits", ["A", "B", "S"], ["y"], domain="com.microsoft", K=64, N=40, bits=4,
                  block_size=block_size)]
    return model(nodes, [("f", "float", [1]), ("A", "float", [2, 64])], [("g", "float", [1]), ("y", "float", None)],
                 inits, opset=21, domains=[("com.microsoft", 1)])


def contrib_dq(attrs):
    inits = [tensor("s", np.full(6, 0.5, np.float32)), tensor("z", np.zeros(6, np.int16))]
    nodes = [node("Identity", ["f"], ["g"]), node("DequantizeLinear", ["xq", "s", "z"], ["y"], domain="com.microsoft",
                                                  **attrs)]
    return model(nodes, [("f", "float", [1]), ("xq", "int16", [2, 6])], [("g", "float", [1]), ("y", "float", None)],
                 inits, opset=17, domains=[("com.microsoft", 1)])


OP_CASES = [
    ("qlinearconv-vector-x-scale", lambda: qlinear_conv(x_scale=np.full(2, 0.1, np.float32)), qlinear_conv,
     ("scale-shape", 1, "xs")),
    ("qlinearconv-zero-y-scale", lambda: qlinear_conv(y_scale=np.float32(0)), qlinear_conv, ("scale", 1, "ys")),
    ("qlinearconv-bias-length", lambda: qlinear_conv(bias=np.zeros(4, np.int32)), qlinear_conv, ("shape", 1, "b")),
    ("qlinearconv-w-zero-point-length", lambda: qlinear_conv(w_zp=np.zeros(2, np.int8)), qlinear_conv,
     ("zero-point-shape", 1, "wz")),
    ("qlinearmatmul-zero-point-type", lambda: qlinear_matmul(b_zp=np.uint8(0)), qlinear_matmul,
     ("zero-point-type", 1, "bz")),
    ("qlinearmatmul-float8-before-21", lambda: qlinear_matmul(13, "float8e4m3fn"), lambda: qlinear_matmul(21, "float8e4m3fn"),
     {("dtype", 1, "a"), ("dtype", 1, "az")}),
    ("qlinearmatmul-b-scale-rows", lambda: qlinear_matmul(b_scale=np.full(4, 0.01, np.float32), b_zp=np.zeros(4, np.int8)),
     lambda: qlinear_matmul(b_scale=np.full(3, 0.01, np.float32), b_zp=np.zeros(3, np.int8)),
     {("scale-shape", 1, "bs"), ("zero-point-shape", 1, "bz")}),
    ("matmulinteger-a-zero-point", lambda: matmul_integer(np.full(3, 3, np.uint8)),
     lambda: matmul_integer(np.full(2, 3, np.uint8)), ("zero-point-shape", 1, "az")),
    ("convinteger-w-zero-point", lambda: conv_integer(np.zeros(4, np.int8)), conv_integer, ("zero-point-shape", 1, "wz")),
    ("matmulnbits-block-size", lambda: matmul_nbits(block_size=24, scales_shape=(40, 3)), matmul_nbits,
     ("block-size", 1, None)),
    ("matmulnbits-scales", lambda: matmul_nbits(scales_shape=(40, 3)), matmul_nbits, ("scale-shape", 1, "S")),
    ("contrib-dq-no-axis", lambda: contrib_dq({}), lambda: contrib_dq({"axis": 1}), ("scale-shape", 1, "s")),
]


@pytest.mark.parametrize("name, bad, good, where", OP_CASES, ids=[c[0] for c in OP_CASES])
def test_other_quantization_operators(name, bad, good, where):
    if isinstance(where, set):      # a type or a shape that a tensor and its zero point share
        report = check_model(bad())
        assert {(v.rule, v.node_index, v.tensor) for v in report.violations} == where, report.render()
    else:
        v = one(bad())
        assert (v.rule, v.node_index, v.tensor) == where, str(v)
    ok = check_model(good())
    assert ok.ok, ok.render()


# ------------------------------------------------------------------------------------------------
# model-level rules
# ------------------------------------------------------------------------------------------------

def moving(op="Reshape", q_scale=0.1, d_scale=0.1, **attrs):
    """DequantizeLinear (node 0) -> op (node 1) -> QuantizeLinear (node 2)."""
    inits = [tensor("ds", np.float32(d_scale)), tensor("dz", np.uint8(3)), tensor("qs", np.float32(q_scale)),
             tensor("qz", np.uint8(3))]
    extra = []
    if op == "Reshape":
        inits.append(tensor("shape", np.array([1, 32], np.int64)))
        extra = ["shape"]
    nodes = [node("DequantizeLinear", ["x", "ds", "dz"], ["d"]), node(op, ["d", *extra], ["m"], **attrs),
             node("QuantizeLinear", ["m", "qs", "qz"], ["y"])]
    return model(nodes, [("x", "uint8", [1, 2, 4, 4])], [("y", "uint8", None)], inits, opset=13)


def test_same_params_around_an_op_that_moves_values():
    assert check_model(moving()).ok                       # equal values in other tensors are the same parameters
    v = one(moving(q_scale=0.2))
    assert (v.rule, v.node_index, v.tensor, v.op_type) == ("same-params", 2, "qs", "QuantizeLinear")
    assert "0.1" in v.expected and "0.2" in v.found
    assert check_model(moving("Relu", q_scale=0.2)).ok   # an op that computes may change them
    pool = dict(kernel_shape=[2, 2])
    assert check_model(moving("MaxPool", **pool)).ok
    v = one(moving("MaxPool", q_scale=-0.1, d_scale=-0.1, **pool))
    assert (v.rule, v.node_index, v.tensor) == ("same-params", 1, "ds")


def test_a_model_without_a_default_opset():
    m = contrib_dq({"axis": 1})
    del m.opset_import[0]
    (v,) = check_model(m).violations
    assert (v.rule, v.node_index) == ("opset", None)


def test_nodes_inside_subgraphs():
    onnx, helper, _ = onnx_api()
    body = helper.make_graph([node("QuantizeLinear", ["x", "s0"], ["q"])], "then", [],
                             [helper.make_tensor_value_info("q", onnx.TensorProto.UINT8, [2])])
    other = helper.make_graph([node("Identity", ["x8"], ["q2"])], "else", [],
                              [helper.make_tensor_value_info("q2", onnx.TensorProto.UINT8, [2])])
    m = model([node("If", ["c"], ["out"], then_branch=body, else_branch=other, name="branch")],
              [("c", "bool", []), ("x", "float", [2]), ("x8", "uint8", [2])], [("out", "uint8", [2])],
              [tensor("s0", np.float32(0))], opset=21)
    v = one(m)
    assert (v.rule, v.node_index, v.graph, v.tensor) == ("scale", 0, "branch/then_branch", "s0")


# ------------------------------------------------------------------------------------------------
# models made by onnxruntime's quantization tools pass
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
def test_quantize_static_models_pass(tmp_path, fmt, per_channel):
    path = static_quantized(tmp_path, fmt, per_channel)
    report = check_model(path)
    assert report.ok, report.render()
    expected = {"QDQ": {"QuantizeLinear", "DequantizeLinear"},
                "QOperator": {"QuantizeLinear", "QLinearConv", "QLinearMatMul", "DequantizeLinear"}}[fmt]
    assert set(report.op_types) == expected and report.opset == 13 and report.model == str(path)


@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "asymmetric"])
@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
def test_matmul_nbits_models_pass(tmp_path, symmetric, fmt):
    onnx = require("onnx")
    path = nbits_model(tmp_path, symmetric, fmt)
    report = check_model(path)
    assert report.ok, report.render()
    ops = {"QDQ": ("DequantizeLinear",), "QOperator": ("MatMulNBits",)}[fmt]
    assert report.op_types == ops
    if fmt == "QDQ":    # symmetric blocks carry their sign in the scale, and an all-zero block has scale 0
        scales = [onnx.numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer
                  if t.data_type == onnx.TensorProto.FLOAT]
        assert any((s == 0).any() for s in scales)
        if symmetric:
            assert any((s < 0).any() for s in scales)


def _onnx_model_named(name: str) -> bytes:
    from onnx_models import model, node, tensor

    m = model([node("QuantizeLinear", [name, "s", "z"], ["q"]), node("DequantizeLinear", ["q", "s", "z"], ["y"])],
              [(name, "float32", [2, 3])], [("y", "float32", [2, 3])],
              [tensor("s", np.float32(0.5)), tensor("z", np.int8(0))])
    return m.SerializeToString()


def test_onnx_names_that_are_not_utf8_are_a_model_error():
    """A mutated .onnx whose input name is not UTF-8: protobuf returns the name as bytes, and
    ``audit`` died with a TypeError joining the input names (found by fuzzing)."""
    require("onnx")
    from quantspec import onnx as qo

    data = _onnx_model_named("inputname").replace(b"inputname", b"\xffnputname")
    for call in (lambda: onnxmodels.check_model(data), lambda: onnxmodels.audit(data, {"inputname": np.zeros((2, 3), np.float32)}),
                 lambda: onnxmodels.audit(data, run=False)):
        with pytest.raises(ModelError, match="not valid UTF-8"):
            call()
    assert onnxmodels.check_model(_onnx_model_named("inputname")).ok


def test_negative_dimensions_of_a_constant_and_of_an_input():
    """A scale initializer with dims [-1] made check_model raise numpy's ValueError ("all elements
    of broadcast shape must be non-negative"); a negative dim_value declared for an input is treated
    as unknown (found by fuzzing)."""
    require("onnx")
    import onnx

    from quantspec import onnx as qo

    m = onnx.ModelProto()
    m.ParseFromString(_onnx_model_named("x"))
    m.graph.initializer[0].dims.extend([-1])
    for call in (lambda: onnxmodels.check_model(m.SerializeToString()), lambda: onnxmodels.audit(m.SerializeToString(), run=False)):
        with pytest.raises(ModelError, match="negative dimension"):
            call()
    m.ParseFromString(_onnx_model_named("x"))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -2
    assert onnxmodels.check_model(m.SerializeToString()).ok
    onnxmodels.audit(m.SerializeToString(), run=False)


def test_onnx_check_of_a_scale_declaring_more_elements_than_any_array_is_a_quantspec_error():
    """A damaged .onnx model whose scale constant declares 3 x (2^31 - 1)^3 elements (found by the
    20000-example run: numpy's 'iterator is too large' ValueError escaped from ``check_model``, which
    broadcast a stand-in array to the declared shape): a quantspec error, from check and audit."""
    from onnx import TensorProto, helper

    import quantspec.onnx as qo
    from quantspec.errors import QuantSpecError

    s = TensorProto()
    s.name, s.data_type, s.raw_data = "s", TensorProto.FLOAT, b""
    s.dims.extend([3, 2**31 - 1, 2**31 - 1, 2**31 - 1])
    z = helper.make_tensor("z", TensorProto.INT8, [3], vals=np.zeros(3, np.int8).tobytes(), raw=True)
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [3, 4])], [s, z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    data = m.SerializeToString()
    with pytest.raises(QuantSpecError):
        onnxmodels.check_model(data)
    with pytest.raises(QuantSpecError):
        onnxmodels.audit(data, {"x": np.zeros((3, 4), np.float32)}, run=True, seed=1)
    # the same shape declared by a graph input (no data to read): a scale-shape finding naming it
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, list(s.dims))],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [3, 4])], [z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    report = onnxmodels.check_model(m.SerializeToString())
    found = [v for v in report.violations if v.rule == "scale-shape"]
    assert found and "a shape no tensor can have" in found[0].message, report
    # no element at all (a zero dimension), but numpy counts the others (about 2^93 here) and refuses
    g.input[1].type.tensor_type.shape.dim[0].dim_value = 0
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    report = onnxmodels.check_model(m.SerializeToString())
    found = [v for v in report.violations if v.rule == "scale-shape"]
    assert found and "a shape no tensor can have" in found[0].message, report
    # fewer elements than an int64 counts, more bytes than numpy allows (its "array is too big"
    # ValueError, mutant 38412 of the same run)
    g.input[1].type.tensor_type.shape.dim[1].dim_value = 1 << 60
    del g.input[1].type.tensor_type.shape.dim[2:]
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    report = onnxmodels.check_model(m.SerializeToString())
    found = [v for v in report.violations if v.rule == "scale-shape"]
    assert found and "a shape no tensor can have" in found[0].message, report
