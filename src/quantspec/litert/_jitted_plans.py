"""numba kernels of the interpreter's run plans (see :mod:`.plans`).

Imported only through :func:`quantspec._fastpath.jit.load`.  Each kernel computes, element by element,
what a reference kernel of :mod:`quantspec.litert.kernels` computes with whole-array numpy
operations; the fixed-point building blocks are those of :mod:`._jitted` (gemmlowp's, on int64
values holding int32 ones).  They run on the calling thread: a mobile model's tensors are small,
and the interpreter runs them one after the other.
"""

from __future__ import annotations

import numpy as np

from .._fastpath.nbprim import kernel, shared
from ._jitted import I32_MAX, I32_MIN, clamp, mbqm, rdbpot, round_double, srdhm, wrap32

__all__ = ["epilogue", "im2col", "gather2", "binary", "mean", "softmax8", "depthwise_acc", "pool",
           "lut", "fc8", "gemm_rows", "resize8", "gather", "gather2_checked", "gather3", "gather2_lanes", "MBQM32",
           "MBQM64", "DOUBLE32", "DOUBLE64", "HALFUP32", "FP32"]

#: files besides this one and nbprim.py whose content the compiled kernels depend on (jit.py)
KERNEL_SOURCES = ("_jitted.py", "fast.py")

#: the requantizations of :func:`epilogue`: the accumulator wrapped to int32 then gemmlowp's
#: ``MultiplyByQuantizedMultiplier`` (CONV_2D, DEPTHWISE_CONV_2D, BATCH_MATMUL int8); the int64
#: accumulator and the int64 overload (the 16x8 kernels); the int32 accumulator and REF
#: FULLY_CONNECTED's ``int32(round(double(acc) * eff))``; the same on an int64 accumulator; the
#: optimized kernels' ``MultiplyByQuantizedMultiplier`` whose final shift rounds ties up (ruy, the
#: optimized CONV_2D and FULLY_CONNECTED); XNNPACK's float32 requantization
#: ``clamp(rint(f32(int32 acc) * f32 scale))`` (``eff`` holding the float32 scales)
MBQM32, MBQM64, DOUBLE32, DOUBLE64, HALFUP32, FP32 = 0, 1, 2, 3, 4, 5


@shared
def mbqm_half_up(x, m, s):
    """The optimized kernels' MultiplyByQuantizedMultiplier: ``x << max(s, 0)`` (int32, wrapping),
    SaturatingRoundingDoublingHighMul, then a right shift by ``max(-s, 0)`` rounding ties up."""
    left = s if s > 0 else np.int64(0)
    right = -s if s < 0 else np.int64(0)
    v = srdhm(wrap32(x << left), m)
    return (v + ((np.int64(1) << (right - 1)) if right > 0 else np.int64(0))) >> right


@shared
def requantize_fp32(acc, scale, zo, lo, hi):
    """XNNPACK: ``clamp(rint(f32(int32 acc) * scale), lo - zo, hi - zo) + zo`` (ties to even)."""
    v = np.float32(np.float32(np.int32(acc)) * np.float32(scale))
    v = min(max(v, np.float32(lo - zo)), np.float32(hi - zo))
    return np.int64(np.rint(v)) + zo


@shared
def _mbqm64(acc, m16, total):
    """``MultiplyByQuantizedMultiplier(int64 x, M, shift)``: ``m16`` the multiplier reduced to 16 bits,
    ``total = 15 - shift``; one rounding, half up, then the int32 cast."""
    return wrap32((acc * m16 + (np.int64(1) << (total - 1))) >> total)


