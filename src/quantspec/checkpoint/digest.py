"""The digest of a source tensor's bytes, recorded in the manifest (``source.digest``).

A tensor is read in slabs of ``digest_rows`` rows (along axis 0; the manifest records the number),
and each slab is hashed on its own, so that slabs are hashed in parallel, by any worker, as they are
read.  The tensor's digest is the hash of its slabs' hashes, in order::

    piece_k  = XXH64(bytes of rows [k * digest_rows, (k + 1) * digest_rows), seed 0)
    digest   = "xxh64:" + hex(XXH64(piece_0 || piece_1 || ..., seed 0))

where each ``piece_k`` is the 8-byte canonical (big-endian) form of the 64-bit hash — what the
``xxhash`` package's ``xxh64(data).digest()`` returns — and ``hex`` the 16 lower-case hex digits of
that form (its ``hexdigest()``).  XXH64 is xxHash's 64-bit hash (``doc/xxhash_spec.md`` of the
xxHash project); quantspec computes it with its own numba kernel (:mod:`._xxh64`, about 10 GB/s a
core, against about 1.8 GB/s for SHA-256 with the CPU's SHA instructions), or in plain Python
(:func:`xxh64_py`) where numba is missing.  It detects changed or damaged source bytes (the purpose
here: resuming, verifying); it is not a cryptographic hash.

Manifests written before XXH64 was adopted record ``"sha256:"`` digests (the same construction with
SHA-256 and 32-byte pieces); :func:`piece` and :func:`combine` compute either, chosen by the
algorithm named in the digest.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from .._fastpath import jit

__all__ = ["ALGORITHM", "ALGORITHMS", "algorithm_of", "piece", "combine", "xxh64", "xxh64_py"]

#: the algorithm of new digests
ALGORITHM = "xxh64"
#: every algorithm a recorded digest may name
ALGORITHMS = ("xxh64", "sha256")

_M64 = (1 << 64) - 1
_P1, _P2, _P3, _P4, _P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                           0x27D4EB2F165667C5)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc: int, word: int) -> int:
    return (_rotl((acc + word * _P2) & _M64, 31) * _P1) & _M64


def xxh64_py(data, seed: int = 0) -> int:
    """XXH64 of ``data`` (bytes-like) in plain Python: the readable twin of the numba kernel."""
    b = memoryview(data).cast("B").tobytes() if not isinstance(data, bytes) else data
    n = len(b)
    words = struct.unpack_from(f"<{n // 8}Q", b)
    i = 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed & _M64, (seed - _P1) & _M64]
        stripes = len(words) // 4
        for k in range(stripes):
            for lane in range(4):
                v[lane] = _round(v[lane], words[4 * k + lane])
        i = 4 * stripes
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for lane in v:
            h = ((h ^ _round(0, lane)) * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    for w in words[i:]:
        h = (_rotl(h ^ _round(0, w), 27) * _P1 + _P4) & _M64
    t = len(words) * 8
    if n - t >= 4:
        h = (_rotl(h ^ ((int.from_bytes(b[t:t + 4], "little") * _P1) & _M64), 23) * _P2 + _P3) & _M64
        t += 4
    for byte in b[t:]:
        h = (_rotl(h ^ ((byte * _P5) & _M64), 11) * _P1) & _M64
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    return h ^ (h >> 32)


def _kernel():
    """The numba kernel (:func:`quantspec._fastpath.jit.load` imports its module once; a thread that asks while
    another imports it waits for the import to finish)."""
    return jit.load("quantspec.checkpoint._xxh64").xxh64


def xxh64(data, seed: int = 0) -> int:
    """XXH64 of ``data`` (bytes-like or a contiguous numpy array, as its bytes): the numba kernel
    when the fast path is on, else :func:`xxh64_py`."""
    if not jit.enabled():
        return xxh64_py(data, seed)
    a = data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else np.frombuffer(data, np.uint8)
    m = a.size // 8 * 8
    words = a[:m].view(np.uint64) if a[:m].ctypes.data % 8 == 0 else np.frombuffer(a[:m].tobytes(), np.uint64)
    return int(_kernel()(words, a[m:], np.uint64(seed & _M64)))


def algorithm_of(digest: str) -> str | None:
    """The algorithm a recorded digest names (``"xxh64:..."`` -> ``"xxh64"``), or None."""
    if isinstance(digest, str):
        name = digest.partition(":")[0]
        if name in ALGORITHMS and digest != name:
            return name
    return None


def piece(raw, algorithm: str = ALGORITHM) -> bytes:
    """The hash of one slab's bytes: 8 bytes (XXH64, big-endian) or 32 (SHA-256)."""
    if algorithm == "xxh64":
        return xxh64(raw).to_bytes(8, "big")
    return hashlib.sha256(raw).digest()


def combine(pieces, algorithm: str = ALGORITHM) -> str:
    """A tensor's digest from its slabs' hashes, in order (the module docstring)."""
    joined = b"".join(pieces)
    if algorithm == "xxh64":
        return "xxh64:" + xxh64(joined).to_bytes(8, "big").hex()
    return "sha256:" + hashlib.sha256(joined).hexdigest()
