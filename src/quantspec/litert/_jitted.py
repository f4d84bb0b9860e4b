"""numba element functions of LiteRT's QUANTIZE, DEQUANTIZE and requantizations (fast path; see
:mod:`.fast`), and the two-input kernel of ADD / SUB / MUL.

Imported only through :func:`quantspec._fastpath.jit.load`.  The unary operations are inlined into the
generic kernel :data:`quantspec._fastpath.fastmap.plain`, selected by the class of their record.  The
fixed-point primitives are gemmlowp's, on int64 values holding int32 ones, line for line as
:mod:`quantspec.litert.fixedpoint` computes them with numpy.
"""

from __future__ import annotations

import numpy as np
from numba.extending import overload

from .._fastpath import fastmap
from .._fastpath.nbprim import claim, finished, iand, inline, isub, ixor, kernel, round_half_away, shared
from .fast import (AddSub, DequantizeAxis, DequantizeSmall, DequantizeTensor, Quantize, Requantize,
                   RequantizeDouble)

__all__ = ["binary"]

#: files besides this one and nbprim.py whose content the compiled kernels depend on (jit.py)
KERNEL_SOURCES = ("fast.py",)

I32_MIN = -2147483648
I32_MAX = 2147483647
_TWO31 = 2147483648.0


# -- gemmlowp fixed point (int64 values holding int32 ones) ---------------------------------------
@shared
def wrap32(v):
    """Two's-complement wrap into the int32 range (C++ int32 overflow), as int64."""
    return np.int64(np.int32(v))


@shared
def srdhm(a, b):
    """SaturatingRoundingDoublingHighMul: (a*b + nudge) / 2^31 truncated, INT32_MIN^2 saturated."""
    ab = a * b
    n = ab + (np.int64(1 << 30) if ab >= 0 else np.int64(1 - (1 << 30)))
    q = (n + ((n >> 63) & np.int64((1 << 31) - 1))) >> 31        # C division by 2^31 (toward zero)
    return np.int64(I32_MAX) if (a == I32_MIN) & (b == I32_MIN) else q


@shared
def rdbpot(x, e):
    """RoundingDivideByPOT: x / 2^e rounded to nearest, ties away from zero (0 <= e <= 31)."""
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (np.int64(1) if x < 0 else np.int64(0))
    return (x >> e) + (np.int64(1) if (x & mask) > threshold else np.int64(0))


@shared
def round_double(acc, eff):
    """``static_cast<int32_t>(round(double(acc) * eff))``; out of int32 (x86 cvttsd2si): INT32_MIN."""
    v = round_half_away(np.float64(acc) * eff)
    inside = (v >= -_TWO31) & (v < _TWO31)
    return np.int64(min(max(v, -_TWO31), _TWO31 - 1.0)) if inside else np.int64(I32_MIN)


@shared
def mbqm(x, m, s):
    """MultiplyByQuantizedMultiplier (double rounding); the left shift is an int32 product (wraps)."""
    left = s if s > 0 else np.int64(0)
    right = -s if s < 0 else np.int64(0)
    return rdbpot(srdhm(wrap32(x << left), m), right)


@shared
def clamp(v, lo, hi):
    return min(max(v, np.int64(lo)), np.int64(hi))


# -- unary operations --------------------------------------------------------------------------------
@inline
def _quantize(x, prm, e, unused):
    """AffineQuantize: clamp(int32(TfLiteRound(x / scale)) + zp); a NaN or out-of-int32 quotient
    converts to INT32_MIN, and INT32_MIN + zp wraps to a large value for a negative zp.

    Without branches or 64-bit integers (so that the loop vectorises): the integral quotient r plus
    the zero point is clamped in float32.  That is exact where |r| <= 2^24, and beyond, the rounded
    sum is still far outside [lo, hi] on the same side, so the clamp gives the same bound."""
    r = round_half_away(x / prm[0])
    zp = prm[1]
    v = min(max(r + np.float32(zp), np.float32(e.lo)), np.float32(e.hi))
    wild = np.float32(e.hi) if zp < 0 else np.float32(e.lo)
    return np.int32(v if abs(r) < np.float32(_TWO31) else wild)