def _epilogue(g, split, corr, mult, shift, eff, kind, zo, lo, hi, out):
    """out[r, c] = clamp(requantize(acc[r, c] + corr[c]) + zo) over flat (rows, cols) arrays: ``acc``
    the exact integer a GEMM left in ``g`` (float32 or float64 holding integers, or int64), or with
    ``split`` the int16 operand's two byte halves, ``256 * g[r] + g[rows + r]``; ``kind`` one of
    MBQM32, MBQM64, DOUBLE32, DOUBLE64, HALFUP32, FP32 (``mult``/``shift`` per channel for MBQM32,
    MBQM64 and HALFUP32, ``eff`` for the others).  One loop per kind, so that each loop has no branch on it."""
    cols = np.uint64(corr.size)
    n = np.uint64(out.size)
    rows = n // cols
    low = n if split else np.uint64(0)
    scale = np.int64(256) if split else np.int64(1)
    for r in range(rows):
        base = r * cols
        if kind == 0:
            for c in range(cols):
                acc = np.int64(g[base + c]) * scale + corr[c]
                if split:
                    acc += np.int64(g[low + base + c])
                out[base + c] = clamp(wrap32(mbqm(wrap32(acc), mult[c], shift[c]) + zo), lo, hi)
        elif kind == 1:
            for c in range(cols):
                acc = np.int64(g[base + c]) * scale + corr[c]
                if split:
                    acc += np.int64(g[low + base + c])
                out[base + c] = clamp(wrap32(_mbqm64(acc, mult[c], shift[c]) + zo), lo, hi)
        elif kind == 2:
            for c in range(cols):
                acc = np.int64(g[base + c]) * scale + corr[c]
                if split:
                    acc += np.int64(g[low + base + c])
                out[base + c] = clamp(wrap32(round_double(wrap32(acc), eff[c]) + zo), lo, hi)
        elif kind == 3:
            for c in range(cols):
                acc = np.int64(g[base + c]) * scale + corr[c]
                if split:
                    acc += np.int64(g[low + base + c])
                out[base + c] = clamp(wrap32(round_double(acc, eff[c]) + zo), lo, hi)
        elif kind == 4:
            for c in range(cols):
                acc = np.int64(g[base + c]) * scale + corr[c]
                if split:
                    acc += np.int64(g[low + base + c])
                out[base + c] = clamp(wrap32(mbqm_half_up(wrap32(acc), mult[c], shift[c]) + zo), lo, hi)
        else:
            for c in range(cols):
                acc = np.int64(g[base + c]) * scale + corr[c]
                if split:
                    acc += np.int64(g[low + base + c])
                out[base + c] = requantize_fp32(wrap32(acc), eff[c], zo, lo, hi)


epilogue = kernel(_epilogue)


def _lut(x, table, invalid, out):
    """out = table[x] (``x`` the codes' unsigned view, flat); returns 1 without finishing where an
    input's entry of ``invalid`` is set (a code on which LiteRT fails; an empty ``invalid``: none)."""
    check = invalid.size > 0
    for i in range(np.uint64(x.size)):
        u = x[i]
        if check and invalid[u]:
            return 1
        out[i] = table[u]
    return 0


lut = kernel(_lut)


def _im2col(x, g, pad, split, out):
    """The convolution windows of the flat NHWC ``x`` as the rows of the flat float32 matrix ``out``:
    row (b, oy, ox), column (ky, kx, c); a tap outside the image holds ``pad`` (the input zero
    point: LiteRT skips those taps, and ``(z - z) * w = 0``).  With ``split`` (int16 input, zero point
    0) the first half of the rows holds each value's high byte ``v >> 8`` and the second half its low
    byte ``v & 255`` (``v = 256 * high + low``).  ``g``: (h, w, c, kh, kw, oh, ow, sh, sw, dh, dw, ph,
    pw)."""
    h, w, c, kh, kw, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6]
    sh, sw, dh, dw, ph, pw = g[7], g[8], g[9], g[10], g[11], g[12]
    depth = kh * kw * c
    rows = out.size // depth // (2 if split else 1)
    low = np.uint64(rows * depth)
    uc = np.uint64(c)
    pix = oh * ow
    o = np.uint64(0)
    for row in range(rows):
        b = row // pix
        rem = row - b * pix
        oy = rem // ow
        ox = rem - oy * ow
        x0 = ox * sw - pw
        # the window's columns all inside the image, undilated: each of its rows is one run of
        # kw * c contiguous values (a few channels, as an RGB input's, make per-tap copies short)
        run = (dw == 1) & (x0 >= 0) & (x0 + kw <= w) & (not split)
        for ky in range(kh):
            iy = oy * sh - ph + ky * dh
            row_inside = (iy >= 0) & (iy < h)
            if run:
                n = np.uint64(kw) * uc
                if row_inside:
                    base = np.uint64(((b * h + iy) * w + x0) * c)
                    for j in range(n):
                        out[o + j] = np.float32(x[base + j])
                else:
                    for j in range(n):
                        out[o + j] = pad
                o += n
                continue
            for kx in range(kw):
                ix = ox * sw - pw + kx * dw
                if row_inside and (ix >= 0) and (ix < w):
                    base = np.uint64(((b * h + iy) * w + ix) * c)
                    if split:
                        for ch in range(uc):
                            v = np.int32(x[base + ch])
                            out[o + ch] = np.float32(v >> 8)
                            out[low + o + ch] = np.float32(v & 255)
                    else:
                        for ch in range(uc):
                            out[o + ch] = np.float32(x[base + ch])
                else:
                    for ch in range(uc):
                        out[o + ch] = pad
                    if split:
                        for ch in range(uc):
                            out[low + o + ch] = pad
                o += uc


