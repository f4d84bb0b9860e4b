"""The interpreter's run plans (quantspec.litert.plans) against LiteRT BUILTIN_REF and against the
kernels they stand for, byte for byte, through whole models: every kind of plan (GEMM operators with
padding, strides, dilation, deep accumulations in several exact chunks, int16 activations split into
bytes; depthwise; pair tables over broadcast inputs; int16 binary operators; reductions; SOFTMAX;
pooling; QUANTIZE / DEQUANTIZE tables; unary tables; reshapes; GATHER, TRANSPOSE, PAD,
RESIZE_BILINEAR), the cases a plan hands back to its
kernel (errors included), several threads running one interpreter, and no numba threading layer
started by any kernel mode.  (Every single-operator sweep of tests/test_litert_kernels_*.py also
runs the operator's plan: tests/support/litert_kernel_check.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from litert_build import T, build, build_graph, run_ref
from quantspec import litert as L
from quantspec._fastpath import jit
from quantspec.errors import QuantSpecError
from quantspec.litert import interpreter, plans

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="run plans are the fast path (QUANTSPEC_FAST=0)")

R = np.random.default_rng(2207)


def _codes(dtype, shape, r=R):
    info = np.iinfo(dtype)
    x = r.integers(info.min, info.max + 1, shape).astype(dtype)
    flat = x.reshape(-1)
    flat[: min(2, flat.size)] = (info.min, info.max)[: min(2, flat.size)]
    return x


def _both(model: bytes, feeds, plan_type, **kwargs):
    """The model's outputs through the plans equal LiteRT's and the kernels' (PLANS off); the
    operator ran the plan ``plan_type``."""
    interp = L.Interpreter(model, **kwargs)
    got = interp.run(list(feeds))
    steps = interp._main.plan_steps()
    kinds = [type(s[2]).__name__ for s in steps]
    assert plan_type in kinds, f"no {plan_type} among {kinds}"
    want = run_ref(model, list(feeds))
    assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want]
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes(), f"{plan_type}: the plan differs from LiteRT"
    old = interpreter.PLANS
    interpreter.PLANS = False
    try:
        ref = L.Interpreter(model, **kwargs).run(list(feeds))
    finally:
        interpreter.PLANS = old
    for g, w in zip(got, ref):
        assert g.tobytes() == w.tobytes(), f"{plan_type}: the plan differs from its kernel"
    return got


def _per_channel(r, o):
    return [float(v) for v in r.uniform(0.002, 0.02, o).astype(np.float32)]


def _conv_model(r, x_shape, o, k, options, wide=False, bias_type="int32", zx=-3, dw=False, m=1):
    n, h, w, c = x_shape
    kh, kw = k
    s_in, s_out = 0.05, 0.4 if not wide else 0.8
    if dw:
        oc = c * m
        wt = T((1, kh, kw, oc), "int8", _per_channel(r, oc), [0] * oc, 3, _codes(np.int8, (1, kh, kw, oc), r))
        options = {**options, "depth_multiplier": m}
        channels = oc
    else:
        wt = T((o, kh, kw, c), "int8", _per_channel(r, o), [0] * o, 0, _codes(np.int8, (o, kh, kw, c), r))
        channels = o
    bias_scale = [float(np.float32(s_in) * np.float32(s)) for s in wt.scale]
    bdtype = np.int64 if bias_type == "int64" else np.int32
    bias = T((channels,), bias_type, bias_scale, [0] * channels, 0, r.integers(-3000, 3000, channels).astype(bdtype))
    dtype = "int16" if wide else "int8"
    x = T(x_shape, dtype, s_in, 0 if wide else zx)
    from quantspec.litert.kernels._common import window_geometry

    (oh, ow), _ = window_geometry("CONV_2D", options["padding"], (h, w), k,
                                  (options["stride_h"], options["stride_w"]),
                                  (options.get("dilation_h_factor", 1), options.get("dilation_w_factor", 1)))
    y = T((n, oh, ow, channels), dtype, s_out, 0 if wide else 5)
    return build("DEPTHWISE_CONV_2D" if dw else "CONV_2D", [x, wt, bias], [y], options, version=3 if wide else 2)


CONV_CASES = [
    # (input shape, filter hw, options, output channels)
    ((1, 9, 11, 5), (3, 3), {"padding": "SAME", "stride_h": 2, "stride_w": 1}, 7),
    ((2, 8, 7, 4), (3, 2), {"padding": "VALID", "stride_h": 1, "stride_w": 1, "dilation_h_factor": 2,
                            "dilation_w_factor": 2, "fused_activation_function": "RELU6"}, 3),
    ((1, 6, 6, 9), (1, 1), {"padding": "SAME", "stride_h": 1, "stride_w": 1}, 12),         # the input as it is
    ((1, 4, 4, 230), (3, 3), {"padding": "SAME", "stride_h": 1, "stride_w": 1}, 6),       # depth 2070: 3 chunks
]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv_int8(case):
    r = np.random.default_rng(case)
    shape, k, options, o = CONV_CASES[case]
    model = _conv_model(r, shape, o, k, {"fused_activation_function": "NONE", **options})
    _both(model, [_codes(np.int8, shape, r)], "ConvPlan")


@pytest.mark.parametrize("bias_type", ["int64", "int32"])
@pytest.mark.parametrize("case", [0, 1, 3])
def test_conv_16x8_split_into_bytes(case, bias_type):
    r = np.random.default_rng(10 + case)
    shape, k, options, o = CONV_CASES[case]
    opts = {"fused_activation_function": "NONE", **options, "quantized_bias_type": bias_type.upper()}
    model = _conv_model(r, shape, o, k, opts, wide=True, bias_type=bias_type)
    _both(model, [_codes(np.int16, shape, r)], "ConvPlan")


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("m", [1, 2])
def test_depthwise(wide, m):
    r = np.random.default_rng(20 + m + 2 * wide)
    shape = (1, 7, 6, 3)
    options = {"padding": "SAME", "stride_h": 2, "stride_w": 1, "fused_activation_function": "RELU"}
    model = _conv_model(r, shape, None, (3, 3), options, wide=wide, bias_type="int64" if wide else "int32", dw=True,
                        m=m)
    _both(model, [_codes(np.int16 if wide else np.int8, shape, r)],
          "WideDepthwisePlan" if wide else "DepthwisePlan")


@pytest.mark.parametrize("depth, wide, bias_type", [(40, False, "int32"), (1500, False, "int32"), (700, True, "int64"),
                                                    (90, True, "int32")])
def test_fully_connected(depth, wide, bias_type):
    r = np.random.default_rng(depth)
    units, rows = 9, 3
    dtype = "int16" if wide else "int8"
    s_in = 0.03
    w = T((units, depth), "int8", 0.01, 0, 0, _codes(np.int8, (units, depth), r))
    bdtype = np.int64 if bias_type == "int64" else np.int32
    b = T((units,), bias_type, float(np.float32(s_in) * np.float32(0.01)), 0, 0,
          r.integers(-5000, 5000, units).astype(bdtype))
    x = T((rows, depth), dtype, s_in, 0 if wide else 7)
    y = T((rows, units), dtype, 0.9 if wide else 0.5, 0 if wide else -4)
    options = {"fused_activation_function": "NONE"}
    if wide:
        options["quantized_bias_type"] = bias_type.upper()
    model = build("FULLY_CONNECTED", [x, w, b], [y], options, version=3 if wide else 2)
    # a small int8 layer runs as one numba pass; a deep one (several exact chunks) and int16, the GEMM
    small = not wide and rows * depth * units <= plans.SMALL_FC and depth < 1000
    _both(model, [_codes(np.int16 if wide else np.int8, (rows, depth), r)],
          "SmallFullyConnectedPlan" if small else "FullyConnectedPlan")


@pytest.mark.parametrize("rows, depth, units, zx, act", [(16, 32, 32, -128, "NONE"), (5, 64, 7, 127, "RELU"),
                                                          (1, 1, 1, 0, "RELU6"), (16, 128, 32, 3, "NONE")])
def test_small_fully_connected(rows, depth, units, zx, act):
    """The one-pass layer, with the extreme codes and zero points and per-channel weights of either
    sign at the int8 limits, equals LiteRT and the GEMM plan (the same model with SMALL_FC at 0)."""
    r = np.random.default_rng(rows * depth + units)
    wcodes = _codes(np.int8, (units, depth), r)
    wcodes[0] = -127
    wcodes[-1] = 127
    w = T((units, depth), "int8", _per_channel(r, units), [0] * units, 0, wcodes)
    b = T((units,), "int32", [0.05 * s for s in _per_channel(r, units)], [0] * units, 0,
          r.integers(-50000, 50000, units).astype(np.int32))
    x = T((rows, depth), "int8", 0.05, zx)
    y = T((rows, units), "int8", 0.7, -3)
    model = build("FULLY_CONNECTED", [x, w, b], [y], {"fused_activation_function": act}, version=2)
    feed = _codes(np.int8, (rows, depth), r)
    feed[0] = -128
    got = _both(model, [feed], "SmallFullyConnectedPlan")
    old = plans.fully_connected.SMALL_FC
    plans.fully_connected.SMALL_FC = 0
    try:
        interp = L.Interpreter(model)
        gemm = interp.run([feed])
        assert "FullyConnectedPlan" in [type(s[2]).__name__ for s in interp._main.plan_steps()]
    finally:
        plans.fully_connected.SMALL_FC = old
    assert got[0].tobytes() == gemm[0].tobytes()


@pytest.mark.parametrize("op, dtype", [("PAD", "int8"), ("PAD", "float"), ("PADV2", "int8")])
def test_pad(op, dtype):
    r = np.random.default_rng(31)
    shape = (1, 5, 4, 3)
    pads = np.array([[0, 0], [2, 1], [0, 3], [1, 0]], np.int32)
    out_shape = (1, 8, 7, 4)
    q = (0.1, -7) if dtype == "int8" else (None, 0)
    ins = [T(shape, dtype, *q), T((4, 2), "int32", data=pads)]
    if op == "PADV2":
        ins.append(T((1,), dtype, *q, data=np.array([100], np.int8)))
    model = build(op, ins, [T(out_shape, dtype, *q)])
    x = _codes(np.int8, shape, r) if dtype == "int8" else r.normal(0, 2, shape).astype(np.float32)
    got = _both(model, [x], "PadPlan")
    got2 = L.Interpreter(model).run([x])
    assert got[0].tobytes() == got2[0].tobytes()


@pytest.mark.parametrize("size, align, half", [((7, 5), False, False), ((7, 5), True, False), ((7, 5), False, True),
                                               ((3, 2), False, True), ((12, 13), False, False)])
def test_resize_bilinear(size, align, half):
    r = np.random.default_rng(size[0] * 10 + size[1])
    shape = (2, 6, 4, 3)
    model = build("RESIZE_BILINEAR", [T(shape, "int8", 0.1, 1), T((2,), "int32", data=np.array(size, np.int32))],
                  [T((2, *size, 3), "int8", 0.1, 1)], {"align_corners": align, "half_pixel_centers": half},
                  version=3)
    _both(model, [_codes(np.int8, shape, r)], "ResizeBilinearPlan")


def test_batch_matmul():
    r = np.random.default_rng(5)
    a, b = T((2, 3, 5, 8), "int8", 0.05, 3), T((3, 6, 8), "int8", 0.04, -2)
    y = T((2, 3, 5, 6), "int8", 0.3, 1)
    model = build("BATCH_MATMUL", [a, b], [y], {"adj_x": False, "adj_y": True})
    _both(model, [_codes(np.int8, (2, 3, 5, 8), r), _codes(np.int8, (3, 6, 8), r)], "BatchMatMulPlan")


BROADCASTS = [((1, 4, 5, 6), (1, 4, 5, 6)), ((1, 4, 5, 6), (1, 1, 5, 1)), ((2, 1, 3), (4, 1)),
              ((3, 1, 2, 1, 2, 2), (1, 2, 1, 2, 1, 1)), ((1, 8), ())]


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "SQUARED_DIFFERENCE"])
@pytest.mark.parametrize("shapes", range(len(BROADCASTS)))
def test_pair_tables_over_broadcasts(op, shapes):
    r = np.random.default_rng(hash((op, shapes)) % 1000)
    xs, ys = BROADCASTS[shapes]
    out = np.broadcast_shapes(xs, ys)
    options = {"fused_activation_function": "NONE"} if op != "SQUARED_DIFFERENCE" else {}
    model = build(op, [T(xs, "int8", 0.1, 3), T(ys, "int8", 0.07, -5)], [T(out, "int8", 0.2, 1)], options)
    got = _both(model, [_codes(np.int8, xs, r), _codes(np.int8, ys, r)], "PairTablePlan")
    assert got[0].shape == out


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("shapes", [0, 1, 2])
def test_int16_binary(op, shapes):
    r = np.random.default_rng(40 + shapes)
    xs, ys = BROADCASTS[shapes]
    out = np.broadcast_shapes(xs, ys)
    model = build(op, [T(xs, "int16", 0.0003, 0), T(ys, "int16", 0.0007, 0)], [T(out, "int16", 0.0011, 0)],
                  {"fused_activation_function": "NONE"}, version=3 if op != "MUL" else 5)
    _both(model, [_codes(np.int16, xs, r), _codes(np.int16, ys, r)], "BinaryPlan")


def test_prelu():
    r = np.random.default_rng(6)
    model = build("PRELU", [T((1, 4, 4, 3), "int8", 0.05, 2), T((1, 1, 3), "int8", 0.01, 0,
                                                                data=_codes(np.int8, (1, 1, 3), r))],
                  [T((1, 4, 4, 3), "int8", 0.06, -1)])
    _both(model, [_codes(np.int8, (1, 4, 4, 3), r)], "PairTablePlan")


@pytest.mark.parametrize("axes, keep, dtype", [((1, 2), True, "int8"), ((2,), False, "int8"), ((0, 1), False, "int16"),
                                               ((3,), True, "int16")])
def test_mean(axes, keep, dtype):
    r = np.random.default_rng(7)
    shape = (2, 5, 6, 4)
    zx, zo = (3, -2) if dtype == "int8" else (0, 0)
    out = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else \
        tuple(d for i, d in enumerate(shape) if i not in axes)
    model = build("MEAN", [T(shape, dtype, 0.05, zx), T((len(axes),), "int32", data=np.array(axes, np.int32))],
                  [T(out, dtype, 0.04, zo)], {"keep_dims": keep})
    _both(model, [_codes(np.dtype(dtype), shape, r)], "MeanPlan")


def test_sum_as_builtin_ref_reads_it():
    r = np.random.default_rng(8)
    model = build("SUM", [T((3, 7), "int8", 0.05, -3), T((1,), "int32", data=np.array([1], np.int32))],
                  [T((3,), "int8", 0.3, 2)], {"keep_dims": False})
    _both(model, [_codes(np.int8, (3, 7), r)], "MeanPlan", sum_semantics="reference")


def test_softmax():
    r = np.random.default_rng(9)
    model = build("SOFTMAX", [T((3, 4, 10), "int8", 0.1, 4)], [T((3, 4, 10), "int8", 1 / 256, -128)], {"beta": 1.0})
    _both(model, [_codes(np.int8, (3, 4, 10), r)], "SoftmaxPlan")


def test_a_softmax_row_litert_aborts_on_raises_as_the_kernel_does():
    """512 equal values: the sum of exponentials makes GetReciprocal's exponent leave [0, 31]."""
    model = build("SOFTMAX", [T((1, 600), "int8", 0.1, 4)], [T((1, 600), "int8", 1 / 256, -128)], {"beta": 1.0})
    x = np.full((1, 600), 7, np.int8)
    errors = []
    for planned in (True, False):
        interpreter.PLANS, old = planned, interpreter.PLANS
        try:
            with pytest.raises(QuantSpecError) as e:
                L.Interpreter(model).run([x])
            errors.append((type(e.value), str(e.value)))
        finally:
            interpreter.PLANS = old
    assert errors[0] == errors[1]


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_pools(op, dtype):
    r = np.random.default_rng(11)
    shape = (2, 7, 6, 3)
    options = {"padding": "SAME", "stride_h": 2, "stride_w": 2, "filter_height": 3, "filter_width": 2,
               "fused_activation_function": "RELU6"}
    z = 0 if dtype == "int16" else -4
    model = build(op, [T(shape, dtype, 0.05, z)], [T((2, 4, 3, 3), dtype, 0.05, z)], options)
    _both(model, [_codes(np.dtype(dtype), shape, r)], "PoolPlan")


