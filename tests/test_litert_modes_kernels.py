"""The optimized and XNNPACK kernel modes, op by op, against LiteRT itself: every int8 operator the
bundled and converter-made models hold, on random models and on edge corpora (ties of every
rounding, accumulators beyond 2^24, outputs beyond int16, NaN / inf, channel counts around the
vector widths, every broadcast pattern, thread counts), compared byte for byte with
``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` ("optimized") and the default resolver with the XNNPACK
delegate ("xnnpack").  Each test also asserts that its corpus holds outputs where that LiteRT
configuration differs from BUILTIN_REF, so it cannot pass by running the reference kernel.

``QUANTSPEC_LITERT_MODE_CASES`` scales the number of random cases (default 1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import rng_for
from litert_modes import cases, check_mode, int8, pow2, scale, zero_point

MODES = ("optimized", "xnnpack")


def _diff(before: int, op: str, mode: str) -> int:
    from litert_modes import differing

    return differing(op, mode) - before


def _before(op, mode):
    from litert_modes import differing

    return differing(op, mode)


# ---------------------------------------------------------------------------------------------
# CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED
# ---------------------------------------------------------------------------------------------

def _conv_case(r, i):
    o, c = int(r.integers(1, 20)), int(r.integers(1, 10))
    h, w = int(r.integers(1, 8)), int(r.integers(1, 8))
    k = int(r.choice([1, 3]))
    stride = int(r.choice([1, 1, 2]))
    dil = int(r.choice([1, 1, 2])) if k == 3 else 1
    padding = str(r.choice(["SAME", "VALID"]))
    if padding == "VALID" and (h < (k - 1) * dil + 1 or w < (k - 1) * dil + 1):
        padding = "SAME"
    ties = i % 2 == 0
    s_in = pow2(r, -4, 0) if ties else scale(r, -2, 0)
    s_out = pow2(r, -3, 3) if ties else scale(r, -2, 0.5)
    per_tensor = i % 5 == 4
    sw = np.array([pow2(r, -8, -4) if ties else scale(r, -3, -1) for _ in range(1 if per_tensor else o)],
                  np.float32)
    groups = 2 if (i % 7 == 6 and c % 2 == 0 and o % 2 == 0) else 1
    big = i % 9 == 8                              # accumulators beyond 2^24: float32 rounds them
    if big:
        c, k, groups, o, padding, dil = 300, 3, 1, 4, "SAME", 1
        sw = np.array([pow2(r, -8, -6)] * o, np.float32)
        s_in, s_out = 1.0, 2.0 ** 10
        filt = r.choice([-127, 127], (o, k, k, c)).astype(np.int8)
        x = r.choice([-128, 127], (1, h, w, c)).astype(np.int8)
    else:
        filt = r.integers(-127, 128, (o, k, k, c // groups)).astype(np.int8)
        x = int8(r, (int(r.integers(1, 3)), h, w, c))
    bias = r.integers(-4000, 4000, o).astype(np.int32)
    oh = math.ceil(h / stride) if padding == "SAME" else (h - (k - 1) * dil - 1) // stride + 1
    ow = math.ceil(w / stride) if padding == "SAME" else (w - (k - 1) * dil - 1) // stride + 1
    ins = [T(x.shape, "int8", s_in, zero_point(r)), T(filt.shape, "int8", sw, 0, 0, filt),
           T((o,), "int32", np.float32(s_in) * sw, 0, 0, bias)]
    outs = [T((x.shape[0], oh, ow, o), "int8", s_out, zero_point(r))]
    act = str(r.choice(["NONE", "NONE", "RELU", "RELU6", "RELU_N1_TO_1"]))
    opts = {"padding": padding, "stride_h": stride, "stride_w": stride, "dilation_h_factor": dil,
            "dilation_w_factor": dil, "fused_activation_function": act}
    return ins, outs, opts, [x]


@pytest.mark.parametrize("mode", MODES)
def test_conv_2d(mode):
    r = rng_for("modes-conv", mode)
    before = _before("CONV_2D", mode)
    for i in cases(48):
        check_mode("CONV_2D", *_conv_case(r, i), mode=mode, version=3)
    assert _diff(before, "CONV_2D", mode) > 0


def _depthwise_case(r, i):
    c = int(r.choice([1, 3, 7, 8, 9, 15, 16, 17, 24, 33]))
    m = int(r.choice([1, 1, 2]))
    h, w = int(r.integers(1, 8)), int(r.integers(1, 8))
    stride = int(r.choice([1, 2]))
    ties = i % 2 == 0
    s_in = pow2(r, -4, 0) if ties else scale(r, -2, 0)
    s_out = pow2(r, -3, 2) if ties else scale(r, -2, 0.5)
    oc = c * m
    sw = np.array([pow2(r, -8, -4) if ties else scale(r, -3, -1) for _ in range(oc)], np.float32)
    filt = r.integers(-127, 128, (1, 3, 3, oc)).astype(np.int8)
    bias = r.integers(-4000, 4000, oc).astype(np.int32)
    x = int8(r, (1, h, w, c))
    ins = [T(x.shape, "int8", s_in, zero_point(r)), T(filt.shape, "int8", sw, 0, 3, filt),
           T((oc,), "int32", np.float32(s_in) * sw, 0, 0, bias)]
    outs = [T((1, math.ceil(h / stride), math.ceil(w / stride), oc), "int8", s_out, zero_point(r))]
    opts = {"padding": "SAME", "stride_h": stride, "stride_w": stride, "depth_multiplier": m,
            "fused_activation_function": str(r.choice(["NONE", "RELU6"]))}
    return ins, outs, opts, [x]


@pytest.mark.parametrize("mode", MODES)
def test_depthwise_conv_2d(mode):
    r = rng_for("modes-depthwise", mode)
    before = _before("DEPTHWISE_CONV_2D", mode)
    for i in cases(48):
        check_mode("DEPTHWISE_CONV_2D", *_depthwise_case(r, i), mode=mode, version=3)
    assert _diff(before, "DEPTHWISE_CONV_2D", mode) > 0


def _fc_case(r, i):
    units, depth = int(r.integers(1, 40)), int(r.integers(1, 80))
    batch = int(r.choice([1, 1, 2, 5]))
    ties = i % 2 == 0
    per_tensor = i % 3 == 0
    if ties:                                       # an effective scale of 2^-6 or 2^-7: many exact halves
        depth = min(depth, 8)
        s_in, s_w = pow2(r, -2, 0), pow2(r, -6, -4)
        s_out = s_in * s_w * pow2(r, 6, 7)
        sw = np.full(1 if per_tensor else units, s_w, np.float32)
        filt = r.integers(-20, 21, (units, depth)).astype(np.int8)
    else:
        s_in, s_out = scale(r, -2, 0), scale(r, -2, 0.5)
        sw = np.array([scale(r, -3, -1) for _ in range(1 if per_tensor else units)], np.float32)
        filt = r.integers(-127, 128, (units, depth)).astype(np.int8)
    bias = r.integers(-4000, 4000, units).astype(np.int32)
    x = int8(r, (batch, depth))
    ins = [T(x.shape, "int8", s_in, zero_point(r)), T(filt.shape, "int8", sw, 0, 0, filt)]
    if i % 4 != 3:
        ins.append(T((units,), "int32", np.float32(s_in) * sw, 0, 0, bias))
    outs = [T((batch, units), "int8", s_out, zero_point(r))]
    return ins, outs, {"fused_activation_function": str(r.choice(["NONE", "RELU", "RELU6"]))}, [x]


@pytest.mark.parametrize("mode", MODES)
def test_fully_connected(mode):
    r = rng_for("modes-fc", mode)
    before = _before("FULLY_CONNECTED", mode)
    for i in cases(60):
        check_mode("FULLY_CONNECTED", *_fc_case(r, i), mode=mode, version=4)
    assert _diff(before, "FULLY_CONNECTED", mode) > 0


# ---------------------------------------------------------------------------------------------
# ADD, SUB, MUL
# ---------------------------------------------------------------------------------------------

#: broadcast patterns: equal shapes, five-fold with an inner run (y4 > 1), scalar broadcast over a
#: run (y4 == 1), and a pattern that is not five-fold (the generic reference loop)
_PATTERNS = [((2, 37), (2, 37)), ((70,), (70,)), ((3, 1), (3, 40)), ((1,), (50,)), ((2, 1, 33), (2, 5, 33)),
             ((5, 18), (18,)), ((2, 20, 1), (1, 1, 3)), ((2, 3, 1, 17), (1, 3, 4, 17)), ((4, 1, 6), (1, 5, 1)),
             ((1, 2, 3), (1, 2, 3))]


def _binary_case(r, i):
    a, b = _PATTERNS[i % len(_PATTERNS)]
    if r.random() < 0.5:
        a, b = b, a
    kind = i % 4
    if kind == 0:                                  # ties: powers of two
        s1, s2, so = pow2(r, -6, 0), pow2(r, -6, 0), pow2(r, -6, 0)
    elif kind == 1:                                # an output scale far below the inputs': beyond int16
        s1, s2, so = scale(r, -1, 0), scale(r, -1, 0), scale(r, -5, -4)
    elif kind == 2:                                # ratios outside XNNPACK's range: it declines ADD / MUL
        s1, s2, so = scale(r, -1, 0), scale(r, -6, -5), scale(r, -4, -3)
    else:
        s1, s2, so = scale(r), scale(r), scale(r)
    ins = [T(a, "int8", s1, zero_point(r)), T(b, "int8", s2, zero_point(r))]
    outs = [T(np.broadcast_shapes(a, b), "int8", so, zero_point(r))]
    act = str(r.choice(["NONE", "NONE", "RELU", "RELU6", "RELU_N1_TO_1"]))
    return ins, outs, {"fused_activation_function": act}, [int8(r, a), int8(r, b)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_binary(op, mode):
    r = rng_for("modes-binary", op, mode)
    before = _before(op, mode)
    for i in cases(60):
        check_mode(op, *_binary_case(r, i), mode=mode)
    if not (op == "SUB" and mode == "optimized"):   # SUB has no optimized int8 kernel: the reference one
        assert _diff(before, op, mode) > 0


def _int16_add_case(r, i):
    """int16 ADD (16x8 models, zero points 0): equal and rank-extended shapes (the optimized
    elementwise kernel) and broadcasts (the reference one); general scales."""
    a, b = [((64,), (64,)), ((2, 37), (2, 37)), ((70,), (1, 70)), ((3, 1), (3, 40)), ((2, 1, 33), (2, 5, 33))][i % 5]
    if r.random() < 0.5:
        a, b = b, a
    s1, s2 = scale(r, -4, -1), scale(r, -4, -1)
    if i % 3 == 2:                                 # a ratio below 2^-15: the lanes' shift truncates
        s1 *= 10.0 ** -r.uniform(4.5, 6)
    so = float(np.float32(max(s1, s2) * 10.0 ** r.uniform(-0.3, 1)))
    ins = [T(a, "int16", s1, 0), T(b, "int16", s2, 0)]
    outs = [T(np.broadcast_shapes(a, b), "int16", so, 0)]
    act = str(r.choice(["NONE", "NONE", "RELU"]))
    feeds = [r.integers(-32768, 32768, s).astype(np.int16) for s in (a, b)]
    if a == b == (64,):
        feeds = _add16_edges(r, ins, outs, feeds)
    return ins, outs, {"fused_activation_function": act}, feeds


def _add16_edges(r, ins, outs, feeds):
    """Half the elements: input pairs where the optimized lanes' input scaling (one shift, then the
    doubling high multiply) rounds differently from the reference's (the multiply, then a rounding
    shift) *and* the difference reaches the output; they are rare (about 1 in 10^5 random pairs), so
    they are searched for: the int16 values whose scaled value differs, against every other value."""
    from litert_kernel_check import spec
    from quantspec.litert.fixedpoint import rdbpot, srdhm
    from quantspec.litert.kernels import elementwise as ref_elementwise
    from quantspec.litert.kernels.optimized.elementwise import Add, _shift

    wide = [T((65536,), t.dtype, t.scale, t.zero_point) for t in (*ins, *outs)]
    p = ref_elementwise.Add().prepare([spec(t) for t in wide[:2]], [spec(wide[2])], {})
    every = np.arange(-32768, 32768, dtype=np.int64)
    found = []
    for side in (0, 1):
        m, e = p.multipliers[side], p.shifts[side]
        scaled_ref = rdbpot(srdhm(every << p.left_shift, m), -e)
        scaled_opt = srdhm(_shift(every, p.left_shift + e), m)
        cand = every[scaled_ref != scaled_opt]
        cand = r.choice(cand, min(4, cand.size), replace=False) if cand.size else cand
        for v in cand:
            mine = np.full(every.size, v, np.int16)
            pair = (mine, every.astype(np.int16)) if side == 0 else (every.astype(np.int16), mine)
            ref_out = ref_elementwise.add_sub_compute(p, list(pair))[0].reshape(-1)
            hit = np.flatnonzero(ref_out != Add._lanes16(p, *pair))
            found += [(int(pair[0][k]), int(pair[1][k])) for k in hit[:4]]
    x, y = (f.copy() for f in feeds)
    for k, (u, v) in enumerate(found[:32]):
        x[2 * k], y[2 * k] = u, v
    return [x, y]


@pytest.mark.parametrize("mode", MODES)
def test_int16_add(mode):
    from quantspec.errors import QuantSpecError
    from quantspec.litert import OPS
    from litert_kernel_check import spec

    r = rng_for("modes-add16", mode)
    ins, outs, opts, _ = _int16_add_case(r, 1)
    try:
        OPS["ADD"].prepare([spec(t) for t in ins], [spec(t) for t in outs], opts)
    except QuantSpecError:
        pytest.skip("this build's reference ADD has no int16 kernel")
    before = _before("ADD", mode)
    for i in cases(20):
        check_mode("ADD", *_int16_add_case(r, i), mode=mode)
    assert _diff(before, "ADD", mode) > 0       # XNNPACK declines int16: the builtin optimized kernel


# ---------------------------------------------------------------------------------------------
# MEAN, SUM
# ---------------------------------------------------------------------------------------------

def _reduce_case(r, i):
    if i % 2 == 0:                                 # 4-D spatial, the optimized MEAN's special case
        c = int(r.choice([1, 7, 16, 17, 24, 33, 40, 70]))
        shp = (int(r.integers(1, 3)), int(r.integers(1, 7)), int(r.integers(1, 7)), c)
        axes = np.array([1, 2] if r.random() < 0.7 else [2, -3], np.int32)
        keep = i % 4 == 0 or r.random() < 0.5
    else:
        rank = int(r.integers(1, 5))
        shp = tuple(int(d) for d in r.integers(1, 7, rank))
        k = int(r.integers(1, rank + 1))
        axes = np.array(sorted(r.choice(rank, k, replace=False)), np.int32)
        keep = bool(r.random() < 0.5)
    ax = {int(a) % len(shp) for a in axes}
    out = tuple(1 if d in ax else s for d, s in enumerate(shp)) if keep else tuple(
        s for d, s in enumerate(shp) if d not in ax)
    ties = i % 3 == 0
    s_in = pow2(r, -6, 0) if ties else scale(r)
    s_out = pow2(r, -6, 0) if ties else (s_in if i % 5 == 0 else scale(r))
    ins = [T(shp, "int8", s_in, zero_point(r)), T(axes.shape, "int32", data=axes)]
    return ins, [T(out, "int8", s_out, zero_point(r))], {"keep_dims": keep}, [int8(r, shp)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["MEAN", "SUM"])
def test_reduce(op, mode):
    r = rng_for("modes-reduce", op, mode)
    before = _before(op, mode)
    for i in cases(40):
        check_mode(op, *_reduce_case(r, i), mode=mode)
    assert _diff(before, op, mode) > 0


@pytest.mark.parametrize("threads", [1, 2, 3, 4])
def test_optimized_mean_depends_on_the_thread_count(threads):
    """The optimized 4-D MEAN splits the channels between threads and each range ends with a scalar
    tail: quantspec's num_threads reproduces each count; another count gives other bytes."""
    r = rng_for("modes-mean-threads", threads)
    from litert_modes import quantspec_run
    seen_other = 0
    for i in range(12):
        c = int(r.choice([24, 40, 48, 70]))
        shp = (1, int(r.choice([2, 4])), int(r.choice([2, 4])), c)     # H·W a power of 2: exact halves
        axes = np.array([1, 2], np.int32)
        ins = [T(shp, "int8", pow2(r, -6, 0), zero_point(r)), T((2,), "int32", data=axes)]
        outs = [T((1, 1, 1, c), "int8", pow2(r, -6, 0), zero_point(r))]
        x = int8(r, shp)
        theirs = check_mode("MEAN", ins, outs, {"keep_dims": True}, [x], mode="optimized", threads=threads)
        other, _ = quantspec_run("MEAN", ins, outs, {"keep_dims": True}, [x], "optimized", threads=threads % 4 + 1)
        seen_other += int(np.sum(other[0] != theirs[0]))
    assert seen_other > 0


