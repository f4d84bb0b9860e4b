"""Plans of QUANTIZE and DEQUANTIZE: a table of every input code, or the fast float32 -> int8 kernel."""

from __future__ import annotations

import math

import numpy as np

from ..._fastpath import jit
from .base import Plan
from .unary import UnaryTablePlan

__all__ = ["FloatQuantizePlan", "quantize_plan", "dequantize_plan"]


def _code_table_of(kernel, ins, outs, options) -> np.ndarray | None:
    """The output of ``kernel`` (an element-wise operator of one integer input) for every input code,
    in the order of the codes' unsigned view: the kernel prepared for one input holding every code
    and run on it (None where it refuses some code)."""
    from dataclasses import replace

    from ...errors import QuantSpecError

    dtype = np.dtype(ins[0].dtype.dtype)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    codes = np.arange(1 << (8 * dtype.itemsize), dtype=np.int64).astype(unsigned).view(dtype)
    flat = (codes.size,)
    try:
        with jit.reference_only():
            p = kernel.prepare([replace(ins[0], shape=flat, data=None)], [replace(outs[0], shape=flat, data=None)],
                               options)
            (table,) = kernel.compute(p, [codes])
    except QuantSpecError:
        return None
    table = np.ascontiguousarray(table).reshape(-1)
    table.setflags(write=False)
    return table


def quantize_plan(kernel, p, ins, outs, options):
    from ..kernels.quantize import FloatQuantizeParams, RequantizeParams

    if isinstance(p, RequantizeParams):
        if np.dtype(p.in_dtype).itemsize > 2 or math.prod(p.shape) == 0:
            return None
        table = _code_table_of(kernel, ins, outs, options)
        if table is None:
            return None
        return UnaryTablePlan(kernel, p, table, np.dtype(f"u{np.dtype(p.in_dtype).itemsize}"), None)
    if isinstance(p, FloatQuantizeParams) and p.params is not None and p.out_dtype == np.int8 and math.prod(p.shape):
        return FloatQuantizePlan(kernel, p)
    return None


class FloatQuantizePlan(Plan):
    """QUANTIZE float32 -> int8: the fast element-wise kernel of :mod:`quantspec.litert.fast`, whatever the size."""

    __slots__ = ("state",)

    def __init__(self, kernel, p):
        from .. import fast

        super().__init__(kernel, p)
        self.state = fast.quantize_prepared(p.shape, p.params)

    def compute(self, unused, arrays):
        from .. import fast

        out = np.empty(self.prepared.shape, np.int8)
        fast.run_prepared(arrays[0], out, self.state)
        return [out]


def dequantize_plan(kernel, p, ins, outs, options):
    if p.params.per_axis or np.dtype(p.dtype).itemsize > 2 or math.prod(p.shape) == 0:
        return None
    table = _code_table_of(kernel, ins, outs, options)
    if table is None:
        return None
    return UnaryTablePlan(kernel, p, table, np.dtype(f"u{np.dtype(p.dtype).itemsize}"), None)
