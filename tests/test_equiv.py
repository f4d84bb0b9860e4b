"""quantspec.equiv: the quantizer records, their spec strings, the exhaustive comparison, the decision
thresholds, translate and its converter rules (the TFLite converter is run on FakeQuant models), and
the ``quantspec equiv`` command."""

from __future__ import annotations

import json
import os

import ml_dtypes
import numpy as np
import pytest

from refs import require, require_fast

import quantspec
import quantspec.litert as L
import quantspec.onnx as O
import quantspec.tf as T
from quantspec.cli import main as cli_main
from quantspec.equiv import thresholds as th
from quantspec.equiv.converters import tflite_fake_quant
from quantspec.equiv.prove import code_offset
from quantspec.equiv.specstring import parse, parse_target
from quantspec.errors import DTypeError, InvalidArgumentError, QuantSpecError, ShapeError, UnsupportedError

RNG = np.random.default_rng(20260702)
X = np.concatenate([RNG.normal(0, 4, 4000), [0.0, -0.0, np.inf, -np.inf, np.nan, 0.125, 2.5, -2.5, 6.0, -6.0]])
X = X.astype(np.float32)


# -- records ---------------------------------------------------------------------------------------------
RECORDS = [
    (T.QuantizeV2Op(-6, 6), lambda x: T.quantize(x, -6.0, 6.0, "qint8")[0]),
    (T.QuantizeV2Op(-1.3, 2.7, "quint8", "MIN_FIRST"), lambda x: T.quantize(x, -1.3, 2.7, "quint8",
                                                                            mode="MIN_FIRST")[0]),
    (T.QuantizeV2Op(-2, 3, "qint16", "SCALED", "HALF_TO_EVEN"),
     lambda x: T.quantize(x, -2.0, 3.0, "qint16", mode="SCALED", round_mode="HALF_TO_EVEN")[0]),
    (T.FakeQuantOp(-1.3, 2.7), lambda x: T.fake_quant_with_min_max_args(x, min=-1.3, max=2.7)),
    (T.FakeQuantOp(-1.3, 2.7, variant="vars", narrow_range=True),
     lambda x: T.fake_quant_with_min_max_vars(x, np.float32(-1.3), np.float32(2.7), narrow_range=True)),
    (T.QuantizeAndDequantizeOp(-1.3, 2.7, version=3),
     lambda x: T.quantize_and_dequantize_v3(x, np.float32(-1.3), np.float32(2.7), 8)),
    (O.QuantizeLinearOp(0.05, -3, "int8"), lambda x: O.quantize_linear(x, np.float32(0.05), np.int8(-3))),
    (O.QuantizeLinearOp(0.1, output_dtype="uint4"), lambda x: O.quantize_linear(x, np.float32(0.1),
                                                                               output_dtype="uint4")),
    (L.QuantizeOp(L.QuantParams(0.05, -3)), lambda x: L.quantize(x, L.QuantParams(0.05, -3))),
]


@pytest.mark.parametrize("record,function", RECORDS, ids=lambda r: str(r)[:60] if not callable(r) else "")
def test_record_calls_its_spec_function(record, function):
    got = record(X)
    want = function(X)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    out = np.empty(X.size, record.out_dtype)
    record.run(X, out)
    assert out.tobytes() == np.asarray(want).reshape(-1).tobytes()


def test_dequantize_records_call_their_functions():
    q = np.arange(-128, 128, dtype=np.int8)
    assert T.DequantizeOp(-6, 6)(q).tobytes() == T.dequantize(q, -6.0, 6.0).tobytes()
    assert O.DequantizeLinearOp(0.05, -3, "int8")(q).tobytes() == O.dequantize_linear(q, np.float32(0.05),
                                                                                       np.int8(-3)).tobytes()
    assert L.DequantizeOp(L.QuantParams(0.05, -3))(q).tobytes() == L.dequantize(q, L.QuantParams(0.05, -3)).tobytes()


