"""The readable reference path of the converter: one slab of rows, in numpy, from quantspec's own
spec implementations.

Each scheme's parameters are computed here as its rule says (see :mod:`.schemes`), in the same
float32 / float64 steps as the tool it matches, and its codes come from the operator the rule names:
ONNX QuantizeLinear (:func:`quantspec.onnx.quantize_linear`, numpy path) of the stored parameters,
LiteRT's converter weights (:func:`quantspec.litert.params.weight_params` /
``quantize_weights``), or onnxruntime's MatMulNBits routine (a reciprocal multiply rounded half away
from zero, written out below).  The fast kernels (:mod:`._jitted`) must give the same bytes; the
tests compare both, and both with the tools.

:func:`encode` returns unpacked arrays (codes as their ml_dtypes / numpy type, the scale, the zero
point); :mod:`.encode` packs them.
"""

from __future__ import annotations

import numpy as np

from .._fastpath import jit
from .._semantics.rounding import half_away_from_zero
from ..dtypes import qtype
from .schemes import Scheme

__all__ = ["encode", "tensor_params", "ort_int_params", "mx_exponents", "dequantize", "stored_scale"]

_TINY32 = np.finfo(np.float32).tiny


#: the epsilon compressed-tensors puts in place of a zero scale, per stored type
_EPS = {"bfloat16": np.float32(2.0 ** -7), "float16": np.float32(2.0 ** -10), "float": np.float32(2.0 ** -23)}


def stored_scale(scale: np.ndarray, scale_type: str = "float") -> np.ndarray:
    """The float32 scale as stored: unchanged for ``"float"`` (quantspec's layout; float8e8m0 scales
    are exact already); ``"ct:bfloat16"``, ``"ct:float16"``, ``"ct:float"``: as compressed-tensors
    keeps it — rounded to bfloat16 / float16 (ties to even), or float32 — and a zero scale (±0: a
    block of zeros, or a scale that rounds to zero) replaced by the type's epsilon, as
    compressed-tensors replaces zero scales.  Returned as float32 values."""
    if not scale_type.startswith("ct:"):
        return scale
    import ml_dtypes

    kind = scale_type[3:]
    s = np.asarray(scale, np.float32)
    if kind in ("bfloat16", "float16"):
        r = s.astype(ml_dtypes.bfloat16 if kind == "bfloat16" else np.float16).astype(np.float32)
    else:
        r = s
    return np.where(r == 0, _EPS[kind], r).astype(np.float32)


def ort_int_params(rmin: np.ndarray, rmax: np.ndarray, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime.quantization's ``compute_scale_zp`` (weights: int8 symmetric in [-127, 127], uint8
    asymmetric in [0, 255]) for float32 ranges: (float32 scale, int64 zero point)."""
    rmin = np.minimum(np.asarray(rmin, np.float32), np.float32(0))
    rmax = np.maximum(np.asarray(rmax, np.float32), np.float32(0))
    if symmetric:
        a = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -a, a
        s64 = (rmax.astype(np.float64) - rmin.astype(np.float64)) / np.float64(254)
        zp = np.zeros(s64.shape, np.int64)
    else:
        s64 = (rmax.astype(np.float64) - rmin.astype(np.float64)) / np.float64(255)
        with np.errstate(divide="ignore", invalid="ignore"):
            zp = np.rint(np.float64(0) - rmin.astype(np.float64) / s64)
    small = s64 < _TINY32
    scale = np.where(small, np.float32(1), s64.astype(np.float32)).astype(np.float32)
    zp = np.where(small, 0, zp).astype(np.int64)
    return scale, zp


def amax_scale(amax: np.ndarray, t: str) -> np.ndarray:
    """float32(amax) / float32(max finite of ``t``), one division; 1.0 where amax or the quotient is 0."""
    amax = np.asarray(amax, np.float32)
    s = amax / np.float32(qtype(t).qmax)
    return np.where((amax == 0) | (s == 0), np.float32(1), s).astype(np.float32)


def mx_exponents(amax: np.ndarray, s: Scheme) -> np.ndarray:
    """The stored exponent of each block: floor(log2(amax)) - emax (clamped to [-127, 127]; a zero
    amax: -127), plus the scheme's shift, clamped at -127."""
    amax = np.asarray(amax, np.float32)
    _, k = np.frexp(amax.astype(np.float64))      # amax = f * 2**k, f in [0.5, 1): floor(log2) = k - 1
    e = np.where(amax > 0, k.astype(np.int64) - 1 - s.emax, -127)
    e = np.clip(e, -127, 127)
    return np.maximum(e + s.scale_shift, -127)


def tensor_params(s: Scheme, mn: float, mx: float, scale_type: str = "float") -> tuple[np.float32, int]:
    """(scale, zero point) of a per-tensor scheme from the tensor's float32 min and max, the scale
    as stored in ``scale_type`` (:func:`stored_scale`)."""
    if s.params == "ort-int":
        scale, zp = ort_int_params(np.float32(mn), np.float32(mx), not s.zero_point)
        return np.float32(stored_scale(scale, scale_type)), int(zp)
    a = np.maximum(np.abs(np.float32(mn)), np.abs(np.float32(mx)))
    return np.float32(stored_scale(amax_scale(a, s.codes), scale_type)), 0


def _quantize_linear(x, scale, zp, **attrs):
    from ..onnx import quantize_linear

    with jit.reference_only():
        return quantize_linear(x, scale, zp, **attrs)


