"""int8 comparisons: LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL
(``K/comparisons.cc``, ``reference_ops::ComparisonWithScaling``).

The inputs may have different scales and zero points.  Each is brought to a common fixed-point
scale before the integer comparison::

    (M_i, e_i) = QuantizeMultiplierSmallerThanOneExp(s_i)     if s_i < 1
               = QuantizeMultiplierGreaterThanOne(s_i)        otherwise (s_i == 1.0 aborts LiteRT)
    v_i = MultiplyByQuantizedMultiplierSmallerThanOneExp((q_i - z_i) << 8, M_i, e_i)
    out = v_1 OP v_2                                          # bool, broadcast

For ``s_i > 1`` LiteRT calls the rounding shift with a negative exponent (undefined behaviour); the
value every code path agrees on is +-1 (see :func:`._common.rdbpot_signed_exponent`), which quantspec
returns, raising where the paths could differ.  LiteRT computes the multipliers in Eval; quantspec
does it (and raises) in prepare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import RangeError, UnsupportedError
from .. import fixedpoint as fp
from ..fixedpoint import srdhm, wrap_int32
from . import _common as c
from .base import Kernel, register

__all__ = ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"]

_INT8 = np.dtype(np.int8)
LEFT_SHIFT = 8


@dataclass(frozen=True)
class ComparisonParams:
    op: str
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    output_shape: tuple[int, ...]
    offsets: tuple[int, int]
    multipliers: tuple[int, int]
    shifts: tuple[int, int]


def _multiplier(op: str, which: str, scale: np.float32) -> tuple[int, int]:
    s = float(scale)
    if s < 1.0:
        return fp.quantize_multiplier_smaller_than_one_exp(s)
    try:
        return fp.quantize_multiplier_greater_than_one(s)
    except RangeError:
        raise c.limit("comparison-scale-one", UnsupportedError(
            f"{op} {which} scale", "a scale of exactly 1.0 makes LiteRT abort (QuantizeMultiplierGreaterThanOne "
            "CHECK)", s)) from None


class _Comparison(Kernel):
    compare = staticmethod(np.less)

    def prepare(self, inputs, outputs, options):
        op = self.name
        x, y, _, ((s1, z1), (s2, z2)) = c.binary_operands(op, inputs, outputs, output_type=None)
        m1, e1 = _multiplier(op, "input 0", s1)
        m2, e2 = _multiplier(op, "input 1", s2)
        return ComparisonParams(op, (tuple(x.shape), tuple(y.shape)), c.broadcast_shape(op, x.shape, y.shape),
                                (z1, z2), (m1, m2), (e1, e2))

    def compute(self, p: ComparisonParams, arrays):
        x, y = c.check_arrays(p.op, arrays, [(0, p.shapes[0], _INT8), (1, p.shapes[1], _INT8)])
        scaled = []
        for a, z, m, e in zip((x, y), p.offsets, p.multipliers, p.shifts):
            v = wrap_int32((a.astype(np.int64) - z) << LEFT_SHIFT)
            scaled.append(c.rdbpot_signed_exponent(srdhm(v, m), e, p.op))
        return [self.compare(scaled[0], scaled[1]).reshape(p.output_shape)]


def _comparison(op: str, cls_name: str, compare) -> type[_Comparison]:
    """Register the comparison kernel ``op``: :class:`_Comparison` with the numpy comparison ``compare``."""
    cls = type(cls_name, (_Comparison,), {
        "name": op, "compare": staticmethod(compare), "__module__": __name__, "__qualname__": cls_name,
        "__doc__": f"{op} on int8 inputs with their own parameters; bool output."})
    return register(cls)


Less = _comparison("LESS", "Less", np.less)
LessEqual = _comparison("LESS_EQUAL", "LessEqual", np.less_equal)
Greater = _comparison("GREATER", "Greater", np.greater)
GreaterEqual = _comparison("GREATER_EQUAL", "GreaterEqual", np.greater_equal)
Equal = _comparison("EQUAL", "Equal", np.equal)
NotEqual = _comparison("NOT_EQUAL", "NotEqual", np.not_equal)
