"""numba kernel of the interpreter's fused regions (see :mod:`.regions`): a run of plans executed as
one compiled loop over steps, on one byte arena.

Imported only through :func:`quantspec._fastpath.jit.load`.  Each step calls the plan kernel of
:mod:`._jitted_plans` its plan calls, with the same arguments, on slices of the arena; the two
operators whose plans call numpy (TRANSPOSE, BATCH_MATMUL) have their own kernels here, which
compute the same bytes: a copy in the permuted order, and the exact integer sums that the plan's
float32 GEMM holds exactly (the plan exists only where every partial sum is an integer float32
represents), requantized as the plan's epilogue does.
"""

from __future__ import annotations

import numpy as np

from .._fastpath.nbprim import kernel
from ._jitted import clamp, mbqm, wrap32
from ._jitted_modes import mean_spatial, reduce_fp32, resize_q11, softmax_table
from ._jitted_plans import fc8, gather2, gather2_checked, gather2_lanes, gather3, gemm_rows, lut, softmax8

__all__ = ["region", "permute", "scatter", "bmm8", "mean8", "resize8u", "PAIR", "PAIR_CHECKED", "CHAIN", "LUT", "MEAN", "FC",
           "PERMUTE", "BMM", "SOFTMAX", "SCATTER", "RESIZE", "GEMM_ROWS", "SOFTMAX_F32", "REDUCE_F32", "MEAN_SPATIAL",
           "PAIR_LANES", "RESIZE_Q11"]

#: files besides this one and nbprim.py whose content the compiled kernels depend on (jit.py)
KERNEL_SOURCES = ("_jitted_plans.py", "_jitted_modes.py", "_jitted.py", "fast.py")

#: the kinds of step (column 0 of a region's code); the last six are the optimized and XNNPACK
#: kernel modes' plans (:mod:`.modeplans`)
PAIR, PAIR_CHECKED, CHAIN, LUT, MEAN, FC, PERMUTE, BMM, SOFTMAX, SCATTER, RESIZE, GEMM_ROWS, SOFTMAX_F32, REDUCE_F32, \
    MEAN_SPATIAL, PAIR_LANES, RESIZE_Q11 = range(17)


def _permute(x, dims, strides, out):
    """``out`` (flat) = ``x`` read in the order of the output's (at most) four dimensions ``dims``,
    each with its element stride in ``x`` (a transposition's copy)."""
    k = np.uint64(0)
    d3 = np.uint64(dims[3])
    s0, s1, s2, s3 = np.uint64(strides[0]), np.uint64(strides[1]), np.uint64(strides[2]), np.uint64(strides[3])
    for i0 in range(np.uint64(dims[0])):
        for i1 in range(np.uint64(dims[1])):
            for i2 in range(np.uint64(dims[2])):
                b = i0 * s0 + i1 * s1 + i2 * s2
                if s3 == 1:
                    for i3 in range(d3):
                        out[k + i3] = x[b + i3]
                else:
                    for i3 in range(d3):
                        out[k + i3] = x[b + i3 * s3]
                k += d3


permute = kernel(_permute)


def _scatter(x, dims, strides, base, out):
    """``x`` (flat, in order) written into ``out`` at ``base`` plus, per element, its index along
    each of the four dimensions ``dims`` times that dimension's stride in ``out`` (a block of a
    concatenation's output, the inside of a padded one, or a whole copy)."""
    k = np.uint64(0)
    d3 = np.uint64(dims[3])
    s0, s1, s2, s3 = np.uint64(strides[0]), np.uint64(strides[1]), np.uint64(strides[2]), np.uint64(strides[3])
    ub = np.uint64(base)
    for i0 in range(np.uint64(dims[0])):
        for i1 in range(np.uint64(dims[1])):
            for i2 in range(np.uint64(dims[2])):
                b = ub + i0 * s0 + i1 * s1 + i2 * s2
                if s3 == 1:
                    for i3 in range(d3):
                        out[b + i3] = x[k + i3]
                else:
                    for i3 in range(d3):
                        out[b + i3 * s3] = x[k + i3]
                k += d3


