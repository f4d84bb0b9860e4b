"""Exact integer matrix products on float BLAS, and convolution patches.

LiteRT's int8 CONV_2D and FULLY_CONNECTED accumulate ``Σ w·(x - z)`` in int32.  numpy has no BLAS
for integers (its integer ``@`` is a plain loop, ~0.6 GOP/s), but float BLAS is exact on integer
data as long as every number it forms is an integer the float type represents exactly.  This
module turns that observation into a GEMM that is exact by construction and runs at float32 BLAS
speed, plus the strided "patches" view (im2col without a Python loop) the convolutions feed it.

**The exactness argument.**  Let ``a`` (M×K) and ``b`` (K×N) hold integers with ``|a| <= A`` and
``|b| <= B``.  Cut K into chunks of at most ``Kc = floor(2^24 / (A·B))`` columns.  Inside one chunk:

1. every product ``a[m,k]·b[k,n]`` is an integer with ``|a·b| <= A·B <= 2^24``;
2. every partial sum a GEMM forms for output ``(m, n)`` — in *any* order, association, blocking,
   with or without FMA, over any number of threads — is a sum over a subset ``S`` of the chunk's
   products, an integer with ``|Σ_S a·b| <= Kc·A·B <= 2^24``;
3. every integer of magnitude ``<= 2^24`` is a float32 value, so each float32 addition or FMA of
   two such exact operands whose exact result is such an integer returns that result exactly
   (IEEE 754 rounds only when the exact result is not representable).

By induction over the summation tree the float32 result of each chunk *is* the exact integer.  The
chunk results (``|.| <= 2^24``) are summed in float64, exact while the running total stays within
``2^53`` (``K·A·B <= 2^53``, i.e. K up to 2^39 for int8 × int8), and converted to int64.  The one
assumption about the BLAS is that it computes each output as a sum of the K products (every
conventional GEMM: OpenBLAS, MKL, BLIS, Accelerate), not a Strassen-type scheme that forms sums of
matrix entries, and that float32 GEMM computes in float32 (no bf16/TF32 down-conversion — CPU
BLAS never does).

For int8 × int8 (``A = B = 128``) the chunk is 1024 columns: FULLY_CONNECTED with K = 4096 is four
float32 GEMMs; a 3×3×256 convolution (K = 2304) is three.  Zero points are *not* subtracted before
the GEMM — that would widen ``A`` to 255 and halve the chunk — but corrected afterwards in int64
with precomputed sums (the gemmlowp/ruy trick)::

    Σ_k (a - za)(b - zb) = Σ_k a·b - za·Σ_k b - zb·Σ_k a + K·za·zb

:func:`matmul_int64` is the readable reference of the same product (numpy's integer matmul, no
BLAS); the tests prove the two give identical integers.
"""

from __future__ import annotations

import numpy as np

from .._semantics.intcast import wrap_int32 as _wrap_int32

__all__ = ["F32_EXACT", "F64_EXACT", "f32_chunk", "matmul_exact", "matmul_int64", "patches",
           "wrap_int32", "IM2COL_BUDGET"]

#: largest integer magnitude below which every integer is a float32 / a float64
F32_EXACT = 1 << 24
F64_EXACT = 1 << 53

#: bytes of im2col matrix a convolution materialises at once (it works through row blocks)
IM2COL_BUDGET = 32 << 20

# below this chunk length float32 chunking stops paying off and float64 BLAS is used instead
_MIN_CHUNK = 64


def f32_chunk(a_bound: int, b_bound: int) -> int:
    """The longest K for which a float32 dot product of integers bounded by ``a_bound`` and
    ``b_bound`` is exact: ``floor(2^24 / (a_bound·b_bound))`` (0 when even one product is not)."""
    p = int(a_bound) * int(b_bound)
    return F32_EXACT // p if p > 0 else F32_EXACT


