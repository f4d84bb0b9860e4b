"""quantspec.tf against TensorFlow 2.21's Eigen kernels, in-process (conftest sets
TF_ENABLE_ONEDNN_OPTS=0 before TensorFlow is imported).

Every case of the seeded corpora in tf_oracle runs through TensorFlow's raw op and through quantspec,
and the raw bytes must agree: codes, output_min / output_max bits, dequantized bits (-0.0 and NaN
payloads included).  The only exception is QuantizeV2's position-dependent corner (signed 8/16-bit
MIN_COMBINED / SCALED at elements whose pre-cast value is not finite, where TensorFlow's scalar tail
gives 0 and its vectorised loop minT): there TensorFlow's code must be quantspec's or 0.
QUANTSPEC_SWEEP_SIZE / QUANTSPEC_SWEEP_SEED scale and reseed the corpora.
"""

from __future__ import annotations

import numpy as np
import pytest

import tf_oracle as O
from refs import require


@pytest.fixture(scope="module")
def tf():
    return require("tensorflow")


def check(tf, cases, kernel="eigen", min_results=0.9):
    """Run every case both ways; fail with the first mismatches."""
    bad, results = [], 0
    for c in cases:
        want, got = O.run_tf(tf, c), O.run_qs(c, kernel)
        results += not isinstance(want, str)
        d = O.compare(c, want, got)
        if d:
            bad.append(f"{c.label()[:300]}\n    -> {d}")
    assert not bad, f"{len(bad)} of {len(cases)} cases differ from TensorFlow:\n" + "\n".join(bad[:8])
    # the corpora are made of valid calls: nearly all of them must have produced a result to compare
    assert results >= min_results * len(cases), f"only {results} of {len(cases)} cases gave TensorFlow results"
    return len(cases)


@pytest.mark.parametrize("mode,round_mode", O.QUANTIZE_COMBOS)
@pytest.mark.parametrize("T", O.TYPES)
def test_quantize_per_tensor(tf, T, mode, round_mode):
    check(tf, O.quantize_cases(T, mode, round_mode))


@pytest.mark.parametrize("T", O.TYPES)
def test_quantize_per_axis(tf, T):
    check(tf, O.quantize_axis_cases(T))


@pytest.mark.parametrize("T", O.TYPES)
def test_dequantize(tf, T):
    check(tf, O.dequantize_cases(T))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("version", [2, 3, 4])
def test_quantize_and_dequantize(tf, version, dtype):
    check(tf, O.qdq_cases(version, dtype))


def test_fake_quant(tf):
    check(tf, O.fake_quant_cases())


def test_round_trip_through_quantize_output_range(tf):
    """Dequantize fed with QuantizeV2's own outputs, every mode and type."""
    rng = np.random.default_rng([O.SEED, 600])
    cases = []
    for T in O.TYPES:
        for mode, rm in O.QUANTIZE_COMBOS:
            for lo, hi in ((-1.0, 1.0), (0.0, 6.0), (-10.0, 9.0), (1.0, 5.0), (-3e38, 3e38)):
                x = O.data(rng, lo, hi, 40)
                q, omin, omax = tf.raw_ops.QuantizeV2(input=x, min_range=np.float32(lo), max_range=np.float32(hi),
                                                      T=getattr(tf, T), mode=mode, round_mode=rm)
                codes = np.asarray(q.numpy()).view(O.STORAGE[T])
                cases.append(O.Case("dequantize", codes, omin.numpy(), omax.numpy(),
                                    dict(T=T, mode=mode, narrow_range=False, axis=None, dtype="float32")))
    check(tf, cases)


# -- NaN ---------------------------------------------------------------------------------------
NAN_CHOICE = {  # docs/tensorflow.md, "NaN": the code quantspec gives a NaN input (Eigen's vectorised loop)
    ("MIN_COMBINED", "qint8"): -128, ("MIN_COMBINED", "qint16"): -32768, ("SCALED", "qint8"): -128,
    ("SCALED", "qint16"): -32768, ("MIN_FIRST", "qint32"): -(2 ** 31),
}


