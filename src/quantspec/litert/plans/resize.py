"""Plan of int8 RESIZE_BILINEAR with a constant size: one numba pass."""

from __future__ import annotations

import numpy as np

from .base import Plan, bind, own

__all__ = ["ResizeBilinearPlan", "resize_plan"]


class ResizeBilinearPlan(Plan):
    """int8 RESIZE_BILINEAR with a constant size: one pass (:func:`~quantspec.litert._jitted_plans.resize8`) over the
    rows, columns and weights the kernel prepared."""

    __slots__ = ("dims", "axes", "size", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        (y0, y1, wy0, wy1), (x0, x1, wx0, wx1) = self.axes
        args = (arrays[0].reshape(-1), self.dims, y0, y1, wy0, wy1, x0, x1, wx0, wx1, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = bind("resize8", args)
        entry(*args)
        return [out.reshape(self.shape)]


def resize_plan(kernel, p, ins, outs):
    if p.plan is None or ins[0] is None or ins[0].dtype.name != "int8":
        return None
    oh, ow, ya, xa = p.plan
    n, h, w, c = p.input_shape
    if n * oh * ow * c == 0:
        return None
    plan = ResizeBilinearPlan(kernel, p)
    plan.dims = np.array([n, h, w, c], np.int64)
    plan.axes = tuple(tuple(own(a, np.int64) for a in axis) for axis in (ya, xa))
    plan.size = n * oh * ow * c
    plan.shape = (n, oh, ow, c)
    return plan
