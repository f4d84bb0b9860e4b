"""Seeded case corpora for the TensorFlow conformance tests, and the two ways to run a case:
through TensorFlow's raw ops (the oracle) and through quantspec.

Used in-process by tests/test_tf_conformance.py (Eigen kernels, oneDNN off) and in a subprocess by
tests/support/tf_onednn_worker.py (oneDNN on).  Nothing here knows an expected value: every expectation comes
from running TensorFlow on the same inputs.

Sweep size: QUANTSPEC_SWEEP_SIZE (default 1) multiplies the number of random ranges and the data
length; QUANTSPEC_SWEEP_SEED (default 20240521) seeds everything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

f32 = np.float32
SEED = int(os.environ.get("QUANTSPEC_SWEEP_SEED", "20240521"))
SIZE = max(1, int(os.environ.get("QUANTSPEC_SWEEP_SIZE", "1")))
TYPES = ("qint8", "quint8", "qint16", "quint16", "qint32")
STORAGE = {"qint8": np.int8, "quint8": np.uint8, "qint16": np.int16, "quint16": np.uint16, "qint32": np.int32}
FMAX = float(np.finfo(f32).max)
FMIN = float(np.finfo(f32).tiny)


@dataclass
class Case:
    op: str                   # quantize | dequantize | qdq | fq_args | fq_vars | fq_channel
    x: np.ndarray
    a: object = None          # min (range) argument
    b: object = None          # max (range) argument
    attrs: dict = field(default_factory=dict)

    def label(self) -> str:
        def short(v):
            v = np.asarray(v)
            return v.tolist() if v.size <= 4 else f"{v.dtype}{v.shape}"
        return f"{self.op} x={short(self.x)} min={short(self.a)} max={short(self.b)} {self.attrs}"


# -- data ------------------------------------------------------------------------------------
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, 1e30, -1e30, FMAX, -FMAX, 1e-40, -1e-40, 1.4e-45, -1.4e-45,
                     1.1e-38, -1.1e-38, FMIN, -FMIN, 0.5, -0.5, 1.5, -2.5, 0.49999997, -0.49999997, 1.0, -1.0], f32)


def _neighbours(v: np.ndarray) -> np.ndarray:
    v = v.astype(f32)
    with np.errstate(all="ignore"):
        return np.concatenate([v, np.nextafter(v, f32(np.inf)), np.nextafter(v, f32(-np.inf))])


def data(rng: np.random.Generator, lo: float, hi: float, n: int, scales=()) -> np.ndarray:
    """Inputs around [lo, hi]: uniform values past both ends, the range ends and their float
    neighbours, IEEE specials, and near-ties (j + 0.5) / s for each scale s given."""
    lo = float(lo) if np.isfinite(lo) else -1e30
    hi = float(hi) if np.isfinite(hi) else 1e30
    w = max(hi - lo, abs(lo), abs(hi), 1e-30)
    with np.errstate(all="ignore"):
        parts = [rng.uniform(lo - 0.3 * w, hi + 0.3 * w, n).astype(f32), SPECIALS,
                 _neighbours(np.array([lo, hi, 0.0], np.float64).astype(f32))]
        for s in scales:
            s = float(s)
            if np.isfinite(s) and s != 0:
                j = rng.integers(-300, 300, max(8, n // 4)) + 0.5
                parts.append(_neighbours(np.concatenate([j / s, lo + j / s]).astype(f32)))
    x = np.concatenate(parts)
    return rng.permutation(x)


# -- ranges ----------------------------------------------------------------------------------
FIXED_RANGES = [
    (-1.0, 1.0), (0.0, 6.0), (-10.0, 9.0), (-2.5, 2.0), (1.0, 5.0), (-5.0, -1.0), (0.0, 0.0), (3.0, 3.0),
    (-1e-3, 1e-3), (-128.0, 127.0), (0.0, 255.0), (-32768.0, 32767.0), (0.0, 65535.0), (-2.0 ** 31, 2.0 ** 31),
    (-1e30, 1e30), (-3e38, 3e38), (-1e-39, 1e-39), (-1e-37, 1e-37), (0.0, 1e-39), (-1e-37, 0.0), (-0.0, 0.0),
    (-0.75, 100.25), (-6.0, 0.0), (0.001, 0.002),
]


def ranges(rng: np.random.Generator, extra: int) -> list[tuple[float, float]]:
    out = list(FIXED_RANGES)
    for _ in range(extra):
        a = rng.standard_normal() * 10.0 ** rng.uniform(-3, 4)
        b = rng.standard_normal() * 10.0 ** rng.uniform(-3, 4)
        out.append((float(f32(min(a, b))), float(f32(max(a, b)))))
    return out


# -- corpora ---------------------------------------------------------------------------------
QUANTIZE_COMBOS = [(m, r) for m, r in (("MIN_COMBINED", "HALF_AWAY_FROM_ZERO"), ("MIN_FIRST", "HALF_AWAY_FROM_ZERO"),
                                       ("SCALED", "HALF_AWAY_FROM_ZERO"), ("SCALED", "HALF_TO_EVEN"))]


def _scales_for(lo, hi, T, mode, round_mode, narrow, emr, kernel="eigen"):
    """Scales to aim near-ties at (input generation only)."""
    from quantspec.tf.quantize_op import prepare_quantize
    try:
        p = prepare_quantize(f32(lo), f32(hi), T, shape=(1,), mode=mode, round_mode=round_mode,
                             narrow_range=narrow, ensure_minimum_range=emr, kernel=kernel)
        return [p.scale[0]]
    except Exception:
        return []


def quantize_cases(T: str, mode: str, round_mode: str, kernel: str = "eigen") -> list[Case]:
    rng = np.random.default_rng([SEED, TYPES.index(T), QUANTIZE_COMBOS.index((mode, round_mode)), len(kernel)])
    cases = []
    for lo, hi in ranges(rng, 6 * SIZE):
        for narrow in (False, True):
            for emr in ((0.01, 0.0) if (lo, hi) in FIXED_RANGES[:12] or lo == hi else (0.01,)):
                n = int(rng.choice([1, 7, 33, 160, 257])) * SIZE
                x = data(rng, lo, hi, n, _scales_for(lo, hi, T, mode, round_mode, narrow, emr, kernel))
                cases.append(Case("quantize", x, f32(lo), f32(hi),
                                  dict(T=T, mode=mode, round_mode=round_mode, narrow_range=narrow, axis=None,
                                       ensure_minimum_range=emr)))
    # a few non-default ensure_minimum_range values
    for emr in (0.5, 1e-7, -0.25, 3.0):
        lo, hi = -0.02, 0.03
        cases.append(Case("quantize", data(rng, lo, hi, 40), f32(lo), f32(hi),
                          dict(T=T, mode=mode, round_mode=round_mode, narrow_range=False, axis=None,
                               ensure_minimum_range=emr)))
    # min/max given as shape-[1] and [1, 1] arrays, and multi-dimensional inputs
    x = data(rng, -3, 3, 30)[:60].reshape(-1, 2, 3)
    cases.append(Case("quantize", x, np.array([-3], f32), np.array([[3]], f32),
                      dict(T=T, mode=mode, round_mode=round_mode, narrow_range=False, axis=None)))
    return cases


AXIS_SHAPES = [((3, 5), 0), ((3, 5), 1), ((2, 3, 4), 1), ((2, 3, 4), -1), ((2, 3, 4), 0), ((4, 1, 3), 1),
               ((1, 7), 0), ((5,), 0), ((2, 2, 2, 3), -2), ((0, 3), 1)]


def quantize_axis_cases(T: str) -> list[Case]:
    rng = np.random.default_rng([SEED, 100 + TYPES.index(T)])
    cases = []
    all_ranges = ranges(rng, 4 * SIZE)
    for mode, round_mode in QUANTIZE_COMBOS:
        for shape, axis in AXIS_SHAPES:
            c = shape[axis]
            if mode == "MIN_FIRST" and c != 1:
                continue
            for narrow in (False, True):
                for emr in (0.01, 0.0):
                    picks = [all_ranges[i] for i in rng.integers(0, len(all_ranges), c)]
                    lo = np.array([p[0] for p in picks], f32)
                    hi = np.array([p[1] for p in picks], f32)
                    reps = int(np.prod(shape)) // max(c, 1) if c else 0
                    x = np.empty(shape, f32)
                    xm = np.moveaxis(x, axis, -1)
                    for i in range(c):
                        d = data(rng, lo[i], hi[i], reps)
                        xm[..., i] = d[:reps].reshape(xm.shape[:-1]) if reps else 0
                    cases.append(Case("quantize", x, lo, hi, dict(T=T, mode=mode, round_mode=round_mode,
                                                                  narrow_range=narrow, axis=axis,
                                                                  ensure_minimum_range=emr)))
    return cases


def codes_for(T: str, rng: np.random.Generator, n: int) -> np.ndarray:
    info = np.iinfo(STORAGE[T])
    if info.bits == 8:
        base = np.arange(info.min, info.max + 1)
    else:
        edge = np.arange(0, 300)
        base = np.concatenate([info.min + edge, info.max - edge, edge - 150, (1 << 24) + edge - 150,
                               -(1 << 24) + edge - 150 if info.min < 0 else edge,
                               rng.integers(info.min, info.max, n, endpoint=True)])
        base = base[(base >= info.min) & (base <= info.max)]
    return rng.permutation(base.astype(STORAGE[T]))


DEQUANTIZE_RANGES = [
    (-1.0, 1.0), (0.0, 6.0), (-10.0, 9.921875), (0.5, 4.0), (1.0, -1.0), (0.0, 0.0), (3.0, 3.0), (-2.015748, 2.0),
    (-6.047244, 6.0), (-1e30, 1e30), (-3e38, 3e38), (-1e-39, 1e-39), (-1e-37, 1e-37), (-0.0, 0.0), (-5.0, -1.0),
    (-3.7615824e-37, 3.7321948e-37), (-np.inf, np.inf), (1e-3, 2e-3),
]


def dequantize_cases(T: str) -> list[Case]:
    rng = np.random.default_rng([SEED, 200 + TYPES.index(T)])
    cases = []
    rs = list(DEQUANTIZE_RANGES) + ranges(rng, 6 * SIZE)[len(FIXED_RANGES):]
    for mode in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
        for lo, hi in rs:
            for narrow in (False, True):
                q = codes_for(T, rng, 400 * SIZE)
                cases.append(Case("dequantize", q, f32(lo), f32(hi),
                                  dict(T=T, mode=mode, narrow_range=narrow, axis=None, dtype="float32")))
            if mode == "MIN_COMBINED":
                cases.append(Case("dequantize", codes_for(T, rng, 100), f32(lo), f32(hi),
                                  dict(T=T, mode=mode, narrow_range=False, axis=None, dtype="bfloat16")))
        for shape, axis in AXIS_SHAPES:
            c = shape[axis]
            if mode == "MIN_FIRST" and c != 1:
                continue
            for narrow in (False, True):
                picks = [rs[i] for i in rng.integers(0, len(rs), c)]
                lo = np.array([p[0] for p in picks], f32)
                hi = np.array([p[1] for p in picks], f32)
                q = rng.choice(codes_for(T, rng, 50), int(np.prod(shape))).reshape(shape)
                cases.append(Case("dequantize", q, lo, hi, dict(T=T, mode=mode, narrow_range=narrow, axis=axis,
                                                                dtype="float32")))
                if mode == "MIN_COMBINED":
                    cases.append(Case("dequantize", q, lo, hi, dict(T=T, mode=mode, narrow_range=narrow, axis=axis,
                                                                    dtype="bfloat16")))
    # the round trip: quantize's own output range
    return cases


QDQ_BITS = (1, 2, 4, 7, 8, 16, 23, 24, 25, 31, 32, 52, 53, 61)


def qdq_cases(version: int, dtype) -> list[Case]:
    dtype = np.dtype(dtype)
    rng = np.random.default_rng([SEED, 300 + version, dtype.itemsize])
    cases = []
    rs = ranges(rng, 3 * SIZE)
    for signed in (True, False):
        for bits in QDQ_BITS + ((62,) if not signed else ()):
            for range_given in (True, False):
                for round_mode in (("HALF_TO_EVEN",) if version == 3 else ("HALF_TO_EVEN", "HALF_UP")):
                    narrow = bool(rng.integers(0, 2))
                    lo, hi = rs[int(rng.integers(0, len(rs)))]
                    if range_given and lo > hi:
                        lo, hi = hi, lo
                    x = data(rng, lo, hi, 60 * SIZE).astype(dtype)
                    if not range_given:
                        x = x[np.isfinite(x)]
                        x = x[np.abs(x) < 1e30] if rng.integers(0, 2) else x
                    attrs = dict(version=version, signed_input=signed, num_bits=bits, range_given=range_given,
                                 round_mode=round_mode, narrow_range=narrow, axis=None)
                    cases.append(Case("qdq", x, dtype.type(lo), dtype.type(hi), attrs))
    # HALF_UP is floor(v + 0.5) in T: 0.49999997 rounds up, odd integers in [2^23, 2^24) move up (float32)
    ups = np.array([0.49999997, -0.49999997, 2.5, -2.5, 8388609.0, 8388611.0, -8388609.0, 16777215.0, 1e9 + 1],
                   np.float64).astype(dtype)
    for round_mode in ("HALF_TO_EVEN",) if version == 3 else ("HALF_TO_EVEN", "HALF_UP"):
        for bits, lo, hi in ((8, -128.0, 127.0), (32, -2.0 ** 31, 2.0 ** 31), (53, -2.0 ** 52, 2.0 ** 52)):
            for range_given in (True, False):
                x = ups if range_given else np.concatenate([ups, dtype.type([lo, hi])])
                cases.append(Case("qdq", x, dtype.type(lo), dtype.type(hi),
                                  dict(version=version, signed_input=True, num_bits=bits, range_given=range_given,
                                       round_mode=round_mode, narrow_range=False, axis=None)))
    for shape, axis in AXIS_SHAPES:
        c = shape[axis]
        for range_given in (True, False):
            for bits, signed in ((8, True), (8, False), (4, True), (16, False)):
                picks = [rs[i] for i in rng.integers(0, len(rs), c)]
                lo = np.array([min(p) for p in picks], dtype)
                hi = np.array([max(p) for p in picks], dtype)
                x = rng.uniform(-3, 3, int(np.prod(shape))).reshape(shape).astype(dtype)
                attrs = dict(version=version, signed_input=signed, num_bits=bits, range_given=range_given,
                             round_mode="HALF_TO_EVEN" if version == 3 else str(rng.choice(["HALF_TO_EVEN", "HALF_UP"])),
                             narrow_range=bool(rng.integers(0, 2)), axis=axis)
                cases.append(Case("qdq", x, lo, hi, attrs))
    return cases


FQ_RANGES = [(-6.0, 6.0), (0.0, 1.0), (-1.0, 0.0), (-0.5, 1.2), (1.0, 5.0), (-5.0, -1.0), (-0.1, 0.25),
             (-1e-3, 3e-3), (-1e6, 2e6), (-65.5, 65.5), (-1e-20, 1e-20)]


def fake_quant_cases() -> list[Case]:
    rng = np.random.default_rng([SEED, 400])
    cases = []
    rs = FQ_RANGES + ranges(rng, 4 * SIZE)[len(FIXED_RANGES):]
    for bits in range(2, 17):
        for narrow in (False, True):
            for lo, hi in rs:
                if not lo < hi:
                    continue
                n = 40 * SIZE
                x = data(rng, lo, hi, n, [((1 << bits) - 1 - narrow) / (hi - lo)])
                cases.append(Case("fq_args", x, f32(lo), f32(hi), dict(num_bits=bits, narrow_range=narrow)))
                cases.append(Case("fq_vars", x, f32(lo), f32(hi), dict(num_bits=bits, narrow_range=narrow)))
    for lo, hi in ((2.0, 1.0), (0.0, 0.0), (-1.0, -1.0)):  # Vars does not check min < max
        cases.append(Case("fq_vars", data(rng, -3, 3, 30), f32(lo), f32(hi), dict(num_bits=8, narrow_range=False)))
    for shape in ((7,), (3, 5), (2, 3, 4), (2, 2, 3, 4), (1, 2, 1, 3, 2), (0, 3)):
        for bits in (2, 8, 13, 16):
            for narrow in (False, True):
                d = shape[-1]
                picks = [rs[i] for i in rng.integers(0, len(rs), d)]
                lo = np.array([p[0] for p in picks], f32)
                hi = np.array([p[1] for p in picks], f32)
                if d > 1:
                    lo[0], hi[0] = 0.0, 0.0
                x = rng.uniform(-8, 8, int(np.prod(shape))).reshape(shape).astype(f32)
                cases.append(Case("fq_channel", x, lo, hi, dict(num_bits=bits, narrow_range=narrow)))
    return cases


def onednn_cases() -> list[Case]:
    """The oneDNN corpus: every rewritten case (quantize SCALED/HALF_TO_EVEN qint8 and quint8, MIN_FIRST
    quint8, dequantize SCALED qint8 and quint8, float32 and bfloat16), NaN included; the rank-0 MIN_FIRST
    path; the calls oneDNN refuses; and a sample of calls it does not rewrite (those must equal Eigen)."""
    rng = np.random.default_rng([SEED, 500])
    cases = []
    for T in ("qint8", "quint8"):
        cases += quantize_cases(T, "SCALED", "HALF_TO_EVEN", kernel="onednn")
    cases += quantize_cases("quint8", "MIN_FIRST", "HALF_AWAY_FROM_ZERO", kernel="onednn")
    # NaN is deterministic under oneDNN: compare it too
    for T, mode, rm in (("qint8", "SCALED", "HALF_TO_EVEN"), ("quint8", "SCALED", "HALF_TO_EVEN"),
                        ("quint8", "MIN_FIRST", "HALF_AWAY_FROM_ZERO")):
        for lo, hi, emr in ((-2.0, 2.0, 0.01), (0.0, 0.0, 0.0), (-1.0, 3.0, 0.01)):
            x = data(rng, lo, hi, 50)
            x[rng.integers(0, x.size, 12)] = np.nan
            cases.append(Case("quantize", x, f32(lo), f32(hi), dict(T=T, mode=mode, round_mode=rm, narrow_range=False,
                                                                    axis=None, ensure_minimum_range=emr)))
    # ranks 0..6
    for shape in ((), (5,), (2, 3), (2, 1, 3), (1, 2, 1, 3), (1, 2, 1, 1, 3), (1, 1, 2, 1, 1, 3), (0, 4)):
        for T, mode, rm in (("qint8", "SCALED", "HALF_TO_EVEN"), ("quint8", "MIN_FIRST", "HALF_AWAY_FROM_ZERO"),
                            ("qint16", "SCALED", "HALF_TO_EVEN"), ("qint32", "SCALED", "HALF_TO_EVEN")):
            n = int(np.prod(shape))
            x = rng.uniform(-3, 3, n).astype(f32).reshape(shape)
            cases.append(Case("quantize", x, f32(-2), f32(2.5), dict(T=T, mode=mode, round_mode=rm, narrow_range=False,
                                                                     axis=None)))
    # the rank-0 MIN_FIRST path truncates and wraps
    for v in (-3.0, -2.5, -2.0, -1e30, 1e30, np.nan, np.inf, -np.inf, 1e-40, 0.0, 1.999, 6.1, 100.0, 1000.0, 1e9, 2.0,
              -0.7, 0.3):
        for lo, hi in ((-2.0, 2.0), (0.0, 0.0), (-1e-3, 5.0), (3.0, 7.0)):
            cases.append(Case("quantize", np.array(v, f32), f32(lo), f32(hi),
                              dict(T="quint8", mode="MIN_FIRST", round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False,
                                   axis=None, ensure_minimum_range=0.0 if lo == hi else 0.01)))
    cases.append(Case("quantize", np.array(0.3, f32), np.array([-1], f32), f32(1),
                      dict(T="quint8", mode="MIN_FIRST", round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False, axis=None)))
    # NaN ranges: oneDNN refuses them, Eigen does not
    for lo, hi in ((np.nan, 1.0), (-1.0, np.nan)):
        for T, mode, rm in (("qint8", "SCALED", "HALF_TO_EVEN"), ("quint8", "MIN_FIRST", "HALF_AWAY_FROM_ZERO"),
                            ("qint8", "MIN_COMBINED", "HALF_AWAY_FROM_ZERO")):
            cases.append(Case("quantize", np.linspace(-2, 2, 9).astype(f32), f32(lo), f32(hi),
                              dict(T=T, mode=mode, round_mode=rm, narrow_range=False, axis=None)))
    # not rewritten: must equal Eigen
    for T in TYPES:
        for mode, rm in QUANTIZE_COMBOS:
            for lo, hi in ((-2.5, 2.0), (0.0, 6.0), (-10.0, 9.0)):
                for narrow in (False, True):
                    cases.append(Case("quantize", data(rng, lo, hi, 30), f32(lo), f32(hi),
                                      dict(T=T, mode=mode, round_mode=rm, narrow_range=narrow, axis=None)))
    cases += [c for c in quantize_axis_cases("qint8")[::7]] + [c for c in quantize_axis_cases("quint8")[::7]]
    # dequantize
    for T in TYPES:
        dq = dequantize_cases(T)
        take = [c for c in dq if c.attrs["mode"] == "SCALED" and c.attrs["axis"] is None] if T in ("qint8", "quint8") \
            else dq[::9]
        cases += take
        if T in ("qint8", "quint8"):
            cases += [Case("dequantize", c.x, c.a, c.b, dict(c.attrs, dtype="bfloat16")) for c in take]
            cases += [c for c in dq if c.attrs["axis"] is not None][::3]
    for shape in ((), (5,), (2, 3), (1, 2, 1, 1, 3), (1, 1, 2, 1, 1, 3)):
        for T in ("qint8", "quint8", "qint16", "qint32"):
            q = rng.integers(-100, 100, int(np.prod(shape))).reshape(shape).astype(STORAGE[T]) if T != "quint8" \
                else rng.integers(0, 255, int(np.prod(shape))).reshape(shape).astype(np.uint8)
            for narrow in (False, True):
                cases.append(Case("dequantize", q, f32(0.5), f32(4.0),
                                  dict(T=T, mode="SCALED", narrow_range=narrow, axis=None, dtype="float32")))
    for T in TYPES:  # bfloat16 SCALED exists only where the oneDNN kernel runs
        q = codes_for(T, rng, 40)[:64].reshape(8, 8)
        for axis in (None, 1):
            lo, hi = (f32(-1.5), f32(2.5)) if axis is None else (np.full(8, -1.5, f32), np.full(8, 2.5, f32))
            cases.append(Case("dequantize", q, lo, hi, dict(T=T, mode="SCALED", narrow_range=False, axis=axis,
                                                            dtype="bfloat16")))
    return cases + [c for _, c in DIVERGENCES]


# -- running ---------------------------------------------------------------------------------
def run_tf(tf, case: Case):
    """TensorFlow's answer: a tuple of numpy arrays, or the exception's class name."""
    try:
        return _run_tf(tf, case)
    except Exception as e:  # noqa: BLE001 - any TF error is an answer to compare
        return type(e).__name__


def _t(tf, v):
    """A tensor of exactly these bytes.  (Python floats, np.float64 included, go through TF's eager
    scalar cache, which is keyed by value: -0.0 can come back as a cached +0.0.)"""
    return tf.constant(np.asarray(v))


def _run_tf(tf, c: Case):
    a = c.attrs
    if c.op == "quantize":
        ax = a.get("axis")
        ax = -1 if ax is None else ax % c.x.ndim
        kw = {} if "ensure_minimum_range" not in a else dict(ensure_minimum_range=a["ensure_minimum_range"])
        r = tf.raw_ops.QuantizeV2(input=tf.constant(c.x), min_range=_t(tf, c.a), max_range=_t(tf, c.b), T=getattr(tf, a["T"]),
                                  mode=a["mode"], round_mode=a["round_mode"], narrow_range=a["narrow_range"],
                                  axis=ax, **kw)
        return (np.asarray(r.output.numpy()).view(STORAGE[a["T"]]), r.output_min.numpy(), r.output_max.numpy())
    if c.op == "dequantize":
        ax = a.get("axis")
        ax = -1 if ax is None else ax % c.x.ndim
        q = tf.bitcast(tf.constant(c.x), getattr(tf, a["T"]))
        y = tf.raw_ops.Dequantize(input=q, min_range=_t(tf, c.a), max_range=_t(tf, c.b), mode=a["mode"],
                                  narrow_range=a["narrow_range"], axis=ax, dtype=getattr(tf, a["dtype"]))
        return (np.asarray(y.numpy()),)
    if c.op == "qdq":
        ax = a["axis"]
        ax = -1 if ax is None else ax % c.x.ndim
        v = a["version"]
        if v != 3 and a["range_given"] and ax != -1:
            return _qdq_intended(tf, c, ax)
        common = dict(input=tf.constant(c.x), input_min=_t(tf, c.a), input_max=_t(tf, c.b), signed_input=a["signed_input"],
                      range_given=a["range_given"], narrow_range=a["narrow_range"], axis=ax)
        if v == 3:
            y = tf.raw_ops.QuantizeAndDequantizeV3(num_bits=np.int32(a["num_bits"]), **common)
        else:
            op = tf.raw_ops.QuantizeAndDequantizeV2 if v == 2 else tf.raw_ops.QuantizeAndDequantizeV4
            y = op(num_bits=a["num_bits"], round_mode=a["round_mode"], **common)
        return (y.numpy(),)
    if c.op == "fq_args":
        return (tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=tf.constant(c.x), min=float(c.a), max=float(c.b),
                                                   num_bits=a["num_bits"], narrow_range=a["narrow_range"]).numpy(),)
    if c.op == "fq_vars":
        return (tf.raw_ops.FakeQuantWithMinMaxVars(inputs=tf.constant(c.x), min=_t(tf, c.a), max=_t(tf, c.b),
                                                   num_bits=a["num_bits"], narrow_range=a["narrow_range"]).numpy(),)
    if c.op == "fq_channel":
        return (tf.raw_ops.FakeQuantWithMinMaxVarsPerChannel(inputs=tf.constant(c.x), min=_t(tf, c.a), max=_t(tf, c.b),
                                                             num_bits=a["num_bits"],
                                                             narrow_range=a["narrow_range"]).numpy(),)
    raise ValueError(c.op)


def _qdq_intended(tf, c: Case, ax: int):
    """TF 2.21 V2/V4 fail per-axis with range_given=True ("input_min must be a scalar."). The intended
    result is each slice quantized with its own range: run the per-tensor op once per slice."""
    a = c.attrs
    op = tf.raw_ops.QuantizeAndDequantizeV2 if a["version"] == 2 else tf.raw_ops.QuantizeAndDequantizeV4
    out = np.empty_like(c.x)
    for i in range(c.x.shape[ax]):
        idx = (slice(None),) * ax + (i,)
        out[idx] = op(input=tf.constant(c.x[idx]), input_min=_t(tf, c.a[i]), input_max=_t(tf, c.b[i]),
                      signed_input=a["signed_input"], num_bits=a["num_bits"], range_given=True,
                      round_mode=a["round_mode"], narrow_range=a["narrow_range"], axis=-1).numpy()
    return (out,)


def run_qs(case: Case, kernel: str = "eigen"):
    """quantspec's answer: a tuple of numpy arrays, or the quantspec exception's class name."""
    from quantspec.errors import QuantSpecError
    try:
        return _run_qs(case, kernel)
    except QuantSpecError as e:
        return type(e).__name__


def _run_qs(c: Case, kernel: str):
    import quantspec.tf as qt
    a = dict(c.attrs)
    if c.op == "quantize":
        r = qt.quantize(c.x, c.a, c.b, kernel=kernel, **a)
        return r
    if c.op == "dequantize":
        return (qt.dequantize(c.x, c.a, c.b, kernel=kernel, **a),)
    if c.op == "qdq":
        v = a.pop("version")
        if v == 3:
            a.pop("round_mode")
            return (qt.quantize_and_dequantize_v3(c.x, c.a, c.b, a.pop("num_bits"), **a),)
        fn = qt.quantize_and_dequantize_v2 if v == 2 else qt.quantize_and_dequantize_v4
        return (fn(c.x, c.a, c.b, **a),)
    if c.op == "fq_args":
        return (qt.fake_quant_with_min_max_args(c.x, min=float(c.a), max=float(c.b), **a),)
    if c.op == "fq_vars":
        return (qt.fake_quant_with_min_max_vars(c.x, c.a, c.b, **a),)
    if c.op == "fq_channel":
        return (qt.fake_quant_with_min_max_vars_per_channel(c.x, c.a, c.b, **a),)
    raise ValueError(c.op)


def raw(a: np.ndarray) -> np.ndarray:
    """The bytes of an array as unsigned integers of its width (so -0.0 != 0.0, NaN payloads count)."""
    a = np.ascontiguousarray(a)
    if a.dtype == ml_dtypes.bfloat16 or a.dtype.itemsize == 2:
        return a.view(np.uint16).ravel()
    return a.view({1: np.uint8, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]).ravel()


def nonfinite_precast(case: Case) -> np.ndarray | None:
    """Where TensorFlow's own code depends on the element's position: QuantizeV2 Eigen MIN_COMBINED /
    SCALED for signed 8/16-bit types, at elements whose pre-cast value is not finite (the vectorised
    loop gives minT, the scalar tail 0)."""
    if case.op != "quantize":
        return None
    from quantspec.tf import quantize_op as qmod
    a = case.attrs
    if a["mode"] == "MIN_FIRST" or a["T"] not in ("qint8", "qint16"):
        return None
    plan = qmod.prepare_quantize(case.a, case.b, a["T"], shape=case.x.shape, mode=a["mode"],
                                 round_mode=a["round_mode"], narrow_range=a["narrow_range"], axis=a.get("axis"),
                                 ensure_minimum_range=a.get("ensure_minimum_range", 0.01))
    v = qmod.precast(case.x, plan).reshape(case.x.shape)
    bad = ~np.isfinite(v)
    return bad if bad.any() else None


def two_nans(case: Case) -> np.ndarray | None:
    """Where two NaNs meet in FakeQuantWithMinMaxVars / VarsPerChannel: a NaN input in a slice whose
    nudged parameters come out NaN (a NaN or infinite bound, or a width that overflows).  Which
    operand's payload x86 keeps there depends on TensorFlow's machine code (operand order of the
    commutative multiply, packet loop or scalar tail); docs/tensorflow.md documents that quantspec
    gives a NaN there whose payload can differ."""
    if case.op not in ("fq_vars", "fq_channel"):
        return None
    x = np.asarray(case.x)
    lo, hi = np.asarray(case.a, f32), np.asarray(case.b, f32)
    with np.errstate(all="ignore"):
        bad = np.isnan(lo) | np.isnan(hi) | ~np.isfinite(hi - lo)
    if x.ndim == 0 or not np.isnan(x).any():
        return None
    mask = np.isnan(x) & (bad if case.op == "fq_channel" else bad.reshape(()))
    return mask if mask.any() else None


def compare(case: Case, want, got) -> str | None:
    """None if quantspec's answer has the same bytes as TensorFlow's, else a description."""
    if isinstance(want, str) or isinstance(got, str):
        return None if want == got or (isinstance(want, str) and isinstance(got, str)) else \
            f"TF -> {want if isinstance(want, str) else 'a result'}, quantspec -> {got if isinstance(got, str) else 'a result'}"
    if len(want) != len(got):
        return f"{len(want)} outputs vs {len(got)}"
    for i, (w, g) in enumerate(zip(want, got)):
        w, g = np.asarray(w), np.asarray(g)
        if i == 0 and w.shape != g.shape:
            return f"output {i}: shape {w.shape} vs {g.shape}"
        if i > 0 and w.size != g.size:  # output_min/max: TF gives [] for a one-slice axis, quantspec [1]
            return f"output {i}: size {w.size} vs {g.size}"
        if w.dtype.itemsize != g.dtype.itemsize:
            return f"output {i}: dtype {w.dtype} vs {g.dtype}"
        rw, rg = raw(w), raw(g)
        diff = rw != rg
        if i == 0:
            mask = nonfinite_precast(case)
            if mask is not None:
                m = mask.ravel()
                allowed = (rw[m] == rg[m]) | (rw[m] == 0)
                if not allowed.all():
                    return "output 0: a position-dependent element is neither quantspec's code nor 0"
                diff = diff & ~m
            mask = two_nans(case)
            if mask is not None:
                m = mask.ravel()
                if not (np.isnan(w.ravel()[m]) & np.isnan(g.ravel()[m])).all():
                    return "output 0: a NaN input in a slice of NaN parameters did not give NaN on both sides"
                diff = diff & ~m
        if diff.any():
            j = int(np.argmax(diff))
            return (f"output {i}: {int(diff.sum())} of {diff.size} differ; first at {j}: "
                    f"x={np.asarray(case.x).ravel()[j] if case.x.size == diff.size else '-'} "
                    f"TF={w.ravel()[j]!r} quantspec={g.ravel()[j]!r}")
    return None


def digest(cases: list[Case]) -> str:
    """A hash of a corpus' inputs, to check that two processes built the same one."""
    import hashlib
    h = hashlib.sha256()
    for c in cases:
        for v in (c.x, c.a, c.b):
            v = np.asarray(v)
            h.update(str((v.dtype.str, v.shape)).encode())
            h.update(np.ascontiguousarray(v).tobytes())
        h.update(repr(sorted(c.attrs.items())).encode())
    return h.hexdigest()


