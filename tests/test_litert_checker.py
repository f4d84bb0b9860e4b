"""Acceptance 2 of issue 5: for each rule, a conformant model is edited (flatbuffer object API) to
break exactly that rule, and check_model reports it — and nothing else — at the right operator and
tensor.  Where the checker says LiteRT rejects the model, the LiteRT interpreter is asked too (it
must fail to load or prepare it); where it says LiteRT silently computes, LiteRT must run it.

The conformant starting points are the converter-made example models and builder-made single-op
models whose parameters follow the spec."""

from __future__ import annotations

import json

import numpy as np
import pytest

from litert_build import T, build
from litert_models import EXAMPLES, bias_quantized_dimension_5, edit, example_bytes, litert_refuses, schema
from quantspec.litert import check_model
from quantspec.litert.checker import RULES, CheckReport, Violation
from refs import require

# --- conformant builder-made models --------------------------------------------------------------
rng = np.random.default_rng(7)
S_IN = np.float32(0.05)


def conv_model(filter_dim: int = 0, w_scales=None, bias: bool = True) -> bytes:
    """CONV_2D, 4 output channels, 4 input channels (so dimensions 0 and 3 both have 4 slices)."""
    sw = np.asarray(w_scales if w_scales is not None else [0.01, 0.02, 0.03, 0.04], np.float32)
    w = rng.integers(-127, 128, (4, 3, 3, 4), dtype=np.int8)
    b = T((4,), "int32", (S_IN.astype(np.float64) * sw.astype(np.float64)).astype(np.float32), 0, 0,
          rng.integers(-500, 500, 4).astype(np.int32), name="bias") if bias else None
    return build("CONV_2D", [T((1, 5, 5, 4), "int8", S_IN, 3, name="x"),
                             T((4, 3, 3, 4), "int8", sw, 0, filter_dim, w, name="filter"), b],
                 [T((1, 5, 5, 4), "int8", 0.2, -4, name="y")], {"padding": "SAME", "stride_w": 1, "stride_h": 1})


def fc_model(w_scales, b_scales=None, bias: bool = True) -> bytes:
    """FULLY_CONNECTED with 5 outputs and 6 inputs."""
    sw = np.asarray(w_scales, np.float32)
    b = None
    if bias:
        bs = (S_IN.astype(np.float64) * sw.astype(np.float64)).astype(np.float32) if b_scales is None else b_scales
        b = T((5,), "int32", bs, 0, 0, rng.integers(-500, 500, 5).astype(np.int32), name="bias")
    return build("FULLY_CONNECTED", [T((1, 6), "int8", S_IN, -3, name="x"),
                                     T((5, 6), "int8", sw, 0, 0, rng.integers(-127, 128, (5, 6), dtype=np.int8),
                                       name="weights"), b],
                 [T((1, 5), "int8", 0.3, 2, name="y")], {})


BASES = {
    "mlp": lambda: example_bytes("mlp_softmax"),
    "cnn": lambda: example_bytes("cnn"),
    "mixed": lambda: example_bytes("mixed"),
    "conv": conv_model,
    "fc-per-tensor": lambda: fc_model([0.02]),
    "fc-per-axis": lambda: fc_model([0.01, 0.02, 0.03, 0.04, 0.05]),
    "fc-no-bias": lambda: fc_model([0.02], bias=False),
    "dw-no-bias": lambda: build("DEPTHWISE_CONV_2D",
                                [T((1, 4, 4, 2), "int8", 0.1, 0), T((1, 3, 3, 2), "int8", [0.1, 0.2], 0, 3,
                                                                     rng.integers(-127, 128, (1, 3, 3, 2), np.int8)),
                                 None], [T((1, 4, 4, 2), "int8", 0.3, 1)], {"padding": "SAME", "depth_multiplier": 1}),
}


@pytest.mark.parametrize("base", sorted(BASES))
def test_bases_are_conformant(base):
    report = check_model(BASES[base]())
    assert report.ok, report.render()


# --- one edit per rule -----------------------------------------------------------------------------

def tensors(obj):
    return obj.subgraphs[0].tensors


