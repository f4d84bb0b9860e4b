"""The fast path of ONNX QuantizeLinear / DequantizeLinear: fused multithreaded kernels.

The readable reference path is :mod:`quantspec.onnx.reference`; this module computes the same bytes
in one pass over the data, with the generic kernel of :mod:`quantspec._fastpath.fastmap` and the element
functions of :mod:`quantspec.onnx._jitted` (compiled by numba).
Tests run both paths on every conformance corpus and require identical bytes
(``tests/test_onnx_fast.py``).  Nothing here imports numba; the kernels are loaded on the first call.

**Selection.**  :func:`path` says which path a plan takes: ``"fast"`` when the fast path covers the
plan and is enabled (numba installed, ``QUANTSPEC_FAST`` not ``0``; :mod:`quantspec._fastpath.jit`),
else ``"reference"``.  Covered:

- compat ``"spec"`` and ``"onnxruntime"`` (``"reference"`` always takes the reference path);
- QuantizeLinear from float32, float16 and bfloat16 with a float32/float16/bfloat16/float8e8m0 scale
  (or int32 with a float ``precision``) to every output type: the 8-, 16-, 4- and 2-bit integers,
  the four float8 types (both ``saturate`` modes), float4e2m1 and the two float6 types;
- DequantizeLinear from every integer type (int32 included) and every float8/float6/float4 type to
  float32, float16 or bfloat16;
- per-tensor, per-axis and blocked layouts, any axis, any shape; empty arrays.

Not covered (reference path): int32 x, and an int32 scale without ``precision`` (the spec divides in
float64 there).

**How the arithmetic maps to the reference path** (every rule of :mod:`quantspec.onnx.reference`):

- The quotient.  ``onnxruntime``: float32 ``x / s``, or (1.32.0 from Q-23 on: ``plan.ort``,
  :func:`quantspec.onnx.reference.ort_division`) one division in P = ``precision`` or the scale's type,
  computed as the spec's below.  ``spec``: one IEEE division in precision P; for
  P = float16/bfloat16 a first pass rounds x and s to P, divides in float32 and rounds the quotient to
  P, and the output rule then runs on that quotient with a scale of 1.  That equals the correctly rounded P division because float32 has more than 2p+2 bits for
  p = 11 and p = 8 (double rounding is then innocuous; Figueroa, "When is double rounding
  innocuous?", 1995).
- Integer outputs, ``spec`` and onnxruntime's MLAS path: clamp the quotient in float to
  ``[qmin - zp, qmax - zp]`` (NaN to the lower bound), round half to even, add the zero point.  For
  integer bounds this is exactly ``clip(rint(q) + zp)`` with NaN -> qmin.  onnxruntime's plain loop:
  the x86 int32 conversion of ``rint(q)`` (NaN, ±inf, out of range -> INT32_MIN), an int32 wrap when
  adding the zero point, then the clip; used where reference.py uses it (onnxruntime 1.31.1 only:
  float16 input, 2-bit outputs, blocked along a non-last axis, and the odd head/tail element of each
  4-bit slice; 1.32.0 clamps in float everywhere).
- Narrow float outputs: round to nearest even on the float32 bit pattern, then the overflow rule
  (saturate, infinity or NaN) and the NaN encoding of the mode (:func:`float_format`).  float4/float6
  with a zero point: the sum ``q + zp`` in float64 as the reference path does it, rounded to the grid
  exactly in float64.
- Dequantize: ``(x - zp)`` exactly (int32 wrap like onnxruntime), to float32, times the float32 scale;
  a float16 / bfloat16 output is that float32 product cast by numpy / ml_dtypes, as in the
  reference path.

:func:`quantize` / :func:`dequantize` turn a plan into the kernel's arguments: contiguous flat views,
the float32 scale and the zero point (int32, or float for float4/float6 and float codes), the loop
layout (:func:`quantspec._fastpath.runner.layout`), and two small records whose *classes* select the element
operation at compile time and whose fields are its constants.
"""