def test_quantize_and_dequantize():
    r = np.random.default_rng(12)
    x = (r.normal(0, 3, (2, 5, 3))).astype(np.float32)
    x.reshape(-1)[:4] = (0.25, -0.25, 1e9, -1e9)
    model = build("QUANTIZE", [T((2, 5, 3), "float")], [T((2, 5, 3), "int8", 0.05, 3)])
    _both(model, [x], "FloatQuantizePlan")
    for src, dst in (("int8", "int8"), ("int16", "int16"), ("int8", "int16"), ("int16", "int8")):
        zi, zo = (0 if src == "int16" else 5), (0 if dst == "int16" else -7)
        model = build("QUANTIZE", [T((4, 9), src, 0.03, zi)], [T((4, 9), dst, 0.02, zo)])
        _both(model, [_codes(np.dtype(src), (4, 9), r)], "UnaryTablePlan")
    for dtype in ("int8", "int16"):
        model = build("DEQUANTIZE", [T((4, 9), dtype, 0.03, 0 if dtype == "int16" else 6)], [T((4, 9), "float")])
        _both(model, [_codes(np.dtype(dtype), (4, 9), r)], "UnaryTablePlan")


@pytest.mark.parametrize("op", ["HARD_SWISH", "LOGISTIC", "TANH", "LEAKY_RELU"])
def test_unary_tables(op):
    r = np.random.default_rng(13)
    out_scale, out_zp = (1 / 256, -128) if op == "LOGISTIC" else (0.05, 2)
    options = {"alpha": 0.2} if op == "LEAKY_RELU" else None
    model = build(op, [T((3, 11), "int8", 0.06, -3)], [T((3, 11), "int8", out_scale, out_zp)], options)
    _both(model, [_codes(np.int8, (3, 11), r)], "UnaryTablePlan")


