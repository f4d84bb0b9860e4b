"""The fast path of ONNX QuantizeLinear / DequantizeLinear gives the reference path's bytes.

The fused kernels (:mod:`quantspec.onnx.fast`) and the readable numpy path
(:mod:`quantspec.onnx.reference`) run on the same plan for every case of the conformance corpora
(:mod:`test_onnx_conformance`: every output type x granularity x input type x precision x saturate,
for ``compat="spec"`` and ``"onnxruntime"``, the latter for every reproduced onnxruntime release
(``ort_version=``, with x and the scale of different types where 1.32.0 takes them); every
dequantize input x scale x output type), and
must produce identical bytes.  The corpora hold ties, ±0, ±inf, NaN, huge values, denormals and the
float8/float6/float4 edges, in odd shapes with partial blocks and negative axes.  A second pass
repeats a selection with the parallel kernels and streaming stores switched on at small sizes, so
that chunk boundaries, unaligned heads and tails all occur.  Speed is measured by ``quantspec
bench``, never here.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import pytest

import onnx_corpus as C
import test_onnx_conformance as T
from refs import require_fast
from quantspec import onnx as qo
from quantspec._fastpath import runner as core
from quantspec._fastpath import jit
from quantspec.errors import InvalidArgumentError, QuantSpecError, ShapeError
from quantspec.onnx import fast, reference
from quantspec.onnx.plan import ORT, ORT_VERSIONS

@pytest.fixture(autouse=True)
def _numba():
    require_fast()

FAST_X = ("float", "float16", "bfloat16")


def _same(plan, x, run=None):
    """Both paths on one plan; the fast path must be the one selected, and agree to the byte."""
    assert fast.path(plan) == "fast", "the fast path does not cover this plan"
    if isinstance(plan, qo.QuantizePlan):
        want, got = reference.quantize(plan, x), fast.quantize(plan, x)
    else:
        want, got = reference.dequantize(plan, x), fast.dequantize(plan, x)
    assert C.same_bits(want, got), C.show_diff(x, want, got)


def _q_plan(compat, out, g, xt, precision, sat, key, n_random=96, ort_version=None, scale_type=None):
    rng = C.rng_for(key, compat, out, g, xt, precision, sat, *((ort_version,) if ort_version else ()))
    if scale_type is None:
        scale_type = xt if compat == "onnxruntime" else str(rng.choice([t for t in T.NEWEST.q_scale if t != "int32"]))
    with_zp = rng.random() < 0.7
    x, s, zp, axis, block = T._make_q_inputs(rng, out, g, xt, scale_type, with_zp, n_random=n_random)
    attrs = T._quantspec_kwargs(T._attrs(out, axis, block, g, sat, precision, zp, rng))
    opset = 25 if compat == "onnxruntime" else None
    kw = {"ort_version": ort_version} if compat == "onnxruntime" else {}
    return qo.plan_quantize(x, s, zp, opset=opset, compat=compat, **attrs, **kw), x


def _q_cases(compat):
    if compat == "spec":
        return list(T._q_cases(T.NEWEST.q_out, FAST_X, T.PRECISIONS))
    return list(T._q_cases(ORT.q_out, ORT.q_x, T.ORT_PRECISIONS))


ORT_RELEASES = [r.version for r in ORT_VERSIONS]


@pytest.mark.parametrize("out,g,xt,precision,sat", _q_cases("spec"))
def test_quantize_spec(out, g, xt, precision, sat):
    plan, x = _q_plan("spec", out, g, xt, precision, sat, "fast-q")
    _same(plan, x)


@pytest.mark.parametrize("ort_version", ORT_RELEASES)
@pytest.mark.parametrize("out,g,xt,precision,sat", _q_cases("onnxruntime"))
def test_quantize_onnxruntime(out, g, xt, precision, sat, ort_version):
    plan, x = _q_plan("onnxruntime", out, g, xt, precision, sat, "fast-q", ort_version=ort_version)
    assert plan.ort.version == ort_version
    _same(plan, x)


@pytest.mark.parametrize("ort_version", [r.version for r in ORT_VERSIONS if r.mixed_types])
@pytest.mark.parametrize("out,g,xt,precision,sat", [c for c in _q_cases("onnxruntime")
                                                    if c.values[0] in ("int8", "uint16", "int4", "int2",
                                                                       "float8e4m3fn", "float8e5m2fnuz")])
def test_quantize_onnxruntime_mixed_types(out, g, xt, precision, sat, ort_version):
    """x and the scale of different types (onnxruntime 1.32.0): the quotient in the precision, else
    the scale's type."""
    st = "float16" if xt == "float" else "float"
    plan, x = _q_plan("onnxruntime", out, g, xt, precision, sat, "fast-q-mixed", ort_version=ort_version,
                      scale_type=st)
    assert plan.scale.dtype != plan.x_type.dtype
    _same(plan, x)


