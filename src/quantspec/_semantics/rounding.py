"""Exact rounding rules, vectorised over numpy float arrays.

Every function rounds *exactly* as its name says, for every finite input, ties included, and
keeps the input's dtype (so the caller decides the precision).  None of them uses the
``floor(x + 0.5)`` trick, which is inexact: in float32, ``0.49999997 + 0.5`` rounds to 1.0.

- :func:`half_to_even`: IEEE round-to-nearest-even (``np.rint``; ONNX, MLAS ``cvtps2dq``, TF
  ``HALF_TO_EVEN``).
- :func:`half_away_from_zero`: C ``std::round`` (LiteRT ``TfLiteRound``, TensorFlow Eigen
  ``.round()``, gemmlowp).
- :func:`flush_denormals`: flush-to-zero of float32 subnormals, keeping the sign (TensorFlow's CPU
  kernels run with FTZ/DAZ).
"""

from __future__ import annotations

import numpy as np

__all__ = ["half_to_even", "half_away_from_zero", "flush_denormals", "FLT_MIN"]

FLT_MIN = np.float32(2.0 ** -126)  # smallest normal float32


def half_to_even(x: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, ties to even."""
    return np.rint(x)


def half_away_from_zero(x: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, ties away from zero (``std::round``); inf/NaN/-0 kept."""
    x = np.asarray(x)
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):
        frac = np.abs(x - t)  # exact: x - trunc(x) is representable
        up = frac >= 0.5
    if x.ndim == 0:
        return (t + np.copysign(np.ones_like(t), x)) if up else t
    out = t.copy()
    np.add(out, np.copysign(np.ones_like(t), x), out=out, where=up)
    return out


def flush_denormals(x: np.ndarray) -> np.ndarray:
    """float32 flush-to-zero: subnormal values become a zero of the same sign."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        tiny = np.abs(x) < FLT_MIN
    if not np.any(tiny):
        return x
    return np.where(tiny, np.copysign(np.float32(0), x), x).astype(np.float32, copy=False)