def test_an_input_a_table_marks_invalid_raises_as_the_kernel_does():
    """RSQRT of a value below the zero point fails at Eval in LiteRT; the plan defers to the kernel."""
    model = build("RSQRT", [T((5,), "int8", 0.05, 0)], [T((5,), "int8", 0.02, -100)])
    x = np.array([3, 4, -1, 5, 9], np.int8)
    with pytest.raises(QuantSpecError, match="positive"):
        L.Interpreter(model).run([x])


@pytest.mark.parametrize("dtype, axis", [("int8", 0), ("int8", -1), ("float", 1), ("int32", 0)])
def test_gather(dtype, axis):
    r = np.random.default_rng(41)
    shape = (7, 5, 3)
    a = axis % 3
    positions = np.array([[0, shape[a] - 1, 2], [1, 1, 0]], np.int32)
    out_shape = (*shape[:a], 2, 3, *shape[a + 1:])
    q = (0.1, 3) if dtype == "int8" else (None, 0)
    table = (_codes(np.int8, shape, r) if dtype == "int8" else r.normal(0, 3, shape).astype(np.float32)
             if dtype == "float" else r.integers(-2**31, 2**31, shape).astype(np.int32))
    # the table a constant (an embedding) and the positions a run-time input, as a converter writes it
    model = build("GATHER", [T(shape, dtype, *q, data=table), T((2, 3), "int32")], [T(out_shape, dtype, *q)],
                  {"axis": axis})
    _both(model, [positions], "GatherPlan")


