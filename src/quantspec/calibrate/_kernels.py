"""numba kernels of the calibration observers (imported through :func:`quantspec._core.jit.load`).

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
"""

from __future__ import annotations

import numpy as np

from .._core.nbprim import kernel

__all__ = ["ort_min_max", "min_max_skip_nan", "histogram_uniform", "histogram_edges", "abs_into"]


@kernel
def ort_min_max(x):
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
    lo = np.empty(4, np.float32)
    hi = np.empty(4, np.float32)
    for j in range(4):
        lo[j] = x[j]
        hi[j] = x[j]
    if a1 > 4:
        lo2 = np.empty(4, np.float32)
        hi2 = np.empty(4, np.float32)
        for j in range(4):
            lo2[j] = x[4 + j]
            hi2[j] = x[4 + j]
        for idx in range(8, a2, 8):
            for j in range(4):
                v = x[idx + j]
                w = x[idx + 4 + j]
                lo[j] = v if v < lo[j] else lo[j]
                hi[j] = v if v > hi[j] else hi[j]
                lo2[j] = w if w < lo2[j] else lo2[j]
                hi2[j] = w if w > hi2[j] else hi2[j]
        for j in range(4):
            lo[j] = lo2[j] if lo2[j] < lo[j] else lo[j]
            hi[j] = hi2[j] if hi2[j] > hi[j] else hi[j]
        if a1 > a2:
            for j in range(4):
                v = x[a2 + j]
                lo[j] = v if v < lo[j] else lo[j]
                hi[j] = v if v > hi[j] else hi[j]
    l0 = lo[2] if lo[2] < lo[0] else lo[0]
    l1 = lo[3] if lo[3] < lo[1] else lo[1]
    mn = l1 if l1 < l0 else l0
    h0 = hi[2] if hi[2] > hi[0] else hi[0]
    h1 = hi[3] if hi[3] > hi[1] else hi[1]
    mx = h1 if h1 > h0 else h0
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
    for i in range(x.size):
        v = x[i]
        if not (v >= first and v <= last):
            continue
        k = np.int64(((v - first) / denom) * scale)
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
def abs_into(x, out):
    for i in range(x.size):
        out[i] = abs(x[i])