scatter = kernel(_scatter)


def _bmm8(a, b, g, zl, zr, mult, shift, zo, lo, hi, out):
    """int8 BATCH_MATMUL: per batch ``i`` of the output (offsets ``g[7 + 2 i]`` and ``g[8 + 2 i]`` into
    ``a`` and ``b``), ``acc[r, c] = sum_k (a[r, k] - zl) * (b[k, c] - zr)``, then
    ``clamp(MBQM(int32(acc), mult[c], shift[c]) + zo)`` (the plan's MBQM32 epilogue, no bias);
    ``g``: (rows, cols, depth, a's row and depth strides, b's depth and column strides, offsets...).
    The sums run in float32, as the plan's GEMM: exact, since the plan exists only where the depth
    times the operands' largest magnitudes is within 2^24 (every partial sum, in any order, is an
    integer float32 represents)."""
    rows, cols, depth = np.uint64(g[0]), np.uint64(g[1]), np.uint64(g[2])
    sam, sak, sbk, sbn = np.uint64(g[3]), np.uint64(g[4]), np.uint64(g[5]), np.uint64(g[6])
    nb = (g.size - 7) // 2
    bt = np.empty(depth * cols, np.float32)
    acc = np.empty(cols, np.float32)
    fl, fr = np.float32(zl), np.float32(zr)
    k = np.uint64(0)
    for bi in range(nb):
        ao = np.uint64(g[7 + 2 * bi])
        bo = np.uint64(g[8 + 2 * bi])
        for d in range(depth):
            for c in range(cols):
                bt[d * cols + c] = np.float32(b[bo + d * sbk + c * sbn]) - fr
        for r in range(rows):
            for c in range(cols):
                acc[c] = 0.0
            for d in range(depth):
                av = np.float32(a[ao + r * sam + d * sak]) - fl
                base = d * cols
                for c in range(cols):
                    acc[c] += av * bt[base + c]
            for c in range(cols):
                out[k + c] = clamp(wrap32(mbqm(wrap32(np.int64(acc[c])), mult[c], shift[c]) + zo), lo, hi)
            k += cols


bmm8 = kernel(_bmm8)


def _resize8u(x, dims, y0, y1, wy0, wy1, x0, x1, wx0, wx1, out):
    """int8 RESIZE_BILINEAR, the plan's kernel (:func:`~._jitted_plans.resize8`) step for step with
    unsigned indices (no negative-index checks in the loops): per output pixel the rows ``y0``/``y1``
    with their Q10 weights, then the columns, ``o = t0 * wx0 + t1 * wx1``, rounded half away from
    zero by 2^20."""
    n, h, w, c = np.uint64(dims[0]), np.uint64(dims[1]), np.uint64(dims[2]), np.uint64(dims[3])
    oh, ow = np.uint64(y0.size), np.uint64(x0.size)
    half = np.int64(1) << 19
    k = np.uint64(0)
    for b in range(n):
        for oy in range(oh):
            ra = (b * h + np.uint64(y0[oy])) * w * c
            rb = (b * h + np.uint64(y1[oy])) * w * c
            a0, a1 = wy0[oy], wy1[oy]
            for ox in range(ow):
                c0 = np.uint64(x0[ox]) * c
                c1 = np.uint64(x1[ox]) * c
                b0, b1 = wx0[ox], wx1[ox]
                for ch in range(c):
                    t0 = np.int64(x[ra + c0 + ch]) * a0 + np.int64(x[rb + c0 + ch]) * a1
                    t1 = np.int64(x[ra + c1 + ch]) * a0 + np.int64(x[rb + c1 + ch]) * a1
                    o = t0 * b0 + t1 * b1
                    r = o + half if o > 0 else o - half
                    q = (-r if r < 0 else r) >> 20
                    out[k + ch] = np.int8(-q if r < 0 else q)
                k += c


resize8u = kernel(_resize8u)


