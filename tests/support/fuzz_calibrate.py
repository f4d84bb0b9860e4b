"""Recipes of the API fuzzer (tests/test_fuzz_api.py) for the calibration observers
(``quantspec.calibrate``): MinMaxObserver (symmetric, moving_average, averaging_constant),
EntropyObserver, PercentileObserver, DistributionObserver, TFLiteMinMaxObserver, and the parameters
(``observer.params``, ``onnx_params``, ``float8_params``).

A drawn case: an observer with drawn options (invalid ones too), one to three groups of batches (one
onnxruntime ``collect_data`` call each, ended by ``flush()``), the batches of drawn shapes (0-d,
empty, odd sizes), layouts and values (specials: NaN, +-inf, +-0, denormals, constant, all NaN), in
float32 -- other dtypes must be refused -- then ``range()`` and the parameters of several quantized
types and options.  The oracle, on about one case in five (small float32 batches of one shape, valid
options): onnxruntime's own calibrator (``create_calibrator`` on a one-node model, as
tests/test_calibrate.py drives it) on the same batches, its ranges (histograms, statistics) equal
byte for byte and ``compute_scale_zp`` on its range equal to ``onnx_params``; where onnxruntime fails
(NaN in the symmetric percentile histogram), quantspec must refuse.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

import fuzz_api
import fuzz_support as F
from fuzz_api import Case, _pick, _rare, _rng, _short

_METHODS = ("MinMax", "Entropy", "Percentile", "Distribution", "TFLite")


def _options(draw, method: str, oracle: bool) -> dict:
    """Drawn options of one observer (invalid ones unless ``oracle``)."""
    bad = (lambda p: False) if oracle else (lambda p: _rare(draw, p))
    kw: dict = {}
    if method == "MinMax":
        if draw(st.booleans()):
            kw["symmetric"] = draw(st.booleans()) if not bad(0.05) else _pick(draw, ("yes", 1, None))
        if draw(st.booleans()):
            kw["moving_average"] = True
            kw["averaging_constant"] = _pick(draw, (0.01, 0.25, 0.5, 1.0, 0.0)) if not bad(0.1) else \
                _pick(draw, (-0.1, 1.5, float("nan"), "x", None))
    elif method in ("Entropy", "Percentile", "Distribution"):
        if draw(st.booleans()) or oracle:
            # onnxruntime's entropy search costs num_bins^2 Python steps: small histograms for the oracle
            kw["num_bins"] = _pick(draw, (1, 2, 3, 16, 64, 128, 151) if oracle and method == "Entropy"
                                   else (1, 2, 16, 128, 512, 2048))
            if bad(0.1):
                kw["num_bins"] = _pick(draw, (0, -1, 2.5, "8", True, 2 ** 40))
        if method == "Entropy" and draw(st.booleans()):
            kw["num_quantized_bins"] = _pick(draw, (1, 2, 16, 64, 128)) if not bad(0.1) else _pick(draw, (0, -3, 1.5))
        if method == "Percentile":
            if draw(st.booleans()):
                kw["percentile"] = _pick(draw, (99.999, 99.9, 50.0, 100.0, 0.0, 1e-3)) if not bad(0.1) else \
                    _pick(draw, (-1.0, 100.5, float("nan"), "99"))
            if draw(st.booleans()):
                kw["symmetric"] = draw(st.booleans())
        if method == "Distribution" and draw(st.booleans()):
            kw["scenario"] = _pick(draw, ("same", "p3")) if not bad(0.1) else _pick(draw, ("P3", "x", None))
    return kw


def _observer(method: str, kw: dict):
    import quantspec.calibrate as C

    return {"MinMax": C.MinMaxObserver, "Entropy": C.EntropyObserver, "Percentile": C.PercentileObserver,
            "Distribution": C.DistributionObserver, "TFLite": C.TFLiteMinMaxObserver}[method](**kw)


def _batch(draw, rng, shape, kind: str, dtype) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    if kind == "normal":
        v = rng.normal(float(rng.uniform(-2, 2)), float(10 ** rng.uniform(-3, 2)), n)
    elif kind == "specials":
        v = F.values(rng, (n,), np.float32).astype(np.float64)
    elif kind == "constant":
        v = np.full(n, _pick(draw, (1.5, 0.0, -0.0, -3.0, 1e-40, 3e38)))
    elif kind == "nan":
        v = rng.normal(0, 2, n)
        if n:
            v[rng.integers(0, n, 1 + n // 7)] = np.nan
    elif kind == "allnan":
        v = np.full(n, np.nan)
    elif kind == "zeros":
        v = np.abs(rng.normal(0, 2, n))
        if n:
            v[rng.integers(0, n, 1 + n // 5)] = -0.0
            v[rng.integers(0, n, 1 + n // 5)] = 0.0
    elif kind == "denormal":
        v = rng.uniform(-1, 1, n) * 1e-40
    elif kind == "inf":
        v = rng.normal(0, 2, n)
        if n:
            v[rng.integers(0, n, 1 + n // 9)] = _pick(draw, (np.inf, -np.inf))
    else:   # heavy tails
        v = rng.standard_cauchy(n)
    with np.errstate(all="ignore"):
        a = v.astype(np.float32).reshape(shape)
        return a if np.dtype(dtype) == np.float32 else a.astype(dtype)


_KINDS = ("normal", "normal", "specials", "constant", "nan", "allnan", "zeros", "denormal", "inf", "heavy")
_QTYPES = ("uint8", "int8", "uint16", "int16")


def _ort_range(method: str, kw: dict, groups):
    """onnxruntime's TensorData for the batches (raises where onnxruntime fails)."""
    import test_calibrate as T

    with tempfile.TemporaryDirectory() as d:
        return T._ort_calibrate(Path(d), method, groups, kw)


