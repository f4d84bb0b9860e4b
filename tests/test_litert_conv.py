"""LiteRT int8 CONV_2D and DEPTHWISE_CONV_2D against the LiteRT interpreter (BUILTIN_REF), byte for byte.

Random single-op models (seeded; QUANTSPEC_LITERT_CASES scales the count): per-channel and
per-tensor filters, every fused activation (TANH clamps nothing), SAME and VALID padding with odd
sizes, strides and dilations > 1, grouped convolution, depth multipliers > 1, bias absent
(DEPTHWISE) or present, constant and run-time filters and biases; then a 3×3×256 convolution
(K = 2304, three exact float32 GEMM chunks) with worst-case values, extreme zero points,
saturating output scales and int32 accumulator wrap-around; then the Prepare failures.
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import cases, ref_fails, run_quantspec
from litert_kernel_check import check_exact as check
from quantspec.errors import InvalidArgumentError, ShapeError

ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH")


def out_size(padding, size, k, stride, dilation):
    eff = (k - 1) * dilation + 1
    return -(-size // stride) if padding == "SAME" else (size - eff + stride) // stride


def conv_model(rng, *, n, h, w, c, o, kh, kw, groups=1, stride=(1, 1), dilation=(1, 1), padding="SAME",
               per_channel=True, act="NONE", zx=None, zo=None, out_scale_factor=None, const_filter=True,
               const_bias=True, extreme=False, bias_range=20000):
    cg = c // groups
    s_in = np.float32(rng.uniform(0.005, 0.1))
    zx = int(rng.integers(-128, 128)) if zx is None else zx
    s_w = rng.uniform(0.001, 0.02, size=o).astype(np.float32) if per_channel else np.float32(rng.uniform(0.001, 0.02))
    if extreme:
        wts = rng.choice(np.array([-127, 127], np.int8), size=(o, kh, kw, cg))
    else:
        wts = rng.integers(-127, 128, size=(o, kh, kw, cg), dtype=np.int8)
    b = rng.integers(-bias_range, bias_range + 1, size=o, dtype=np.int64).astype(np.int32)
    s_b = (np.float64(s_in) * s_w.astype(np.float64)).astype(np.float32)
    factor = rng.uniform(0.05, 2.0) if out_scale_factor is None else out_scale_factor
    s_out = np.float32(s_in * float(np.mean(s_w)) * 50 * np.sqrt(kh * kw * cg) * factor)
    zo = int(rng.integers(-128, 128)) if zo is None else zo
    oh, ow = out_size(padding, h, kh, stride[0], dilation[0]), out_size(padding, w, kw, stride[1], dilation[1])
    ins = [T((n, h, w, c), "int8", s_in, zx), T(wts.shape, "int8", s_w, 0, 0, wts if const_filter else None),
           T((o,), "int32", s_b, 0, 0, b if const_bias else None)]
    x = rng.integers(-128, 128, size=(n, h, w, c), dtype=np.int8)
    if extreme:
        x[..., ::2] = -128
    arrays = [x] + ([] if const_filter else [wts]) + ([] if const_bias else [b])
    options = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1], "dilation_h_factor": dilation[0],
               "dilation_w_factor": dilation[1], "fused_activation_function": act}
    return ins, [T((n, oh, ow, o), "int8", s_out, zo)], options, arrays


def random_geometry(rng, padding):
    kh, kw = (int(v) for v in rng.integers(1, 5, size=2))
    stride = tuple(int(v) for v in rng.integers(1, 4, size=2))
    dilation = tuple(int(v) for v in rng.integers(1, 3, size=2)) if rng.random() < 0.4 else (1, 1)
    h, w = (int(v) for v in rng.integers(1, 14, size=2))
    if padding == "VALID":
        h, w = max(h, (kh - 1) * dilation[0] + 1), max(w, (kw - 1) * dilation[1] + 1)
    return dict(h=h, w=w, kh=kh, kw=kw, stride=stride, dilation=dilation, padding=padding)


@pytest.mark.parametrize("seed", cases(40))
def test_conv2d_random(seed):
    rng = np.random.default_rng([seed, 2])
    groups = 1 if seed % 4 else int(rng.integers(2, 4))
    c = groups * int(rng.integers(1, 9))
    o = groups * int(rng.integers(1, 6))
    geo = random_geometry(rng, "SAME" if seed % 2 else "VALID")
    ins, outs, options, arrays = conv_model(
        rng, n=int(rng.integers(1, 3)), c=c, o=o, groups=groups, per_channel=seed % 3 != 0,
        act=ACTS[seed % len(ACTS)], const_filter=seed % 5 != 4, const_bias=seed % 7 != 6, **geo)
    check("CONV_2D", ins, outs, options, arrays, version=3)


def test_conv2d_large_depth():
    """3x3x256 (K = 2304): three float32 GEMM chunks; every weight ±127, half the inputs -128."""
    rng = np.random.default_rng(2304)
    for per_channel in (True, False):
        ins, outs, options, arrays = conv_model(rng, n=1, h=9, w=7, c=256, o=24, kh=3, kw=3, extreme=True,
                                                per_channel=per_channel, zx=127 if per_channel else -128)
        check("CONV_2D", ins, outs, options, arrays, version=3)


def test_conv2d_pointwise_and_strided_large():
    """A 1x1 convolution (im2col is a reshape) and a strided 5x5 one on a larger image."""
    rng = np.random.default_rng(11)
    ins, outs, options, arrays = conv_model(rng, n=2, h=16, w=16, c=64, o=32, kh=1, kw=1)
    check("CONV_2D", ins, outs, options, arrays, version=3)
    ins, outs, options, arrays = conv_model(rng, n=1, h=33, w=31, c=16, o=16, kh=5, kw=5, stride=(2, 2),
                                            padding="SAME", act="RELU6")
    check("CONV_2D", ins, outs, options, arrays, version=3)


@pytest.mark.parametrize("zx", [-128, 127])
def test_conv2d_extreme_zero_points_and_saturation(zx):
    rng = np.random.default_rng(zx + 500)
    for act in ACTS:
        for factor in (0.001, 1.0, 50.0):        # saturating, normal, and a very wide output scale
            ins, outs, options, arrays = conv_model(rng, n=1, h=6, w=5, c=7, o=5, kh=3, kw=2, zx=zx,
                                                    zo=-128 if zx > 0 else 127, act=act, out_scale_factor=factor)
            check("CONV_2D", ins, outs, options, arrays, version=3)


def test_conv2d_accumulator_wraps():
    """A bias near INT32_MAX: the int32 accumulator wraps around exactly as in the C++ kernel."""
    rng = np.random.default_rng(31)
    ins, outs, options, arrays = conv_model(rng, n=1, h=4, w=4, c=8, o=6, kh=3, kw=3, extreme=True)
    b = np.array([2**31 - 1, -2**31, 2**31 - 100, -2**31 + 100, 0, 12345], np.int32)
    ins[2] = T((6,), "int32", ins[2].scale, 0, 0, b)
    check("CONV_2D", ins, outs, options, arrays, version=3)


@pytest.mark.parametrize("budget", [16, 1 << 10, 1 << 15])
def test_conv2d_im2col_blocks(budget, monkeypatch):
    """A small im2col budget forces the block paths: several images per block, and row blocks
    within one image (with groups too)."""
    from quantspec.litert import _gemm

    monkeypatch.setattr(_gemm, "IM2COL_BUDGET", budget)
    rng = np.random.default_rng(budget)
    for groups in (1, 2):
        ins, outs, options, arrays = conv_model(rng, n=3, h=9, w=7, c=4 * groups, o=2 * groups, kh=3, kw=2,
                                                groups=groups, stride=(2, 1), padding="SAME")
        check("CONV_2D", ins, outs, options, arrays, version=3)


# ---------------------------------------------------------------------------------------------

def dw_model(rng, *, n, h, w, c, m, kh, kw, stride=(1, 1), dilation=(1, 1), padding="SAME", per_channel=True,
             act="NONE", bias=True, zx=None, zo=None, const_filter=True, extreme=False, factor=None):
    o = c * m
    s_in = np.float32(rng.uniform(0.005, 0.1))
    zx = int(rng.integers(-128, 128)) if zx is None else zx
    s_w = rng.uniform(0.001, 0.02, size=o).astype(np.float32) if per_channel else np.float32(rng.uniform(0.001, 0.02))
    if extreme:
        wts = rng.choice(np.array([-127, 127], np.int8), size=(1, kh, kw, o))
    else:
        wts = rng.integers(-127, 128, size=(1, kh, kw, o), dtype=np.int8)
    factor = rng.uniform(0.05, 2.0) if factor is None else factor
    s_out = np.float32(s_in * float(np.mean(s_w)) * 50 * np.sqrt(kh * kw) * factor)
    zo = int(rng.integers(-128, 128)) if zo is None else zo
    oh, ow = out_size(padding, h, kh, stride[0], dilation[0]), out_size(padding, w, kw, stride[1], dilation[1])
    ins = [T((n, h, w, c), "int8", s_in, zx), T(wts.shape, "int8", s_w, 0, 3, wts if const_filter else None)]
    x = rng.integers(-128, 128, size=(n, h, w, c), dtype=np.int8)
    arrays = [x] + ([] if const_filter else [wts])
    if bias:
        b = rng.integers(-20000, 20001, size=o).astype(np.int32)
        ins.append(T((o,), "int32", (np.float64(s_in) * s_w.astype(np.float64)).astype(np.float32), 0, 0, b))
    options = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1], "dilation_h_factor": dilation[0],
               "dilation_w_factor": dilation[1], "fused_activation_function": act, "depth_multiplier": m}
    return ins, [T((n, oh, ow, o), "int8", s_out, zo)], options, arrays


@pytest.mark.parametrize("seed", cases(40))
def test_depthwise_random(seed):
    rng = np.random.default_rng([seed, 3])
    geo = random_geometry(rng, "SAME" if seed % 2 else "VALID")
    ins, outs, options, arrays = dw_model(
        rng, n=int(rng.integers(1, 3)), c=int(rng.integers(1, 9)), m=int(rng.integers(1, 4)),
        per_channel=seed % 3 != 0, act=ACTS[seed % len(ACTS)], bias=seed % 4 != 1, const_filter=seed % 5 != 4,
        **geo)
    check("DEPTHWISE_CONV_2D", ins, outs, options, arrays, version=3)


@pytest.mark.parametrize("zx", [-128, 127])
def test_depthwise_extreme(zx):
    rng = np.random.default_rng(zx + 900)
    for act in ACTS:
        for factor in (0.001, 1.0, 50.0):
            ins, outs, options, arrays = dw_model(rng, n=1, h=7, w=6, c=5, m=2, kh=3, kw=3, zx=zx,
                                                  zo=-128 if zx > 0 else 127, act=act, extreme=True, factor=factor)
            check("DEPTHWISE_CONV_2D", ins, outs, options, arrays, version=3)


def test_depthwise_large():
    """A MobileNet-sized depthwise layer: 56x56x128, 3x3, stride 2, multiplier 1."""
    rng = np.random.default_rng(56)
    ins, outs, options, arrays = dw_model(rng, n=1, h=56, w=56, c=128, m=1, kh=3, kw=3, stride=(2, 2), act="RELU6")
    check("DEPTHWISE_CONV_2D", ins, outs, options, arrays, version=3)


# ---------------------------------------------------------------------------------------------

def _x(shape):
    return [np.zeros(shape, np.int8)]


W4 = np.ones((6, 3, 3, 4), np.int8)
B6 = np.ones(6, np.int32)
CONV_OPTS = {"padding": "SAME", "stride_h": 1, "stride_w": 1}
INVALID = [
    ("CONV_2D", "no bias", [T((1, 5, 5, 4), "int8", 0.1, 0), T(W4.shape, "int8", [0.01] * 6, 0, 0, W4)],
     CONV_OPTS, InvalidArgumentError, "bias"),
    ("CONV_2D", "filter zero point", [T((1, 5, 5, 4), "int8", 0.1, 0),
                                      T(W4.shape, "int8", [0.01] * 6, [0, 0, 1, 0, 0, 0], 0, W4),
                                      T((6,), "int32", [0.001] * 6, 0, 0, B6)], CONV_OPTS, InvalidArgumentError,
     "zero point"),
    ("CONV_2D", "bias zero point", [T((1, 5, 5, 4), "int8", 0.1, 0), T(W4.shape, "int8", [0.01] * 6, 0, 0, W4),
                                    T((6,), "int32", 0.001, 3, 0, B6)], CONV_OPTS, InvalidArgumentError, "zero point"),
    ("CONV_2D", "groups", [T((1, 5, 5, 6), "int8", 0.1, 0), T(W4.shape, "int8", [0.01] * 6, 0, 0, W4),
                           T((6,), "int32", [0.001] * 6, 0, 0, B6)], CONV_OPTS, ShapeError, "divide"),
    ("CONV_2D", "stride 0", [T((1, 5, 5, 4), "int8", 0.1, 0), T(W4.shape, "int8", [0.01] * 6, 0, 0, W4),
                             T((6,), "int32", [0.001] * 6, 0, 0, B6)], {"padding": "SAME"}, InvalidArgumentError,
     "stride_h"),
    ("CONV_2D", "bias length", [T((1, 5, 5, 4), "int8", 0.1, 0), T(W4.shape, "int8", [0.01] * 6, 0, 0, W4),
                                T((5,), "int32", [0.001] * 5, 0, 0, B6[:5])], CONV_OPTS, ShapeError, "bias"),
    ("CONV_2D", "scale count", [T((1, 5, 5, 4), "int8", 0.1, 0), T(W4.shape, "int8", [0.01] * 4, 0, 3, W4),
                                T((6,), "int32", [0.001] * 6, 0, 0, B6)], CONV_OPTS, ShapeError, "filter"),
    ("DEPTHWISE_CONV_2D", "filter batch", [T((1, 5, 5, 4), "int8", 0.1, 0),
                                           T((2, 3, 3, 4), "int8", 0.01, 0, 0, np.ones((2, 3, 3, 4)))],
     CONV_OPTS, ShapeError, "[1, KH, KW, channels]"),
    ("DEPTHWISE_CONV_2D", "channel multiple", [T((1, 5, 5, 4), "int8", 0.1, 0),
                                               T((1, 3, 3, 6), "int8", 0.01, 0, 0, np.ones((1, 3, 3, 6)))],
     CONV_OPTS, ShapeError, "multiple of the input channels"),
    ("DEPTHWISE_CONV_2D", "stride limit", [T((1, 5, 5, 4), "int8", 0.1, 0),
                                           T((1, 3, 3, 4), "int8", 0.01, 0, 0, np.ones((1, 3, 3, 4)))],
     {"padding": "SAME", "stride_h": 1, "stride_w": 40000}, InvalidArgumentError, "at most 32767"),
    ("DEPTHWISE_CONV_2D", "absent bias input", [T((1, 5, 5, 4), "int8", 0.1, 0),
                                                T((1, 3, 3, 4), "int8", 0.01, 0, 0, np.ones((1, 3, 3, 4))), None],
     CONV_OPTS, InvalidArgumentError, "bias"),
]


@pytest.mark.parametrize("case", INVALID, ids=[f"{c[0]}-{c[1]}" for c in INVALID])
def test_invalid(case):
    op, _, ins, options, error, fragment = case
    w = ins[1]
    o = w.shape[0] if op == "CONV_2D" else w.shape[3]
    outs = [T((1, 5, 5, o), "int8", 0.2, 0)]
    assert ref_fails(op, ins, outs, options, _x(ins[0].shape), 3) is not None, "LiteRT accepted it"
    with pytest.raises(error) as info:
        run_quantspec(op, ins, outs, options, _x(ins[0].shape))
    assert fragment in str(info.value)
