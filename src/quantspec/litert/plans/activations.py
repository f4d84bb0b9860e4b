"""Plan of int8 SOFTMAX: one numba pass per row."""

from __future__ import annotations

import math

import numpy as np

from .base import Plan, bind

__all__ = ["SoftmaxPlan", "softmax_plan"]


class SoftmaxPlan(Plan):
    """int8 SOFTMAX: one pass per row (the reference kernel where a row makes LiteRT abort)."""

    __slots__ = ("rows", "cols", "diff_min", "shape")

    def compute(self, unused, arrays):
        x = arrays[0]
        out = np.empty(self.shape, np.int8)
        p = self.prepared
        args = (x.reshape(-1), self.rows, self.cols, p.exps, p.terms, self.diff_min, out.reshape(-1))
        entry = self.entry
        if entry is None:
            entry = self.entry = bind("softmax8", args)
        if entry(*args):
            return self.reference(arrays)
        return [out]


def softmax_plan(kernel, p, ins, outs):
    if getattr(p, "terms", None) is None or not p.shape or math.prod(p.shape) == 0:
        return None
    plan = SoftmaxPlan(kernel, p)
    plan.cols = p.shape[-1]
    plan.rows = math.prod(p.shape) // plan.cols
    plan.diff_min = np.int64(p.diff_min)
    plan.shape = tuple(p.shape)
    return plan
