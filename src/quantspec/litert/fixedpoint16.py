"""gemmlowp's int16 fixed-point primitives and LiteRT's int16 lookup tables, vectorised.

LiteRT's HARD_SWISH (``reference_ops::HardSwish``) and its int16 kernels compute on ``int16_t``
values with gemmlowp's 16-bit overloads; the int16 lookup-table ops (GELU, RSQRT, ... on int16)
use a 513-entry interpolated table (``LUTPopulateInt16`` / ``LUTLookup``, ``kernels/internal/
common.h``).  Every function here takes int64 arrays holding int16 values and returns int64 arrays
holding what the C++ stores in an ``int16_t`` (wrapping where the C++ narrows).
"""

from __future__ import annotations

import numpy as np

from .._semantics.rounding import half_away_from_zero

__all__ = ["wrap16", "srdhm16", "sdhm16", "rdbpot16", "saturating_left_shift16", "downscale_multiplier16",
           "lut_int16", "lut_lookup16", "INT16_MIN", "INT16_MAX", "SIGMOID_TABLE", "logistic16", "tanh16"]

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


def lut_int16(input_scale, input_zero_point: int, output_scale, output_zero_point: int, transform,
              precision=np.float32) -> np.ndarray:
    """``LUTPopulateInt16<FloatT>``: the 513 int16 entries of LiteRT's interpolated table, computed in
    ``precision`` (float32, or float64 for the ``double`` overload SOFTMAX uses).

    ``transform`` maps an array of that precision to one (the C++ transform, element by element)."""
    f = precision
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
        i = np.arange(steps, dtype=f)
        x0 = (input_min + i * step).astype(f)
        x_mid = (x0 + half_step).astype(f)
        x1 = (input_min + (i + f(1)) * step).astype(f)
        val = transform(x0).astype(f)
        val_mid = transform(x_mid).astype(f)
        val_next = transform(x1).astype(f)
        sample = half_away_from_zero((val * inv).astype(f))
        interp = half_away_from_zero(((val_next * inv + sample) / f(2)).astype(f))
        mid = half_away_from_zero((val_mid * inv).astype(f))
        bias = half_away_from_zero(((interp - mid) / f(2)).astype(f))
        body = np.clip((sample - bias).astype(f), f(INT16_MIN), f(INT16_MAX))
        last = np.clip(half_away_from_zero((transform(np.array([input_max], f)).astype(f) * inv).astype(f)),
                       f(INT16_MIN), f(INT16_MAX))
    # a NaN entry (``inf - inf`` where the transform overflows, as expf does for EXP's large inputs,
    # or a transform that returns NaN) passes std::min / std::max and converts to 0 on x86: the
    # conversion to int16 goes through cvttss2si / cvttsd2si, which give INT32_MIN, whose low 16 bits are 0
    table = np.concatenate([body, last]).astype(np.float64)
    table = np.where(np.isnan(table), 0, table)
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


#: LiteRT's ``sigmoid_table_uint16`` (common.h): sigmoid(i / 24) in 0.16 fixed point, i = 0..255, the
#: values the int16 LOGISTIC and TANH kernels interpolate (they are not exactly any rounding of the
#: function, so they are kept as LiteRT ships them)
SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794, 41432,
    42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443, 48964, 49475,
    49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374, 54755, 55125, 55485,
    55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519,
    59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036,
    62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308, 64357, 64405,
    64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900,
    64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179,
    65194, 65208, 65221, 65234, 65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337,
    65345, 65352, 65360, 65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425,
    65429, 65433, 65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516, 65517,
    65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524, 65525, 65525,
    65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530,
    65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533,
    65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
], dtype=np.int64)


def _scaled_input16(x: np.ndarray, multiplier: int, left_shift: int) -> np.ndarray:
    """The input on the table's scale: ``(x * M + round) >> shift``, the power-of-two case (M = 0)
    taking ``M = 3 << shift`` and no shift."""
    if multiplier == 0:
        multiplier, left_shift = 3 << left_shift, 0
    rounding = (1 << (left_shift - 1)) if left_shift > 0 else 0
    return (np.asarray(x, np.int64) * multiplier + rounding) >> left_shift


def logistic16(x, multiplier: int, left_shift: int) -> np.ndarray:
    """``reference_integer_ops::Logistic`` (int16): the interpolated sigmoid table, the result in Q0.15."""
    v = _scaled_input16(x, multiplier, left_shift)
    a = np.abs(v)
    uh = a >> 9
    safe = np.minimum(uh, 254)
    ua, ub = SIGMOID_TABLE[safe], SIGMOID_TABLE[safe + 1]
    result = np.where(uh >= 255, 0x7FFF << 10, (ua << 9) + (a & 0x1FF) * (ub - ua)) & 0xFFFFFFFF
    result = np.where(v >= 0, result + (1 << 9), (1 << 25) - result + (1 << 9) - 1) & 0xFFFFFFFF
    return wrap16(result >> 10)


def tanh16(x, multiplier: int, left_shift: int) -> np.ndarray:
    """``reference_integer_ops::Tanh`` (int16): ``2 sigmoid(2x) - 1`` on the same table, in Q0.15."""
    v = _scaled_input16(x, multiplier, left_shift)
    a = np.abs(v)
    uh = a >> 8
    safe = np.minimum(uh, 254)
    ua, ub = SIGMOID_TABLE[safe], SIGMOID_TABLE[safe + 1]
    result = np.where(uh >= 255, 0xFFFF << 8, (ua << 8) + (a & 0xFF) * (ub - ua))
    result = np.where(v >= 0, result - (1 << 23) + (1 << 7), -result + (1 << 23) + (1 << 7) - 1)
    return wrap16(result >> 8)