# -- the eigen / onednn divergence table of docs/tensorflow.md ---------------------------------
def _q(x, lo, hi, T, mode="SCALED", rm="HALF_TO_EVEN", **kw):
    return Case("quantize", np.asarray(x, f32), f32(lo), f32(hi),
                dict(T=T, mode=mode, round_mode=rm, narrow_range=False, axis=None, **kw))


def _dq(q, lo, hi, T, dtype="float32", **kw):
    return Case("dequantize", np.asarray(q, STORAGE[T]), f32(lo), f32(hi),
                dict(T=T, mode="SCALED", narrow_range=kw.pop("narrow_range", False), axis=None, dtype=dtype, **kw))


#: (what differs, the call) -- one row of the table per entry; both columns are checked against
#: TensorFlow (Eigen in-process, oneDNN in the subprocess corpus, which includes these cases).
DIVERGENCES = [
    ("SCALED scale: Eigen min(-128/min, 127/max), oneDNN 127.5/max(abs(min), abs(max))",
     _q([1.5], -2.5, 2.0, "qint8")),
    ("SCALED quint8: oneDNN scales by max(abs(min), abs(max)), Eigen by max", _q([3.0], -8.0, 6.0, "quint8")),
    ("MIN_FIRST quint8: Eigen round(x*s) - round(min*s), oneDNN rint(x*s + (-min)*s)",
     _q([1.0], -2.0, 2.0, "quint8", "MIN_FIRST", "HALF_AWAY_FROM_ZERO")),
    ("MIN_FIRST quint8, rank 0: oneDNN truncates and wraps", _q(6.1, -2.0, 2.0, "quint8", "MIN_FIRST",
                                                                  "HALF_AWAY_FROM_ZERO")),
    ("NaN input, MIN_FIRST quint8", _q([np.nan], -2.0, 2.0, "quint8", "MIN_FIRST", "HALF_AWAY_FROM_ZERO")),
    ("degenerate range (min = max = 0, ensure_minimum_range = 0), x = 0",
     _q([0.0], 0.0, 0.0, "qint8", ensure_minimum_range=0.0)),
    ("NaN range: Eigen accepts it, oneDNN refuses", _q([0.5], np.nan, 1.0, "qint8")),
    ("qint32: no oneDNN kernel", _q([0.5], -1.0, 1.0, "qint32")),
    ("rank 0 SCALED: no oneDNN kernel", _q(0.5, -1.0, 1.0, "qint8")),
    ("rank 6: no oneDNN kernel", _q(np.full((1, 1, 1, 1, 1, 1), 0.5), -1.0, 1.0, "qint8")),
    ("Dequantize SCALED quint8 narrow_range: oneDNN reads v_min = 1", _dq([255], 0.5, 4.0, "quint8", narrow_range=True)),
    ("Dequantize SCALED to bfloat16: only oneDNN has it", _dq([100], -1.0, 1.0, "qint8", dtype="bfloat16")),
    ("Dequantize SCALED qint32: no oneDNN kernel", _dq([100], -1.0, 1.0, "qint32")),
]


