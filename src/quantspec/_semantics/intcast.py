"""Integer conversions as C++ on x86-64 performs them, vectorised.

- :func:`wrap_int32`: two's-complement wrap into the int32 range — what a C++ ``int32_t``
  addition, subtraction or shift yields on overflow on every target the runtimes ship for.
- :func:`cvtt_int32` / :func:`cvtt_int64`: the truncating float-to-integer conversion
  (``static_cast`` of a float; x86 ``cvttss2si`` / ``cvttsd2si``), whose "integer indefinite" result
  for NaN, ±inf and out-of-range values is the most negative integer.  onnx.reference's
  ``np.rint(q).astype(np.int32)``, onnxruntime's plain loops and TensorFlow's kernels all go through it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["wrap_int32", "cvtt_int32", "cvtt_int64", "INT32_MIN", "INT32_MAX"]

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1
_TWO31 = np.int64(2 ** 31)
_I32_LIMIT = np.float64(2.0 ** 31)
_I64_LIMIT = np.float64(2.0 ** 63)


def wrap_int32(x) -> np.ndarray:
    """``x`` (integers) reduced modulo 2^32 into [-2^31, 2^31), as int64."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + _TWO31) & 0xFFFFFFFF) - _TWO31


def cvtt_int32(v, invalid: int = INT32_MIN) -> np.ndarray:
    """Truncate toward zero to int32; NaN and values outside [-2^31, 2^31) give ``invalid``: INT32_MIN
    as x86 converts (another value for a library that checks the range itself, such as ml_dtypes 0.7)."""
    v = np.asarray(v, dtype=np.float64)  # exact for float16/bfloat16/float32 input
    with np.errstate(invalid="ignore"):
        ok = (v > -_I32_LIMIT - 1) & (v < _I32_LIMIT)
    out = np.full(v.shape, invalid, dtype=np.int32)
    out[ok] = np.trunc(v[ok]).astype(np.int32)
    return out


def cvtt_int64(v) -> np.ndarray:
    """The 64-bit conversion: NaN and values outside [-2^63, 2^63) give INT64_MIN."""
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        ok = (v >= -_I64_LIMIT) & (v < _I64_LIMIT)
    out = np.full(v.shape, np.iinfo(np.int64).min, dtype=np.int64)
    out[ok] = np.trunc(v[ok]).astype(np.int64)
    return out