from __future__ import annotations

import math
from collections import namedtuple

import ml_dtypes
import numpy as np

from .._fastpath import runner as core
from .._fastpath import jit
from ..dtypes import QType, qtype
from .reference import check_out, ort_division
from .plan import DequantizePlan, QuantizePlan

__all__ = ["path", "quantize", "dequantize", "prepare_quantize", "prepare_dequantize", "covers", "float_format",
           "repeat"]

# -- the records that select the element operation (their class) and carry its constants --------
# Quotient precision: x / s in float32 (Q32), or x and x / s rounded to float16 / bfloat16.
Q32 = namedtuple("Q32", "tag")
QF16 = namedtuple("QF16", "tag")
QBF16 = namedtuple("QBF16", "tag")
Quotient = namedtuple("Quotient", "tag")        # output: the quotient itself, as float32
# Integer outputs: MLAS-style clamp in float (spec and onnxruntime MLAS), or onnxruntime's plain loop.
IntMlas = namedtuple("IntMlas", "qmin qmax mask")
IntMlasByte = namedtuple("IntMlasByte", "qmin qmax mask")     # 8/16-bit codes: the store truncates, no mask
IntPlain = namedtuple("IntPlain", "qmin qmax mask")
# Narrow float outputs (see nbprim.narrow_code); FloatZp adds a float64 zero point first.
_FMT = "mant emin bias maxmag overmag nanbits nansigned fnuz signpos wlo whi wcode"
Float = namedtuple("Float", _FMT)
FloatZp = namedtuple("FloatZp", _FMT)
# Dequantize input decoding: integer codes (sign-extended from their width), or a table of the
# float codes' values.
DecInt = namedtuple("DecInt", "mask half")
DecLut = namedtuple("DecLut", "mask")

# -- selection ----------------------------------------------------------------------------------
_Q_X = ("float", "float16", "bfloat16")
_P = {"float": Q32(0), "float16": QF16(0), "bfloat16": QBF16(0)}


def _precision(plan: QuantizePlan) -> str | None:
    """The name of the division precision the fast kernels use, or None if they cannot."""
    if plan.compat == "onnxruntime":
        return qtype(ort_division(plan)).name
    p = plan.precision or qtype(plan.scale.dtype)
    if p.name == "float8e8m0":
        return "float"
    return p.name if p.name in _P else None


def covers(plan: QuantizePlan | DequantizePlan) -> bool:
    """The fast kernels implement this plan (whether or not they are enabled)."""
    if plan.compat not in ("spec", "onnxruntime"):
        return False
    if isinstance(plan, QuantizePlan):
        return plan.x_type.name in _Q_X and _precision(plan) is not None
    return plan.out.name in ("float", "float16", "bfloat16")


def path(plan: QuantizePlan | DequantizePlan) -> str:
    """``"fast"`` if this plan runs on the fused kernels, ``"reference"`` if on the numpy path."""
    return "fast" if jit.enabled() and covers(plan) else "reference"


def _jitted():
    return jit.load("quantspec.onnx._jitted")     # registers the ONNX element functions


# -- output formats -----------------------------------------------------------------------------
def _code(value: float, t: QType) -> int:
    with np.errstate(all="ignore"):
        return int(np.array(value, np.float32).astype(t.dtype).view(np.uint8)[()])