# ---------------------------------------------------------------------------------------------
# SOFTMAX, LOG_SOFTMAX, LOGISTIC, TANH
# ---------------------------------------------------------------------------------------------

def _softmax_case(r, i, op):
    shp = tuple(int(d) for d in r.integers(1, 30, int(r.integers(1, 4))))
    s_in = scale(r, -2, 0.3)
    x = int8(r, shp)
    if op == "SOFTMAX":
        beta = (1.0, 0.5, 2.0, 1e-9)[i % 4]      # 1e-9: BUILTIN_REF aborts, the optimized kernel runs
        return [T(shp, "int8", s_in, zero_point(r))], [T(shp, "int8", 1 / 256, -128)], {"beta": beta}, [x]
    s_in = pow2(r, -3, 0) if i % 2 else s_in        # LOG_SOFTMAX rounds with rint: ties to even
    return [T(shp, "int8", s_in, zero_point(r))], [T(shp, "int8", 16 / 256, 127)], {}, [x]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["SOFTMAX", "LOG_SOFTMAX"])
def test_softmax(op, mode):
    r = rng_for("modes-softmax", op, mode)
    before = _before(op, mode)
    for i in cases(40):
        check_mode(op, *_softmax_case(r, i, op), mode=mode)
    assert _diff(before, op, mode) > 0


