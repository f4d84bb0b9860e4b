"""The LiteRT int8 op table: its numbers against the flatbuffer schema, and every enforcement claim
against the interpreter (ai-edge-litert 2.3.0, BUILTIN_REF): a model breaking a rule the table says
LiteRT rejects fails in the interpreter at the stage the table names; a model breaking a rule the
table says is silent runs; a value inside LiteRT's tolerance runs."""

from __future__ import annotations

import numpy as np
import pytest

from refs import require

from quantspec.dtypes import qtype
from quantspec.errors import InvalidArgumentError, QuantSpecError
from quantspec.litert import optable
from quantspec.litert.kernels.base import TensorSpec
from quantspec.litert.optable import ABORTS, OP_TABLE, REJECTS, RULES, SILENT
from quantspec.litert.params import QuantParams

SPEC_LIST = ("ADD AVERAGE_POOL_2D CONCATENATION CONV_2D DEPTHWISE_CONV_2D FULLY_CONNECTED L2_NORMALIZATION "
             "LOGISTIC MAX_POOL_2D MUL RESHAPE RESIZE_BILINEAR SOFTMAX SPACE_TO_DEPTH TANH PAD GATHER "
             "BATCH_TO_SPACE_ND SPACE_TO_BATCH_ND TRANSPOSE MEAN SUB SUM SQUEEZE LOG_SOFTMAX MAXIMUM ARG_MAX "
             "MINIMUM LESS PADV2 GREATER GREATER_EQUAL LESS_EQUAL SLICE EQUAL NOT_EQUAL SHAPE QUANTIZE").split()


def test_table_covers_the_spec_list_and_builtin_numbers_match_the_schema():
    S = require("ai_edge_litert.schema_py_generated")
    assert set(SPEC_LIST) <= set(OP_TABLE)
    assert set(OP_TABLE) - set(SPEC_LIST) == {"DEQUANTIZE"}
    for name, op in OP_TABLE.items():
        assert op.builtin == getattr(S.BuiltinOperator, name), name
        assert optable.builtin_name(op.builtin) == name
        assert op.in_spec == (name in SPEC_LIST)
        for tr in op.inputs + op.outputs:
            for r in tr.restrictions:
                assert r.rule in RULES, (name, r.rule)
                assert r.litert and all(e.action in (REJECTS, ABORTS, SILENT) for e in r.litert)
                for e in r.litert:
                    assert (e.stage in ("prepare", "eval")) == e.fails, (name, r.rule)
            for d in tr.dtypes:
                qtype(d)


def test_fixed_outputs_and_same_scale_sets_follow_the_spec():
    fixed = {n: (op.outputs[0].restriction("fixed-scale").value, op.outputs[0].restriction("fixed-zero-point").value)
             for n, op in OP_TABLE.items() if op.outputs[0].restriction("fixed-scale")}
    assert fixed == {"LOGISTIC": (1 / 256, -128), "SOFTMAX": (1 / 256, -128), "TANH": (1 / 128, 0),
                     "L2_NORMALIZATION": (1 / 128, 0), "LOG_SOFTMAX": (16 / 256, 127)}
    same = {n for n, op in OP_TABLE.items() if any(tr.restriction("same-scale") for tr in op.inputs)}
    assert same == {"AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION", "RESHAPE", "RESIZE_BILINEAR",
                    "SPACE_TO_DEPTH", "PAD", "PADV2", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND",
                    "TRANSPOSE", "SQUEEZE", "MAXIMUM", "MINIMUM", "SLICE"}
    weights = {n: op.inputs[1].quantized_dimension for n, op in OP_TABLE.items()
               if len(op.inputs) > 1 and op.inputs[1].role == optable.WEIGHT}
    assert weights == {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0}


def test_markdown_table_lists_every_op():
    md = optable.markdown_table()
    for name, op in OP_TABLE.items():
        assert f"| {name} ({op.builtin})" in md


# ---------------------------------------------------------------------------------------------
# enforcement claims, one model per claim
# ---------------------------------------------------------------------------------------------

