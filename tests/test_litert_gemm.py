"""The exact integer GEMM on float BLAS (quantspec.litert._gemm) against a plain int64 oracle.

The fast path must give *identical* integers, including at the bounds that break naive float32
BLAS: K far beyond 1024 with worst-case int8 values (every product 2^14), chunk boundaries, the
float64 and int64 fallbacks for wide operands, batched and transposed layouts.
"""

from __future__ import annotations

import numpy as np
import pytest

from quantspec.litert._gemm import F32_EXACT, f32_chunk, matmul_exact, matmul_int64, patches, wrap_int32


def oracle(a, b):
    """Σ a·b with Python-free but plainly exact int64 arithmetic (einsum over int64)."""
    return np.einsum("...mk,...kn->...mn", a.astype(np.int64), b.astype(np.int64))


def test_chunk_length():
    assert f32_chunk(128, 128) == 1024
    assert f32_chunk(128, 127) == F32_EXACT // (128 * 127)
    assert f32_chunk(255, 127) == 518          # zero-point-subtracted LiteRT operands (notes §3)


@pytest.mark.parametrize("K", [1, 1023, 1024, 1025, 3000, 8193])
def test_worst_case_int8_exact(K):
    """All products (-128)·(-128) = 2^14: float32 BLAS without chunking loses bits beyond K = 1024."""
    a = np.full((3, K), -128, np.int8)
    b = np.full((K, 2), -128, np.int8)
    got = matmul_exact(a.astype(np.float32), b.astype(np.float32), 128, 128)
    assert got.dtype == np.int64
    assert np.array_equal(got, oracle(a, b))
    assert got[0, 0] == K * 2 ** 14


def test_naive_float32_is_not_exact():
    """The reason for chunking: plain float32 GEMM with sums beyond 2^24 (large K, same-sign data)
    rounds."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 128, size=(16, 20000), dtype=np.int8)
    b = rng.integers(0, 128, size=(20000, 16), dtype=np.int8)
    naive = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.int64)
    want = oracle(a, b)
    assert not np.array_equal(naive, want)
    assert np.array_equal(matmul_exact(a.astype(np.float32), b.astype(np.float32), 128, 128), want)


@pytest.mark.parametrize("seed", range(6))
def test_random_shapes_and_layouts(seed):
    rng = np.random.default_rng(seed)
    M, N = (int(v) for v in rng.integers(1, 90, size=2))
    K = int(rng.integers(1, 5000))
    a = rng.integers(-128, 128, size=(M, K), dtype=np.int8)
    w = rng.integers(-128, 128, size=(N, K), dtype=np.int8)        # stored (N, K): used transposed
    got = matmul_exact(a.astype(np.float32), w.astype(np.float32).T, 128, 128)
    assert np.array_equal(got, oracle(a, w.T))
    assert np.array_equal(got, matmul_int64(a, w.T))


def test_batched():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, size=(3, 50, 2500), dtype=np.int8)
    b = rng.integers(-128, 128, size=(3, 2500, 7), dtype=np.int8)
    assert np.array_equal(matmul_exact(a.astype(np.float32), b.astype(np.float32), 128, 128), oracle(a, b))


@pytest.mark.parametrize("bound", [2 ** 12, 2 ** 20, 2 ** 30])
def test_wide_operands_fall_back(bound):
    """Operands wider than int8: short float32 chunks, float64 BLAS, or the int64 loop — all exact."""
    rng = np.random.default_rng(bound % 97)
    a = rng.integers(-bound, bound + 1, size=(20, 300)).astype(np.float64)
    b = rng.integers(-bound, bound + 1, size=(300, 9)).astype(np.float64)
    a[0] = bound
    b[:, 0] = bound
    got = matmul_exact(a, b, bound, bound)
    assert np.array_equal(got, oracle(a.astype(np.int64), b.astype(np.int64)))


def test_zero_depth():
    a = np.zeros((4, 0), np.float32)
    b = np.zeros((0, 3), np.float32)
    assert np.array_equal(matmul_exact(a, b, 128, 128), np.zeros((4, 3), np.int64))


def test_wrap_int32():
    x = np.array([2 ** 31, -2 ** 31 - 1, 2 ** 32 + 5, -7], np.int64)
    assert wrap_int32(x).tolist() == [-2 ** 31, 2 ** 31 - 1, 5, -7]


@pytest.mark.parametrize("seed", range(4))
def test_patches_match_a_loop(seed):
    rng = np.random.default_rng(seed)
    n, h, w, c = 2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), 3
    kh, kw = (int(v) for v in rng.integers(1, 4, size=2))
    sh, sw, dh, dw = (int(v) for v in rng.integers(1, 3, size=4))
    ph, pw = (int(v) for v in rng.integers(0, 3, size=2))
    oh, ow = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    x = rng.integers(-128, 128, size=(n, h, w, c), dtype=np.int8)
    v = patches(x, (kh, kw), (sh, sw), (dh, dw), (ph, pw), (oh, ow), np.int8(-9))
    assert v.shape == (n, oh, ow, kh, kw, c)
    for oy in range(oh):
        for ox in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    iy, ix = oy * sh + ky * dh - ph, ox * sw + kx * dw - pw
                    inside = 0 <= iy < h and 0 <= ix < w
                    want = x[:, iy, ix, :] if inside else np.full((n, c), -9, np.int8)
                    assert np.array_equal(v[:, oy, ox, ky, kx, :], want)
