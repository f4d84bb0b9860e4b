"""Correctly rounded conversion of wide floats to the narrow float types (float8, float6, float4).

:func:`round_to_grid` rounds each value to the nearest value of the target's grid, ties to even,
*exactly*, for float16/bfloat16/float32/float64 inputs: ``rint(v / q) * q`` where ``q`` is the
power-of-two spacing of the grid at ``v``'s binade (never finer than the subnormal spacing).  Both
the division by a power of two and ``rint`` are exact in float64, so there is one rounding only.
(ml_dtypes' own casts are correctly rounded from float32 but go *through float32* from float64: a
float64 such as ``1 + 2**-4 + 2**-40`` is double-rounded to 1.0 instead of 1.125 in E4M3.)

:func:`to_narrow_float` then applies a spec's overflow rule and encodes the (now exactly
representable) values with ml_dtypes:

- ``saturate=True``: magnitudes beyond the largest finite value, infinities included, become ±max
  (ONNX Cast-28 "saturate").
- ``saturate=False``: the type's own overflow: NaN for E4M3FN and the FNUZ types, ±inf for E5M2.
- float4/float6 have no infinity or NaN: they always saturate.

NaN is encoded as ml_dtypes encodes it (E5M2 ``0x7e``/``0xfe``, E4M3FN ``0x7f``/``0xff``, FNUZ
``0x80``, and for float4/float6 a signed zero); a caller with another rule (e.g. ONNX's documented
"NaN -> max" for float4/float6) applies it on top.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..dtypes import QType

__all__ = ["to_narrow_float", "round_to_grid", "max_finite", "grid"]


def max_finite(t: QType) -> float:
    return float(ml_dtypes.finfo(t.dtype).max)


def grid(t: QType) -> tuple[int, int]:
    """(mantissa bits, smallest normal exponent) of a narrow float type."""
    fi = ml_dtypes.finfo(t.dtype)
    return int(fi.nmant), int(fi.minexp)


def round_to_grid(values: np.ndarray, t: QType) -> np.ndarray:
    """``values`` rounded (RNE, exactly, no overflow handling) to the grid of ``t``, as float64."""
    v = np.asarray(values, dtype=np.float64)
    mant, emin = grid(t)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(v)                      # |v| = f * 2**e, f in [0.5, 1)
        e = np.maximum(e.astype(np.int64) - 1, emin)
        q = np.ldexp(1.0, (e - mant).astype(np.int32))
        return np.rint(v / q) * q


def to_narrow_float(values: np.ndarray, t: QType, saturate: bool) -> np.ndarray:
    """Round ``values`` to the narrow float type ``t`` (RNE) with the given overflow rule."""
    r = round_to_grid(values, t)
    m = max_finite(t)
    if saturate or not (t.has_inf or t.has_nan):
        r = np.clip(r, -m, m)                   # NaN passes through
    else:
        with np.errstate(invalid="ignore"):
            over = np.abs(r) > m
        if np.any(over):
            r = np.where(over, np.copysign(np.inf, r), r)  # ml_dtypes: inf -> inf (E5M2) or NaN
    return r.astype(np.float32).astype(t.dtype)
