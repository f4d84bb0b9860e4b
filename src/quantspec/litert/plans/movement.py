"""Plans of the data-movement operators: RESHAPE, SQUEEZE, PAD, PADV2, GATHER, CONCATENATION, TRANSPOSE."""

from __future__ import annotations

import math

import numpy as np

from .base import Plan, jitted

__all__ = ["ReshapePlan", "PadPlan", "GatherPlan", "ConcatPlan", "TransposePlan", "reshape_plan", "pad_plan",
           "gather_plan", "concat_plan", "transpose_plan"]


class ReshapePlan(Plan):
    """RESHAPE / SQUEEZE: a view of the input with the output's shape."""

    __slots__ = ("shape",)

    def compute(self, unused, arrays):
        return [arrays[0].reshape(self.shape)]


def reshape_plan(kernel, p, ins, outs):
    if getattr(p, "output_shape", None) is None:
        return None
    plan = ReshapePlan(kernel, p)
    plan.shape = tuple(p.output_shape)
    return plan


class PadPlan(Plan):
    """PAD / PADV2 with constant paddings and pad value: a copy of the output filled with the pad
    value, the input written into its inner block."""

    __slots__ = ("filled", "inner")

    def compute(self, unused, arrays):
        out = self.filled.copy()
        out[self.inner] = arrays[0]
        return [out]


def pad_plan(kernel, p, ins, outs):
    x = ins[0]
    if p.paddings is None or p.pad_value is None or x is None or len(x.shape) != p.paddings.shape[0]:
        return None
    shape = tuple(int(d) + int(a) + int(b) for d, (a, b) in zip(x.shape, p.paddings))
    if math.prod(shape) > (1 << 22):
        return None                 # a large output: the kernel (no copy of it kept)
    plan = PadPlan(kernel, p)
    plan.filled = np.full(shape, p.pad_value, np.dtype(x.dtype.dtype))
    plan.filled.setflags(write=False)
    plan.inner = tuple(slice(int(a), int(a) + int(d)) for d, (a, _) in zip(x.shape, p.paddings))
    return plan


class GatherPlan(Plan):
    """GATHER without batch dimensions: one pass that checks the positions and copies the slices."""

    __slots__ = ("geometry", "dtype", "size", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.size, self.dtype)
        x = arrays[0]
        if x is None:
            x = self.prepared.consts[0]
        pos = arrays[1] if arrays[1] is not None else self.prepared.consts[1]
        outer, size, inner = self.geometry
        if jitted().gather(np.asarray(x).reshape(-1), np.asarray(pos).reshape(-1), outer, size, inner, out):
            return self.reference(arrays)               # a position out of range: the kernel raises
        return [out.reshape(self.shape)]


def gather_plan(kernel, p, ins, outs):
    x, pos = ins[0], ins[1]
    if p.batch_dims != 0 or x is None or pos is None or pos.dtype.name not in ("int16", "int32", "int64"):
        return None
    xs, ps = tuple(x.shape), tuple(pos.shape)
    axis = p.axis
    shape = (*xs[:axis], *ps, *xs[axis + 1:])
    if math.prod(shape) == 0 or xs[axis] == 0:
        return None
    plan = GatherPlan(kernel, p)
    plan.geometry = (math.prod(xs[:axis]), xs[axis], math.prod(xs[axis + 1:]))
    plan.dtype = np.dtype(x.dtype.dtype)
    plan.size = math.prod(shape)
    plan.shape = shape
    return plan


class ConcatPlan(Plan):
    """CONCATENATION (every input with the output's parameters: the kernel copies): numpy's
    concatenation of the inputs, without the kernel's per-input lookups."""

    __slots__ = ("axis",)

    def compute(self, unused, arrays):
        if any(a is None for a in arrays):
            return self.reference(arrays)               # an input the kernel takes from its constants
        return [np.concatenate(arrays, axis=self.axis)]


def concat_plan(kernel, p, ins, outs):
    if p.scalar_constants or any(t is None or t.dtype is None for t in ins) or len(ins) != p.count:
        return None
    plan = ConcatPlan(kernel, p)
    plan.axis = int(p.axis)
    return plan


class TransposePlan(Plan):
    """TRANSPOSE with a constant permutation: numpy's copy of the permuted view."""

    __slots__ = ("perm",)

    def compute(self, unused, arrays):
        return [np.ascontiguousarray(arrays[0].transpose(self.perm))]


def transpose_plan(kernel, p, ins, outs):
    if p.perm is None or ins[0] is None or len(p.perm) != len(ins[0].shape):
        return None
    plan = TransposePlan(kernel, p)
    plan.perm = tuple(int(a) for a in p.perm)
    return plan
