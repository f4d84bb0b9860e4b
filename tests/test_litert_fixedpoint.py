"""quantspec.litert.fixedpoint against an independent scalar model of the C++ (written here, from
the semantics of tflite/kernels/internal/common.{h,cc}, quantization_util.cc and gemmlowp
fixedpoint.h, with Python big integers and explicit int32 wrap-around), and end-to-end against the
LiteRT interpreter (BUILTIN_REF) where an op exposes a primitive: QUANTIZE (int8 requantize) is
``clamp(MultiplyByQuantizedMultiplier(x - z_in, QuantizeMultiplier(s_in/s_out)) + z_out)``."""

from __future__ import annotations

import math
import os
from fractions import Fraction

import numpy as np
import pytest

from quantspec.errors import DTypeError, InvalidArgumentError, RangeError
from quantspec.litert import fixedpoint as fp

MIN, MAX = -(1 << 31), (1 << 31) - 1
N = int(os.environ.get("QUANTSPEC_TEST_SIZE", "1500"))


# ---------------------------------------------------------------------------------------------
# the scalar model (Python ints; C semantics spelled out)
# ---------------------------------------------------------------------------------------------

def wrap(v: int) -> int:
    """int32 wrap-around."""
    return ((v + (1 << 31)) % (1 << 32)) - (1 << 31)


