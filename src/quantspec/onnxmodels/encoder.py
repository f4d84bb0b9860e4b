"""One weight quantized by a checkpoint scheme, in its ONNX layout.

The parameters and codes are computed by the checkpoint package's own encoders
(:func:`quantspec.checkpoint.encode.encode_rows`: its fused kernels, or its numpy reference path when
the fast path is off) on the weight's rows in the checkpoint layout ``[out, in]``
(:mod:`.weights`), a slab of rows at a time; for an in-out weight (``[K, N]``) a slab is a block of
columns, transposed on the way in and its codes and parameters transposed back on the way out.  Nothing
is derived here: the bytes are the checkpoint's, laid out as ONNX DequantizeLinear takes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._fastpath import jit
from .._semantics.packing import packed_size, unpack_codes
from ..checkpoint import reference
from ..checkpoint.backend import LocalBackend
from ..checkpoint.encode import encode_rows
from ..checkpoint.report import TensorReport
from ..checkpoint.schemes import Scheme
from ..dtypes import qtype
from ..errors import RangeError
from .weights import Layout

__all__ = ["Quantized", "quantize_weight", "run_slabs", "non_finite_error", "transpose_into", "SLAB_BYTES"]

#: source bytes per slab of rows (about)
SLAB_BYTES = 16 << 20


@dataclass
class Quantized:
    """A weight's codes, scale and zero point (None for symmetric schemes) as ONNX arrays (ml_dtypes
    types for sub-byte, float8 and float8e8m0 values, unpacked), the DequantizeLinear attributes, and
    the error of the dequantized values against the weight (``rel_rms``, ``max_abs``)."""

    codes: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray | None
    attributes: dict
    rel_rms: float
    max_abs: float


def _typed(buf: np.ndarray, type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The values of an encoder output (its stored bytes; packed for sub-byte types), a view of ``buf``
    or a new array.  A sub-byte value is held in its byte as its bit pattern in the low bits, as
    ml_dtypes holds it (what :func:`quantspec.onnx.unpack` gives)."""
    t = qtype(type_name)
    data = np.ascontiguousarray(buf).reshape(-1).view(np.uint8)
    n = math.prod(shape)
    if t.is_packed:
        return unpack_codes(data[:packed_size(n, t.bits)], t.bits, n).view(t.dtype).reshape(shape)
    return data[:n * t.dtype.itemsize].view(t.dtype).reshape(shape)


#: the side of the square tiles an in-out weight is transposed in (numpy copies a transposed view
#: element by element; a tile's rows stay in cache)
TILE = 64
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def _jitted():
    """The kernel module (:func:`quantspec._fastpath.jit.load` imports its module once; a thread that asks while
    another imports it waits for the import to finish)."""
    return jit.load("quantspec.onnxmodels._jitted")