def q(obj, i):
    return tensors(obj)[i].quantization


def _edit(i, field, edit):
    """A change of tensor ``i``'s quantization ``field`` (a list): ``edit(list) -> list``."""
    def change(obj):
        setattr(q(obj, i), field, edit(list(getattr(q(obj, i), field))))
    return change


def _put(values, k, value):
    values[k] = value
    return values


def set_scale(i, value, k=None):
    return _edit(i, "scale", lambda s: [value] * len(s) if k is None else _put(s, k, value))


def set_zp(i, value, k=0):
    return _edit(i, "zeroPoint", lambda z: _put(z, k, value))


def scale_times(i, factor, k=0):
    return _edit(i, "scale", lambda s: _put(s, k, float(np.float32(s[k]) * np.float32(factor))))


def retype(i, type_name, dtype=None):
    """Change a tensor's type (and convert its constant data, if any, to ``dtype``)."""
    def change(obj):
        S = schema()
        t = tensors(obj)[i]
        t.type = getattr(S.TensorType, type_name)
        if dtype is not None and t.buffer:
            buf = obj.buffers[t.buffer]
            old = np.asarray(buf.data, np.uint8).view(np.int8 if type_name in ("INT16",) else np.int32)
            buf.data = old.astype(dtype).view(np.uint8)
    return change


def per_axis_activation(obj):
    t = tensors(obj)[0]                       # mlp input [1, 20]: 20 scales along dimension 1
    t.quantization.scale = [t.quantization.scale[0]] * 20
    t.quantization.zeroPoint = [t.quantization.zeroPoint[0]] * 20
    t.quantization.quantizedDimension = 1


def weight_minus_128(obj):
    t = tensors(obj)[5]                       # cnn CONV_2D filter
    data = np.asarray(obj.buffers[t.buffer].data, np.uint8).copy()
    data[7] = 0x80                            # -128
    obj.buffers[t.buffer].data = data


def weight_axis(dim):
    def change(obj):
        tensors(obj)[1].quantization.quantizedDimension = dim
    return change


def op_code(name):
    def change(obj):
        S = schema()
        op = obj.subgraphs[0].operators[-1]
        code = obj.operatorCodes[op.opcodeIndex]
        code.builtinCode = code.deprecatedBuiltinCode = getattr(S.BuiltinOperator, name)
    return change


def zp_count(i, n):
    def change(obj):
        q(obj, i).zeroPoint = [q(obj, i).zeroPoint[0]] * n
    return change


def no_zero_point(i):
    def change(obj):
        q(obj, i).zeroPoint = None
    return change


