"""numba kernels of the optimized and XNNPACK kernel modes (the fast path; see :mod:`.modefast`).

Imported only through :func:`quantspec._fastpath.jit.load`.  Each computes, element by element, what
the numpy code of :mod:`quantspec.litert.kernels.optimized` and :mod:`quantspec.litert.kernels.xnnpack`
computes with whole-array operations; ``tests/test_litert_modes_kernels.py`` proves both equal.
Each claims rows of its output a few at a time (``nbprim.claim``), so that one compiled function runs
on the calling thread alone or on quantspec's thread pool (:func:`quantspec._fastpath.runner.launch`).
"""

from __future__ import annotations

import numpy as np

from .._fastpath.nbprim import claim, cvtt_int32, finished, inline, kernel, round_half_away
from ._jitted import rdbpot, srdhm, wrap32

__all__ = ["requantize_channels", "requantize_fp32", "depthwise_accumulate", "depthwise_mode", "mean_spatial",
           "reduce_fp32", "softmax_table", "quantize_lanes", "quantize_xnn",
           "resize_q11"]

#: files besides this one and nbprim.py whose content the compiled kernels depend on (jit.py)
KERNEL_SOURCES = ("_jitted.py", "fast.py")


@inline
def _requantize(acc, m, s, half_up):
    left = s if s > 0 else np.int64(0)
    right = -s if s < 0 else np.int64(0)
    v = srdhm(wrap32(acc << left), m)
    if half_up:
        return (v + ((np.int64(1) << (right - 1)) if right > 0 else np.int64(0))) >> right
    return rdbpot(v, right)


def _requantize_channels(acc, mult, shift, zp, lo, hi, vector, out, claims, step):
    """out[r, c] = clamp(requantize(acc[r, c]) + zp): the channels below ``vector`` round the final
    shift's ties up (the optimized kernels), the others away from zero (the reference)."""
    rows, channels = acc.shape
    while True:
        r0 = claim(claims, step)
        if r0 >= rows:
            break
        r1 = min(r0 + step, rows)
        for r in range(r0, r1):
            for c in range(channels):
                v = _requantize(wrap32(np.int64(acc[r, c])), mult[c], shift[c], c < vector)
                v = wrap32(v + zp)
                out[r, c] = np.int8(min(max(v, np.int64(lo)), np.int64(hi)))
        finished(claims, r1 - r0)
    return finished(claims, 0)


requantize_channels = kernel(_requantize_channels)


def _requantize_fp32(acc, scale, zp, lo, hi, out, claims, step):
    """XNNPACK: out[r, c] = clamp(rint(f32(acc) * scale[c]) + zp)."""
    rows, channels = acc.shape
    flo = np.float32(lo - zp)
    fhi = np.float32(hi - zp)
    while True:
        r0 = claim(claims, step)
        if r0 >= rows:
            break
        r1 = min(r0 + step, rows)
        for r in range(r0, r1):
            for c in range(channels):
                v = np.float32(np.float32(np.int32(acc[r, c])) * scale[c])
                v = min(max(v, flo), fhi)
                out[r, c] = np.int8(np.int64(np.rint(v)) + zp)
        finished(claims, r1 - r0)
    return finished(claims, 0)


requantize_fp32 = kernel(_requantize_fp32)


def _depthwise_accumulate(x, filt, bias, g, zx, out, claims, step):
    """int32 DEPTHWISE_CONV_2D accumulators (flat NHWC out, filter (KH, KW, I, M) flat): the taps
    inside the image, the bias, the int32 wrap; work items are the output rows (n, oy)."""
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
                        xb = ((b * h + iy) * w + ix) * c
                        fb = (ky * kw + kx) * oc
                        for ic in range(c):
                            v = np.int64(x[xb + ic]) - zx
                            for mm in range(m):
                                accs[ic * m + mm] += v * filt[fb + ic * m + mm]
                ob = (row * ow + ox) * oc
                for k in range(oc):
                    out[ob + k] = np.int32(accs[k])
        finished(claims, r1 - r0)
    return finished(claims, 0)


depthwise_accumulate = kernel(_depthwise_accumulate)


