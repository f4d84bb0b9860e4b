"""Plan of MEAN and SUM over adjacent constant axes: one numba pass."""

from __future__ import annotations

import math

import numpy as np

from .base import Plan, bind, jitted

__all__ = ["MeanPlan", "mean_plan"]


class MeanPlan(Plan):
    """MEAN / SUM over adjacent constant axes: one pass."""

    __slots__ = ("outer", "red", "inner", "n", "zin", "m", "e", "zo", "lo", "hi", "uread", "dtype", "shape")

    def compute(self, unused, arrays):
        x = arrays[0].reshape(-1)
        if self.uread:
            x = x.view(np.uint8)
        out = np.empty(self.outer * self.inner, self.dtype)
        args = (x, self.outer, self.red, self.inner, self.n, self.zin, self.m, self.e, self.zo, self.lo, self.hi, out)
        if x.itemsize != 1:
            jitted().mean(*args)
        else:
            entry = self.entry
            if entry is None:
                entry = self.entry = bind("mean", args)
            entry(*args)
        return [out.reshape(self.shape)]


def mean_plan(kernel, p, ins, outs):
    if p.axes is None or not p.axes or math.prod(p.shape) == 0:
        return None
    axes = sorted(p.axes)
    if axes != list(range(axes[0], axes[-1] + 1)):
        return None
    shape = p.shape
    n = math.prod(shape[a] for a in axes)
    if n == 0:
        return None
    plan = MeanPlan(kernel, p)
    plan.outer = math.prod(shape[:axes[0]])
    plan.red = n
    plan.inner = math.prod(shape[axes[-1] + 1:])
    plan.n = np.int64(n)
    m, e = p.multiplier, p.shift
    if p.op == "MEAN":
        sh = min(n.bit_length() - 1, 32, 31 + e)
        m = (m << sh) // n
        e = e - sh
    plan.m, plan.e = np.int64(m), np.int64(e)
    plan.zin, plan.zo = np.int64(p.input_zero_point), np.int64(p.output_zero_point)
    plan.uread = bool(p.reference_sum)
    if p.reference_sum:
        plan.lo, plan.hi = np.int64(0), np.int64(255)
    else:
        info = np.iinfo(p.dtype)
        plan.lo, plan.hi = np.int64(info.min), np.int64(info.max)
    plan.dtype = p.dtype
    plan.shape = tuple(1 if i in p.axes else d for i, d in enumerate(shape)) if p.keep_dims else \
        tuple(d for i, d in enumerate(shape) if i not in p.axes)
    return plan