def _ort_params(lo, hi, qt: str, pkw: dict):
    from onnx import TensorProto
    from onnxruntime.quantization import quant_utils

    t = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "uint16": TensorProto.UINT16,
         "int16": TensorProto.INT16}[qt]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            qmin, qmax = quant_utils.get_qmin_qmax_for_qType(t, reduce_range=pkw.get("reduce_range", False),
                                                              symmetric=pkw.get("symmetric", False))
            z, s = quant_utils.compute_scale_zp(lo, hi, qmin, qmax, pkw.get("symmetric", False),
                                                pkw.get("min_real_range"))
        except (AssertionError, ValueError):
            return "refused"
    return _bytes(z), _bytes(s)


def _bytes(a):
    a = np.asarray(a)
    return str(a.dtype), a.shape, a.tobytes()


def calibrate_observer(draw) -> Case:
    import quantspec.calibrate as C
    from quantspec.errors import QuantSpecError

    rng = _rng(draw)
    method = draw(st.sampled_from(_METHODS))
    oracle = method != "TFLite" and _rare(draw, 0.2)
    kw = _options(draw, method, oracle)
    one_shape = oracle or not _rare(draw, 0.2)
    shape0 = draw(F.shapes(max_rank=3, max_side=9, min_rank=1 if oracle else 0))
    groups = []
    for _ in range(draw(st.integers(1, 3))):
        group = []
        for _ in range(draw(st.integers(1, 3))):
            shape = shape0 if one_shape else draw(F.shapes(max_rank=3, max_side=9))
            dtype = np.float32 if oracle or not _rare(draw, 0.025) else \
                _pick(draw, (np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.uint8, bool))
            b = _batch(draw, rng, shape, draw(st.sampled_from(_KINDS)), dtype)
            if not oracle:
                b = F.layout(b, draw(st.sampled_from(F.LAYOUTS)))
                if _rare(draw, 0.02):
                    b = _pick(draw, ([1.0, 2.0], 3.0, None, "x", np.float32(2.5)))
            group.append(b)
        groups.append(group)
    qts = [draw(st.sampled_from(_QTYPES)) for _ in range(2)]
    if not oracle and _rare(draw, 0.1):
        qts.append(_pick(draw, ("float8e4m3fn", "int4", "x", None, 8)))
    pkws = []
    for _ in range(2):
        pkw = {}
        if draw(st.booleans()):
            pkw["symmetric"] = True
        if draw(st.booleans()):
            pkw["reduce_range"] = True
        if _rare(draw, 0.3):
            pkw["min_real_range"] = _pick(draw, (0.0001, 1.0, 0.0, 1e-30)) if oracle or not _rare(draw, 0.2) else \
                _pick(draw, (-1.0, float("nan"), "x"))
        pkws.append(pkw)
    rounds = draw(st.integers(1, 2))      # range() twice: it must not change the observer's state

    def call():
        obs = _observer(method, kw)
        for group in groups:
            for b in group:
                obs.update(b)
            if method != "TFLite":
                obs.flush()
        for _ in range(rounds):
            r = obs.range()
        out = {"lowest": _bytes(r.lowest), "highest": _bytes(r.highest)}
        for name in ("hist", "hist_edges", "avg", "std"):
            if getattr(r, name) is not None:
                out[name] = _bytes(getattr(r, name))
        params = []
        for qt in qts:
            for pkw in pkws:
                try:
                    if method == "TFLite":
                        p = obs.params()
                        params.append((_bytes(p.scale), _bytes(p.zero_point)))
                        continue
                    z, s = C.onnx_params(r, qt, **pkw)
                    params.append((_bytes(z), _bytes(s)))
                except QuantSpecError as e:
                    assert str(e)
                    params.append("refused")
        out["params"] = params
        if method != "TFLite":
            try:
                z, s = C.float8_params(r)
                out["float8"] = (_bytes(z), _bytes(s))
            except QuantSpecError:
                out["float8"] = "refused"
        return out

    what = (f"calibrate {method}({kw}); groups of batches "
            + str([[_short(b) for b in g] for g in groups]) + f"; params {qts} x {pkws}")
    if not oracle:
        return Case(call, what)

    def run_oracle():
        from onnx import TensorProto
        from onnxruntime.quantization import quant_utils

        if method in ("Entropy", "Percentile", "Distribution"):
            # onnxruntime's entropy search takes num_bins^2 / 4 Python steps: a histogram grown by a later
            # call to thousands of bins would take hours there; and onnxruntime's own histograms take
            # several arrays of the grown size in this process (the 20000-example run met 10^9 bins,
            # which filled the machine): the oracle runs on histograms quantspec can hold small
            from quantspec.errors import TooLargeError

            try:
                obs = _observer(method, kw)
                for group in groups:
                    for b in group:
                        obs.update(b)
                    obs.flush()
                grown = obs.histogram()[0].size
            except TooLargeError:
                grown = None
            except Exception:  # noqa: BLE001 - quantspec refuses: onnxruntime must too
                grown = 0
            if grown is None or grown > (1024 if method == "Entropy" else 1 << 20):
                raise fuzz_api.OracleCannot(f"a {method} histogram of {grown or 'too many'} bins")
        want = _ort_range(method, kw, groups)
        lo, hi = want.range_value
        out = {"lowest": _bytes(lo), "highest": _bytes(hi)}
        if method in ("Entropy", "Distribution"):
            out["hist"] = _bytes(want.hist)
            out["hist_edges"] = _bytes(want.hist_edges if hasattr(want, "hist_edges") else want.bins)
        if method == "Percentile":
            out["hist01"] = (_bytes(want.hist), _bytes(want.bins))
        if method == "Distribution":
            out["avg"], out["std"] = _bytes(want.avg), _bytes(want.std)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    z, s = quant_utils.compute_scale_zp_float8(TensorProto.FLOAT8E4M3FN, want.avg_std[1])
                    out["float8"] = (_bytes(z), _bytes(s))
                except (AssertionError, ValueError):
                    out["float8"] = "refused"
        out["params"] = [_ort_params(lo, hi, qt, pkw) for qt in qts for pkw in pkws]
        return out

    def same(want, got):
        for k, v in want.items():
            if k == "hist01":
                # onnxruntime's Percentile TensorData holds hist[0] and hist[1] (docs/calibrate.md)
                h = np.frombuffer(got["hist"][2], np.dtype(got["hist"][0]))
                if (_bytes(h[:1].reshape(())), _bytes(h[1:2].reshape(()))) != v and \
                        (_bytes(h[0]), _bytes(h[1])) != v:
                    return False
            elif got.get(k) != v:
                return False
        return True

    return Case(call, what, run_oracle, same, refusals_match=True)