@pytest.mark.parametrize("mode,round_mode", O.QUANTIZE_COMBOS)
@pytest.mark.parametrize("T", O.TYPES)
def test_quantize_nan(tf, T, mode, round_mode):
    import quantspec.tf as qt

    kw = dict(T=T, mode=mode, round_mode=round_mode)
    ours = qt.quantize(np.full(5, np.nan, np.float32), -1.0, 1.0, **kw)[0]
    assert (ours == NAN_CHOICE.get((mode, T), 0)).all()      # the documented choice
    # 64 NaNs fill whole vector packets: TensorFlow gives the same code everywhere
    full = tf.raw_ops.QuantizeV2(input=np.full(64, np.nan, np.float32), min_range=np.float32(-1),
                                 max_range=np.float32(1), **{**kw, "T": getattr(tf, T)}).output.numpy()
    assert (np.asarray(full).view(O.STORAGE[T]) == ours[0]).all()
    # NaN anywhere in odd-sized data: the other elements agree exactly, the NaN ones are quantspec's or 0
    rng = np.random.default_rng([O.SEED, 700, O.TYPES.index(T)])
    cases = []
    for n in (1, 7, 33, 100):
        x = O.data(rng, -1.0, 1.0, n)
        x[rng.integers(0, x.size, max(1, x.size // 5))] = np.nan
        cases.append(O.Case("quantize", x, np.float32(-1.0), np.float32(1.0),
                            dict(kw, narrow_range=False, axis=None)))
    check(tf, cases)


def test_nan_elsewhere(tf):
    """NaN ranges in Dequantize, NaN data in QuantizeAndDequantize (its min/max reductions skip NaN) and
    FakeQuant: TensorFlow is deterministic here, so every bit is compared."""
    rng = np.random.default_rng([O.SEED, 800])
    f32 = np.float32
    cases = []
    for T in O.TYPES:
        for mode in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
            for lo, hi in ((np.nan, 1.0), (-1.0, np.nan)):
                cases.append(O.Case("dequantize", O.codes_for(T, rng, 50), f32(lo), f32(hi),
                                    dict(T=T, mode=mode, narrow_range=False, axis=None, dtype="float32")))
    for version in (2, 3, 4):
        for dt in (np.float32, np.float64):
            for rg in (True, False):
                for pos in ([0], [5], [-1], list(range(9)), list(range(40))):
                    x = rng.uniform(-3, 3, 40).astype(dt)
                    x[pos] = np.nan
                    cases.append(O.Case("qdq", x, dt(-1), dt(2), dict(version=version, signed_input=True, num_bits=8,
                                                                      range_given=rg, round_mode="HALF_TO_EVEN",
                                                                      narrow_range=False, axis=None)))
            x = rng.uniform(-3, 3, (4, 10)).astype(dt)
            x[0, 0] = np.nan
            x[1, :] = np.nan
            cases.append(O.Case("qdq", x, dt(-1), dt(2), dict(version=version, signed_input=False, num_bits=8,
                                                              range_given=False, round_mode="HALF_TO_EVEN",
                                                              narrow_range=False, axis=0)))
    for op in ("fq_args", "fq_vars"):
        x = rng.uniform(-3, 3, 40).astype(f32)
        x[[0, 3, 17]] = np.nan
        cases.append(O.Case(op, x, f32(-1), f32(2), dict(num_bits=8, narrow_range=False)))
    for lo, hi in ((np.nan, 1.0), (-1.0, np.nan)):
        x = rng.uniform(-3, 3, 40).astype(f32)
        cases.append(O.Case("fq_vars", x, f32(lo), f32(hi), dict(num_bits=8, narrow_range=False)))
        cases.append(O.Case("fq_channel", x.reshape(10, 4), np.array([lo, -1, lo, 0], f32),
                            np.array([hi, 1, 2, hi], f32), dict(num_bits=8, narrow_range=False)))
    check(tf, cases)


def test_flush_to_zero(tf):
    """Subnormal inputs count as zero: with the degenerate range [0, 0] (scale FLT_MAX) an unflushed
    1.1e-38 would scale to 3.7 and give code 4."""
    import quantspec.tf as qt

    x = np.array([1.1e-38, -1.1e-38, 1e-45], np.float32)
    assert float(x[0]) * float(np.finfo(np.float32).max) > 3.5
    for T in ("qint8", "quint8", "qint16", "qint32"):
        r = tf.raw_ops.QuantizeV2(input=x, min_range=np.float32(0), max_range=np.float32(0), T=getattr(tf, T),
                                  mode="SCALED", ensure_minimum_range=0.0)
        ours = qt.quantize(x, 0.0, 0.0, T, mode="SCALED", ensure_minimum_range=0.0)[0]
        assert np.asarray(r.output.numpy()).tolist() == ours.tolist() == [0, 0, 0]


# --- a numpy float64 scalar is a float32 range argument, rounded as TensorFlow rounds it ----------

#: float64 values that float32 cannot hold exactly: ties to even both ways, beyond the float32
#: range, below its subnormals, NaN
F64_RANGES = [-0.1, 1 / 3, 1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, -(1 + 2.0 ** -24), 3.4028235677973366e38,
              1e300, -1e300, 1e-310, -7e-46, 2.5000001, float("nan")]


def _tf_calls(tf, qt, v):
    """(TensorFlow's call, quantspec's call) pairs taking the float64 scalar ``v`` as a float32 range end;
    TensorFlow gets the numpy scalar itself, as a user would pass it."""
    x = np.array([-3.0, -1.0, -0.4, -0.1, 0.0, 0.1, 0.3, 0.49, 1.0, 2.5, 3.0, 100.0], np.float32)
    q = np.arange(-128, 128, 23, dtype=np.int8)
    lo, hi = (v, np.float64(4.0)) if not v > 0 else (np.float64(-4.0), v)
    return {
        "quantize": (lambda: [r.numpy() for r in tf.quantization.quantize(x, lo, hi, tf.qint8)],
                     lambda: [np.asarray(r) for r in qt.quantize(x, lo, hi, "qint8")]),
        "quantize SCALED": (lambda: [r.numpy() for r in tf.quantization.quantize(x, lo, hi, tf.qint8, mode="SCALED")],
                            lambda: [np.asarray(r) for r in qt.quantize(x, lo, hi, "qint8", mode="SCALED")]),
        "dequantize": (lambda: [tf.quantization.dequantize(tf.bitcast(tf.constant(q), tf.qint8), lo, hi).numpy()],
                       lambda: [qt.dequantize(q, lo, hi)]),
        "qdq v2": (lambda: [tf.raw_ops.QuantizeAndDequantizeV2(input=x, input_min=lo, input_max=hi, range_given=True)
                            .numpy()],
                   lambda: [qt.quantize_and_dequantize_v2(x, lo, hi, range_given=True)]),
        "qdq v3": (lambda: [tf.raw_ops.QuantizeAndDequantizeV3(input=x, input_min=lo, input_max=hi, num_bits=8).numpy()],
                   lambda: [qt.quantize_and_dequantize_v3(x, lo, hi, 8)]),
        "fake quant vars": (lambda: [tf.quantization.fake_quant_with_min_max_vars(x, lo, hi).numpy()],
                            lambda: [qt.fake_quant_with_min_max_vars(x, lo, hi)]),
        "fake quant args": (lambda: [tf.quantization.fake_quant_with_min_max_args(x, min=lo, max=hi).numpy()],
                            lambda: [qt.fake_quant_with_min_max_args(x, min=lo, max=hi)]),
    }


@pytest.mark.parametrize("value", F64_RANGES, ids=repr)
def test_float64_scalar_ranges_as_tensorflow_takes_them(value):
    """Found by the API fuzzer: a numpy float64 scalar is a float32 range argument, rounded as
    TensorFlow rounds it (and refused where TensorFlow refuses it)."""
    tf = require("tensorflow")
    import quantspec.tf as qt
    from quantspec.errors import QuantSpecError

    for name, (theirs, ours) in _tf_calls(tf, qt, np.float64(value)).items():
        try:
            want = theirs()
        except Exception as e:   # TensorFlow refuses it: so must quantspec
            with pytest.raises(QuantSpecError):
                ours()
            continue
        got = ours()
        if name.startswith("quantize"):   # NaN pre-cast values: TensorFlow's codes depend on the position
            from tf_oracle import Case, compare

            x = np.array([-3.0, -1.0, -0.4, -0.1, 0.0, 0.1, 0.3, 0.49, 1.0, 2.5, 3.0, 100.0], np.float32)
            lo, hi = (np.float64(value), np.float64(4.0)) if not value > 0 else (np.float64(-4.0), np.float64(value))
            case = Case("quantize", x, lo, hi, dict(T="qint8", mode=name.split()[-1] if " " in name else "MIN_COMBINED",
                                                     round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False, axis=None))
            assert compare(case, [np.asarray(w).view(np.int8) if i == 0 else w for i, w in enumerate(want)], got) is None
        else:
            assert [w.tobytes() for w in want] == [np.asarray(g).tobytes() for g in got], (name, value, want, got)
        # the same as the Python float of that value
        python = _tf_calls(tf, qt, float(value))[name][1]()
        assert [np.asarray(g).tobytes() for g in got] == [np.asarray(g).tobytes() for g in python], name
