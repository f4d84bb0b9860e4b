"""com.microsoft MatMulNBits: the weight layout onnxruntime's ``MatMulNBitsQuantizer`` writes, and
its dequantization.

``quantspec convert MODEL.onnx OUT.onnx --scheme int4-bN|uint4-bN-asym --format matmulnbits``
replaces a MatMul whose B is a float32 initializer ``[K, N]`` by a MatMulNBits node, as
``MatMulNBitsQuantizer(model, block_size=N, is_symmetric=..., quant_format=QOperator)`` (its default
RTN quantizer) does; the arrays are byte-identical to it.

The parameters are the checkpoint scheme's (:func:`quantspec.onnxmodels.encoder.quantize_weight`:
MLAS's blockwise range, scale and zero point rules, rule ``ort-nbits``).  The codes are not the
scheme's QDQ codes: MLAS's MatMulNBits quantizer (``BlockwiseQuantizer::quantizeAndTranspose``)
adds the zero point *before* rounding, ``clamp(roundf(v * (1 / scale) + zp), 0, 15)`` in float32 (the
QDQ quantizer rounds ``v * (1 / scale)`` and adds the zero point after); a symmetric block has the
implicit zero point 8 (unsigned codes).  The layout (:func:`pack`):

- ``B``: uint8 ``[N, k_blocks, block_size / 2]``, column ``n``'s codes in K order, two per byte (the
  even element in the low nibble), each block padded with zero bytes to ``block_size``.  When K is
  odd, the high nibble of the last byte is what MLAS leaves there: the code of element ``K - 2`` when
  that element is in the same ``2 * block_size``-row slice MLAS quantizes it with, else 0.
- ``scales``: ``[N, k_blocks]`` of the weight's type (float32).
- ``zero_points`` (asymmetric only): uint8 ``[N, ceil(k_blocks / 2)]``, two 4-bit zero points per byte
  (even block low), an odd last block padded with 8.

:func:`dequantize` reads the node's weight back as the operator defines it (``(code - zero point) *
scale``, zero point 8 when absent for 4 bits, ``2 ** (bits - 1)`` in general).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._fastpath import jit
from ..checkpoint.report import TensorReport
from ..checkpoint.schemes import Scheme
from ..errors import ModelError, UnsupportedError
from .encoder import SLAB_BYTES, non_finite_error, quantize_weight, run_slabs
from .weights import Layout

__all__ = ["NBitsWeight", "takes", "quantize", "pack", "dequantize", "DOMAIN", "BITS"]

DOMAIN = "com.microsoft"
BITS = 4
#: bytes of float32 weight quantized at a time (bounds the temporaries)
_SLAB_BYTES = 16 << 20


@dataclass
class NBitsWeight:
    """One MatMulNBits weight: ``b`` uint8 ``[N, k_blocks, blob]``, ``scales`` ``[N, k_blocks]``,
    ``zero_points`` uint8 ``[N, ceil(k_blocks / 2)]`` (None: symmetric), the node's attributes, and
    the error of its dequantized values against the weight."""

    b: np.ndarray
    scales: np.ndarray
    zero_points: np.ndarray | None
    attributes: dict
    rel_rms: float
    max_abs: float


def takes(s: Scheme) -> str | None:
    """None if scheme ``s`` can be written as MatMulNBits, else why not."""
    if s.params != "ort-nbits" or s.granularity != "block" or s.codes not in ("int4", "uint4"):
        return (f"scheme {s.name} has no MatMulNBits form (--format matmulnbits takes the MatMulNBitsQuantizer "
                "schemes int4-bN and uint4-bN-asym)")
    return None


def _odd_tail(K: int, block: int) -> bool:
    """Whether MLAS leaves the code of element ``K - 2`` in the high nibble after an odd ``K`` (see
    :func:`pack`)."""
    return bool(K % 2 and K > 1 and (K - 1) % (2 * block))


def quantize(s: Scheme, w: np.ndarray, layout: Layout, name: str = "", path: str = "",
             workers: int | None = None) -> NBitsWeight:
    """The MatMulNBits arrays of the float32 weight ``w`` ``[K, N]`` (``layout``: its in-out layout) by
    scheme ``s``: :func:`pack` of :func:`quantize_weight`'s parameters, computed a slab of columns at a
    time on ``workers`` threads by a fused kernel (each block's range, scale and zero point by the
    scheme's rule, then its codes, packed, and the error sums, read straight from ``w`` a tile of
    columns at a time); the numpy path when the fast path is off."""
    if not jit.enabled():
        q = quantize_weight(s, w, "float", layout, name, path, workers)
        return pack(s, w, q.scale, q.zero_point)
    kernels = jit.load("quantspec.onnxmodels._jitted")
    K, N = (int(d) for d in w.shape)
    block = s.block
    nb = -(-K // block)
    blob = block * BITS // 8
    b = np.empty((N, nb * blob), np.uint8)
    scales = np.empty((N, nb), np.float32)
    zps = np.empty((N, nb), np.uint8)
    tail = _odd_tail(K, block)
    x = np.ascontiguousarray(w, np.float32)
    cols = kernels.NBITS_COLUMNS
    step = max(1, SLAB_BYTES // max(1, 4 * K * cols)) * cols

    def slab(c0: int) -> np.ndarray:
        part = np.zeros(3)
        bad = kernels.nbits_fused(x, c0, min(c0 + step, N), block, not s.zero_point, tail, b, scales, zps, part)
        if bad >= 0:
            raise non_finite_error(name, path, divmod(int(bad), N))
        return part

    acc = run_slabs(slab, range(0, N, step), workers)
    zp_packed = None
    if s.zero_point:
        z = np.full((N, nb + nb % 2), 8, np.uint8)
        z[:, :nb] = zps
        zp_packed = np.ascontiguousarray(z[:, 0::2] | (z[:, 1::2] << 4))
    rel, mx = TensorReport.errors(*acc)
    attrs = {"K": K, "N": N, "bits": BITS, "block_size": block}
    return NBitsWeight(b.reshape(N, nb, blob), scales, zp_packed, attrs, rel, mx)


def pack(s: Scheme, w: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None) -> NBitsWeight:
    """MatMulNBits' arrays for the float32 weight ``w`` ``[K, N]`` with the scheme's parameters
    ``scale`` ``[k_blocks, N]`` (and ``zero_point``, 4-bit values ``[k_blocks, N]``; None: symmetric):
    the codes as MLAS's MatMulNBits quantizer computes them from these parameters, packed."""
    K, N = (int(d) for d in w.shape)
    block = s.block
    nb = -(-K // block)
    blob = block * BITS // 8
    scales = np.ascontiguousarray(np.asarray(scale, np.float32).reshape(nb, N).T)          # [N, nb]
    zps = None if zero_point is None else np.asarray(zero_point).astype(np.uint8).reshape(nb, N).T
    with np.errstate(divide="ignore"):
        recip = np.where(scales != 0, np.float32(1) / np.where(scales != 0, scales, np.float32(1)),
                         np.float32(0)).astype(np.float32)
    zf = np.full((N, nb), 8, np.float32) if zps is None else zps.astype(np.float32)
    b = np.zeros((N, nb * block), np.uint8)       # codes first, one per byte, then packed
    acc = np.zeros(3)
    step = max(1, _SLAB_BYTES // (4 * nb * block))
    for c0 in range(0, N, step):
        c1 = min(c0 + step, N)
        x = np.zeros((c1 - c0, nb * block), np.float32)
        x[:, :K] = np.asarray(w[:, c0:c1], np.float32).T
        x = x.reshape(c1 - c0, nb, block)                                                   # [cols, nb, block]
        z = zf[c0:c1, :, None]
        v = x * recip[c0:c1, :, None]
        v += z                                                                              # float32, as MLAS
        # roundf (ties away from zero) then clamp to [0, 15]: a negative value clamps to 0 either way,
        # and for v >= 0, trunc(v) + (v - trunc(v) >= 0.5) is roundf exactly
        t = np.trunc(v)
        t += (v - t) >= np.float32(0.5)
        np.clip(t, 0, 15, out=t)
        codes = t.astype(np.uint8)
        b[c0:c1] = codes.reshape(c1 - c0, nb * block)
        deq = (t - z) * scales[c0:c1, :, None]
        xs = x.reshape(c1 - c0, -1)[:, :K].astype(np.float64)
        err = deq.reshape(c1 - c0, -1)[:, :K].astype(np.float64) - xs
        acc[0] += float(np.einsum("ij,ij->", err, err))
        acc[1] += float(np.einsum("ij,ij->", xs, xs))
        if err.size:
            acc[2] = max(acc[2], float(np.max(np.abs(err))))
    b[:, K:] = 0                                  # the padding of the last block is zero bytes
    if _odd_tail(K, block):
        # MLAS writes the last byte of an odd K from its pair buffer, whose high half still holds the
        # code before it (element K - 2) when that element was quantized in the same 2-block slice
        b[:, K] = b[:, K - 2]
    packed = (b[:, 0::2] | (b[:, 1::2] << 4)).reshape(N, nb, blob)
    zp_packed = None
    if zps is not None:
        z = np.full((N, nb + nb % 2), 8, np.uint8)
        z[:, :nb] = zps
        zp_packed = np.ascontiguousarray(z[:, 0::2] | (z[:, 1::2] << 4))
    rel, mx = TensorReport.errors(*acc)
    attrs = {"K": K, "N": N, "bits": BITS, "block_size": block}
    return NBitsWeight(np.ascontiguousarray(packed), scales, zp_packed, attrs, rel, mx)


def dequantize(b: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, K: int, N: int, bits: int,
               block_size: int) -> np.ndarray:
    """The weight ``[K, N]`` (float32) a MatMulNBits node multiplies by, from its inputs as the
    operator defines them: ``(code - zero point) * scale``, the codes ``bits`` wide in B's bytes (the
    first in the low bits), zero points packed the same way (uint8) or absent (``2 ** (bits - 1)``)."""
    if bits not in (2, 4, 8) or block_size <= 0 or K <= 0 or N <= 0:
        raise UnsupportedError("MatMulNBits", "bits must be 2, 4 or 8 and K, N, block_size positive",
                               f"bits={bits}, K={K}, N={N}, block_size={block_size}")
    nb = -(-K // block_size)
    blob = block_size * bits // 8
    raw = np.asarray(b, np.uint8).reshape(-1)
    if raw.size != N * nb * blob:
        raise ModelError("B", f"must hold N * ceil(K / block_size) * block_size * bits / 8 = {N * nb * blob} bytes",
                         raw.size)
    per = 8 // bits
    mask = (1 << bits) - 1
    codes = np.stack([(raw >> (bits * i)) & mask for i in range(per)], axis=-1).reshape(N, nb * block_size)[:, :K]
    sc = np.asarray(scales).reshape(-1)
    if sc.size != N * nb:
        raise ModelError("scales", f"must hold N * ceil(K / block_size) = {N * nb} values", sc.size)
    sc = sc.reshape(N, nb).astype(np.float32)
    if zero_points is None:
        zp = np.full((N, nb), 1 << (bits - 1), np.float32)
    else:
        zraw = np.asarray(zero_points, np.uint8).reshape(-1)
        cols = -(-nb * bits // 8)
        if zraw.size != N * cols:
            raise ModelError("zero_points", f"must hold N * ceil(k_blocks * bits / 8) = {N * cols} bytes", zraw.size)
        zp = np.stack([(zraw >> (bits * i)) & mask for i in range(per)], axis=-1).reshape(N, cols * per)[:, :nb]
        zp = zp.astype(np.float32)
    rows = np.repeat(np.arange(nb), block_size)[:K]
    deq = (codes.astype(np.float32) - zp[:, rows]) * sc[:, rows]
    return np.ascontiguousarray(deq.T)
