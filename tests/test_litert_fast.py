"""The fast path of LiteRT's QUANTIZE, DEQUANTIZE and requantizations gives the reference path's bytes.

Every kernel case of the LiteRT conformance tests (CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD,
SUB, MUL, QUANTIZE, DEQUANTIZE ... against BUILTIN_REF) already runs both paths and requires identical
bytes (``litert_kernel_check.quantspec_run``).  Here: the element-wise functions on special values
(ties, ±0, ±inf, NaN, quotients beyond int32, int32 codes beyond 2^24), the requantization primitives
on every shift and the extreme multipliers, broadcasting, the parallel kernels at small sizes, and
whole models through the Interpreter.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from refs import require_fast
from quantspec import litert as L
from quantspec._fastpath import runner as core
from quantspec._fastpath import jit
from quantspec.litert import fast
from quantspec.litert import fixedpoint as fp
from quantspec.litert.kernels.fully_connected import requantize_double

@pytest.fixture(autouse=True)
def _numba():
    require_fast()


@pytest.fixture
def reference_path():
    """Run a callable with QUANTSPEC_FAST=0 (the reference path)."""
    def run(f, *args, **kw):
        before = os.environ.get(jit.ENV)
        os.environ[jit.ENV] = "0"
        try:
            with np.errstate(over="ignore"):       # the reference path warns where float32 overflows
                return f(*args, **kw)
        finally:
            if before is None:
                del os.environ[jit.ENV]
            else:
                os.environ[jit.ENV] = before
    return run


@pytest.fixture(params=["serial", "parallel"])
def sizes(request, monkeypatch):
    """Both kernels: the serial one, and the parallel one with streaming stores (at small sizes)."""
    if request.param == "parallel":
        monkeypatch.setattr(core, "SERIAL_BELOW", 512)
        monkeypatch.setattr(core, "SERIAL_BELOW_PASSIVE", 512)
        monkeypatch.setattr(core, "CHUNK", 256)
        monkeypatch.setattr(core, "STREAM_FROM", 256)
        monkeypatch.setattr(core, "STREAM_BLOCK", 64)       # a line: short runs stream too
    return request.param


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


SPECIALS = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 127.5, -128.5, 1e-40, -1e-40, np.inf, -np.inf,
                     np.nan, 3e9, -3e9, 2.0 ** 31, -2.0 ** 31, 1e38, -1e38, 0.49999997, -0.49999997], np.float32)


def _floats(n, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([SPECIALS, (rng.integers(-400, 400, n) + 0.5) * np.float32(0.05),
                        rng.normal(0, 20, n)]).astype(np.float32)
    return rng.permutation(np.resize(x, 3 * n))


@pytest.mark.parametrize("zp", [-128, -3, 0, 5, 127])
@pytest.mark.parametrize("scale", [0.05, 0.1, 1.0, 1e-30, 3e37])
def test_quantize_per_tensor(reference_path, scale, zp):
    x = _floats(700, int(zp) + 1000)
    p = L.QuantParams(scale, zp)
    _same(L.quantize(x, p), reference_path(L.quantize, x, p))


def test_quantize_per_axis_and_out(reference_path):
    x = _floats(600, 7).reshape(3, 4, -1)
    for axis in (0, 1, 2):
        n = x.shape[axis]
        p = L.QuantParams(np.linspace(0.01, 0.5, n), np.arange(n) - n // 2, axis)
        _same(L.quantize(x, p), reference_path(L.quantize, x, p))
        out = np.empty(x.shape, np.int8)
        assert L.quantize(x, p, out=out) is out
        _same(out, reference_path(L.quantize, x, p))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32])
def test_dequantize(reference_path, dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype)
    q = rng.integers(info.min, info.max, 2000, endpoint=True, dtype=np.int64)
    q[:6] = [info.min, info.max, 0, -1 if info.min < 0 else 1, info.max - 1, info.min + 1]
    q = q.astype(dtype)
    zps = [0] if dtype == np.int16 else [0, 3, -7] if info.min < 0 else [0, 3, 250]
    for zp in zps:
        for scale in (0.1, 1e-3, 3.0, 1e-40 * 1e10, 7e37):
            p = L.QuantParams(scale, zp)
            _same(L.dequantize(q, p), reference_path(L.dequantize, q, p))
        p = L.QuantParams(np.linspace(0.01, 2.0, 8), np.full(8, zp), 1)
        _same(L.dequantize(q.reshape(250, 8), p), reference_path(L.dequantize, q.reshape(250, 8), p))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_dequantize_float32_lanes_only_where_exact(reference_path, dtype):
    """Codes of up to 16 bits run in float32 lanes while |q - zp| <= 2^24 (then both formulas are the
    correctly rounded product); zero points beyond that take the per-tensor double formula or the
    per-axis one, whose float32 conversion of q - zp rounds."""
    info = np.iinfo(dtype)
    q = np.arange(info.min, info.max + 1, max(1, (info.max - info.min) // 4000)).astype(dtype)
    q = np.concatenate([q, np.array([info.min, info.max], dtype)])
    edge = (1 << 23) - int(info.max)  # well inside the bound
    for zp in [(1 << 24) + int(info.min), (1 << 24) + int(info.min) + 1, -(1 << 24) + int(info.max),
               -(1 << 24) + int(info.max) - 1, edge, (1 << 25) + 3, -(1 << 30) - 1]:
        for scale in (0.1, 0.7, 3.0e-3, 1.0000001):
            p = L.QuantParams(scale, zp)
            _same(L.dequantize(q, p), reference_path(L.dequantize, q, p))
        p = L.QuantParams(np.full(2, 0.7), np.array([zp, 3]), 1)
        q2 = np.resize(q, (q.size // 2, 2))
        _same(L.dequantize(q2, p), reference_path(L.dequantize, q2, p))


def test_parallel_kernels(reference_path, sizes):
    """The serial and the parallel (streaming) kernels on one case of each kind of operation."""
    x = _floats(700, 5)
    p = L.QuantParams(0.1, -3)
    _same(L.quantize(x, p), reference_path(L.quantize, x, p))
    q = np.random.default_rng(1).integers(-128, 128, 2100).astype(np.int8)
    _same(L.dequantize(q, p), reference_path(L.dequantize, q, p))
    test_binary_broadcasting(reference_path, "ADD", ((64, 33), (33,)))


def _accumulators(rng, n):
    acc = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64)
    acc[: n // 2] = rng.integers(-70000, 70000, n // 2)
    acc[:8] = [-2 ** 31, 2 ** 31 - 1, 0, -1, 1, 2 ** 30, -2 ** 30, 12345]
    return acc.astype(np.int32)


@pytest.mark.parametrize("shift", list(range(-31, 31)))
def test_requantize_every_shift(reference_path, shift):
    rng = np.random.default_rng(shift + 100)
    acc = _accumulators(rng, 2048).reshape(256, 8)
    mult = np.array([-2 ** 31, 2 ** 31 - 1, 2 ** 30, 1 << 30 | 12345, 1518500250, 0, 1, 2 ** 31 - 2], np.int64)
    shifts = np.full(8, shift, np.int64)
    for zo, lo, hi in ((0, -128, 127), (-128, -128, 127), (127, -128, 127), (5, -100, 6)):
        got = fast.requantize_multiplier(acc, mult, shifts, zo, lo, hi)
        y = fp.multiply_by_quantized_multiplier(acc, mult, shifts).astype(np.int64) + zo
        want = np.clip(((y + 2 ** 31) & 0xFFFFFFFF) - 2 ** 31, lo, hi).astype(np.int8)
        _same(got, want)


def test_requantize_double(reference_path, sizes):
    rng = np.random.default_rng(9)
    acc = _accumulators(rng, 4096).reshape(512, 8)
    for eff in (np.float64(0.0013), np.linspace(1e-5, 0.5, 8), np.float64(3.0), np.float64(1e9), np.float64(0)):
        for zo in (-128, -5, 0, 127):
            got = fast.requantize_double(acc, eff, zo, -128, 127)
            want = reference_path(requantize_double, acc, np.asarray(eff).reshape(-1), zo, -128, 127)
            _same(got, want)


def _binary_params(op, s1, z1, s2, z2, so, zo, act="NONE"):
    from litert_build import T
    from litert_kernel_check import spec
    from quantspec.litert import OPS

    ins = [spec(T((1,), "int8", s1, z1)), spec(T((1,), "int8", s2, z2))]
    outs = [spec(T((1,), "int8", so, zo))]
    return OPS[op], ins, outs, {"fused_activation_function": act}


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
@pytest.mark.parametrize("shapes", [((64, 33), (64, 33)), ((64, 33), (33,)), ((1, 5, 1), (7, 1, 9)), ((), (40,))])
def test_binary_broadcasting(reference_path, op, shapes):
    from litert_build import T
    from litert_kernel_check import spec
    from quantspec.litert import OPS

    rng = np.random.default_rng(len(op) + len(shapes[1]))
    kernel = OPS[op]
    for s1, z1, s2, z2, so, zo, act in ((0.05, 3, 0.02, -7, 0.06, 1, "NONE"), (0.5, -128, 0.5, 127, 0.9, -128, "RELU"),
                                        (0.01, 0, 0.3, 0, 0.25, 10, "RELU6")):
        ins = [spec(T(shapes[0], "int8", s1, z1)), spec(T(shapes[1], "int8", s2, z2))]
        out_shape = np.broadcast_shapes(*shapes)
        outs = [spec(T(out_shape, "int8", so, zo))]
        p = kernel.prepare(ins, outs, {"fused_activation_function": act})
        x = rng.integers(-128, 128, shapes[0], dtype=np.int8)
        y = rng.integers(-128, 128, shapes[1], dtype=np.int8)
        (got,) = kernel.compute(p, [x, y])
        (want,) = reference_path(kernel.compute, p, [x, y])
        _same(got, want)


@pytest.mark.parametrize("name", ["cnn", "mlp_softmax", "mixed"])
def test_example_models(reference_path, name):
    interp = L.Interpreter(L.example_model(name))
    rng = np.random.default_rng(11)
    feeds = []
    for t in interp.inputs:
        dt = t.dtype.dtype
        if np.issubdtype(dt, np.floating):
            feeds.append(rng.normal(0, 2, t.shape).astype(dt))
        else:
            feeds.append(rng.integers(np.iinfo(dt).min, np.iinfo(dt).max, t.shape, endpoint=True).astype(dt))
    got = interp.run(feeds)
    want = reference_path(interp.run, feeds)
    for g, w in zip(got, want):
        _same(g, w)


def test_prepared_calls_are_reused_by_value(reference_path):
    """QUANTIZE / DEQUANTIZE keep what they prepared per (kind, shape, codes type, parameter values):
    equal QuantParams share it, other values, shapes or quantized dimensions do not."""
    from quantspec.litert import fast as F
    F._PREPARED.clear()
    x = _floats(64, 11)[:16 * 12].reshape(12, 16)
    x = x[:, :12].copy()                                   # square: both dimensions take 12 scales
    s = np.linspace(0.02, 0.3, 12)
    z = np.arange(12) - 6
    for p in (L.QuantParams(s, z, 0), L.QuantParams(s.copy(), z.copy(), 0), L.QuantParams(s, z, 1),
              L.QuantParams(s[::-1], z, 1), L.QuantParams(0.05, 3)):
        q = L.quantize(x, p)
        _same(q, reference_path(L.quantize, x, p))
        _same(L.dequantize(q, p), reference_path(L.dequantize, q, p))
        half = L.QuantParams(s[:6], z[:6], 0) if p.per_axis and p.quantized_dimension == 0 else p
        _same(L.quantize(x[:6], half), reference_path(L.quantize, x[:6], half))
    # the equal pair shared its entries: 4 parameter sets x (quantize, dequantize, quantize of 6 rows)
    assert len(F._PREPARED) == 4 * 3


def test_prepared_cache_is_bounded(reference_path, monkeypatch):
    from quantspec.litert import fast as F
    monkeypatch.setattr(F, "_PREPARED_MAX", 2)
    F._PREPARED.clear()
    x = _floats(50, 12)
    for i in range(5):
        p = L.QuantParams(0.01 * (i + 1), i)
        _same(L.quantize(x, p), reference_path(L.quantize, x, p))
        assert len(F._PREPARED) <= 2


@pytest.mark.parametrize("zp,bad", [([-200, 5], -200), ([3, 300], 300), (128, 128)])
def test_quantize_zero_point_error_names_the_offending_value(zp, bad):
    from quantspec.errors import RangeError
    p = L.QuantParams(np.full(np.size(zp), 0.1), zp, 0)
    with pytest.raises(RangeError, match=rf"must lie in \[-128, 127\] for int8 \(got {bad}\)"):
        L.quantize(np.zeros((np.size(zp), 2), np.float32), p)


def test_small_tensors_of_a_model_take_the_reference_path(monkeypatch):
    """By default the interpreter runs tensors below REFERENCE_IN_MODELS elements on the reference
    path (no kernel compiled for a model's tiny input and output), and larger ones on the kernels;
    the same bytes either way."""
    from quantspec.litert import interpreter

    monkeypatch.setattr(interpreter, "PLANS", False)     # the kernels' own paths (plans: test_litert_plans.py)
    model = L.example_model("mlp_softmax.tflite")
    interp = L.Interpreter(model)
    x = np.random.default_rng(4).integers(-128, 128, interp.inputs[0].shape, dtype=np.int8)
    everywhere = interp.run([x])[0]                  # (the test default: kernels at every size)
    used = []
    real = fast._jitted
    monkeypatch.setattr(fast, "_jitted", lambda: used.append(1) or real())
    monkeypatch.setattr(interpreter, "REFERENCE_IN_MODELS", 1 << 12)
    assert interp.run([x])[0].tobytes() == everywhere.tobytes()
    assert not used, "a tensor of a few elements ran on a compiled kernel"
    monkeypatch.setattr(interpreter, "REFERENCE_IN_MODELS", 0)
    assert interp.run([x])[0].tobytes() == everywhere.tobytes()
    assert used