def matmul_int64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` in int64 with numpy's integer matmul: the slow, obviously exact reference."""
    return np.matmul(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))


def matmul_exact(a: np.ndarray, b: np.ndarray, a_bound: int, b_bound: int) -> np.ndarray:
    """``a @ b`` exactly, as int64, on float BLAS.

    ``a`` (``(..., M, K)``) and ``b`` (``(..., K, N)``) are float32 (or float64) arrays holding
    integers with ``|a| <= a_bound`` and ``|b| <= b_bound``; any memory layout BLAS accepts
    (transposed views and column slices included).  K is cut into chunks of :func:`f32_chunk`
    columns, one float32 GEMM each (module docstring: why each is exact); if the bounds leave chunks
    too short to be worth it, one float64 GEMM is used while ``K·a_bound·b_bound <= 2^53``, and
    beyond even that :func:`matmul_int64`.
    """
    K = a.shape[-1]
    if K == 0:
        return np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.int64)
    total = K * int(a_bound) * int(b_bound)
    kc = f32_chunk(a_bound, b_bound)
    if kc >= K:
        a32 = a if a.dtype == np.float32 else a.astype(np.float32)
        b32 = b if b.dtype == np.float32 else b.astype(np.float32)
        return np.matmul(a32, b32).astype(np.int64)
    if kc >= _MIN_CHUNK:
        a32 = a if a.dtype == np.float32 else a.astype(np.float32)
        b32 = b if b.dtype == np.float32 else b.astype(np.float32)
        acc_dtype = np.float64 if total <= F64_EXACT else np.int64
        acc = None
        part = None
        for k0 in range(0, K, kc):
            ak = a32[..., k0:k0 + kc]
            bk = b32[..., k0:k0 + kc, :]
            if part is None:
                part = np.matmul(ak, bk)
                acc = part.astype(acc_dtype)
            else:
                np.matmul(ak, bk, out=part)
                if acc_dtype is np.float64:
                    acc += part                     # float32 -> float64 is exact, and so is the sum
                else:
                    acc += part.astype(np.int64)
        return acc.astype(np.int64)
    if total <= F64_EXACT:
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
    return matmul_int64(a, b)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """The int32 a C ``int32_t`` accumulator holds after the same additions (as an int32 array)."""
    return _wrap_int32(x).astype(np.int32)


def patches(x: np.ndarray, filter_hw: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
            pad_before: tuple[int, int], out_hw: tuple[int, int], pad_value) -> np.ndarray:
    """The convolution windows of an NHWC array, as a read-only strided view (no Python loop).

    Returns ``v`` of shape ``(N, OH, OW, KH, KW, C)`` with
    ``v[n, oy, ox, ky, kx, c] = xp[n, oy·sh + ky·dh, ox·sw + kx·dw, c]``, where ``xp`` is ``x``
    padded with ``pad_value`` by ``pad_before`` rows/columns at the top/left and by as many as the
    windows need at the bottom/right.  Padding with the input zero point is exactly LiteRT's
    "skip the taps outside the image" (``(z - z)·w = 0``).
    """
    n, h, w, c = x.shape
    kh, kw = filter_hw
    sh, sw = stride
    dh, dw = dilation
    ph, pw = pad_before
    oh, ow = out_hw
    need_h = max((oh - 1) * sh + (kh - 1) * dh + 1, 0) if oh > 0 else 0
    need_w = max((ow - 1) * sw + (kw - 1) * dw + 1, 0) if ow > 0 else 0
    bottom = max(need_h - ph - h, 0)
    right = max(need_w - pw - w, 0)
    if ph or pw or bottom or right:
        xp = np.empty((n, h + ph + bottom, w + pw + right, c), dtype=x.dtype)
        xp[...] = pad_value
        xp[:, ph:ph + h, pw:pw + w, :] = x
    else:
        xp = np.ascontiguousarray(x)
    s0, s1, s2, s3 = xp.strides
    return np.lib.stride_tricks.as_strided(
        xp, shape=(n, oh, ow, kh, kw, c),
        strides=(s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3), writeable=False)
