"""LiteRT's fixed-point toolbox, vectorised over numpy integer arrays.

Everything the int8 kernels of the LiteRT interpreter compute in integers goes through a handful of
primitives from ``tflite/kernels/internal/common.{h,cc}``, ``quantization_util.cc`` and gemmlowp's
``fixedpoint/fixedpoint.h``.  This module reimplements each of them, named after the mathematics and
exact for every int32 input, so that a kernel reads like the C++ it reproduces:

==========================================  =====================================================
primitive                                    what it computes
==========================================  =====================================================
:func:`quantize_multiplier`                  a real multiplier as ``M * 2^shift / 2^31``, M in [2^30, 2^31)
:func:`saturating_rounding_doubling_high_mul`  ``round(a * b / 2^31)``, ties up (ARM ``VQRDMULH``)
:func:`rounding_divide_by_pot`               ``round(x / 2^e)``, ties away from zero
:func:`multiply_by_quantized_multiplier`     ``x * M * 2^shift / 2^31``, the requantization step
:func:`saturating_rounding_multiply_by_pot`  ``x * 2^e``: saturating left or rounding right shift
:func:`exp_on_negative_values`               ``exp(a)`` for ``a <= 0`` (gemmlowp)
:func:`one_over_one_plus_x_for_x_in_0_1`     ``1 / (1 + x)`` (Newton-Raphson)
:func:`log_x_for_x_greater_than_or_equal_to_1`  ``log(x)`` (TFLite ``common.h``)
:func:`get_reciprocal`                       ``1 / x`` as a Q0.31 value and an exponent
:func:`get_inv_sqrt_quantized_multiplier_exp`  ``1 / sqrt(x)`` as a multiplier and shift
==========================================  =====================================================

**Representation.**  C++ ``int32_t`` values are held in numpy ``int64`` arrays, so every product of
two int32 values (at most 2^62 in magnitude) and every sum of such a product with a rounding nudge
(at most 2^62 + 2^30) is exact; where C++ lets an int32 operation wrap (plain ``+``, ``-`` and ``*``
of gemmlowp raw values, which is formally undefined but wraps on every target LiteRT ships for),
:func:`wrap_int32` reduces the result modulo 2^32 explicitly.  The unchecked helpers take and
return such int64 arrays without checking them: :func:`srdhm`, :func:`rdbpot`, :func:`mbqm`,
:func:`mbqm_int64` and :func:`clz`, which the kernels call too (not in ``__all__``), and this
module's private ones (``_rescale``, ``_exp_neg``...).  Every exported function checks its
arguments and raises a :mod:`quantspec.errors` exception naming the argument: integer (not float or
bool) values within their range, shapes that broadcast together, and integer-bit counts within what
gemmlowp's ``FixedPoint<int32, I>`` allows; the requantization primitives return ``int32`` arrays,
the gemmlowp functions raw int64 arrays.

**Fixed-point numbers** (gemmlowp ``FixedPoint<int32, I>``) are raw int32 values with ``31 - I``
fractional bits: the raw value ``r`` stands for ``r / 2^(31-I)``.  Multiplying two of them is
:func:`saturating_rounding_doubling_high_mul` of the raws (integer bits add up); adding is a
wrapping add of the raws; :func:`rescale` changes ``I`` with a saturating/rounding power-of-two
multiply.  The functions below take the integer-bit counts as explicit arguments where gemmlowp has
them as template parameters.

**Rounding.**  LiteRT's default build requantizes with *double rounding*: a rounding high multiply
followed by a rounding right shift (``TFLITE_SINGLE_ROUNDING`` is off in the shipped
interpreter).  ``rounding="single"`` reproduces the ``TFLITE_SINGLE_ROUNDING=1`` builds instead.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._semantics.arrays import check_fits
from .._semantics.intcast import wrap_int32 as _wrap
from .._semantics.rounding import half_away_from_zero
from ..errors import DTypeError, InvalidArgumentError, RangeError, ShapeError

__all__ = [
    "INT32_MIN", "INT32_MAX",
    "quantize_multiplier", "quantize_multiplier_smaller_than_one_exp", "quantize_multiplier_greater_than_one",
    "saturating_rounding_doubling_high_mul", "rounding_divide_by_pot", "multiply_by_quantized_multiplier",
    "multiply_by_quantized_multiplier_smaller_than_one_exp", "multiply_by_quantized_multiplier_greater_than_one",
    "multiply_by_quantized_multiplier_int64", "saturating_rounding_multiply_by_pot", "saturating_left_shift",
    "wrap_int32", "saturate_int32", "rounding_half_sum", "count_leading_zeros",
    "exp_on_interval_between_negative_one_quarter_and_0_excl", "exp_on_negative_values",
    "one_over_one_plus_x_for_x_in_0_1", "one_minus_x_over_one_plus_x_for_x_in_0_1", "logistic", "tanh",
    "log_x_for_x_greater_than_or_equal_to_1", "get_reciprocal", "get_inv_sqrt_quantized_multiplier_exp",
    "calculate_input_radius", "rescale", "one",
]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
_TWO31 = 1 << 31
_ROUNDINGS = ("double", "single")


# -------------------------------------------------------------------------------------------------
# argument handling
# -------------------------------------------------------------------------------------------------

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
#: arrays from this many elements are checked against the memory before int64 work arrays are made
_CHECK_FROM = 1 << 24
_UINT32_MAX = (1 << 32) - 1
_UINT64_MAX = (1 << 64) - 1
#: the value range of each integer dtype (by type character), to skip the min/max scan when it fits
_DTYPE_SPAN = {np.dtype(d).char: (int(np.iinfo(d).min), int(np.iinfo(d).max))
               for d in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)}
#: why the integer bits of a fixed-point number lie in [0, 31]
_FIXED_POINT = "gemmlowp's FixedPoint<int32, I> has 0 <= I <= 31 integer bits"
#: why exp_on_negative_values (and logistic, built on it) takes at most 29 integer bits
_EXP_BITS = ("gemmlowp's exp_on_negative_values needs FixedPoint<int32, I>::ConstantPOT<-2> (one quarter), "
             "which takes I <= 29")


def _as_int64(value: Any, argument: str, lo: int = INT32_MIN, hi: int = INT32_MAX) -> np.ndarray:
    """An integer array argument as int64, checked to lie in [lo, hi] (a value above INT64_MAX, allowed
    only when ``hi`` says so, is taken modulo 2^64).  Not copied when it is already an int64 array."""
    if type(value) is np.ndarray:
        a = value
    else:
        if isinstance(value, (bool, np.bool_)):
            raise DTypeError(argument, "must be an integer or an integer array, not a bool", value)
        try:
            a = np.asarray(value)
        except (ValueError, TypeError):
            raise ShapeError(argument, "must be an integer or a rectangular integer array", value) from None
    kind = a.dtype.kind
    check_fits(a.shape, 8, argument, "its int64 working arrays")   # before any value is scanned
    if kind not in "iu":
        if kind == "f" and isinstance(value, (list, tuple)):    # numpy makes [-1, 2**64 - 1] float64
            a = np.array(value, dtype=object)
            kind = "O"
        if kind == "O":
            return _object_ints(a, value, argument, lo, hi)
        raise DTypeError(argument, "must be an integer or an integer array", value if a.size <= 8 else a)
    span = _DTYPE_SPAN.get(a.dtype.char)
    if a.size and (span is None or span[0] < lo or span[1] > hi):
        mn, mx = int(a.min()), int(a.max())
        if mn < lo or mx > hi:
            raise RangeError(argument, f"must lie in [{lo}, {hi}]", mn if mn < lo else mx)
    return a.astype(np.int64, copy=False)


def _object_ints(a: np.ndarray, value: Any, argument: str, lo: int, hi: int) -> np.ndarray:
    """An object array: Python integers too large for any numpy integer type, or not integers at all."""
    flat = list(a.flat)
    if not flat or not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in flat):
        raise DTypeError(argument, "must be an integer or an integer array", value if a.size <= 8 else a)
    ints = [int(v) for v in flat]
    bad = next((v for v in ints if v < lo or v > hi), None)
    if bad is not None:
        raise RangeError(argument, f"must lie in [{lo}, {hi}]", bad)
    return np.array([((v + (1 << 63)) & _UINT64_MAX) - (1 << 63) for v in ints], np.int64).reshape(a.shape)


def _int_arg(value: Any, argument: str, lo: int, hi: int, why: str = "") -> int:
    """A scalar integer argument (a template parameter or an ``int`` in the C++), checked to lie in [lo, hi]."""
    if type(value) is int and lo <= value <= hi:      # the common case, kept cheap
        return value
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise DTypeError(argument, "must be a single integer (an int)", value)
    v = int(value)
    if v < lo or v > hi:
        raise RangeError(argument, f"must lie in [{lo}, {hi}]", v, detail=why)
    return v


def _real_arg(value: Any, argument: str) -> float:
    """A scalar real argument (a C++ ``double``)."""
    if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iuf":
        value = value.item()
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DTypeError(argument, "must be a single real number (a float)", value)
    try:
        return float(value)
    except OverflowError:
        raise RangeError(argument, "must be within the float64 range", value) from None


def _broadcast(*named: tuple[str, np.ndarray]) -> None:
    """Check that the arrays' shapes broadcast together (numpy broadcasting), naming the first misfit."""
    shape: tuple[int, ...] = ()
    names: list[str] = []
    for name, a in named:
        s = a.shape
        if s and s != shape:
            if shape:
                try:
                    shape = np.broadcast_shapes(shape, s)
                except ValueError:
                    raise ShapeError(name, f"its shape must broadcast with that of {' and '.join(names)}, {shape}",
                                     s) from None
            else:
                shape = s
        names.append(name)
    check_fits(shape, 8, named[0][0], "the result")