def _dq_plan(compat, xt, g, st, ot, key, n=300, ort_version=None):
    rng = C.rng_for(key, compat, xt, g, st, ot)
    with_zp = rng.random() < 0.7
    zero_zp = T._is_f8(xt) or (compat == "spec" and xt == "int32")
    x, s, zp, axis, block = T._make_dq_inputs(rng, xt, g, st, with_zp, zero_zp=zero_zp, n=n)
    attrs = {"axis": axis, "block_size": block if g == "block" else 0, "output_dtype": ot}
    opset = 25 if compat == "onnxruntime" else None
    kw = {"ort_version": ort_version} if compat == "onnxruntime" else {}
    return qo.plan_dequantize(x, s, zp, opset=opset, compat=compat, **attrs, **kw), x


_DQ_SPEC = [c for c in T._dq_cases(T.DQ_X, T.DQ_SCALES, T.DQ_OUTS)
            if not (c.values[2] == "float8e8m0" and c.values[3] is None)]
_DQ_ORT = list(T._dq_cases(ORT.dq_x, ORT.dq_scale, (None,)))


@pytest.mark.parametrize("xt,g,st,ot", _DQ_SPEC)
def test_dequantize_spec(xt, g, st, ot):
    plan, x = _dq_plan("spec", xt, g, st, ot, "fast-dq")
    _same(plan, x)


@pytest.mark.parametrize("ort_version", ORT_RELEASES)
@pytest.mark.parametrize("xt,g,st,ot", _DQ_ORT)
def test_dequantize_onnxruntime(xt, g, st, ot, ort_version):
    plan, x = _dq_plan("onnxruntime", xt, g, st, ot, "fast-dq", ort_version=ort_version)
    _same(plan, x)


# -- the parallel kernels and streaming stores, at small sizes ----------------------------------
# the parallel kernels are the serial ones compiled with prange: the work splitting and the streamed
# stores are the same for every operation, so a few cases cover them (both layouts, an integer and a
# float rule, the float16 quotient pass, onnxruntime's 4-bit edges); the corpora above cover the rules
PARALLEL_Q = [("spec", "int8", "tensor", "float", None, True, None),
              ("spec", "int8", "block", "float", None, True, None),
              ("spec", "float8e4m3fn", "axis", "float", None, False, None),
              ("spec", "uint8", "tensor", "float16", None, True, None),
              ("onnxruntime", "int4", "axis", "float", None, True, "1.31.1"),
              ("onnxruntime", "int4", "axis", "float16", None, True, "1.32.0"),
              ("onnxruntime", "float8e5m2", "block", "float", "float16", False, "1.32.0")]


@pytest.mark.parametrize("compat,out,g,xt,precision,sat,ort_version", PARALLEL_Q)
def test_quantize_parallel(small_parallel, compat, out, g, xt, precision, sat, ort_version):
    plan, x = _q_plan(compat, out, g, xt, precision, sat, "fast-q-par", n_random=2500, ort_version=ort_version)
    assert x.size >= 4 * core.SERIAL_BELOW
    _same(plan, x)


PARALLEL_DQ = [("spec", "int8", "tensor", "float", None), ("spec", "float8e4m3fn", "block", "float", None)]