@pytest.mark.parametrize("mode", MODES)
def test_softmax_where_the_reference_kernel_aborts(mode):
    """Rows whose exponentials sum to 512 or more make BUILTIN_REF abort (``GetReciprocal``); the
    optimized kernel (float32) computes them.  Run only where quantspec's reference kernel refuses
    the row as LiteRT's does (else BUILTIN_REF would be run on it, and abort the test process)."""
    from litert_modes import _ref_ok

    n = 512
    case = ([T((1, n), "int8", 0.1, 0)], [T((1, n), "int8", 1 / 256, -128)], {"beta": 1.0},
            [np.full((1, n), 5, np.int8)])
    if _ref_ok("SOFTMAX", *case):
        pytest.skip("this build's reference SOFTMAX does not refuse the row BUILTIN_REF aborts on")
    assert check_mode("SOFTMAX", *case, mode=mode)[0].reshape(-1)[0] == -127


#: (input scale, zero point) where XNNPACK's sigmoid table differs from LiteRT's (searched offline)
_LOGISTIC_TABLE_DIFFERS = [(0.002146438229829073, -91), (0.01791650429368019, -16), (0.09454759955406189, 83)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_logistic_tanh(op, mode):
    r = rng_for("modes-lut", op, mode)
    before = _before(op, mode)
    fixed = (1 / 256, -128) if op == "LOGISTIC" else (1 / 128, 0)
    every = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    params = [(scale(r, -3, 0.5), zero_point(r)) for _ in cases(20)]
    if op == "LOGISTIC":
        params += _LOGISTIC_TABLE_DIFFERS
    for s, z in params:
        check_mode(op, [T((1, 256), "int8", s, z)], [T((1, 256), "int8", *fixed)], {}, [every], mode=mode)
    if op == "LOGISTIC" and mode == "xnnpack":
        assert _diff(before, op, mode) > 0


def test_gemmlowp_int16_logistic_tanh_match_litert_optimized():
    """int16 LOGISTIC / TANH with input scale 2^-12 (TANH also 2^-11): LiteRT's optimized kernels
    compute gemmlowp's 16-bit fixed-point functions, every code compared (no quantspec reference
    kernel involved); BUILTIN_REF's table gives other bytes on most codes."""
    from litert_build import build
    from litert_modes import litert_run
    from quantspec.litert.kernels.optimized._gemmlowp16 import logistic_q3, saturating_double, tanh_q3

    every = np.arange(-32768, 32768, dtype=np.int64)
    for op, log2 in [("LOGISTIC", -12), ("TANH", -12), ("TANH", -11)]:
        model = build(op, [T((65536,), "int16", 2.0 ** log2, 0)], [T((65536,), "int16", 2.0 ** -15, 0)], {}, 1)
        theirs = litert_run(model, [every.astype(np.int16)], "optimized")[0]
        x = saturating_double(every) if log2 == -11 else every
        ours = (logistic_q3 if op == "LOGISTIC" else tanh_q3)(x).astype(np.int16)
        assert ours.tobytes() == theirs.tobytes(), (op, log2, int(np.sum(ours != theirs)))
        reference = litert_run(model, [every.astype(np.int16)], "reference")[0]
        assert np.sum(reference != theirs) > 10000


def _int16_unary_cases(r):
    """int16 LOGISTIC / TANH (every code; power-of-two input scales, near ones CheckedLog2 accepts,
    general ones) and float -> int16 QUANTIZE (ties, NaN, infinities, huge values; sizes around the
    8-element blocks)."""
    every = np.arange(-32768, 32768, dtype=np.int16)
    for op in ("LOGISTIC", "TANH"):
        for s in (2.0 ** -14, 2.0 ** -12, 2.0 ** -11, 2.0 ** -12 * 1.0001, scale(r, -4, -2)):
            yield op, [T((65536,), "int16", s, 0)], [T((65536,), "int16", 2.0 ** -15, 0)], {}, [every], 1
    for n in (7, 8, 23, 1007):
        s = scale(r, -5, 0)
        k = r.integers(-40000, 40000, n).astype(np.float32)
        x = ((k + np.float32(0.5)) * np.float32(s)).astype(np.float32)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e9 * s, -1e9 * s], np.float32)
        m = min(n, specials.size)
        x[r.choice(n, m, replace=False)] = specials[:m]
        yield "QUANTIZE", [T((n,), "float")], [T((n,), "int16", s, 0)], {}, [x], 2