im2col = kernel(_im2col)


def _depthwise_acc(x, filt, bias, g, zx, out):
    """DEPTHWISE_CONV_2D's exact accumulators as int64 (flat NHWC ``out``, the filter (KH, KW, I, M)
    flat): ``bias + Σ_taps (x - zx) · w`` over the taps inside the image.  ``g``: (h, w, c, kh, kw,
    m, oh, ow, sh, sw, dh, dw, ph, pw)."""
    h, w, c, kh, kw, m, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    sh, sw, dh, dw, ph, pw = g[8], g[9], g[10], g[11], g[12], g[13]
    oc = np.uint64(c * m)
    um = np.uint64(m)
    uc = np.uint64(c)
    rows = out.size // (ow * c * m)
    for row in range(rows):
        b = row // oh
        oy = row - b * oh
        for ox in range(ow):
            ob = np.uint64((row * ow + ox) * c * m)
            for k in range(oc):
                out[ob + k] = bias[k]
            for ky in range(kh):
                iy = oy * sh - ph + ky * dh
                if iy < 0 or iy >= h:
                    continue
                for kx in range(kw):
                    ix = ox * sw - pw + kx * dw
                    if ix < 0 or ix >= w:
                        continue
                    xb = np.uint64(((b * h + iy) * w + ix) * c)
                    fb = np.uint64((ky * kw + kx) * c * m)
                    if m == 1:
                        for ic in range(uc):
                            out[ob + ic] += (np.int64(x[xb + ic]) - zx) * filt[fb + ic]
                    else:
                        for ic in range(uc):
                            v = np.int64(x[xb + ic]) - zx
                            for mm in range(um):
                                out[ob + ic * um + mm] += v * filt[fb + ic * um + mm]


depthwise_acc = kernel(_depthwise_acc)


def _gather2(x, y, table, dims, xs, ys, out):
    """out = table[(x << 8) | y] over the four (collapsed) dimensions ``dims`` of the output, ``x``
    and ``y`` the inputs' codes as uint8 (flat), walked with the element strides ``xs`` and ``ys``
    (0 along a broadcast dimension)."""
    k = np.uint64(0)
    d3 = np.uint64(dims[3])
    x3, y3 = np.uint64(xs[3]), np.uint64(ys[3])
    for i0 in range(dims[0]):
        for i1 in range(dims[1]):
            bx1 = i0 * xs[0] + i1 * xs[1]
            by1 = i0 * ys[0] + i1 * ys[1]
            for i2 in range(dims[2]):
                bx = np.uint64(bx1 + i2 * xs[2])
                by = np.uint64(by1 + i2 * ys[2])
                for i3 in range(d3):
                    out[k + i3] = table[(np.uint64(x[bx + i3 * x3]) << np.uint64(8)) | np.uint64(y[by + i3 * y3])]
                k += d3


gather2 = kernel(_gather2)


def _gather2_lanes(x, y, tables, lanes, dims, xs, ys, out):
    """:func:`gather2` from one of several tables per output element: ``out[k] =
    tables[(lanes[k] << 16) | (x << 8) | y]`` (the optimized ADD / MUL, whose vector lanes and
    scalar tails compute differently)."""
    k = np.uint64(0)
    d3 = np.uint64(dims[3])
    x3, y3 = np.uint64(xs[3]), np.uint64(ys[3])
    for i0 in range(dims[0]):
        for i1 in range(dims[1]):
            bx1 = i0 * xs[0] + i1 * xs[1]
            by1 = i0 * ys[0] + i1 * ys[1]
            for i2 in range(dims[2]):
                bx = np.uint64(bx1 + i2 * xs[2])
                by = np.uint64(by1 + i2 * ys[2])
                for i3 in range(d3):
                    j = k + i3
                    out[j] = tables[(np.uint64(lanes[j]) << np.uint64(16))
                                    | (np.uint64(x[bx + i3 * x3]) << np.uint64(8)) | np.uint64(y[by + i3 * y3])]
                k += d3


