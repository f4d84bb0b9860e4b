"""The source digest of ``quantspec convert``: XXH64, quantspec's own numba kernel and its plain-Python
twin, against the published test vectors of xxHash, and the per-slab construction of a tensor's
digest."""

from __future__ import annotations

import numpy as np
import pytest

from refs import require_fast

from quantspec.checkpoint import digest

P32, P64 = 2654435761, 11400714785074694797


def _sanity_buffer(n: int) -> bytes:
    """The test buffer of xxHash's sanity check (cli/xsum_sanity_check.c): byte i is the top byte of
    PRIME32 * PRIME64^i modulo 2^64."""
    out, g = bytearray(n), P32
    for i in range(n):
        out[i] = g >> 56
        g = (g * P64) & (2 ** 64 - 1)
    return bytes(out)


# (length, seed, XXH64) from xxHash's sanity-check table; and python-xxhash's README example
VECTORS = [(0, 0, 0xEF46DB3751D8E999), (0, P32, 0xAC75FDA2929B17EF), (1, 0, 0xE934A84ADB052768),
           (1, P32, 0x5014607643A9B4C3), (4, 0, 0x9136A0DCA57457EE), (14, 0, 0x8282DCC4994E35C8),
           (14, P32, 0xC3BD6BF63DEB6DF0), (222, 0, 0xB641AE8CB691C174), (222, P32, 0x20CB8AB7AE10C14A)]


@pytest.mark.parametrize("n, seed, want", VECTORS)
def test_xxh64_equals_the_published_vectors(n, seed, want):
    data = _sanity_buffer(n)
    assert digest.xxh64_py(data, seed) == want
    require_fast()
    assert digest.xxh64(data, seed) == want
    assert digest.xxh64(np.frombuffer(data, np.uint8), seed) == want


def test_xxh64_readme_example():
    assert digest.xxh64_py(b"xxhash", 20141025) == 0xB559B98D844E0635


def test_the_kernel_equals_the_python_twin_on_every_length_and_alignment():
    require_fast()
    rng = np.random.default_rng(0)
    buf = rng.integers(0, 256, 4200, dtype=np.uint8)
    for n in list(range(0, 70)) + [127, 128, 129, 4095, 4096, 4199]:
        for start in (0, 1, 3):                       # unaligned views are hashed as their bytes
            data = buf[start:start + n]
            for seed in (0, 1, 2 ** 64 - 1):
                assert digest.xxh64(data, seed) == digest.xxh64_py(data.tobytes(), seed), (n, start, seed)


def test_digest_of_pieces_and_the_algorithm_it_names():
    pieces = [digest.piece(np.arange(n, dtype=np.uint8)) for n in (0, 5, 64)]
    assert all(len(p) == 8 for p in pieces)
    d = digest.combine(pieces)
    want = digest.xxh64_py(b"".join(digest.xxh64_py(bytes(range(n))).to_bytes(8, "big") for n in (0, 5, 64)))
    assert d == "xxh64:" + want.to_bytes(8, "big").hex() and len(d) == len("xxh64:") + 16
    assert digest.algorithm_of(d) == "xxh64"
    old = digest.combine([digest.piece(b"abc", "sha256")], "sha256")
    assert digest.algorithm_of(old) == "sha256" and len(old) == len("sha256:") + 64
    assert digest.algorithm_of("md5:00") is None and digest.algorithm_of(None) is None
