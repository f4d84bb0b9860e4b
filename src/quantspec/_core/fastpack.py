"""numba kernels packing 4-bit and 2-bit codes into ONNX's raw layout (the fast twin of
:func:`quantspec._core.packing.pack_codes`; imported only through :func:`quantspec._core.jit.load`).

Element ``i`` occupies bits ``[i*b, (i+1)*b)`` of a little-endian bit stream (notes/onnx.md §2.7):
two 4-bit codes a byte, element 0 in the low nibble; four 2-bit codes a byte, LSB first; an odd tail
padded with zero bits.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from .nbprim import twin

__all__ = ["pack"]


def _pack(codes, out, bits, chunk):
    """out[j] = the ``8 // bits`` codes codes[j*k : (j+1)*k] (low ``bits`` bits of each), LSB first."""
    per = 8 // bits
    mask = np.uint8((1 << bits) - 1)
    n = codes.size
    nbytes = out.size
    for w in prange((nbytes + chunk - 1) // chunk):
        j0 = w * chunk
        j1 = min(j0 + chunk, nbytes)
        for j in range(np.uint64(j0), np.uint64(j1)):
            v = np.uint8(0)
            for t in range(per):
                i = j * np.uint64(per) + np.uint64(t)
                if i < n:
                    v |= (codes[i] & mask) << np.uint8(t * bits)
            out[j] = v


pack = twin(_pack)