@pytest.mark.parametrize("compat,xt,g,st,ot", PARALLEL_DQ)
def test_dequantize_parallel(small_parallel, compat, xt, g, st, ot):
    plan, x = _dq_plan(compat, xt, g, st, ot, "fast-dq-par", n=30000)
    assert x.size >= 4 * core.SERIAL_BELOW
    _same(plan, x)


# -- short runs (blocked along the last axis, per-axis with short inner extents) ---------------------
# The run walker (fastmap._runs) steps run by run without recomputing where each run is: these cases
# cross the short last block of every row (B not dividing D), a block longer than the axis, and,
# per-axis, go back to the first parameter entry at each outer index.  Work items of 8 Ki elements
# (several rows of runs each); runs of at least 64 bytes of output streamed run by run, shorter ones
# stored plainly; outputs at 0, 1 and 3 bytes into an allocation.
SHORT_RUNS = [((48, 1000), "block", 1, 32), ((40, 1000), "block", -1, 7), ((90, 300), "block", 1, 300),
              ((100, 250), "block", 1, 400), ((12, 50, 17), "axis", 1, 0), ((80, 3, 40), "axis", -2, 0),
              ((1, 800, 20), "axis", 1, 0), ((1200, 21), "axis", 0, 0), ((30, 2, 900), "axis", 1, 0)]


@pytest.fixture
def short_runs(small_parallel, monkeypatch):
    monkeypatch.setattr(core, "CHUNK", 8192)        # small_parallel's thresholds, longer work items