def test_per_axis_records_and_channels():
    r = T.QuantizeV2Op((-1, -2), (1, 3), axis=0, mode="SCALED")
    assert r.channels == 2 and r.channel(1) == T.QuantizeV2Op((-2,), (3,), axis=0, mode="SCALED")
    x = RNG.normal(0, 2, (2, 50)).astype(np.float32)
    whole = r(x)
    for c in range(2):
        out = np.empty(50, np.int8)
        r.channel(c).run(x[c], out)
        assert out.tobytes() == whole[c].tobytes()
    o = O.QuantizeLinearOp((0.1, 0.2), (1, 2), "int8", axis=0)
    assert o.channel(1) == O.QuantizeLinearOp(0.2, 2, "int8", axis=0)
    with pytest.raises(InvalidArgumentError, match="channel index"):
        o.channel(2)


@pytest.mark.parametrize("make,argument", [
    (lambda: T.QuantizeV2Op(-1, 1, mode="NOPE"), "mode"),
    (lambda: T.QuantizeV2Op(2, 1), "max_range"),
    (lambda: T.QuantizeV2Op((-1, -2), 1, axis=0), "max_range"),
    (lambda: T.QuantizeV2Op(-1, 1, "qint9"), "T"),
    (lambda: T.FakeQuantOp(1, 1), "min"),
    (lambda: T.FakeQuantOp(-1, 1, variant="nope"), "variant"),
    (lambda: O.QuantizeLinearOp(0.1, 300, "int8"), "zero_point"),
    (lambda: O.QuantizeLinearOp(0.1, output_dtype="int4", opset=13), "output_dtype"),
    (lambda: O.QuantizeLinearOp((0.1, 0.2), (1, 2, 3), "int8"), "zero_point"),
    (lambda: L.QuantizeOp(L.QuantParams(0.1, 200)), "params.zero_point"),
    (lambda: L.QuantizeOp("x"), "params"),
])
def test_bad_records_raise_naming_the_argument(make, argument):
    with pytest.raises(QuantSpecError) as e:
        make()
    assert e.value.argument == argument


# -- spec strings ------------------------------------------------------------------------------------------
STRINGS = [
    "tf:QuantizeV2 mode=MIN_COMBINED T=qint8 min=-6 max=6",
    "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-1,-2 max=1,2 axis=0",
    "tf:Dequantize mode=MIN_FIRST T=quint8 min=-1 max=3",
    "tf:FakeQuant variant=per_channel min=-1,-2 max=1,2 num_bits=4 narrow_range=true",
    "tf:QuantizeAndDequantize version=3 min=-1.3 max=2.7 signed_input=true num_bits=8 range_given=true",
    "onnx:QuantizeLinear opset=21 scale=0.05 zero_point=0 output_dtype=int8",
    "onnx:QuantizeLinear opset=23 scale=0.05 zero_point=-3 output_dtype=int8 x_dtype=float16",
    "onnx:DequantizeLinear scale=0.05 zero_point=-3 x_dtype=int8",
    "litert:QUANTIZE scale=0.05 zero_point=-3",
    "litert:DEQUANTIZE scale=0.05,0.1 zero_point=-3 quantized_dimension=1 input_dtype=int16",
]


@pytest.mark.parametrize("text", STRINGS)
def test_spec_strings_round_trip(text):
    r = parse(text)
    assert parse(r.spec_string()) == r
    assert str(r) == r.spec_string()


def test_spec_string_aliases():
    assert parse("tf:FakeQuantWithMinMaxVars min=-1 max=1").variant == "vars"
    assert parse("tf:QuantizeAndDequantizeV4 min=-1 max=1 range_given=true").version == 4
    assert parse("tflite:quantize scale=0.5 zp=1") == L.QuantizeOp(L.QuantParams(0.5, 1))
    assert parse_target("onnx output_dtype=uint8 opset=13") == ("onnx", None, {"output_dtype": "uint8", "opset": 13})
    assert parse_target("tf:QuantizeV2 mode=SCALED") == ("tf", "quantizev2", {"mode": "SCALED"})