def c_div(a: int, b: int) -> int:
    """C integer division: truncation toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def srdhm(a: int, b: int) -> int:
    if a == b == MIN:
        return MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return c_div(ab + nudge, 1 << 31)


def rdbpot(x: int, e: int) -> int:
    # round(x / 2^e), ties away from zero, computed exactly with a Fraction
    v = Fraction(x, 1 << e)
    f = math.floor(abs(v) + Fraction(1, 2))
    return f if v >= 0 else -f


def mbqm(x: int, m: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot(srdhm(wrap(x * (1 << left)), m), right)


def mbqm_single(x: int, m: int, shift: int) -> int:
    t = 31 - shift
    return wrap((x * m + (1 << (t - 1))) >> t)       # Python >> is floor: the C++ arithmetic shift


def mbqm_i64(x: int, m: int, shift: int) -> int:
    red = 0x7FFF if m >= 0x7FFF0000 else (m + (1 << 15)) >> 16
    t = 15 - shift
    return wrap((x * red + (1 << (t - 1))) >> t)


def quantize_multiplier_model(real: float, single: bool = False) -> tuple[int, int]:
    if real == 0:
        return 0, 0
    r = Fraction(real)
    a = abs(r)
    e = 0                                             # 2^(e-1) <= a < 2^e
    while a >= Fraction(2) ** e:
        e += 1
    while a < Fraction(2) ** (e - 1):
        e -= 1
    v = a * Fraction(1 << 31) / Fraction(2) ** e
    q = math.floor(v + Fraction(1, 2))                # half away from zero (v > 0)
    q = q if r > 0 else -q                            # frexp keeps the sign in the significand
    if q == 1 << 31:                                  # only the positive side is adjusted
        q //= 2
        e += 1
    if e < -31:
        return 0, 0
    if single and e > 30:
        return MAX, 30
    return q, e


def sat_left(x: int, e: int) -> int:
    return max(MIN, min(MAX, x * (1 << e)))


def srmbpot(x: int, e: int) -> int:
    return sat_left(x, e) if e > 0 else rdbpot(x, -e) if e < 0 else x


def rescale(x: int, src: int, dst: int) -> int:
    return srmbpot(x, src - dst)


def clz(x: int) -> int:
    u = x & 0xFFFFFFFF
    return 32 - u.bit_length()


def half_sum(a: int, b: int) -> int:
    s = a + b
    return c_div(s + (1 if s >= 0 else -1), 2)


def exp_quarter(a: int) -> int:
    x = wrap(a + (1 << 28))
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4 = srdhm(x2, x2)
    x4_4 = rdbpot(x4, 2)
    p = rdbpot(wrap(srdhm(wrap(x4_4 + x3), 715827883) + x2), 1)
    return wrap(1895147668 + srdhm(1895147668, wrap(x + p)))


def exp_neg(a: int, ib: int) -> int:
    fb = 31 - ib
    quarter = 1 << (fb - 2)
    amq = wrap((a & (quarter - 1)) - quarter)
    result = exp_quarter(rescale(amq, ib, 0))
    rem = wrap(amq - a)
    for k, mult in ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
                    (2, 39332535), (3, 720401), (4, 242)):
        if ib > k and rem & (1 << (fb + k)):
            result = srdhm(result, mult)
    if ib > 5 and a < -(1 << (36 - ib)):
        result = 0
    return MAX if a == 0 else result


def newton(d: int) -> int:
    x = wrap(1515870810 + srdhm(d, -1010580540))
    for _ in range(3):
        x = wrap(x + rescale(srdhm(x, wrap((1 << 29) - srdhm(d, x))), 4, 2))
    return x


def one_over_one_plus(a: int) -> int:
    return rescale(newton(half_sum(a, MAX)), 1, 0)


def one_minus_over_one_plus(a: int) -> int:
    return rescale(wrap(newton(half_sum(a, MAX)) - (1 << 29)), 2, 0)


def logistic_model(a: int, ib: int) -> int:
    if a == 0:
        return 1 << 30
    ab = a if a > 0 else wrap(-a)
    pos = one_over_one_plus(exp_neg(wrap(-ab), ib))
    return pos if a > 0 else wrap(MAX - pos)


def tanh_model(a: int, ib: int) -> int:
    if a == 0:
        return 0
    n = a if a < 0 else wrap(-a)
    t = one_minus_over_one_plus(exp_neg(n, ib + 1))
    return wrap(-t) if a < 0 else t


def srmbpot_param(x: int, e: int) -> int:
    return x if e == 0 else sat_left(x, e)


def log_model(x: int, ib: int, ob: int) -> int:
    acc = ob + 1
    quarter = rdbpot(536870912, acc)
    h1 = clz(x)
    ra = srmbpot_param(srdhm(srmbpot_param(x, h1 - 1), 1518500250), 1)
    za = max(MIN, min(MAX, srmbpot_param(ib - h1, 31 - acc) + quarter))
    zb = srdhm(x, 1518500250)
    hb = clz(zb) - 1
    rb = srmbpot_param(x, hb)
    zbb = max(MIN, min(MAX, srmbpot_param(ib - hb, 31 - acc) - quarter))
    r, z = min(ra, rb), max(za, zbb)
    p = half_sum(r, 1805811301)
    q = wrap(r - 1805811301)
    q = wrap(q + q)
    sq = srdhm(q, q)
    num = wrap(srdhm(q, r) + srdhm(srdhm(q, sq), 117049297))
    den = wrap(srdhm(p, wrap(wrap(1057819769 + q) + srdhm(127690142, sq))) + srdhm(638450708, q))
    rec = one_over_one_plus(den)
    total = wrap(srdhm(z, 1488522236) + srdhm(rescale(num, 0, acc), rec))
    return rescale(total, acc, ob)


def reciprocal_model(x: int, digits: int) -> tuple[int, int]:
    h = clz(x)
    s = wrap((((x & 0xFFFFFFFF) << h) & 0xFFFFFFFF) - (1 << 31))
    return one_over_one_plus(s), digits - h


def inv_sqrt_model(x: int, reverse_shift: int) -> tuple[int, int]:
    if x <= 1:
        return MAX, 0
    shift = 11
    while x >= 1 << 29:
        x //= 4
        shift += 1
    pairs = (clz(x) - 1) // 2 - 1
    shift -= pairs
    x <<= 2 * pairs
    half = rdbpot(x >> 1, 1)
    y = 1 << 28
    for _ in range(5):
        y3 = rescale(srdhm(srdhm(y, y), y), 9, 3)
        y = rescale(wrap(srdhm((1 << 28) + (1 << 27), y) - srdhm(half, y3)), 6, 3)
    y = srdhm(y, 1518500250)
    if shift < 0:
        y = wrap(y << -shift)
        shift = 0
    return y, shift * reverse_shift


# ---------------------------------------------------------------------------------------------
# value sets: edges first, then seeded random values
# ---------------------------------------------------------------------------------------------

EDGES = [MIN, MIN + 1, -(1 << 30) - 1, -(1 << 30), -(1 << 30) + 1, -65536, -256, -129, -128, -3, -2, -1, 0,
         1, 2, 3, 127, 128, 255, 65535, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, MAX - 1, MAX]


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def random_int32(r: np.random.Generator, n: int) -> list[int]:
    """A mix of full-range values and values of every magnitude."""
    full = r.integers(MIN, MAX, n // 2, endpoint=True)
    bits = r.integers(0, 32, n - n // 2)
    mags = (r.integers(0, 1 << 31, n - n // 2) >> (31 - bits)) * r.choice([-1, 1], n - n // 2)
    return [int(v) for v in np.concatenate([full, np.clip(mags, MIN, MAX)])]


def check(actual, expected, what):
    actual = np.asarray(actual).tolist()
    bad = [(i, a, e) for i, (a, e) in enumerate(zip(actual, expected)) if a != e]
    assert not bad, f"{what}: {len(bad)} differences, first {bad[:5]}"


# ---------------------------------------------------------------------------------------------
# primitives
# ---------------------------------------------------------------------------------------------

def test_srdhm_edges_and_random():
    pairs = [(a, b) for a in EDGES for b in EDGES]
    r = rng(1)
    pairs += list(zip(random_int32(r, N), random_int32(r, N)))
    # exact ties a*b = (2k+1) * 2^30, both signs
    for k in range(-20, 20):
        pairs += [(1 << 15, (2 * k + 1) << 15), (-(1 << 15), (2 * k + 1) << 15)]
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    out = fp.saturating_rounding_doubling_high_mul(a, b)
    assert out.dtype == np.int32
    check(out, [srdhm(x, y) for x, y in pairs], "SRDHM")
    assert int(fp.saturating_rounding_doubling_high_mul(MIN, MIN)) == MAX
    assert int(fp.saturating_rounding_doubling_high_mul(MIN, MAX)) == -MAX
    # ties round toward +infinity (the nudge is 2^30 for a*b >= 0, 1 - 2^30 below)
    assert int(fp.saturating_rounding_doubling_high_mul(1 << 15, 3 << 15)) == 2     # 1.5 -> 2
    assert int(fp.saturating_rounding_doubling_high_mul(-(1 << 15), 3 << 15)) == -1  # -1.5 -> -1


@pytest.mark.parametrize("exponent", [0, 1, 2, 7, 20, 30, 31])
def test_rounding_divide_by_pot(exponent):
    r = rng(2 + exponent)
    xs = EDGES + random_int32(r, N // 4)
    if exponent:
        half = 1 << (exponent - 1)
        for k in range(-5, 5):     # exact ties, both signs
            v = (2 * k + 1) * half
            if MIN <= v <= MAX:
                xs.append(v)
    out = fp.rounding_divide_by_pot(np.array(xs), exponent)
    check(out, [rdbpot(x, exponent) for x in xs], f"RDBPOT {exponent}")


def test_rounding_divide_by_pot_ties_away_from_zero():
    assert fp.rounding_divide_by_pot([5, -5, 3, -3, 1, -1], 1).tolist() == [3, -3, 2, -2, 1, -1]
    assert fp.rounding_divide_by_pot([6, -6, 2, -2], 2).tolist() == [2, -2, 1, -1]
    assert int(fp.rounding_divide_by_pot(MIN, 31)) == -1
    assert int(fp.rounding_divide_by_pot(MAX, 31)) == 1


SHIFTS = [-31, -30, -17, -8, -1, 0, 1, 7, 20, 30]
MULTS = [0, 1, 2, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, 1518500250, MAX - 1, MAX]


@pytest.mark.parametrize("shift", SHIFTS)
def test_multiply_by_quantized_multiplier_double_rounding(shift):
    r = rng(100 + shift)
    cases = [(x, m) for x in EDGES for m in MULTS]
    cases += list(zip(random_int32(r, N // 4), [int(v) for v in r.integers(1 << 30, 1 << 31, N // 4)]))
    x = np.array([c[0] for c in cases])
    m = np.array([c[1] for c in cases])
    out = fp.multiply_by_quantized_multiplier(x, m, shift)
    check(out, [mbqm(a, b, shift) for a, b in cases], f"MBQM shift {shift}")


@pytest.mark.parametrize("shift", SHIFTS)
def test_multiply_by_quantized_multiplier_single_rounding(shift):
    r = rng(200 + shift)
    cases = [(x, m) for x in EDGES for m in MULTS]
    cases += list(zip(random_int32(r, N // 4), [int(v) for v in r.integers(1 << 30, 1 << 31, N // 4)]))
    x = np.array([c[0] for c in cases])
    m = np.array([c[1] for c in cases])
    out = fp.multiply_by_quantized_multiplier(x, m, shift, rounding="single")
    check(out, [mbqm_single(a, b, shift) for a, b in cases], f"MBQM single shift {shift}")


def test_single_and_double_rounding_differ_at_negative_ties():
    # x * M / 2^32 = -2.5 exactly: the high multiply gives -5 exactly, then RoundingDivideByPOT rounds
    # the tie away from zero (-3); single rounding rounds it up (-2)
    x, m = -10, 1 << 30
    assert int(fp.multiply_by_quantized_multiplier(x, m, -1)) == mbqm(x, m, -1) == -3
    assert int(fp.multiply_by_quantized_multiplier(x, m, -1, rounding="single")) == -2
    # a tie of the high multiply itself (-2.5 before any shift) rounds up in both builds
    assert int(fp.multiply_by_quantized_multiplier(-5, m, 0)) == -2
    assert int(fp.multiply_by_quantized_multiplier(-5, m, 0, rounding="single")) == -2


def test_multiply_by_quantized_multiplier_per_channel_broadcast():
    x = np.arange(-6, 6).reshape(4, 3) * 1000
    m = np.array([1 << 30, 1518500250, MAX])
    s = np.array([-3, 2, -31])
    out = fp.multiply_by_quantized_multiplier(x, m, s)
    check(out.ravel(), [mbqm(int(v), int(m[i % 3]), int(s[i % 3])) for i, v in enumerate(x.ravel())], "per-channel")


def test_multiply_by_quantized_multiplier_int64():
    r = rng(7)
    xs = [-(1 << 47), -(1 << 47) + 1, -1, 0, 1, (1 << 47) - 1] + [int(v) for v in r.integers(-(1 << 47), 1 << 47, 200)]
    ms = [0, 1, 1 << 30, 0x7FFEFFFF, 0x7FFF0000, MAX]
    for shift in (-31, -20, -1, 0, 3, 7):
        cases = [(x, m) for x in xs for m in ms]
        out = fp.multiply_by_quantized_multiplier_int64(np.array([c[0] for c in cases]),
                                                        np.array([c[1] for c in cases]), shift)
        check(out, [mbqm_i64(x, m, shift) for x, m in cases], f"MBQM int64 shift {shift}")


def test_smaller_than_one_and_greater_than_one_variants():
    r = rng(8)
    xs = random_int32(r, 200)
    for m, s in [(1 << 30, 0), (1518500250, -5), (MAX, -31)]:
        out = fp.multiply_by_quantized_multiplier_smaller_than_one_exp(np.array(xs), m, s)
        check(out, [rdbpot(srdhm(x, m), -s) for x in xs], "SmallerThanOneExp")
    small = [x >> 12 for x in xs]
    for m, s in [(1 << 30, 0), (1518500250, 5), (MAX, 12)]:
        out = fp.multiply_by_quantized_multiplier_greater_than_one(np.array(small), m, s)
        check(out, [srdhm(wrap(x << s), m) for x in small], "GreaterThanOne")


# ---------------------------------------------------------------------------------------------
# QuantizeMultiplier
# ---------------------------------------------------------------------------------------------

QM_REALS = [0.0, 1.0, 0.5, 0.75, 2.0, 3.0, 1e-3, 0.1, 1 / 3, 2 / 3,
            1 - 2 ** -33, 1 - 2 ** -32, 1 - 2 ** -31, 0.5 - 2 ** -34, 2 - 2 ** -32,   # round up to 2^31
            2 ** -31, 2 ** -32, 2 ** -32 * (1 - 2 ** -40), 2 ** -33, 1e-12, 5e-324,       # flush to zero
            2.0 ** 40, 12345.678, float(2 ** 31), -0.5, -0.3, -(1 - 2 ** -33), -2 ** -33]


def test_quantize_multiplier_edges():
    for real in QM_REALS:
        assert fp.quantize_multiplier(real) == quantize_multiplier_model(real), real
        assert fp.quantize_multiplier(real, rounding="single") == quantize_multiplier_model(real, True), real
    assert fp.quantize_multiplier(0.0) == (0, 0)
    assert fp.quantize_multiplier(1 - 2 ** -33) == (1 << 30, 1)          # rounding reached 2^31
    assert fp.quantize_multiplier(2 ** -33) == (0, 0)                    # shift -32 flushed
    assert fp.quantize_multiplier(2 ** -32) == (1 << 30, -31)            # shift -31 kept
    assert fp.quantize_multiplier(2.0 ** 40) == (1 << 30, 41)
    assert fp.quantize_multiplier(2.0 ** 40, rounding="single") == (MAX, 30)


def test_quantize_multiplier_random_and_vectorised():
    r = rng(9)
    reals = np.concatenate([r.uniform(0, 1, N // 3), np.exp(r.uniform(-30, 30, N // 3)),
                            r.standard_normal(N // 3) * 10.0 ** r.integers(-12, 12, N // 3),
                            np.float32(r.uniform(1e-4, 1, 50)).astype(np.float64) / np.float32(r.uniform(1e-4, 1, 50))])
    m, s = fp.quantize_multiplier(reals)
    assert m.dtype == np.int32 and s.dtype == np.int32
    expected = [quantize_multiplier_model(float(v)) for v in reals]
    check(m, [e[0] for e in expected], "multiplier")
    check(s, [e[1] for e in expected], "shift")
    for v in reals[:50]:
        assert fp.quantize_multiplier(float(v)) == quantize_multiplier_model(float(v))


def test_quantize_multiplier_checked_variants():
    assert fp.quantize_multiplier_smaller_than_one_exp(0.25) == (1 << 30, -1)
    assert fp.quantize_multiplier_greater_than_one(3.0) == (3 << 29, 2)
    with pytest.raises(RangeError, match="0 < real < 1"):
        fp.quantize_multiplier_smaller_than_one_exp(1.0)
    with pytest.raises(RangeError, match="rounds up to 1.0"):
        fp.quantize_multiplier_smaller_than_one_exp(1 - 2 ** -33)
    with pytest.raises(RangeError, match="real > 1"):
        fp.quantize_multiplier_greater_than_one(1.0)


# ---------------------------------------------------------------------------------------------
# power-of-two multiplications and helpers
# ---------------------------------------------------------------------------------------------

def test_saturating_shifts():
    r = rng(10)
    xs = EDGES + random_int32(r, 300)
    for e in (-31, -7, -1, 0, 1, 5, 12, 30, 31):
        check(fp.saturating_rounding_multiply_by_pot(np.array(xs), e), [srmbpot(x, e) for x in xs], f"SRMBPOT {e}")
    for e in (0, 1, 8, 31):
        check(fp.saturating_left_shift(np.array(xs), e), [sat_left(x, e) for x in xs], f"shift {e}")
    assert int(fp.saturating_left_shift(1 << 30, 1)) == MAX
    assert int(fp.saturating_left_shift(-(1 << 30), 1)) == MIN
    assert int(fp.saturating_left_shift(-(1 << 30) - 1, 1)) == MIN


def test_count_leading_zeros_and_half_sum():
    xs = EDGES + [1 << k for k in range(31)]
    check(fp.count_leading_zeros(np.array(xs)), [clz(x) for x in xs], "clz")
    assert int(fp.count_leading_zeros(0)) == 32
    pairs = [(a, b) for a in EDGES for b in EDGES]
    check(fp.rounding_half_sum(np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])),
          [half_sum(a, b) for a, b in pairs], "RoundingHalfSum")


def test_calculate_input_radius():
    for ib in (0, 1, 4, 5):
        for ls in (0, 1, 5, 20, 31):
            expected = math.floor((2 ** ib - 1) * 2.0 ** (31 - ib) / 2.0 ** ls)
            assert fp.calculate_input_radius(ib, ls) == expected
    assert fp.calculate_input_radius(4, 3, 15) == math.floor(15 * 2 ** 11 / 8)


# ---------------------------------------------------------------------------------------------
# gemmlowp / TFLite functions
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ib", [0, 1, 2, 3, 4, 5, 6, 12])
def test_exp_on_negative_values(ib):
    r = rng(20 + ib)
    xs = [0, -1, -2, MIN, MIN + 1, -(1 << 29), -(1 << (31 - ib)) if ib else -MAX]
    if ib > 5:
        xs += [-(1 << (36 - ib)), -(1 << (36 - ib)) - 1, -(1 << (36 - ib)) + 1]
    xs += [-int(v) for v in r.integers(0, 1 << 31, N // 3)]
    xs += [-int(v) for v in r.integers(0, 1 << (31 - ib), N // 6)]
    out = fp.exp_on_negative_values(np.array(xs), ib)
    check(out, [exp_neg(x, ib) for x in xs], f"exp_on_negative_values<{ib}>")
    # and it is exp: within a few ULP of Q0.31 for moderate inputs
    sel = [x for x in xs if x > -(8 << (31 - ib))][:200]
    approx = fp.exp_on_negative_values(np.array(sel), ib) / 2.0 ** 31
    assert np.allclose(approx, np.exp(np.array(sel) / 2.0 ** (31 - ib)), atol=2e-8 * 2 ** ib + 1e-8)


def test_one_over_one_plus_x_and_one_minus_x():
    r = rng(30)
    xs = [0, 1, 2, (1 << 30), MAX - 1, MAX] + [int(v) for v in r.integers(0, 1 << 31, N)]
    check(fp.one_over_one_plus_x_for_x_in_0_1(np.array(xs)), [one_over_one_plus(x) for x in xs], "1/(1+x)")
    check(fp.one_minus_x_over_one_plus_x_for_x_in_0_1(np.array(xs)), [one_minus_over_one_plus(x) for x in xs],
          "(1-x)/(1+x)")


@pytest.mark.parametrize("ib", [0, 3, 4, 5])
def test_logistic_and_tanh(ib):
    r = rng(40 + ib)
    xs = [0, 1, -1, MIN, MAX, MIN + 1] + random_int32(r, N // 2)
    check(fp.logistic(np.array(xs), ib), [logistic_model(x, ib) for x in xs], f"logistic<{ib}>")
    check(fp.tanh(np.array(xs), ib), [tanh_model(x, ib) for x in xs], f"tanh<{ib}>")


@pytest.mark.parametrize("ib,ob", [(12, 5), (5, 5), (1, 2), (20, 5)])
def test_log_x_for_x_greater_than_or_equal_to_1(ib, ob):
    r = rng(50 + ib)
    one_raw = 1 << (31 - ib)
    xs = [one_raw, one_raw + 1, MAX, MAX - 1] + [int(v) for v in r.integers(one_raw, 1 << 31, N // 2)]
    xs += [int(v) for v in r.integers(1, one_raw + 1, 100)]     # below 1 down to 1/x_max works too
    out = fp.log_x_for_x_greater_than_or_equal_to_1(np.array(xs), ib, ob)
    check(out, [log_model(x, ib, ob) for x in xs], f"log<{ob},{ib}>")
    big = np.array([x for x in xs if x >= one_raw][:100])
    approx = fp.log_x_for_x_greater_than_or_equal_to_1(big, ib, ob) / 2.0 ** (31 - ob)
    assert np.allclose(approx, np.log(big / 2.0 ** (31 - ib)), atol=1e-6 * 2 ** ob)


def test_get_reciprocal():
    r = rng(60)
    xs = [1, 2, 1 << 19, (1 << 19) + 1, MAX] + [int(v) for v in r.integers(1, 1 << 31, N)]
    scale, bits = fp.get_reciprocal(np.array(xs), 12)
    expected = [reciprocal_model(x, 12) for x in xs]
    check(scale, [e[0] for e in expected], "reciprocal")
    check(bits, [e[1] for e in expected], "num_bits_over_unit")


def test_get_inv_sqrt_quantized_multiplier_exp():
    r = rng(61)
    xs = [0, 1, 2, 3, 4, (1 << 27) - 1, 1 << 27, (1 << 29) - 1, 1 << 29, (1 << 30) + 7, MAX]
    xs += [int(v) for v in r.integers(2, 1 << 31, N // 2)] + [int(v) for v in r.integers(2, 70000, N // 2)]
    for reverse in (-1, 1):
        m, s = fp.get_inv_sqrt_quantized_multiplier_exp(np.array(xs), reverse)
        expected = [inv_sqrt_model(x, reverse) for x in xs]
        check(m, [e[0] for e in expected], "inv sqrt multiplier")
        check(s, [e[1] for e in expected], "inv sqrt shift")


# ---------------------------------------------------------------------------------------------
# invalid input
# ---------------------------------------------------------------------------------------------

def test_invalid_arguments():
    with pytest.raises(RangeError, match=r"x: must lie in \[-2147483648, 2147483647\]"):
        fp.multiply_by_quantized_multiplier(1 << 31, 1 << 30, 0)
    with pytest.raises(RangeError, match="shift: must lie in"):
        fp.multiply_by_quantized_multiplier(1, 1 << 30, 31)
    with pytest.raises(RangeError, match="shift: must lie in"):
        fp.multiply_by_quantized_multiplier(1, 1 << 30, -32)
    with pytest.raises(RangeError, match="multiplier: must lie in"):
        fp.multiply_by_quantized_multiplier(1, -1, 0, rounding="single")
    with pytest.raises(InvalidArgumentError, match="rounding: must be 'double'"):
        fp.multiply_by_quantized_multiplier(1, 1 << 30, 0, rounding="nearest")
    with pytest.raises(DTypeError, match="x: must be an integer"):
        fp.multiply_by_quantized_multiplier(np.array([1.5]), 1 << 30, 0)
    with pytest.raises(DTypeError, match="a: must be an integer or an integer array, not a bool"):
        fp.saturating_rounding_doubling_high_mul(True, 1)
    with pytest.raises(RangeError, match="exponent: must lie in \\[0, 31\\]"):
        fp.rounding_divide_by_pot(5, 32)
    with pytest.raises(InvalidArgumentError, match="real: must be finite"):
        fp.quantize_multiplier(float("inf"))
    with pytest.raises(InvalidArgumentError, match="real: must be finite"):
        fp.quantize_multiplier(np.array([0.5, np.nan]))
    with pytest.raises(DTypeError, match="real: must be a real number"):
        fp.quantize_multiplier("0.5")
    with pytest.raises(RangeError, match="x: must lie in"):
        fp.multiply_by_quantized_multiplier_int64(1 << 47, 1 << 30, 0)


# ---------------------------------------------------------------------------------------------
# end to end through LiteRT: QUANTIZE (int8 -> int8 requantize) exposes QuantizeMultiplier and
# MultiplyByQuantizedMultiplier with any shift the scales produce
# ---------------------------------------------------------------------------------------------

def _requantize_cases():
    # (s_in, z_in, s_out, z_out): ratios at both shift ends, ratios whose significand rounds to 2^31,
    # tiny ratios flushed to zero, exact ties (ratio 1/2, 1/4, 3/2, 5/2)
    f = np.float32
    cases = [(1.0, 0, 2.0, 0), (1.0, 3, 4.0, -2), (1.5, 0, 1.0, 0), (2.5, 1, 1.0, 0), (0.5, -7, 1.0, 5),
             (1.0, 0, 2.0 ** 29, 0), (1.0, 0, 2.0 ** 31, 0), (2.0 ** 31, 0, 1.0, 0), (1.0, 0, 2.0 ** -20, 0),
             (1.0, 0, 2.0 ** 32, 0), (3.0, 0, 2.0 ** 33, 0), (1.0, 0, 2.0 ** 33, 0),     # shift -31, flushed
             (float(f(1) - f(2 ** -24)), 0, 1.0, 0), (1.0, 0, float(f(1) + f(2 ** -23)), 0),
             (1e-30, 0, 1.0, 0), (1.0, 0, 1e30, 0), (1e-10, -128, 1e-1, 127), (3e-3, 10, 7e-3, -20)]
    r = rng(70)
    for _ in range(25):
        cases.append((float(f(10.0 ** r.uniform(-6, 2))), int(r.integers(-128, 128)),
                      float(f(10.0 ** r.uniform(-6, 2))), int(r.integers(-128, 128))))
    return cases


def test_requantize_through_litert_matches_fixedpoint():
    from litert_build import T, build, run_ref

    x = np.arange(-128, 128, dtype=np.int8)
    for s_in, z_in, s_out, z_out in _requantize_cases():
        model = build("QUANTIZE", [T((256,), "int8", s_in, z_in)], [T((256,), "int8", s_out, z_out)], version=2)
        (ref,) = run_ref(model, [x])
        real = float(np.float64(np.float32(s_in)) / np.float64(np.float32(s_out)))
        m, e = quantize_multiplier_model(real)
        if e > 30:      # left shifts of 31 and more: undefined in the C++, not exercised
            continue
        expected = [max(-128, min(127, mbqm(int(v) - z_in, m, e) + z_out)) for v in x]
        assert ref.tolist() == expected, (s_in, z_in, s_out, z_out)
        m2, e2 = fp.quantize_multiplier(real)
        ours = np.clip(fp.multiply_by_quantized_multiplier(x.astype(np.int64) - z_in, m2, e2) + z_out, -128, 127)
        assert ours.tolist() == expected


def test_multiplier_rounding_to_2_31_through_litert_softmax():
    """SOFTMAX's multiplier is beta * s_in * 2^26 in double: with beta = 1 + 2^-20 and
    s_in = (1 - 2^-20) * 2^-10 it is (1 - 2^-40) * 2^16, whose significand rounds up to 2^31, so
    QuantizeMultiplier returns (2^30, 17).  LiteRT's outputs agree with quantspec's kernel built on it."""
    from litert_build import T
    from litert_kernel_check import check

    beta = 1 + 2.0 ** -20
    s_in = (1 - 2.0 ** -20) * 2.0 ** -10
    real = beta * s_in * 2.0 ** 26
    assert real == (1 - 2.0 ** -40) * 2.0 ** 16
    assert fp.quantize_multiplier(real) == quantize_multiplier_model(real) == (1 << 30, 17)
    x = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)
    check("SOFTMAX", [T((4, 64), "int8", s_in, 0)], [T((4, 64), "int8", 1 / 256, -128)], {"beta": beta}, [x])
