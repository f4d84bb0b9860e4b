"""numba kernels of the model converter (imported only through :func:`quantspec._fastpath.jit.load`).

:func:`transpose`: ``dst[...] = src.T`` for 2-D arrays of 1-, 2- or 4-byte elements (their bit
patterns, as unsigned integers); either array may be a strided view.  A square tile at a time is read
along the rows of ``src`` into a small buffer and written along the rows of ``dst``: both sides move
whole cache lines, and rows a power of two apart, which fall in one cache set, are never walked
across.  The numpy twin is :func:`quantspec.onnxmodels.encoder.transpose_into`.
"""

from __future__ import annotations

import numpy as np

from .._fastpath.nbprim import kernel

__all__ = ["transpose", "TILE"]

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