@pytest.mark.parametrize("bad", [-1, 5])
def test_gather_position_out_of_range_raises_as_the_kernel_does(bad):
    model = build("GATHER", [T((5, 4), "int8", 0.1, 0), T((3,), "int32")], [T((3, 4), "int8", 0.1, 0)], {"axis": 0})
    x = np.arange(20, dtype=np.int8).reshape(5, 4)
    interp = L.Interpreter(model)
    interp.run([x, np.array([0, 1, 2], np.int32)])
    assert "GatherPlan" in [type(s[2]).__name__ for s in interp._main.plan_steps()]
    interp.run([x, np.array([4, 3, 2], np.int32)])         # the fast loop from here on
    assert interp._main.program is not None
    with pytest.raises(QuantSpecError, match=r"operator 0 \(GATHER\).*positions"):
        interp.run([x, np.array([0, bad, 2], np.int32)])


def test_transpose():
    r = np.random.default_rng(43)
    x = T((1, 16, 4, 8), "int8", 0.1, 2)
    model = build("TRANSPOSE", [x, T((4,), "int32", data=np.array([0, 2, 1, 3], np.int32))],
                  [T((1, 4, 16, 8), "int8", 0.1, 2)])
    _both(model, [_codes(np.int8, (1, 16, 4, 8), r)], "TransposePlan")