def float_format(t: QType, saturate: bool, compat: str) -> Float:
    """The constants of :func:`quantspec._fastpath.nbprim.narrow_code` for output type ``t``."""
    fi = ml_dtypes.finfo(t.dtype)
    signbit = 1 << (t.bits - 1)
    maxmag = _code(float(fi.max), t) & ~signbit
    fnuz = not t.has_negative_zero
    if t.bits < 8:                           # float4 / float6: NaN -> +max, always saturate
        nanbits, nansigned, overmag = maxmag, 0, maxmag
    else:
        nan_pos, nan_neg = _code(np.nan, t), _code(-np.nan, t)
        nansigned = int(nan_pos != nan_neg)
        nanbits = nan_pos & ~signbit if nansigned else nan_pos
        overmag = maxmag if saturate else (_code(np.inf, t) & ~signbit if not fnuz else _code(np.inf, t))
    wlo = whi = math.inf
    wcode = 0
    if compat == "onnxruntime":             # onnxruntime's float8 quirks (docs/onnx.md)
        if t.name == "float8e5m2":
            nanbits = 0x7F
            if not saturate:
                wlo, whi, wcode = 61440.0, 65536.0, 0x7F
        elif t.name == "float8e4m3fn" and not saturate:
            wlo, whi, wcode = 480.0, 496.0, 0x7E
    return Float(int(fi.nmant), int(fi.minexp), 1 - int(fi.minexp), maxmag, overmag, nanbits, nansigned,
                 int(fnuz), t.bits - 1, float(wlo), float(whi), wcode)


def _int_record(cls, t: QType):
    return cls(int(t.qmin), int(t.qmax), (1 << t.bits) - 1)


# -- QuantizeLinear -----------------------------------------------------------------------------
def _ort_plain(plan: QuantizePlan) -> str:
    """Which elements onnxruntime computes in its plain loop: "all", "none" or "edges" (the odd
    head/tail element of each 4-bit slice); the rule of reference.ort_plain_mask."""
    t = plan.out
    if not plan.ort.plain_loop:
        return "none"
    if plan.x_type.name == "float16" or t.bits == 2:
        return "all"
    if plan.granularity == "block" and math.prod(plan.shape[plan.axis + 1:]) != 1:
        return "all"                         # blocks along a non-last axis (reference._blocks_last)
    return "edges" if t.bits == 4 else "none"


def _slices(plan: QuantizePlan) -> tuple[int, int]:
    """(row length, slice length) of onnxruntime's 4-bit slices (reference.ort_plain_mask)."""
    n = math.prod(plan.shape)
    if plan.granularity == "tensor":
        return n, n
    if plan.granularity == "axis":
        inner = math.prod(plan.shape[plan.axis + 1:])
        return inner, inner
    return plan.shape[plan.axis], plan.block_size       # along the last axis, or only 1s follow it


def _prepared(plan, *params):
    """The layout and the parameters in the form it reads them."""
    lay = core.layout(plan.shape, plan.granularity, plan.axis, plan.block_size)
    return lay, core.flat_params(plan.shape, plan.granularity, plan.axis, lay, *params)


def _result(out, shape, dtype):
    if out is None:
        return np.empty(shape, dtype)
    if type(out) is np.ndarray and out.shape == shape and out.dtype == dtype and out.flags.writeable:
        return out
    return check_out(out, shape, dtype)


_F32 = np.dtype(np.float32)


def _flat_f32(x: np.ndarray) -> np.ndarray:
    """x as a flat contiguous float32 array (float16 / bfloat16 converted: exact)."""
    if type(x) is np.ndarray and x.ndim == 1 and x.dtype == _F32 and x.flags.c_contiguous:
        return x
    return core.flat(np.asarray(x, dtype=np.float32))


# What a plan turns into, computed once per plan (the cached plans of quantize_linear keep it):
# the loop layout, the kernel's parameter arrays and the records of the element operation.
# ``memo`` / ``qmemo``: the compiled entry points of the main pass and of the quotient pass, kept by a
# prepared state that is reused (``cached=True``; quantspec._fastpath.runner.run)
QPrepared = namedtuple("QPrepared", "quotient lay params op edges memo qmemo", defaults=(None, None))
DQPrepared = namedtuple("DQPrepared", "lay params op memo", defaults=(None,))