# (case id, base, edit, [(rule, op index, tensor index)])
#   mlp:   op 0 FC(in 0, w 4, b 3 -> 5)  op 1 FC(5, w 2, b 1 -> 6)  op 2 SOFTMAX(6 -> 7)
#   cnn:   op 0 QUANTIZE(0 -> 6)  op 1 CONV(6, w 5, b 4 -> 7)  op 2 DW(7, w 3, b 2 -> 8)  op 3 ADD(7, 8 -> 9)
#          op 4 MAX_POOL(9 -> 10)  op 5 AVG_POOL(10 -> 11)  op 6 MEAN(11, 1 -> 12)  op 7 DEQUANTIZE(12 -> 13)
#   mixed: op 0 RESIZE(0, 3 -> 4)  op 1 PAD(4, 2 -> 5)  op 2 LOGISTIC(5 -> 6)  op 3 QUANTIZE(6 -> 7)
#          op 4 TANH(5 -> 8)  op 5 QUANTIZE(8 -> 9)  op 6 CONCAT(9, 7 -> 10)  op 7 TRANSPOSE(10, 1 -> 11)
#   conv / fc-*: op 0, tensors x 0, filter/weights 1, bias 2, y 3 (3 and 2 without bias)
CASES = [
    ("dtype-activation", "mlp", retype(7, "INT16"), [("dtype", 2, 7)]),
    ("dtype-weights", "mlp", retype(4, "INT16", np.int16), [("dtype", 0, 4)]),
    ("dtype-bias", "cnn", retype(4, "INT64", np.int64), [("dtype", 1, 4)]),
    ("granularity-activation", "mlp", per_axis_activation, [("granularity", 0, 0)]),
    ("scale-zero", "cnn", set_scale(12, 0.0), [("scale", 6, 12)]),
    ("scale-negative", "cnn", set_scale(12, -0.25), [("scale", 6, 12)]),
    ("scale-nan", "cnn", set_scale(12, float("nan")), [("scale", 6, 12)]),
    ("scale-inf", "cnn", set_scale(12, float("inf")), [("scale", 6, 12)]),
    ("scale-weights", "cnn", set_scale(5, 0.0, k=2), [("scale", 1, 5), ("bias-scale", 1, 4)]),
    ("zero-point-range", "cnn", set_zp(12, 200), [("zero-point-range", 6, 12)]),
    ("zero-point-range-low", "cnn", set_zp(12, -129), [("zero-point-range", 6, 12)]),
    ("weight-zero-point", "cnn", set_zp(5, 1, k=3), [("weight-zero-point", 1, 5)]),
    ("weight-zero-point-dw", "cnn", set_zp(3, -2, k=0), [("weight-zero-point", 2, 3)]),
    ("weight-range", "cnn", weight_minus_128, [("weight-range", 1, 5)]),
    ("weight-axis-dimension", "conv", weight_axis(3), [("weight-axis", 0, 1)]),
    ("weight-axis-count", "fc-no-bias", lambda o: (set_scale(1, 0.02)(o), setattr(q(o, 1), "scale", [0.02] * 3),
                                                   setattr(q(o, 1), "zeroPoint", [0] * 3)),
     [("weight-axis", 0, 1)]),
    ("fc-per-axis-dimension", "fc-per-axis", weight_axis(1), [("weight-axis", 0, 1)]),
    ("bias-zero-point", "cnn", set_zp(4, 5, k=0), [("bias-zero-point", 1, 4)]),
    ("bias-zero-point-fc", "fc-per-tensor", set_zp(2, 7), [("bias-zero-point", 0, 2)]),
    ("bias-scale", "cnn", scale_times(4, 1.01, k=2), [("bias-scale", 1, 4)]),
    ("bias-scale-fc-per-tensor", "fc-per-tensor", scale_times(2, 1.5), [("bias-scale", 0, 2)]),
    ("bias-scale-mlp", "mlp", scale_times(1, 0.5, k=9), [("bias-scale", 1, 1)]),
    ("bias-granularity", "fc-per-tensor", lambda o: (setattr(q(o, 2), "scale", [q(o, 2).scale[0]] * 5),
                                                     setattr(q(o, 2), "zeroPoint", [0] * 5)),
     [("bias-granularity", 0, 2)]),
    ("fixed-scale-softmax", "mlp", set_scale(7, 1 / 255), [("fixed-scale", 2, 7)]),
    ("fixed-zero-point-softmax", "mlp", set_zp(7, -127), [("fixed-zero-point", 2, 7)]),
    ("fixed-scale-logistic", "mixed", set_scale(6, 1 / 128), [("fixed-scale", 2, 6)]),
    ("fixed-zero-point-logistic", "mixed", set_zp(6, 0), [("fixed-zero-point", 2, 6)]),
    ("fixed-scale-tanh", "mixed", set_scale(8, 1 / 256), [("fixed-scale", 4, 8)]),
    ("fixed-zero-point-tanh", "mixed", set_zp(8, -128), [("fixed-zero-point", 4, 8)]),
    ("same-scale-resize", "mixed", scale_times(0, 1.5), [("same-scale", 0, 0)]),
    ("same-zero-point-resize", "mixed", set_zp(0, 3), [("same-zero-point", 0, 0)]),
    ("same-scale-concat", "mixed", scale_times(9, 1.25), [("same-scale", 6, 9)]),
    ("same-zero-point-concat", "mixed", set_zp(7, 1), [("same-zero-point", 6, 7)]),
    ("same-scale-transpose", "mixed", scale_times(11, 2.0), [("same-scale", 7, 10)]),
    ("same-scale-max-pool", "cnn", scale_times(10, 2.0), [("same-scale", 4, 9), ("same-scale", 5, 10)]),
    ("op-not-in-spec", "mixed", op_code("RELU"), [("op-not-in-spec", 7, None)]),
    ("legacy-uint8", "mixed", retype(11, "UINT8"), [("legacy-uint8", 7, 11)]),
    ("quantization-malformed-count", "mlp", zp_count(5, 2), [("quantization-malformed", 0, 5)]),
    ("quantization-malformed-missing", "cnn", no_zero_point(12), [("quantization-malformed", 6, 12)]),
    ("litert-load-op-version", "mlp", lambda o: setattr(o.operatorCodes[o.subgraphs[0].operators[2].opcodeIndex],
                                                        "version", 99), [("litert-load", 2, None)]),
    ("litert-load-variable-constant", "mlp", lambda o: setattr(o.subgraphs[0].tensors[4], "isVariable", True),
     [("litert-load", 0, 4)]),
]