@pytest.mark.parametrize("dtype, axis", [("int8", 1), ("int8", -1), ("int16", 0), ("float", 2)])
def test_concatenation(dtype, axis):
    r = np.random.default_rng(44 + axis)
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    sizes = [1, 3, 2]
    a = axis % 3
    shapes = [tuple(n if d == a else s for d, s in enumerate(shape)) for shape, n in zip(shapes, sizes)]
    out = tuple(sum(sizes) if d == a else s for d, s in enumerate(shapes[0]))
    q = {"int8": (0.1, 2), "int16": (0.001, 0), "float": (None, 0)}[dtype]
    model = build("CONCATENATION", [T(s, dtype, *q) for s in shapes], [T(out, dtype, *q)],
                  {"axis": axis, "fused_activation_function": "NONE"})
    feeds = [_codes(np.dtype(dtype), s, r) if dtype != "float" else r.normal(0, 1, s).astype(np.float32)
             for s in shapes]
    _both(model, feeds, "ConcatPlan")


def test_reshape_is_a_view_and_outputs_are_fresh():
    r = np.random.default_rng(14)
    model = build("RESHAPE", [T((2, 6), "int8", 0.1, 0), T((2,), "int32", data=np.array([3, 4], np.int32))],
                  [T((3, 4), "int8", 0.1, 0)])
    x = _codes(np.int8, (2, 6), r)
    (y,) = _both(model, [x], "ReshapePlan")
    assert not np.shares_memory(y, x)


