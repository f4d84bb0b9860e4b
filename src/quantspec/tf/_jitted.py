"""numba element functions of TensorFlow QuantizeV2 / Dequantize (the fast path; see :mod:`.fast`).

Imported only through :func:`quantspec._fastpath.jit.load`.  Each function is inlined into the generic
kernel :data:`quantspec._fastpath.fastmap.plain`; the classes of the two ``op`` records select it:
``(precast, cast)`` for QuantizeV2 (parameters ``(lo, hi, scale, bias)`` of the element's slice),
``(mode, codes)`` for Dequantize (parameters ``(scale, bias)``), ``(step, zero)`` for FakeQuant
(parameters ``(nudged_min, nudged_max, scale, inv_scale, quant_zero, zero)``), ``(clamp, round)``
for QuantizeAndDequantize (parameters ``(lo, hi, scale, inv)``).  Each line is one operation of
:func:`quantspec.tf.quantize_op.precast` / :func:`~quantspec.tf.quantize_op.cast` or
:func:`quantspec.tf.dequantize_op.compute_dequantize` or
:func:`quantspec.tf.fake_quant.compute_fake_quant` or :func:`quantspec.tf.qdq.compute_qdq`, in float32, flushed to zero.
"""

from __future__ import annotations

import numpy as np

from .._fastpath import fastmap
from .._fastpath import nbprim
from .._fastpath.nbprim import HARDWARE_FTZ, cvtt_int32, cvtt_int64_low32, iand, inline, isub, ixor, round_half_away
from .fast import (CastInt32, CastOneDnn, CastWide, Codes, DqMinCombined, DqMinFirst, DqScaled, EigenMinCombined,
                   EigenMinFirst, EigenScaled, FqDivide, FqMultiply, FqZero, OneDnn, QdqClamp,
                   QdqRound)

__all__: list[str] = []

# Every operation flushes to zero.  On x86 the kernels run with the FTZ and DAZ modes on, as
# TensorFlow's do (fastmap.register(..., flush_to_zero=True)), and the flushes below are no-ops;
# elsewhere they flush explicitly.
ftz = inline(lambda v: v) if HARDWARE_FTZ else nbprim.ftz


@inline
def _clamp(x, lo, hi):
    """Eigen's ``x.cwiseMin(hi).cwiseMax(lo)``: std::min(x, hi) is ``hi < x ? hi : x``, std::max
    ``m < lo ? lo : m`` (NaN propagates, x wins ties)."""
    m = hi if hi < x else x
    return lo if m < lo else m


# -- QuantizeV2: the float value ------------------------------------------------------------------
@inline
def _min_combined(x, prm, rounds):
    lo, hi, scale, bias = prm
    v = ftz(ftz(ftz(_clamp(ftz(x), lo, hi) - lo) * scale) - bias)
    return round_half_away(v) if rounds else v


@inline
def _min_first(x, prm):
    lo, hi, scale, bias = prm
    v = ftz(round_half_away(ftz(ftz(x) * scale)) - bias)
    v = lo if v < lo else v                  # std::min(std::max(v, lo), hi)
    return hi if hi < v else v


@inline
def _scaled(x, prm):
    lo, hi, scale, bias = prm
    return ftz(_clamp(ftz(x), lo, hi) * scale)


@inline
def _scaled_rounded(x, prm, e):
    v = _scaled(x, prm)
    return np.rint(v) if e.even else round_half_away(v)


@inline
def _onednn(x, prm, e):
    v = ftz(ftz(x) * prm[2])
    return ftz(v + prm[3]) if e.min_first else v


_PRECASTS = {
    EigenMinCombined: inline(lambda x, prm, e: _min_combined(x, prm, e.rounds != 0)),
    EigenMinFirst: inline(lambda x, prm, e: _min_first(x, prm)),
    EigenScaled: _scaled_rounded,
    OneDnn: _onednn,
}


