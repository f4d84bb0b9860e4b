"""gemmlowp's int16 fixed-point primitives and LiteRT's int16 lookup tables, vectorised.

LiteRT's HARD_SWISH (``reference_ops::HardSwish``) and its int16 kernels compute on ``int16_t``
values with gemmlowp's 16-bit overloads; the int16 lookup-table ops (GELU, RSQRT, ... on int16)
use a 513-entry interpolated table (``LUTPopulateInt16`` / ``LUTLookup``, ``kernels/internal/
common.h``).  Every function here takes int64 arrays holding int16 values and returns int64 arrays
holding what the C++ stores in an ``int16_t`` (wrapping where the C++ narrows).
"""

from __future__ import annotations

import numpy as np

from .._core.rounding import half_away_from_zero

__all__ = ["wrap16", "srdhm16", "sdhm16", "rdbpot16", "saturating_left_shift16", "downscale_multiplier16",
           "lut_int16", "lut_lookup16", "INT16_MIN", "INT16_MAX"]

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1


def wrap16(x) -> np.ndarray:
    """The int16 a C++ conversion to ``int16_t`` stores (two's complement wrap-around)."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def srdhm16(a, b) -> np.ndarray:
    """gemmlowp ``SaturatingRoundingDoublingHighMul(int16, int16)``: ``(a*b + nudge) / 2^15`` with C
    truncation, ``nudge = 2^14`` if ``a*b >= 0`` else ``1 - 2^14``; ``INT16_MIN * INT16_MIN`` saturates."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    n = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    q = np.where(n >= 0, n >> 15, -((-n) >> 15))
    return np.where((a == INT16_MIN) & (b == INT16_MIN), INT16_MAX, wrap16(q))


def sdhm16(a, b) -> np.ndarray:
    """``SaturatingDoublingHighMul`` of ``reference_ops`` (hard_swish.h): ``a*b / 2^15`` truncated
    toward zero (no rounding), ``INT16_MIN * INT16_MIN`` saturated."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    q = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == INT16_MIN) & (b == INT16_MIN), INT16_MAX, wrap16(q))


def rdbpot16(x, exponent: int) -> np.ndarray:
    """gemmlowp ``RoundingDivideByPOT(int16 x, exponent)``, ``0 <= exponent <= 31``, with the int16
    mask of the C++ (from exponent 16 on the mask is all ones)."""
    x = np.asarray(x, dtype=np.int64)
    e = int(exponent)
    mask = int(wrap16((1 << e) - 1))
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return wrap16((x >> e) + (remainder > threshold))


def saturating_left_shift16(x, amount: int) -> np.ndarray:
    """``SaturatingLeftShift(int16 value, amount)`` of hard_swish.h: ``value * 2^amount`` clamped to int16."""
    x = np.asarray(x, dtype=np.int64)
    return np.clip(x << int(amount), INT16_MIN, INT16_MAX)


def downscale_multiplier16(multiplier: int) -> int:
    """``DownScaleInt32ToInt16Multiplier``: ``(M + 2^15) >> 16``, or INT16_MAX from
    ``INT32_MAX - 2^15`` up."""
    if multiplier >= (1 << 31) - 1 - (1 << 15):
        return INT16_MAX
    return (int(multiplier) + (1 << 15)) >> 16


def lut_int16(input_scale, input_zero_point: int, output_scale, output_zero_point: int, transform) -> np.ndarray:
    """``LUTPopulateInt16<float>``: the 513 int16 entries of LiteRT's interpolated table, in float32.

    ``transform`` maps a float32 array to a float32 array (the C++ transform, element by element)."""
    f = np.float32
    s_in, s_out = f(input_scale), f(output_scale)
    input_min = s_in * f(INT16_MIN - int(input_zero_point))
    input_max = s_in * f(INT16_MAX - int(input_zero_point))
    output_min = s_out * f(INT16_MIN - int(output_zero_point))
    output_max = s_out * f(INT16_MAX - int(output_zero_point))
    steps = 512
    with np.errstate(all="ignore"):
        step = (input_max - input_min) / f(steps)
        half_step = step / f(2)
        inv = f(65536) / (output_max - output_min)
        i = np.arange(steps, dtype=np.float32)
        x0 = (input_min + i * step).astype(np.float32)
        x_mid = (x0 + half_step).astype(np.float32)
        x1 = (input_min + (i + f(1)) * step).astype(np.float32)
        val = transform(x0).astype(np.float32)
        val_mid = transform(x_mid).astype(np.float32)
        val_next = transform(x1).astype(np.float32)
        sample = half_away_from_zero((val * inv).astype(np.float32))
        interp = half_away_from_zero(((val_next * inv + sample) / f(2)).astype(np.float32))
        mid = half_away_from_zero((val_mid * inv).astype(np.float32))
        bias = half_away_from_zero(((interp - mid) / f(2)).astype(np.float32))
        body = np.clip((sample - bias).astype(np.float32), f(INT16_MIN), f(INT16_MAX))
        last = np.clip(half_away_from_zero((transform(np.array([input_max], np.float32)).astype(np.float32)
                                            * inv).astype(np.float32)), f(INT16_MIN), f(INT16_MAX))
    # a NaN entry (a transform that returns NaN) converts to INT16_MIN on x86 (cvttss2si gives
    # INT32_MIN, narrowed): no LiteRT transform does
    table = np.concatenate([body, last]).astype(np.float64)
    table = np.where(np.isnan(table), INT16_MIN, table)
    return table.astype(np.int64).astype(np.int16)


def lut_lookup16(values, lut: np.ndarray) -> np.ndarray:
    """``LUTLookup(int16, lut)``: the entry of the top 9 bits, plus the slope to the next entry
    times the low 7 bits, rounded (``(slope * offset + 64) >> 7``)."""
    v = np.asarray(values, dtype=np.int64)
    index = 256 + (v >> 7)
    offset = v & 0x7F
    table = lut.astype(np.int64)
    base = table[index]
    slope = wrap16(table[index + 1] - base)
    delta = (slope * offset + 64) >> 7
    return wrap16(base + delta)