def _mean8(x, outer, red, inner, n, zin, m, e, zo, lo, hi, out):
    """MEAN / SUM over the middle axis of ``x`` seen as (outer, red, inner), as the plan's kernel
    (:func:`~._jitted_plans.mean`): the exact sum ``S`` of the values, then
    ``clamp(MBQM(int32(int32(S) - zin * n), m, e) + zo)``; no scratch."""
    uo, ur, ui = np.uint64(outer), np.uint64(red), np.uint64(inner)
    for o in range(uo):
        for i in range(ui):
            acc = np.int64(0)
            base = o * ur * ui + i
            if ui == 1:
                for r in range(ur):
                    acc += np.int64(x[base + r])
            else:
                for r in range(ur):
                    acc += np.int64(x[base + r * ui])
            s = wrap32(wrap32(acc) - zin * n)
            out[o * ui + i] = clamp(wrap32(mbqm(s, m, e) + zo), lo, hi)


mean8 = kernel(_mean8)


def _region(code, a8, cb, src, dst):
    """Run the steps of ``code`` on the byte arena ``a8``.  Row 0 of ``code`` places the region's
    constant arrays in the byte buffer ``cb``: (offset, length) of ``ip`` (int64 parameters), ``t8``
    (int8 tables), ``tb`` (flags), ``f32`` and ``f64``, each at an offset that is a multiple of 8,
    then the arena offsets of the region's first input and first output; each later row is a step:
    kind, output offset and size, three inputs' offsets and sizes, and the offsets of its parameters
    in those arrays.  ``src`` (the first input's bytes, flat) is copied into the arena first and the
    first output's bytes into ``dst`` last (a caller that places the tensors itself passes empty
    arrays).  Returns 0, or the row of the step whose kernel found a case its plan defers (a code
    LiteRT fails on, a row whose reciprocal LiteRT aborts on): nothing after it ran, and ``dst`` is
    not written."""
    u8 = a8.view(np.uint8)
    h = code[0]
    xo = np.uint64(h[10])
    for i in range(np.uint64(src.size)):         # unsigned indices: no negative-index checks
        a8[xo + i] = src[i]
    ip = cb[h[0]:h[0] + 8 * h[1]].view(np.int64)
    t8 = cb[h[2]:h[2] + h[3]].view(np.int8)
    tb = cb[h[4]:h[4] + h[5]].view(np.bool_)
    f32 = cb[h[6]:h[6] + 4 * h[7]].view(np.float32)
    f64 = cb[h[8]:h[8] + 8 * h[9]].view(np.float64)
    for s in range(1, code.shape[0]):
        kind = code[s, 0]
        o, on = code[s, 1], code[s, 2]
        x, xn = code[s, 3], code[s, 4]
        y, yn = code[s, 5], code[s, 6]
        z, zn = code[s, 7], code[s, 8]
        p, t, tn, m, mn, f, fn = code[s, 9], code[s, 10], code[s, 11], code[s, 12], code[s, 13], code[s, 14], \
            code[s, 15]
        out = a8[o:o + on]
        if kind == PAIR:
            gather2(u8[x:x + xn], u8[y:y + yn], t8[t:t + tn], ip[p:p + 4], ip[p + 4:p + 8], ip[p + 8:p + 12], out)
        elif kind == PAIR_CHECKED:
            if gather2_checked(u8[x:x + xn], u8[y:y + yn], t8[t:t + tn], tb[m:m + mn], ip[p:p + 4],
                               ip[p + 4:p + 8], ip[p + 8:p + 12], out):
                return s
        elif kind == CHAIN:
            half = tn // 2
            gather3(u8[x:x + xn], u8[y:y + yn], u8[z:z + zn], t8[t:t + half], t8[t + half:t + tn], ip[p + 16],
                    ip[p:p + 4], ip[p + 4:p + 8], ip[p + 8:p + 12], ip[p + 12:p + 16], out)
        elif kind == LUT:
            if lut(u8[x:x + xn], t8[t:t + tn], tb[m:m + mn], out):
                return s
        elif kind == MEAN:
            if ip[p + 10] != 0:
                mean8(u8[x:x + xn], ip[p], ip[p + 1], ip[p + 2], ip[p + 3], ip[p + 4], ip[p + 5], ip[p + 6], ip[p + 7],
                     ip[p + 8], ip[p + 9], out)
            else:
                mean8(a8[x:x + xn], ip[p], ip[p + 1], ip[p + 2], ip[p + 3], ip[p + 4], ip[p + 5], ip[p + 6], ip[p + 7],
                     ip[p + 8], ip[p + 9], out)
        elif kind == FC:
            units = ip[p + 3]
            fc8(a8[x:x + xn], f32[f:f + fn], ip[p + 4:p + 4 + units], f64[m:m + units], ip[p], ip[p + 1], ip[p + 2],
                np.empty(units, np.float32), out)
        elif kind == PERMUTE:
            permute(a8[x:x + xn], ip[p:p + 4], ip[p + 4:p + 8], out)
        elif kind == BMM:
            cols, gl = ip[p + 5], ip[p + 6]
            q = p + 7 + gl
            bmm8(a8[x:x + xn], a8[y:y + yn], ip[p + 7:q], ip[p], ip[p + 1], ip[q:q + cols], ip[q + cols:q + 2 * cols],
                 ip[p + 2], ip[p + 3], ip[p + 4], out)
        elif kind == SCATTER:
            scatter(a8[x:x + xn], ip[p:p + 4], ip[p + 4:p + 8], ip[p + 8], a8[o:o + on])
        elif kind == RESIZE:
            oh, ow = ip[p + 4], ip[p + 5]
            q = p + 6
            r = q + 4 * oh
            resize8u(a8[x:x + xn], ip[p:p + 4], ip[q:q + oh], ip[q + oh:q + 2 * oh], ip[q + 2 * oh:q + 3 * oh],
                    ip[q + 3 * oh:r], ip[r:r + ow], ip[r + ow:r + 2 * ow], ip[r + 2 * ow:r + 3 * ow],
                    ip[r + 3 * ow:r + 4 * ow], out)
        elif kind == GEMM_ROWS:
            units = ip[p + 4]
            q = p + 5
            gemm_rows(a8[x:x + xn], t8[t:t + tn], ip[q + 3 * units] != 0, ip[q:q + units], ip[q + units:q + 2 * units],
                      ip[q + 2 * units:q + 3 * units], f64[m:m + mn], ip[p + 3], ip[p], ip[p + 1], ip[p + 2], out)
        elif kind == SOFTMAX_F32:
            softmax_table(a8[x:x + xn], ip[p], f32[f:f + fn - 1], f32[f + fn - 1], ip[p + 1], out)
        elif kind == REDUCE_F32:
            reduce_fp32(a8[x:x + xn], ip[p], ip[p + 1], ip[p + 2], f32[f], f32[f + 1], out)
        elif kind == MEAN_SPATIAL:
            mean_spatial(a8[x:x + xn], ip[p], ip[p + 1], ip[p + 2], ip[p + 3], ip[p + 4], t8[t:t + tn], ip[p + 5], out)
        elif kind == PAIR_LANES:
            gather2_lanes(u8[x:x + xn], u8[y:y + yn], t8[t:t + tn], t8[m:m + mn], ip[p:p + 4], ip[p + 4:p + 8],
                          ip[p + 8:p + 12], out)
        elif kind == RESIZE_Q11:
            oh, ow = ip[p + 4], ip[p + 5]
            q = p + 6
            r = q + 3 * oh
            resize_q11(a8[x:x + xn], ip[p:p + 4], ip[q:q + oh], ip[q + oh:q + 2 * oh], ip[q + 2 * oh:r], ip[r:r + ow],
                       ip[r + ow:r + 2 * ow], ip[r + 2 * ow:r + 3 * ow], out)
        elif kind == SOFTMAX:
            if softmax8(a8[x:x + xn], ip[p], ip[p + 1], ip[p + 4:p + 4 + ip[p + 3]],
                        ip[p + 4 + ip[p + 3]:p + 4 + 2 * ip[p + 3]], ip[p + 2], out):
                return s
    yo = np.uint64(h[11])
    for i in range(np.uint64(dst.size)):
        dst[i] = a8[yo + i]
    return 0


region = kernel(_region)