@inline
def _code(u, e):
    return np.int64(isub(ixor(iand(u, e.mask), e.half), e.half))


@inline
def _dequantize_tensor(u, prm, e, unused):
    """reference_integer_ops::Dequantize: float(double(scale) * (q - zp))."""
    return np.float32(prm[0] * np.float64(_code(u, e) - prm[1]))


@inline
def _dequantize_small(u, prm, e, unused):
    """Either DEQUANTIZE formula where |q - zp| <= 2^24 (codes of at most 16 bits, zero points
    chosen so): q - zp is an exact float32 and the float32 product is the correctly rounded
    scale * (q - zp), as double(scale) * (q - zp) rounded to float is; in 32-bit lanes."""
    return prm[0] * np.float32(isub(isub(ixor(iand(u, e.mask), e.half), e.half), prm[1]))


@inline
def _dequantize_axis(u, prm, e, unused):
    """PerChannelDequantize: scale[c] * float(q - zp[c]) in float32."""
    return prm[0] * np.float32(_code(u, e) - prm[1])


@inline
def _requantize(acc, prm, e, unused):
    """CONV_2D / DEPTHWISE_CONV_2D: clamp(MBQM(int32(acc + bias[c]), M[c], e[c]) + z_out), with the
    int32 wraps of the C++ accumulator and of the zero-point addition."""
    v = wrap32(mbqm(wrap32(np.int64(acc) + prm[2]), prm[0], prm[1]) + e.zero_point)
    return np.int32(clamp(v, e.lo, e.hi))


@inline
def _requantize_double(acc, prm, e, unused):
    """REF FULLY_CONNECTED: int32(round(double(acc) * eff[c])) (x86: out of range -> INT32_MIN)."""
    return np.int32(clamp(wrap32(round_double(acc, prm[0]) + e.zero_point), e.lo, e.hi))


fastmap.register((Quantize, None), _quantize)
fastmap.register((DequantizeTensor, None), _dequantize_tensor)
fastmap.register((DequantizeAxis, None), _dequantize_axis)
fastmap.register((DequantizeSmall, None), _dequantize_small)
fastmap.register((Requantize, None), _requantize)
fastmap.register((RequantizeDouble, None), _requantize_double)


# -- ADD / SUB / MUL: two int8 inputs of the output's shape --------------------------------------------
@inline
def _add_sub(x, y, p):
    a = rdbpot(srdhm(wrap32((np.int64(x) - p.z1) << p.left), np.int64(p.m1)), np.int64(-p.e1))
    b = rdbpot(srdhm(wrap32((np.int64(y) - p.z2) << p.left), np.int64(p.m2)), np.int64(-p.e2))
    raw = wrap32(a + p.sign * b)
    v = wrap32(rdbpot(srdhm(raw, np.int64(p.mo)), np.int64(-p.eo)) + p.zo)
    return clamp(v, p.lo, p.hi)


@inline
def _mul(x, y, p):
    prod = wrap32((np.int64(x) - p.z1) * (np.int64(y) - p.z2))
    v = wrap32(mbqm(prod, np.int64(p.m), np.int64(p.e)) + p.zo)
    return clamp(v, p.lo, p.hi)


def _binary_kernel(x, y, out, p, chunk, claims, step):
    """out = op(x, y) element-wise; ``p``: an AddSub or Mul record; over the chunks this thread claims
    (quantspec._fastpath.runner.launch)."""
    n = out.size
    work = (n + chunk - 1) // chunk
    while True:
        w0 = claim(claims, step)
        if w0 >= work:
            break
        w1 = min(w0 + step, work)
        a = np.uint64(w0 * chunk)
        m = np.uint64(min(w1 * chunk, n) - w0 * chunk)
        for j in range(m):
            out[a + j] = _binary_op(x[a + j], y[a + j], p)
        finished(claims, w1 - w0)
    return finished(claims, 0)