def _short_inputs(shape, g, axis, block, zt, key):
    rng = C.rng_for("short-runs", shape, g, zt, key)
    pshape = (shape[axis],) if g == "axis" else tuple(-(-d // block) if i == axis % len(shape) else d
                                                    for i, d in enumerate(shape))
    s = C.scales(rng, pshape, "float")
    zp = C.zero_points(rng, pshape, zt)
    x = C.fit(rng.permutation(C.quotients(rng)), shape) * C.expand(s, shape, axis, block, g)
    return x.astype(np.float32), s, zp, dict(axis=axis, block_size=block)


def _offset_out(shape, dtype, offset):
    raw = np.zeros(int(np.prod(shape)) * np.dtype(dtype).itemsize + offset, np.uint8)
    return raw[offset:].view(dtype).reshape(shape)


@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("zt", ["int8", "uint8", "int4", "float8e4m3fn"])
@pytest.mark.parametrize("shape,g,axis,block", SHORT_RUNS)
def test_short_runs_quantize(short_runs, shape, g, axis, block, zt, offset):
    x, s, zp, kw = _short_inputs(shape, g, axis, block, zt, "q")
    plan = qo.plan_quantize(x, s, zp, **kw)
    assert x.size > core.CHUNK
    want = reference.quantize(plan, x)
    out = _offset_out(shape, want.dtype, offset)
    assert qo.quantize_linear(x, s, zp, out=out, **kw) is out
    assert C.same_bits(want, out), C.show_diff(x, want, out)


@pytest.mark.parametrize("offset", [0, 1, 3])
@pytest.mark.parametrize("zt", ["int8", "uint4"])
@pytest.mark.parametrize("shape,g,axis,block", SHORT_RUNS)
def test_short_runs_dequantize(short_runs, shape, g, axis, block, zt, offset):
    x, s, zp, kw = _short_inputs(shape, g, axis, block, zt, "dq")
    q = reference.quantize(qo.plan_quantize(x, s, zp, **kw), x)
    want = reference.dequantize(qo.plan_dequantize(q, s, zp, **kw), q)
    out = _offset_out(shape, np.float32, offset)
    assert qo.dequantize_linear(q, s, zp, out=out, **kw) is out
    assert C.same_bits(want, out), C.show_diff(q, want, out)


# rows with enough bytes of parameters (core.ROWS_TOGETHER_FROM; 8 bytes an element here: float32
# scale, int32 zero point) to be computed four at a time: per-axis along the last axis, per-axis with a
# short inner extent (the parameters repeated), blocked along a middle axis (four rows share their
# parameters only inside a block of 4 or more), a row count that leaves a last work item of 1-3 rows,
# and too few rows to group (parts of rows then, streamed)
LONG_ROWS = [((37, 3100), "axis", 1, 0), ((35, 600, 7), "axis", 1, 0), ((3, 16, 3100), "block", 1, 4),
             ((2, 19, 3100), "block", 1, 5), ((3, 13, 3100), "block", 1, 3), ((12, 4000), "axis", -1, 0)]


@pytest.mark.parametrize("zt", ["int8", "uint8", "int4", "uint16"])
@pytest.mark.parametrize("shape,g,axis,block", LONG_ROWS)
@pytest.mark.parametrize("parallel", [True, False])
def test_long_rows_four_at_a_time(short_runs, monkeypatch, shape, g, axis, block, zt, parallel):
    if not parallel:
        monkeypatch.setattr(core, "SERIAL_BELOW", 1 << 40)
        monkeypatch.setattr(core, "SERIAL_BELOW_PASSIVE", 1 << 40)
    x, s, zp, kw = _short_inputs(shape, g, axis, block, zt, "long-rows")
    plan = qo.plan_quantize(x, s, zp, **kw)
    pr = fast.prepare_quantize(plan)
    assert type(pr.lay) is core.LongRowLayout
    grouped = core.together(pr.lay, pr.params)
    assert grouped == (shape[0] * (shape[1] if g == "block" else 1) >= 32), pr.lay
    want = reference.quantize(plan, x)
    got = qo.quantize_linear(x, s, zp, **kw)
    assert C.same_bits(want, got), C.show_diff(x, want, got)
    if zt in ("int8", "int4"):
        d_want = reference.dequantize(qo.plan_dequantize(want, s, zp, **kw), want)
        d_got = qo.dequantize_linear(want, s, zp, out=_offset_out(shape, np.float32, 1), **kw)
        assert C.same_bits(d_want, d_got), C.show_diff(want, d_want, d_got)


def test_run_walker_on_any_range():
    """fastmap's run walker on element ranges that start and end anywhere (inside runs, at the short
    last block of a row, across rows): the kernels only hand it whole runs or pieces of one run, so
    this calls it directly."""
    from numba import njit

    fm = jit.load("quantspec._fastpath.fastmap")
    fast._jitted()                     # registers the element operations

    @njit
    def fill(x, y, a, b, prm, lay, e0, e1):
        fm._fill(x, y, a, b, a, prm, lay, e0, e1)

    rng = np.random.default_rng(11)
    L = 3100                            # rows of 3100 with 8 bytes of parameters an element: four at a time
    for shape, g, axis, block, kind in (((9, 100), "block", 1, 32, core.SegLayout),
                                        ((7, 6, 20), "axis", 1, 0, core.SegLayout),
                                        ((5, 40), "block", 1, 7, core.SegLayout),
                                        ((9, L), "axis", 1, 0, core.LongRowLayout),
                                        ((2, 9, L), "block", 1, 4, core.LongRowLayout),
                                        ((2, 7, L), "block", 1, 3, core.LongRowLayout),
                                        ((300, 6), "axis", 1, 0, core.RowLayout),
                                        ((4, 9, 20), "block", 1, 3, core.RowLayout)):
        x, s, zp, kw = _short_inputs(shape, g, axis, block, "int8", "walker")
        plan = qo.plan_quantize(x, s, zp, **kw)
        want = reference.quantize(plan, x).reshape(-1).view(np.uint8)
        pr = fast.prepare_quantize(plan)
        assert type(pr.lay) is kind
        xf = core.flat(x)
        rows = [(0, 4 * L), (L, 5 * L), (2 * L, 7 * L), (1, 6 * L), (4 * L, 8 * L + 1), (3 * L - 1, 7 * L)]
        for a, b in [(0, xf.size), (1, 2), (5, 150), (31, 33), (95, 199), *rows, *rng.integers(0, xf.size + 1, (40, 2))]:
            a, b = min(a, xf.size), min(b, xf.size)
            a, b = min(a, b), max(a, b)
            assert 0 <= a <= b <= xf.size
            y = np.zeros(xf.size, np.uint8)
            fill(xf, y, a, b, pr.params, pr.lay, *pr.op)
            assert y[a:b].tobytes() == want[a:b].tobytes(), (shape, a, b)
            assert not y[:a].any() and not y[b:].any()


@pytest.mark.parametrize("n", [0, 1, 2, 3, 63, 64, 65, 2047, 2048, 2049, 4095, 4097])
@pytest.mark.parametrize("offset", [0, 1, 3])
def test_sizes_and_unaligned_outputs(small_parallel, n, offset):
    """Every size around the serial/parallel threshold and the 64-byte lines, into outputs that start
    1 and 3 bytes into an allocation (so the streamed middle has an unaligned head)."""
    rng = np.random.default_rng(n * 7 + offset)
    x = (rng.normal(0, 30, n) + 0.5).astype(np.float32)
    want = reference.quantize(qo.plan_quantize(x, np.float32(0.25), np.int8(-3)), x)
    out = _offset_out((n,), np.int8, offset)
    assert qo.quantize_linear(x, np.float32(0.25), np.int8(-3), out=out) is out
    assert C.same_bits(want, out)
    q = want
    d_want = reference.dequantize(qo.plan_dequantize(q, np.float32(0.25), np.int8(-3)), q)
    raw = np.zeros(4 * n + 4, np.uint8)
    d_out = raw[4:].view(np.float32) if offset else raw[:4 * n].view(np.float32)
    assert qo.dequantize_linear(q, np.float32(0.25), np.int8(-3), out=d_out) is d_out
    assert C.same_bits(d_want, d_out)



@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="x86 only: elsewhere the fence is LLVM's own")
def test_streamed_stores_are_fenced_with_sfence():
    """The fence after a worker's streamed stores is an ``sfence`` (what the vendors specify for
    non-temporal stores), not the locked ``or`` that LLVM makes of a sequentially consistent fence."""
    from numba import njit

    from quantspec._fastpath.nbprim import stream_fence, stream_line

    @njit
    def copy_line(dst, src):
        stream_line(dst, 0, src, 0)
        stream_fence()

    raw = np.zeros(192, np.uint8)
    dst = raw[(-raw.ctypes.data) % 64:][:64]
    src = np.arange(64, dtype=np.uint8)
    copy_line(dst, src)
    assert np.array_equal(dst, src)
    ops = [line.split()[0] for line in copy_line.inspect_asm(copy_line.signatures[0]).splitlines()
           if line.startswith("\t") and line.split()]
    assert "sfence" in ops and any(op.startswith(("vmovnt", "movnt")) for op in ops)


