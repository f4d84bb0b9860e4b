"""IEEE arithmetic as TensorFlow's CPU kernels execute it.

TensorFlow runs its CPU kernels with the x86 MXCSR flags FTZ and DAZ set: a subnormal operand
counts as a zero of the same sign, and a subnormal result becomes a zero of the same sign.  numpy
has no such mode, so every operation here is an ordinary numpy operation in the operands' own
precision (float32 or float64, never promoted) followed by :func:`ftz`.  Inputs are flushed once
on entry (:func:`ftz` again), which is what DAZ does to them.

The C++ comparison idioms matter where NaN or signed zeros meet: ``std::min(a, b)`` is
``b < a ? b : a`` and ``std::max(a, b)`` is ``a < b ? b : a`` (the first argument wins ties and
NaN comparisons), and Eigen's ``cwiseMin``/``cwiseMax`` behave the same with the tensor element
as the first argument.  Float-to-integer conversions are the x86 truncating conversions, whose
"integer indefinite" result for NaN and out-of-range values is the most negative integer.

No operation here is ever fused (no FMA): TensorFlow's x86 pip build does not contract them.
"""

from __future__ import annotations

import numpy as np

from .._semantics.intcast import cvtt_int32, cvtt_int64
from .._semantics.rounding import flush_denormals

__all__ = ["ftz", "fadd", "fsub", "fmul", "fdiv", "std_min", "std_max", "clamp",
           "cvtt_int32", "cvtt_int64", "F32_MAX"]

F32_MAX = np.float32(np.finfo(np.float32).max)
_F64_TINY = np.finfo(np.float64).tiny


def ftz(x):
    """Flush subnormal float32/float64 values to a zero of the same sign (dtype kept)."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        return flush_denormals(x)
    if x.dtype == np.float64:
        with np.errstate(invalid="ignore"):
            tiny = np.abs(x) < _F64_TINY
        if np.any(tiny):
            x = np.where(tiny, np.copysign(0.0, x), x)
        return x
    raise TypeError(f"ftz: float32 or float64 expected, got {x.dtype}")  # internal misuse


def _checked(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:  # internal misuse: the precision must be explicit, never promoted
        raise TypeError(f"mixed precision {a.dtype} and {b.dtype}")
    return a, b


def fadd(a, b):
    a, b = _checked(a, b)
    with np.errstate(all="ignore"):
        return ftz(np.add(a, b))


def fsub(a, b):
    a, b = _checked(a, b)
    with np.errstate(all="ignore"):
        return ftz(np.subtract(a, b))


def fmul(a, b):
    a, b = _checked(a, b)
    with np.errstate(all="ignore"):
        return ftz(np.multiply(a, b))


def fdiv(a, b):
    a, b = _checked(a, b)
    with np.errstate(all="ignore"):
        return ftz(np.divide(a, b))


def std_min(a, b):
    """``std::min(a, b)``: ``b < a ? b : a``."""
    with np.errstate(invalid="ignore"):
        return np.where(np.asarray(b) < np.asarray(a), b, a)


def std_max(a, b):
    """``std::max(a, b)``: ``a < b ? b : a``."""
    with np.errstate(invalid="ignore"):
        return np.where(np.asarray(a) < np.asarray(b), b, a)


def clamp(x, lo, hi):
    """Eigen's ``x.cwiseMin(hi).cwiseMax(lo)``: NaN in x propagates, x wins ties (so -0.0
    survives), and when lo > hi the result is lo."""
    return std_max(std_min(x, hi), lo)


