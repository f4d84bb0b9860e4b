"""Tensors of another type than the spec's, where LiteRT has something to say about them: what the
checker reports LiteRT does (optable.TYPE_VERDICTS and the kernels' type checks) is what the
BUILTIN_REF interpreter does with the model, and where LiteRT computes it correctly (int4 filters,
int16 paddings, a comparison whose stored output type is not bool: LiteRT makes it bool) quantspec's
interpreter gives the same bytes."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T, build, run_ref
from litert_models import edit
from quantspec.litert import Interpreter, check_model, load_model
from refs import require

S = np.float32(0.05)


def _fc(filter_type="int8", bias_type="int32", seed=0):
    rng = np.random.default_rng(seed)
    w = rng.integers(-7, 8, (5, 6)).astype(np.int8)
    b = T((5,), bias_type, float(S * np.float32(0.02)), 0, 0, rng.integers(-50, 50, 5), name="bias")
    return build("FULLY_CONNECTED", [T((2, 6), "int8", S, -3), T((5, 6), filter_type, 0.02, 0, 0, w), b],
                 [T((2, 5), "int8", 0.3, 2)], {})


def _conv(filter_type="int8", bias_type="int32", depthwise=False, seed=0):
    rng = np.random.default_rng(seed)
    shape, dim = ((1, 3, 3, 4), 3) if depthwise else ((4, 3, 3, 4), 0)
    w = rng.integers(-8, 8, shape).astype(np.int8)
    scales = [0.02, 0.01, 0.03, 0.015]
    b = T((4,), bias_type, [float(S * np.float32(s)) for s in scales], 0, 0, rng.integers(-50, 50, 4))
    options = {"padding": "SAME", "stride_w": 1, "stride_h": 1}
    if depthwise:
        options["depth_multiplier"] = 1
    return build("DEPTHWISE_CONV_2D" if depthwise else "CONV_2D",
                 [T((1, 5, 5, 4), "int8", S, 3), T(shape, filter_type, scales, 0, dim, w), b],
                 [T((1, 5, 5, 4), "int8", 0.2, -4)], options)


def _param(op, data_type, data, x_shape, out_shape, options=None):
    return build(op, [T(x_shape, "int8", 0.1, 0), T(np.shape(data), data_type, data=np.asarray(data))],
                 [T(out_shape, "int8", 0.1, 0)], options)


# case -> (model, the dtype violation's (position, LiteRT's action) or None when conformant)
CASES = {
    "fc int64 bias": (lambda: _fc(bias_type="int64"), ("input 2 (bias)", "silent")),
    "fc int16 bias": (lambda: _fc(bias_type="int16"), ("input 2 (bias)", "rejects")),
    "conv int64 bias": (lambda: _conv(bias_type="int64"), ("input 2 (bias)", "rejects")),
    "conv int16 bias": (lambda: _conv(bias_type="int16"), ("input 2 (bias)", "rejects")),
    "depthwise int16 bias": (lambda: _conv(bias_type="int16", depthwise=True), ("input 2 (bias)", "rejects")),
    "fc int4 filter": (lambda: _fc(filter_type="int4"), ("input 1 (filter)", None)),
    "conv int4 filter": (lambda: _conv(filter_type="int4"), ("input 1 (filter)", None)),
    "depthwise int4 filter": (lambda: _conv(filter_type="int4", depthwise=True), ("input 1 (filter)", None)),
    "mean int16 axis": (lambda: _param("MEAN", "int16", [1], (2, 3), (2,), {"keep_dims": False}),
                        ("input 1 (axis)", "rejects")),
    "transpose int16 perm": (lambda: _param("TRANSPOSE", "int16", [1, 0], (2, 3), (3, 2)),
                             ("input 1 (perm)", "rejects")),
    "less int8 output": (lambda: build("LESS", [T((2, 3), "int8", 0.1, 1), T((1, 3), "int8", 0.2, -2)],
                                       [T((2, 3), "int8", 0.1, 0)]), None),
    "greater_equal int32 output": (lambda: build("GREATER_EQUAL", [T((4,), "int8", 0.1, 1), T((4,), "int8", 0.1, 1)],
                                                 [T((4,), "int32")]), None),
    "pad int16 paddings": (lambda: _param("PAD", "int16", [[1, 0], [0, 2]], (2, 3), (3, 5)), None),
    "padv2 int16 paddings": (lambda: build("PADV2", [T((2, 3), "int8", 0.1, 4), T((2, 2), "int16",
                                                                                   data=np.array([[0, 1], [2, 0]])),
                                                     T((1,), "int8", 0.1, 4, data=np.array([-7]))],
                                           [T((3, 5), "int8", 0.1, 4)]), None),
}


def _inputs(model: bytes) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    m = load_model(model)
    return [rng.integers(-128, 128, m.tensors[i].shape).astype(np.int8) for i in m.inputs]


def _litert_runs(model: bytes, inputs) -> bool:
    require("ai_edge_litert.interpreter")
    try:
        run_ref(model, inputs)
        return True
    except (ValueError, RuntimeError):
        return False


@pytest.mark.parametrize("case", sorted(CASES))
def test_type_verdicts_are_what_litert_does(case):
    make, expected = CASES[case]
    model = make()
    report = check_model(model)
    dtype = [(v.position, v.litert) for v in report.violations if v.rule == "dtype"]
    assert dtype == ([expected] if expected else []), report.render()
    inputs = _inputs(model)
    runs = _litert_runs(model, inputs)
    assert runs == (not report.rejected_by_litert), report.render()
    if expected is None or expected[1] is None:   # LiteRT computes it as it should: so does quantspec
        want = run_ref(model, inputs)
        got = Interpreter(model).run(inputs)
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want]


@pytest.mark.parametrize("make", [_fc, _conv, lambda **k: _conv(depthwise=True, **k)], ids=["fc", "conv", "depthwise"])
def test_an_int4_filter_computes_as_the_int8_filter_of_its_values(make):
    inputs = _inputs(make())
    four, eight = make(filter_type="int4"), make(filter_type="int8")
    assert Interpreter(four).run(inputs)[0].tobytes() == Interpreter(eight).run(inputs)[0].tobytes()
    assert run_ref(four, inputs)[0].tobytes() == Interpreter(four).run(inputs)[0].tobytes()


def test_fc_int64_bias_is_refused_by_the_interpreter():
    """LiteRT runs it and reads the int64 bias as int32 halves; quantspec refuses it (documented)."""
    from quantspec.errors import DTypeError

    with pytest.raises(DTypeError, match="int32 bias"):
        Interpreter(_fc(bias_type="int64"))


# --- 16x8 models (int16 activations, the converter's EXPERIMENTAL_..._INT16_WEIGHTS_INT8 scheme) ---------
# LiteRT runs them with its 16x8 kernels, whose fixed outputs are (1/32768, 0) and whose bias is int64:
# the checker recognises the mode and applies its rules (int16 zero points 0, the 16x8 fixed outputs, the
# 16x8 bias types), not the 8-bit values.
S16 = 1 / 32768


def _sixteen_weighted(op, bias_type="int64"):
    rng = np.random.default_rng(7)
    if op == "FULLY_CONNECTED":
        w = rng.integers(-127, 128, (5, 6)).astype(np.int8)
        scales = [0.02] * 5
        return build(op, [T((2, 6), "int16", 0.001, 0), T((5, 6), "int8", scales, 0, 0, w),
                          T((5,), bias_type, [0.001 * s for s in scales], 0, 0, rng.integers(-500, 500, 5))],
                     [T((2, 5), "int16", 0.004, 0)], {})
    depthwise = op == "DEPTHWISE_CONV_2D"
    shape, dim = ((1, 3, 3, 4), 3) if depthwise else ((4, 3, 3, 4), 0)
    scales = [0.02, 0.01, 0.03, 0.015]
    options = {"padding": "SAME", "stride_w": 1, "stride_h": 1, **({"depth_multiplier": 1} if depthwise else {})}
    return build(op, [T((1, 5, 5, 4), "int16", 0.001, 0),
                      T(shape, "int8", scales, 0, dim, rng.integers(-127, 128, shape).astype(np.int8)),
                      T((4,), bias_type, [0.001 * s for s in scales], 0, 0, rng.integers(-500, 500, 4))],
                 [T((1, 5, 5, 4), "int16", 0.004, 0)], options)


SIXTEEN = {
    "softmax": lambda: build("SOFTMAX", [T((2, 7), "int16", 0.001, 0)], [T((2, 7), "int16", S16, 0)], {"beta": 1.0}),
    "logistic": lambda: build("LOGISTIC", [T((2, 7), "int16", 0.001, 0)], [T((2, 7), "int16", S16, 0)]),
    "tanh": lambda: build("TANH", [T((2, 7), "int16", 0.001, 0)], [T((2, 7), "int16", S16, 0)]),
    "fc int64 bias": lambda: _sixteen_weighted("FULLY_CONNECTED"),
    "conv int64 bias": lambda: _sixteen_weighted("CONV_2D"),
    "depthwise int64 bias": lambda: _sixteen_weighted("DEPTHWISE_CONV_2D"),
}


@pytest.mark.parametrize("case", sorted(SIXTEEN))
def test_a_16x8_model_is_checked_with_the_16x8_rules(case):
    model = SIXTEEN[case]()
    m = load_model(model)
    rng = np.random.default_rng(3)
    inputs = [rng.integers(-32768, 32768, m.tensors[i].shape).astype(np.int16) for i in m.inputs]
    assert _litert_runs(model, inputs)
    report = check_model(model)
    assert report.ok and report.mode == "int16x8", report.render()


@pytest.mark.parametrize("case, change, rule", [
    ("softmax", lambda m: setattr(m.subgraphs[0].tensors[1].quantization, "zeroPoint", [5]), "int16-zero-point"),
    ("logistic", lambda m: setattr(m.subgraphs[0].tensors[1].quantization, "scale", [1 / 256]), "int16-output-scale"),
    ("depthwise int64 bias", None, "int16-bias-type"),
])
def test_a_16x8_model_breaking_the_16x8_rules_is_rejected(case, change, rule):
    model = _sixteen_weighted("DEPTHWISE_CONV_2D", bias_type="int32") if change is None else edit(SIXTEEN[case](), change)
    m = load_model(model)
    inputs = [np.zeros(m.tensors[i].shape, np.int16) for i in m.inputs]
    assert not _litert_runs(model, inputs)
    report = check_model(model)
    assert rule in {v.rule for v in report.rejected_by_litert}, report.render()


# --- DEQUANTIZE of float16 (the converter's float16 quantization) and of int4 / int2 weights -----------
# LiteRT's DEQUANTIZE takes these types (outside the 8-bit spec): the checker reports the type but must
# not claim that LiteRT rejects the model.
@pytest.mark.parametrize("dtype", ["float16", "int4", "int2"])
def test_dequantize_of_a_wider_type_is_outside_the_spec_not_rejected(dtype):
    rng = np.random.default_rng(5)
    if dtype == "float16":
        x = T((3, 4), "float16", data=rng.standard_normal((3, 4)).astype(np.float16))
    else:
        lo = -8 if dtype == "int4" else -2
        x = T((3, 4), dtype, 0.25, 0, 0, rng.integers(lo, -lo, (3, 4)))
    model = build("DEQUANTIZE", [x], [T((3, 4), "float")])
    assert _litert_runs(model, [])
    report = check_model(model)
    assert [(v.rule, v.position, v.litert) for v in report.violations] == [("dtype", "input 0 (input)", None)]
    assert report.rejected_by_litert == (), report.render()