gather2_lanes = kernel(_gather2_lanes)


@shared
def _binary_op(a, b, mul, q):
    """ADD / SUB (``mul`` false) or MUL of two codes, the reference kernels' arithmetic; ``q``: (z1,
    z2, left shift, m1, e1, m2, e2, mo, eo, sign, zo, lo, hi) (MUL: its multiplier in m1, e1)."""
    if mul:
        v = mbqm(wrap32((a - q[0]) * (b - q[1])), q[3], q[4])
    else:
        a2 = rdbpot(srdhm(wrap32((a - q[0]) << q[2]), q[3]), -q[4])
        b2 = rdbpot(srdhm(wrap32((b - q[1]) << q[2]), q[5]), -q[6])
        v = rdbpot(srdhm(wrap32(a2 + q[9] * b2), q[7]), -q[8])
    return clamp(wrap32(v + q[10]), q[11], q[12])


def _binary(x, y, dims, xs, ys, mul, q, out):
    """ADD / SUB / MUL over the broadcast inputs (walked as :func:`gather2` walks them), computed
    element by element (the int16 kernels, whose pairs of codes are too many for a table)."""
    k = np.uint64(0)
    d3 = np.uint64(dims[3])
    x3, y3 = np.uint64(xs[3]), np.uint64(ys[3])
    for i0 in range(dims[0]):
        for i1 in range(dims[1]):
            bx1 = i0 * xs[0] + i1 * xs[1]
            by1 = i0 * ys[0] + i1 * ys[1]
            for i2 in range(dims[2]):
                bx = np.uint64(bx1 + i2 * xs[2])
                by = np.uint64(by1 + i2 * ys[2])
                for i3 in range(d3):
                    out[k + i3] = _binary_op(np.int64(x[bx + i3 * x3]), np.int64(y[by + i3 * y3]), mul, q)
                k += d3


binary = kernel(_binary)


def _mean(x, outer, red, inner, n, zin, m, e, zo, lo, hi, out):
    """MEAN / SUM over the middle axis of ``x`` seen as (outer, red, inner): the int32 (wrapping) sum
    ``S`` of the values, then ``clamp(MBQM(int32(S - zin * n), m, e) + zo)``."""
    acc = np.zeros(inner, np.int64)
    for o in range(outer):
        for i in range(inner):
            acc[i] = 0
        for r in range(red):
            base = (o * red + r) * inner
            for i in range(inner):
                acc[i] += x[base + i]
        for i in range(inner):
            s = wrap32(wrap32(acc[i]) - zin * n)
            out[o * inner + i] = clamp(wrap32(mbqm(s, m, e) + zo), lo, hi)


mean = kernel(_mean)


# -- int8 SOFTMAX: gemmlowp's reciprocal (``GetReciprocal``) ---------------------------------------------
@shared
def _sat_shl(x, e):
    """SaturatingRoundingMultiplyByPOT<e> for e > 0: x * 2^e clamped to int32."""
    threshold = (np.int64(1) << (31 - e)) - 1
    if x > threshold:
        return np.int64(I32_MAX)
    if x < -threshold:
        return np.int64(I32_MIN)
    return x << e


@shared
def _clz32(u):
    """CountLeadingZeros of the uint32 ``u`` (held in an int64): 32 for 0."""
    n = np.int64(0)
    v = u
    if v == 0:
        return np.int64(32)
    while v < np.int64(1 << 31):
        v = v << 1
        n += 1
    return n


