"""Compute step of ONNX QuantizeLinear / DequantizeLinear: the readable reference path.

One function per (operator, compat mode), each a few numpy lines over a prepared plan
(:mod:`quantspec.onnx.plan`).  Semantics:

``spec`` (the operator text; where it is silent, quantspec's documented choices, docs/onnx.md)
    Q: ``q = x / scale`` as one IEEE division in the precision P (``precision``, else the scale's
    type; an e8m0 scale is a power of two and divides exactly in float32; an int32 scale divides in
    float64, which is exact for int32 operands); both operands are first converted to P.  Integer
    outputs: ``clamp(rint(q) + zero_point)`` with rint half-to-even, the zero point added after
    rounding, the clamp in float so ±inf and huge values saturate; NaN -> qmin.  float8: the zero
    point is ignored, ``saturate`` per the Cast-28 table.  float4/float6: the zero point, when given,
    is added in float (float64) before one RNE rounding that saturates; NaN -> +max (onnx
    docs/technical/float4.md, float6.md).
    DQ: ``(x - zero_point) * scale`` with the subtraction exact, the product in float32, rounded
    once to the output type.

``reference`` (onnx.reference 1.23.2 on x86-64)
    The same numpy operations in the same order and dtypes (numpy type promotion included), with the
    x86 conversion of NaN, ±inf and out-of-range values to INT32_MIN emulated explicitly so the
    result does not depend on the platform quantspec runs on, and the int32 wrap of ``xi += zp``.
    A bfloat16 quotient (a bfloat16 input divided by a bfloat16 scale, or ``precision`` bfloat16) is
    converted by ml_dtypes' own cast, whose result for those values depends on the installed
    ml_dtypes (INT32_MIN up to 0.6, 0 from 0.7: :func:`quantspec.versions.ml_dtypes_invalid_int`).

``onnxruntime`` (onnxruntime 1.31.1 or 1.32.0 CPU, ``ort_version=``; the paths were measured)
    The release's rules are the flags of its row (``plan.ort``, :class:`quantspec.onnx.plan.OrtSupport`).
    The quotient: 1.31.1 divides in float32 always (``precision`` ignored).  1.32.0 does so before
    Q-23; from Q-23 on it converts x and the scale to the precision P (``precision``, else the scale's
    type: float or float16; x and the scale may differ in type) and divides once in P, like the spec.
    Integer outputs: 1.32.0 clamps in float everywhere (MLAS: clamp to [qmin-zp, qmax-zp], then round,
    then add zp: +inf -> qmax, NaN -> qmin).  1.31.1 takes one of two paths per element: MLAS or a
    plain loop (``int32(nearbyint(q)) + zp`` with the x86 cast and int32 wrap, then clamp).  Which
    path: f16 input and 2-bit outputs always take the plain loop; 8/16-bit outputs
    take MLAS except blocked quantization along a non-last axis; 4-bit outputs take MLAS for the
    even-aligned middle of each slice (the whole tensor, a per-axis channel slice, or a block along
    the last axis) and the plain loop for an odd-aligned head and tail element, and the plain loop
    for blocked quantization along a non-last axis.  float8 (both releases, on the quotient above):
    RNE like ml_dtypes, except E4M3FN saturate=0 maps [480, 496) to ±448, E5M2 saturate=0 maps
    [61440, 65536) to NaN, and E5M2 NaN is 0x7f/0xff.
"""

from __future__ import annotations

import numpy as np

from .._semantics.intcast import INT32_MIN, cvtt_int32, wrap_int32
from .._semantics.narrowfloat import max_finite, to_narrow_float
from ..dtypes import QType, qtype
from ..errors import InvalidArgumentError, ShapeError
from ..versions import ml_dtypes_invalid_int
from .plan import DequantizePlan, QuantizePlan

__all__ = ["quantize", "dequantize", "ort_division", "ort_plain_mask"]

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_BF16 = qtype("bfloat16").dtype