# -- layouts, shapes and non-contiguous inputs ----------------------------------------------------
LAYOUTS = [
    ((), np.float32(0.5), {}),
    ((0,), np.float32(0.5), {}),
    ((0, 5), np.full(5, 0.5, np.float32), {"axis": 1}),
    ((4, 0, 3), np.full((4, 0, 3), 0.5, np.float32), {"axis": 1, "block_size": 2}),
    ((1,), np.float32(0.5), {}),
    ((7,), np.full(7, 0.5, np.float32), {"axis": 0}),
    ((3, 1, 5), np.full(1, 0.5, np.float32), {"axis": 1}),
    ((3, 9, 17), np.linspace(0.1, 1, 9, dtype=np.float32), {"axis": -2}),
    ((3, 9, 17), np.linspace(0.1, 1, 17, dtype=np.float32), {"axis": -1}),
    ((2, 9, 40), np.linspace(0.1, 1, 2 * 9 * 8, dtype=np.float32).reshape(2, 9, 8), {"axis": 2, "block_size": 5}),
    ((2, 9, 40), np.linspace(0.1, 1, 2 * 3 * 40, dtype=np.float32).reshape(2, 3, 40), {"axis": 1, "block_size": 4}),
    ((11, 3), np.linspace(0.1, 1, 3 * 3, dtype=np.float32).reshape(3, 3), {"axis": 0, "block_size": 4}),
]


