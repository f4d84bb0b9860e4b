"""numba kernels of the equivalence proof (imported through :func:`quantspec._fastpath.jit.load`).

- :func:`fill`: ``out[i] = start + i``, the bit patterns of a chunk of the input domain, written
  in place (the domain is enumerated, never materialised).
- :func:`compare_codes`: one pass over a chunk's two code arrays: the codes that differ, split by
  where the input lies (finite inside the range, finite outside it, inf / NaN), the largest code
  difference, and the first differing positions of each part.  A code is read from an output
  ``y`` as ``int(y) + zero`` (``mode`` 0: integer codes; ``zero`` carries the offset between two
  code types), or ``rint(y / step) + zero`` (``mode`` 1: the float output of a simulated
  quantizer; a NaN output has no code and differs from every code).
- :func:`compare_values`: the same for two float outputs (dequantizers): equal values (NaN equal
  to NaN), the largest absolute difference.

The quantizers themselves are never computed here: their outputs come from each spec's own
kernels (the public functions), which use quantspec's thread pool.  These kernels run on the calling
thread, one chunk at a time (a chunk stays in cache; waking the pool for a pass this short costs more
than it saves).
"""

from __future__ import annotations

import numpy as np
from .._fastpath.nbprim import inline, kernel

__all__ = ["fill", "count_codes", "compare_codes", "compare_values", "NO_CODE"]

#: the "code" of a NaN output of a simulated quantizer (it has none)
NO_CODE = -(1 << 62)


def _fill(out, start):
    n = out.size
    for i in range(n):
        out[i] = start + np.uint64(i)


fill = kernel(_fill)


@inline
def _code(y, mode, step, zero):
    if mode == 0:
        return np.int64(y) + zero
    v = np.float64(y)
    if v != v:
        return np.int64(NO_CODE)
    return np.int64(np.rint(v / step)) + zero


@inline
def _where(x, lo, hi):
    """0: finite inside [lo, hi]; 1: finite outside; 2: inf or NaN."""
    if x != x or x == np.inf or x == -np.inf:
        return 2
    return 0 if lo <= x <= hi else 1


def _count_codes(ya, yb, ma, sa, za, mb, sb, zb):
    """How many codes differ (the fast first look at a chunk: no branch in the loop)."""
    n = ya.size
    total = 0
    for i in range(n):
        total += np.int64(_code(ya[i], ma, sa, za) != _code(yb[i], mb, sb, zb))
    return total


count_codes = kernel(_count_codes)


def _compare_codes(x, ya, yb, ma, sa, za, mb, sb, zb, lo, hi, counts, maxdiff, first, nfirst):
    parts = counts.shape[0]
    n = ya.size
    cap = first.shape[1]
    for p in range(parts):
        a0 = p * n // parts
        a1 = (p + 1) * n // parts
        c0 = 0
        c1 = 0
        c2 = 0
        md = 0
        k = 0
        for i in range(a0, a1):
            ca = _code(ya[i], ma, sa, za)
            cb = _code(yb[i], mb, sb, zb)
            if ca != cb:
                w = _where(np.float64(x[i]), lo, hi)
                if w == 0:
                    c0 += 1
                elif w == 1:
                    c1 += 1
                else:
                    c2 += 1
                if ca != NO_CODE and cb != NO_CODE:
                    d = abs(ca - cb)
                    if d > md:
                        md = d
                if k < cap:
                    first[p, k] = i
                    k += 1
        counts[p, 0] = c0
        counts[p, 1] = c1
        counts[p, 2] = c2
        maxdiff[p] = md
        nfirst[p] = k


compare_codes = kernel(_compare_codes)


def _compare_values(x, ya, yb, lo, hi, counts, maxdiff, first, nfirst):
    parts = counts.shape[0]
    n = ya.size
    cap = first.shape[1]
    for p in range(parts):
        a0 = p * n // parts
        a1 = (p + 1) * n // parts
        c0 = 0
        c1 = 0
        c2 = 0
        md = 0.0
        k = 0
        for i in range(a0, a1):
            va = np.float64(ya[i])
            vb = np.float64(yb[i])
            if va != vb and not (va != va and vb != vb):
                w = _where(np.float64(x[i]), lo, hi)
                if w == 0:
                    c0 += 1
                elif w == 1:
                    c1 += 1
                else:
                    c2 += 1
                d = abs(va - vb)
                if d == d and d > md:
                    md = d
                if k < cap:
                    first[p, k] = i
                    k += 1
        counts[p, 0] = c0
        counts[p, 1] = c1
        counts[p, 2] = c2
        maxdiff[p] = md
        nfirst[p] = k


compare_values = kernel(_compare_values)
