"""numba kernels of the calibration observers (imported through :func:`quantspec._fastpath.jit.load`).

- :func:`ort_min_max`: onnxruntime's ``ReduceMin`` / ``ReduceMax`` over a whole float32 tensor, which
  its CPU kernel computes with Eigen's ``minCoeff`` / ``maxCoeff`` (SSE, packets of 4): four lanes
  (two sets of four in the main loop, merged), each keeping its value unless the next one is
  smaller (larger) — so a NaN that starts a lane stays, a NaN met later is passed over — then the
  lanes folded ``(0, 2), (1, 3)``, then ``(0, 1)`` the same way, then the elements past the last
  whole packet one by one.  The NaN and signed-zero results follow from that order (measured
  against onnxruntime 1.31: identical on every case of ``tests/test_calibrate.py``).
- :func:`min_max_skip_nan`: the minimum and maximum of the non-NaN elements, a value replacing the
  current one only when strictly smaller (larger), in element order: the TFLite calibrator's
  ``MinMax::Update``, ``std::min<float>(min_, value)``.
- :func:`histogram_uniform`: ``np.histogram(x, bins, range=(first, last))`` for float32 data and
  float32 edges, exactly as numpy computes it (the index ``int(((x - first) / (last - first)) *
  bins)`` in float32, then moved by one where the edge comparisons say so; NaN and values outside
  the range not counted), added to ``counts``.
- :func:`histogram_edges`: ``np.histogram(x, bins=edges)`` for arbitrary increasing float32 edges:
  bin ``i`` holds ``edges[i] <= x < edges[i + 1]``, the last bin also ``x == edges[-1]``.
- :func:`histogram_uniform_parts` / :func:`histogram_edges_parts`: the same counts (of ``x`` or of
  ``|x|``), the same arithmetic value by value, on quantspec's thread pool: each thread claims blocks
  of values (``quantspec._fastpath.runner.launch``) and counts them into its own row of ``parts``; the
  caller sums the rows in integers, so the counts do not depend on which thread counted what.
- :func:`histogram_formula_parts`: :func:`histogram_uniform_parts` where the edges are exactly
  ``np.linspace``'s float32 formula (:func:`uniform_edges_formula` checks every edge): the two edges
  around a value are computed instead of looked up, so the pass vectorises.
- :func:`min_max_abs`: a batch's minimum, maximum and number of non-NaN values (:func:`nan_min_max`)
  and the minimum and maximum of its absolute values, in one pass compared as integers, which also
  copies the batch to where the observer keeps it.
"""

from __future__ import annotations

import numpy as np

from .._fastpath.nbprim import claim, f32_from_bits, finished, function, inline, kernel

#: values per block of :func:`histogram_uniform`'s two passes
HIST_BLOCK = 512

__all__ = ["ort_min_max", "min_max_skip_nan", "nan_min_max", "min_max_abs", "histogram_uniform", "histogram_edges",
           "abs_into", "histogram_uniform_parts", "histogram_edges_parts", "uniform_edges_formula",
           "histogram_formula_parts", "pairwise_sum", "entropy_prepare",
           "entropy_finish"]