@pytest.mark.parametrize("mode", MODES)
def test_int16_logistic_tanh_quantize(mode):
    from quantspec.errors import QuantSpecError
    from quantspec.litert import OPS
    from litert_kernel_check import spec

    r = rng_for("modes-int16-unary", mode)
    try:
        OPS["TANH"].prepare([spec(T((4,), "int16", 2.0 ** -12, 0))], [spec(T((4,), "int16", 2.0 ** -15, 0))], {})
    except QuantSpecError:
        pytest.skip("this build's reference kernels have no int16 LOGISTIC / TANH")
    before = {op: _before(op, mode) for op in ("LOGISTIC", "TANH", "QUANTIZE")}
    for op, ins, outs, opts, feeds, version in _int16_unary_cases(r):
        check_mode(op, ins, outs, opts, feeds, mode=mode, version=version)
    assert all(_diff(before[op], op, mode) > 0 for op in before)


# ---------------------------------------------------------------------------------------------
# QUANTIZE, DEQUANTIZE
# ---------------------------------------------------------------------------------------------

def _quantize_case(r, i):
    n = int(r.integers(1, 70))
    if i % 2 == 0:                                 # float -> int8: ties, NaN, infinities, huge values
        s, z = scale(r, -3, 0), zero_point(r)
        k = r.integers(-300, 300, n).astype(np.float32)
        x = ((k + np.float32(0.5)) * np.float32(s)).astype(np.float32)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 1e9 * s, -1e9 * s], np.float32)
        m = min(n, specials.size)
        x[r.choice(n, m, replace=False)] = specials[:m]
        return [T((n,), "float")], [T((n,), "int8", s, z)], {}, [x]
    s_in = pow2(r, -6, 0) if i % 4 == 1 else scale(r)
    s_out = pow2(r, -6, 0) if i % 4 == 1 else scale(r)
    return [T((n,), "int8", s_in, zero_point(r))], [T((n,), "int8", s_out, zero_point(r))], {}, [int8(r, (n,))]