def _min_log_x_output_bits(input_bits: int) -> int:
    """TFLite ``min_log_x_output_bits``: the integer bits the log of a FixedPoint<int32, input_bits> needs."""
    for threshold, bits in ((90, 7), (44, 6), (21, 5), (10, 4), (4, 3), (1, 2)):
        if input_bits > threshold:
            return bits
    return 1


def _check_rounding(rounding: str) -> str:
    if rounding not in _ROUNDINGS:
        raise InvalidArgumentError("rounding", "must be 'double' (the shipped interpreter) or 'single' "
                                   "(TFLITE_SINGLE_ROUNDING builds)", rounding)
    return rounding


def _out(result: np.ndarray) -> np.ndarray | int:
    """int32 array out of an int64 working array (0-d results stay 0-d arrays, not numpy scalars)."""
    return np.asarray(result).astype(np.int32)


# -------------------------------------------------------------------------------------------------
# int32 semantics
# -------------------------------------------------------------------------------------------------

def wrap_int32(x: Any) -> np.ndarray:
    """``x`` (integers) reduced modulo 2^32 into [-2^31, 2^31), as int64: what a C++ ``int32_t``
    addition, subtraction or shift yields on overflow on every target LiteRT ships for."""
    if type(x) is np.ndarray and x.dtype.kind in "iu":      # the kernels' call: no more than a type test
        if x.size > _CHECK_FROM:
            check_fits(x.shape, 8, "x")
        return _wrap(x) if x.ndim else np.asarray(_wrap(x))
    return np.asarray(_wrap(_as_int64(x, "x", _INT64_MIN, _UINT64_MAX)))


def _saturate(x: np.ndarray) -> np.ndarray:
    """Unchecked :func:`saturate_int32`, called inside this module."""
    return np.clip(np.asarray(x, dtype=np.int64), INT32_MIN, INT32_MAX)


