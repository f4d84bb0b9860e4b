"""gemmlowp's 16-bit fixed-point ``tanh`` and ``logistic`` (``fixedpoint/fixedpoint.h``), vectorised:
what LiteRT's optimized int16 TANH / LOGISTIC compute for a power-of-two input scale
(``optimized_ops::Tanh`` / ``Logistic`` on ``int16_t``; ``FixedPoint<int16, 3>`` in,
``FixedPoint<int16, 0>`` out).

The scalar gemmlowp code and its SSE4 / NEON versions give the same bytes on these functions
(``_mm_mulhrs_epi16`` and the scalar doubling high multiply differ only where neither is reached, and
``RoundingHalfSum`` is only taken on non-negative sums here), so the element order does not matter.
Values are int64 arrays holding int16 values; every helper returns what the C++ stores in an
``int16_t``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["tanh_q3", "logistic_q3", "saturating_double"]

_MIN, _MAX = -(1 << 15), (1 << 15) - 1


def _wrap(x):
    return ((np.asarray(x, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _mul(a, b):
    """``SaturatingRoundingDoublingHighMul(int16, int16)``: ``(a·b + nudge) / 2^15``, C truncation,
    ``nudge = 2^14`` for ``a·b >= 0`` else ``1 - 2^14``; ``-2^15 · -2^15`` saturates."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    ab = a * b
    n = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(n >= 0, n >> 15, -((-n) >> 15))
    return np.where((a == _MIN) & (b == _MIN), _MAX, _wrap(q))


def _rdbpot(x, e: int):
    """``RoundingDivideByPOT`` (ties away from zero)."""
    x = np.asarray(x, np.int64)
    mask = (1 << e) - 1
    return _wrap((x >> e) + ((x & mask) > (mask >> 1) + (x < 0)))


def _srmbpot(x, e: int):
    """``SaturatingRoundingMultiplyByPOT<e>``: a saturating left shift for ``e > 0``, a rounding
    right shift for ``e < 0``."""
    if e == 0:
        return np.asarray(x, np.int64)
    if e < 0:
        return _rdbpot(x, -e)
    x = np.asarray(x, np.int64)
    threshold = (1 << (15 - e)) - 1
    return np.where(x > threshold, _MAX, np.where(x < -threshold, _MIN, _wrap(x << e)))


def saturating_double(x):
    """``SaturatingRoundingMultiplyByPOT<1>`` on int16 (the TANH kernel's input left shift of 1)."""
    return _srmbpot(x, 1)


def _const(raw32: int) -> int:
    """``RescaleConstantInitializer``: the int32 constant rounding-shifted right by 16."""
    mask = (1 << 16) - 1
    return (raw32 >> 16) + int((raw32 & mask) > (mask >> 1) + (raw32 < 0))


def _exp_quarter(a):
    """``exp_on_interval_between_negative_one_quarter_and_0_excl`` (Q0.15)."""
    constant_term = _const(1895147668)
    one_third = _const(715827883)
    x = _wrap(a + (1 << 12))
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = _srmbpot(x4, -2)
    poly = _srmbpot(_wrap(_mul(_wrap(x4_over_4 + x3), one_third) + x2), -1)
    return np.clip(constant_term + _mul(constant_term, _wrap(x + poly)), _MIN, _MAX)


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535), (3, 720401),
           (4, 242))


def _exp_negative(a, integer_bits: int):
    """``exp_on_negative_values`` of a ``FixedPoint<int16, integer_bits>`` (Q0.15 result)."""
    fractional = 15 - integer_bits
    quarter = 1 << (fractional - 2)
    a = np.asarray(a, np.int64)
    mod = _wrap((a & (quarter - 1)) - quarter)
    result = _exp_quarter(_srmbpot(mod, integer_bits))
    remainder = _wrap(mod - a)
    for exponent, multiplier in _BARREL:
        if integer_bits > exponent:
            bit = 1 << (fractional + exponent)
            result = np.where((remainder & bit) != 0, _mul(result, _const(multiplier)), result)
    # integer_bits <= 5 here: no clamp below -32
    return np.where(a == 0, _MAX, result)


def _newton(half_denominator):
    """The Newton-Raphson reciprocal of ``one_over_one_plus_x`` / ``one_minus_x_over_one_plus_x``
    (Q2.13)."""
    x = _wrap(_const(1515870810) + _mul(half_denominator, _const(-1010580540)))
    one = 1 << 13
    for _ in range(3):
        x = _wrap(x + _srmbpot(_mul(x, _wrap(one - _mul(half_denominator, x))), 2))
    return x


def _half_sum_with_one(a):
    """``RoundingHalfSum(a, One())`` (scalar: ``(sum ± 1) / 2`` truncated; ``a`` is an exponential,
    never negative, so the SIMD ``_mm_avg_epu16`` form agrees)."""
    s = np.asarray(a, np.int64) + _MAX
    t = s + np.where(s >= 0, 1, -1)
    return _wrap(np.where(t >= 0, t >> 1, -((-t) >> 1)))


def tanh_q3(a):
    """``gemmlowp::tanh`` of ``FixedPoint<int16, 3>`` raw values: Q0.15 raw values."""
    a = np.asarray(a, np.int64)
    negative = a < 0
    n = np.where(negative, a, _wrap(-a))
    e = _exp_negative(n, 4)                                   # ExactMulByPot<1>: Q4.11, same raw
    t = _srmbpot(_wrap(_newton(_half_sum_with_one(e)) - (1 << 13)), 2)
    return np.where(a == 0, 0, np.where(negative, _wrap(-t), t))


def logistic_q3(a):
    """``gemmlowp::logistic`` of ``FixedPoint<int16, 3>`` raw values: Q0.15 raw values."""
    a = np.asarray(a, np.int64)
    positive = a > 0
    magnitude = np.where(positive, a, _wrap(-a))
    e = _exp_negative(_wrap(-magnitude), 3)
    result_positive = _srmbpot(_newton(_half_sum_with_one(e)), 1)     # Rescale<0>(ExactMulByPot<-1>(x))
    result_negative = _wrap(_MAX - result_positive)
    return np.where(a == 0, _const(1 << 30), np.where(positive, result_positive, result_negative))