def _depthwise_mode(x, filt, bias, mult, shift, scale, vec, g, kind, zx, zo, lo, hi, out, claims, step):
    """DEPTHWISE_CONV_2D of the optimized (``kind`` 0) or XNNPACK (``kind`` 1) mode in one pass: the
    int32 accumulators of :func:`depthwise_accumulate`, then per output channel ``k`` the optimized
    kernel's requantization (``vec[k]``: the vector loop's half-up rounding, else the reference
    one) or XNNPACK's float32 one (``scale[k]``), the zero point and the clamp."""
    h, w, c, kh, kw, m, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    sh, sw, dh, dw, ph, pw = g[8], g[9], g[10], g[11], g[12], g[13]
    oc = c * m
    rows = out.size // (ow * oc)
    # int32 accumulators, each sum wrapping as the C++ int32 one does (addition modulo 2^32 in any
    # order): twice the lanes of int64 ones
    accs = np.empty(oc, np.int32)
    z32 = np.int32(zx)
    flo = np.float32(lo - zo)
    fhi = np.float32(hi - zo)
    while True:
        r0 = claim(claims, step)
        if r0 >= rows:
            break
        r1 = min(r0 + step, rows)
        for row in range(r0, r1):
            b = row // oh
            oy = row - b * oh
            for ox in range(ow):
                for k in range(np.uint64(oc)):
                    accs[k] = np.int32(bias[k])
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
                                accs[ic] = np.int32(accs[ic] + np.int32((np.int32(x[xb + ic]) - z32) * filt[fb + ic]))
                        else:
                            for ic in range(np.uint64(c)):
                                v = np.int32(np.int32(x[xb + ic]) - z32)
                                for mm in range(np.uint64(m)):
                                    j = ic * np.uint64(m) + mm
                                    accs[j] = np.int32(accs[j] + np.int32(v * filt[fb + j]))
                ob = np.uint64((row * ow + ox) * oc)
                if kind == 0:
                    for k in range(np.uint64(oc)):
                        v = _requantize(wrap32(accs[k]), mult[k], shift[k], vec[k] != 0)
                        v = wrap32(v + zo)
                        out[ob + k] = np.int8(min(max(v, np.int64(lo)), np.int64(hi)))
                else:
                    for k in range(np.uint64(oc)):
                        f = np.float32(np.float32(np.int32(wrap32(accs[k]))) * scale[k])
                        f = min(max(f, flo), fhi)
                        out[ob + k] = np.int8(np.int64(np.rint(f)) + zo)
        finished(claims, r1 - r0)
    return finished(claims, 0)


depthwise_mode = kernel(_depthwise_mode)


def _mean_spatial(x, n, hw, depth, mult, shift, vec, bias, out):
    """The optimized MEAN over the two spatial axes of int8 (N, H, W, C) (``x`` flat): per image and
    channel the int32 sum ``S`` of the raw codes, then ``clamp(requantize(S) + bias)`` with the
    vector loop's half-up rounding where ``vec[c]``, else the reference one."""
    acc = np.zeros(depth, np.int32)             # int32 sums, wrapping as the C++ ones do
    for b in range(n):
        for c in range(depth):
            acc[c] = 0
        base = b * hw * depth
        for i in range(hw):
            ib = np.uint64(base + i * depth)
            for c in range(np.uint64(depth)):
                acc[c] = np.int32(acc[c] + np.int32(x[ib + c]))
        for c in range(depth):
            v = _requantize(np.int64(acc[c]), mult, shift, vec[c] != 0)
            v = wrap32(v + bias)
            out[b * depth + c] = np.int8(min(max(v, np.int64(-128)), np.int64(127)))


mean_spatial = kernel(_mean_spatial)


def _reduce_fp32(x, outer, red, inner, scale, zp, out):
    """XNNPACK's MEAN / SUM over the middle axis of int8 ``x`` seen as (outer, red, inner): the int32
    sum ``S`` of the raw codes, then ``clamp(rint(f32(f32(S) * scale) + zp), -128, 127)`` (a NaN
    becomes 0)."""
    acc = np.zeros(inner, np.int32)             # int32 sums, wrapping as the C++ ones do
    for o in range(outer):
        for i in range(inner):
            acc[i] = 0
        base = o * red * inner
        for r in range(red):
            rb = np.uint64(base + r * inner)
            for i in range(np.uint64(inner)):
                acc[i] = np.int32(acc[i] + np.int32(x[rb + i]))
        for i in range(inner):
            v = np.float32(np.float32(np.float32(acc[i]) * scale) + zp)
            if np.isnan(v):
                v = np.float32(0)
            v = min(max(np.rint(v), np.float32(-128)), np.float32(127))
            out[o * inner + i] = np.int8(v)


reduce_fp32 = kernel(_reduce_fp32)