def _binary_op(x, y, p):
    """ADD/SUB or MUL, chosen by the class of ``p``."""


# compiled once per record class, then always inlined by LLVM (forceinline): inlining the operation into
# the kernel's code (``inline="always"``) made numba type it anew in every kernel that calls it
@overload(_binary_op, jit_options={"fastmath": False, "error_model": "numpy", "forceinline": True})
def _ov_binary_op(x, y, p):
    if p.instance_class is AddSub:
        return lambda x, y, p: _add_sub(x, y, p)
    return lambda x, y, p: _mul(x, y, p)


binary = kernel(_binary_kernel)


# -- DEPTHWISE_CONV_2D ---------------------------------------------------------------------------------
def _depthwise_kernel(x, filt, bias, mult, shift, g, e, zx, out, claims, step):
    """out[n, oy, ox, ic*M + m] = requantize(Σ_taps (x - zx) · w[ky, kx, ic, m] + bias): taps outside
    the image are skipped (LiteRT's reference kernel); the sum is exact in int64 and wrapped to int32
    once, which is what the C++ int32 accumulator holds (addition modulo 2^32 is associative).
    Arrays are flat (NHWC order; the filter (KH, KW, I, M)); ``g``: (h, w, c, kh, kw, m, oh, ow, sh, sw,
    dh, dw, ph, pw)."""
    h, w, c, kh, kw, m, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    sh, sw, dh, dw, ph, pw = g[8], g[9], g[10], g[11], g[12], g[13]
    oc = c * m
    rows = out.size // (ow * oc)
    accs = np.empty(oc, np.int64)
    while True:
        r0 = claim(claims, step)
        if r0 >= rows:
            break
        r1 = min(r0 + step, rows)
        for row in range(r0, r1):
            _depthwise_row(x, filt, bias, mult, shift, e, zx, out, accs, row, h, w, c, kh, kw, m, oh, ow,
                           sh, sw, dh, dw, ph, pw)
        finished(claims, r1 - r0)
    return finished(claims, 0)


@inline
def _depthwise_row(x, filt, bias, mult, shift, e, zx, out, accs, row, h, w, c, kh, kw, m, oh, ow, sh, sw, dh, dw,
                   ph, pw):
    """One row (n, oy) of the output, every ox and channel."""
    oc = c * m
    b = row // oh
    oy = row - b * oh
    for ox in range(ow):
        for k in range(oc):
            accs[k] = bias[k]
        for ky in range(kh):
            iy = oy * sh - ph + ky * dh
            if iy < 0 or iy >= h:
                continue
            for kx in range(kw):
                ix = ox * sw - pw + kx * dw
                if ix < 0 or ix >= w:
                    continue
                xb = np.uint64(((b * h + iy) * w + ix) * c)
                fb = np.uint64((ky * kw + kx) * oc)
                if m == 1:
                    for ic in range(np.uint64(c)):
                        accs[ic] += (np.int64(x[xb + ic]) - zx) * filt[fb + ic]
                else:
                    for ic in range(np.uint64(c)):
                        v = np.int64(x[xb + ic]) - zx
                        for mm in range(np.uint64(m)):
                            accs[ic * np.uint64(m) + mm] += v * filt[fb + ic * np.uint64(m) + mm]
        ob = np.uint64((row * ow + ox) * oc)
        for k in range(np.uint64(oc)):
            v = wrap32(mbqm(wrap32(accs[k]), mult[k], shift[k]) + e.zero_point)
            out[ob + k] = np.int8(clamp(v, e.lo, e.hi))


depthwise = kernel(_depthwise_kernel)