# -- QuantizeV2: the cast to the code --------------------------------------------------------------
@inline
def _int32(v, c):
    """x86 cvttss2si, clipped to [lowest, highest]: Eigen's vectorised cast to 8/16-bit signed T
    (cvttps2dq, then saturating packs), or with the int32 limits just the conversion, whose low bits
    the store keeps."""
    i = cvtt_int32(v)
    return min(max(i, np.int32(c.lowest)), np.int32(c.highest))


@inline
def _cast_onednn(v, c):
    """oneDNN: NaN -> a fixed code, saturate in float, round half to even."""
    if v != v:
        return np.int32(c.nan)
    v = min(max(v, np.float32(c.lowest)), np.float32(c.highest))
    return np.int32(np.rint(v))


_CASTS = {CastInt32: _int32, CastWide: inline(lambda v, c: cvtt_int64_low32(v)), CastOneDnn: _cast_onednn}


def _compose(precast, cast):
    @inline
    def op(x, prm, e0, e1):
        return cast(precast(x, prm, e0), e1)

    return op


for _p, _precast in _PRECASTS.items():
    for _c, _cast in _CASTS.items():
        fastmap.register((_p, _c), _compose(_precast, _cast), flush_to_zero=True)


# -- Dequantize --------------------------------------------------------------------------------------
@inline
def _code(u, codes):
    """The code's integer value as float32 (int -> float rounds to nearest even for qint32)."""
    return np.float32(isub(ixor(iand(u, codes.mask), codes.half), codes.half))


@inline
def _dq_min_combined(u, prm, mode, codes):
    scale, bias = prm
    return ftz(ftz(ftz(_code(u, codes) + np.float32(mode.half)) * scale) + bias)


@inline
def _dq_min_first(u, prm, mode, codes):
    scale, bias = prm
    return ftz(bias + ftz(_code(u, codes) * scale))


@inline
def _dq_scaled(u, prm, mode, codes):
    q = _code(u, codes)
    if mode.wrap:
        q = np.float32(cvtt_int32(q))
    return ftz(q * prm[0])


fastmap.register((DqMinCombined, Codes), _dq_min_combined, flush_to_zero=True)
fastmap.register((DqMinFirst, Codes), _dq_min_first, flush_to_zero=True)
fastmap.register((DqScaled, Codes), _dq_scaled, flush_to_zero=True)


# -- FakeQuant --------------------------------------------------------------------------------------
@inline
def _fake_quant(x, prm, divide, e1):
    """compute_fake_quant: clamp to the nudged range, shift, to steps (times inv_scale, or divided by
    scale), floor(v - quant_zero + 0.5) * scale; 0 for a min == max == 0 slice."""
    nmin, nmax, scale, inv, qz, zero = prm
    shifted = ftz(_clamp(ftz(x), nmin, nmax) - nmin)
    v = ftz(shifted / scale) if divide else ftz(shifted * inv)
    y = ftz(np.float32(np.floor(ftz(ftz(v - qz) + np.float32(0.5)))) * scale)
    if e1.any and zero != np.float32(0):
        return np.float32(0)
    return y


fastmap.register((FqMultiply, FqZero), inline(lambda x, prm, e0, e1: _fake_quant(x, prm, False, e1)),
                 flush_to_zero=True)
fastmap.register((FqDivide, FqZero), inline(lambda x, prm, e0, e1: _fake_quant(x, prm, True, e1)),
                 flush_to_zero=True)


# -- QuantizeAndDequantize --------------------------------------------------------------------------
@inline
def _qdq(x, prm, c, r):
    """compute_qdq: R(clamp(x, lo, hi) * scale) * inv, the clamp only for a given range; R is rint, or
    floor(v + 0.5) (HALF_UP)."""
    lo, hi, scale, inv = prm
    x = ftz(x)
    if c.clamp:
        x = _clamp(x, lo, hi)
    v = ftz(x * scale)
    v = np.rint(v) if r.even else np.float32(np.floor(ftz(v + np.float32(0.5))))
    return ftz(v * inv)


fastmap.register((QdqClamp, QdqRound), _qdq, flush_to_zero=True)
