"""Plan of BATCH_MATMUL (quantized output): one batched float32 GEMM and the epilogue."""

from __future__ import annotations

import math

import numpy as np

from .._gemm import F32_EXACT
from .base import Plan, Requant, Scratch

__all__ = ["BatchMatMulPlan", "batch_matmul_plan"]


class BatchMatMulPlan(Plan):
    """BATCH_MATMUL (quantized int8 output): both operands offset by their zero points in float32,
    one batched GEMM (exact: depth within one chunk), the epilogue."""

    __slots__ = ("zl", "zr", "requant", "cols", "rows", "scratch")

    def __init__(self, kernel, p, requant):
        super().__init__(kernel, p)
        self.zl, self.zr = np.float32(p.zero_points[0]), np.float32(p.zero_points[1])
        self.requant = requant
        self.cols = p.output_shape[-1]
        self.rows = math.prod(p.output_shape) // self.cols
        # the operands offset in float32 and the product, kept between runs
        self.scratch = Scratch([(tuple(p.shapes[0]), np.float32), (tuple(p.shapes[1]), np.float32),
                                 (tuple(p.output_shape), np.float32)])

    def compute(self, unused, arrays):
        p = self.prepared
        bufs, owned = self.scratch.take()
        try:
            a, b, g = bufs
            np.subtract(arrays[0], self.zl, out=a)          # exact: integers of at most 2^8 in float32
            np.subtract(arrays[1], self.zr, out=b)
            if p.adj_x:
                a = np.swapaxes(a, -1, -2)
            if p.adj_y:
                b = np.swapaxes(b, -1, -2)
            np.matmul(a, b, out=g)
            out = self.requant.run(g, False, self.rows, self.cols)
        finally:
            self.scratch.give(owned)
        return [out.reshape(p.output_shape)]


def batch_matmul_plan(kernel, p, ins, outs):
    from .. import _jitted_plans as K

    if p.wide or not p.quantized_output or math.prod(p.output_shape) == 0:
        return None
    depth = p.shapes[0][-2] if p.adj_x else p.shapes[0][-1]
    bounds = [max(abs(-128 - z), abs(127 - z)) for z in p.zero_points[:2]]
    if depth * bounds[0] * bounds[1] > F32_EXACT:
        return None
    cols = p.output_shape[-1]
    requant = Requant(cols, 0, K.MBQM32, p.zero_points[2], p.bounds[0], p.bounds[1], p.output_dtype,
                       multiplier=p.multiplier, shift=p.shift)
    return BatchMatMulPlan(kernel, p, requant)