def saturate_int32(x: Any) -> np.ndarray:
    """``x`` clamped to [INT32_MIN, INT32_MAX] (``SaturatingAddNonGemmlowp`` / ``SaturatingSub``)."""
    return np.asarray(_saturate(_as_int64(x, "x", _INT64_MIN, _INT64_MAX)))


def clz(x: Any) -> np.ndarray:
    """Unchecked :func:`count_leading_zeros` (this module and the kernels)."""
    u = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    _, e = np.frexp(u.astype(np.float64))
    return (32 - e).astype(np.int64)


def count_leading_zeros(x: Any) -> np.ndarray:
    """``CountLeadingZeros`` of ``uint32(x)``: 32 for 0 (``common.h``).

    Exact: every uint32 is exactly representable in float64, so ``frexp`` returns its bit length."""
    return np.asarray(clz(_as_int64(x, "x", INT32_MIN, _UINT32_MAX)))


def _half_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Unchecked :func:`rounding_half_sum`, called inside this module."""
    s = np.asarray(a, dtype=np.int64) + np.asarray(b, dtype=np.int64)
    t = s + np.where(s >= 0, 1, -1)
    return _trunc_div_pot(t, 1)


def rounding_half_sum(a: Any, b: Any) -> np.ndarray:
    """gemmlowp ``RoundingHalfSum`` (``VRHADD``): ``(a + b + sign(a + b)) / 2`` with C truncation,
    i.e. the mean of a and b rounded half away from zero."""
    a, b = _as_int64(a, "a"), _as_int64(b, "b")
    _broadcast(("a", a), ("b", b))
    return np.asarray(_half_sum(a, b))


def _trunc_div_pot(n: np.ndarray, e: int) -> np.ndarray:
    """C integer division ``n / 2^e`` (truncation toward zero) for int64 ``n``, ``0 <= e <= 62``."""
    bias = (n >> 63) & ((1 << e) - 1)  # 2^e - 1 for negative n, else 0
    return (n + bias) >> e


# -------------------------------------------------------------------------------------------------
# QuantizeMultiplier (quantization_util.cc)
# -------------------------------------------------------------------------------------------------

def _quantize_multiplier_raw(real: np.ndarray, rounding: str = "double") -> tuple[np.ndarray, np.ndarray]:
    """Vectorised ``QuantizeMultiplier`` over a float64 array (no argument checks)."""
    q, shift = np.frexp(real)                         # real = q * 2^shift, |q| in [0.5, 1)
    q_fixed = half_away_from_zero(q * float(_TWO31)).astype(np.int64)   # q * 2^31 is exact
    shift = shift.astype(np.int64)
    reached = q_fixed == _TWO31                       # q >= 1 - 2^-32 rounds up to 2^31
    q_fixed = np.where(reached, q_fixed // 2, q_fixed)
    shift = np.where(reached, shift + 1, shift)
    tiny = shift < -31                                # flush tiny multipliers to zero
    q_fixed = np.where(tiny, 0, q_fixed)
    shift = np.where(tiny, 0, shift)
    zero = real == 0.0
    q_fixed = np.where(zero, 0, q_fixed)
    shift = np.where(zero, 0, shift)
    if rounding == "single":                          # TFLITE_SINGLE_ROUNDING saturates shift > 30
        big = shift > 30
        q_fixed = np.where(big, INT32_MAX, q_fixed)
        shift = np.where(big, 30, shift)
    return q_fixed, shift


def quantize_multiplier(real: Any, *, rounding: str = "double"):
    """``QuantizeMultiplier`` (``quantization_util.cc``): ``real = M * 2^shift / 2^31``.

    ``real`` is a double (Python float, numpy scalar or array; a float32 scale is widened exactly).
    The result is ``(M, shift)`` with ``2^30 <= |M| < 2^31`` — Python ints for a scalar argument,
    int32 arrays for an array — and the edge cases of the C++:

    - ``real == 0`` gives ``(0, 0)``;
    - a significand that rounds up to 2^31 (``|real|`` within 2^-32 relative of the next power of
      two) gives ``(2^30, shift + 1)``;
    - ``shift < -31`` (``|real| < 2^-32`` or so) is flushed to ``(0, 0)``;
    - ``rounding="single"`` (``TFLITE_SINGLE_ROUNDING`` builds) also saturates ``shift > 30`` to
      ``(2^31 - 1, 30)``.

    Non-finite ``real`` raises (the C++ has undefined behaviour there).
    """
    _check_rounding(rounding)
    try:
        a = np.asarray(real)
    except (ValueError, TypeError):
        raise ShapeError("real", "must be a real number or a rectangular array of them", real) from None
    scalar = a.ndim == 0 and not isinstance(real, np.ndarray)
    if isinstance(real, (bool, np.bool_)) or a.dtype.kind not in "iuf":
        raise DTypeError("real", "must be a real number or an array of them", real)
    r = a.astype(np.float64, copy=False)
    if not np.all(np.isfinite(r)):
        raise InvalidArgumentError("real", "must be finite", real if r.size <= 8 else r)
    m, s = _quantize_multiplier_raw(r, rounding)
    if scalar:
        return int(m), int(s)
    return m.astype(np.int32), s.astype(np.int32)


def quantize_multiplier_smaller_than_one_exp(real: float, *, rounding: str = "double") -> tuple[int, int]:
    """``QuantizeMultiplierSmallerThanOneExp``: ``0 < real < 1``, and the resulting shift must be
    ``<= 0``.  LiteRT aborts the process (``TFLITE_CHECK``) when either fails; quantspec raises a
    :class:`~quantspec.errors.RangeError`."""
    _check_rounding(rounding)
    r = _real_arg(real, "real")
    if not (0.0 < r < 1.0):
        raise RangeError("real", "QuantizeMultiplierSmallerThanOneExp needs 0 < real < 1 (LiteRT aborts)", r)
    m, s = quantize_multiplier(r, rounding=rounding)
    if s > 0:
        raise RangeError("real", "rounds up to 1.0 in QuantizeMultiplierSmallerThanOneExp, whose shift must be "
                         "<= 0 (LiteRT aborts)", r)
    return m, s


def quantize_multiplier_greater_than_one(real: float, *, rounding: str = "double") -> tuple[int, int]:
    """``QuantizeMultiplierGreaterThanOne``: ``real > 1`` and a shift ``>= 0``; LiteRT aborts
    (``TFLITE_CHECK``) otherwise, quantspec raises a :class:`~quantspec.errors.RangeError`."""
    _check_rounding(rounding)
    r = _real_arg(real, "real")
    if not (r > 1.0) or not math.isfinite(r):
        raise RangeError("real", "QuantizeMultiplierGreaterThanOne needs a finite real > 1 (LiteRT aborts)", r)
    m, s = quantize_multiplier(r, rounding=rounding)
    return m, s


# -------------------------------------------------------------------------------------------------
# the two roundings of gemmlowp
# -------------------------------------------------------------------------------------------------

def srdhm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int64 arrays holding int32 values.

    |a*b| <= 2^62 and |nudge| <= 2^30, so the int64 sum cannot overflow; the only result outside
    int32 (2^31, from INT32_MIN * INT32_MIN) is the saturated case."""
    ab = a * b
    n = ab + np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    q = _trunc_div_pot(n, 31)
    return np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, q)


