"""BATCH_MATMUL, int8 and int16 (``tflite/kernels/batch_matmul.cc``,
``tflite/kernels/internal/reference/batch_matmul.h``).

Per batch (the leading dimensions broadcast, numpy-style, up to rank 5), with ``adj_x`` / ``adj_y``
transposing the last two dimensions of the left / right operand first::

    acc[r, c] = Σ_k (lhs[r, k] - z_lhs) · (rhs[k, c] - z_rhs)        int32 (int8), int64 (int16)
    out[r, c] = clamp(MBQM(acc, M, e) + z_out)                        int8 or int16 range

``(M, e) = QuantizeMultiplier(double(f32(s_lhs · s_rhs)) / double(s_out))`` — the product of the
scales in float32 (``GetQuantizedConvolutionMultipler``).  int8 uses the double-rounding int32
``MultiplyByQuantizedMultiplier`` (the accumulator wraps like a C ``int32_t``), int16 the int64
overload (``MultiplyByQuantizedMultiplier(int64, ...)``, one rounding).  int8 operands with an
int32 output give the raw product of the codes (``Σ lhs·rhs``: the zero points play no part).  int16 operands (an int16 left operand with an int16 or
int8 right one) need zero points 0; LiteRT rejects others at prepare.  Ranks 2 to 5, and the
accumulation depths must match.

The products run on the exact float BLAS GEMM of :mod:`.._gemm`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InvalidArgumentError, ShapeError, UnsupportedError
from .. import fixedpoint as fp
from .._gemm import matmul_exact
from ..fixedpoint import mbqm, mbqm_int64, wrap_int32
from . import _common as c
from .base import Kernel, register

__all__ = ["BatchMatMul"]


@dataclass(frozen=True, eq=False)
class BatchMatMulParams:
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    dtypes: tuple[np.dtype, np.dtype]
    output_shape: tuple[int, ...]
    output_dtype: np.dtype
    adj_x: bool
    adj_y: bool
    zero_points: tuple[int, int, int]
    multiplier: int
    shift: int
    bounds: tuple[int, int]
    wide: bool                      # int16: int64 accumulator and requantization
    quantized_output: bool


def _output_shape(op: str, a: tuple[int, ...], b: tuple[int, ...], adj_x: bool, adj_y: bool) -> tuple[int, ...]:
    rank = max(len(a), len(b))
    ea = (1,) * (rank - len(a)) + tuple(a)
    eb = (1,) * (rank - len(b)) + tuple(b)
    batch = []
    for i in range(rank - 2):
        da, db = ea[i], eb[i]
        if da != db and da != 1 and db != 1:
            raise c.limit("batch-matmul-shape", ShapeError(
                f"{op} inputs", "batch dimensions do not broadcast (LiteRT rejects the model at prepare)",
                (tuple(a), tuple(b))))
        batch.append(db if da == 1 else da)
    k_a = ea[-2] if adj_x else ea[-1]
    k_b = eb[-1] if adj_y else eb[-2]
    if k_a != k_b:
        raise c.limit("batch-matmul-shape", ShapeError(
            f"{op} inputs", "accumulation depths differ (LiteRT rejects the model at prepare)", (k_a, k_b)))
    rows = ea[-1] if adj_x else ea[-2]
    cols = eb[-2] if adj_y else eb[-1]
    return tuple(batch) + (rows, cols)


@register
class BatchMatMul(Kernel):
    """BATCH_MATMUL of two quantized tensors (the reference kernel)."""

    name = "BATCH_MATMUL"

    def prepare(self, inputs, outputs, options):
        op = self.name
        lhs, rhs = c.count(op, inputs, outputs, 2, names=("lhs", "rhs"))
        o = outputs[0]
        c.require_type(op, [("lhs", lhs)], ("int8", "int16"))
        allowed_rhs = ("int8",) if lhs.dtype.name == "int8" else ("int16", "int8")
        c.require_type(op, [("rhs", rhs)], allowed_rhs)
        wide = lhs.dtype.name == "int16"
        c.require_type(op, [("output", o)], ("int16",) if wide else ("int8", "int32"))
        for name, t in (("lhs", lhs), ("rhs", rhs)):
            if not 2 <= len(t.shape) <= 5:
                raise c.limit("batch-matmul-shape", ShapeError(
                    f"{op} {name}", "must have rank 2 to 5 (LiteRT rejects the model at prepare)", tuple(t.shape)))
        adj_x = c.option(options, "adj_x", False, kind=bool)
        adj_y = c.option(options, "adj_y", False, kind=bool)
        shape = _output_shape(op, tuple(lhs.shape), tuple(rhs.shape), adj_x, adj_y)
        quantized_output = o.dtype.name != "int32"
        z_l = z_r = z_o = 0               # an int32 output is the raw product of the codes
        multiplier = shift = 0
        if quantized_output:
            s_l, z_l = c.activation(op, "lhs", lhs)
            s_r, z_r = c.activation(op, "rhs", rhs)
            s_o, z_o = c.activation(op, "output", o)
            with np.errstate(all="ignore"):
                real = float(np.float64(np.float32(s_l) * np.float32(s_r)) / np.float64(s_o))
            if not np.isfinite(real):
                raise UnsupportedError(f"{op} scales", "give a non-finite multiplier s_lhs * s_rhs / s_out", real)
            multiplier, shift = fp.quantize_multiplier(real)
            if shift > (7 if wide else 30):
                raise c.limit("multiplier-shift", UnsupportedError(
                    f"{op} scales", "a multiplier this large needs a left shift LiteRT's MultiplyByQuantizedMultiplier "
                    "does not define", real))
        if wide and (z_l, z_r, z_o) != (0, 0, 0):
            raise c.limit("int16-zero-point", InvalidArgumentError(
                f"{op} zero points", "must be 0 for int16 (LiteRT rejects the model at prepare)", (z_l, z_r, z_o)))
        bounds = (int(o.dtype.qmin), int(o.dtype.qmax)) if quantized_output else (-(1 << 31), (1 << 31) - 1)
        return BatchMatMulParams((tuple(lhs.shape), tuple(rhs.shape)),
                                 (np.dtype(lhs.dtype.name), np.dtype(rhs.dtype.name)), shape,
                                 np.dtype(o.dtype.name), adj_x, adj_y, (z_l, z_r, z_o), multiplier, shift, bounds,
                                 wide, quantized_output)

    def compute(self, p: BatchMatMulParams, arrays):
        lhs, rhs = c.check_arrays(self.name, arrays, [(0, p.shapes[0], p.dtypes[0]), (1, p.shapes[1], p.dtypes[1])])
        z_l, z_r, z_o = p.zero_points
        a = lhs.astype(np.float32) - np.float32(z_l)          # exact: |.| <= 2^16
        b = rhs.astype(np.float32) - np.float32(z_r)
        if p.adj_x:
            a = np.swapaxes(a, -1, -2)
        if p.adj_y:
            b = np.swapaxes(b, -1, -2)
        bound_a = int(max(abs(int(np.iinfo(p.dtypes[0]).min) - z_l), abs(int(np.iinfo(p.dtypes[0]).max) - z_l)))
        bound_b = int(max(abs(int(np.iinfo(p.dtypes[1]).min) - z_r), abs(int(np.iinfo(p.dtypes[1]).max) - z_r)))
        acc = matmul_exact(a, b, bound_a, bound_b).reshape(p.output_shape)
        if not p.quantized_output:
            return [wrap_int32(acc).astype(np.int32)]
        if p.wide:
            y = mbqm_int64(acc, p.multiplier, p.shift)
        else:
            y = mbqm(wrap_int32(acc), p.multiplier, p.shift)
        y = wrap_int32(y + z_o)
        return [np.clip(y, *p.bounds).astype(p.output_dtype)]