def outcome(model: bytes, inputs) -> str:
    """'prepare' / 'eval' when the interpreter fails there, else 'ok'."""
    from refs import require
    interp = require("ai_edge_litert.interpreter")
    try:
        it = interp.Interpreter(model_content=model, experimental_op_resolver_type=interp.OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
    except (RuntimeError, ValueError):
        return "prepare"
    try:
        for d, x in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
    except (RuntimeError, ValueError):
        return "eval"
    return "ok"


def _i8(shape, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


def _conv(T, w_zp=0, w_scales=(0.1, 0.2, 0.3), w_qdim=0, b_zp=0, b_scale=None):
    if b_scale == "per-tensor":
        b_scale = [0.5 * w_scales[0]]
    s_in = 0.5
    w = np.random.default_rng(1).integers(-127, 128, (3, 2, 2, 2)).astype(np.int8)
    b_scale = [s_in * s for s in w_scales] if b_scale is None else b_scale
    return ("CONV_2D", [T((1, 4, 4, 2), "int8", s_in, 1),
                        T((3, 2, 2, 2), "int8", list(w_scales), w_zp, w_qdim, data=w),
                        T((3,), "int32", b_scale, b_zp, data=np.array([1, -2, 3], np.int32))],
            [T((1, 3, 3, 3), "int8", 0.7, -3)], {"padding": "VALID", "stride_w": 1, "stride_h": 1}, 3)


def _dw(T, w_zp=0, w_scales=(0.1, 0.2), w_qdim=3, b_zp=0):
    w = np.random.default_rng(2).integers(-127, 128, (1, 2, 2, 2)).astype(np.int8)
    return ("DEPTHWISE_CONV_2D", [T((1, 4, 4, 2), "int8", 0.5, 1),
                                  T((1, 2, 2, 2), "int8", list(w_scales), w_zp, w_qdim, data=w),
                                  T((2,), "int32", [0.5 * s for s in w_scales], b_zp, data=np.array([5, -5], np.int32))],
            [T((1, 3, 3, 2), "int8", 0.7, -3)],
            {"padding": "VALID", "stride_w": 1, "stride_h": 1, "depth_multiplier": 1}, 3)


def _fc(T, w_scales=(0.1,), w_qdim=0, b_scale=None, b_dtype="int32", w_zp=0):
    w = np.random.default_rng(3).integers(-127, 128, (3, 4)).astype(np.int8)
    b_scale = [0.5 * s for s in w_scales] if b_scale is None else b_scale
    return ("FULLY_CONNECTED", [T((1, 4), "int8", 0.5, 1), T((3, 4), "int8", list(w_scales), w_zp, w_qdim, data=w),
                                T((3,), b_dtype, b_scale, 0, data=np.array([1, 2, 3], qtype(b_dtype).dtype))],
            [T((1, 3), "int8", 0.7, -3)], {}, 4)


def _unary(op, s_out, z_out, s_in=0.1, z_in=0, options=None, version=2):
    def make(T):
        return (op, [T((2, 5), "int8", s_in, z_in)], [T((2, 5), "int8", s_out, z_out)], options or {}, version)
    return make


SOFTMAX_EPS = float(np.float32(0.001) / np.float32(256))

# (id, model maker, expected outcome, (op, side, index, rule) the table must mark with that outcome)
CLAIMS = [
    ("concat-scale", lambda T: ("CONCATENATION", [T((1, 2), "int8", 0.5, 0), T((1, 3), "int8", 0.25, 0)],
                                [T((1, 5), "int8", 0.5, 0)], {"axis": 1}, 2),
     "prepare", ("input", 1, "same-scale")),
    ("concat-zp", lambda T: ("CONCATENATION", [T((1, 2), "int8", 0.5, 1), T((1, 3), "int8", 0.5, 0)],
                             [T((1, 5), "int8", 0.5, 0)], {"axis": 1}, 2),
     "prepare", ("input", 0, "same-zero-point")),
    ("conv-filter-zp", lambda T: _conv(T, w_zp=1), "prepare", ("input", 1, "weight-zero-point")),
    ("conv-filter-scales", lambda T: _conv(T, w_scales=(0.1, 0.2)), "prepare", ("input", 1, "weight-axis")),
    ("conv-bias-zp", lambda T: _conv(T, b_zp=2, w_scales=(0.1,), b_scale="per-tensor"), "prepare",
     ("input", 2, "bias-zero-point")),
    ("conv-bias-zp-per-axis", lambda T: _conv(T, b_zp=2), "ok", ("input", 2, "bias-zero-point")),
    ("conv-bias-scale", lambda T: _conv(T, b_scale=[1.0, 1.0, 1.0]), "ok", ("input", 2, "bias-scale")),
    ("dw-filter-scales", lambda T: _dw(T, w_scales=(0.1, 0.2, 0.3)), "prepare", ("input", 1, "weight-axis")),
    ("dw-filter-zp", lambda T: _dw(T, w_zp=3), "ok", ("input", 1, "weight-zero-point")),
    ("dw-filter-axis-dimension", lambda T: _dw(T, w_qdim=1), "ok", ("input", 1, "weight-axis")),
    ("dw-bias-zp", lambda T: _dw(T, b_zp=1, w_scales=(0.1,)), "prepare", ("input", 2, "bias-zero-point")),
    ("dw-bias-zp-per-axis", lambda T: _dw(T, b_zp=1), "ok", ("input", 2, "bias-zero-point")),
    ("fc-axis", lambda T: _fc(T, w_scales=(0.1, 0.2, 0.3, 0.4), w_qdim=1), "prepare", ("input", 1, "weight-axis")),
    ("fc-bias-scale-per-tensor", lambda T: _fc(T, b_scale=[0.05 + 0.021 * 0.7]), "prepare", ("input", 2, "bias-scale")),
    ("fc-bias-scale-within-0.02", lambda T: _fc(T, b_scale=[0.05 + 0.019 * 0.7]), "ok", ("input", 2, "bias-scale")),
    ("fc-bias-scale-per-axis", lambda T: _fc(T, w_scales=(0.1, 0.2, 0.3), b_scale=[1.0, 1.0, 1.0]), "ok",
     ("input", 2, "bias-scale")),
    ("fc-bias-dtype", lambda T: _fc(T, b_dtype="int16"), "prepare", ("input", 2, "dtype")),
    ("fc-filter-zp", lambda T: _fc(T, w_zp=2), "ok", ("input", 1, "weight-zero-point")),
    ("l2-scale", _unary("L2_NORMALIZATION", 1 / 64, 0), "prepare", ("output", 0, "fixed-scale")),
    ("l2-zp", _unary("L2_NORMALIZATION", 1 / 128, 1), "prepare", ("output", 0, "fixed-zero-point")),
    ("logistic-scale", _unary("LOGISTIC", 1 / 255, -128), "prepare", ("output", 0, "fixed-scale")),
    ("logistic-zp", _unary("LOGISTIC", 1 / 256, 0), "ok", ("output", 0, "fixed-zero-point")),
    ("softmax-scale", _unary("SOFTMAX", 1 / 256 + 1.01 * SOFTMAX_EPS, -128, options={"beta": 1.0}),
     "prepare", ("output", 0, "fixed-scale")),
    ("softmax-scale-within", _unary("SOFTMAX", 1 / 256 + 0.99 * SOFTMAX_EPS, -128, options={"beta": 1.0}),
     "ok", ("output", 0, "fixed-scale")),
    ("softmax-zp", _unary("SOFTMAX", 1 / 256, -127, options={"beta": 1.0}), "prepare", ("output", 0, "fixed-zero-point")),
    ("tanh-scale", _unary("TANH", 1 / 100, 0), "ok", ("output", 0, "fixed-scale")),
    ("tanh-zp", _unary("TANH", 1 / 128, 5), "ok", ("output", 0, "fixed-zero-point")),
    ("log-softmax-scale", _unary("LOG_SOFTMAX", 17 / 256, 127), "prepare", ("output", 0, "fixed-scale")),
    ("log-softmax-zp", _unary("LOG_SOFTMAX", 16 / 256, 126), "prepare", ("output", 0, "fixed-zero-point")),
    ("pad-output-zp", lambda T: ("PAD", [T((1, 3), "int8", 0.5, 200), T((2, 2), "int32", data=np.array([[0, 0], [1, 1]], np.int32))],
                                 [T((1, 5), "int8", 0.5, 200)], {}, 2),
     "eval", ("output", 0, "zero-point-range")),
    ("padv2-constant", lambda T: ("PADV2", [T((1, 3), "int8", 0.5, 0),
                                            T((2, 2), "int32", data=np.array([[0, 0], [1, 1]], np.int32)),
                                            T((), "int8", 0.25, 0, data=np.array(3, np.int8))],
                                  [T((1, 5), "int8", 0.5, 0)], {}, 2),
     "eval", ("input", 2, "same-scale")),
    ("pad-same-scale", lambda T: ("PAD", [T((1, 3), "int8", 0.25, 1), T((2, 2), "int32", data=np.array([[0, 0], [1, 1]], np.int32))],
                                  [T((1, 5), "int8", 0.5, 0)], {}, 2),
     "ok", ("input", 0, "same-scale")),
    ("space-to-batch-scale", lambda T: ("SPACE_TO_BATCH_ND", [T((1, 2, 2, 1), "int8", 0.5, 0),
                                                              T((2,), "int32", data=np.array([2, 2], np.int32)),
                                                              T((2, 2), "int32", data=np.zeros((2, 2), np.int32))],
                                        [T((4, 1, 1, 1), "int8", 0.25, 0)], {}, 2),
     "prepare", ("input", 0, "same-scale")),
    ("batch-to-space-zp", lambda T: ("BATCH_TO_SPACE_ND", [T((4, 1, 1, 1), "int8", 0.5, 3),
                                                           T((2,), "int32", data=np.array([2, 2], np.int32)),
                                                           T((2, 2), "int32", data=np.zeros((2, 2), np.int32))],
                                     [T((1, 2, 2, 1), "int8", 0.5, 0)], {}, 2),
     "prepare", ("input", 0, "same-zero-point")),
    ("sub-zp-range", lambda T: ("SUB", [T((4,), "int8", 0.5, 300), T((4,), "int8", 0.5, 0)],
                                [T((4,), "int8", 0.5, 0)], {}, 2),
     "prepare", ("input", 0, "zero-point-range")),
    ("add-zp-range", lambda T: ("ADD", [T((4,), "int8", 0.5, 300), T((4,), "int8", 0.5, 0)],
                                [T((4,), "int8", 0.5, 0)], {}, 2),
     "ok", ("input", 0, "zero-point-range")),
    ("avgpool-scale", lambda T: ("AVERAGE_POOL_2D", [T((1, 2, 2, 1), "int8", 0.5, 0)], [T((1, 1, 1, 1), "int8", 0.25, 3)],
                                 {"padding": "VALID", "stride_w": 1, "stride_h": 1, "filter_width": 2,
                                  "filter_height": 2}, 2),
     "ok", ("input", 0, "same-scale")),
    ("maximum-scale", lambda T: ("MAXIMUM", [T((4,), "int8", 0.5, 0), T((4,), "int8", 0.25, 0)],
                                 [T((4,), "int8", 0.5, 0)], {}, 2),
     "ok", ("input", 1, "same-scale")),
    ("add-dtype", lambda T: ("ADD", [T((4,), "int8", 0.5, 0), T((4,), "int16", 0.5, 0)],
                             [T((4,), "int8", 0.5, 0)], {}, 2),
     "prepare", ("input", 1, "dtype")),
]


def _spec(t):
    from quantspec.dtypes import qtype as q
    params = None if t.scale is None else QuantParams(t.scale, t.zero_point, t.quantized_dimension)
    return TensorSpec(tuple(t.shape), q(t.dtype), params, None if t.data is None else np.asarray(t.data, q(t.dtype).dtype))


@pytest.mark.parametrize("claim", CLAIMS, ids=[c[0] for c in CLAIMS])
def test_enforcement_claim_matches_litert(claim):
    from litert_build import T, build
    _, make, expected, (side, index, rule) = claim
    op, inputs, outputs, options, version = make(T)
    model = build(op, inputs, outputs, options, version)
    feeds = [np.zeros(t.shape, qtype(t.dtype).dtype) if t.dtype != "int8" else _i8(t.shape)
             for t in inputs if t.data is None]
    assert outcome(model, feeds) == expected
    # the table says the same
    found = optable.findings(op, [_spec(t) for t in inputs], [_spec(t) for t in outputs])
    match = [f for f in found if (f.side, f.index, f.rule) == (side, index, rule)]
    assert match, f"no finding {rule} on {side} {index}: {found}"
    e = match[0].enforcement
    if expected == "ok":
        assert e.action == SILENT, e
    else:
        assert e.action == REJECTS and e.stage == expected, e
    # and LiteRT-rejected findings make enforce() raise, in the same stage
    if expected != "ok":
        with pytest.raises(QuantSpecError, match="LiteRT rejects"):
            optable.enforce(op, [_spec(t) for t in inputs], [_spec(t) for t in outputs])
    else:
        optable.enforce(op, [_spec(t) for t in inputs], [_spec(t) for t in outputs])


CONTROLS = {"conv": _conv, "dw": _dw, "fc": _fc, "fc-per-axis": lambda T: _fc(T, w_scales=(0.1, 0.2, 0.3)),
            "l2": _unary("L2_NORMALIZATION", 1 / 128, 0), "logistic": _unary("LOGISTIC", 1 / 256, -128),
            "softmax": _unary("SOFTMAX", 1 / 256, -128, options={"beta": 1.0}),
            "log-softmax": _unary("LOG_SOFTMAX", 16 / 256, 127),
            "pad": lambda T: ("PAD", [T((1, 3), "int8", 0.5, 2), T((2, 2), "int32", data=np.array([[0, 0], [1, 1]], np.int32))],
                              [T((1, 5), "int8", 0.5, 2)], {}, 2),
            "padv2": lambda T: ("PADV2", [T((1, 3), "int8", 0.5, 0), T((2, 2), "int32", data=np.array([[0, 0], [1, 1]], np.int32)),
                                          T((), "int8", 0.5, 0, data=np.array(3, np.int8))], [T((1, 5), "int8", 0.5, 0)], {}, 2),
            "concat": lambda T: ("CONCATENATION", [T((1, 2), "int8", 0.5, 0), T((1, 3), "int8", 0.5, 0)],
                                 [T((1, 5), "int8", 0.5, 0)], {"axis": 1}, 2),
            "space-to-batch": lambda T: ("SPACE_TO_BATCH_ND", [T((1, 2, 2, 1), "int8", 0.5, 0),
                                                               T((2,), "int32", data=np.array([2, 2], np.int32)),
                                                               T((2, 2), "int32", data=np.zeros((2, 2), np.int32))],
                                         [T((4, 1, 1, 1), "int8", 0.5, 0)], {}, 2),
            "batch-to-space": lambda T: ("BATCH_TO_SPACE_ND", [T((4, 1, 1, 1), "int8", 0.5, 0),
                                                               T((2,), "int32", data=np.array([2, 2], np.int32)),
                                                               T((2, 2), "int32", data=np.zeros((2, 2), np.int32))],
                                         [T((1, 2, 2, 1), "int8", 0.5, 0)], {}, 2),
            "sub": lambda T: ("SUB", [T((4,), "int8", 0.5, 100), T((4,), "int8", 0.5, 0)], [T((4,), "int8", 0.5, 0)], {}, 2)}


@pytest.mark.parametrize("name", sorted(CONTROLS))
def test_conformant_control_models_run(name):
    """Each violating model above differs from one of these in the violation only."""
    from litert_build import T, build
    op, inputs, outputs, options, version = CONTROLS[name](T)
    feeds = [np.zeros(t.shape, qtype(t.dtype).dtype) if t.dtype != "int8" else _i8(t.shape)
             for t in inputs if t.data is None]
    assert outcome(build(op, inputs, outputs, options, version), feeds) == "ok"
    assert [f for f in optable.findings(op, [_spec(t) for t in inputs], [_spec(t) for t in outputs])
            if f.rule not in ("zero-point-range",)] == []


def test_conformant_tensors_have_no_findings():
    from litert_build import T
    for make in (_conv, _dw, _fc, _unary("SOFTMAX", 1 / 256, -128), _unary("TANH", 1 / 128, 0)):
        op, inputs, outputs, _, _ = make(T)
        assert optable.findings(op, [_spec(t) for t in inputs], [_spec(t) for t in outputs]) == []


def test_findings_report_per_axis_activation_and_bad_scales():
    i8 = qtype("int8")
    x = TensorSpec((2, 3), i8, QuantParams([0.5, 0.25], [0, 0], 0))
    y = TensorSpec((2, 3), i8, QuantParams(0.0, 0))
    found = {(f.side, f.rule) for f in optable.findings("ADD", [x, x], [y])}
    assert ("input", "granularity") in found and ("output", "scale") in found
    with pytest.raises(InvalidArgumentError, match="is not in the LiteRT int8 op table"):
        optable.findings("CUSTOM_OP", [], [])