@pytest.mark.parametrize("mode", MODES)
def test_quantize(mode):
    r = rng_for("modes-quantize", mode)
    before = _before("QUANTIZE", mode)
    for i in cases(48):
        check_mode("QUANTIZE", *_quantize_case(r, i), mode=mode)
    assert _diff(before, "QUANTIZE", mode) > 0


@pytest.mark.parametrize("mode", MODES)
def test_dequantize(mode):
    r = rng_for("modes-dequantize", mode)
    before = _before("DEQUANTIZE", mode)
    for i in cases(24):
        n = int(r.integers(1, 40))
        if i % 4 == 3:                             # per-axis
            c = int(r.integers(1, 5))
            shp = (c, n)
            ins = [T(shp, "int8", [scale(r) for _ in range(c)], [zero_point(r) for _ in range(c)], 0)]
        else:
            shp = (n,)
            ins = [T(shp, "int8", scale(r), zero_point(r))]
        check_mode("DEQUANTIZE", ins, [T(shp, "float")], {}, [int8(r, shp)], mode=mode)
    if mode == "optimized":
        assert _diff(before, "DEQUANTIZE", mode) > 0


# ---------------------------------------------------------------------------------------------
# RESIZE_BILINEAR
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_resize_bilinear(mode):
    r = rng_for("modes-resize", mode)
    before = _before("RESIZE_BILINEAR", mode)
    for i in cases(30):
        h, w, c = int(r.integers(1, 8)), int(r.integers(1, 8)), int(r.integers(1, 20))
        oh, ow = int(r.integers(1, 17)), int(r.integers(1, 17))
        opts = {"align_corners": i % 3 == 1, "half_pixel_centers": i % 3 == 2}
        s, z = scale(r), zero_point(r)
        size = np.array([oh, ow], np.int32)
        check_mode("RESIZE_BILINEAR", [T((1, h, w, c), "int8", s, z), T((2,), "int32", data=size)],
                   [T((1, oh, ow, c), "int8", s, z)], opts, [int8(r, (1, h, w, c))], mode=mode, version=3)
    if mode == "xnnpack":
        assert _diff(before, "RESIZE_BILINEAR", mode) > 0