@pytest.mark.parametrize("text", ["", "x", "foo:Bar", "tf:Nope min=1", "onnx:QuantizeLinear",
                                  "onnx:QuantizeLinear scale=abc", "onnx:QuantizeLinear scale=0.1 oops",
                                  "onnx:QuantizeLinear scale=0.1 scale=0.2", "litert:QUANTIZE scale=0.1 foo=1",
                                  "tf:QuantizeV2 min=-1 max=1 narrow_range=maybe",
                                  "onnx:QuantizeLinear scale=0.1 axis=x"])
def test_bad_spec_strings(text):
    with pytest.raises(InvalidArgumentError):
        parse(text)


# -- the exhaustive comparison ------------------------------------------------------------------------------
def _brute(a, b, x):
    """Both records on ``x``, compared in numpy (the counts equivalent() must give)."""
    ya, yb = np.empty(x.size, a.out_dtype), np.empty(x.size, b.out_dtype)
    a.run(x.astype(a.input_dtype), ya)
    b.run(x.astype(b.input_dtype), yb)
    off = code_offset(a, b)
    ca, cb = th.codes_of(a, x.astype(a.input_dtype), off), th.codes_of(b, x.astype(b.input_dtype))
    diff = ca != cb
    xf = x.astype(np.float64)
    lo = min(a.real_range()[0], b.real_range()[0])
    hi = max(a.real_range()[1], b.real_range()[1])
    finite = np.isfinite(xf)
    inside = diff & finite & (xf >= lo) & (xf <= hi)
    outside = diff & finite & ~((xf >= lo) & (xf <= hi))
    both = diff & (ca != -(1 << 62)) & (cb != -(1 << 62))
    return (int(inside.sum()), int(outside.sum()), int((diff & ~finite).sum()),
            int(np.abs(ca[both] - cb[both]).max()) if both.any() else 0, np.flatnonzero(diff))


@pytest.mark.parametrize("a,b,domain", [
    (L.QuantizeOp(L.QuantParams(0.05, -3)), O.QuantizeLinearOp(0.05, -3, "int8"), "float16"),
    (L.QuantizeOp(L.QuantParams(0.05, -3)), O.QuantizeLinearOp(0.05, 125, "uint8"), "bfloat16"),
    (T.FakeQuantOp(-6, 6), L.QuantizeOp(L.QuantParams(0.047058824, 0)), "float16"),
    (T.QuantizeV2Op(-6, 6), O.QuantizeLinearOp(0.047058824, -1, "int8"), "bfloat16"),
    (O.QuantizeLinearOp(0.05, -3, "int8", x_dtype="float16", compat="reference"),
     O.QuantizeLinearOp(0.049987793, -3, "int8"), "float16"),
])
def test_equivalent_counts_equal_a_direct_comparison(a, b, domain):
    require_fast()
    dt = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[domain]
    x = np.arange(1 << 16, dtype=np.uint16).view(dt)
    r = quantspec.equivalent(a, b, domain)
    inside, outside, nonfinite, largest, idx = _brute(a, b, x)
    assert (r.inside, r.outside, r.nonfinite, r.max_difference) == (inside, outside, nonfinite, largest)
    assert r.inputs == 1 << 16 and r.complete
    assert np.array_equal(r.differing_bits, idx.astype(np.uint64))
    assert [e.bits for e in r.examples] == idx[: len(r.examples)].tolist()
    for e in r.examples:
        assert e.a != e.b


