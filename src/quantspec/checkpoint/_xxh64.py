"""XXH64 (xxHash, 64 bits, by Yann Collet), compiled by numba (imported only through
:func:`quantspec._fastpath.jit.load`; the plain-Python twin is :func:`quantspec.checkpoint.digest.xxh64_py`).

The algorithm as its specification (``doc/xxhash_spec.md`` of the xxHash project) gives it: four
64-bit lanes take 32-byte stripes (``lane = rotl(lane + word * P2, 31) * P1``), are merged, the
remaining 8-, 4- and 1-byte pieces are folded in, and the result is avalanched.  All arithmetic is
modulo 2^64; words are read little-endian.  The kernel takes the input as its 8-byte words
(``words``, the first ``len // 8 * 8`` bytes) and the last ``len % 8`` bytes (``tail``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._fastpath.nbprim import kernel

__all__ = ["xxh64"]

_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_OPTIONS = dict(fastmath=False, error_model="numpy", inline="always")


@njit(**_OPTIONS)
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(**_OPTIONS)
def _round(acc, word):
    acc = acc + word * _P2
    return _rotl(acc, 31) * _P1


@njit(**_OPTIONS)
def _merge(h, lane):
    h = h ^ _round(np.uint64(0), lane)
    return h * _P1 + _P4


@kernel
def xxh64(words, tail, seed):
    """XXH64 of the bytes ``words`` (uint64, little-endian) followed by ``tail`` (uint8, fewer than
    8 bytes), with ``seed`` (uint64)."""
    n = words.size
    length = np.uint64(n) * np.uint64(8) + np.uint64(tail.size)
    i = 0
    if length >= 32:
        v1 = seed + _P1 + _P2
        v2 = seed + _P2
        v3 = seed
        v4 = seed - _P1
        stripes = n // 4
        for k in range(stripes):
            j = 4 * k
            v1 = _round(v1, words[j])
            v2 = _round(v2, words[j + 1])
            v3 = _round(v3, words[j + 2])
            v4 = _round(v4, words[j + 3])
        i = 4 * stripes
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + _P5
    h = h + length
    while i < n:
        h = h ^ _round(np.uint64(0), words[i])
        h = _rotl(h, 27) * _P1 + _P4
        i += 1
    t = 0
    if tail.size >= 4:
        w = (np.uint64(tail[0]) | (np.uint64(tail[1]) << np.uint64(8)) | (np.uint64(tail[2]) << np.uint64(16))
             | (np.uint64(tail[3]) << np.uint64(24)))
        h = h ^ (w * _P1)
        h = _rotl(h, 23) * _P2 + _P3
        t = 4
    while t < tail.size:
        h = h ^ (np.uint64(tail[t]) * _P5)
        h = _rotl(h, 11) * _P1
        t += 1
    h = h ^ (h >> np.uint64(33))
    h = h * _P2
    h = h ^ (h >> np.uint64(29))
    h = h * _P3
    h = h ^ (h >> np.uint64(32))
    return h