@pytest.mark.parametrize("name", ["cnn.tflite", "bench_cnn.tflite", "mlp_softmax.tflite", "mixed.tflite"])
def test_bundled_models_plans_equal_kernels(name):
    path = os.path.join(os.path.dirname(L.__file__), "..", "data", name)
    interp = L.Interpreter(path)
    r = np.random.default_rng(15)
    feeds = [(r.normal(0, 1, t.shape).astype(np.float32) if t.dtype.dtype == np.float32
              else _codes(t.dtype.dtype, t.shape, r)) for t in interp.inputs]
    got = interp.run(feeds)
    interpreter.PLANS, old = False, interpreter.PLANS
    try:
        want = L.Interpreter(path).run(feeds)
    finally:
        interpreter.PLANS = old
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    assert sum(isinstance(s[2], plans.Plan) for s in interp._main.plan_steps()) >= 1


def test_tables_after_tables_fold_into_one_with_the_same_bytes(monkeypatch):
    """mixed.tflite's LOGISTIC -> QUANTIZE and TANH -> QUANTIZE run as one table each on the fast
    loop; every run (the first, on the loop that checks outputs, and the later ones) equals LiteRT
    BUILTIN_REF and the interpreter that keeps every tensor (which folds nothing)."""
    monkeypatch.setattr(interpreter, "REGIONS", False)     # the folds themselves (regions: test_litert_regions.py)
    path = os.path.join(os.path.dirname(L.__file__), "..", "data", "mixed.tflite")
    model = open(path, "rb").read()
    interp = L.Interpreter(model)
    keep = L.Interpreter(model, preserve_all_tensors=True)
    r = np.random.default_rng(16)
    for n in range(4):
        feeds = [_codes(t.dtype.dtype, t.shape, r) if t.dtype.dtype != np.float32
                 else r.normal(0, 2, t.shape).astype(np.float32) for t in interp.inputs]
        got = interp.run(feeds)
        want = run_ref(model, feeds)
        assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
        assert [g.tobytes() for g in keep.run(feeds)] == [w.tobytes() for w in want]
    assert interp._main.program is not None
    assert len(interp._main.program) == len(interp._main.sg.operators) - 2
    assert keep._main.program is not None and len(keep._main.program) == len(keep._main.sg.operators)
    # the output tensor is held, the folded intermediates are not
    assert interp.get_tensor(interp._main.sg.outputs[0]).tobytes() == got[0].tobytes()


