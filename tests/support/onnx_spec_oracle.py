"""An independent, scalar oracle for ONNX QuantizeLinear / DequantizeLinear as the operator text
defines them (with DESIGN.md's choices where the text is silent), written with exact rational
arithmetic (``fractions.Fraction``) and explicit IEEE rounding — no numpy arithmetic — so that it
shares no code or numerics with quantspec.

Q:  q = x / s, one IEEE division in precision P (both operands first rounded to P);
    integer outputs: round half to even, + zero point, saturate (NaN -> qmin);
    float8: zero point ignored; saturate=1 -> ±max beyond range (inf included); saturate=0 -> the
    type's overflow (NaN for E4M3FN/FNUZ, inf for E5M2); RNE;
    float4/float6: + zero point (exactly), RNE, saturating; NaN -> +max.
DQ: (x - zp) rounded to float32, times scale rounded to float32, rounded to the output type.
"""

from __future__ import annotations

import math
from fractions import Fraction

INF = math.inf
NAN = math.nan

# (mantissa bits without the implicit one, smallest normal exponent, largest exponent)
FORMATS = {
    "double": (52, -1022, 1023),
    "float": (23, -126, 127),
    "float16": (10, -14, 15),
    "bfloat16": (7, -126, 127),
}
# narrow floats: (mantissa bits, smallest normal exponent, largest finite value, overflow -> "nan"|"inf"|"sat", -0?)
NARROW = {
    "float8e4m3fn": (3, -6, 448.0, "nan", True),
    "float8e4m3fnuz": (3, -7, 240.0, "nan", False),
    "float8e5m2": (2, -14, 57344.0, "inf", True),
    "float8e5m2fnuz": (2, -15, 57344.0, "nan", False),
    "float4e2m1": (1, 0, 6.0, "sat", True),
    "float6e2m3": (3, 0, 7.5, "sat", True),
    "float6e3m2": (2, -2, 28.0, "sat", True),
}
INT_RANGES = {
    "uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
    "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1),
}


def _round_grid(v: Fraction, mant: int, emin: int) -> Fraction:
    """Round a non-zero rational to the binary grid with ``mant`` fraction bits (no upper limit),
    subnormals below 2**emin, ties to even."""
    a = abs(v)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - mant)
    n = a / quantum
    r = round(n)  # Python rounds Fractions half to even
    return (r * quantum) if v > 0 else -(r * quantum)


def to_format(value, fmt: str) -> float:
    """Round an exact value (Fraction, int or special float) to an IEEE format; returns a float
    (which holds every value of these formats exactly) with inf on overflow."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value) or value == 0):
        return value
    v = Fraction(value)
    if v == 0:
        return 0.0
    mant, emin, emax = FORMATS[fmt]
    r = _round_grid(v, mant, emin)
    if r == 0:
        return math.copysign(0.0, float(v))
    largest = (2 - Fraction(2) ** -mant) * Fraction(2) ** emax
    if abs(r) > largest:
        return math.copysign(INF, float(v))
    return float(r)


def divide(x: float, s: float, fmt: str) -> float:
    """IEEE division x / s correctly rounded to ``fmt`` (operands already in fmt)."""
    if math.isnan(x) or math.isnan(s):
        return NAN
    if math.isinf(x) and math.isinf(s):
        return NAN
    sign = math.copysign(1.0, x) * math.copysign(1.0, s)
    if math.isinf(x):
        return math.copysign(INF, sign)
    if s == 0:
        return NAN if x == 0 else math.copysign(INF, sign)
    if math.isinf(s) or x == 0:
        return math.copysign(0.0, sign)
    r = to_format(Fraction(x) / Fraction(s), fmt)
    return math.copysign(0.0, sign) if r == 0 else r


def quantize(x: float, s: float, zp, precision: str, out: str, saturate: bool = True):
    """The expected output value: an int for integer types, a float (NaN/±inf/±0 included) otherwise."""
    q = divide(to_format(x, precision), to_format(s, precision), precision)
    if out in INT_RANGES:
        lo, hi = INT_RANGES[out]
        if math.isnan(q):
            return lo
        if math.isinf(q):
            return hi if q > 0 else lo
        r = round(Fraction(q)) + (int(zp) if zp is not None else 0)
        return min(max(r, lo), hi)
    mant, emin, mx, overflow, negzero = NARROW[out]
    if out.startswith("float8"):
        if math.isnan(q):
            return NAN
        if math.isinf(q):
            if saturate:
                return math.copysign(mx, q)
            return math.copysign(NAN, q) if overflow == "nan" else q
        v = Fraction(q)
    else:  # float4 / float6
        if math.isnan(q):
            return mx
        if math.isinf(q):
            return math.copysign(mx, q)
        v = Fraction(q)
        if zp is not None:
            zf = float(zp)
            v += Fraction(zf)
            if v == 0:  # IEEE sum of zeros: -0 only for (-0) + (-0); x + (-x) = +0
                q = -0.0 if (math.copysign(1.0, q) < 0 and math.copysign(1.0, zf) < 0 and q == 0) else 0.0
        if v == 0:
            return math.copysign(0.0, q)
    if v == 0:
        return 0.0 if not negzero else math.copysign(0.0, q)
    r = _round_grid(v, mant, emin)
    if abs(r) > Fraction(mx):
        if saturate or overflow == "sat":
            return math.copysign(mx, float(v))
        return math.copysign(NAN if overflow == "nan" else INF, float(v))
    if r == 0:
        return math.copysign(0.0, float(v)) if negzero else 0.0
    return float(r)


def dequantize(x, s: float, zp, out: str) -> float:
    """(x - zp) in float32, times s in float32, rounded to ``out``."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        d = x
    else:
        d = to_format(Fraction(x) - Fraction(zp if zp is not None else 0), "float")
        if d == 0 and isinstance(x, float):  # IEEE: x - zp is -0 only for (-0) - (+0)
            z = 0.0 if zp is None else float(zp)
            neg = math.copysign(1.0, x) < 0 and x == 0 and math.copysign(1.0, z) > 0 and z == 0
            d = -0.0 if neg or (zp is None and math.copysign(1.0, x) < 0) else 0.0
    sf = to_format(s, "float")
    if math.isnan(d) or math.isnan(sf):
        y = NAN
    elif math.isinf(d) or math.isinf(sf):
        y = NAN if (d == 0 or sf == 0) else math.copysign(INF, d) * math.copysign(1.0, sf)
    elif d == 0 or sf == 0:
        y = math.copysign(0.0, math.copysign(1.0, d) * math.copysign(1.0, sf))
    else:
        y = to_format(Fraction(d) * Fraction(sf), "float")
    return y if out == "float" else to_format(y, out)
