"""Plan of AVERAGE_POOL_2D and MAX_POOL_2D: one numba pass."""

from __future__ import annotations

import numpy as np

from .base import Plan, jitted, own

__all__ = ["PoolPlan", "pool_plan"]


class PoolPlan(Plan):
    """AVERAGE_POOL_2D / MAX_POOL_2D: one pass."""

    __slots__ = ("geometry", "counts", "average", "lo", "hi")

    def __init__(self, kernel, p, average):
        super().__init__(kernel, p)
        n, h, w, c = p.input_shape
        _, oh, ow, _ = p.output_shape
        kh, kw = p.filter_hw
        tmin = int(np.iinfo(p.dtype).min)
        self.geometry = np.array([n, h, w, c, kh, kw, oh, ow, *p.stride, *p.pad, tmin], np.int64)
        self.counts = own(p.counts, np.int64).reshape(-1) if average else np.ones(1, np.int64)
        self.average = average
        self.lo, self.hi = np.int64(p.act_min), np.int64(p.act_max)

    def compute(self, unused, arrays):
        p = self.prepared
        out = np.empty(p.output_shape, p.dtype)
        jitted().pool(arrays[0].reshape(-1), self.geometry, self.counts, self.average, self.lo, self.hi,
                      out.reshape(-1))
        return [out]


def pool_plan(kernel, p, ins, outs):
    if 0 in p.output_shape:
        return None
    average = kernel.name == "AVERAGE_POOL_2D"
    if average and p.counts is None:
        return None
    return PoolPlan(kernel, p, average)
