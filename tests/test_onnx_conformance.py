"""Seeded randomized and edge-case conformance of ONNX QuantizeLinear / DequantizeLinear.

- ``compat="reference"`` against onnx.reference 1.23 (bytes);
- ``compat="onnxruntime"`` against the installed onnxruntime CPU with ORT_DISABLE_ALL (raw bytes),
  with ``ort_version=`` its version (1.31.1 in the locked environment; tests/test_onnx_ort_versions.py
  runs the same tests against 1.32.0);
- ``compat="spec"`` against :mod:`onnx_spec_oracle`, an independent scalar oracle written from the
  operator text with exact rational arithmetic.

Every combination of output type x granularity x input type x saturate x precision that the runtime
supports is a case; scale type and zero-point presence vary with the case's seed.  Corpora:
:mod:`onnx_corpus`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import onnx_corpus as C
import onnx_oracles as O
import onnx_spec_oracle as S
import quantspec
from quantspec.dtypes import qtype
from quantspec.errors import QuantSpecError
from quantspec.onnx import opsets
from quantspec.errors import RuntimeUnsupportedError
from quantspec.onnx.plan import ORT, ort_support

NEWEST = opsets.row(None)
GRANULARITIES = ("tensor", "axis", "block")
Q_X = ("float", "float16", "bfloat16", "int32")
PRECISIONS = (None, "float", "float16", "bfloat16")


def _is_f8(t: str) -> bool:
    q = qtype(t)
    return q.is_float and q.bits == 8


def _q_cases(outs, xs, precisions):
    for out, g, xt, p in itertools.product(outs, GRANULARITIES, xs, precisions):
        for sat in ((True, False) if _is_f8(out) else (True,)):
            yield pytest.param(out, g, xt, p, sat, id=f"{out}-{g}-{xt}-p{p}-sat{int(sat)}")


def _make_q_inputs(rng, out, g, xt, scale_type, with_zp, n_random=96, zero_zp=False, limit=None):
    q = C.quotients(rng, n_random, limit)
    shape, axis, block, pshape = C.layout(rng, g, q.size)
    s = C.scales(rng, pshape, scale_type)
    s_full = C.expand(np.asarray(s).astype(np.float64), shape, axis, block, g)
    with np.errstate(over="ignore", invalid="ignore"):
        x = C.cast_x(C.fit(q, shape) * s_full, xt)
    zp = C.zero_points(rng, pshape, out, zero=zero_zp) if with_zp else None
    return x, s, zp, axis, block


def _attrs(out, axis, block, g, sat, precision, zp, rng, with_precision_attr=True):
    a = {"axis": axis, "saturate": int(sat)}
    if g == "block":
        a["block_size"] = block
    if zp is None or rng.random() < 0.3:
        a["output_dtype"] = qtype(out).onnx
    if precision is not None and with_precision_attr:
        a["precision"] = qtype(precision).onnx
    return a


def _quantspec_kwargs(attrs):
    kw = dict(attrs)
    kw["saturate"] = bool(kw.get("saturate", 1))
    return kw


# ------------------------------------------------------------------------------------------------
# compat="reference" vs onnx.reference
@pytest.mark.parametrize("out,g,xt,precision,sat", list(_q_cases(NEWEST.q_out, Q_X, PRECISIONS)))
def test_quantize_reference(out, g, xt, precision, sat):
    rng = C.rng_for("ref-q", out, g, xt, precision, sat)
    scale_type = str(rng.choice([t for t in NEWEST.q_scale]))
    with_zp = rng.random() < 0.7
    x, s, zp, axis, block = _make_q_inputs(rng, out, g, xt, scale_type, with_zp)
    attrs = _attrs(out, axis, block, g, sat, precision, zp, rng)
    try:
        with np.errstate(all="ignore"):
            want = O.reference("QuantizeLinear", 28, x, s, zp, **attrs)
    except Exception as e:  # onnx.reference itself fails: quantspec must refuse too, with its own error
        with pytest.raises(QuantSpecError):
            quantspec.onnx.quantize_linear(x, s, zp, compat="reference", **_quantspec_kwargs(attrs))
        pytest.xfail(f"onnx.reference raises {type(e).__name__}: {e}; quantspec raises a QuantSpecError")
    got = quantspec.onnx.quantize_linear(x, s, zp, compat="reference", **_quantspec_kwargs(attrs))
    assert C.same_bits(want, got), C.show_diff(x, want, got)


DQ_X = NEWEST.dq_x
DQ_SCALES = ("float", "float16", "bfloat16", "float8e8m0")
DQ_OUTS = (None, "float", "float16", "bfloat16")


def _codes(rng, t: str, shape) -> np.ndarray:
    qt = qtype(t)
    n = int(np.prod(shape, dtype=np.int64))
    if qt.is_int:
        lo, hi = int(qt.qmin), int(qt.qmax)
        v = rng.integers(lo, hi, size=n, endpoint=True, dtype=np.int64)
        v[: min(n, 4)] = [lo, hi, 0, max(lo, -1)][: min(n, 4)]
        return v.astype(qt.storage).astype(qt.dtype).reshape(shape)
    codes = rng.integers(0, 1 << qt.bits, size=n, dtype=np.uint16).astype(np.uint8)
    return codes.view(qt.dtype).reshape(shape)


def _dq_cases(xs, scales, outs):
    for xt, g, st, ot in itertools.product(xs, GRANULARITIES, scales, outs):
        yield pytest.param(xt, g, st, ot, id=f"{xt}-{g}-{st}-out{ot}")


def _make_dq_inputs(rng, xt, g, st, with_zp, zero_zp, n=300):
    shape, axis, block, pshape = C.layout(rng, g, n * C.SIZE)
    x = _codes(rng, xt, shape)
    s = C.scales(rng, pshape, st)
    zp = C.zero_points(rng, pshape, xt, zero=zero_zp) if with_zp else None
    if zp is not None and xt == "int32" and not zero_zp:
        zp = rng.integers(-1000, 1000, size=pshape).astype(np.int32)
    return x, s, zp, axis, block


@pytest.mark.parametrize("xt,g,st,ot", list(_dq_cases(DQ_X, DQ_SCALES, DQ_OUTS)))
def test_dequantize_reference(xt, g, st, ot):
    rng = C.rng_for("ref-dq", xt, g, st, ot)
    with_zp = rng.random() < 0.7
    x, s, zp, axis, block = _make_dq_inputs(rng, xt, g, st, with_zp, zero_zp=_is_f8(xt))
    attrs = {"axis": axis}
    if g == "block":
        attrs["block_size"] = block
    if ot is not None:
        attrs["output_dtype"] = qtype(ot).onnx
    try:
        with np.errstate(all="ignore"):
            want = O.reference("DequantizeLinear", 28, x, s, zp, **attrs)
    except Exception as e:
        with pytest.raises(QuantSpecError):
            quantspec.onnx.dequantize_linear(x, s, zp, compat="reference", **attrs)
        pytest.xfail(f"onnx.reference raises {type(e).__name__}: {e}; quantspec raises a QuantSpecError")
    got = quantspec.onnx.dequantize_linear(x, s, zp, compat="reference", **attrs)
    assert C.same_bits(want, got), C.show_diff(x, want, got)


# ------------------------------------------------------------------------------------------------
# compat="onnxruntime" vs onnxruntime (raw bytes)
ORT_PRECISIONS = (None, "float", "float16")


@pytest.mark.parametrize("out,g,xt,precision,sat", list(_q_cases(ORT.q_out, ORT.q_x, ORT_PRECISIONS)))
def test_quantize_onnxruntime(out, g, xt, precision, sat):
    rng = C.rng_for("ort-q", out, g, xt, precision, sat)
    with_zp = rng.random() < 0.7
    x, s, zp, axis, block = _make_q_inputs(rng, out, g, xt, xt, with_zp)
    attrs = _attrs(out, axis, block, g, sat, precision, zp, rng)
    with np.errstate(all="ignore"):
        want = O.ort("QuantizeLinear", 25, x, s, zp, out_type=out, **attrs)
    got = quantspec.onnx.quantize_linear(x, s, zp, opset=25, compat="onnxruntime", ort_version=O.ort_version(),
                                         **_quantspec_kwargs(attrs))
    assert C.same_bits(want, got), C.show_diff(x, want, got)


_MIXED = [("float", "float16"), ("float16", "float")]


@pytest.mark.parametrize("opset,out", [(v, t) for v in (23, 25)
                                       for t in ("int8", "uint16", "int4", "uint2", "float8e4m3fn", "float8e5m2")
                                       if t in opsets.row(v).q_out])
@pytest.mark.parametrize("g", GRANULARITIES)
@pytest.mark.parametrize("xt,st", _MIXED)
@pytest.mark.parametrize("precision", ORT_PRECISIONS)
def test_quantize_onnxruntime_mixed_types(opset, out, g, xt, st, precision):
    """x and y_scale of different types (QuantizeLinear-23 on): onnxruntime 1.31.1 fails at run time,
    1.32.0 converts both to the precision (else the scale's type) and divides there."""
    rng = C.rng_for("ort-q-mixed", opset, out, g, xt, st, precision)
    with_zp = rng.random() < 0.7
    x, s, zp, axis, block = _make_q_inputs(rng, out, g, xt, st, with_zp, n_random=48)
    attrs = _attrs(out, axis, block, g, True, precision, zp, rng)
    call = lambda: quantspec.onnx.quantize_linear(x, s, zp, opset=opset, compat="onnxruntime",  # noqa: E731
                                                  ort_version=O.ort_version(), **_quantspec_kwargs(attrs))
    try:
        with np.errstate(all="ignore"):
            want = O.ort("QuantizeLinear", opset, x, s, zp, out_type=out, **attrs)
    except Exception:
        assert not ort_support(O.ort_version()).mixed_types
        with pytest.raises(RuntimeUnsupportedError, match="different types"):
            call()
        return
    assert C.same_bits(want, call()), C.show_diff(x, want, call())


@pytest.mark.parametrize("opset", [23, 25])
@pytest.mark.parametrize("xt", ["float", "float16"])
def test_quantize_onnxruntime_bfloat16_precision(opset, xt):
    """``precision=bfloat16``: onnxruntime 1.31.1 ignores it (float32), 1.32.0 refuses the session."""
    x = np.array([1.5, 2.5, -7.3, 100.2, np.inf], np.float32).astype(qtype(xt).dtype)
    s = np.array(0.37, qtype(xt).dtype)
    attrs = {"output_dtype": qtype("int8").onnx, "precision": qtype("bfloat16").onnx}
    call = lambda: quantspec.onnx.quantize_linear(x, s, opset=opset, compat="onnxruntime",  # noqa: E731
                                                  ort_version=O.ort_version(), **_quantspec_kwargs(attrs))
    try:
        with np.errstate(all="ignore"):
            want = O.ort("QuantizeLinear", opset, x, s, out_type="int8", **attrs)
    except Exception:
        with pytest.raises(RuntimeUnsupportedError, match="precision"):
            call()
        return
    assert C.same_bits(want, call())


@pytest.mark.parametrize("xt,g,st,ot", list(_dq_cases(ORT.dq_x, ORT.dq_scale, (None,))))
def test_dequantize_onnxruntime(xt, g, st, ot):
    rng = C.rng_for("ort-dq", xt, g, st, ot)
    with_zp = rng.random() < 0.7
    x, s, zp, axis, block = _make_dq_inputs(rng, xt, g, st, with_zp, zero_zp=_is_f8(xt))
    attrs = {"axis": axis}
    if g == "block":
        attrs["block_size"] = block
    with np.errstate(all="ignore"):
        want = O.ort("DequantizeLinear", 25, x, s, zp, out_type=st, **attrs)
    got = quantspec.onnx.dequantize_linear(x, s, zp, opset=25, compat="onnxruntime", ort_version=O.ort_version(),
                                           **attrs)
    assert C.same_bits(want, got), C.show_diff(x, want, got)


# ------------------------------------------------------------------------------------------------
# compat="spec" vs the independent oracle
def _exact(v) -> float | int:
    """The exact value of one array element as a Python number."""
    if isinstance(v, (np.integer, int)):
        return int(v)
    return float(np.float64(np.float32(v)) if np.asarray(v).dtype.itemsize <= 4 else v)


def _values(a: np.ndarray) -> list:
    qt = qtype(a.dtype)
    if qt.is_int:
        return [int(v) for v in a.reshape(-1).astype(np.int64)]
    return [float(v) for v in a.reshape(-1).astype(np.float32).astype(np.float64)]


def _same_value(want, got) -> bool:
    if isinstance(want, int):
        return want == got
    if math.isnan(want):
        return math.isnan(got)
    return want == got and math.copysign(1.0, want) == math.copysign(1.0, got)


_PRECISION_OF_SCALE = {"float": "float", "float16": "float16", "bfloat16": "bfloat16", "int32": "double",
                       "float8e8m0": "float"}


def _spec_q_cases():
    for out, xt, p in itertools.product(NEWEST.q_out, Q_X, PRECISIONS):
        for sat in ((True, False) if _is_f8(out) else (True,)):
            yield pytest.param(out, xt, p, sat, id=f"{out}-{xt}-p{p}-sat{int(sat)}")


@pytest.mark.parametrize("out,xt,precision,sat", list(_spec_q_cases()))
def test_quantize_spec_oracle(out, xt, precision, sat):
    rng = C.rng_for("spec-q", out, xt, precision, sat)
    g = GRANULARITIES[int(rng.integers(0, 3))]
    scale_type = str(rng.choice(NEWEST.q_scale))
    with_zp = rng.random() < 0.7
    x, s, zp, axis, block = _make_q_inputs(rng, out, g, xt, scale_type, with_zp, limit=48)
    got = quantspec.onnx.quantize_linear(x, s, zp, axis=axis, block_size=block if g == "block" else 0,
                                         output_dtype=out if zp is None else None, saturate=sat, precision=precision)
    assert got.dtype == qtype(out).dtype
    P = precision or _PRECISION_OF_SCALE[scale_type]
    s_full = C.expand(s, x.shape, axis, block, g)
    z_full = C.expand(zp, x.shape, axis, block, g) if zp is not None else None
    xs, ss = _values(x), _values(np.ascontiguousarray(s_full))
    zs = _values(np.ascontiguousarray(z_full)) if zp is not None else [None] * len(xs)
    gv = _values(got)
    bad = [(xv, sv, zv, w, gg) for xv, sv, zv, gg in zip(xs, ss, zs, gv)
           for w in [S.quantize(xv, sv, zv, P, out, sat)] if not _same_value(w, gg)]
    assert not bad, f"{len(bad)} of {len(xs)} differ from the oracle, first: {bad[:5]}"


@pytest.mark.parametrize("xt,st,ot", [pytest.param(xt, st, ot, id=f"{xt}-{st}-out{ot}")
                                      for xt, st, ot in itertools.product(DQ_X, DQ_SCALES, DQ_OUTS)
                                      if not (st == "float8e8m0" and ot is None)])
def test_dequantize_spec_oracle(xt, st, ot):
    rng = C.rng_for("spec-dq", xt, st, ot)
    g = ("tensor", "axis", "block")[int(rng.integers(0, 3))]
    with_zp = rng.random() < 0.7
    x, s, zp, axis, block = _make_dq_inputs(rng, xt, g, st, with_zp, zero_zp=_is_f8(xt) or xt == "int32", n=105)
    got = quantspec.onnx.dequantize_linear(x, s, zp, axis=axis, block_size=block if g == "block" else 0,
                                           output_dtype=ot)
    out = ot or st
    assert got.dtype == qtype(out).dtype
    s_full = C.expand(s, x.shape, axis, block, g)
    z_full = C.expand(zp, x.shape, axis, block, g) if zp is not None else None
    xs, ss = _values(x), _values(np.ascontiguousarray(s_full))
    zs = _values(np.ascontiguousarray(z_full)) if zp is not None else [None] * len(xs)
    gv = [float(v) for v in got.reshape(-1).astype(np.float64)]
    bad = [(xv, sv, zv, w, gg) for xv, sv, zv, gg in zip(xs, ss, zs, gv)
           for w in [S.dequantize(xv, sv, zv, out)] if not _same_value(w, gg)]
    assert not bad, f"{len(bad)} of {len(xs)} differ from the oracle, first: {bad[:5]}"


# ------------------------------------------------------------------------------------------------
# every operator version: the types that version added, against onnx.reference and onnxruntime
def _opset_cases():
    for row in opsets.VERSIONS:
        prev = next((r for r in reversed(opsets.VERSIONS) if r.version < row.version), None)
        new_out = [t for t in row.q_out if prev is None or t not in prev.q_out] or ["int8"]
        for out in sorted(set(new_out) | {"uint8"}):
            for g in ("tensor",) + (("axis",) if row.version >= 13 else ()) + (("block",) if row.version >= 21 else ()):
                yield pytest.param(row.version, out, g, id=f"v{row.version}-{out}-{g}")


@pytest.mark.parametrize("version,out,g", list(_opset_cases()))
def test_every_opset_against_both_runtimes(version, out, g):
    rng = C.rng_for("opset", version, out, g)
    row = opsets.row(version)
    xt = "float"
    x, s, zp, axis, block = _make_q_inputs(rng, out, g, xt, "float", True, n_random=32, zero_zp=_is_f8(out))
    attrs = {}
    if version >= 13:
        attrs["axis"] = axis
    if g == "block":
        attrs["block_size"] = block
    kw = dict(attrs)
    with np.errstate(all="ignore"):
        want = O.reference("QuantizeLinear", version, x, s, zp, **attrs)
    got = quantspec.onnx.quantize_linear(x, s, zp, opset=version, compat="reference", **kw)
    assert C.same_bits(want, got), C.show_diff(x, want, got)
    if version <= 25 and out in ORT.q_out:
        with np.errstate(all="ignore"):
            want = O.ort("QuantizeLinear", version, x, s, zp, out_type=out, **attrs)
        got = quantspec.onnx.quantize_linear(x, s, zp, opset=version, compat="onnxruntime",
                                             ort_version=O.ort_version(), **kw)
        assert C.same_bits(want, got), C.show_diff(x, want, got)
        if out in row.dq_x:
            want = O.ort("DequantizeLinear", version, got, s, zp, out_type="float", **attrs)
            back = quantspec.onnx.dequantize_linear(got, s, zp, opset=version, compat="onnxruntime",
                                                    ort_version=O.ort_version(), **kw)
            assert C.same_bits(want, back)
    if version >= 19 and out in row.dq_x:
        with np.errstate(all="ignore"):
            want = O.reference("DequantizeLinear", version, got, s, zp, **attrs)
        back = quantspec.onnx.dequantize_linear(got, s, zp, opset=version, compat="reference", **kw)
        assert C.same_bits(want, back)


# -- blocks along an axis that only axes of length 1 follow ----------------------------------------
@pytest.mark.parametrize("shape,axis,block", [((4, 1), 0, 2), ((5, 1), 0, 3), ((5, 1, 1), 0, 3), ((2, 5, 1), 1, 2),
                                              ((3, 7, 1, 1), 1, 3), ((3, 7, 2), 1, 3)])
@pytest.mark.parametrize("out", ["int8", "uint8", "int16", "int4", "uint4"])
def test_onnxruntime_blocks_followed_by_ones_take_the_last_axis_path(shape, axis, block, out):
    """onnxruntime quantizes blocks whose inner size is 1 as blocks along the last axis (MLAS: +inf to
    qmax, its 4-bit head/tail rule on the blocked axis), not with the plain loop of a non-last axis
    (+inf to qmin); the last case is a true non-last axis."""
    rng = np.random.default_rng(len(shape) * 10 + axis)
    x = rng.choice(np.array([np.inf, -np.inf, np.nan, 3e9, -3e9, 1.5, -2.5, 0.5, 7.25], np.float32), size=shape)
    sshape = list(shape)
    sshape[axis] = -(-shape[axis] // block)
    s = rng.uniform(0.1, 1.0, sshape).astype(np.float32)
    want = O.ort("QuantizeLinear", 21, x, s, out_type=out, axis=axis, block_size=block, output_dtype=qtype(out).onnx)
    got = quantspec.onnx.quantize_linear(x, s, axis=axis, block_size=block, output_dtype=out, opset=21,
                                         compat="onnxruntime", ort_version=O.ort_version())
    assert got.astype(np.int64).tolist() == np.asarray(want).astype(np.int64).tolist()


@pytest.mark.parametrize("opset", [23, 25])
@pytest.mark.parametrize("xt", ["int8", "uint16", "int4"])
@pytest.mark.parametrize("st,ot", [("float16", "float"), ("float", "float16")])
@pytest.mark.parametrize("per_axis", [False, True])
def test_onnxruntime_dequantizes_to_another_type_than_the_scales(opset, xt, st, ot, per_axis):
    """onnxruntime runs DequantizeLinear with an output_dtype other than the scale's type (it was
    refused under compat="onnxruntime"); its bytes are the spec's."""
    t = qtype(xt)
    rng = np.random.default_rng(opset)
    x = rng.integers(int(t.qmin), int(t.qmax) + 1, size=(4, 6)).astype(t.dtype)
    s = rng.uniform(0.01, 2, size=(6,) if per_axis else ()).astype(np.float32).astype(qtype(st).dtype)
    z = rng.integers(int(t.qmin), int(t.qmax) + 1, size=s.shape).astype(t.dtype)
    want = O.ort("DequantizeLinear", opset, x, s, z, out_type=ot, axis=1, output_dtype=qtype(ot).onnx)
    got = quantspec.onnx.dequantize_linear(x, s, z, axis=1, output_dtype=ot, opset=opset, compat="onnxruntime",
                                           ort_version=O.ort_version())
    assert got.dtype == qtype(ot).dtype and got.tobytes() == np.asarray(want).tobytes()


@pytest.mark.parametrize("f8", ["float8e4m3fn", "float8e5m2"])
@pytest.mark.parametrize("n", [1, 33, 70000])
@pytest.mark.parametrize("compat", ["spec", "onnxruntime", "reference"])
def test_a_nan_code_times_a_nan_scale_keeps_the_codes_nan(f8, n, compat):
    """Where a NaN float8 code meets a NaN scale, onnxruntime (x86: x * scale keeps x's NaN) and
    onnx.reference give the code's NaN, sign included; the fast kernels gave the scale's."""
    rng = np.random.default_rng(n)
    codes = rng.integers(0, 256, n).astype(np.uint8)
    codes[::3] = 0xFF
    codes[1::5] = 0x7F
    x = codes.view(qtype(f8).dtype)
    for s in (np.float32(np.nan), -np.float32(np.nan)):
        want = (O.reference("DequantizeLinear", 21, x, s) if compat == "reference"
                else O.ort("DequantizeLinear", 21, x, s, out_type="float"))
        kw = {"ort_version": O.ort_version()} if compat == "onnxruntime" else {}
        got = quantspec.onnx.dequantize_linear(x, s, opset=21, compat=compat, **kw)
        assert got.view(np.uint32).tolist() == np.asarray(want, np.float32).view(np.uint32).tolist()


@pytest.mark.parametrize("sshape", [(), (1,)])
@pytest.mark.parametrize("zshape,axis,block", [((6,), 1, 0), ((4,), 0, 0), ((4, 2), 1, 3), ((2, 6), 0, 2)])
def test_reference_broadcasts_one_scale_over_per_axis_zero_points(sshape, zshape, axis, block):
    """onnx.reference lets numpy broadcast a single scale over per-axis or blocked zero points; so does
    compat="reference" (it refused the mismatch)."""
    rng = np.random.default_rng(len(zshape) + axis)
    x = (rng.standard_normal((4, 6)) * 3).astype(np.float32)
    s = np.full(sshape, 0.07, np.float32)
    z = rng.integers(-5, 5, zshape).astype(np.int8)
    kw = dict(axis=axis, **({"block_size": block} if block else {}))
    want = O.reference("QuantizeLinear", 21, x, s, z, **kw)
    got = quantspec.onnx.quantize_linear(x, s, z, opset=21, compat="reference", **kw)
    assert got.tobytes() == np.asarray(want).tobytes()
    back = quantspec.onnx.dequantize_linear(got, s, z, opset=21, compat="reference", **kw)
    assert back.tobytes() == np.asarray(O.reference("DequantizeLinear", 21, got, s, z, **kw)).tobytes()


# --- compat="reference": what onnx.reference accepts and refuses (found by the API fuzzer) --------

def _f8_zero_points(t):
    """Zero points of every shape, of the type ``t``: all zero (+0, -0, values that uint8 reads as 0),
    empty, and non-zero."""
    import ml_dtypes  # noqa: F401 - the dtypes come from quantspec's table

    from quantspec.dtypes import qtype

    dt = qtype(t).dtype
    vals = {"0": [0.0], "-0": [-0.0], "0.5": [0.5], "1": [1.0], "-1": [-1.0], "nan": [float("nan")]}
    out = {}
    for name, v in vals.items():
        with np.errstate(all="ignore"):
            a = np.array(v, np.float32).astype(dt)
        for shape in [(), (1,), (2,), (2, 2), (3,), (1, 1, 1)]:
            out[f"{name}{list(shape)}"] = np.broadcast_to(a.reshape(()), shape).copy()
    out["empty"] = np.zeros((0,), dt)
    out["[0, 1]"] = np.array([0.0, 1.0], np.float32).astype(dt)
    out["[0, 0.5]"] = np.array([0.0, 0.5], np.float32).astype(dt)
    return out


@pytest.mark.parametrize("t", ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1"])
def test_reference_float_zero_points_accept_and_refuse_as_onnx_reference(t):
    """Found by the API fuzzer: compat="reference" accepts and refuses float8 (and float4) zero points
    exactly as onnx.reference 1.23 does."""
    import onnx_oracles
    import quantspec.onnx as O
    from quantspec.dtypes import qtype
    from quantspec.errors import QuantSpecError

    dt = qtype(t).dtype
    x = np.array([1.0, 2.0], np.float32).astype(dt)
    for scale in (np.float32(1.0), np.array([0.5, 2.0], np.float32)):
        for name, zp in _f8_zero_points(t).items():
            try:
                with np.errstate(all="ignore"):
                    want = onnx_oracles.reference("DequantizeLinear", 25, x, scale, zp, axis=0)
            except Exception:      # onnx.reference fails: quantspec refuses
                with pytest.raises(QuantSpecError):
                    O.dequantize_linear(x, scale, zp, axis=0, compat="reference")
                continue
            got = O.dequantize_linear(x, scale, zp, axis=0, compat="reference")
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (t, name, scale, want, got)


def test_reference_one_element_parameters_of_higher_rank_as_onnx_reference():
    """compat="reference": a one-element scale or zero point of rank >= 2 is read by onnx.reference as
    its first row, broadcast into the result: where that gives another shape than x (a 0-d x with a
    (1, 1) zero point: a (1,) result), quantspec refuses; where the shape is x's, it computes
    onnx.reference's values (found by a 20000-example fuzz run)."""
    import ml_dtypes

    import onnx_oracles
    import quantspec.onnx as O
    from quantspec.errors import ShapeError

    for x_shape, p_shape in [((), (1, 1)), ((), (1, 1, 1)), ((3,), (1, 1)), ((3,), (1, 1, 1)), ((2, 3), (1, 1)),
                             ((2, 3), (1, 1, 1, 1)), ((3,), (1,)), ((), (1,))]:
        x = np.arange(int(np.prod(x_shape)), dtype=np.int8).reshape(x_shape)
        scale = np.full(p_shape, 0.5, np.float32)
        zp = np.full(p_shape, -2, np.int8)
        want = onnx_oracles.reference("DequantizeLinear", 21, x, scale, zp)
        if want.shape != x.shape:
            with pytest.raises(ShapeError):
                O.dequantize_linear(x, scale, zp, compat="reference")
            with pytest.raises(ShapeError):
                O.dequantize_linear(x, np.float32(0.5), zp, compat="reference")
        else:
            got = O.dequantize_linear(x, scale, zp, compat="reference")
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), (x_shape, p_shape)
    x = np.array(0, ml_dtypes.int2)
    with pytest.raises(ShapeError):       # the fuzzer's case
        O.dequantize_linear(x, np.array(1.79, np.float32), np.array([[-2]], ml_dtypes.int2), axis=1,
                            compat="reference")


def _same_as_onnx_reference(op, call, *args, **attrs):
    """quantspec's compat="reference" call against onnx.reference on the same inputs: both refuse
    (onnx.reference fails, or returns another shape than x: no output of the operator), or the bytes
    are equal."""
    import onnx_oracles
    from quantspec.errors import QuantSpecError

    x = args[0]
    try:
        with np.errstate(all="ignore"):
            want = onnx_oracles.reference(op, 25, *args, **attrs)
        if want.shape != np.shape(x):
            raise ValueError("another shape")
    except Exception:      # noqa: BLE001 - onnx.reference refuses
        with pytest.raises(QuantSpecError):
            call()
        return "refused"
    got = call()
    assert got.shape == want.shape and got.tobytes() == want.tobytes(), (op, args, attrs, want, got)
    return "equal"


def test_reference_float8_output_zero_point_only_reshaped_and_negative_block_size():
    """compat="reference": onnx.reference's QuantizeLinear reshapes a float8 output's zero point (its
    own asserts apply) and then computes without it, so a zero point whose length does not match the
    axis, or of rank >= 2 with one element, is accepted; a negative block_size is accepted where every
    parameter has one value (reshape_input never reads it) and refused otherwise (found by a
    20000-example fuzz run)."""
    import ml_dtypes

    import quantspec.onnx as O

    f8 = ml_dtypes.float8_e4m3fn
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(6, 4)
    outcomes = set()
    for zp in (np.zeros(2, f8), np.zeros(6, f8), np.zeros((1, 1), f8), np.zeros((2, 2), f8), np.zeros(4, f8),
               np.array([1.0, 0], f8)):
        for axis in (0, 1, -2, 2):
            outcomes.add(_same_as_onnx_reference(
                "QuantizeLinear", lambda zp=zp, axis=axis: O.quantize_linear(x, np.float32(0.5), zp, axis=axis,
                                                                             compat="reference"),
                x, np.float32(0.5), zp, axis=axis))
    q = np.array([0.01953125, 3.0], f8)
    for scale in (np.array([2.896484375], np.float16), np.float16(2.0), np.array([2.0, 1.0], np.float16)):
        outcomes.add(_same_as_onnx_reference(
            "DequantizeLinear", lambda scale=scale: O.dequantize_linear(q, scale, axis=0, block_size=-1,
                                                                        compat="reference"),
            q, scale, axis=0, block_size=-1))
    assert outcomes == {"refused", "equal"}


def test_reference_short_blocked_axis_of_an_empty_tensor():
    """compat="reference": onnx.reference expands a blocked scale by np.repeat then np.take of x's
    length, and numpy's take checks no index when its result is empty, so a blocked scale whose
    blocked axis is too short (even empty) is accepted for an empty x (another axis of length 0) and
    refused otherwise (found by a 20000-example fuzz run)."""
    import ml_dtypes

    import quantspec.onnx as O

    outcomes = set()
    for x_shape, s_shape in [((0, 5, 2), (0, 5, 0)), ((0, 5, 9), (0, 5, 1)), ((0, 5, 8), (0, 5, 2)),
                             ((1, 5, 9), (1, 5, 1)), ((1, 5, 8), (1, 5, 2)), ((2, 0, 6), (2, 0, 1))]:
        x = np.zeros(x_shape, np.int32)
        scale = np.full(s_shape, 0.5, np.float32)
        zp = np.zeros(s_shape, ml_dtypes.uint4)
        outcomes.add(_same_as_onnx_reference(
            "QuantizeLinear", lambda x=x, scale=scale, zp=zp: O.quantize_linear(x, scale, zp, axis=2, block_size=4,
                                                                               compat="reference"),
            x, scale, zp, axis=2, block_size=4))
    assert outcomes == {"refused", "equal"}
