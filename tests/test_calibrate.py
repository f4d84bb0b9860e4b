"""quantspec.calibrate against the tools it names, fed the same batches.

onnxruntime: its calibrators are driven through their real API — a one-node ONNX model (Identity,
so the calibrated tensors are the batches themselves), a ``CalibrationDataReader``,
``create_calibrator``, ``collect_data`` (once per group of batches), ``compute_data`` — and the
ranges (and histograms, statistics) must equal the observers' bit for bit; the parameters must equal
``compute_scale_zp`` on onnxruntime's ranges.  The TFLite converter: its calibrator's recorded
min/max (a calibrate-only conversion) and the int8 parameters of the converted model's input.
Batches: normal, constant, all-negative, NaN-containing, heavy-tailed (Cauchy), with signed zeros,
and groups whose range grows (the histogram merges).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from refs import require, require_fast

import quantspec.calibrate as C
from quantspec.errors import DTypeError, InvalidArgumentError

SEED = int(os.environ.get("QUANTSPEC_SEED", "20260703"))
KINDS = ("normal", "constant", "negative", "nan", "heavy", "zeros", "growing")


def batches(kind: str, rng, count: int = 5, shape=(3, 211)) -> list[np.ndarray]:
    out = []
    for i in range(count):
        if kind == "normal":
            b = rng.normal(0.5, 2, shape)
        elif kind == "constant":
            b = np.full(shape, 1.5)
        elif kind == "negative":
            b = -np.abs(rng.normal(0, 2, shape)) - 0.1
        elif kind == "nan":
            b = rng.normal(0, 2, shape)
            b.flat[rng.integers(b.size, size=1 + i % 3)] = np.nan
        elif kind == "heavy":
            b = rng.standard_cauchy(shape)
        elif kind == "zeros":
            b = np.abs(rng.normal(0, 2, shape))
            b.flat[rng.integers(b.size, size=5)] = -0.0
            b.flat[rng.integers(b.size, size=5)] = 0.0
        else:   # growing: each batch wider than the last
            b = rng.normal(0, 0.5 * (i + 1) ** 2, shape)
        out.append(np.asarray(b, np.float32))
    return out


# -- onnxruntime through its API ------------------------------------------------------------------------------
def observe(obs, groups):
    """Feed ``groups`` (one list of batches per ``collect_data`` call) to the observer, flushing after
    each group, and return its range."""
    for group in groups:
        for b in group:
            obs.update(b)
        obs.flush()
    return obs.range()


def _ort_calibrate(tmp_path, method: str, groups: list[list[np.ndarray]], extra: dict):
    onnx = require("onnx")
    q = require("onnxruntime.quantization.calibrate")
    from onnx import TensorProto, helper

    shape = list(groups[0][0].shape)
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 10
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))

    class Reader(q.CalibrationDataReader):
        def __init__(self, data):
            self.data = iter(data)

        def get_next(self):
            b = next(self.data, None)
            return None if b is None else {"x": b}

    cal = q.create_calibrator(str(path), augmented_model_path=str(tmp_path / "aug.onnx"),
                              calibrate_method=getattr(q.CalibrationMethod, method), extra_options=extra)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for group in groups:
            cal.collect_data(Reader(group))
        return cal.compute_data()["x"]


OBSERVERS = {
    "MinMax": (lambda **kw: C.MinMaxObserver(**kw), [{}, {"moving_average": True}, {"symmetric": True},
                                                     {"moving_average": True, "averaging_constant": 0.25}]),
    # onnxruntime's entropy search costs about num_bins^2 Python steps: small histograms here
    "Entropy": (lambda **kw: C.EntropyObserver(**kw), [{}, {"num_bins": 200, "num_quantized_bins": 128},
                                                       {"num_bins": 151, "num_quantized_bins": 64}]),
    "Percentile": (lambda **kw: C.PercentileObserver(**kw), [{}, {"symmetric": False},
                                                             {"num_bins": 512, "percentile": 99.9}]),
    "Distribution": (lambda **kw: C.DistributionObserver(**kw), [{}, {"scenario": "p3", "num_bins": 1024}]),
}
CASES = [(m, i) for m, (_, opts) in OBSERVERS.items() for i in range(len(opts))]


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("kind,groups", [(k, 1) for k in KINDS] + [("growing", 3), ("nan", 3), ("zeros", 2)])
@pytest.mark.parametrize("method,option", CASES)
def test_ranges_and_parameters_equal_onnxruntime(tmp_path, method, option, kind, groups):
    require_fast()
    quant_utils = require("onnxruntime.quantization.quant_utils")
    make, options = OBSERVERS[method]
    extra = options[option]
    rng = np.random.default_rng([SEED, abs(hash((method, option, kind, groups))) % (1 << 32)])
    data = [batches(kind, rng, count=4) for _ in range(groups)]
    try:
        want = _ort_calibrate(tmp_path, method, data, extra)
        ort_error = None
    except Exception as e:       # onnxruntime's own failure (NaN in the symmetric percentile histogram)
        ort_error = e
    obs = make(**extra)
    if ort_error is not None:
        with pytest.raises(InvalidArgumentError):
            observe(obs, data)
        return
    got = observe(obs, data)
    lo, hi = want.range_value
    assert _same(got.lowest, lo) and _same(got.highest, hi), (want.range_value, got.range_value)
    if method in ("Entropy", "Distribution"):
        edges = want.hist_edges if hasattr(want, "hist_edges") else want.bins
        assert _same(got.hist, want.hist) and _same(got.hist_edges, edges)
    if method == "Percentile":
        # onnxruntime stores hist[0] and hist[1] in TensorData.hist / .bins (a slip of hist[:2] for
        # histogram[:2]); the observer keeps the whole histogram
        assert _same(got.hist[0], want.hist) and _same(got.hist[1], want.bins)
    if method == "Distribution":
        assert _same(got.avg, want.avg) and _same(got.std, want.std)
    from onnx import TensorProto

    for name, qt in (("uint8", TensorProto.UINT8), ("int8", TensorProto.INT8), ("int16", TensorProto.INT16)):
        for kw in ({}, {"symmetric": True}, {"reduce_range": True}, {"min_real_range": 0.0001}):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    qmin, qmax = quant_utils.get_qmin_qmax_for_qType(qt, reduce_range=kw.get("reduce_range", False),
                                                                      symmetric=kw.get("symmetric", False))
                    z, s = quant_utils.compute_scale_zp(lo, hi, qmin, qmax, kw.get("symmetric", False),
                                                        kw.get("min_real_range"))
                except (AssertionError, ValueError):
                    with pytest.raises(InvalidArgumentError):
                        C.onnx_params(got, name, **kw)
                    continue
                z2, s2 = C.onnx_params(got, name, **kw)
            assert _same(z, z2) and _same(s, s2), (name, kw, (z, s), (z2, s2))
    if method == "Distribution":
        z, s = quant_utils.compute_scale_zp_float8(TensorProto.FLOAT8E4M3FN, want.avg_std[1])
        z2, s2 = C.float8_params(got)
        assert _same(z, z2) and _same(s, s2)


def test_observer_arguments():
    with pytest.raises(DTypeError):
        C.MinMaxObserver().update(np.zeros(3, np.float64))
    with pytest.raises(InvalidArgumentError):
        C.MinMaxObserver().range()
    with pytest.raises(InvalidArgumentError):
        C.MinMaxObserver(moving_average=True, averaging_constant=2.0)
    with pytest.raises(InvalidArgumentError):
        C.HistogramObserver("kl")
    with pytest.raises(InvalidArgumentError):
        C.EntropyObserver(num_bins=0)
    with pytest.raises(InvalidArgumentError):
        C.DistributionObserver(num_bins=128).update(np.ones(4, np.float32)).range()
    with pytest.raises(InvalidArgumentError):
        C.TFLiteMinMaxObserver().update(np.full(3, np.nan, np.float32)).range()
    with pytest.raises(InvalidArgumentError):
        C.onnx_params(C.MinMaxObserver().update(np.ones(3, np.float32)), "float8e4m3fn")


# -- the TFLite converter -----------------------------------------------------------------------------------
def _tflite(data: list[np.ndarray], calibrate_only: bool) -> bytes:
    tf = require("tensorflow")
    shape = list(data[0].shape)

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
        def f(self, x):
            return tf.nn.relu(x) + x

    m = M()
    c = tf.lite.TFLiteConverter.from_concrete_functions([m.f.get_concrete_function()], m)
    c.optimizations = [tf.lite.Optimize.DEFAULT]
    c.representative_dataset = lambda: ([b] for b in data)
    c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    c.inference_input_type = tf.int8
    c.inference_output_type = tf.int8
    if calibrate_only:
        c._experimental_calibrate_only = True
    return c.convert()


@pytest.mark.parametrize("kind", KINDS)
def test_tflite_calibration_equals_the_converter(kind):
    require_fast()
    S = require("ai_edge_litert.schema_py_generated")
    interp = require("ai_edge_litert.interpreter")
    rng = np.random.default_rng([SEED, KINDS.index(kind)])
    data = [b[:1, :64] for b in batches(kind, rng, count=6)]
    obs = C.TFLiteMinMaxObserver()
    for b in data:
        obs.update(b)
    got = obs.range()
    model = S.Model.GetRootAs(_tflite(data, True), 0)
    sg = model.Subgraphs(0)
    x = next(sg.Tensors(i) for i in range(sg.TensorsLength()) if b"serving_default_x" in sg.Tensors(i).Name())
    q = x.Quantization()
    assert _same(got.lowest, q.MinAsNumpy()[0]) and _same(got.highest, q.MaxAsNumpy()[0])
    it = interp.Interpreter(model_content=_tflite(data, False))
    p = it.get_input_details()[0]["quantization_parameters"]
    params = obs.params()
    assert _same(params.scale, p["scales"]) and int(params.zero_point[0]) == int(p["zero_points"][0])


def test_entropy_fast_path_equals_the_reference_path():
    """The fused entropy search against the per-candidate numpy path, and its float32 sum against
    np.sum, on random histograms (sparse, dense, peaked, tiny counts) and lengths."""
    require_fast()
    from quantspec._fastpath import jit
    from quantspec.calibrate import algorithms as A

    k = jit.load("quantspec.calibrate._jitted")
    rng = np.random.default_rng(SEED)
    for n in list(range(1, 300)) + list(rng.integers(300, 20000, 60)):
        a = (rng.random(n) * rng.choice([1e-4, 1.0, 1e3])).astype(np.float32)
        assert k.pairwise_sum(a, 0, n) == np.sum(a)
    for t in range(60):
        nb = int(rng.integers(140, 900))
        nq = int(rng.choice([32, 64, 128]))
        kind = t % 4
        if kind == 0:
            h = rng.integers(0, 1000, nb)
        elif kind == 1:
            h = np.zeros(nb, np.int64)
            h[rng.integers(nb, size=20)] = rng.integers(1, 50, 20)
        elif kind == 2:
            h = np.bincount(np.clip((rng.normal(0, nb / 8, 20000) + nb / 2).astype(int), 0, nb - 1), minlength=nb)
        else:
            h = rng.integers(0, 3, nb)
        h = np.asarray(h, np.int64)
        edges = np.linspace(-3, 3, nb + 1, dtype=np.float32)
        lo, hi = np.float32(-3), np.float32(3)
        want = A.entropy_threshold_reference(h, edges, lo, hi, nq)
        got = A.entropy_threshold(h, edges, lo, hi, nq)
        assert _same(got[0], want[0]) and _same(got[1], want[1])


# -- the parallel histogram ------------------------------------------------------------------------------------
def _big_batches(kind: str, rng, count: int, size: int) -> list[np.ndarray]:
    out = []
    for i in range(count):
        if kind == "normal":
            b = rng.normal(0.3, 1.5, size)
            b[rng.integers(size, size=4)] *= 20
        elif kind == "constant":
            b = np.full(size, -2.25)
        elif kind == "negative":
            b = -np.abs(rng.normal(0, 2, size)) - 0.1
        elif kind == "nan":
            b = rng.normal(0, 2, size)
            b[rng.integers(size, size=7 + i)] = np.nan
        elif kind == "heavy":
            b = rng.standard_cauchy(size)
        else:   # growing
            b = rng.normal(0, (i + 1) ** 3, size)
        out.append(np.asarray(b, np.float32))
    return out


@pytest.mark.parametrize("kind", ["normal", "constant", "negative", "nan", "heavy", "growing"])
def test_parallel_histograms_equal_onnxruntime_and_the_serial_path(tmp_path, monkeypatch, kind):
    """Calls of 2 x 320 Ki values (counted on the pool's threads, three of them even on fewer cores)
    through the Percentile (both histograms) and Distribution observers: the same ranges, histograms
    and statistics as onnxruntime's, and as the observers counting on one thread."""
    require_fast()
    from quantspec._fastpath import runner

    monkeypatch.setenv("QUANTSPEC_NUM_THREADS", "3")
    rng = np.random.default_rng([SEED, 7, KINDS.index(kind) if kind in KINDS else 99])
    groups = [_big_batches(kind, rng, 2, 320 * 1024) for _ in range(2 if kind in ("growing", "heavy") else 1)]
    assert sum(b.size for b in groups[0]) >= runner.SERIAL_BELOW
    from quantspec.calibrate import histogram as H

    assert H._parts(sum(b.size for b in groups[0])) == 3
    for method, make, extra in (("Percentile", C.PercentileObserver, {}),
                                ("Percentile", C.PercentileObserver, {"symmetric": False}),
                                ("Distribution", C.DistributionObserver, {})):
        try:
            want = _ort_calibrate(tmp_path, method, groups, extra)
            ort_error = None
        except Exception as e:   # NaN in the symmetric percentile histogram: onnxruntime fails
            ort_error = e
        results = []
        for serial in (False, True):
            with monkeypatch.context() as m:
                if serial:
                    m.setattr(runner, "SERIAL_BELOW", 1 << 62)
                obs = make(**extra)
                if ort_error is not None:
                    with pytest.raises(InvalidArgumentError):
                        for group in groups:
                            for b in group:
                                obs.update(b)
                            obs.flush()
                        obs.range()
                    continue
                for group in groups:
                    for b in group:
                        obs.update(b)
                    obs.flush()
                results.append(obs.range())
        if ort_error is not None:
            assert method == "Percentile" and kind == "nan" and not extra, ort_error
            continue
        lo, hi = want.range_value
        for got in results:
            assert _same(got.lowest, lo) and _same(got.highest, hi), (method, extra, want.range_value, got.range_value)
            if method == "Percentile":
                assert _same(got.hist[0], want.hist) and _same(got.hist[1], want.bins)
            else:
                edges = want.hist_edges if hasattr(want, "hist_edges") else want.bins
                assert _same(got.hist, want.hist) and _same(got.hist_edges, edges)
                assert _same(got.avg, want.avg) and _same(got.std, want.std)
        assert _same(results[0].hist, results[1].hist) and _same(results[0].hist_edges, results[1].hist_edges)


def _corpus(rng, n: int, kind: int) -> np.ndarray:
    x = rng.normal(0, 3, n).astype(np.float32)
    if kind == 1:      # specials everywhere
        special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38], np.float32)
        x[rng.integers(n, size=max(1, n // 7))] = rng.choice(special, max(1, n // 7))
    elif kind == 2:    # all NaN
        x[:] = np.nan
    elif kind == 3:    # heavy tails, negative only
        x = -np.abs(rng.standard_cauchy(n)).astype(np.float32)
    elif kind == 4:    # zeros of both signs and denormals
        x = rng.choice(np.array([0.0, -0.0, 1e-40, -1e-40, 1e-45], np.float32), n)
    return x


def test_parallel_counts_equal_the_serial_kernels_and_numpy(monkeypatch):
    """The pool's histogram kernels (forced onto 1 to 4 threads at any size) against the one-thread
    kernels and np.histogram, on values at and beside every edge, outside the range, NaN, inf, of
    odd sizes; and the fused extremes pass against nan_min_max / numpy."""
    require_fast()
    from quantspec._fastpath import jit, runner
    from quantspec.calibrate import histogram as H

    k = jit.load("quantspec.calibrate._jitted")
    rng = np.random.default_rng([SEED, 11])
    monkeypatch.setattr(runner, "SERIAL_BELOW", 1)
    for t in range(24):
        monkeypatch.setenv("QUANTSPEC_NUM_THREADS", str(1 + t % 4))
        n = int(rng.choice([1, 7, 511, 512, 513, 4097, 100_003]))
        kind = t % 5
        x = _corpus(rng, n, kind)
        bins = int(rng.choice([1, 3, 128, 2048, 5000]))
        first, last = np.float32(rng.choice([-4.0, -0.5, 0.0])), np.float32(rng.choice([0.25, 1.0, 7.5]))
        edges = np.linspace(first, last, bins + 1, dtype=np.float32)
        # values on every edge and one ulp either side
        on = rng.choice(edges, n // 3 + 1)
        x[: on.size // 3] = on[: on.size // 3]
        x[on.size // 3: 2 * (on.size // 3)] = np.nextafter(on[: on.size // 3], np.float32(np.inf))
        for absolute in (False, True):
            v = np.abs(x) if absolute else x
            want = np.zeros(bins, np.int64)
            k.histogram_uniform(v, first, last, edges, want)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert _same(want, np.histogram(v, bins, range=(first, last))[0])
            assert _same(H._count_uniform(x, absolute, first, last, edges), want), (t, absolute)
            uneven = np.concatenate([edges, edges[-1] + np.cumsum(rng.random(5) + 0.1)]).astype(np.float32)
            want = np.zeros(uneven.size - 1, np.int64)
            k.histogram_edges(v, uneven, want)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert _same(want, np.histogram(v, bins=uneven)[0])
            assert _same(H._count_edges(x, absolute, uneven), want), (t, absolute)
    for n in (0, 1, 15, 16, 17, 1000, 65_537):
        for kind in range(5):
            x = _corpus(rng, n, kind) if n else np.zeros(0, np.float32)
            kept = np.full(x.size, np.float32(7.0))
            mn, mx, count, amn, amx = k.min_max_abs(x, kept)
            assert kept.tobytes() == x.tobytes(), (n, kind)
            m2, x2, c2 = k.nan_min_max(x)
            assert mn == m2 and mx == x2 and count == c2, (n, kind)
            a = np.abs(x)
            a = a[~np.isnan(a)]
            assert amn == (a.min() if a.size else np.inf) and amx == (a.max() if a.size else -np.inf), (n, kind)
            assert (np.float32(amn).tobytes() == (a.min() if a.size else np.float32(np.inf)).tobytes())


def test_min_max_shortcut_equals_the_lane_kernels():
    """The observers take numpy's reductions where the result cannot depend on the order of the
    comparisons (no NaN, no zero extreme) and the order-following kernels otherwise: both give the
    kernels' bits on every corpus (specials, all NaN, signed zeros and denormals, odd sizes)."""
    require_fast()
    from quantspec._fastpath import jit
    from quantspec.calibrate import minmax as M

    k = jit.load("quantspec.calibrate._jitted")
    rng = np.random.default_rng([SEED, 12])
    shortcut = 0
    for n in (1, 3, 4, 7, 8, 9, 15, 16, 17, 1000, 65_537):
        for kind in range(5):
            for start in (np.float32(np.finfo(np.float32).max), np.float32(-0.0), np.float32(0.0), np.float32(-7)):
                x = _corpus(rng, n, kind)
                if kind == 0 and n > 8 and rng.random() < 0.5:
                    x[rng.integers(n)] = np.float32(rng.choice([0.0, -0.0]))   # a zero that is not an extreme
                shortcut += M._plain_min_max(x) is not None
                want = k.ort_min_max(x)
                got = M.ort_min_max(x)
                assert all(np.float32(a).tobytes() == np.float32(b).tobytes() for a, b in zip(got, want)), (n, kind)
                want = k.min_max_skip_nan(x, start, np.float32(np.finfo(np.float32).tiny))
                got = M._min_max_skip_nan(x, start, np.float32(np.finfo(np.float32).tiny))
                assert bool(got[2]) == bool(want[2]) and all(
                    np.float32(a).tobytes() == np.float32(b).tobytes() for a, b in zip(got[:2], want[:2])), (n, kind)
    assert shortcut > 40      # both paths were taken


def test_computed_edges_histogram_equals_numpy_at_every_edge(monkeypatch):
    """The kernel that computes a value's two edges instead of looking them up (used where the edges
    are exactly np.linspace's float32 formula) against np.histogram, over ranges of every kind: wide,
    narrow far from zero, denormal, signed zeros, one side of zero, 1 to 2^20 bins; values on every
    edge, one ulp either side, on the index arithmetic's own bin boundaries, outside, NaN, inf.  The
    ranges where the formula does not give numpy's edges, or the arithmetic is not exact, take the
    lookup kernel (also checked), and the test asserts both kinds occur."""
    require_fast()
    from quantspec._fastpath import jit, runner
    from quantspec.calibrate import histogram as H

    k = jit.load("quantspec.calibrate._jitted")
    monkeypatch.setattr(runner, "SERIAL_BELOW", 1)
    rng = np.random.default_rng([SEED, 23])
    ranges = [(-31.0, 31.0), (0.0, 1.0), (-0.0, 1e-3), (1000.0, 1000.001), (-1e-40, 1e-40), (1e-45, 3e-45),
              (-3e38, 3e38), (-3.4e38, -1e38), (2.0, 2.0000002), (-7.25, -7.0), (0.1, 0.7), (-1.0, 16777216.0)]
    taken = set()
    for i, (a, b) in enumerate(ranges * 3):
        first, last = np.float32(a), np.float32(b)
        bins = int(rng.choice([1, 2, 3, 7, 128, 1000, 2048, 4099, 1 << 20]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            edges = np.linspace(first, last, bins + 1, dtype=np.float32)
            if np.any(edges[:-1] >= edges[1:]):
                continue
            ties = (first + (np.arange(bins + 1, dtype=np.float32) / np.float32(bins)) * (last - first)).astype(np.float32)
        on = rng.choice(np.concatenate([edges, ties]), 30_000)
        x = np.concatenate([on, np.nextafter(on, np.float32(np.inf)), np.nextafter(on, np.float32(-np.inf)),
                            rng.uniform(a, b, 20_000).astype(np.float32), -on[:100],
                            np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.4e38, -3.4e38], np.float32)])
        x = rng.permutation(x).astype(np.float32)
        taken.add(H._formula_step(edges, first, last) is not None)
        # edges computed in float64 and rounded: not the float32 formula (the lookup kernel takes them)
        rounded = np.linspace(float(first), float(last), bins + 1).astype(np.float32)
        taken.add(H._formula_step(rounded, first, last) is not None)
        for absolute in (False, True):
            monkeypatch.setenv("QUANTSPEC_NUM_THREADS", str(1 + (i + absolute) % 3))
            v = np.abs(x) if absolute else x
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                want = np.histogram(v, bins, range=(first, last))[0]
            assert _same(H._count_uniform(x, absolute, first, last, edges), want), (a, b, bins, absolute)
            want = np.zeros(bins, np.int64)
            k.histogram_uniform(v, first, last, rounded, want)      # numpy's arithmetic on these edges
            assert _same(H._count_uniform(x, absolute, first, last, rounded), want), (a, b, bins, absolute)
    assert taken == {True, False}


def test_entropy_candidates_in_groups_give_the_same_range(monkeypatch):
    """The entropy search holds its candidates' working arrays a group at a time (about bins^2 / 4
    values in all: 24 GB for a histogram grown to 52,000 bins, which the 20000-example fuzz run met
    and the machine's out-of-memory killer ended); any grouping gives the same bits as one group."""
    from quantspec.calibrate import algorithms

    rng = np.random.default_rng([SEED, 31])
    for t in range(6):
        bins = int(rng.choice([128, 256, 1001, 2048]))
        hist = rng.integers(0, 50, bins).astype(np.int64)
        if t % 2:
            hist[rng.integers(bins, size=bins // 3)] = 0
        edges = np.linspace(-3.0, 3.0, bins + 1, dtype=np.float32)
        nq = int(rng.choice([2, 16, 128]))
        want = algorithms.entropy_threshold(hist, edges, np.float32(-2.9), np.float32(2.95), nq)
        ref = algorithms.entropy_threshold_reference(hist, edges, np.float32(-2.9), np.float32(2.95), nq)
        assert _same(want[0], ref[0]) and _same(want[1], ref[1]), (t, want, ref)
        for group in (1, 7, 1000, 1 << 40):
            monkeypatch.setattr(algorithms, "ENTROPY_GROUP", group)
            got = algorithms.entropy_threshold(hist, edges, np.float32(-2.9), np.float32(2.95), nq)
            assert _same(got[0], want[0]) and _same(got[1], want[1]), (t, group)
        monkeypatch.undo()


def test_entropy_over_a_histogram_grown_to_many_bins_stays_within_memory(tmp_path):
    """The fuzz run's case (Entropy, 128 bins over [-0.17, 0.17], then a call reaching 68.9: 51,840
    bins, 672 million candidate values), in a child process whose address space is capped at 6 GB:
    it finishes with the answer the whole search gives (here: too few non-empty bins to smooth)."""
    require_fast()
    code = textwrap.dedent("""
        import resource, numpy as np
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
        import quantspec.calibrate as C
        from quantspec.errors import InvalidArgumentError
        obs = C.EntropyObserver(num_quantized_bins=64)
        obs.update(np.array([1.4254341351715993e-07], np.float32)); obs.update(np.array(-0.17017517983913422, np.float32))
        obs.flush(); obs.update(np.array(68.92398071289062, np.float32)); obs.flush()
        try:
            obs.range()
            print(obs.histogram()[0].size, "range")
        except InvalidArgumentError as e:      # too few non-empty bins to smooth: onnxruntime fails too
            print(obs.histogram()[0].size, e.argument)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    bins, outcome = out.stdout.split()
    assert int(bins) > 50_000 and outcome == "num_quantized_bins", out.stdout


@pytest.mark.parametrize("cls, extra", [("DistributionObserver", {}), ("PercentileObserver", {}),
                                        ("PercentileObserver", {"symmetric": False})])
def test_a_grown_histogram_takes_at_most_its_counted_bytes_per_bin(cls, extra):
    """The memory check of a histogram grown by a later call counts ``_BIN_BYTES`` per bin (a count
    of 12 let a grown histogram through whose working arrays filled the machine): measured in a child
    process, a histogram grown to about 10 million bins raises the peak memory by less than that."""
    code = textwrap.dedent(f"""
        import resource, numpy as np
        import quantspec.calibrate as C
        from quantspec.calibrate import histogram as H
        obs = C.{cls}(**{extra!r})
        obs.update(np.linspace(-1.5, 1.5, 4096, dtype=np.float32)); obs.flush()
        obs.range()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        obs.update(np.array([1.5, 7300.0, -7300.0], np.float32)); obs.flush()
        bins = obs.histogram()[0].size
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(bins, after - before, H._BIN_BYTES)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "QUANTSPEC_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr[-2000:]
    bins, grew, per_bin = map(int, out.stdout.split())
    assert bins > 5_000_000 and grew < per_bin * bins, (bins, grew, grew / bins)


@pytest.mark.parametrize("method, extra", [("Entropy", {"num_bins": 1, "num_quantized_bins": 1}),
                                           ("Distribution", {}), ("Percentile", {"symmetric": False})])
def test_a_histogram_range_wider_than_float32_is_refused_where_onnxruntime_fails(method, extra, tmp_path):
    """A call whose values reach 3e38 makes the histogram's range [-3e38, 3e38], wider than float32's
    largest value: numpy's index of a value far from the start is NaN there and np.histogram, so
    onnxruntime, raises an IndexError (found by the 20000-example run: the observer returned a
    histogram).  A value close to the start only is no failure: both give the same histogram."""
    require("onnxruntime")
    rng = np.random.default_rng(41)
    far = np.concatenate([np.full(6, 3e38, np.float32), rng.normal(0, 2, 60).astype(np.float32)])
    near = np.concatenate([np.full(6, -3e38, np.float32), np.float32([3e38]), np.full(5, -1e38, np.float32)])
    for groups, fails in (([[far]], True), ([[near]], None)):
        try:
            want = _ort_calibrate(tmp_path, method, groups, extra)
            ort_error = None
        except Exception as e:  # noqa: BLE001 - onnxruntime's IndexError
            ort_error = e
        if fails:      # 2048 bins: numpy's linspace fails first ("Too many bins"); one bin: the IndexError
            assert isinstance(ort_error, IndexError if method == "Entropy" else ValueError), ort_error
        obs = getattr(C, f"{method}Observer")(**extra)
        if ort_error is not None:
            with pytest.raises(InvalidArgumentError, match="wider than float32" if isinstance(ort_error, IndexError)
                               else None):
                for b in groups[0]:
                    obs.update(b)
                obs.range()
        else:
            for b in groups[0]:
                obs.update(b)
            got = obs.range()
            assert _same(got.lowest, want.range_value[0]) and _same(got.highest, want.range_value[1])


# --- what the fuzzers' calibrate recipes found ----------------------------------------------------

_HUGE = np.array([3e38, -1.0, 2.0, 0.5], np.float32)
_HUGE_BOTH = np.array([3e38, -3e38, 1.0, 0.0], np.float32)
_SMALL = np.array([1.0, 2.0, -1.0, 0.5], np.float32)
_TOP = np.array([3.3e38, 2.0, -1.0, 0.5], np.float32)
_FULL = np.full(4, 3.4e38, np.float32)


@pytest.mark.parametrize("make,groups,ok", [
    # [-t, t] overflows float32: numpy (and onnxruntime) refuse "Too many bins"; numpy's overflow
    # warning escaped before the refusal
    (lambda C: C.EntropyObserver(num_bins=16), [[_HUGE]], False),
    (lambda C: C.DistributionObserver(num_bins=512), [[_HUGE_BOTH]], False),
    # a merge whose old bin width is infinite: Python's OverflowError escaped
    (lambda C: C.PercentileObserver(num_bins=16, symmetric=False), [[_HUGE_BOTH], [_TOP]], False),
    # the symmetric percentile's edges extended past the float32 range: numpy's "Maximum allowed
    # size exceeded" ValueError escaped
    (lambda C: C.PercentileObserver(num_bins=16), [[_SMALL], [_TOP]], False),
    # |x| all equal to 3.4e38: numpy's widened range [x - 0.5, x + 0.5] is one value: "Too many bins"
    # (quantspec returned a histogram of empty bins)
    (lambda C: C.PercentileObserver(num_bins=16), [[_FULL]], False),
    # a symmetric percentile range near the float32 limit: no warning, onnxruntime's result
    (lambda C: C.PercentileObserver(num_bins=16), [[_HUGE_BOTH]], True),
])
def test_histogram_observers_near_the_float32_limit(make, groups, ok, tmp_path):
    """Histogram observers fed values near float32's largest: onnxruntime either fails (numpy's "Too
    many bins", an OverflowError, "Maximum allowed size exceeded") -- quantspec must raise a quantspec
    error there, not let Python's exception or numpy's overflow warning escape -- or gives a range
    that quantspec must equal."""
    import quantspec.calibrate as C
    from quantspec.errors import InvalidArgumentError

    require("onnxruntime")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obs0 = make(C)
            method = type(obs0).__name__.replace("Observer", "")
            kw = {k: getattr(obs0, k) for k in ("num_bins", "symmetric") if hasattr(obs0, k)}
            if method != "Percentile":
                kw.pop("symmetric", None)
            want = _ort_calibrate(tmp_path, method, groups, kw)
    except Exception:   # noqa: BLE001 - onnxruntime's refusal
        want = None
    assert (want is not None) == ok
    obs = make(C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if not ok:
            with pytest.raises(InvalidArgumentError):
                observe(obs, groups)
            return
        r = observe(obs, groups)
    lo, hi = want.range_value
    assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes()


@pytest.mark.parametrize("make,groups", [
    # the moving average of an infinite range and a finite one: inf + c * (x - inf) is NaN, and
    # numpy's "invalid value encountered in add" escaped
    (lambda C: C.MinMaxObserver(moving_average=True), [[np.array(np.inf, np.float32)],
                                                       [np.array(-0.92, np.float32)]]),
    # an empty batch: the Distribution statistics divide 0 by 0 ("invalid value encountered in
    # scalar divide" escaped)
    (lambda C: C.DistributionObserver(), [[np.zeros(0, np.float32)]]),
])
def test_observers_print_no_numpy_warning(make, groups):
    """Observers computing numpy's NaN the way onnxruntime does let numpy's RuntimeWarning escape."""
    import quantspec.calibrate as C
    from quantspec.errors import QuantSpecError

    obs = make(C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            for g in groups:
                for b in g:
                    obs.update(b)
                obs.flush()
            obs.range()
        except QuantSpecError:
            pass


def test_entropy_over_a_histogram_grown_past_memory_is_refused():
    """A second call 66,000 times wider than the first grows the entropy histogram to millions of bins;
    its candidate distributions (about bins^2 / 4 values) would take 65 TiB: numpy's MemoryError escaped
    (onnxruntime would loop bins^2 / 4 Python steps).  A TooLargeError is raised before allocating."""
    import quantspec.calibrate as C
    from quantspec.errors import TooLargeError

    obs = C.EntropyObserver()
    obs.update(np.array(0.5621489, np.float32)).flush()
    obs.update(np.array(37200.29, np.float32)).flush()
    with pytest.raises(TooLargeError, match="entropy"):
        obs.range()


@pytest.mark.parametrize("value", ["x", [1.0, 2.0], object()])
def test_onnx_params_refuses_a_min_real_range_that_is_not_a_number(value):
    """``onnx_params(..., min_real_range="x")`` let numpy's ValueError (or TypeError) escape."""
    import quantspec.calibrate as C
    from quantspec.errors import InvalidArgumentError

    r = C.MinMaxObserver().update(np.array([-1.0, 2.0], np.float32)).range()
    with pytest.raises(InvalidArgumentError, match="min_real_range"):
        C.onnx_params(r, "uint8", min_real_range=value)
    assert C.onnx_params(r, "uint8", min_real_range=0.5)[1].dtype == np.float32


@pytest.mark.parametrize("lo,hi", [(-np.inf, np.inf), (-1.0, np.inf), (-np.inf, 2.0)])
@pytest.mark.parametrize("symmetric", [False, True])
def test_onnx_params_of_an_infinite_range_prints_no_warning(lo, hi, symmetric):
    """``onnx_params`` of a range with an infinite end (an observer fed inf) computed inf / inf and a
    NaN cast as onnxruntime does, and numpy's "invalid value" RuntimeWarning escaped.  The result is
    compute_scale_zp's."""
    import quantspec.calibrate as C

    q = require("onnxruntime.quantization.quant_utils")
    from onnx import TensorProto

    rng_ = (np.array([lo], np.float32), np.array([hi], np.float32))
    qmin, qmax = q.get_qmin_qmax_for_qType(TensorProto.UINT8, symmetric=symmetric)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z, s = q.compute_scale_zp(rng_[0], rng_[1], qmin, qmax, symmetric)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z2, s2 = C.onnx_params(rng_, "uint8", symmetric=symmetric)
    assert z.tobytes() == z2.tobytes() and s.tobytes() == s2.tobytes() and z.dtype == z2.dtype


@pytest.mark.parametrize("symmetric", [False, True])
def test_a_histogram_grown_past_memory_is_refused(symmetric):
    """A call whose range is 10^38 times the first call's grows the histogram by whole bins of the first
    call's width, to ~10^38 bins: numpy's "Maximum allowed size exceeded" ValueError escaped (from
    linspace; from arange for the symmetric percentile), where a TooLargeError names the batch."""
    import quantspec.calibrate as C
    from quantspec.errors import TooLargeError

    obs = C.PercentileObserver(num_bins=1, symmetric=symmetric)
    obs.update(np.array([-1.5, -0.17, -5.7], np.float32)).flush()
    with pytest.raises(TooLargeError, match="histogram"):
        obs.update(np.array([-3.4e38, -1.0, 0.5], np.float32)).flush()


def test_symmetric_percentile_of_an_empty_first_call_is_onnxruntimes(tmp_path):
    """An empty batch in the first call: numpy's histogram of no values bins [0, 1], and onnxruntime's
    symmetric percentile gives the range (-0.0, 0.0); quantspec refused it ("holds NaN or inf values").
    An empty later call fails in onnxruntime (np.nanmax of no values): quantspec refuses it."""
    import quantspec.calibrate as C
    from quantspec.errors import ShapeError

    require("onnxruntime")
    empty = np.zeros((2, 0), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _ort_calibrate(tmp_path, "Percentile", [[empty]], {"num_bins": 16})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = C.PercentileObserver(num_bins=16).update(empty).range()
    lo, hi = want.range_value
    assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes()
    obs = C.PercentileObserver(num_bins=16).update(empty).flush()
    with pytest.raises(ShapeError, match="at least one value"):
        obs.update(empty).flush()


@pytest.mark.parametrize("num_bins", [128, 16, 3, 1])
def test_entropy_with_one_quantized_bin_is_onnxruntimes(num_bins, tmp_path):
    """``EntropyObserver(num_quantized_bins=1)`` was refused ("must be between 2 and ..."), where
    onnxruntime's entropy search runs (its candidates start at width 1): the range must be its."""
    import quantspec.calibrate as C

    require("onnxruntime")
    rng = np.random.default_rng(7)
    data = [[rng.normal(0, 2, (6,)).astype(np.float32), rng.standard_cauchy(6).astype(np.float32)]]
    kw = {"num_bins": num_bins, "num_quantized_bins": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = _ort_calibrate(tmp_path, "Entropy", data, kw)
    obs = C.EntropyObserver(**kw)
    for b in data[0]:
        obs.update(b)
    r = obs.range()
    lo, hi = want.range_value
    assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes()


def test_calibration_range_of_no_value_prints():
    """``repr`` of a CalibrationRange holding empty arrays raised IndexError (``as_floats`` read
    element 0); ``as_floats`` now raises a ShapeError and ``repr`` shows the arrays."""
    import quantspec.calibrate as C
    from quantspec.errors import ShapeError

    r = C.CalibrationRange("entropy", np.zeros(0, np.float32), np.zeros(0, np.float32))
    assert "CalibrationRange(entropy" in repr(r)
    with pytest.raises(ShapeError):
        r.as_floats()


@pytest.mark.parametrize("lo,hi", [(np.zeros(0, np.float32), np.zeros(0, np.float32)),
                                   (np.array([-1.0, -2.0], np.float32), np.array([1.0, 2.0], np.float32)),
                                   (np.array([-1], np.int32), np.array([2], np.int32))])
def test_onnx_params_refuses_a_range_that_is_not_one_float(lo, hi):
    """``onnx_params`` of a range of no values or of several let numpy's "truth value of an array is
    ambiguous" ValueError escape; an integer range, numpy's finfo ValueError."""
    import quantspec.calibrate as C
    from quantspec.errors import QuantSpecError

    with pytest.raises(QuantSpecError, match="calibrated"):
        C.onnx_params((lo, hi), "uint8")


@pytest.mark.parametrize("symmetric", [True, False])
def test_percentile_of_one_bin_is_refused_as_onnxruntime_fails(symmetric, tmp_path):
    """A one-bin percentile histogram: onnxruntime's calibrator fails (its result tuple holds
    ``hist[:2]``, one element short: it raises while formatting its own TypeError), and quantspec
    returned a range.  It now refuses, where a later call has not grown the histogram."""
    import quantspec.calibrate as C
    from quantspec.errors import InvalidArgumentError

    require("onnxruntime")
    data = [[np.array([0.945], np.float32)]]
    with pytest.raises(Exception):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _ort_calibrate(tmp_path, "Percentile", data, {"num_bins": 1, "symmetric": symmetric})
    with pytest.raises(InvalidArgumentError, match="num_bins"):
        C.PercentileObserver(num_bins=1, symmetric=symmetric).update(data[0][0]).range()


@pytest.mark.parametrize("extra", [{}, {"moving_average": True}, {"symmetric": True}])
def test_minmax_of_empty_batches_is_onnxruntimes(extra, tmp_path):
    """An empty batch was refused by MinMaxObserver (ShapeError: 'onnxruntime's ReduceMin has no
    value'); onnxruntime's ReduceMin / ReduceMax of no value are +inf / -inf, and its calibrator
    goes on from there: the ranges must be its, byte for byte."""
    import quantspec.calibrate as C

    require("onnxruntime")
    empty = np.zeros((3, 0), np.float32)
    for groups in ([[empty]], [[empty, empty]], [[empty], [empty, empty]]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = _ort_calibrate(tmp_path, "MinMax", groups, extra)
        obs = C.MinMaxObserver(**extra)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = observe(obs, groups)
        lo, hi = want.range_value
        assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes(), \
            (groups, extra, want.range_value, r)


@pytest.mark.parametrize("value", [np.array([0.0, 0.0], np.float32), np.float32(2.0), [1.0], None])
def test_float8_params_of_something_that_is_not_a_range_is_refused(value):
    """``float8_params(np.array([0., 0.]))`` read the array's ``std`` method as a standard deviation
    (a TypeError escaped; found by the 20000-example run): anything but a calibrated range (or an
    observer) is an InvalidArgumentError naming ``calibrated``."""
    from quantspec.calibrate import float8_params
    from quantspec.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="calibrated"):
        float8_params(value)


def test_symmetric_percentile_bins_an_extended_call_on_float64_edges(tmp_path):
    """A later call that widens the symmetric percentile histogram: onnxruntime extends the float32
    edges with ``np.arange`` (which computes in float64) and bins the call on those float64 edges,
    keeping them rounded to float32.  A value equal to the float32 rounding of an extended edge that
    lies below the edge falls in the bin below it; binned on the rounded edges it would land one bin
    higher, and the 80th percentile's edge with it."""
    import quantspec.calibrate as C

    require("onnxruntime")
    num_bins = 7
    first = np.array([0.1, -1.0, 0.3, 0.7], np.float32)
    edges = np.histogram(np.abs(first), bins=num_bins)[1].astype(np.float32)
    width = edges[1] - edges[0]
    extended = np.arange(edges[-1] + width, np.float32(3.0) + width, width)       # float64
    below = [e for e in extended[:-2] if float(np.float32(e)) < e]
    assert below, "no extended edge rounds down in float32: the case is not exercised"
    v = np.float32(below[0])
    second = np.array([v, -v, v, 3.0], np.float32)     # 7 of the 8 values up to v's bin: the 80th percentile
    kw = {"num_bins": num_bins, "symmetric": True, "percentile": 80.0}
    want = _ort_calibrate(tmp_path, "Percentile", [[first], [second]], kw)
    obs = C.PercentileObserver(**kw)
    obs.update(first).flush()
    r = obs.update(second).range()
    lo, hi = want.range_value
    assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes()