def test_equivalent_subrange_array_and_chunks():
    require_fast()
    a, b = L.QuantizeOp(L.QuantParams(0.05, -3)), O.QuantizeLinearOp(0.05, -3, "int8")
    start, stop = 0x3d000000, 0x3d000000 + (1 << 18)
    r = quantspec.equivalent(a, b, "float32", subrange=(start, stop), chunk=5000)
    x = np.arange(start, stop, dtype=np.uint32).view(np.float32)
    inside, outside, nonfinite, largest, idx = _brute(a, b, x)
    assert (r.inside, r.outside, r.nonfinite, r.max_difference) == (inside, outside, nonfinite, largest)
    assert np.array_equal(r.differing_bits, (idx + start).astype(np.uint64))
    r2 = quantspec.equivalent(a, b, x)
    assert r2.counts() == {**r.counts(), "inputs": x.size} and r2.domain == "array"
    r3 = quantspec.equivalent(a, b, "float32", subrange=(start, stop), keep=3)
    assert r3.differing_bits.size == min(3, r.differing) and r3.complete == (r.differing <= 3)


def test_equivalent_per_channel_and_dequantizers():
    require_fast()
    a = T.QuantizeV2Op((-1, -2), (1, 3), axis=0, mode="SCALED", round_mode="HALF_TO_EVEN")
    b = O.QuantizeLinearOp((1 / 127, 3 / 127), 0, "int8", axis=0)
    r = quantspec.equivalent(a, b, "float16")
    assert len(r.channels) == 2 and r.inputs == 2 << 16
    for c in range(2):
        rc = quantspec.equivalent(a.channel(c), b.channel(c), "float16")
        assert rc.max_difference == r.channels[c].max_difference
        assert (rc.inside, rc.outside, rc.nonfinite) == (r.channels[c].inside, r.channels[c].outside,
                                                         r.channels[c].nonfinite)
    d = quantspec.equivalent(L.DequantizeOp(L.QuantParams(0.05, -3)), O.DequantizeLinearOp(0.05, -3, "int8"))
    assert d.equal and d.inputs == 256 and d.domain == "codes:int8"
    d2 = quantspec.equivalent(T.DequantizeOp(-6, 6), O.DequantizeLinearOp(0.05, -3, "int8"))
    q = np.arange(-128, 128, dtype=np.int8)
    want = int(np.count_nonzero(T.dequantize(q, -6.0, 6.0) != O.dequantize_linear(q, np.float32(0.05), np.int8(-3))))
    assert d2.differing == want and d2.kind == "values"


def test_equivalent_refuses_what_it_cannot_compare():
    q = L.QuantizeOp(L.QuantParams(0.05, -3))
    with pytest.raises(DTypeError):
        quantspec.equivalent(q, "onnx")
    with pytest.raises(UnsupportedError):
        quantspec.equivalent(q, L.DequantizeOp(L.QuantParams(0.05, -3)))
    with pytest.raises(DTypeError):          # float32 inputs do not convert exactly to float16
        quantspec.equivalent(q, O.QuantizeLinearOp(0.05, -3, "int8", x_dtype="float16"), "float32")
    with pytest.raises(InvalidArgumentError):
        quantspec.equivalent(q, q, "float64")
    with pytest.raises(InvalidArgumentError):
        quantspec.equivalent(q, q, "float16", subrange=(5, 3))
    with pytest.raises(ShapeError):
        quantspec.equivalent(T.QuantizeV2Op((-1, -2), (1, 2), axis=0),
                             T.QuantizeV2Op((-1, -2, -3), (1, 2, 3), axis=0), "float16")
    with pytest.raises(UnsupportedError, match="range_given"):
        quantspec.equivalent(T.QuantizeAndDequantizeOp(-1, 1, version=4), q, "float16")