@shared
def _reciprocal(total, digits):
    """(shifted_scale, num_bits_over_unit) of ``GetReciprocal(total, digits)``."""
    u = total & np.int64(0xFFFFFFFF)
    headroom = _clz32(u)
    shifted = (u << headroom) & np.int64(0xFFFFFFFF)
    a = wrap32(shifted - np.int64(1 << 31))
    # one_over_one_plus_x_for_x_in_0_1: RoundingHalfSum(a, One), then Newton-Raphson
    s = a + np.int64(I32_MAX)
    t = s + (np.int64(1) if s >= 0 else np.int64(-1))
    half = (t + ((t >> 63) & np.int64(1))) >> 1
    x = wrap32(np.int64(1515870810) + srdhm(half, np.int64(-1010580540)))
    for _ in range(3):
        hx = srdhm(half, x)
        one_minus = wrap32(np.int64(1 << 29) - hx)
        x = wrap32(x + _sat_shl(srdhm(x, one_minus), np.int64(2)))
    return _sat_shl(x, np.int64(1)), digits - headroom


def _softmax8(x, rows, cols, exps, terms, diff_min, out):
    """int8 SOFTMAX over rows of ``cols`` (the reference kernel): per row the differences to its
    maximum, the sum of the tabled ``Rescale<12>(exp)`` terms, its reciprocal, each output
    ``RoundingDivideByPOT(SRDHM(recip, exp), exponent) - 128``.  Returns 1 where a row's exponent
    leaves [0, 31] (LiteRT aborts; the caller's reference path raises), else 0."""
    for r in range(rows):
        base = r * cols
        top = np.int64(-128)
        for j in range(cols):
            top = max(top, np.int64(x[base + j]))
        total = np.int64(0)
        for j in range(cols):
            d = np.int64(x[base + j]) - top
            if d >= diff_min:
                total += terms[d + 255]
        recip, over = _reciprocal(wrap32(total), np.int64(12))
        exponent = over + 31 - 8
        if exponent < 0 or exponent > 31:
            return 1
        for j in range(cols):
            d = np.int64(x[base + j]) - top
            if d >= diff_min:
                v = rdbpot(srdhm(recip, exps[d + 255]), exponent) - 128
                out[base + j] = min(max(v, np.int64(-128)), np.int64(127))
            else:
                out[base + j] = -128
    return 0


softmax8 = kernel(_softmax8)


def _pool(x, g, counts, average, lo, hi, out):
    """AVERAGE_POOL_2D / MAX_POOL_2D over the taps of each window inside the image (flat NHWC ``x``
    and ``out``): the C-division rounded mean ``(acc ± n/2) / n`` of the ``counts[oy, ox]`` taps, or
    the maximum (at least ``lo``, the type's smallest code), then the clamp [lo, hi].  ``g``: (n, h,
    w, c, kh, kw, oh, ow, sh, sw, ph, pw, type min)."""
    nb, h, w, c, kh, kw, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    sh, sw, ph, pw, tmin = g[8], g[9], g[10], g[11], g[12]
    acc = np.zeros(c, np.int64)
    for b in range(nb):
        for oy in range(oh):
            for ox in range(ow):
                for ch in range(c):
                    acc[ch] = 0 if average else tmin
                for ky in range(kh):
                    iy = oy * sh - ph + ky
                    if iy < 0 or iy >= h:
                        continue
                    for kx in range(kw):
                        ix = ox * sw - pw + kx
                        if ix < 0 or ix >= w:
                            continue
                        base = ((b * h + iy) * w + ix) * c
                        if average:
                            for ch in range(c):
                                acc[ch] += x[base + ch]
                        else:
                            for ch in range(c):
                                acc[ch] = max(acc[ch], np.int64(x[base + ch]))
                ob = ((b * oh + oy) * ow + ox) * c
                n = counts[oy * ow + ox]
                for ch in range(c):
                    v = acc[ch]
                    if average:
                        num = v + n // 2 if v > 0 else v - n // 2
                        q = abs(num) // n
                        v = -q if num < 0 else q
                    out[ob + ch] = min(max(v, lo), hi)


pool = kernel(_pool)