# -- shared helpers -----------------------------------------------------------------------------
def _int_out(values: np.ndarray, t: QType) -> np.ndarray:
    """Integral int64/float values already in t's range -> an array of type t."""
    values = np.asarray(values)
    if values.dtype.kind == "f" and t.bits > 32:  # pragma: no cover - no such output type
        values = values.astype(np.int64)
    return values.astype(t.storage).astype(t.dtype, copy=False)


def _division_dtype(plan: QuantizePlan) -> np.dtype:
    """The precision P of the spec's division (see the module docstring)."""
    p = plan.precision or qtype(plan.scale.dtype)
    if p.name == "int32":
        return _F64
    if p.name == "float8e8m0":
        return _F32
    return p.dtype


def check_out(out, shape: tuple[int, ...], dtype: np.dtype, argument: str = "out") -> np.ndarray:
    """``out`` if it is a writeable array of this shape and dtype; else a :class:`ShapeError`."""
    if not isinstance(out, np.ndarray) or out.shape != tuple(shape) or out.dtype != dtype:
        got = (getattr(out, "shape", None), str(getattr(out, "dtype", type(out).__name__)))
        raise ShapeError(argument, f"must be an array of shape {tuple(shape)} and dtype {dtype}", got)
    if not out.flags.writeable:
        raise InvalidArgumentError(argument, "must be a writeable array", "a read-only array")
    return out


def _deliver(y: np.ndarray, out: np.ndarray | None, argument: str = "out") -> np.ndarray:
    y = np.asarray(y)
    if out is None:
        return y
    np.copyto(check_out(out, y.shape, y.dtype, argument), y)
    return out


# -- QuantizeLinear -----------------------------------------------------------------------------
def _q_spec(plan: QuantizePlan, x: np.ndarray) -> np.ndarray:
    P = _division_dtype(plan)
    t = plan.out
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.divide(np.asarray(x).astype(P, copy=False), plan.expand(plan.scale).astype(P))   # one division in P
        if t.is_int:
            return _int_out(_saturate_int(q, plan), t)
        q = np.asarray(q, dtype=P).astype(_F64)            # exact widening
        if t.bits == 8:                                         # float8: zero point ignored
            return to_narrow_float(q, t, plan.saturate)
        if plan.zero_point is not None:                         # float4 / float6
            q = q + plan.expand(plan.zero_point).astype(_F64)
        q = np.where(np.isnan(q), max_finite(t), q)
        return to_narrow_float(q, t, True)


def _saturate_int(q: np.ndarray, plan: QuantizePlan) -> np.ndarray:
    """``clip(rint(q) + zero_point, qmin, qmax)`` with NaN -> qmin, as integral floats.

    Computed in float32 (float64 for an int32 scale's float64 quotient), in place on one array: the
    float16 / bfloat16 quotient widens to float32 exactly; ``rint(q) + zp`` is exact in float32 while
    ``|rint(q)| < 2^24 - 2^16``, and beyond that the sum, rounded or not, lies far outside every
    integer output's range on the same side, so the clip gives the same bound.  ``fmax`` takes the
    lower bound for NaN."""
    t = plan.out
    r = np.asarray(q, dtype=_F64 if q.dtype == _F64 else _F32)      # the quotient itself, or widened
    if not r.flags.writeable:
        r = r.copy()
    np.rint(r, out=r)
    if plan.zero_point is not None:
        np.add(r, plan.expand(plan.zero_point).astype(r.dtype), out=r)
    np.fmax(r, r.dtype.type(t.qmin), out=r)
    np.minimum(r, r.dtype.type(t.qmax), out=r)
    return r


def _reference_param(plan, value: np.ndarray | None):
    """A parameter as onnx.reference's ``reshape_input`` hands it to numpy."""
    if value is None:
        return None
    if value.ndim == 0:
        return value
    if value.size == 1:
        return value[0]
    if plan.granularity == "axis":
        return value.reshape([value.size if i == plan.axis else 1 for i in range(len(plan.shape))])
    return plan.expand(value)