@pytest.mark.parametrize("shape,scale,kw", LAYOUTS, ids=[f"{s}-{k}" for s, _, k in LAYOUTS])
@pytest.mark.parametrize("out", ["int8", "uint4", "float8e4m3fn"])
def test_layouts(shape, scale, kw, out):
    x = np.asarray(C.fit(C.quotients(C.rng_for("fast-layout", shape)), shape) * 0.4, np.float32)
    plan = qo.plan_quantize(x, scale, None, output_dtype=out, **kw)
    _same(plan, x)
    q = qo.quantize_linear(x, scale, None, output_dtype=out, **kw)
    _same(qo.plan_dequantize(q, scale, None, **kw), q)


@pytest.mark.parametrize("view", ["strided", "transposed", "reversed", "fortran"])
def test_non_contiguous_inputs(view):
    base = np.asarray(C.fit(C.quotients(C.rng_for("fast-view")), (12, 34)) * 0.3, np.float32)
    x = {"strided": base[:, ::2], "transposed": base.T, "reversed": base[::-1, ::-1],
         "fortran": np.asfortranarray(base)}[view]
    s = np.linspace(0.2, 0.9, x.shape[0], dtype=np.float32)
    z = np.full(x.shape[0], 2, np.int8)
    got = qo.quantize_linear(x, s, z, axis=0)
    want = reference.quantize(qo.plan_quantize(x, s, z, axis=0), np.asarray(x))
    assert C.same_bits(want, got)
    q = got.T if view == "transposed" else got[:, ::-1]
    d = qo.dequantize_linear(q, np.float32(0.7), np.int8(2))
    assert C.same_bits(reference.dequantize(qo.plan_dequantize(q, np.float32(0.7), np.int8(2)), q), d)


def test_scale_zero_is_ieee_not_an_exception():
    """x / 0 is ±inf or NaN (numba's default error model would raise ZeroDivisionError)."""
    x = np.array([1.0, -1.0, 0.0, np.nan], np.float32)
    for compat in ("spec", "onnxruntime"):
        plan = qo.plan_quantize(x, np.float32(0), np.uint8(0), compat=compat)
        _same(plan, x)
        plan = qo.plan_quantize(x, np.zeros(4, np.float32), np.zeros(4, np.uint8), axis=0, compat=compat)
        _same(plan, x)


# -- the packed output ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 3, 5, 8, 4099])
@pytest.mark.parametrize("out", ["int4", "uint4", "int2", "uint2", "float4e2m1", "float6e2m3", "int8"])
def test_quantize_linear_packed(n, out):
    x = np.asarray(C.fit(C.quotients(C.rng_for("fast-packed", n)), (n,)) * 0.3, np.float32)
    got = qo.quantize_linear_packed(x, np.float32(0.3), None, output_dtype=out)
    assert got.dtype == np.uint8 and got.tobytes() == qo.pack(qo.quantize_linear(x, np.float32(0.3), None,
                                                                                output_dtype=out))