def prepare_quantize(plan: QuantizePlan, cached: bool = False) -> QPrepared:
    """Everything :func:`quantize` needs that depends only on the plan.  ``cached``: the result will
    serve many calls (it then keeps the kernels' entry points)."""
    t = plan.out
    pname = _precision(plan)
    with np.errstate(over="ignore"):       # a scale beyond float16's range is inf in that precision
        scale = np.asarray(plan.scale).astype(qtype(pname).dtype, copy=False).astype(np.float32, copy=False)  # in P
    quotient = None
    if pname != "float":
        # a float16 / bfloat16 quotient: computed first (as float32 values), then the output rule
        # runs on it with a scale of 1 (an exact division), so the rules compile once, for Q32
        lay, (s,) = _prepared(plan, scale)
        quotient = ((s,), lay, (_P[pname], Quotient(0)))
        scale = np.ones(scale.shape, np.float32)
    zp = plan.zero_point
    edges = None
    if t.is_int:
        zi = core.zeros(scale.shape, np.int32) if zp is None else zp.astype(np.int64).astype(np.int32)
        plain = _ort_plain(plan) if plan.compat == "onnxruntime" else "none"
        cfg = _int_record(IntPlain if plain == "all" else IntMlasByte if t.bits in (8, 16) else IntMlas, t)
        lay, params = _prepared(plan, scale, zi)
        if plain == "edges":
            full = core.layout(plan.shape, plan.granularity, plan.axis, plan.block_size, rows=False)
            edges = (scale.reshape(-1), zi.reshape(-1), full, *_slices(plan), _int_record(IntPlain, t))
    else:
        cfg = float_format(t, plan.saturate, plan.compat)
        if t.bits < 8 and zp is not None:       # float4 / float6: the zero point is added in float64
            cfg = FloatZp(*cfg)
            lay, params = _prepared(plan, scale, zp.astype(np.float32).astype(np.float64))
        else:
            lay, params = _prepared(plan, scale)
    return QPrepared(quotient, lay, params, (Q32(0), cfg), edges, *(({}, {}) if cached else ()))


def quantize(plan: QuantizePlan, x: np.ndarray, out: np.ndarray | None = None,
             prepared: QPrepared | None = None) -> np.ndarray:
    """QuantizeLinear on the fused kernels (``path(plan) == "fast"``); same result as
    :func:`quantspec.onnx.reference.quantize`.  ``prepared``: ``prepare_quantize(plan)``, if at hand."""
    t = plan.out
    result = _result(out, plan.shape, t.dtype)
    if result.size == 0:
        return result
    kernels = _jitted()
    pr = prepare_quantize(plan) if prepared is None else prepared
    dest, fresh = core.destination(result, x)
    xf = _flat_f32(x)                                        # float16 / bfloat16: exact
    if pr.quotient is not None:
        quotient = np.empty(xf.size, np.float32)
        core.run(xf, quotient, *pr.quotient, memo=pr.qmemo)
        xf = quotient
    yf = (dest if dest.ndim == 1 else dest.reshape(-1)).view(np.uint16 if t.bits == 16 else np.uint8)
    core.run(xf, yf, pr.params, pr.lay, pr.op, memo=pr.memo)
    if pr.edges is not None:
        scale, zi, full, dl, bl, rec = pr.edges
        core.launch(kernels.q_ort_edges, (xf, yf, scale, zi, full, dl, bl, rec), (xf.size // dl) * -(-dl // bl),
                    xf.size)
    if fresh:
        np.copyto(result, dest)
    return result


def repeat(plan, pr, x: np.ndarray, out: np.ndarray | None):
    """A small call that repeats a cached one (quantize_linear / dequantize_linear): the result, or
    None where this shortcut does not apply (then the general path runs).  It applies to a flat
    contiguous x of the plan's type below SERIAL_BELOW elements, a one-pass operation whose entry
    point is already known for these argument types, and an ``out`` (if any) that does not overlap
    x: everything a small call needs, and nothing more (a tenth of a 1 Ki-element quantize was the
    walk through the general path's functions)."""
    n = x.size
    if n >= core.SERIAL_BELOW or x.ndim != 1 or not x.flags.c_contiguous or n == 0:
        return None
    t = plan.out
    if out is None:
        result = np.empty(plan.shape, t.dtype)
    elif (type(out) is np.ndarray and out.shape == plan.shape and out.dtype == t.dtype and out.flags.writeable
          and out.flags.c_contiguous and out.base is None and out is not x and x.base is None):
        result = out               # two arrays that own their memory: no overlap
    else:
        return None
    if type(pr) is QPrepared:
        if pr.quotient is not None or pr.edges is not None or x.dtype != _F32:
            return None
        view = np.uint16 if t.bits == 16 else np.uint8
    elif t.name == "float":
        view = None
        x = x.view(_UINT[max(8, plan.x_type.dtype.itemsize * 8)])
    else:
        return None
    y = result.view(view) if view is not None else result
    entry = pr.memo.get((False, x.dtype, x.flags.num & core.TYPE_FLAGS, y.dtype, y.flags.num & core.TYPE_FLAGS))
    if entry is None:
        return None
    entry(x, y, pr.params, pr.lay, pr.op[0], pr.op[1], np.zeros(2, np.int64), pr.lay.work)
    return result


# -- DequantizeLinear ---------------------------------------------------------------------------
_UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32}