def _softmax_table(x, cols, table, so, zo, out):
    """The optimized int8 SOFTMAX over rows of ``cols`` codes (``x`` flat): per row ``e_j =
    table[255 - max + x_j]``, their float32 sum in order, ``inv = f32(1) / f32(sum * so)``, then
    ``clamp(wrap32(int32(roundf(f32(e_j * inv))) + zo))`` (a NaN or out-of-int32 value: INT32_MIN,
    as x86 converts it)."""
    rows = x.size // cols
    for r in range(rows):
        b = r * cols
        top = np.int64(-128)
        for j in range(cols):
            v = np.int64(x[b + j])
            if v > top:
                top = v
        total = np.float32(0)
        for j in range(cols):
            total = np.float32(total + table[255 - top + np.int64(x[b + j])])
        inv = np.float32(np.float32(1) / np.float32(total * so))
        for j in range(cols):
            prob = np.float32(table[255 - top + np.int64(x[b + j])] * inv)
            q = wrap32(np.int64(cvtt_int32(round_half_away(prob))) + zo)
            out[b + j] = np.int8(min(max(q, np.int64(-128)), np.int64(127)))


softmax_table = kernel(_softmax_table)


_TWO31 = np.float32(2.0 ** 31)


def _quantize_lanes(x, n, inverse, zp, lo, hi, out):
    """The optimized float32 QUANTIZE's vector blocks, on the first ``n`` values: ``rint(f32(x *
    inverse))`` (ties to even; NaN and values beyond int32: INT32_MIN), plus the zero point (int32,
    wrapping), clamped."""
    for i in range(n):
        r = np.rint(np.float32(x[i] * inverse))
        q = np.int64(r) if (r >= -_TWO31) & (r < _TWO31) else np.int64(-2147483648)
        q = wrap32(q + zp)
        out[i] = min(max(q, lo), hi)


quantize_lanes = kernel(_quantize_lanes)


def _quantize_xnn(x, inverse, zp, out):
    """XNNPACK's float32 -> int8 QUANTIZE: ``rint(min(f32(x * inverse), 32767))`` (NaN: 32767), held
    in int16, plus the zero point (saturating), then saturated to int8."""
    for i in range(x.size):
        v = np.float32(x[i] * inverse)
        v = np.float32(32767) if np.isnan(v) else min(v, np.float32(32767))
        r = np.rint(v)
        q = np.int64(-2147483648) if r < -_TWO31 else np.int64(r)
        q = min(max(q, np.int64(-32768)), np.int64(32767))
        q = min(max(q + zp, np.int64(-32768)), np.int64(32767))
        out[i] = np.int8(min(max(q, np.int64(-128)), np.int64(127)))


quantize_xnn = kernel(_quantize_xnn)


def _resize_q11(x, dims, y0, y1, ay, x0, x1, ax, out):
    """XNNPACK's int8 RESIZE_BILINEAR (``s8-ibilinear``): per output pixel the four source pixels of
    the precomputed positions, ``t = tl·2048 + (tr - tl)·ax``, ``b = bl·2048 + (br - bl)·ax``, then
    ``(t·2048 + (b - t)·ay + 2^21) >> 22``; ``dims``: (n, h, w, c), ``x`` and ``out`` flat NHWC."""
    n, h, w, c = dims[0], dims[1], dims[2], dims[3]
    oh, ow = y0.size, x0.size
    o = np.uint64(0)
    for b in range(n):
        for oy in range(oh):
            r0 = np.uint64((b * h + y0[oy]) * w)
            r1 = np.uint64((b * h + y1[oy]) * w)
            wy = ay[oy]
            for ox in range(ow):
                c0 = np.uint64(x0[ox])
                c1 = np.uint64(x1[ox])
                wx = ax[ox]
                tl = (r0 + c0) * np.uint64(c)
                tr = (r0 + c1) * np.uint64(c)
                bl = (r1 + c0) * np.uint64(c)
                br = (r1 + c1) * np.uint64(c)
                for ch in range(np.uint64(c)):
                    a = np.int64(x[tl + ch])
                    t = (a << 11) + (np.int64(x[tr + ch]) - a) * wx
                    d = np.int64(x[bl + ch])
                    bb = (d << 11) + (np.int64(x[br + ch]) - d) * wx
                    out[o + ch] = np.int8(((t << 11) + (bb - t) * wy + (np.int64(1) << 21)) >> 22)
                o += np.uint64(c)


resize_q11 = kernel(_resize_q11)