# ---------------------------------------------------------------------------------------------
# operators whose optimized and XNNPACK bytes are the reference kernel's
# ---------------------------------------------------------------------------------------------

def _same_cases(r, op):
    shp = tuple(int(d) for d in r.integers(1, 6, 4))
    s, z = scale(r), zero_point(r)
    x = int8(r, shp)
    if op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        f = int(r.integers(1, 4))
        opts = {"padding": str(r.choice(["SAME", "VALID"])), "stride_h": 1, "stride_w": 1,
                "filter_height": min(f, shp[1]), "filter_width": min(f, shp[2])}
        oh = shp[1] if opts["padding"] == "SAME" else shp[1] - opts["filter_height"] + 1
        ow = shp[2] if opts["padding"] == "SAME" else shp[2] - opts["filter_width"] + 1
        return [T(shp, "int8", s, z)], [T((shp[0], oh, ow, shp[3]), "int8", s, z)], opts, [x]
    if op == "CONCATENATION":
        return ([T(shp, "int8", s, z), T(shp, "int8", s, z)], [T((shp[0] * 2,) + shp[1:], "int8", s, z)],
                {"axis": 0}, [x, int8(r, shp)])
    if op == "PAD":
        p = r.integers(0, 3, (4, 2)).astype(np.int32)
        out = tuple(int(d + p[i].sum()) for i, d in enumerate(shp))
        return [T(shp, "int8", s, z), T((4, 2), "int32", data=p)], [T(out, "int8", s, z)], {}, [x]
    if op == "TRANSPOSE":
        perm = r.permutation(4).astype(np.int32)
        return ([T(shp, "int8", s, z), T((4,), "int32", data=perm)], [T(tuple(shp[i] for i in perm), "int8", s, z)],
                {}, [x])
    if op == "RESHAPE":
        out = (int(np.prod(shp)),)
        return [T(shp, "int8", s, z), T((1,), "int32", data=np.array(out, np.int32))], [T(out, "int8", s, z)], \
            {"new_shape": list(out)}, [x]
    if op == "L2_NORMALIZATION":
        return [T(shp, "int8", s, z)], [T(shp, "int8", 1 / 128, 0)], {}, [x]
    if op in ("LESS", "GREATER", "EQUAL"):
        return [T(shp, "int8", s, z), T(shp, "int8", scale(r), zero_point(r))], [T(shp, "bool")], {}, [x, int8(r, shp)]
    if op in ("MAXIMUM", "MINIMUM"):
        return [T(shp, "int8", s, z), T(shp, "int8", s, z)], [T(shp, "int8", s, z)], {}, [x, int8(r, shp)]
    raise AssertionError(op)