# -- thresholds ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("a,b", [
    (L.QuantizeOp(L.QuantParams(0.05, -3)), O.QuantizeLinearOp(0.05, -3, "int8")),
    (T.FakeQuantOp(-6, 6), L.QuantizeOp(L.QuantParams(0.05, -3))),
    (T.QuantizeV2Op(-6, 6), O.QuantizeLinearOp(0.047058824, -1, "int8")),
])
@pytest.mark.parametrize("lo", [-0.75, 0.1249])
def test_threshold_counts_equal_the_exhaustive_count(a, b, lo):
    """The exact count from decision thresholds (translate's score) against the enumeration, over the
    2^22 float32 inputs that follow ``lo`` in value order."""
    require_fast()
    order = th.ordinals_for(np.float32)
    first = int(order.of_bits(np.array([np.float32(lo).view(np.uint32)]))[0])
    window = (first, first + (1 << 22))
    off = code_offset(a, b)
    count, largest = th.disagreement(th.thresholds(a, off, order, window=window),
                                     th.thresholds(b, 0, order, window=window))
    bits = order.to_bits(np.array(window[0] if lo > 0 else window[1] - 1))
    start = int(bits)
    r = quantspec.equivalent(a, b, "float32", subrange=(start, start + (1 << 22)), keep=0)
    assert r.nonfinite == 0 and count == r.differing and count > 0
    assert largest == r.max_difference


# -- translate and the converters -------------------------------------------------------------------------
def test_top_level_names_are_the_functions_whatever_was_imported_first():
    """``quantspec.translate`` is the function even where the module of the same name,
    ``quantspec.equiv.translate``, was imported first (a fresh interpreter)."""
    import subprocess
    import sys

    code = ("import quantspec.equiv.translate, quantspec.equiv.prove, quantspec\n"
            "import quantspec.equiv as E\n"
            "assert callable(quantspec.translate) and callable(quantspec.equivalent), quantspec.translate\n"
            "assert E.translate is quantspec.translate and E.equivalent is quantspec.equivalent\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_translate_keeps_the_converters_choice_where_it_is_the_best():
    require_fast()
    t = quantspec.translate("litert:QUANTIZE scale=0.05 zero_point=-3", "onnx", inputs="float16")
    assert t.same_as_converter is True and t.target == O.QuantizeLinearOp(0.05, -3, "int8", opset=13)
    t = quantspec.translate(T.QuantizeAndDequantizeOp(-1.3, 2.7, version=3), "onnx", inputs=None)
    assert t.same_as_converter is True and t.target.scale == float(np.float32(2.7) / np.float32(127))
    t = quantspec.translate("litert:DEQUANTIZE scale=0.05 zero_point=-3", "onnx")
    assert t.same_as_converter is True and t.report.equal


def test_translate_scores_and_chooses_the_minimum():
    require_fast()
    t = quantspec.translate(T.FakeQuantOp(-1.3, 2.7), "litert", inputs=None)
    assert t.converter is not None and t.converter.record is not None
    best = min(c.score for c in t.candidates)
    assert t.candidates[0].score == best
    conv = [c for c in t.candidates if c.record == t.converter.record]
    assert conv and conv[0].score >= best
    t2 = quantspec.translate("tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-6 max=6", "onnx",
                             inputs="float16")
    assert t2.report.equal and t2.target == O.QuantizeLinearOp(np.float32(6) / np.float32(127), 0, "int8")
    assert t2.converter.record is None          # tf2onnx has no QuantizeV2 handler


def test_translate_fixed_fields_and_errors():
    t = quantspec.translate("litert:QUANTIZE scale=0.05 zero_point=-3", "onnx output_dtype=uint8", inputs=None)
    assert t.target.output_dtype == "uint8" and t.target.zero_point == 125
    assert not t.same_as_converter
    with pytest.raises(UnsupportedError):
        quantspec.translate("tf:QuantizeV2 T=qint32 min=-1 max=1", "onnx", inputs=None)
    with pytest.raises(UnsupportedError):
        quantspec.translate("litert:QUANTIZE scale=0.05", "onnx:DequantizeLinear", inputs=None)
    with pytest.raises(InvalidArgumentError):
        quantspec.translate("litert:QUANTIZE scale=0.05", "pytorch", inputs=None)


def test_translate_per_channel():
    require_fast()
    t = quantspec.translate("tf:QuantizeV2 mode=SCALED T=qint8 min=-1,-2 max=1,2 axis=0", "onnx", inputs="float16")
    assert t.target.channels == 2 and t.target.axis == 0
    assert t.report is not None and len(t.report.channels) == 2


def _tflite_input_params(mn, mx, narrow, variant):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = require("tensorflow")
    interp = require("ai_edge_litert.interpreter")

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 16], tf.float32)])
        def f(self, x):
            if variant == "args":
                y = tf.quantization.fake_quant_with_min_max_args(x, min=mn, max=mx, narrow_range=narrow)
            else:
                y = tf.quantization.fake_quant_with_min_max_vars(x, tf.constant(np.float32(mn)),
                                                                 tf.constant(np.float32(mx)), narrow_range=narrow)
            return y * 1.0

    m = M()
    c = tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.inference_input_type = tf.int8
    c.inference_output_type = tf.int8
    it = interp.Interpreter(model_content=c.convert())
    q = it.get_input_details()[0]["quantization_parameters"]
    return float(q["scales"][0]), int(q["zero_points"][0])