def saturating_rounding_doubling_high_mul(a: Any, b: Any) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul`` (ARM ``VQRDMULH``), element-wise:
    ``(a*b + nudge) / 2^31`` with C truncation, ``nudge = 2^30`` if ``a*b >= 0`` else ``1 - 2^30``
    (so the result is ``a*b / 2^31`` rounded to nearest with ties toward +infinity: 1.5 -> 2,
    -1.5 -> -1), and ``INT32_MIN * INT32_MIN`` saturated to ``INT32_MAX``.  The fixed-point product
    of two Q0.31 numbers."""
    a, b = _as_int64(a, "a"), _as_int64(b, "b")
    _broadcast(("a", a), ("b", b))
    return _out(srdhm(a, b))


def rdbpot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """RoundingDivideByPOT on int64 arrays holding int32 values, ``0 <= exponent <= 31``."""
    e = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def rounding_divide_by_pot(x: Any, exponent: Any) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT``: ``x / 2^exponent`` rounded to nearest, ties away from zero
    (an arithmetic right shift plus one where the remainder exceeds half, or equals half for
    non-negative x).  ``0 <= exponent <= 31``, as gemmlowp asserts."""
    x, e = _as_int64(x, "x"), _as_int64(exponent, "exponent", 0, 31)
    _broadcast(("x", x), ("exponent", e))
    return _out(rdbpot(x, e))