def _q_reference(plan: QuantizePlan, x: np.ndarray) -> np.ndarray:
    scale = _reference_param(plan, plan.scale)
    zp = _reference_param(plan, plan.zero_point)
    t = plan.out
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if plan.precision is not None:
            q = x.astype(plan.precision.dtype) / scale.astype(plan.precision.dtype)
        else:
            q = x / scale
        if t.is_int:
            r = np.rint(q)
            invalid = ml_dtypes_invalid_int() if r.dtype == _BF16 else INT32_MIN
            xi = cvtt_int32(r, invalid).astype(np.int64)
            if zp is not None:
                xi = wrap_int32(xi + np.asarray(zp).astype(np.int64))
            return _int_out(np.clip(xi, t.qmin, t.qmax), t)
        if t.bits == 8:
            if plan.saturate:
                import ml_dtypes

                fi = ml_dtypes.finfo(t.dtype)
                q = np.clip(q, fi.min, fi.max)
            return np.asarray(q).astype(t.dtype)
        if zp is not None:
            q = q + zp
        return np.asarray(q).astype(t.dtype)


def _blocks_last(plan: QuantizePlan) -> bool:
    """Whether onnxruntime quantizes these blocks as blocks along the last axis (MLAS): the blocked
    axis is the last one, or only axes of length 1 follow it (its inner size is 1)."""
    return int(np.prod(plan.shape[plan.axis + 1:], dtype=np.int64)) == 1


def ort_division(plan: QuantizePlan) -> np.dtype:
    """The precision of onnxruntime's quotient for this plan (float32 or float16; module docstring)."""
    since = plan.ort.precision_since
    if since is None or plan.version < since:
        return _F32
    return (plan.precision or qtype(plan.scale.dtype)).dtype