def prepare_dequantize(plan: DequantizePlan, cached: bool = False) -> DQPrepared:
    """Everything :func:`dequantize` needs that depends only on the plan (``cached``: as for
    :func:`prepare_quantize`)."""
    t = plan.x_type
    scale = np.asarray(plan.scale).astype(np.float32)
    zp = plan.zero_point
    if t.is_int:
        dec = DecInt((1 << t.bits) - 1, (1 << (t.bits - 1)) if t.signed else 0)
        lut = np.zeros(1, np.float32)
        zi = core.zeros(scale.shape, np.int32) if zp is None else zp.astype(np.int64).astype(np.int32)
        lay, params = _prepared(plan, scale, zi)
    else:
        dec = DecLut((1 << t.bits) - 1)
        lut = np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype).astype(np.float32)
        # spec subtracts the float zero point (all zeros, but -0.0 - -0.0 is +0.0); onnxruntime ignores it
        use_zp = zp is not None and plan.compat == "spec"
        lay, params = _prepared(plan, scale, zp.astype(np.float32) if use_zp else core.zeros(scale.shape, np.float32))
    return DQPrepared(lay, params, (lut, dec), {} if cached else None)


def dequantize(plan: DequantizePlan, x: np.ndarray, out: np.ndarray | None = None,
               prepared: DQPrepared | None = None) -> np.ndarray:
    """DequantizeLinear on the fused kernels; same result as :func:`quantspec.onnx.reference.dequantize`.
    ``prepared``: ``prepare_dequantize(plan)``, if at hand."""
    t, o = plan.x_type, plan.out
    result = _result(out, plan.shape, o.dtype)
    n = result.size
    if n == 0:
        return result
    _jitted()
    pr = prepare_dequantize(plan) if prepared is None else prepared
    xf = core.flat(np.asarray(x), _UINT[max(8, t.dtype.itemsize * 8)])
    dest, fresh = core.destination(result, x)
    if o.name == "float":
        core.run(xf, dest if dest.ndim == 1 else dest.reshape(-1), pr.params, pr.lay, pr.op, memo=pr.memo)
    else:  # the float32 product, then rounded once to float16 / bfloat16 as the reference path does
        product = np.empty(n, np.float32)
        core.run(xf, product, pr.params, pr.lay, pr.op, memo=pr.memo)
        with np.errstate(over="ignore", invalid="ignore"):
            np.copyto(dest.reshape(-1), product, casting="unsafe")
    if fresh:
        np.copyto(result, dest)
    return result