def transpose_into(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst[...] = src.T`` for 2-D arrays (strided views allowed): the fused kernel, or a tile at a
    time in numpy when the fast path is off."""
    if jit.enabled() and src.dtype.itemsize in _BITS and src.size >= TILE * TILE:
        bits = _BITS[src.dtype.itemsize]
        _jitted().transpose(np.asarray(src).view(bits), np.asarray(dst).view(bits))
        return
    rows, cols = src.shape
    for i in range(0, rows, TILE):
        for j in range(0, cols, TILE):
            dst[j:j + TILE, i:i + TILE] = src[i:i + TILE, j:j + TILE].T


def _finite_range(w: np.ndarray, name: str, path: str) -> tuple[float, float]:
    """The float32 minimum and maximum of the weight (a per-tensor scheme's range), scanned in its own
    layout a slab at a time."""
    flat = w.reshape(w.shape[0], -1)
    step = max(1, SLAB_BYTES // max(1, flat.shape[1] * w.dtype.itemsize))
    mn, mx = np.inf, -np.inf
    for r0 in range(0, flat.shape[0], step):
        x = np.asarray(flat[r0:r0 + step], np.float32)
        finite = np.isfinite(x)
        if not finite.all():
            k = r0 * flat.shape[1] + int(np.argmin(finite.reshape(-1)))
            raise non_finite_error(name, path, np.unravel_index(k, w.shape))
        mn, mx = min(mn, float(x.min())), max(mx, float(x.max()))
    return mn, mx


def non_finite_error(name: str, path: str, index) -> RangeError:
    where = ", ".join(str(int(i)) for i in index)
    return RangeError("src", f"weight {name!r} holds NaN or infinity (at [{where}]); quantization parameters cannot "
                      "be chosen from it", path,
                      detail="nothing was written; keep the tensor (--exclude NAME, or a recipe rule with scheme 'keep')")


def _first_non_finite(x: np.ndarray, row: int, r0: int, layout: Layout, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The ONNX index of the first NaN or infinity in row ``row`` of the slab ``x`` (rows from ``r0``)."""
    j = int(np.argmin(np.isfinite(np.asarray(x[row], np.float32))))
    if layout.transposed:
        return (j, r0 + row)
    return tuple(np.unravel_index((r0 + row) * x.shape[1] + j, shape))


def encode_slab(s: Scheme, w: np.ndarray, dtype: str, layout: Layout, r0: int, r1: int, params: tuple | None = None,
                name: str = "", path: str = ""):
    """Rows ``r0:r1`` of the weight ``w`` (its ONNX shape; ``dtype``: float, float16 or bfloat16) in the checkpoint layout ``[out, in]``, encoded
    by scheme ``s`` (``params``: a per-tensor scheme's scale and zero point).  Returns ``(x, codes,
    scale, zero_point, stats)``: the rows as read (``[r1 - r0, cols]``, the weight's type), their
    codes, their scale and zero point rows (None for a per-tensor scheme; zero point None when
    symmetric) and ``[sum (x-dq)^2, sum x^2, max |x-dq|]``.  A NaN or infinity is a RangeError naming its
    ONNX index."""
    shape = tuple(w.shape)
    rows = layout.rows(w)
    cols = rows.shape[1]
    if layout.transposed:           # rows r0:r1 of B^T: columns r0:r1 of B
        x = np.empty((r1 - r0, cols), w.dtype)
        transpose_into(w[:, r0:r1], x)
    else:
        x = np.ascontiguousarray(rows[r0:r1])
    out, stats = encode_rows(s, dtype, x.reshape(-1).view(np.uint8), r1 - r0, cols, params,
                             name=name, path=path)
    if stats[3] >= 0:
        raise non_finite_error(name, path, _first_non_finite(x, int(stats[3]), r0, layout, shape))
    got = _typed(out["codes"], s.codes, (r1 - r0, cols))
    sc = zp = None
    if s.granularity != "tensor":
        sub = (r1 - r0, *((-(-cols // s.block),) if s.granularity == "block" else ()))
        sc = _typed(out["scale"], s.scale_type, sub)
        if s.zero_point:
            zp = _typed(out["zero_point"], s.codes, sub)
    return x, got, sc, zp, stats[:3].copy()


def run_slabs(slab, starts: range, workers: int | None = None) -> np.ndarray:
    """``slab(start)`` for each start, on ``workers`` threads (default: the cores) when there are
    several; each returns [sum (x-dq)^2, sum x^2, max |x-dq|], and the result is their sums and maximum."""
    acc = np.zeros(3)

    def add(stats: np.ndarray) -> None:
        acc[0] += stats[0]
        acc[1] += stats[1]
        acc[2] = max(acc[2], stats[2])

    if len(starts) > 1 and (workers or 2) > 1:
        pool = LocalBackend(workers)
        try:
            pool.map(slab, starts, lambda _, stats: add(stats))
        finally:
            pool.close()
    else:
        for start in starts:
            add(slab(start))
    return acc


def quantize_weight(s: Scheme, w: np.ndarray, dtype: str, layout: Layout, name: str, path: str = "",
                    workers: int | None = None) -> Quantized:
    """Quantize the weight ``w`` (its ONNX shape; ``dtype``: float, float16 or bfloat16) by scheme ``s``.

    Slabs of about :data:`SLAB_BYTES` run on ``workers`` threads (default: the cores) when there
    are several; each writes its own rows of the outputs."""
    shape = tuple(w.shape)
    rows = layout.rows(w)
    nrows, cols = rows.shape
    step = max(1, SLAB_BYTES // max(1, cols * w.dtype.itemsize))
    params = None
    if s.granularity == "tensor":
        scale, zp = reference.tensor_params(s, *_finite_range(w, name, path))
        params = (float(scale), int(zp))
    t = qtype(s.codes)
    codes = np.empty(shape, t.dtype)
    codes_rows = layout.rows(codes)                 # a view: slabs write through it
    if s.granularity == "tensor":
        pshape_rows: tuple[int, ...] = ()
    elif s.granularity == "channel":
        pshape_rows = (nrows,)
    else:
        pshape_rows = (nrows, -(-cols // s.block))
    scale_rows = np.empty(pshape_rows, qtype(s.scale_type).dtype)
    zp_rows = np.empty(pshape_rows, t.dtype) if s.zero_point else None

    def slab(r0: int) -> np.ndarray:
        r1 = min(r0 + step, nrows)
        _, got, sc, zp, stats = encode_slab(s, w, dtype, layout, r0, r1, params, name, path)
        if layout.transposed:
            transpose_into(got, codes[:, r0:r1])
        else:
            codes_rows[r0:r1] = got
        if s.granularity != "tensor":
            scale_rows[r0:r1] = sc
            if zp_rows is not None:
                zp_rows[r0:r1] = zp
        return stats

    acc = run_slabs(slab, range(0, nrows, step), workers)
    if s.granularity == "tensor":
        scale = np.asarray(np.float32(params[0]))
        zp = np.asarray(params[1], t.dtype) if s.zero_point else None
    else:
        # blocks of an in-out weight: [N, nb] rows -> [nb, N]; a channel's scale is 1-D either way
        scale = np.ascontiguousarray(scale_rows.T) if layout.transposed else scale_rows
        zp = None if zp_rows is None else np.ascontiguousarray(zp_rows.T) if layout.transposed else zp_rows
        scale = scale.reshape(layout.param_shape(s, shape))
        zp = None if zp is None else zp.reshape(layout.param_shape(s, shape))
    rel, mx = TensorReport.errors(*acc)
    return Quantized(codes, scale, zp, layout.attributes(s), rel, mx)