def _f(v) -> str:
    """The shortest text that reads back as the same float32."""
    v = f32(v)
    return "np.nan" if np.isnan(v) else str(v)


def _cell(r) -> str:
    if isinstance(r, str):
        return f"error ({r})"

    def v(a):
        a = np.asarray(a)
        if a.dtype.kind == "V" or a.dtype.kind == "f":
            vals = [_f(t) for t in a.astype(np.float32).ravel()]
        else:
            vals = [str(int(t)) for t in a.ravel()]
        return vals[0] if len(vals) == 1 else "[" + ", ".join(vals) + "]"
    if len(r) == 3:
        return f"{v(r[0])}, range [{v(r[1])}, {v(r[2])}]"
    return v(r[0])


def _call(c: Case) -> str:
    a = c.attrs
    x = np.asarray(c.x)
    xs = (_f(x) if x.ndim == 0 else f"np.full({x.shape}, {_f(x.ravel()[0])})" if x.ndim > 1
          else "[" + ", ".join(_f(t) if x.dtype.kind == "f" else str(int(t)) for t in x) + "]")
    lo, hi = _f(c.a), _f(c.b)
    if c.op == "quantize":
        extra = "".join(f", {k}={a[k]!r}" for k in ("ensure_minimum_range",) if k in a)
        return f"`quantize({xs}, {lo}, {hi}, {a['T']!r}, mode={a['mode']!r}, round_mode={a['round_mode']!r}{extra})`"
    extra = ", narrow_range=True" if a["narrow_range"] else ""
    extra += f", dtype={a['dtype']!r}" if a["dtype"] != "float32" else ""
    return f"`dequantize({xs}, {lo}, {hi}, {a['T']!r}, mode='SCALED'{extra})`"


def divergence_table_markdown() -> str:
    """The table as docs/tensorflow.md prints it, from quantspec's answers (tests check both columns
    against TensorFlow, and that the page carries exactly this text)."""
    lines = ["| what differs | call | `kernel=\"eigen\"` | `kernel=\"onednn\"` |", "|---|---|---|---|"]
    for what, c in DIVERGENCES:
        lines.append(f"| {what} | {_call(c)} | {_cell(run_qs(c, 'eigen'))} | {_cell(run_qs(c, 'onednn'))} |")
    return "\n".join(lines)