def ort_plain_mask(plan: QuantizePlan) -> np.ndarray | bool:
    """Which elements onnxruntime computes in its plain loop (True) rather than with MLAS."""
    t = plan.out
    if not plan.ort.plain_loop:
        return False
    if plan.x_type.name == "float16" or t.bits == 2:
        return True
    if plan.granularity == "block" and not _blocks_last(plan):
        return True
    if t.bits != 4:
        return False
    n = int(np.prod(plan.shape, dtype=np.int64))
    i = np.arange(n, dtype=np.int64)
    if plan.granularity == "tensor":
        start, end = np.zeros_like(i), np.full_like(i, n)
    elif plan.granularity == "axis":
        inner = int(np.prod(plan.shape[plan.axis + 1:], dtype=np.int64))
        start = (i // inner) * inner
        end = start + inner
    else:  # blocks along the last axis (or one followed only by axes of length 1)
        d, b = plan.shape[plan.axis], plan.block_size
        row0 = (i // d) * d
        start = row0 + ((i - row0) // b) * b
        end = np.minimum(start + b, row0 + d)
    head = (start % 2 == 1) & (i == start)
    tail = (end % 2 == 1) & (i == end - 1)
    return (head | tail).reshape(plan.shape)


def _q_ort(plan: QuantizePlan, x: np.ndarray) -> np.ndarray:
    t = plan.out
    P = ort_division(plan)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # one division in P (numpy's float16 division is the correctly rounded one)
        q = np.asarray(x).astype(P) / plan.expand(plan.scale).astype(P)
        q = np.asarray(q, dtype=P).astype(_F32, copy=False)
        if t.is_int:
            zp = (plan.expand(plan.zero_point).astype(np.int64) if plan.zero_point is not None
                  else np.int64(0))
            plain = ort_plain_mask(plan)
            # MLAS: clamp in float to [qmin - zp, qmax - zp] (NaN -> the lower bound), round, add zp
            lo = (t.qmin - zp).astype(_F32) if isinstance(zp, np.ndarray) else _F32.type(t.qmin - zp)
            hi = (t.qmax - zp).astype(_F32) if isinstance(zp, np.ndarray) else _F32.type(t.qmax - zp)
            clamped = np.minimum(np.where(np.isnan(q), lo, np.maximum(q, lo)), hi)
            mlas = np.rint(clamped).astype(np.int64) + zp
            if plain is False:
                return _int_out(mlas, t)
            # plain loop: x86 int32 cast of nearbyint(q), int32 wrap when adding zp, clamp
            loop = np.clip(wrap_int32(cvtt_int32(np.rint(q)).astype(np.int64) + zp), t.qmin, t.qmax)
            return _int_out(np.where(plain, loop, mlas), t)
        y = to_narrow_float(q, t, plan.saturate)
        bits = y.view(np.uint8)
        sign = np.where(np.signbit(q), np.uint8(0x80), np.uint8(0))
        a = np.abs(q)
        if t.name == "float8e5m2":
            bits = np.where(np.isnan(q), sign | np.uint8(0x7F), bits)
            if not plan.saturate:
                bits = np.where((a >= 61440.0) & (a < 65536.0), sign | np.uint8(0x7F), bits)
        elif t.name == "float8e4m3fn" and not plan.saturate:
            bits = np.where((a >= 480.0) & (a < 496.0), sign | np.uint8(0x7E), bits)
        return np.asarray(bits, dtype=np.uint8).view(t.dtype)


# -- DequantizeLinear ---------------------------------------------------------------------------
def _dq_spec(plan: DequantizePlan, x: np.ndarray) -> np.ndarray:
    t = plan.x_type
    if t.is_int and t.bits <= 16:
        # codes and zero points of at most 16 bits are exact float32 values, and so is their
        # difference (|x - zp| < 2^17): subtracted in float32, with no int64 temporaries
        d = x.astype(_F32)
        if plan.zero_point is not None:
            np.subtract(d, plan.expand(plan.zero_point).astype(_F32), out=d)
    elif t.is_int:
        d = x.astype(np.int64)
        if plan.zero_point is not None:
            d = d - plan.expand(plan.zero_point).astype(np.int64)
        d = d.astype(_F32)
    else:
        d = x.astype(_F32)
        if plan.zero_point is not None:
            d = d - plan.expand(plan.zero_point).astype(_F32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = _times_scale(d, plan)
        return np.asarray(y, dtype=_F32).astype(plan.out.dtype, copy=False)


def _times_scale(d: np.ndarray, plan: DequantizePlan) -> np.ndarray:
    """``d * scale`` in float32; a NaN of ``d`` (a float code) keeps its own payload where the scale
    is NaN too, as x86's ``x * scale`` does (numpy's vector loops keep either, by position)."""
    if plan.x_type.is_float:
        return np.where(np.isnan(d), d, d * plan.expand(plan.scale).astype(_F32))
    if d.ndim == 0:
        return d * plan.expand(plan.scale).astype(_F32)
    return np.multiply(d, plan.expand(plan.scale).astype(_F32), out=d)     # d is this call's own


def _dq_reference(plan: DequantizePlan, x: np.ndarray) -> np.ndarray:
    t = plan.x_type
    zp = _reference_param(plan, plan.zero_point)
    if zp is not None and not (t.is_float and t.bits == 8) and t.name != "float4e2m1":
        dx = x.astype(_F32) - zp
    else:
        dx = x.astype(_F32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = dx * _reference_param(plan, plan.scale)
        return np.asarray(y).astype(plan.out.dtype)


def _dq_ort(plan: DequantizePlan, x: np.ndarray) -> np.ndarray:
    if plan.x_type.is_int:
        d = x.astype(np.int64)
        if plan.zero_point is not None:
            d = wrap_int32(d - plan.expand(plan.zero_point).astype(np.int64))
        d = d.astype(_F32)
    else:
        d = x.astype(_F32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = _times_scale(d, plan)
        return np.asarray(y, dtype=_F32).astype(plan.out.dtype)


_Q = {"spec": _q_spec, "reference": _q_reference, "onnxruntime": _q_ort}
_DQ = {"spec": _dq_spec, "reference": _dq_reference, "onnxruntime": _dq_ort}


def quantize(plan: QuantizePlan, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Run QuantizeLinear on ``x`` as ``plan`` prescribes."""
    y = _Q[plan.compat](plan, x)
    return _deliver(np.asarray(y, dtype=plan.out.dtype).reshape(plan.shape), out)


def dequantize(plan: DequantizePlan, x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Run DequantizeLinear on ``x`` as ``plan`` prescribes."""
    y = _DQ[plan.compat](plan, x)
    return _deliver(np.asarray(y).reshape(plan.shape), out)
