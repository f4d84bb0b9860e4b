"""numba kernels of the optimized and XNNPACK kernel modes (the fast path; see :mod:`.modefast`).

Imported only through :func:`quantspec._core.jit.load`.  Each computes, element by element, what
the numpy code of :mod:`quantspec.litert.kernels.optimized` and :mod:`quantspec.litert.kernels.xnnpack`
computes with whole-array operations; ``tests/test_litert_modes_kernels.py`` proves both equal.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .._core.nbprim import inline, twin

__all__ = ["requantize_channels", "requantize_fp32", "depthwise_accumulate"]

_I32_MIN = -2147483648
_I32_MAX = 2147483647


@inline
def _wrap32(v):
    return np.int64(np.int32(v))


@inline
def _srdhm(a, b):
    ab = a * b
    n = ab + (np.int64(1 << 30) if ab >= 0 else np.int64(1 - (1 << 30)))
    q = (n + ((n >> 63) & np.int64((1 << 31) - 1))) >> 31
    return np.int64(_I32_MAX) if (a == _I32_MIN) & (b == _I32_MIN) else q


@inline
def _rdbpot(x, e):
    mask = (np.int64(1) << e) - 1
    threshold = (mask >> 1) + (np.int64(1) if x < 0 else np.int64(0))
    return (x >> e) + (np.int64(1) if (x & mask) > threshold else np.int64(0))


@inline
def _requantize(acc, m, s, half_up):
    left = s if s > 0 else np.int64(0)
    right = -s if s < 0 else np.int64(0)
    v = _srdhm(_wrap32(acc << left), m)
    if half_up:
        return (v + ((np.int64(1) << (right - 1)) if right > 0 else np.int64(0))) >> right
    return _rdbpot(v, right)


def _requantize_channels(acc, mult, shift, zp, lo, hi, vector, out):
    """out[r, c] = clamp(requantize(acc[r, c]) + zp): the channels below ``vector`` round the final
    shift's ties up (the optimized kernels), the others away from zero (the reference)."""
    rows, channels = acc.shape
    for r in prange(rows):
        for c in range(channels):
            v = _requantize(_wrap32(np.int64(acc[r, c])), mult[c], shift[c], c < vector)
            v = _wrap32(v + zp)
            out[r, c] = np.int8(min(max(v, np.int64(lo)), np.int64(hi)))


requantize_channels = twin(_requantize_channels)


def _requantize_fp32(acc, scale, zp, lo, hi, out):
    """XNNPACK: out[r, c] = clamp(rint(f32(acc) * scale[c]) + zp)."""
    rows, channels = acc.shape
    flo = np.float32(lo - zp)
    fhi = np.float32(hi - zp)
    for r in prange(rows):
        for c in range(channels):
            v = np.float32(np.float32(np.int32(acc[r, c])) * scale[c])
            v = min(max(v, flo), fhi)
            out[r, c] = np.int8(np.int64(np.rint(v)) + zp)


requantize_fp32 = twin(_requantize_fp32)


def _depthwise_accumulate(x, filt, bias, g, zx, out):
    """int32 DEPTHWISE_CONV_2D accumulators (flat NHWC out, filter (KH, KW, I, M) flat): the taps
    inside the image, the bias, the int32 wrap."""
    h, w, c, kh, kw, m, oh, ow = g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]
    sh, sw, dh, dw, ph, pw = g[8], g[9], g[10], g[11], g[12], g[13]
    oc = c * m
    rows = out.size // (ow * oc)
    for row in prange(rows):
        b = row // oh
        oy = row - b * oh
        accs = np.empty(oc, np.int64)
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


depthwise_accumulate = twin(_depthwise_accumulate)
