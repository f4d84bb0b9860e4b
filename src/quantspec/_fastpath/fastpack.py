"""numba kernels packing 4-bit and 2-bit codes into ONNX's raw layout (the fast twin of
:func:`quantspec._semantics.packing.pack_codes`; imported only through :func:`quantspec._fastpath.jit.load`).

Element ``i`` occupies bits ``[i*b, (i+1)*b)`` of a little-endian bit stream:
two 4-bit codes a byte, element 0 in the low nibble; four 2-bit codes a byte, LSB first; an odd tail
padded with zero bits.
"""

from __future__ import annotations

import numpy as np

from .nbprim import claim, finished, kernel

__all__ = ["pack"]


def _pack(codes, out, bits, chunk, claims, step):
    """out[j] = the ``8 // bits`` codes codes[j*k : (j+1)*k] (low ``bits`` bits of each), LSB first, for
    the chunks of ``chunk`` output bytes this thread claims (quantspec._fastpath.runner.launch)."""
    per = 8 // bits
    mask = np.uint8((1 << bits) - 1)
    n = codes.size
    nbytes = out.size
    work = (nbytes + chunk - 1) // chunk
    while True:
        w0 = claim(claims, step)
        if w0 >= work:
            break
        w1 = min(w0 + step, work)
        for j in range(np.uint64(w0 * chunk), np.uint64(min(w1 * chunk, nbytes))):
            v = np.uint8(0)
            for t in range(per):
                i = j * np.uint64(per) + np.uint64(t)
                if i < n:
                    v |= (codes[i] & mask) << np.uint8(t * bits)
            out[j] = v
        finished(claims, w1 - w0)
    return finished(claims, 0)


pack = kernel(_pack)