def test_a_table_with_invalid_codes_folds_and_raises_as_its_kernel(monkeypatch):
    """A layer norm's ADD(variance, epsilon) -> RSQRT runs as one table whose entries carry RSQRT's
    invalid codes: valid inputs give LiteRT's bytes, an input that reaches a negative value raises
    naming RSQRT, as the kernels do (and LiteRT fails)."""
    monkeypatch.setattr(interpreter, "REGIONS", False)     # the folds themselves (regions: test_litert_regions.py)
    tensors = [T((1, 16, 1), "int8", 0.05, -20), T((), "int8", 0.05, -20, data=np.array(-19, np.int8)),
               T((1, 16, 1), "int8", 0.05, -20), T((1, 16, 1), "int8", 0.02, -100)]
    model = build_graph(tensors, [("ADD", [0, 1], [2], {"fused_activation_function": "NONE"}),
                                  ("RSQRT", [2], [3], None)], [0], [3])
    interp = L.Interpreter(model)
    r = np.random.default_rng(17)
    for _ in range(3):
        x = r.integers(-21, 128, (1, 16, 1)).astype(np.int8)
        x.reshape(-1)[:2] = (-21, 127)
        got = interp.run([x])
        assert got[0].tobytes() == run_ref(model, [x])[0].tobytes()
    assert len(interp._main.program) == 1
    assert type(interp._main.program[0][0].__self__).__name__ == "FoldedPairPlan"
    bad = np.full((1, 16, 1), 10, np.int8)
    bad[0, 5, 0] = -60                    # (-60 + 20) * 0.05 + 0.05 < 0: RSQRT of a negative value
    interpreter.PLANS, old = False, interpreter.PLANS
    try:
        with pytest.raises(QuantSpecError) as want:
            L.Interpreter(model).run([bad])
    finally:
        interpreter.PLANS = old
    with pytest.raises(QuantSpecError, match=r"operator 1 \(RSQRT\)") as got_error:
        interp.run([bad])
    assert str(got_error.value) == str(want.value)
    assert interp.run([x])[0].tobytes() == run_ref(model, [x])[0].tobytes()


@pytest.mark.parametrize("first, second, shapes, tpos, chained", [
    ("SUB", "MUL", [(1, 16, 32), (1, 16, 1), (1, 16, 1)], 0, True),       # a layer norm's (x - mean) * rsqrt
    ("ADD", "SUB", [(2, 1, 5), (1, 3, 5), (5,)], 1, True),                 # the intermediate second, broadcasts
    ("MUL", "ADD", [(3, 4), (3, 4), ()], 0, True),
    ("SQUARED_DIFFERENCE", "MUL", [(2, 3, 4, 5, 6), (1, 3, 1, 5, 1), (6,)], 0, False),  # a walk of five dims
    ("ADD", "MUL", [(4, 1), (1, 5), (4, 5)], 0, True),
    ("SUB", "ADD", [(4, 5), (4, 5), (3, 4, 5)], 0, False)])                # the intermediate broadcast
def test_a_pair_table_after_a_pair_table_runs_as_one_pass(first, second, shapes, tpos, chained, monkeypatch):
    """Two int8 binary operators in a row, the intermediate read by nothing else, run as one pass over
    the three inputs (where the walk fits four dimensions) with LiteRT's bytes; the interpreter that
    keeps every tensor folds nothing and gives the same bytes."""
    monkeypatch.setattr(interpreter, "REGIONS", False)     # the folds themselves (regions: test_litert_regions.py)
    r = np.random.default_rng(len(first) * 7 + len(second))
    sx, sy, sz = shapes
    st = tuple(np.broadcast_shapes(sx, sy))
    so = tuple(np.broadcast_shapes(st, sz))
    tensors = [T(sx, "int8", 0.05, -3), T(sy, "int8", 0.04, 5), T(sz, "int8", 0.03, -128),
               T(st, "int8", 0.09, 2), T(so, "int8", 0.2, -1)]
    act = {"fused_activation_function": "NONE"}
    ops = [(first, [0, 1], [3], None if first == "SQUARED_DIFFERENCE" else act),
           (second, [3, 2] if tpos == 0 else [2, 3], [4], act)]
    model = build_graph(tensors, ops, [0, 1, 2], [4])
    interp = L.Interpreter(model)
    keep = L.Interpreter(model, preserve_all_tensors=True)
    for _ in range(3):
        feeds = [_codes(np.int8, sh, r) for sh in shapes]
        want = run_ref(model, feeds)
        assert interp.run(feeds)[0].tobytes() == want[0].tobytes()
        assert keep.run(feeds)[0].tobytes() == want[0].tobytes()
    kinds = [type(e[0].__self__).__name__ for e in interp._main.program]
    assert kinds == (["PairChainPlan"] if chained else ["PairTablePlan", "PairTablePlan"])
    assert len(keep._main.program) == 2