def _fc8(x, w, corr, eff, zo, lo, hi, acc, out):
    """int8 FULLY_CONNECTED of a small layer in one pass: ``out[r, c] = clamp(requantize(a) + zo)``
    with ``a`` the int32-wrapped exact ``sum_k x[r, k] * w[k, c] + corr[c]`` and REF
    FULLY_CONNECTED's ``int32(round(double(a) * eff[c]))`` (the :data:`DOUBLE32` epilogue); ``x``
    the input codes (flat, its first ``rows * depth`` values used), ``w`` the float32 weights (flat
    ``depth * units``), ``acc`` float32 scratch of ``units``, ``out`` flat (rows, units).  The sums
    run in float32 along the output channels (vectorized without reordering a sum), exact where the
    caller's bound keeps every partial sum within 2^24, as the float32 GEMM's."""
    units = corr.size
    depth = w.size // units
    rows = out.size // units
    for r in range(rows):
        xb = r * depth
        for c in range(units):
            acc[c] = 0.0
        for k in range(depth):
            xv = np.float32(x[xb + k])
            wb = k * units
            for c in range(units):
                acc[c] += xv * w[wb + c]
        ob = r * units
        for c in range(units):
            a = np.int64(acc[c]) + corr[c]
            out[ob + c] = clamp(wrap32(round_double(wrap32(a), eff[c]) + zo), lo, hi)


fc8 = kernel(_fc8)


def _gemm_rows(x, w, outer, corr, mult, shift, eff, kind, zo, lo, hi, out):
    """An int8 GEMM of few rows (a convolution of a tiny image, a FULLY_CONNECTED) over int8 weights:
    ``out[r, c] = clamp(requantize(a) + zo)``, ``a`` the int32-wrapped ``sum_k x[r, k] * w[k, c] +
    corr[c]`` and the requantization of :func:`epilogue`'s ``kind`` (MBQM32, DOUBLE32, HALFUP32 or
    FP32).  ``x`` the input codes (flat, its first ``rows * depth`` values); ``w`` the int8 weights,
    flat (depth, units) with ``outer`` (the sums run along the output channels: fewer input than
    output channels), else transposed, flat (units, depth) (one dot product per output).  The sums
    are int32, wrapping as the C++ int32 accumulator does (a sum modulo 2^32 in any order)."""
    units = corr.size
    depth = w.size // units
    rows = out.size // units
    acc = np.zeros(rows * units, np.int32)
    if outer:
        for r in range(rows):
            ab = r * units
            for k in range(depth):
                xv = np.int32(x[r * depth + k])
                wb = k * units
                for c in range(units):
                    acc[ab + c] = np.int32(acc[ab + c] + np.int32(xv * np.int32(w[wb + c])))
    else:
        for r in range(rows):
            xb = r * depth
            for c in range(units):
                wb = c * depth
                s = np.int32(0)
                for k in range(depth):
                    s = np.int32(s + np.int32(np.int32(x[xb + k]) * np.int32(w[wb + k])))
                acc[r * units + c] = s
    # the requantization, one loop per kind (no branch inside a loop)
    for r in range(rows):
        ob = r * units
        if kind == 4:
            for c in range(units):
                a = wrap32(np.int64(acc[ob + c]) + corr[c])
                out[ob + c] = clamp(wrap32(mbqm_half_up(a, mult[c], shift[c]) + zo), lo, hi)
        elif kind == 5:
            for c in range(units):
                out[ob + c] = requantize_fp32(wrap32(np.int64(acc[ob + c]) + corr[c]), eff[c], zo, lo, hi)
        elif kind == 0:
            for c in range(units):
                a = wrap32(np.int64(acc[ob + c]) + corr[c])
                out[ob + c] = clamp(wrap32(mbqm(a, mult[c], shift[c]) + zo), lo, hi)
        else:
            for c in range(units):
                a = wrap32(np.int64(acc[ob + c]) + corr[c])
                out[ob + c] = clamp(wrap32(round_double(a, eff[c]) + zo), lo, hi)


gemm_rows = kernel(_gemm_rows)