@kernel
def ort_min_max(x):
    """(min, max) in onnxruntime's order (module docstring): two groups of four lanes over blocks of
    eight, the groups merged, the tail of four, the lanes paired, then the rest one by one; each
    comparison ``v < m`` keeps ``m`` on NaN and on equal values (the sign of a zero).  The sixteen
    lanes are scalars, which the compiler keeps in registers."""
    n = x.size
    a1 = n // 4 * 4
    a2 = n // 8 * 8
    if a1 == 0:
        mn = x[0]
        mx = x[0]
        for i in range(1, n):
            v = x[i]
            mn = v if v < mn else mn
            mx = v if v > mx else mx
        return mn, mx
    l0, l1, l2, l3 = x[0], x[1], x[2], x[3]
    h0, h1, h2, h3 = l0, l1, l2, l3
    if a1 > 4:
        m0, m1, m2, m3 = x[4], x[5], x[6], x[7]
        g0, g1, g2, g3 = m0, m1, m2, m3
        for t in range(1, a2 // 8):
            b = np.uint64(t) * np.uint64(8)
            v0, v1, v2, v3 = x[b], x[b + np.uint64(1)], x[b + np.uint64(2)], x[b + np.uint64(3)]
            w0, w1, w2, w3 = x[b + np.uint64(4)], x[b + np.uint64(5)], x[b + np.uint64(6)], x[b + np.uint64(7)]
            l0 = v0 if v0 < l0 else l0
            l1 = v1 if v1 < l1 else l1
            l2 = v2 if v2 < l2 else l2
            l3 = v3 if v3 < l3 else l3
            h0 = v0 if v0 > h0 else h0
            h1 = v1 if v1 > h1 else h1
            h2 = v2 if v2 > h2 else h2
            h3 = v3 if v3 > h3 else h3
            m0 = w0 if w0 < m0 else m0
            m1 = w1 if w1 < m1 else m1
            m2 = w2 if w2 < m2 else m2
            m3 = w3 if w3 < m3 else m3
            g0 = w0 if w0 > g0 else g0
            g1 = w1 if w1 > g1 else g1
            g2 = w2 if w2 > g2 else g2
            g3 = w3 if w3 > g3 else g3
        l0 = m0 if m0 < l0 else l0
        l1 = m1 if m1 < l1 else l1
        l2 = m2 if m2 < l2 else l2
        l3 = m3 if m3 < l3 else l3
        h0 = g0 if g0 > h0 else h0
        h1 = g1 if g1 > h1 else h1
        h2 = g2 if g2 > h2 else h2
        h3 = g3 if g3 > h3 else h3
        if a1 > a2:
            v0, v1, v2, v3 = x[a2], x[a2 + 1], x[a2 + 2], x[a2 + 3]
            l0 = v0 if v0 < l0 else l0
            l1 = v1 if v1 < l1 else l1
            l2 = v2 if v2 < l2 else l2
            l3 = v3 if v3 < l3 else l3
            h0 = v0 if v0 > h0 else h0
            h1 = v1 if v1 > h1 else h1
            h2 = v2 if v2 > h2 else h2
            h3 = v3 if v3 > h3 else h3
    a = l2 if l2 < l0 else l0
    c = l3 if l3 < l1 else l1
    mn = c if c < a else a
    a = h2 if h2 > h0 else h0
    c = h3 if h3 > h1 else h1
    mx = c if c > a else a
    for idx in range(a1, n):
        v = x[idx]
        mn = v if v < mn else mn
        mx = v if v > mx else mx
    return mn, mx


@kernel
def min_max_skip_nan(x, mn, mx):
    """(min, max, any non-NaN value seen) of ``x`` continuing from ``mn`` / ``mx``."""
    seen = False
    for i in range(x.size):
        v = x[i]
        if v != v:
            continue
        seen = True
        mn = v if v < mn else mn
        mx = v if v > mx else mx
    return mn, mx, seen


@kernel
def nan_min_max(x):
    """(min, max, number of non-NaN elements) of float32 ``x``, NaN skipped (values only: a zero's
    sign here is not numpy's)."""
    mn = np.float32(np.inf)
    mx = np.float32(-np.inf)
    count = 0
    for i in range(x.size):
        v = x[i]
        if v == v:
            count += 1
            if v < mn:
                mn = v
            if v > mx:
                mx = v
    return mn, mx, count


@kernel
def histogram_uniform(x, first, last, edges, counts):
    nb = counts.size
    denom = np.float32(last - first)
    scale = np.float32(nb)
    n = x.size
    # two passes over blocks of HIST_BLOCK values: numpy's index for every value (no branch, so the
    # division vectorises; -1 for NaN and values outside the range), then the edge corrections and
    # the counts
    idx = np.empty(HIST_BLOCK, np.int64)
    for s in range(0, n, HIST_BLOCK):
        m = min(s + HIST_BLOCK, n) - s
        for j in range(m):
            v = x[s + j]
            t = ((v - first) / denom) * scale
            inside = (v >= first) & (v <= last)
            idx[j] = np.int64(t if inside else np.float32(-1.0))
        for j in range(m):
            k = idx[j]
            if k < 0:
                continue
            v = x[s + j]
            if k == nb:
                k -= 1
            if v < edges[k]:
                k -= 1
            if v >= edges[k + 1] and k != nb - 1:
                k += 1
            counts[k] += 1


@kernel
def histogram_edges(x, edges, counts):
    nb = counts.size
    first = edges[0]
    last = edges[nb]
    for i in range(x.size):
        v = x[i]
        if not (v >= first and v <= last):
            continue
        lo = 0
        hi = nb                      # edges[lo] <= v < edges[hi], or v == last
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if v < edges[mid]:
                hi = mid
            else:
                lo = mid
        counts[lo] += 1


@kernel
def min_max_abs(x, out):
    """``out[:] = x`` (the batch kept, in the same pass); returns (min, max, number of non-NaN values,
    min |x|, max |x|), the extremes over the non-NaN values (inf / -inf where there are none).  Compared as
    integers (the bits, the negative ones' magnitude bits flipped: the float order, with -0.0 below
    0.0), which vectorises where float comparisons with NaN in mind do not; so a zero minimum or
    maximum may have either sign (the observer takes a zero's sign from numpy)."""
    bits = x.view(np.int32)
    kept = out.view(np.int32)
    n = bits.size
    magnitude = np.int32(0x7FFFFFFF)
    inf_bits = np.int32(0x7F800000)
    lo = magnitude
    hi = np.int32(-0x80000000)
    alo = magnitude
    ahi = np.int32(0)
    nans = 0
    for i in range(n):
        u = bits[i]
        kept[i] = u
        a = u & magnitude
        nan = a > inf_bits
        key = u ^ ((u >> np.int32(31)) & magnitude)
        nans += np.int64(nan)
        lo = min(lo, magnitude if nan else key)
        hi = max(hi, np.int32(-0x80000000) if nan else key)
        alo = min(alo, magnitude if nan else a)
        ahi = max(ahi, np.int32(0) if nan else a)
    count = n - nans
    if count == 0:
        return np.float32(np.inf), np.float32(-np.inf), count, np.float32(np.inf), np.float32(-np.inf)
    lo = lo ^ ((lo >> np.int32(31)) & magnitude)
    hi = hi ^ ((hi >> np.int32(31)) & magnitude)
    return f32_from_bits(lo), f32_from_bits(hi), count, f32_from_bits(alo), f32_from_bits(ahi)


@inline
def _index_block(x, s, m, absolute, first, last, denom, scale, idx):
    """numpy's bin index of the values ``x[s:s + m]`` (or of their absolute values) into
    ``idx[:m]``, -1 for NaN and values outside the range (no branch: the division vectorises)."""
    if absolute:
        for j in range(m):
            v = abs(x[s + j])
            t = ((v - first) / denom) * scale
            inside = (v >= first) & (v <= last)
            idx[j] = np.int64(t if inside else np.float32(-1.0))
    else:
        for j in range(m):
            v = x[s + j]
            t = ((v - first) / denom) * scale
            inside = (v >= first) & (v <= last)
            idx[j] = np.int64(t if inside else np.float32(-1.0))


@kernel
def histogram_uniform_parts(x, absolute, first, last, edges, parts, slots, claims, step):
    """:func:`histogram_uniform` of ``x`` (``absolute``: of ``|x|``) over the blocks of HIST_BLOCK
    values this thread claims, into ``parts[slot]`` (``slot`` claimed from ``slots``; a thread that
    finds no row left claims no work).  The index corrections in unsigned integers (no negative
    index to wrap: ``edges[0]`` is ``first``, so a value in the range never moves below bin 0)."""
    slot = claim(slots, 1)
    if slot >= parts.shape[0]:
        return finished(claims, 0)
    counts = parts[slot]
    nb = edges.size - 1
    unb = np.uint64(nb)
    one = np.uint64(1)
    denom = np.float32(last - first)
    scale = np.float32(nb)
    n = x.size
    work = (n + HIST_BLOCK - 1) // HIST_BLOCK
    idx = np.empty(HIST_BLOCK, np.int64)
    while True:
        w0 = claim(claims, step)
        if w0 >= work:
            break
        w1 = min(w0 + step, work)
        for s in range(w0 * HIST_BLOCK, min(w1 * HIST_BLOCK, n), HIST_BLOCK):
            m = min(s + HIST_BLOCK, n) - s
            _index_block(x, s, m, absolute, first, last, denom, scale, idx)
            for j in range(m):
                signed = idx[j]
                if signed < 0:
                    continue
                k = np.uint64(signed)
                v = abs(x[s + j]) if absolute else x[s + j]
                if k == unb:
                    k -= one
                if v < edges[k]:
                    k -= one
                if v >= edges[k + one] and k != unb - one:
                    k += one
                counts[k] += 1
        finished(claims, w1 - w0)
    return finished(claims, 0)


@kernel
def uniform_edges_formula(edges, start, step):
    """Whether every edge ``edges[k]`` but the last is ``float32(float32(k * step) + start)``, the
    float32 arithmetic of ``np.linspace`` (``arange(bins + 1) * step + start``; it sets the last edge
    to ``stop``, which the counting never needs), evaluated as :func:`histogram_formula_parts` does."""
    nb = edges.size - 1
    for k in range(nb):
        if np.float32(np.float32(k) * step) + start != edges[k]:
            return False
    return True


@kernel
def histogram_formula_parts(x, absolute, first, last, start, step, parts, slots, claims, work_step):
    """:func:`histogram_uniform_parts` for edges that :func:`uniform_edges_formula` accepts (at most
    2^24 bins), with the two edges around a value computed, not looked up: numpy's index, the same
    corrections, no gather, so the whole index pass vectorises (in float32: every bin number is
    exact there).  ``parts`` has one more column than there are bins: NaN and values outside the
    range are counted in it (and dropped by the caller)."""
    slot = claim(slots, 1)
    if slot >= parts.shape[0]:
        return finished(claims, 0)
    counts = parts[slot]
    nb = parts.shape[1] - 1
    outside = np.int32(nb)
    denom = np.float32(last - first)
    scale = np.float32(nb)
    top = np.float32(nb - 1)
    one = np.float32(1.0)
    zero = np.float32(0.0)
    n = x.size
    work = (n + HIST_BLOCK - 1) // HIST_BLOCK
    idx = np.empty(HIST_BLOCK, np.int32)
    while True:
        w0 = claim(claims, work_step)
        if w0 >= work:
            break
        w1 = min(w0 + work_step, work)
        for s in range(w0 * HIST_BLOCK, min(w1 * HIST_BLOCK, n), HIST_BLOCK):
            m = min(s + HIST_BLOCK, n) - s
            for j in range(m):
                v = abs(x[s + j]) if absolute else x[s + j]
                t = ((v - first) / denom) * scale
                inside = (v >= first) & (v <= last)
                k = np.float32(np.int32(t if inside else zero))     # numpy's index (at most bins)
                k = k if k < top else top                            # index == bins: the last bin
                low = np.float32(k * step) + start                   # edges[k]
                high = np.float32((k + one) * step) + start          # edges[k + 1] (unused for the last bin)
                # numpy moves the index down where v < edges[k], then up where v >= edges[k + 1] of
                # the moved index, except from the last bin: after a move down that never holds, so
                # the two are one choice
                up = (v >= high) & (k != top)
                k = k - one if v < low else (k + one if up else k)
                idx[j] = np.int32(k) if inside else outside
            for j in range(m):
                counts[idx[j]] += 1
        finished(claims, w1 - w0)
    return finished(claims, 0)


@kernel
def histogram_edges_parts(x, absolute, edges, parts, slots, claims, step):
    """:func:`histogram_edges` of ``x`` (``absolute``: of ``|x|``) over the blocks of HIST_BLOCK
    values this thread claims, into ``parts[slot]`` (as :func:`histogram_uniform_parts`)."""
    slot = claim(slots, 1)
    if slot >= parts.shape[0]:
        return finished(claims, 0)
    nb = edges.size - 1
    first = edges[0]
    last = edges[nb]
    n = x.size
    work = (n + HIST_BLOCK - 1) // HIST_BLOCK
    while True:
        w0 = claim(claims, step)
        if w0 >= work:
            break
        w1 = min(w0 + step, work)
        for i in range(w0 * HIST_BLOCK, min(w1 * HIST_BLOCK, n)):
            v = abs(x[i]) if absolute else x[i]
            if not (v >= first and v <= last):
                continue
            lo = 0
            hi = nb
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if v < edges[mid]:
                    hi = mid
                else:
                    lo = mid
            parts[slot, lo] += 1
        finished(claims, w1 - w0)
    return finished(claims, 0)


@kernel
def abs_into(x, out):
    """``out = |x|``; returns (min, max, any NaN) of ``|x|``, min and max over the non-NaN values
    (inf / -inf where there are none)."""
    mn = np.float32(np.inf)
    mx = np.float32(-np.inf)
    nan = False
    for i in range(x.size):
        a = abs(x[i])
        out[i] = a
        if a != a:
            nan = True
        else:
            mn = a if a < mn else mn
            mx = a if a > mx else mx
    return mn, mx, nan


# -- the entropy method: every candidate width at once --------------------------------------------------------
@inline
def _leaf_sum(a, lo, n):
    """numpy's float32 pairwise summation of at most 128 elements."""
    if n < 8:
        res = np.float32(0.0)
        for i in range(n):
            res += a[lo + i]
        return res
    r0 = a[lo]
    r1 = a[lo + 1]
    r2 = a[lo + 2]
    r3 = a[lo + 3]
    r4 = a[lo + 4]
    r5 = a[lo + 5]
    r6 = a[lo + 6]
    r7 = a[lo + 7]
    i = 8
    m = n - n % 8
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@function
def pairwise_sum(a, lo, n):
    """numpy's float32 ``np.sum(a[lo:lo + n])``: from 0, element by element below 8 elements; 8
    accumulators up to 128, combined ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the
    rest; longer, the two halves (the first a multiple of 8) summed the same way and added — here
    with an explicit stack (a post-order walk of numpy's recursion)."""
    if n <= 128:
        return _leaf_sum(a, lo, n)
    s_lo = np.empty(128, np.int64)
    s_n = np.empty(128, np.int64)
    s_stage = np.zeros(128, np.int64)
    vals = np.empty(128, np.float32)
    nv = 0
    top = 0
    s_lo[0] = lo
    s_n[0] = n
    s_stage[0] = 0
    while top >= 0:
        cl = s_lo[top]
        cn = s_n[top]
        if cn <= 128:
            vals[nv] = _leaf_sum(a, cl, cn)
            nv += 1
            top -= 1
            continue
        n2 = cn // 2
        n2 -= n2 % 8
        stage = s_stage[top]
        if stage == 0:               # the left half first
            s_stage[top] = 1
            top += 1
            s_lo[top] = cl
            s_n[top] = n2
            s_stage[top] = 0
        elif stage == 1:             # then the right half
            s_stage[top] = 2
            top += 1
            s_lo[top] = cl + n2
            s_n[top] = cn - n2
            s_stage[top] = 0
        else:                        # both done: left + right
            right = vals[nv - 1]
            left = vals[nv - 2]
            nv -= 2
            vals[nv] = left + right
            nv += 1
            top -= 1
    return vals[0]


@function
def _smooth(v, lo, n, eps32, out):
    """onnxruntime's ``smooth_distribution`` of the int64 counts ``v[lo:lo + n]`` into ``out[lo:lo + n]``
    (float32); False when every count is 0 (no distribution), raises nothing: returns -1 when
    ``eps1 >= 1``."""
    zeros = 0
    for j in range(n):
        if v[lo + j] == 0:
            zeros += 1
    nonzeros = n - zeros
    if nonzeros == 0:
        return 0
    eps1 = 0.0001 * np.float64(zeros) / np.float64(nonzeros)
    if not eps1 < 1.0:
        return -1
    e0 = eps32
    e1 = np.float32(-eps1)
    one = np.float32(1.0)
    zero = np.float32(0.0)
    for j in range(n):
        z = one if v[lo + j] == 0 else zero
        nz = zero if v[lo + j] == 0 else one
        out[lo + j] = np.float32(v[lo + j]) + (e0 * z + e1 * nz)
    return 1


@kernel
def entropy_prepare(hist, zero, half_q, num_q, offsets, pk, qk, ratio, state):
    """For every candidate ``i = half_q .. zero`` (index ``c``): the smoothed, normalised distributions
    ``p`` and ``q`` of onnxruntime's ``get_entropy_threshold`` at ``pk[offsets[c]:offsets[c + 1]]`` /
    ``qk[...]``, ``ratio = pk / qk``, and ``state[c]``: 1 when both exist, 0 when one is all zeros
    (infinite divergence), -1 when smoothing fails."""
    nb = hist.size
    total = np.int64(0)
    prefix = np.empty(nb + 1, np.int64)
    prefix[0] = 0
    for k in range(nb):
        total += hist[k]
        prefix[k + 1] = total
    eps32 = np.float32(0.0001)
    count = offsets.size - 1
    p = np.empty(offsets[count], np.int64)
    q = np.zeros(offsets[count], np.int64)
    for c in range(count):
        i = half_q + c
        start = zero - i
        end = min(zero + i + 1, nb)
        length = end - start
        lo = offsets[c]
        for j in range(length):
            p[lo + j] = hist[start + j]
        p[lo] += prefix[start]
        p[lo + length - 1] += total - prefix[end]
        merged = length // num_q
        whole = num_q * merged
        for k in range(num_q):
            qsum = np.int64(0)
            norm = np.int64(0)
            for j in range(k * merged, k * merged + merged):
                qsum += hist[start + j]
                if p[lo + j] != 0:
                    norm += 1
            if k == num_q - 1:
                for j in range(whole, length):
                    qsum += hist[start + j]
            if norm != 0:
                value = np.int64(np.float64(qsum) / np.float64(norm))
                for j in range(k * merged, k * merged + merged):
                    q[lo + j] = value
        sp = _smooth(p, lo, length, eps32, pk)
        sq = _smooth(q, lo, length, eps32, qk)
        if sp < 0 or sq < 0:
            state[c] = -1
            continue
        if sp == 0 or sq == 0:
            state[c] = 0
            continue
        state[c] = 1
        sum_p = pairwise_sum(pk, lo, length)
        sum_q = pairwise_sum(qk, lo, length)
        for j in range(length):
            pk[lo + j] = (np.float32(1.0) * pk[lo + j]) / sum_p
            qk[lo + j] = (np.float32(1.0) * qk[lo + j]) / sum_q
            ratio[lo + j] = pk[lo + j] / qk[lo + j]


@kernel
def entropy_finish(offsets, pk, qk, logs, state, terms, divergences):
    """The KL divergence of each candidate from ``prepare``'s arrays and ``logs = np.log(ratio)``
    (onnxruntime's ``rel_entr`` and float32 ``np.sum``)."""
    count = offsets.size - 1
    for c in range(count):
        if state[c] != 1:
            divergences[c] = np.inf
            continue
        lo = offsets[c]
        n = offsets[c + 1] - lo
        for j in range(n):
            a = pk[lo + j]
            b = qk[lo + j]
            t = a * logs[lo + j]
            if a == 0 and b >= 0:
                t = np.float32(0.0)
            if not (a > 0 and b > 0):
                t = np.float32(np.inf)
            terms[lo + j] = t
        divergences[c] = np.float64(pairwise_sum(terms, lo, n))