def test_quantize_linear_packed_parallel(small_parallel):
    x = np.linspace(-9, 9, 9003, dtype=np.float32).reshape(3, 3001)
    s = np.full((3, 3001 // 32 + 1), 0.5, np.float32)
    got = qo.quantize_linear_packed(x, s, None, axis=1, block_size=32, output_dtype="int4")
    assert got.tobytes() == qo.pack(qo.quantize_linear(x, s, None, axis=1, block_size=32, output_dtype="int4"))
    with pytest.raises(QuantSpecError):
        qo.quantize_linear_packed(x, s, None, axis=1, block_size=32, output_dtype="int4", out=None)


# -- out= ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["fast", "reference"])
def test_out_argument(monkeypatch, path):
    if path == "reference":
        monkeypatch.setenv("QUANTSPEC_FAST", "0")
    x = np.linspace(-5, 5, 30, dtype=np.float32).reshape(5, 6)
    s = np.float32(0.1)
    out = np.empty((5, 6), ml_dtypes.int4)
    assert qo.quantize_linear(x, s, None, output_dtype="int4", out=out) is out
    assert C.same_bits(qo.quantize_linear(x, s, None, output_dtype="int4"), out)
    wide = np.zeros((5, 12), np.int8)
    strided = wide[:, ::2]                               # a non-contiguous destination works too
    assert qo.quantize_linear(x, s, np.int8(0), out=strided) is strided
    assert C.same_bits(qo.quantize_linear(x, s, np.int8(0)), np.ascontiguousarray(strided))
    assert np.all(wide[:, 1::2] == 0)
    d = np.empty((5, 6), np.float16)
    assert qo.dequantize_linear(out, np.float16(0.1), out=d) is d
    with pytest.raises(ShapeError, match="out: must be an array of shape"):
        qo.quantize_linear(x, s, np.int8(0), out=np.empty((6, 5), np.int8))
    with pytest.raises(ShapeError, match="out: must be an array of shape"):
        qo.quantize_linear(x, s, np.int8(0), out=np.empty((5, 6), np.uint8))
    with pytest.raises(ShapeError, match="out: must be an array of shape"):
        qo.quantize_linear(x, s, np.int8(0), out=[0] * 30)
    with pytest.raises(ShapeError, match="out: must be an array of shape"):
        qo.dequantize_linear(out, np.float32(0.1), out=np.empty((5, 6), np.float64))
    readonly = np.empty((5, 6), np.int8)
    readonly.flags.writeable = False
    with pytest.raises(InvalidArgumentError, match="out: must be a writeable array"):
        qo.quantize_linear(x, s, np.int8(0), out=readonly)


# -- selection -----------------------------------------------------------------------------------
def test_fast_path_is_selected_when_numba_is_there(monkeypatch):
    x = np.linspace(-2, 2, 10, dtype=np.float32)
    plan = qo.plan_quantize(x, np.float32(0.1), np.int8(0))
    assert fast.path(plan) == "fast"
    calls = []
    real = fast.quantize
    monkeypatch.setattr(fast, "quantize", lambda *a, **k: calls.append(1) or real(*a, **k))
    qo.quantize_linear(x, np.float32(0.1), np.int8(0))
    assert calls == [1]
    monkeypatch.setenv("QUANTSPEC_FAST", "0")
    assert fast.path(plan) == "reference"
    qo.quantize_linear(x, np.float32(0.1), np.int8(0))
    assert calls == [1]
    monkeypatch.setenv("QUANTSPEC_FAST", "1")
    assert fast.path(plan) == "fast"
    monkeypatch.setattr(jit, "_available", False)        # as if numba were not installed
    assert fast.path(plan) == "reference"


def test_what_the_fast_path_covers():
    x = np.ones(4, np.float32)
    assert fast.path(qo.plan_quantize(x, np.float32(1), compat="reference")) == "reference"
    assert fast.path(qo.plan_quantize(np.ones(4, np.int32), np.float32(1))) == "reference"
    assert fast.path(qo.plan_quantize(x, np.int32(2))) == "reference"          # divides in float64
    assert fast.path(qo.plan_quantize(x, np.int32(2), precision="float")) == "fast"
    assert fast.path(qo.plan_quantize(x, np.float32(1), output_dtype="float6e3m2")) == "fast"
    assert fast.path(qo.plan_dequantize(np.ones(4, np.int8), np.float32(1), compat="reference")) == "reference"


def _python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout


def test_import_and_help_do_not_load_numba():
    assert _python("import sys, quantspec, quantspec.onnx, quantspec.cli; print('numba' in sys.modules)").strip() == "False"
    assert _python("import sys, io, contextlib\nfrom quantspec.cli import main\n"
                   "with contextlib.redirect_stdout(io.StringIO()): main(['--help'])\n"
                   "print('numba' in sys.modules)").strip() == "False"


def test_cache_directory(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    package.mkdir()
    kernel = package / "kernels.py"
    kernel.write_text("")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert jit.cache_dir(kernel) == package / "__pycache__"
    package.chmod(0o555)                                 # a read-only install: a per-user directory
    try:
        monkeypatch.setenv("QUANTSPEC_CACHE_DIR", str(tmp_path / "user"))
        if not jit._writable(package):                   # (root can write anywhere)
            assert jit.cache_dir(kernel) == tmp_path / "user" / "pkg"
        monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
        assert jit.cache_dir(kernel) == tmp_path / "numba" / "quantspec" / "pkg"
    finally:
        package.chmod(0o755)


def test_cached_kernels_follow_their_sources(tmp_path):
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("x = 1\n")
    b.write_text("y = 2\n")
    before = jit.fingerprint([a, b])
    b.write_text("y = 3\n")
    assert jit.fingerprint([a, b]) != before


def test_env_reads_every_change(monkeypatch):
    """jit.env reads os.environ's own dict: it must see what setenv / delenv / os.environ do at once,
    and fall back to the mapping where os.environ has been replaced."""
    name = "QUANTSPEC_TEST_ENV_VALUE"
    monkeypatch.delenv(name, raising=False)
    assert jit.env(name) == ""
    monkeypatch.setenv(name, "passive é")
    assert jit.env(name) == "passive é"
    os.environ[name] = "x"
    assert jit.env(name) == "x"
    del os.environ[name]
    assert jit.env(name) == ""
    monkeypatch.setattr(os, "environ", {name: "plain dict", "QUANTSPEC_FAST": "off"})
    assert jit.env(name) == "plain dict"
    assert not jit.enabled()


def test_errors_are_the_same_on_both_paths(monkeypatch):
    x = np.ones((2, 3), np.float32)
    for setting in ("1", "0"):
        monkeypatch.setenv("QUANTSPEC_FAST", setting)
        with pytest.raises(QuantSpecError):
            qo.quantize_linear(x, np.ones(4, np.float32), axis=1)
        with pytest.raises(ShapeError):
            qo.dequantize_linear(np.ones(3, np.int8), np.float32(1), out=np.empty(4, np.float32))


def test_parallel_threshold_ignores_openmp_settings(monkeypatch):
    """The pool's helpers sleep when idle whatever OMP_WAIT_POLICY says (quantspec._fastpath.pool): calls
    go parallel from SERIAL_BELOW elements, except inside a serial_below block of the same thread."""
    n = core.SERIAL_BELOW * 4
    for policy in (None, "passive", "ACTIVE"):
        if policy is None:
            monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
        else:
            monkeypatch.setenv("OMP_WAIT_POLICY", policy)
        assert not core.parallel(core.SERIAL_BELOW - 1) and core.parallel(n) and core.parallel(core.SERIAL_BELOW)
    with core.serial_below(n + 1):
        assert not core.parallel(n)
        with core.serial_below(2):
            assert not core.parallel(n)
        assert core.parallel(n + 1)
    assert core.parallel(n)


def test_a_scale_beyond_the_precision_range_prints_no_warning():
    """QuantizeLinear with ``precision="float16"`` and a float32 scale beyond float16's range (1e30):
    the fast path's cast of the scale to the precision printed numpy's 'overflow encountered in cast'
    (found by a 20000-example fuzz run); the scale is inf in that precision, silently, on both paths,
    with the same codes."""
    import ml_dtypes

    import quantspec.onnx as O
    from quantspec._fastpath import jit

    x = np.array([-0.000114, 0.000225, 4.24e-05, -2.29e-05], ml_dtypes.bfloat16)
    s = np.array([9.5367431640625e-07, 9.5367431640625e-07, np.nan, 1e30], np.float32)
    zp = np.array([-73, 63, 86, 79], np.int8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = O.quantize_linear(x, s, zp, axis=-1, output_dtype="int8", precision="float16")
        with jit.reference_only():
            want = O.quantize_linear(x, s, zp, axis=-1, output_dtype="int8", precision="float16")
    assert got.tobytes() == want.tobytes() and got[3] == 79