def _resize8(x, dims, y0, y1, wy0, wy1, x0, x1, wx0, wx1, out):
    """int8 RESIZE_BILINEAR (ResizeBilinearInteger): per output pixel the two rows ``y0``/``y1`` of
    the input with their Q10 weights, then the two columns, ``o = (t0 * wx0 + t1 * wx1)``, rounded
    half away from zero by 2^20 (C division); ``x`` flat NHWC, ``dims`` (n, h, w, c), ``out`` flat
    (n, oh, ow, c)."""
    n, h, w, c = dims[0], dims[1], dims[2], dims[3]
    oh, ow = y0.size, x0.size
    k = 0
    for b in range(n):
        for oy in range(oh):
            ra = (b * h + y0[oy]) * w * c
            rb = (b * h + y1[oy]) * w * c
            a0, a1 = wy0[oy], wy1[oy]
            for ox in range(ow):
                c0, c1 = x0[ox] * c, x1[ox] * c
                b0, b1 = wx0[ox], wx1[ox]
                for ch in range(c):
                    t0 = np.int64(x[ra + c0 + ch]) * a0 + np.int64(x[rb + c0 + ch]) * a1
                    t1 = np.int64(x[ra + c1 + ch]) * a0 + np.int64(x[rb + c1 + ch]) * a1
                    o = t0 * b0 + t1 * b1
                    r = o + (np.int64(1) << 19) if o > 0 else o - (np.int64(1) << 19)
                    q = (-r if r < 0 else r) >> 20
                    out[k] = np.int8(-q if r < 0 else q)
                    k += 1


resize8 = kernel(_resize8)


def _gather(x, pos, outer, size, inner, out):
    """GATHER along one axis (no batch dimensions): ``x`` flat (outer, size, inner), ``pos`` the flat
    positions, ``out`` flat (outer, positions, inner).  Returns 1 without writing where a position
    lies outside [0, size) (LiteRT fails; the caller's kernel raises), else 0."""
    n = pos.size
    for i in range(n):
        if pos[i] < 0 or pos[i] >= size:
            return 1
    for o in range(outer):
        for i in range(n):
            src = (o * size + np.int64(pos[i])) * inner
            dst = (o * n + i) * inner
            for j in range(inner):
                out[dst + j] = x[src + j]
    return 0


gather = kernel(_gather)


def _gather2_checked(x, y, table, bad, dims, xs, ys, out):
    """:func:`gather2` that first checks every pair against ``bad`` (65536 flags by pair index): 1
    without writing where a pair is marked (the caller's operators raise as LiteRT fails), else 0."""
    for pass_ in range(2):
        k = np.uint64(0)
        d3 = np.uint64(dims[3])
        x3, y3 = np.uint64(xs[3]), np.uint64(ys[3])
        for i0 in range(dims[0]):
            for i1 in range(dims[1]):
                bx1 = i0 * xs[0] + i1 * xs[1]
                by1 = i0 * ys[0] + i1 * ys[1]
                for i2 in range(dims[2]):
                    bx = np.uint64(bx1 + i2 * xs[2])
                    by = np.uint64(by1 + i2 * ys[2])
                    for i3 in range(d3):
                        j = (np.uint64(x[bx + i3 * x3]) << np.uint64(8)) | np.uint64(y[by + i3 * y3])
                        if pass_ == 0:
                            if bad[j]:
                                return 1
                        else:
                            out[k + i3] = table[j]
                    k += d3
    return 0


gather2_checked = kernel(_gather2_checked)


def _gather3(x, y, z, first, second, tpos, dims, xs, ys, zs, out):
    """Two pair tables in a row: ``t = first[(x << 8) | y]``, then ``second[(t << 8) | z]`` (``tpos``
    0) or ``second[(z << 8) | t]`` (``tpos`` 1), over the four (collapsed) dimensions ``dims`` of the
    output, each input walked with its element strides (0 along a broadcast dimension); the codes
    as uint8 (flat)."""
    k = np.uint64(0)
    d3 = np.uint64(dims[3])
    x3, y3, z3 = np.uint64(xs[3]), np.uint64(ys[3]), np.uint64(zs[3])
    e8 = np.uint64(8)
    for i0 in range(dims[0]):
        for i1 in range(dims[1]):
            bx1 = i0 * xs[0] + i1 * xs[1]
            by1 = i0 * ys[0] + i1 * ys[1]
            bz1 = i0 * zs[0] + i1 * zs[1]
            for i2 in range(dims[2]):
                bx = np.uint64(bx1 + i2 * xs[2])
                by = np.uint64(by1 + i2 * ys[2])
                bz = np.uint64(bz1 + i2 * zs[2])
                for i3 in range(d3):
                    t = np.uint64(np.uint8(first[(np.uint64(x[bx + i3 * x3]) << e8) | np.uint64(y[by + i3 * y3])]))
                    c = np.uint64(z[bz + i3 * z3])
                    out[k + i3] = second[(t << e8) | c] if tpos == 0 else second[(c << e8) | t]
                k += d3


gather3 = kernel(_gather3)