def mbqm(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplier, double rounding, int64 arrays in and out (``common.cc``).

    ``x * (1 << left_shift)`` is an int32 product in C++: it wraps (reduced modulo 2^32 here)."""
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = x if not np.any(left) else _wrap(x << left)
    return rdbpot(srdhm(shifted, np.asarray(multiplier, dtype=np.int64)), right)


def _mbqm_single(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplier of ``TFLITE_SINGLE_ROUNDING`` builds: one rounding, half up.

    ``|x * M| < 2^62`` and the rounding term is at most 2^61, so the int64 sum is exact."""
    total = 31 - np.asarray(shift, dtype=np.int64)                  # in [1, 62]
    r = (x * np.asarray(multiplier, dtype=np.int64) + (np.int64(1) << (total - 1))) >> total
    return _wrap(r)


def multiply_by_quantized_multiplier(x: Any, multiplier: Any, shift: Any, *, rounding: str = "double") -> np.ndarray:
    """``MultiplyByQuantizedMultiplier(int32 x, int32 M, int shift)`` (``common.cc``): ``x`` times the
    real multiplier ``M * 2^shift / 2^31``, element-wise with numpy broadcasting (per-channel
    multipliers and shifts are arrays).

    - ``rounding="double"`` (default; the shipped interpreter):
      ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x * 2^max(shift,0), M), max(-shift,0))``;
      the left shift is an int32 multiplication and wraps.  ``shift`` must lie in [-31, 30].
    - ``rounding="single"`` (``TFLITE_SINGLE_ROUNDING=1``): ``(x*M + 2^(30-shift)) >> (31-shift)``,
      one rounding with ties toward +infinity; ``M >= 0`` and ``-31 <= shift <= 30``.

    ``x`` and ``M`` must lie in the int32 range; the result is an int32 array.
    """
    _check_rounding(rounding)
    xs = _as_int64(x, "x")
    m = _as_int64(multiplier, "multiplier", INT32_MIN if rounding == "double" else 0)
    s = _as_int64(shift, "shift", -31, 30)
    _broadcast(("x", xs), ("multiplier", m), ("shift", s))
    return _out(mbqm(xs, m, s) if rounding == "double" else _mbqm_single(xs, m, s))


def multiply_by_quantized_multiplier_smaller_than_one_exp(x: Any, multiplier: Any, shift: Any) -> np.ndarray:
    """Double-rounding ``MultiplyByQuantizedMultiplierSmallerThanOneExp`` (``common.h``):
    ``RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x, M), -shift)``, ``shift <= 0``."""
    xs, m = _as_int64(x, "x"), _as_int64(multiplier, "multiplier")
    s = _as_int64(shift, "shift", -31, 0)
    _broadcast(("x", xs), ("multiplier", m), ("shift", s))
    return _out(rdbpot(srdhm(xs, m), -s))


def multiply_by_quantized_multiplier_greater_than_one(x: Any, multiplier: Any, shift: Any) -> np.ndarray:
    """Double-rounding ``MultiplyByQuantizedMultiplierGreaterThanOne`` (``common.h``):
    ``SaturatingRoundingDoublingHighMul(x * 2^shift, M)``, ``shift >= 0``; the int32 product wraps."""
    xs, m = _as_int64(x, "x"), _as_int64(multiplier, "multiplier")
    s = _as_int64(shift, "shift", 0, 30)
    _broadcast(("x", xs), ("multiplier", m), ("shift", s))
    return _out(srdhm(_wrap(xs << s), m))


def mbqm_int64(x: np.ndarray, multiplier, shift) -> np.ndarray:
    """Unchecked :func:`multiply_by_quantized_multiplier_int64`, int64 arrays in and out."""
    m = np.asarray(multiplier, dtype=np.int64)
    reduced = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
    total = 15 - np.asarray(shift, dtype=np.int64)                  # in [8, 46]
    return _wrap((x * reduced + (np.int64(1) << (total - 1))) >> total)


def multiply_by_quantized_multiplier_int64(x: Any, multiplier: Any, shift: Any) -> np.ndarray:
    """``MultiplyByQuantizedMultiplier(int64 x, int32 M, int shift)`` (``common.cc``), the same in
    both builds: M is reduced to 16 bits (``(M + 2^15) >> 16``, or 0x7FFF from 0x7FFF0000 up), then
    ``(x * M16 + 2^(14-shift)) >> (15-shift)`` (one rounding, half up), cast to int32.

    Its contract: ``-2^47 <= x < 2^47``, ``M >= 0`` and ``-31 <= shift <= 7``, so ``|x * M16|`` stays
    below 2^62 — checked here."""
    xs = _as_int64(x, "x", -(1 << 47), (1 << 47) - 1)
    m = _as_int64(multiplier, "multiplier", 0, INT32_MAX)
    s = _as_int64(shift, "shift", -31, 7)
    _broadcast(("x", xs), ("multiplier", m), ("shift", s))
    return _out(mbqm_int64(xs, m, s))


# -------------------------------------------------------------------------------------------------
# power-of-two multiplications
# -------------------------------------------------------------------------------------------------

def _saturating_left_shift(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<e>`` for ``e > 0``: ``x * 2^e`` clamped to int32
    (the threshold test of gemmlowp is exactly "the product leaves the int32 range")."""
    threshold = (1 << (31 - exponent)) - 1
    return np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << exponent))


def saturating_left_shift(x: Any, exponent: int) -> np.ndarray:
    """``x * 2^exponent`` saturated to the int32 range, ``0 <= exponent <= 31``
    (``SaturatingRoundingMultiplyByPOT`` / ``SaturatingRoundingMultiplyByPOTParam`` with a
    non-negative exponent)."""
    e = _int_arg(exponent, "exponent", 0, 31)
    xs = _as_int64(x, "x")
    return _out(xs if e == 0 else _saturating_left_shift(xs, e))


def _srmbpot(x: np.ndarray, exponent: int) -> np.ndarray:
    if exponent > 0:
        return _saturating_left_shift(x, exponent)
    if exponent < 0:
        return rdbpot(x, -exponent)
    return x


def saturating_rounding_multiply_by_pot(x: Any, exponent: int) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<exponent>``: ``x * 2^exponent``, a saturating
    left shift for a positive exponent and :func:`rounding_divide_by_pot` for a negative one
    (``-31 <= exponent <= 31``)."""
    e = _int_arg(exponent, "exponent", -31, 31)
    return _out(_srmbpot(_as_int64(x, "x"), e))


def _srmbpot_param(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    """TFLite ``SaturatingRoundingMultiplyByPOTParam`` with a run-time exponent in [0, 31]
    (element-wise; exponent 0 leaves x alone)."""
    e = np.asarray(exponent, dtype=np.int64)
    threshold = (np.int64(1) << (31 - e)) - 1
    shifted = np.where(x > threshold, INT32_MAX, np.where(x < -threshold, INT32_MIN, x << e))
    return np.where(e == 0, x, shifted)


def _rescale(x: np.ndarray, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """Unchecked :func:`rescale`, called inside this module."""
    return _srmbpot(np.asarray(x, dtype=np.int64), src_integer_bits - dst_integer_bits)


def rescale(x: Any, src_integer_bits: int, dst_integer_bits: int) -> np.ndarray:
    """gemmlowp ``Rescale<dst>(FixedPoint<int32, src>)``: the same real number with ``dst`` integer
    bits, i.e. ``SaturatingRoundingMultiplyByPOT<src - dst>`` of the raw value (raw int64 in/out)."""
    src = _int_arg(src_integer_bits, "src_integer_bits", 0, 31, _FIXED_POINT)
    dst = _int_arg(dst_integer_bits, "dst_integer_bits", 0, 31, _FIXED_POINT)
    return np.asarray(_rescale(_as_int64(x, "x"), src, dst))


def _one(integer_bits: int) -> int:
    """Unchecked :func:`one`, called inside this module."""
    return INT32_MAX if integer_bits == 0 else 1 << (31 - integer_bits)


def one(integer_bits: int) -> int:
    """Raw value of ``FixedPoint<int32, I>::One()``: INT32_MAX for I = 0 (1.0 is not representable),
    else ``2^(31-I)``."""
    return _one(_int_arg(integer_bits, "integer_bits", 0, 31, _FIXED_POINT))


def _constant_pot(integer_bits: int, exponent: int) -> int:
    """Raw value of ``FixedPoint<int32, I>::ConstantPOT<e>()`` = 2^e."""
    return 1 << (31 - integer_bits + exponent)


# -------------------------------------------------------------------------------------------------
# gemmlowp transcendental functions (fixedpoint.h), raw int64 values in and out
# -------------------------------------------------------------------------------------------------

def _add(a, b):
    """gemmlowp ``Add`` of raws: a plain int32 addition (wraps)."""
    return _wrap(np.asarray(a, dtype=np.int64) + b)


def _sub(a, b):
    """gemmlowp ``Sub`` of raws: a plain int32 subtraction (wraps)."""
    return _wrap(np.asarray(a, dtype=np.int64) - b)


_EXP_MINUS_ONE_EIGHTH = 1895147668   # exp(-1/8) in Q0.31
_ONE_THIRD = 715827883               # 1/3 in Q0.31
#: (k, exp(-2^k) in Q0.31): the barrel shifter of exp_on_negative_values
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def _exp_quarter(a: np.ndarray) -> np.ndarray:
    """Unchecked :func:`exp_on_interval_between_negative_one_quarter_and_0_excl`, called inside this module."""
    a = np.asarray(a, dtype=np.int64)
    x = _add(a, _constant_pot(0, -3))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_over_4 = rdbpot(x4, 2)
    inner = _add(srdhm(_add(x4_over_4, x3), _ONE_THIRD), x2)       # x^4/12 + x^3/3 + x^2
    poly = rdbpot(inner, 1)                                          # x^4/24 + x^3/6 + x^2/2
    return _add(_EXP_MINUS_ONE_EIGHTH, srdhm(_EXP_MINUS_ONE_EIGHTH, _add(x, poly)))


def exp_on_interval_between_negative_one_quarter_and_0_excl(a: Any) -> np.ndarray:
    """``exp(a)`` for a Q0.31 ``a`` in [-1/4, 0): a 4th-order Taylor expansion around -1/8,
    ``exp(-1/8) * (1 + x + x^2/2 + x^3/6 + x^4/24)`` with ``x = a + 1/8``.  Q0.31 result."""
    return np.asarray(_exp_quarter(_as_int64(a, "a")))


def _exp_neg(a: Any, integer_bits: int) -> np.ndarray:
    """Unchecked :func:`exp_on_negative_values`, called inside this module."""
    a = np.asarray(a, dtype=np.int64)
    fractional_bits = 31 - integer_bits
    one_quarter = _constant_pot(integer_bits, -2)
    mask = one_quarter - 1
    a_mod_quarter_minus_one_quarter = _sub(a & mask, one_quarter)
    result = _exp_quarter(_rescale(a_mod_quarter_minus_one_quarter, integer_bits, 0))
    remainder = _sub(a_mod_quarter_minus_one_quarter, a)
    for k, multiplier in _EXP_BARREL:
        if integer_bits > k:
            bit = np.int64(1) << (fractional_bits + k)
            result = np.where((remainder & bit) != 0, srdhm(result, multiplier), result)
    if integer_bits > 5:
        clamp = -(1 << (36 - integer_bits))                          # -32.0
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, INT32_MAX, result)


def exp_on_negative_values(a: Any, integer_bits: int) -> np.ndarray:
    """gemmlowp ``exp_on_negative_values``: ``exp(a)`` for a ``FixedPoint<int32, integer_bits>``
    ``a <= 0``; a Q0.31 result (raw int64 array).

    ``a`` is split into ``(a mod 1/4) - 1/4`` in [-1/4, 0), evaluated by
    :func:`exp_on_interval_between_negative_one_quarter_and_0_excl`, and the remaining multiple of
    1/4 is applied bit by bit with the constants ``exp(-1/4), exp(-1/2), ... exp(-16)``; values below
    -32 give 0 (when ``integer_bits > 5``) and ``a == 0`` gives One (INT32_MAX)."""
    ib = _int_arg(integer_bits, "integer_bits", 0, 29, _EXP_BITS)
    return _exp_neg(_as_int64(a, "a"), ib)


_F2_48_OVER_17 = 1515870810          # 48/17 in Q2.29
_F2_NEG_32_OVER_17 = -1010580540     # -32/17 in Q2.29


def _newton_reciprocal_of_half_denominator(half_denominator: np.ndarray) -> np.ndarray:
    """Three Newton-Raphson steps for ``1 / d`` with ``d`` in [1/2, 1) (Q0.31), starting from
    ``48/17 - 32/17 d``; Q2.29 result."""
    x = _add(_F2_48_OVER_17, srdhm(half_denominator, _F2_NEG_32_OVER_17))
    one_f2 = _one(2)
    for _ in range(3):
        half_denominator_times_x = srdhm(half_denominator, x)                         # F2
        one_minus = _sub(one_f2, half_denominator_times_x)                            # F2
        x = _add(x, _rescale(srdhm(x, one_minus), 4, 2))                              # F4 -> F2
    return x


def _one_over_one_plus_x(a: Any) -> np.ndarray:
    """Unchecked :func:`one_over_one_plus_x_for_x_in_0_1`, called inside this module."""
    a = np.asarray(a, dtype=np.int64)
    half_denominator = _half_sum(a, _one(0))
    x = _newton_reciprocal_of_half_denominator(half_denominator)
    return _rescale(x, 1, 0)          # ExactMulByPot<-1> (F2 -> F1, raw unchanged), then Rescale<0>


def one_over_one_plus_x_for_x_in_0_1(a: Any) -> np.ndarray:
    """gemmlowp ``one_over_one_plus_x_for_x_in_0_1``: ``1 / (1 + a)`` for a Q0.31 ``a`` in [0, 1);
    Q0.31 result.  Newton-Raphson on ``d = (1 + a) / 2`` (:func:`rounding_half_sum`)."""
    return _one_over_one_plus_x(_as_int64(a, "a"))


def _one_minus_x_over_one_plus_x(a: Any) -> np.ndarray:
    """Unchecked :func:`one_minus_x_over_one_plus_x_for_x_in_0_1`, called inside this module."""
    a = np.asarray(a, dtype=np.int64)
    half_denominator = _half_sum(a, _one(0))
    x = _newton_reciprocal_of_half_denominator(half_denominator)
    return _rescale(_sub(x, _one(2)), 2, 0)


def one_minus_x_over_one_plus_x_for_x_in_0_1(a: Any) -> np.ndarray:
    """gemmlowp ``one_minus_x_over_one_plus_x_for_x_in_0_1``: ``(1 - a) / (1 + a)``, Q0.31 in/out."""
    return _one_minus_x_over_one_plus_x(_as_int64(a, "a"))


def _logistic(a: Any, integer_bits: int) -> np.ndarray:
    """Unchecked :func:`logistic`, called inside this module."""
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    abs_input = np.where(positive, a, _wrap(-a))
    if_positive = _one_over_one_plus_x(_exp_neg(_wrap(-abs_input), integer_bits))
    if_negative = _sub(_one(0), if_positive)
    return np.where(a == 0, 1 << 30, np.where(positive, if_positive, if_negative))


def logistic(a: Any, integer_bits: int) -> np.ndarray:
    """gemmlowp ``logistic``: ``1 / (1 + exp(-a))`` for a ``FixedPoint<int32, integer_bits>``; Q0.31
    result.  (TFLM's int8 LOGISTIC uses it; the LiteRT interpreter uses a float LUT instead.)"""
    ib = _int_arg(integer_bits, "integer_bits", 0, 29, _EXP_BITS)
    return _logistic(_as_int64(a, "a"), ib)


def _tanh(a: Any, integer_bits: int) -> np.ndarray:
    """Unchecked :func:`tanh`, called inside this module."""
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, _wrap(-a))
    # ExactMulByPot<1>: the same raw read with one more integer bit
    t = _one_minus_x_over_one_plus_x(_exp_neg(n, integer_bits + 1))
    return np.where(a == 0, 0, np.where(negative, _wrap(-t), t))


def tanh(a: Any, integer_bits: int) -> np.ndarray:
    """gemmlowp ``tanh``: ``(1 - exp(-2|a|)) / (1 + exp(-2|a|))`` with the sign of ``a``, for a
    ``FixedPoint<int32, integer_bits>``; Q0.31 result (TFLM's int8 TANH)."""
    ib = _int_arg(integer_bits, "integer_bits", 0, 28, "tanh evaluates exp_on_negative_values with one more integer "
                  "bit, which must stay <= 29")
    return _tanh(_as_int64(a, "a"), ib)


# -------------------------------------------------------------------------------------------------
# TFLite additions (internal/common.h, quantization_util.cc)
# -------------------------------------------------------------------------------------------------

_LOG_2 = 1488522236                  # log(2) in Q0.31
_SQRT_SQRT_HALF = 1805811301         # 2^-1/4
_SQRT_HALF = 1518500250              # 2^-1/2
_ONE_QUARTER = 536870912
_ALPHA_N = 117049297                 # 11/240 * 2^1/4
_ALPHA_D = 127690142                 # 1/20 * 2^1/4
_ALPHA_I = 1057819769                # 2 / 2^1/4 - 2^1/4
_ALPHA_F = 638450708                 # 1/4 * 2^1/4


def _log_x(x: Any, input_integer_bits: int, output_integer_bits: int) -> np.ndarray:
    """Unchecked :func:`log_x_for_x_greater_than_or_equal_to_1`, called inside this module."""
    z_a = np.asarray(x, dtype=np.int64)
    accum_bits = output_integer_bits + 1
    shifted_quarter = _rescale(np.int64(_ONE_QUARTER), 0, accum_bits)

    z_a_headroom_plus_1 = clz(z_a)
    r_a_tmp = _srmbpot_param(z_a, z_a_headroom_plus_1 - 1)
    r_a_raw = _srmbpot_param(srdhm(r_a_tmp, _SQRT_HALF), np.int64(1))
    z_a_pow_2_adj = _saturate(
        _srmbpot_param(input_integer_bits - z_a_headroom_plus_1, np.int64(31 - accum_bits)) + shifted_quarter)

    z_b = srdhm(z_a, _SQRT_HALF)
    z_b_headroom = clz(z_b) - 1
    r_b_raw = _srmbpot_param(z_a, z_b_headroom)
    z_b_pow_2_adj = _saturate(
        _srmbpot_param(input_integer_bits - z_b_headroom, np.int64(31 - accum_bits)) - shifted_quarter)

    r = np.minimum(r_a_raw, r_b_raw)
    z_pow_2_adj = np.maximum(z_a_pow_2_adj, z_b_pow_2_adj)

    p = _half_sum(r, _SQRT_SQRT_HALF)
    q = _sub(r, _SQRT_SQRT_HALF)
    q = _add(q, q)

    common_sq = srdhm(q, q)
    num = _add(srdhm(q, r), srdhm(srdhm(q, common_sq), _ALPHA_N))
    denom_minus_one_0 = _add(srdhm(p, _add(_add(_ALPHA_I, q), srdhm(_ALPHA_D, common_sq))), srdhm(_ALPHA_F, q))
    recip_denom = _one_over_one_plus_x(denom_minus_one_0)

    num_scaled = _rescale(num, 0, accum_bits)
    total = _add(srdhm(z_pow_2_adj, _LOG_2), srdhm(num_scaled, recip_denom))     # both F(accum_bits)
    return _rescale(total, accum_bits, output_integer_bits)


def log_x_for_x_greater_than_or_equal_to_1(x: Any, input_integer_bits: int, output_integer_bits: int) -> np.ndarray:
    """TFLite ``log_x_for_x_greater_than_or_equal_to_1_impl<Out, In>``: ``log(x)`` for a positive
    ``FixedPoint<int32, In>`` ``x`` (>= 1 by name, though inputs down to ``1/x_max`` work), as a
    ``FixedPoint<int32, Out>`` raw value.

    ``x = 2^z * r`` with ``r`` normalised two ways (by the headroom of ``x`` and of ``x/sqrt(2)``),
    the better one kept; ``log(x) = z log 2 + log(r)``, the latter from a rational approximation
    around ``2^-1/4`` whose denominator goes through :func:`one_over_one_plus_x_for_x_in_0_1`.  The
    sum is accumulated with one extra integer bit of headroom."""
    ib = _int_arg(input_integer_bits, "input_integer_bits", 0, 31, _FIXED_POINT)
    ob = _int_arg(output_integer_bits, "output_integer_bits", _min_log_x_output_bits(ib), 30,
                  f"The log of a FixedPoint<int32, {ib}> needs {_min_log_x_output_bits(ib)} integer bits "
                  "(min_log_x_output_bits) and the sum is accumulated with one more, at most 31")
    return _log_x(_as_int64(x, "x"), ib, ob)


def _reciprocal(x: Any, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """Unchecked :func:`get_reciprocal`, called inside this module."""
    x = np.asarray(x, dtype=np.int64)
    headroom_plus_one = clz(x)
    num_bits_over_unit = x_integer_digits - headroom_plus_one
    shifted = ((x & 0xFFFFFFFF) << headroom_plus_one) & 0xFFFFFFFF       # uint32 shift
    shifted_sum_minus_one = _wrap(shifted - _TWO31)
    return _one_over_one_plus_x(shifted_sum_minus_one), num_bits_over_unit


def get_reciprocal(x: Any, x_integer_digits: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``GetReciprocal``: for a positive ``FixedPoint<int32, x_integer_digits>`` ``x``, returns
    ``(shifted_scale, num_bits_over_unit)`` with ``1/x = shifted_scale / 2^31 / 2^num_bits_over_unit``:
    ``x`` is normalised into [1, 2) by its headroom and ``1/(1 + frac)`` computed by
    :func:`one_over_one_plus_x_for_x_in_0_1` (raw int64 arrays)."""
    digits = _int_arg(x_integer_digits, "x_integer_digits", 0, 31, _FIXED_POINT)
    return tuple(np.asarray(r) for r in _reciprocal(_as_int64(x, "x"), digits))


def _inv_sqrt(x: Any, reverse_shift: int) -> tuple[np.ndarray, np.ndarray]:
    """Unchecked :func:`get_inv_sqrt_quantized_multiplier_exp`, called inside this module."""
    x = np.asarray(x, dtype=np.int64)
    small = x <= 1
    v = np.where(small, 2, x)
    shift = np.full(v.shape, 11, dtype=np.int64)
    while True:                                          # at most two rounds for int32 inputs
        big = v >= (1 << 29)
        if not np.any(big):
            break
        v = np.where(big, v // 4, v)
        shift = shift + big
    max_left_shift_bit_pairs = (clz(v) - 1) // 2
    left_shift_bit_pairs = max_left_shift_bit_pairs - 1
    shift = shift - left_shift_bit_pairs
    v = v << (2 * left_shift_bit_pairs)
    f3_input = v >> 1
    f3_half_input = rdbpot(f3_input, 1)
    half_three = (1 << 28) + (1 << 27)
    y = np.full(v.shape, _one(3), dtype=np.int64)
    for _ in range(5):
        y3 = _rescale(srdhm(srdhm(y, y), y), 9, 3)
        y = _rescale(_sub(srdhm(half_three, y), srdhm(f3_half_input, y3)), 6, 3)
    y = srdhm(y, _SQRT_HALF)                               # sqrt(2)/2 in Q0.31 is the same constant
    negative = shift < 0
    y = np.where(negative, _wrap(y << np.where(negative, -shift, 0)), y)
    shift = np.where(negative, 0, shift) * reverse_shift
    return np.where(small, INT32_MAX, y), np.where(small, 0, shift)


def get_inv_sqrt_quantized_multiplier_exp(x: Any, reverse_shift: int) -> tuple[np.ndarray, np.ndarray]:
    """TFLite ``GetInvSqrtQuantizedMultiplierExp``: ``1/sqrt(x)`` for int32 ``x >= 0`` as a
    multiplier and a shift (int64 arrays), such that
    ``MultiplyByQuantizedMultiplier(v, M, shift) ~ v / sqrt(x)`` when ``reverse_shift = -1``.

    ``x <= 1`` gives ``(INT32_MAX, 0)``.  Otherwise ``x`` is normalised by powers of 4 into
    [2^27, 2^29), five Newton-Raphson steps ``y <- 1.5 y - (x/2) y^3`` run in Q3.28 from ``y = 1``,
    and the result is multiplied by ``sqrt(2)/2``; a negative shift is folded into the multiplier."""
    rs = _int_arg(reverse_shift, "reverse_shift", -(1 << 63), (1 << 63) - 1)
    if rs not in (-1, 1):
        raise RangeError("reverse_shift", "must be -1 or 1 (the sign convention of the returned shift)", rs)
    return _inv_sqrt(_as_int64(x, "x"), rs)


def calculate_input_radius(input_integer_bits: int, input_left_shift: int, total_signed_bits: int = 31) -> int:
    """``CalculateInputRadius`` (``quantization_util.cc``): the largest input difference whose
    rescaled value still fits, ``floor((2^ib - 1) * 2^(total - ib) / 2^left_shift)``.  The C++
    computes it in double; every term is a small integer or a power of two, so integer arithmetic
    gives the same value."""
    tsb = _int_arg(total_signed_bits, "total_signed_bits", 0, 31,
                   "It counts the value bits of a signed type of at most 32 bits")
    ib = _int_arg(input_integer_bits, "input_integer_bits", 0, tsb,
                  "input_integer_bits cannot exceed total_signed_bits")
    ls = _int_arg(input_left_shift, "input_left_shift", 0, 62, "The C++ shifts a 64-bit integer by it")
    return (((1 << ib) - 1) << (tsb - ib)) >> ls