@pytest.mark.parametrize("mn,mx,narrow,variant", [(-6.0, 6.0, False, "args"), (-1.3, 2.7, False, "args"),
                                                  (0.5, 2.7, False, "args"), (-1.3, 2.7, True, "args"),
                                                  (-1.3, 2.7, False, "vars"), (-100.0, 3.0, False, "vars"),
                                                  (-0.01, 0.02, True, "args")])
def test_tflite_converter_rule_is_what_the_converter_writes(mn, mx, narrow, variant):
    """The TFLite converter itself, on a FakeQuant model: its input tensor's parameters are the rule's."""
    scale, zp = _tflite_input_params(mn, mx, narrow, variant)
    src = T.FakeQuantOp(mn, mx, narrow_range=narrow, variant=variant)
    assert (scale, zp) == tflite_fake_quant(src.min, src.max, narrow)
    t = quantspec.translate(src, "litert", inputs=None)
    assert t.converter.record == L.QuantizeOp(L.QuantParams(scale, zp))
    if t.same_as_converter:
        assert t.target == t.converter.record
    else:      # translate found a record that agrees with FakeQuant on more inputs
        conv = next(c for c in t.candidates if c.record == t.converter.record)
        assert conv.score > t.candidates[0].score


# -- the command ---------------------------------------------------------------------------------------------
def test_cli_translates_and_reports(capsys):
    require_fast()
    rc = cli_main(["equiv", "--from", "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-6 max=6",
                   "--to", "onnx", "--inputs", "float16"])
    out = capsys.readouterr().out
    assert rc == 0 and "target:    onnx:QuantizeLinear" in out and "equivalent" in out
    rc = cli_main(["equiv", "--from", "litert:QUANTIZE scale=0.05 zero_point=-3", "--to",
                   "onnx:QuantizeLinear scale=0.05 zero_point=-3 output_dtype=int8", "--inputs", "bfloat16", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["differing"] == data["inside"] + data["outside"] + data["nonfinite"] > 0
    assert data["domain"] == "bfloat16" and data["examples"]


@pytest.mark.parametrize("argv", [["--to", "onnx"], ["--from", "x", "--to", "onnx"],
                                  ["--from", "litert:QUANTIZE scale=0.05", "--to", "onnx oops"],
                                  ["--from", "tf:QuantizeV2 min=1", "--to", "onnx"],
                                  ["--from", "litert:QUANTIZE scale=0.05", "--to", "onnx", "--inputs", "float64"]])
def test_cli_bad_input_is_one_line_and_exit_2(argv, capsys):
    rc = cli_main(["equiv", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err


# -- docs/translate.md's table -----------------------------------------------------------------------------
def test_translate_table_matches_the_script():
    """tools/translate_table.py against the table in docs/translate.md: the records and the float16
    counts always; the float32 counts (every input: minutes) with QUANTSPEC_EQUIV_FULL=1."""
    require_fast()
    import sys
    from pathlib import Path

    tools = Path(__file__).resolve().parents[1] / "tools"
    sys.path.insert(0, str(tools))
    try:
        import translate_table
    finally:
        sys.path.remove(str(tools))
    assert translate_table.check(full=os.environ.get("QUANTSPEC_EQUIV_FULL") == "1") == []


def _tf2onnx_qdq_params(kind: str, mn: float, mx: float, **kw):
    """tf2onnx itself on a one-op TensorFlow function: (scale, zero point) of its QuantizeLinear, or
    None where it refuses the conversion."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = require("tensorflow")
    tf2onnx = require("tf2onnx")
    from onnx import numpy_helper

    spec = [tf.TensorSpec([4], tf.float32)]

    @tf.function(input_signature=spec)
    def f(x):
        if kind == "args":
            return tf.quantization.fake_quant_with_min_max_args(x, min=mn, max=mx, **kw)
        if kind == "vars":
            return tf.quantization.fake_quant_with_min_max_vars(x, tf.constant(np.float32(mn)),
                                                                tf.constant(np.float32(mx)), **kw)
        return tf.raw_ops.QuantizeAndDequantizeV4(input=x, input_min=tf.constant(np.float32(mn)),
                                                  input_max=tf.constant(np.float32(mx)), num_bits=8,
                                                  range_given=True, **kw)

    try:
        model, _ = tf2onnx.convert.from_function(f, input_signature=spec, opset=13)
    except Exception:          # tf2onnx refuses (a zero point outside uint8, narrow_range, ...)
        return None
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    node = next((n for n in model.graph.node if n.op_type == "QuantizeLinear"), None)
    if node is None:           # tf2onnx logged its refusal and left the op unconverted
        return None
    return float(inits[node.input[1]]), int(inits[node.input[2]]), str(inits[node.input[2]].dtype)


@pytest.mark.parametrize("kind,mn,mx,kw", [
    ("args", -6.0, 6.0, {}), ("args", -1.3, 2.7, {}), ("vars", -1.3, 2.7, {}), ("args", -0.5, 3.1, {}),
    ("vars", -100.0, 3.0, {}), ("args", -2.5, 2.6, {}), ("args", 0.5, 2.7, {}), ("args", -1.3, 2.7,
                                                                                 {"narrow_range": True}),
    ("qdq", -1.3, 2.7, {"signed_input": True}), ("qdq", 0.0, 3.0, {"signed_input": False}),
    ("qdq", -1.0, 1.0, {"signed_input": True, "narrow_range": True}),
])
def test_tf2onnx_rules_are_what_tf2onnx_writes(kind, mn, mx, kw):
    """tf2onnx itself, on FakeQuant and QuantizeAndDequantize functions: its QDQ parameters (or its
    refusal) are the rule's, and translate's converter record."""
    got = _tf2onnx_qdq_params(kind, mn, mx, **kw)
    if kind == "qdq":
        src = T.QuantizeAndDequantizeOp(mn, mx, version=4, range_given=True, **kw)
    else:
        src = T.FakeQuantOp(mn, mx, variant=kind, **kw)
    conv = quantspec.translate(src, "onnx", inputs=None).converter
    if got is None:
        assert conv.record is None
        return
    scale, zp, dtype = got
    assert conv.record == O.QuantizeLinearOp(scale, zp, dtype, opset=13)


def test_signalling_nan_examples_raise_no_warning():
    """A differing input that is a signalling NaN (bfloat16 0x7F81...: its cast to float64 sets the
    invalid flag, which numpy turns into a RuntimeWarning) is reported without a warning."""
    import warnings

    require_fast()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = quantspec.translate("tf:FakeQuant variant=args min=-1.3 max=2.7", "onnx", inputs="bfloat16")
    rep = tr.report
    assert rep.nonfinite > 0 and rep.examples[0].bits == 0x7F81 and np.isnan(rep.examples[0].x)


def test_a_grid_beyond_float32_raises_no_warning():
    """A LiteRT dequantizer whose grid reaches past float32's range (scale 3e38): TensorFlow's range
    candidates are float32's largest values, chosen without numpy's overflow warning (the fuzzer's
    20000-example run met it as an escaping RuntimeWarning)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            quantspec.translate("litert:DEQUANTIZE scale=3e38 zero_point=0 input_dtype=int8", "tf:Dequantize",
                                inputs=None)
        except QuantSpecError:
            pass


def test_an_integer_scale_type_takes_integers_only():
    """A QuantizeLinear record of int32 x has an int32 scale (x's type, before opset 23): a scale of
    0.05 was truncated to a zero scale, and inf cast with numpy's invalid-value warning (the fuzzer's
    20000-example run); both are now refused naming the scale, and integer scales still work."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for text in ("onnx:QuantizeLinear x_dtype=int32 scale=0.05 zero_point=0 output_dtype=int8",
                     "onnx:QuantizeLinear x_dtype=int8 scale=inf zero_point=-86 output_dtype=int8"):
            with pytest.raises(InvalidArgumentError, match="scale: must hold integers"):
                parse(text)
    r = parse("onnx:QuantizeLinear x_dtype=int32 scale=3 zero_point=0 output_dtype=int8")
    assert parse(r.spec_string()) == r
    assert r(np.array([-7, -1, 1, 5, 300], np.int32)).tolist() == [-2, 0, 0, 2, 100]   # rint(x / 3)


def test_a_simulated_quantizer_with_infinite_outputs_raises_no_warning():
    """A QuantizeAndDequantize whose range reaches float32's largest value gives inf for some inputs;
    their codes are found as the counting kernels find them, without numpy's invalid-value warning
    (the fuzzer's 20000-example run met it escaping from translate)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = quantspec.translate("tf:QuantizeAndDequantize min=-3.3999999521443642e+38 version=2 range_given=true "
                                "max=3.3999999521443642e+38", "tf", inputs=None)
    assert t.target.spec == "tf"


@pytest.mark.parametrize("text", ["tf:FakeQuant variant=vars min=0 max=0",
                                  "tf:FakeQuant variant=per_channel min=0,0,-1 max=0,0,2"])
def test_a_fake_quant_without_a_grid_is_refused_by_translate_and_equivalent(text):
    """Found by the fuzzers' equiv recipes: FakeQuant with min == max == 0 (Vars, PerChannel: TensorFlow gives 0 for every input) has no
    grid: its zero point is NaN, and nudged() / grid() / real_range() raised a bare ValueError
    ("cannot convert float NaN to integer"), which escaped from translate and equivalent."""
    import quantspec
    from quantspec.equiv import parse
    from quantspec.errors import UnsupportedError

    r = parse(text)
    x = np.array([[1.0, -1.0, 0.5]] * 2, np.float32)
    assert (r(x if r.variant == "per_channel" else x[0])[..., 0] == 0).all()    # the record runs
    for call in (r.nudged, r.grid, r.real_range, lambda: quantspec.translate(r, "onnx", inputs=None),
                 lambda: quantspec.translate(r, "litert", inputs="float16"),
                 lambda: quantspec.equivalent(r, r, "float16")):
        with pytest.raises(UnsupportedError, match="without a grid"):
            call()


@pytest.mark.parametrize("text", ["tf:Dequantize T=qint8 min=-1.42 max=inf mode=MIN_FIRST",
                                  "tf:QuantizeV2 T=qint8 min=-1.42 max=inf mode=MIN_FIRST"])
def test_translate_of_an_infinite_range_is_refused(text):
    """Found by fuzzing the command line: ``quantspec equiv --from "tf:Dequantize ... max=inf" --to
    onnx``: the source's grid has a NaN zero, and translate raised "cannot convert float NaN to
    integer" (a traceback from the command)."""
    import quantspec
    from quantspec.equiv import parse
    from quantspec.errors import QuantSpecError

    try:
        rec = parse(text)
    except QuantSpecError:
        return                       # refused when the record is made: nothing to translate
    with pytest.raises(QuantSpecError):
        quantspec.translate(rec, "onnx", inputs=None)