def found(report: CheckReport):
    return sorted((v.rule, v.op_index, v.tensor_index) for v in report.violations)


@pytest.mark.parametrize("case,base,change,expected", CASES, ids=[c[0] for c in CASES])
def test_each_rule_is_reported_where_it_is_broken(case, base, change, expected):
    model = edit(BASES[base](), change)
    report = check_model(model)
    assert found(report) == sorted(expected), report.render()
    for v in report.violations:
        assert v.rule in RULES
        assert v.op_name and v.message and v.litert_check
        if v.tensor_index is not None:
            assert v.tensor_name and v.position
    assert not report.ok
    assert_litert_agrees(model, report)


def assert_litert_agrees(model: bytes, report: CheckReport) -> None:
    """Where the report says LiteRT rejects the model, LiteRT fails to load/prepare/run it; where
    every violation is one LiteRT silently computes, it runs."""
    ip = require("ai_edge_litert.interpreter")
    actions = {v.litert for v in report.violations}
    stages = {v.litert_stage for v in report.violations if v.litert_rejects}
    if None in actions or "aborts" in actions:
        return  # outside the spec, or a process abort: nothing to confirm in-process
    try:
        it = ip.Interpreter(model_content=model, experimental_op_resolver_type=ip.OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
        ran = True
    except (ValueError, RuntimeError):
        ran = False
    if stages:
        assert not ran, f"the report says LiteRT rejects the model ({stages}), but it ran"
    else:
        assert ran, "the report says LiteRT silently computes, but it refused the model"


def test_litert_behaviour_is_stated():
    cases = {c[0]: c for c in CASES}

    def report(case):
        _, base, change, _ = cases[case]
        return check_model(edit(BASES[base](), change))

    (v,) = report("fixed-scale-softmax").violations
    assert v.litert == "rejects" and v.litert_stage == "prepare" and v.litert_rejects
    (v,) = report("fixed-scale-tanh").violations
    assert v.litert == "silent" and not v.litert_rejects
    (v,) = report("quantization-malformed-count").violations
    assert v.litert == "rejects" and v.litert_stage == "load"
    (v,) = report("bias-scale").violations
    assert v.litert == "silent"
    r = report("same-scale-concat")
    assert r.rejected_by_litert and not r.silently_wrong


def test_bias_scale_within_float_rounding_is_conformant():
    """The converter writes f32(double(s_in) * double(s_w)); a float32 product, one ulp away, is fine."""
    def one_ulp(obj):
        s = np.asarray(q(obj, 4).scale, np.float32)
        q(obj, 4).scale = list(np.nextafter(s, np.float32(np.inf)).astype(float))

    assert check_model(edit(example_bytes("cnn"), one_ulp)).ok


def test_several_violations_are_all_reported():
    def many(obj):
        set_scale(7, 1 / 255)(obj)
        scale_times(1, 0.5, k=9)(obj)

    report = check_model(edit(example_bytes("mlp_softmax"), many))
    assert found(report) == [("bias-scale", 1, 1), ("fixed-scale", 2, 7)]


def test_report_renders_and_serialises():
    report = check_model(edit(example_bytes("mlp_softmax"), set_scale(7, 1 / 255)))
    text = report.render()
    assert "fixed-scale" in text and "2 SOFTMAX" in text and "7 Identity" in text and "rejects at prepare" in text
    data = json.loads(report.json())
    assert data["ok"] is False and data["summary"]["litert_rejects"] == 1
    (v,) = data["violations"]
    assert v["rule"] == "fixed-scale" and v["op_index"] == 2 and v["op_name"] == "SOFTMAX"
    assert v["tensor_index"] == 7 and v["tensor_name"] == "Identity"
    assert v["expected"] == pytest.approx(1 / 256) and v["found"] == pytest.approx(1 / 255)
    # non-finite values stay valid JSON
    nan = check_model(edit(example_bytes("cnn"), set_scale(12, float("nan"))))
    json.loads(nan.json(allow_nan=False))
    ok = check_model(EXAMPLES["cnn"])
    assert ok.ok and "conformant" in ok.render() and ok.to_json()["violations"] == []


def test_violation_contract():
    """DESIGN.md: Violation(rule, op_index, tensor_index, message)."""
    v = Violation("scale", 3, 7, "scales must be finite and > 0")
    assert (v.rule, v.op_index, v.tensor_index, v.message) == ("scale", 3, 7, "scales must be finite and > 0")
    assert "scale" in str(v)
    # built without per-resolver verdicts, every resolver has the reference verdict (the litert* fields)
    w = Violation("fixed-scale", 2, 7, "output scale must be 1/256", litert="rejects", litert_stage="prepare")
    assert w.verdicts == {"reference": "rejects", "optimized": "rejects", "xnnpack": "rejects"}
    assert w.rejected_by() == ("reference", "optimized", "xnnpack") and w.rejected_by("xnnpack") == ("xnnpack",)
    assert w.resolvers_text("reference") == "rejects at prepare (reference)"


def test_rule_ids_are_documented():
    for rule in ("dtype", "granularity", "scale", "zero-point-range", "weight-zero-point", "weight-range",
                 "weight-axis", "bias-zero-point", "bias-scale", "bias-granularity", "fixed-scale",
                 "fixed-zero-point", "same-scale", "same-zero-point", "op-not-in-spec", "legacy-uint8",
                 "quantization-malformed", "litert-load"):
        assert RULES[rule]
    assert {c[3][0][0] for c in CASES} == set(RULES)  # every rule has a case above


def test_check_still_reports_what_litert_rejects_at_load():
    """Found by fuzzing the .tflite reader: with the reader requiring what LiteRT's flatbuffer verifier
    requires, check_model still reports (rather than refuses) what LiteRT rejects only at load: a
    bias's quantized_dimension of 5."""
    report = check_model(bias_quantized_dimension_5())
    assert not report.ok and any(v.rule == "quantization-malformed" for v in report.violations)


@pytest.mark.parametrize("shape", [[944111617, 1295271263, 51, 4], [1 << 30, 1 << 30, 1 << 4, 1]])
def test_a_tensor_whose_size_overflows_64_bits_is_refused_as_litert_refuses_it(shape):
    """A tensor whose dimensions multiply past 2^64 elements (or bytes) counted as LiteRT's
    BytesRequired counts them: LiteRT refuses the model at load ("Tensor 7 is invalidly specified in
    schema"); check_model called it conformant (found by the 20000-example .tflite fuzzer, mutant
    21401 of mixed.tflite)."""
    def big(obj):
        obj.subgraphs[0].tensors[7].shape = shape
    data = edit(example_bytes("mixed"), big)
    reason = litert_refuses(data)
    assert "overflowed" in reason or "invalidly specified" in reason, reason
    report = check_model(data)
    found = [v for v in report.violations if v.rule == "litert-load" and v.tensor_index == 7]
    assert not report.ok and found and "overflows 64 bits" in found[0].message, report
    assert check_model(example_bytes("mixed")).ok
