"""Plans of binary element-wise operators: int8 tables of every pair of codes, int16 ADD / SUB / MUL."""

from __future__ import annotations

import math

import numpy as np

from ..._fastpath import jit
from .base import Plan, bind, jitted

__all__ = ["PairTablePlan", "BinaryPlan", "binary_plan"]


def _broadcast_walk(x_shape, y_shape, out_shape):
    """(dims, x strides, y strides) of the output walked as at most four dimensions, the inputs'
    element strides 0 along their broadcast dimensions; None beyond four."""
    rank = len(out_shape)
    xs = (1,) * (rank - len(x_shape)) + tuple(x_shape)
    ys = (1,) * (rank - len(y_shape)) + tuple(y_shape)

    def strides(shape):
        st, acc = [], 1
        for d in reversed(shape):
            st.append(acc)
            acc *= d
        return list(reversed(st))

    sx, sy = strides(xs), strides(ys)
    dims = []
    for i, d in enumerate(out_shape):
        if d == 1:
            continue
        dims.append([d, sx[i] if xs[i] != 1 else 0, sy[i] if ys[i] != 1 else 0])
    merged: list[list[int]] = []
    for d, a, b in dims:
        if merged:
            pd, pa, pb = merged[-1]
            if pa == a * d and pb == b * d:         # the previous dimension continues this one
                merged[-1] = [pd * d, a, b]
                continue
        merged.append([d, a, b])
    if len(merged) > 4:
        return None
    merged = [[1, 0, 0]] * (4 - len(merged)) + merged
    return (np.array([m[0] for m in merged], np.int64), np.array([m[1] for m in merged], np.int64),
            np.array([m[2] for m in merged], np.int64))


class PairTablePlan(Plan):
    """A 65536-entry table by pair of int8 codes, gathered over the broadcast inputs."""

    __slots__ = ("table", "dims", "xs", "ys", "shape", "size")

    def __init__(self, kernel, p, table, walk, shape):
        super().__init__(kernel, p)
        self.table = table
        self.dims, self.xs, self.ys = walk if walk is not None else (None, None, None)
        self.shape = tuple(shape)
        self.size = math.prod(shape)

    def compute(self, unused, arrays):
        if self.dims is None:               # more than four dimensions that do not merge: numpy's broadcast
            x, y = np.broadcast_arrays(arrays[0].view(np.uint8), arrays[1].view(np.uint8))
            return [np.take(self.table, (x.astype(np.intp) << 8) | y).reshape(self.shape)]
        out = np.empty(self.size, np.int8)
        args = (arrays[0].reshape(-1).view(np.uint8), arrays[1].reshape(-1).view(np.uint8), self.table, self.dims,
                self.xs, self.ys, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = bind("gather2", args)
        entry(*args)
        return [out.reshape(self.shape)]


#: every pair of int8 codes, in the order of the index (x_u8 << 8) | y_u8
def _pairs():
    codes = np.arange(1 << 16, dtype=np.int64)
    x = (((codes >> 8) ^ 0x80) - 0x80).astype(np.int8)
    y = (((codes & 0xFF) ^ 0x80) - 0x80).astype(np.int8)
    return x, y


def _pair_table_of(kernel, ins, outs, options) -> np.ndarray | None:
    """The int8 result of ``kernel`` for every pair of codes (x, y): the kernel prepared for two
    inputs of 65536 elements with the operator's quantization and options and run on every pair;
    None where the reference kernel refuses some pair (LiteRT's undefined behaviour: the operator
    keeps its kernel, which raises where the data reaches it)."""
    from dataclasses import replace

    from ...errors import QuantSpecError

    x, y = _pairs()
    flat = (1 << 16,)
    try:
        with jit.reference_only():          # the numpy reference arithmetic (and no kernel to compile)
            p = kernel.prepare([replace(ins[0], shape=flat, data=None), replace(ins[1], shape=flat, data=None)],
                               [replace(outs[0], shape=flat, data=None)], options)
            (table,) = kernel.compute(p, [x, y])
    except QuantSpecError:
        return None
    table = np.ascontiguousarray(table, np.int8).reshape(-1)
    table.setflags(write=False)
    return table


class BinaryPlan(Plan):
    """int16 ADD / SUB / MUL: one pass over the broadcast inputs."""

    __slots__ = ("dims", "xs", "ys", "mul", "q", "shape", "size", "dtype")

    def __init__(self, kernel, p, walk, mul, q):
        super().__init__(kernel, p)
        self.dims, self.xs, self.ys = walk
        self.mul, self.q = mul, np.array(q, np.int64)
        self.shape = tuple(p.output_shape)
        self.size = math.prod(self.shape)
        self.dtype = p.dtype

    def compute(self, unused, arrays):
        out = np.empty(self.size, self.dtype)
        jitted().binary(arrays[0].reshape(-1), arrays[1].reshape(-1), self.dims, self.xs, self.ys, self.mul, self.q,
                        out)
        return [out.reshape(self.shape)]


def _binary16_plan(name, kernel, p, ins, outs):
    from ..kernels.elementwise import AddSubParams, MulParams

    walk = _broadcast_walk(tuple(ins[0].shape), tuple(ins[1].shape), tuple(p.output_shape))
    if walk is None or math.prod(p.output_shape) == 0:
        return None
    if isinstance(p, MulParams):
        q = (*p.offsets, 0, p.multiplier, p.shift, 0, 0, 0, 0, 0, p.output_zero_point, p.act_min, p.act_max)
        return BinaryPlan(kernel, p, walk, True, q)
    if isinstance(p, AddSubParams) and p.pot_shifts is None and p.shifts[2] <= 0:
        (m1, m2, mo), (e1, e2, eo) = p.multipliers, p.shifts
        q = (*p.offsets, p.left_shift, m1, e1, m2, e2, mo, eo, 1 if p.op == "ADD" else -1, p.output_zero_point,
             p.act_min, p.act_max)
        return BinaryPlan(kernel, p, walk, False, q)
    return None


def binary_plan(name, kernel, p, ins, outs, options):
    x, y = ins[0], ins[1]
    if x is None or y is None:
        return None
    if name in ("ADD", "SUB", "MUL") and x.dtype.name == "int16" and y.dtype.name == "int16" \
            and outs[0].dtype.name == "int16":
        return _binary16_plan(name, kernel, p, ins, outs)
    if outs[0].dtype.name != "int8" or x.dtype.name != "int8" or y.dtype.name != "int8":
        return None
    table = getattr(p, "table", None)
    if table is None:
        if getattr(p, "pot_shifts", None) is not None:
            return None
        table = _pair_table_of(kernel, ins, outs, options)
        if table is None:
            return None
    shape = tuple(p.shapes[0] if name == "PRELU" else p.output_shape)    # the kernel's, not the stored one
    return PairTablePlan(kernel, p, table, _broadcast_walk(tuple(x.shape), tuple(y.shape), shape), shape)