def calibrate_params(draw) -> Case:
    """``onnx_params`` / ``float8_params`` / ``observer.params`` on ranges of every kind (hand-made
    CalibrationRange objects with odd dtypes, shapes, specials), and wrong arguments."""
    import quantspec.calibrate as C

    rng = _rng(draw)
    vals = F.values(rng, (2,), np.float32)
    lo, hi = sorted(vals.tolist(), key=lambda v: (np.isnan(v), v)) if _rare(draw, 0.7) else vals.tolist()
    dt = np.float32 if not _rare(draw, 0.15) else _pick(draw, (np.float64, np.float16, np.int32))
    shape = (1,) if not _rare(draw, 0.15) else _pick(draw, ((), (2,), (0,), (1, 1)))
    with np.errstate(all="ignore"):
        low, high = np.full(shape, lo).astype(dt), np.full(shape, hi).astype(dt)
    std = None
    if _rare(draw, 0.4):
        std = np.full(shape, abs(float(rng.normal(0, 2))) if not _rare(draw, 0.2) else
                      _pick(draw, (0.0, np.nan, np.inf, -1.0))).astype(dt)
    r = C.CalibrationRange(_pick(draw, ("minmax", "entropy", "percentile", "distribution")), low, high,
                           avg=None if std is None else np.zeros(shape, dt), std=std)
    fn = draw(st.sampled_from(["onnx", "onnx", "float8"]))
    qt = _pick(draw, _QTYPES, ("float8e4m3fn", "int4", "x", None, 8, "UINT8"))
    pkw = {}
    for k, vals_ in (("symmetric", (True, False)), ("reduce_range", (True, False)),
                     ("min_real_range", (None, 0.0001, 1.0))):
        if draw(st.booleans()):
            pkw[k] = _pick(draw, vals_, ("x", -1.0, float("nan"), 2))
    target = r if not _rare(draw, 0.05) else _pick(draw, (None, (0.0, 1.0), "x", np.zeros(2, np.float32)))

    if fn == "float8":
        call = lambda: C.float8_params(target)  # noqa: E731
        what = f"float8_params({target!r})"
    else:
        call = lambda: C.onnx_params(target, qt, **pkw)  # noqa: E731
        what = f"onnx_params({target!r}, {qt!r}, **{pkw})"
    oracle = same = None
    plain = (target is r and dt == np.float32 and shape == (1,) and fn == "onnx" and qt in _QTYPES
             and all(isinstance(v, bool) for k, v in pkw.items() if k != "min_real_range")
             and pkw.get("min_real_range") in (None, 0.0001, 1.0))
    if plain:
        def oracle():
            got = _ort_params(low, high, qt, pkw)
            if got == "refused":
                raise ValueError("onnxruntime refuses")
            return got

        def same(want, got):
            return (_bytes(got[0]), _bytes(got[1])) == want

    return Case(call, what, oracle, same, refusals_match=plain)


TARGETS = {
    "calibrate.observers": (calibrate_observer, 2.0),
    "calibrate.params": (calibrate_params, 1.0),
}