_SAME = ["AVERAGE_POOL_2D", "MAX_POOL_2D", "CONCATENATION", "PAD", "TRANSPOSE", "RESHAPE", "L2_NORMALIZATION",
         "LESS", "GREATER", "EQUAL", "MAXIMUM", "MINIMUM"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", _SAME)
def test_reference_bytes_in_every_mode(op, mode):
    r = rng_for("modes-same", op, mode)
    for _ in cases(6):
        check_mode(op, *_same_cases(r, op), mode=mode, version=1 if op == "RESHAPE" else 2)


# ---------------------------------------------------------------------------------------------
# the fast path (numba) and the numpy path of the modes give the same bytes
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"])
def test_fast_path_equals_numpy_path(op, mode, monkeypatch):
    from refs import require_fast
    from litert_modes import quantspec_run

    require_fast()
    make = {"CONV_2D": _conv_case, "DEPTHWISE_CONV_2D": _depthwise_case, "FULLY_CONNECTED": _fc_case}[op]
    r = rng_for("modes-fast", op, mode)
    for i in range(12):
        ins, outs, opts, feeds = make(r, i)
        fast, _ = quantspec_run(op, ins, outs, opts, feeds, mode)
        monkeypatch.setenv("QUANTSPEC_FAST", "0")
        slow, _ = quantspec_run(op, ins, outs, opts, feeds, mode)
        monkeypatch.delenv("QUANTSPEC_FAST")
        assert [a.tobytes() for a in fast] == [b.tobytes() for b in slow], (op, mode, i)


# ---------------------------------------------------------------------------------------------
# LEAKY_RELU, BATCH_MATMUL, TRANSPOSE_CONV (run where this build has their reference kernels)
# ---------------------------------------------------------------------------------------------

def _require_op(op):
    from quantspec.litert import OPS

    if op not in OPS:
        pytest.skip(f"this build has no reference {op} kernel")


@pytest.mark.parametrize("mode", MODES)
def test_leaky_relu(mode):
    _require_op("LEAKY_RELU")
    r = rng_for("modes-leaky-relu", mode)
    before = _before("LEAKY_RELU", mode)
    every = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
    for i in cases(30):
        alpha = float(np.float32([0.01, 0.1, 0.2, 0.3, -0.5, 1.5, 1e-3, 0.0][i % 8]))
        s_in = pow2(r, -6, 0) if i % 3 == 0 else scale(r, -3, 0)
        s_out = pow2(r, -6, 0) if i % 3 == 0 else scale(r, -3, 0)
        if i % 10 == 9:                            # a ratio XNNPACK declines
            s_out = s_in * 1000
        check_mode("LEAKY_RELU", [T((1, 256), "int8", s_in, zero_point(r))], [T((1, 256), "int8", s_out, zero_point(r))],
                   {"alpha": alpha}, [every], mode=mode, version=1)
    if mode == "xnnpack":
        assert _diff(before, "LEAKY_RELU", mode) > 0


def _bmm_case(r, i):
    rank = int(r.integers(2, 5))
    batch = [int(d) for d in r.integers(1, 4, rank - 2)]
    m, k, n = int(r.integers(1, 20)), int(r.integers(1, 70)), int(r.integers(1, 20))
    adj_x, adj_y = bool(i % 2), bool((i // 2) % 2)
    bl, br = list(batch), list(batch)
    if batch and i % 3 == 0:
        br[0] = 1
    a = tuple(bl) + ((k, m) if adj_x else (m, k))
    b = tuple(br) + ((n, k) if adj_y else (k, n))
    out = tuple(np.broadcast_shapes(tuple(bl), tuple(br))) + (m, n)
    ties = i % 2 == 0
    s1, s2 = (pow2(r, -6, -2), pow2(r, -6, -2)) if ties else (scale(r, -3, 0), scale(r, -3, 0))
    so = pow2(r, -3, 3) if ties else scale(r, -2, 1)
    z2 = 0 if i % 5 else zero_point(r)             # a non-zero right zero point: XNNPACK declines
    const = i % 4 < 2
    rhs = T(b, "int8", s2, z2, 0, int8(r, b) if const else None)
    feeds = [int8(r, a)] + ([] if const else [int8(r, b)])
    return [T(a, "int8", s1, zero_point(r)), rhs], [T(out, "int8", so, zero_point(r))], \
        {"adj_x": adj_x, "adj_y": adj_y}, feeds


@pytest.mark.parametrize("mode", MODES)
def test_batch_matmul(mode):
    _require_op("BATCH_MATMUL")
    r = rng_for("modes-bmm", mode)
    before = _before("BATCH_MATMUL", mode)
    for i in cases(40):
        check_mode("BATCH_MATMUL", *_bmm_case(r, i), mode=mode, version=1)
    if mode == "xnnpack":
        assert _diff(before, "BATCH_MATMUL", mode) > 0


def _transpose_conv_case(r, i):
    from quantspec.litert.kernels._common import out_size

    while True:
        wide = i % 4 == 3
        dtype = "int16" if wide else "int8"
        h, w, ci = int(r.integers(1, 6)), int(r.integers(1, 6)), int(r.integers(1, 6))
        oc = int(r.choice([1, 3, 8, 9, 16, 17]))
        kh, kw = int(r.integers(1, 4)), int(r.integers(1, 4))
        sh, sw = int(r.integers(1, 3)), int(r.integers(1, 3))
        padding = str(r.choice(["SAME", "VALID"]))
        heights = [o for o in range(1, 16) if out_size(padding, o, kh, sh, 1) == h]
        widths = [o for o in range(1, 16) if out_size(padding, o, kw, sw, 1) == w]
        if heights and widths:
            break
    oh, ow = int(r.choice(heights)), int(r.choice(widths))
    ties = i % 2 == 0
    s_in = pow2(r, -6, -2) if ties else scale(r, -3, -1)
    s_out = pow2(r, -4, 1) if ties else scale(r, -3, 0)
    per_channel = bool(i % 3)
    s_w = [pow2(r, -7, -3) if ties else scale(r, -3, -1) for _ in range(oc)] if per_channel else \
        (pow2(r, -7, -3) if ties else scale(r, -3, -1))
    b_scale = (np.float32(s_in) * np.atleast_1d(np.asarray(s_w, np.float32))).astype(np.float32)
    options = {"padding": padding, "stride_h": sh, "stride_w": sw,
               "fused_activation_function": str(r.choice(["NONE", "RELU", "RELU6"]))}
    if wide:
        options["quantized_bias_type"] = "INT32" if i % 8 == 3 else "INT64"
    bias_type = "int64" if wide and options["quantized_bias_type"] == "INT64" else "int32"
    inputs = [T((4,), "int32", data=np.array([1, oh, ow, oc], np.int32)),
              T((oc, kh, kw, ci), "int8", s_w, 0, 0, r.integers(-127, 128, (oc, kh, kw, ci)).astype(np.int8)),
              T((1, h, w, ci), dtype, s_in, 0 if wide else zero_point(r)),
              T((oc,), bias_type, list(b_scale) if per_channel else float(b_scale[0]), 0, 0,
                r.integers(-3000, 3000, oc).astype(bias_type))]
    x = r.integers(-32768, 32768, (1, h, w, ci)).astype(np.int16) if wide else int8(r, (1, h, w, ci))
    return inputs, [T((1, oh, ow, oc), dtype, s_out, 0 if wide else zero_point(r))], options, [x]


@pytest.mark.parametrize("mode", MODES)
def test_transpose_conv(mode):
    _require_op("TRANSPOSE_CONV")
    r = rng_for("modes-transpose-conv", mode)
    before = _before("TRANSPOSE_CONV", mode)
    for i in cases(40):
        check_mode("TRANSPOSE_CONV", *_transpose_conv_case(r, i), mode=mode, version=3)
    assert _diff(before, "TRANSPOSE_CONV", mode) > 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["CONV_2D", "FULLY_CONNECTED"])
def test_int16_gemm_with_an_int32_bias_is_refused(op, mode):
    """LiteRT's optimized 16x8 CONV_2D / FULLY_CONNECTED with an int32 bias are not modelled: the
    optimized and XNNPACK modes refuse them (an int64 bias is the reference kernel there too)."""
    from litert_kernel_check import spec
    from quantspec.errors import UnsupportedError
    from quantspec.litert.kernels.modes import select

    x = T((1, 4, 4, 8) if op == "CONV_2D" else (2, 8), "int16", 0.01, 0)
    w = T((4, 1, 1, 8) if op == "CONV_2D" else (4, 8), "int8", 0.1, 0, 0, np.ones((4, 1, 1, 8) if op == "CONV_2D"
                                                                           else (4, 8), np.int8))
    out = T((1, 4, 4, 4) if op == "CONV_2D" else (2, 4), "int16", 0.02, 0)
    for bias_type, refused in (("int32", True), ("int64", False)):
        ins = [spec(x), spec(w), spec(T((4,), bias_type, 0.001, 0, 0, np.zeros(4, bias_type)))]
        if refused:
            with pytest.raises(UnsupportedError, match="not modelled"):
                select(mode, op, ins, [spec(out)], {})
        else:
            assert select(mode, op, ins, [spec(out)], {})[1] == "optimized"


@pytest.mark.parametrize("mode", [m for m in MODES if m != "reference"])
@pytest.mark.filterwarnings("error::RuntimeWarning")          # numpy's overflow warning must not reach the user
@pytest.mark.parametrize("s_in, beta, nan", [(0.05, float("inf"), True), (100.0, 3e38, True), (0.05, 3e38, False)])
def test_softmax_of_an_infinite_beta_wraps_its_nan_as_litert(mode, s_in, beta, nan):
    """beta = inf (or a beta whose product with the input scale overflows) puts NaN in the optimized
    kernel's exp table: the row's sum and probabilities are NaN, int32(round(NaN)) is INT32_MIN on
    x86, and adding the output zero point (-128, the only one LiteRT takes) wraps in int32 to a
    large positive value, clamped to 127.  Found by the 20000-example .tflite fuzzer (a damaged mlp_softmax.tflite
    in the xnnpack mode); the same bytes as LiteRT's resolver."""
    x = np.array([[-128, -5, 0, 7, 7, 127, 3, -1]], np.int8)
    out = check_mode("SOFTMAX", [T(x.shape, "int8", s_in, 2)], [T(x.shape, "int8", 1 / 256, -128)], {"beta": beta},
                     [x], mode=mode)
    assert (out[0] == 127).all() == nan          # a finite table: 127 for the largest input only


@pytest.mark.parametrize("filt, stride, padding", [((2, 2050), (2, 2), "VALID"), ((13, 2), (1, 2), "VALID"),
                                                   ((20, 30), (3, 5), "VALID"), ((12, 3), (2, 2), "VALID"),
                                                   ((13, 2), (1, 2), "SAME")])
def test_max_pool_with_a_window_longer_than_the_input_as_xnnpack_sizes_it(filt, stride, padding):
    """MAX_POOL_2D with a VALID window longer than its input (a damaged model, found by the
    20000-example .tflite fuzzer): LiteRT's own kernel gives an empty output, XNNPACK one position
    per such axis, the maximum over the whole input there; quantspec's modes give each one's bytes."""
    r = np.random.default_rng(5)
    x = r.integers(-128, 128, (1, 12, 12, 3)).astype(np.int8)
    opts = {"padding": padding, "stride_h": stride[0], "stride_w": stride[1], "filter_height": filt[0],
            "filter_width": filt[1], "fused_activation_function": "NONE"}
    for mode in MODES:
        check_mode("MAX_POOL_2D", [T(x.shape, "int8", 0.03, -26)], [T((1, 6, 6, 3), "int8", 0.03, -26)], opts, [x],
                   mode=mode)
