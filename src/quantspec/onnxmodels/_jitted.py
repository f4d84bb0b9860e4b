"""numba kernels of the model converter (imported only through :func:`quantspec._fastpath.jit.load`).

:func:`transpose`: ``dst[...] = src.T`` for 2-D arrays of 1-, 2- or 4-byte elements (their bit
patterns, as unsigned integers); either array may be a strided view.  A square tile at a time is read
along the rows of ``src`` into a small buffer and written along the rows of ``dst``: both sides move
whole cache lines, and rows a power of two apart, which fall in one cache set, are never walked
across.  The numpy twin is :func:`quantspec.onnxmodels.encoder.transpose_into`.

:func:`nbits_fused`: MatMulNBits' block parameters and packed 4-bit codes of a weight's columns, with
MLAS's add-then-round, and the error sums, in one pass.  The numpy twin is
:func:`quantspec.onnxmodels.nbits.pack`.
"""

from __future__ import annotations

import numpy as np

from .._fastpath.nbprim import kernel

__all__ = ["transpose", "nbits_fused", "TILE", "NBITS_COLUMNS"]

TILE = 64


@kernel
def transpose(src, dst):
    rows, cols = src.shape
    buf = np.empty((TILE, TILE), src.dtype)
    for i0 in range(0, rows, TILE):
        i1 = min(i0 + TILE, rows)
        for j0 in range(0, cols, TILE):
            j1 = min(j0 + TILE, cols)
            for i in range(i0, i1):
                for j in range(j0, j1):
                    buf[j - j0, i - i0] = src[i, j]
            for j in range(j0, j1):
                for i in range(i0, i1):
                    dst[j, i] = buf[j - j0, i - i0]


#: columns of a weight quantized together by :func:`nbits_fused` (a block's rows of them are read whole)
NBITS_COLUMNS = 64


@kernel
def nbits_fused(w, c0, c1, block, symmetric, odd_tail, b, scales, zps, acc):
    """MatMulNBits' arrays for columns ``c0:c1`` of the float32 weight ``w`` ``[K, N]``, in one pass:
    each block's range as MLAS scans it (strict comparisons keep the first of equal values, so an
    all-zero block's range is its first element), its scale and zero point (``scales`` float32,
    ``zps`` uint8 ``[N, nb]``; the zero points are not written when ``symmetric``), and the codes
    ``clamp(roundf(x * (1 / scale) + zero point), 0, 15)`` in float32 (the zero point 8 when symmetric)
    packed two per byte into ``b`` ``[N, nb * block / 2]``, written whole (a last partial block padded
    with zeros; ``odd_tail``: the high nibble after an odd K repeats the code of element K - 2).
    ``acc`` float64 ``[3]``: sum (dq - x)^2, sum x^2, max |dq - x| added in.  Returns -1, or the flat
    index ``k * N + n`` of a NaN or infinity (then the arrays are incomplete).

    The loops run along a row of a tile of columns, one lane per column (the range, the codes and
    each column's error sums), which the compiler vectorizes; a column's nibbles are paired per row
    pair."""
    K, N = w.shape
    nb = scales.shape[1]
    C = NBITS_COLUMNS
    f0 = np.float32(0)
    f1 = np.float32(1)
    f15 = np.float32(15)
    half = np.float32(0.5)
    mn = np.empty(C, np.float32)
    mx = np.empty(C, np.float32)
    chk = np.empty(C, np.float32)
    recip = np.empty(C, np.float32)
    zf = np.empty(C, np.float32)
    sc = np.empty(C, np.float32)
    low = np.empty(C, np.uint8)
    code = np.empty(C, np.uint8)
    e2 = np.zeros(C, np.float64)
    x2 = np.zeros(C, np.float64)
    em = np.zeros(C, np.float64)
    for t0 in range(c0, c1, C):
        m = min(C, c1 - t0)
        for i in range(m):
            for q in range(b.shape[1]):
                b[t0 + i, q] = 0
        for j in range(nb):
            k0 = j * block
            k1 = min(k0 + block, K)
            for i in range(m):
                mn[i] = w[k0, t0 + i]
                mx[i] = w[k0, t0 + i]
                chk[i] = f0
            for k in range(k0, k1):
                for i in range(m):
                    v = w[k, t0 + i]
                    chk[i] += v * f0                  # NaN from here on if v is NaN or infinite
                    mn[i] = v if v < mn[i] else mn[i]
                    mx[i] = v if v > mx[i] else mx[i]
            for i in range(m):
                if chk[i] != f0:
                    for k in range(k0, k1):
                        if not np.isfinite(w[k, t0 + i]):
                            return k * N + t0 + i
            for i in range(m):
                lo = mn[i]
                hi = mx[i]
                if symmetric:
                    top = hi if abs(hi) > abs(lo) else lo
                    s = -top / np.float32(8)
                    z = np.float32(8)
                else:
                    if f0 < lo:
                        lo = f0
                    if hi < f0:
                        hi = f0
                    s = (hi - lo) / f15
                    zv = f0 - lo / s if s != 0 else lo
                    if zv < 0:
                        z = f0
                    elif zv > 15:
                        z = f15
                    else:
                        z = np.trunc(zv)
                        if zv - z >= half:
                            z += f1
                    zps[t0 + i, j] = np.uint8(z)
                scales[t0 + i, j] = s
                sc[i] = s
                recip[i] = f1 / s if s != 0 else f0
                zf[i] = z
            for k in range(k0, k1):
                for i in range(m):
                    xv = w[k, t0 + i]
                    v = xv * recip[i] + zf[i]
                    t = np.trunc(v)
                    t = t + f1 if v - t >= half else t
                    t = f0 if t < f0 else t
                    t = f15 if t > f15 else t
                    code[i] = np.uint8(t)
                    e = np.float64((t - zf[i]) * sc[i]) - np.float64(xv)
                    e2[i] += e * e
                    x2[i] += np.float64(xv) * np.float64(xv)
                    ae = abs(e)
                    em[i] = ae if ae > em[i] else em[i]
                if k & 1:
                    for i in range(m):
                        b[t0 + i, k >> 1] = low[i] | (code[i] << np.uint8(4))
                else:
                    for i in range(m):
                        low[i] = code[i]
            if (k1 - k0) & 1:                         # an odd last block: its last code alone in its byte
                for i in range(m):
                    b[t0 + i, (k1 - 1) >> 1] = low[i]
        if odd_tail:
            for i in range(m):
                b[t0 + i, K >> 1] |= (b[t0 + i, (K - 2) >> 1] >> np.uint8(4)) << np.uint8(4)
    s0 = 0.0
    s1 = 0.0
    mxe = acc[2]
    for i in range(C):
        s0 += e2[i]
        s1 += x2[i]
        mxe = em[i] if em[i] > mxe else mxe
    acc[0] += s0
    acc[1] += s1
    acc[2] = mxe
    return -1