def _blocks(x: np.ndarray, block: int, func) -> np.ndarray:
    return func.reduceat(x, np.arange(0, x.shape[1], block), axis=1)


def encode(s: Scheme, x: np.ndarray, tparams: tuple | None = None,
           scale_type: str = "float") -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(codes, scale, zero point or None) of the rows ``x`` (float32 ``[rows, cols]``) under scheme
    ``s``; ``tparams``: the (scale, zero point) of a per-tensor scheme.  ``scale_type``: the type the
    scale is stored as (:func:`stored_scale`); the codes are those of the stored scale."""
    t = qtype(s.codes)
    rows = x.shape[0]
    if s.granularity == "tensor":
        scale, zp = tparams
        zero = np.zeros((), t.dtype) if zp == 0 else np.array(zp, t.dtype)
        codes = _quantize_linear(x, np.float32(scale), zero if t.is_int else None,
                                 **({} if t.is_int else {"output_dtype": t.name}))
        return codes, np.asarray(np.float32(scale)), None
    if s.params == "litert":
        from ..litert.params import quantize_weights, weight_params

        # quantize_weights takes one (scale, zero point) pair as per-tensor weights: a one-row slab of
        # a per-channel tensor is computed on two copies of the row (the per-axis formula)
        xx = np.concatenate([x, x]) if rows == 1 else x
        p = weight_params(xx, axis=0)
        if scale_type.startswith("ct:"):
            p = type(p)(stored_scale(p.scale, scale_type), p.zero_point, p.quantized_dimension)
        codes = quantize_weights(xx, p)[:rows]
        return codes, p.scale[:rows].astype(np.float32), None
    if s.granularity == "channel":
        mn, mx = x.min(axis=1), x.max(axis=1)
        if s.params == "ort-int":
            scale, zp = ort_int_params(mn, mx, not s.zero_point)
            scale = stored_scale(scale, scale_type)
            zero = zp.astype(t.dtype)
            codes = _quantize_linear(x, scale, zero, axis=0)
            return codes, scale, (zero if s.zero_point else None)
        scale = stored_scale(amax_scale(np.maximum(np.abs(mn), np.abs(mx)), s.codes), scale_type)
        return _quantize_linear(x, scale, None, axis=0, output_dtype=t.name), scale, None
    if s.params == "mx":
        amax = _blocks(np.abs(x), s.block, np.maximum)
        e = mx_exponents(amax, s)
        scale = (e + 127).astype(np.uint8).view(qtype("float8e8m0").dtype)
        codes = _quantize_linear(x, scale, None, axis=1, block_size=s.block, output_dtype=t.name)
        return codes, scale, None
    return _nbits(s, x, scale_type)


def _nbits(s: Scheme, x: np.ndarray, scale_type: str = "float"):
    """onnxruntime MatMulNBits (QDQ, RTN), for rows x (blocks along axis 1): MLAS's float32 steps."""
    mn = _blocks(x, s.block, np.minimum)
    mx = _blocks(x, s.block, np.maximum)
    # MLAS scans a block in order with std::min / std::max, which keep the first of equal values: in
    # an all-zero block both are its first element (the sign of that zero reaches the scale)
    zeros = (mn == 0) & (mx == 0)
    first = x[:, ::s.block]
    mn, mx = np.where(zeros, first, mn), np.where(zeros, first, mx)
    f0 = np.float32(0)
    if s.zero_point:
        mn = np.where(f0 < mn, f0, mn)
        mx = np.where(mx < f0, f0, mx)
        scale = ((mx - mn) / np.float32(15)).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            zf = np.where(scale != 0, f0 - mn / scale, mn).astype(np.float32)
        zp = np.where(zf < 0, 0, np.where(zf > 15, 15, half_away_from_zero(zf))).astype(np.int64)
        lo, hi = 0, 15
    else:
        m = np.where(np.abs(mx) > np.abs(mn), mx, mn)
        scale = (-m / np.float32(8)).astype(np.float32)
        zp = np.zeros(scale.shape, np.int64)
        lo, hi = -8, 7
    scale = stored_scale(scale, scale_type)            # the zero point stays the tool's
    with np.errstate(divide="ignore", over="ignore"):
        inv = np.where(scale != 0, np.float32(1) / scale, f0).astype(np.float32)
    cols = x.shape[1]
    rep = lambda a: np.repeat(a, s.block, axis=1)[:, :cols]  # noqa: E731 - a parameter per element
    with np.errstate(invalid="ignore", over="ignore"):
        r = half_away_from_zero((x * rep(inv)).astype(np.float32))
        wild = ~(np.abs(r) < np.float32(2 ** 31))      # x86 cvttss2si: NaN, inf, out of range -> INT32_MIN
    q = np.where(wild, np.int64(-2 ** 31), np.where(wild, 0, r).astype(np.int64)) + rep(zp)
    t = qtype(s.codes)
    codes = np.clip(q, lo, hi).astype(t.dtype)
    return codes, scale, (zp.astype(t.dtype) if s.zero_point else None)


def dequantize(s: Scheme, codes: np.ndarray, scale: np.ndarray, zp: np.ndarray | None) -> np.ndarray:
    """DequantizeLinear of stored codes and parameters, float32 (quantspec.onnx, numpy path)."""
    from ..onnx import dequantize_linear

    attrs = s.attributes()
    with jit.reference_only():
        return dequantize_linear(codes, scale, zp, output_dtype="float", **attrs)
