"""Plans of FULLY_CONNECTED: the GEMM and epilogue, or one numba pass for a small int8 layer."""

from __future__ import annotations

import math

import numpy as np

from .base import Plan, Requant, Scratch, bind, exact_chunks, exact_gemm, own

__all__ = ["FullyConnectedPlan", "SmallFullyConnectedPlan", "SMALL_FC", "fc_plan"]


class FullyConnectedPlan(Plan):
    """FULLY_CONNECTED (constant weights, symmetric filter): the rows converted, GEMM, epilogue."""

    __slots__ = ("rows", "depth", "units", "weights", "chunks", "requant", "scratch", "shape", "split")

    def __init__(self, kernel, p, chunks, requant, split):
        super().__init__(kernel, p)
        self.rows, self.depth, self.units = p.rows, p.depth, p.units
        self.weights = p.weights
        self.chunks = chunks
        self.requant = requant
        self.shape = p.output_shape
        self.split = split
        m = p.rows * (2 if split else 1)
        shapes = [((m, p.depth), np.float32), ((m, p.units), np.float32)]
        if len(chunks) > 1:
            shapes.append(((m, p.units), np.float64))
        self.scratch = Scratch(shapes)

    def compute(self, unused, arrays):
        x = arrays[0].reshape(-1)[: self.rows * self.depth].reshape(self.rows, self.depth)
        bufs, owned = self.scratch.take()
        try:
            a = bufs[0]
            if self.split:
                xi = x.astype(np.int32)
                np.right_shift(xi, 8, out=xi)
                np.copyto(a[: self.rows], xi)
                np.bitwise_and(x, 255, out=xi)
                np.copyto(a[self.rows:], xi)
            else:
                np.copyto(a, x)
            g = exact_gemm(a, self.weights, self.chunks, bufs[1], bufs[2] if len(bufs) > 2 else None)
            out = self.requant.run(g, self.split, self.rows, self.units)
        finally:
            self.scratch.give(owned)
        return [out.reshape(self.shape)]


#: an int8 FULLY_CONNECTED of at most this many multiply-adds runs as one numba pass
#: (:class:`SmallFullyConnectedPlan`); a larger one, the float32 GEMM
SMALL_FC = 1 << 16


class SmallFullyConnectedPlan(Plan):
    """int8 FULLY_CONNECTED of a small layer (a transformer's 16 x 32 x 32): the exact integer sums and
    the requantization in one numba call (:func:`~quantspec.litert._jitted_plans.fc8`), where the float32 conversion,
    the BLAS call and the epilogue cost more than the arithmetic."""

    __slots__ = ("w", "corr", "eff", "zo", "lo", "hi", "size", "shape", "scratch")

    def __init__(self, kernel, p, corr):
        super().__init__(kernel, p)
        self.w = own(p.weights, np.float32).reshape(-1)          # (depth, units)
        self.scratch = Scratch([((p.units,), np.float32)])
        self.corr = own(np.broadcast_to(np.asarray(corr, np.int64), (p.units,)))
        self.eff = own(np.broadcast_to(np.asarray(p.effective_scale, np.float64), (p.units,)))
        self.zo, self.lo, self.hi = int(p.output_zero_point), int(p.act_min), int(p.act_max)
        self.size = p.rows * p.units
        self.shape = tuple(p.output_shape)

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        bufs, owned = self.scratch.take()
        try:
            args = (arrays[0].reshape(-1), self.w, self.corr, self.eff, self.zo, self.lo, self.hi, bufs[0], out)
            entry = self.entry
            if entry is None:
                entry = self.entry = bind("fc8", args)
            entry(*args)
        finally:
            self.scratch.give(owned)
        return [out.reshape(self.shape)]


def fc_plan(kernel, p, ins, outs):
    from .. import _jitted_plans as K

    if p.weights is None or p.depth == 0 or p.filter_zero_point != 0 or (p.has_bias and p.bias is None):
        return None
    if math.prod(p.output_shape) == 0 or p.rows == 0:
        return None
    if p.wide and p.input_zero_point != 0:
        return None
    split = p.wide
    chunks = exact_chunks(p.depth, 255 if split else max(128, abs(p.input_zero_point)), p.weight_bound)
    if chunks is None:
        return None
    bias = np.zeros(p.units, np.int64) if p.bias is None else p.bias.astype(np.int64)
    corr = bias - np.int64(p.input_zero_point) * p.weight_sums
    if not split and len(chunks) == 1 and p.rows * p.depth * p.units <= SMALL_FC and ins[0].dtype.name == "int8":
        return SmallFullyConnectedPlan(kernel, p, corr)
    int32_acc = p.bias_int32 or not p.wide
    kind = K.DOUBLE32 if int32_acc else K.DOUBLE64
    requant = Requant(p.units, corr, kind, p.output_zero_point, p.act_min, p.act_max,
                       np.int16 if p.wide else np.int8, eff=p.effective_scale)
    return FullyConnectedPlan(kernel, p, chunks, requant, split)