def test_a_chain_waits_for_no_input_released_in_between(monkeypatch):
    """x = ADD(a, a); SUB(x, m) -> t; ADD(x, x), the last reader of x; MUL(t, r); CONCATENATION:
    chaining SUB into MUL would read x after its release; the interpreter keeps them apart (and the
    bytes are LiteRT's)."""
    monkeypatch.setattr(interpreter, "REGIONS", False)     # the folds themselves (regions: test_litert_regions.py)
    act = {"fused_activation_function": "NONE"}
    tensors = [T((4, 6), "int8", 0.05, -3), T((4, 1), "int8", 0.04, 5), T((4, 1), "int8", 0.03, 7),
               T((4, 6), "int8", 0.09, 2), T((4, 6), "int8", 0.2, -1), T((4, 6), "int8", 0.2, -1),
               T((8, 6), "int8", 0.2, -1), T((4, 6), "int8", 0.07, 4)]
    ops = [("ADD", [0, 0], [7], act), ("SUB", [7, 1], [3], act), ("ADD", [7, 7], [4], act),
           ("MUL", [3, 2], [5], act), ("CONCATENATION", [5, 4], [6], {"axis": 0, **act})]
    model = build_graph(tensors, ops, [0, 1, 2], [6])
    interp = L.Interpreter(model)
    r = np.random.default_rng(19)
    for _ in range(3):
        feeds = [_codes(np.int8, (4, 6), r), _codes(np.int8, (4, 1), r), _codes(np.int8, (4, 1), r)]
        assert interp.run(feeds)[0].tobytes() == run_ref(model, feeds)[0].tobytes()
    kinds = [type(e[0].__self__).__name__ for e in interp._main.program]
    assert kinds == ["PairTablePlan", "PairTablePlan", "PairTablePlan", "PairTablePlan", "ConcatPlan"]


def test_threads_running_one_interpreter_get_the_bytes_of_one():
    """Scratch buffers are a plan's own: a second thread inside the same plan takes fresh ones."""
    path = os.path.join(os.path.dirname(L.__file__), "..", "data", "bench_cnn.tflite")
    interp = L.Interpreter(path)
    r = np.random.default_rng(16)
    feeds = [[_codes(np.int8, interp.inputs[0].shape, r) if interp.inputs[0].dtype.dtype == np.int8
              else r.normal(0, 1, interp.inputs[0].shape).astype(np.float32)] for _ in range(4)]
    want = [interp.run(f)[0].tobytes() for f in feeds]
    got: dict = {}

    def work(k):
        got[k] = [interp.run(feeds[k])[0].tobytes() for _ in range(5)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(got[k] == [want[k]] * 5 for k in range(4))


def test_no_kernel_mode_starts_numba_threading_layer():
    """Every kernel mode, its kernels on the thread pool (thresholds lowered): numba's OpenMP / TBB /
    workqueue layer is never launched (its idle threads would spin against quantspec's pool, and a
    forked child could not run it)."""
    code = textwrap.dedent("""
        import sys, numpy as np
        from quantspec._fastpath import runner as core
        from quantspec.litert import interpreter, Interpreter
        core.SERIAL_BELOW = core.SERIAL_BELOW_PASSIVE = 1
        core.CHUNK = 256
        interpreter.SERIAL_IN_MODELS = 0
        interpreter.REFERENCE_IN_MODELS = 0
        path = sys.argv[1]
        for mode in ("reference", "optimized", "xnnpack"):
            for planned in (True, False):
                interpreter.PLANS = planned
                it = Interpreter(path, kernels=mode)
                x = np.random.default_rng(0).integers(-128, 128, it.inputs[0].shape).astype(it.inputs[0].dtype.dtype)
                it.run([x])
        omp = sys.modules.get("numba.np.ufunc.parallel")
        assert omp is None or not omp._is_initialized, "numba's threading layer was launched"
        layers = [m for m in ("numba.np.ufunc.omppool", "numba.np.ufunc.tbbpool", "numba.np.ufunc.workqueue")
                  if m in sys.modules]
        assert not layers, layers
        print("ok")
    """)
    path = os.path.join(os.path.dirname(L.__file__), "..", "data", "bench_cnn.tflite")
    env = dict(os.environ, QUANTSPEC_NUM_THREADS="2")
    import quantspec

    root = os.path.dirname(os.path.dirname(os.path.abspath(quantspec.__file__)))    # the tested checkout's
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", code, path], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
