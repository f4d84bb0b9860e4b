"""quantspec.onnxmodels.static against onnxruntime 1.31.1's quantize_static: the same calibrated
ranges in, every initializer (scales, zero points, quantized weights, int32 biases) byte-identical,
the same op types, and the outputs of the two models bitwise equal in onnxruntime (default graph
optimizations and ORT_DISABLE_ALL)."""

from __future__ import annotations

import copy
import os
from collections import Counter

import numpy as np
import pytest
from refs import require

import onnx_static_models as M

onnx = require("onnx")

FORMATS = ("qdq", "qoperator")
METHODS = ("minmax", "entropy", "percentile", "distribution")


def _ort():
    ort = require("onnxruntime")
    import onnxruntime.quantization  # noqa: F401  (the subpackage is not loaded by onnxruntime itself)

    return ort


def _enum_kwargs(fmt, act, wt, method):
    q = _ort().quantization
    return dict(quant_format=q.QuantFormat.QDQ if fmt == "qdq" else q.QuantFormat.QOperator,
                activation_type=q.QuantType.QUInt8 if act == "uint8" else q.QuantType.QInt8,
                weight_type=q.QuantType.QUInt8 if wt == "uint8" else q.QuantType.QInt8,
                calibrate_method={"minmax": q.CalibrationMethod.MinMax, "entropy": q.CalibrationMethod.Entropy,
                                  "percentile": q.CalibrationMethod.Percentile,
                                  "distribution": q.CalibrationMethod.Distribution}[method])


_CALIB_KEYS = [("CalibTensorRangeSymmetric", "symmetric"), ("CalibMovingAverage", "moving_average"),
               ("CalibMovingAverageConstant", "averaging_constant"),
               ("CalibMaxIntermediateOutputs", "max_intermediate_outputs"), ("CalibPercentile", "percentile")]


def ort_ranges(prepared, data, method, op_types, extra, tmp_path):
    """onnxruntime's own calibration of the prepared model (as its quantize_static runs it)."""
    from onnxruntime.quantization.calibrate import create_calibrator

    from quantspec.onnxmodels.static.registry import DEFAULT_OP_TYPES

    q = _ort().quantization
    path = tmp_path / "calib_input.onnx"
    onnx.save_model(copy.deepcopy(prepared), str(path), save_as_external_data=True)
    calib_extra = {k: extra[n] for n, k in _CALIB_KEYS if n in (extra or {})}
    cal = create_calibrator(path, list(op_types or DEFAULT_OP_TYPES), augmented_model_path=str(tmp_path / "aug.onnx"),
                            calibrate_method=_enum_kwargs("qdq", "uint8", "int8", method)["calibrate_method"],
                            extra_options=calib_extra)
    cal.collect_data(M.reader(data))
    td = cal.compute_data()
    assert isinstance(td, q.calibrate.TensorsData)
    return dict(td.data)


def ort_quantize(model, data, tmp_path, fmt, *, per_channel=False, reduce_range=False, act="uint8", wt="int8",
                 method="minmax", op_types=None, exclude=None, extra=None):
    q = _ort().quantization
    out = tmp_path / f"ort_{fmt}.onnx"
    q.quantize_static(copy.deepcopy(model), str(out), M.reader(data), per_channel=per_channel,
                      reduce_range=reduce_range, op_types_to_quantize=op_types, nodes_to_exclude=exclude,
                      extra_options=copy.deepcopy(extra) if extra else None, **_enum_kwargs(fmt, act, wt, method))
    return onnx.load(str(out))


def ours(model, data, tmp_path, fmt, *, per_channel=False, reduce_range=False, act="uint8", wt="int8",
         method="minmax", op_types=None, exclude=None, extra=None):
    """quantspec with onnxruntime's calibration (the graph and parameters alone under test)."""
    from quantspec.onnxmodels.static import prepare_model, quantize_with_ranges

    prepared = prepare_model(model)
    ranges = ort_ranges(prepared, data, method, op_types, extra, tmp_path)
    return quantize_with_ranges(prepared, ranges, quant_format=fmt, per_channel=per_channel,
                                reduce_range=reduce_range, activation_type=act, weight_type=wt,
                                calibrate_method=method, op_types_to_quantize=op_types, nodes_to_exclude=exclude,
                                extra_options=extra)


def _arrays(model):
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def assert_same_model(ref, got, inputs, check_outputs=True):
    a, b = _arrays(ref), _arrays(got)
    assert sorted(a) == sorted(b), (sorted(set(a) - set(b)), sorted(set(b) - set(a)))
    for name in a:
        x, y = a[name], b[name]
        assert (x.dtype, x.shape) == (y.dtype, y.shape), (name, x.dtype, x.shape, y.dtype, y.shape)
        assert x.tobytes() == y.tobytes(), (name, x.ravel()[:8], y.ravel()[:8])
    ops_a = Counter((n.domain, n.op_type) for n in ref.graph.node)
    ops_b = Counter((n.domain, n.op_type) for n in got.graph.node)
    assert ops_a == ops_b
    qa = sorted(n.input[0] for n in ref.graph.node if n.op_type == "QuantizeLinear")
    qb = sorted(n.input[0] for n in got.graph.node if n.op_type == "QuantizeLinear")
    assert qa == qb
    if check_outputs:
        ort = _ort()
        for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
            so = ort.SessionOptions()
            so.graph_optimization_level = level
            so.intra_op_num_threads = 1
            sa = ort.InferenceSession(ref.SerializeToString(), so, providers=["CPUExecutionProvider"])
            sb = ort.InferenceSession(got.SerializeToString(), so, providers=["CPUExecutionProvider"])
            for feed in inputs:
                for ya, yb in zip(sa.run(None, feed), sb.run(None, feed)):
                    assert ya.dtype == yb.dtype and ya.tobytes() == yb.tobytes()


CNN = M.cnn(seed=3)
CNN_DATA = M.cnn_data(seed=4)
TRF = M.transformer(seed=5)
TRF_DATA = M.transformer_data(seed=6)


def _check(model, data, tmp_path, fmt, **kw):
    ref = ort_quantize(model, data, tmp_path, fmt, **kw)
    got, report = ours(model, data, tmp_path, fmt, **kw)
    assert_same_model(ref, got, M.feeds(data)[:2])
    return report


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act,wt", [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")])
@pytest.mark.parametrize("reduce_range", [False, True])
def test_cnn_minmax(tmp_path, fmt, per_channel, act, wt, reduce_range):
    _check(CNN, CNN_DATA, tmp_path, fmt, per_channel=per_channel, act=act, wt=wt, reduce_range=reduce_range)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act,wt", [("uint8", "int8"), ("int8", "int8")])
def test_transformer_minmax(tmp_path, fmt, per_channel, act, wt):
    _check(TRF, TRF_DATA, tmp_path, fmt, per_channel=per_channel, act=act, wt=wt)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("which", ["cnn", "transformer"])
def test_methods_with_onnxruntime_ranges(tmp_path, method, fmt, which):
    model, data = (CNN, CNN_DATA) if which == "cnn" else (TRF, TRF_DATA)
    _check(model, data, tmp_path, fmt, method=method, per_channel=(method in ("entropy", "distribution")),
           act="int8" if method == "percentile" else "uint8")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("extra", [{"ActivationSymmetric": True}, {"WeightSymmetric": False},
                                   {"ActivationSymmetric": True, "WeightSymmetric": True},
                                   {"ActivationSymmetric": True, "WeightSymmetric": False}],
                         ids=["act_sym", "weight_asym", "both_sym", "act_sym_weight_asym"])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act", ["uint8", "int8"])
def test_symmetric_options(tmp_path, fmt, extra, per_channel, act):
    for model, data in ((CNN, CNN_DATA), (TRF, TRF_DATA)):
        _check(model, data, tmp_path, fmt, per_channel=per_channel, act=act, extra=extra)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("which", ["cnn", "transformer"])
def test_quantize_static_end_to_end(tmp_path, fmt, method, which):
    """quantize_static with quantspec's own calibration against onnxruntime's quantize_static."""
    from quantspec.onnxmodels import quantize_static

    model, data = (CNN, CNN_DATA) if which == "cnn" else (TRF, TRF_DATA)
    per_channel = method in ("minmax", "percentile")
    ref = ort_quantize(model, data, tmp_path, fmt, method=method, per_channel=per_channel)
    out = tmp_path / "ours.onnx"
    report = quantize_static(model, out, data, quant_format=fmt, calibrate_method=method, per_channel=per_channel)
    assert report.output == str(out) and report.weights
    assert_same_model(ref, onnx.load(str(out)), M.feeds(data)[:2])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("wt", ["int8", "uint8"])
@pytest.mark.parametrize("reduce_range", [False, True])
def test_tie_corpus(tmp_path, fmt, per_channel, wt, reduce_range):
    _check(M.tie_corpus(), M.unit_data(6), tmp_path, fmt, per_channel=per_channel, wt=wt, reduce_range=reduce_range)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("wt", ["int8", "uint8"])
@pytest.mark.parametrize("no_adjust", [False, True])
def test_extreme_corpus(tmp_path, fmt, per_channel, wt, no_adjust):
    extra = {"QDQDisableWeightAdjustForInt32Bias": True} if no_adjust else None
    _check(M.extreme_corpus(), M.unit_data(4), tmp_path, fmt, per_channel=per_channel, wt=wt, extra=extra)


def test_ties_round_half_to_even_in_both_formats(tmp_path):
    """At w / s = k + 0.5 exactly (float32 division) both of onnxruntime's formats write the even code,
    and one ulp below 2.5 (w / s = 2.4999998) they write 2: the same quantize_nparray arithmetic
    (round(float32(w) / scale) + zero point) in QDQ and QOperator; quantspec writes the same codes."""
    from onnx import numpy_helper

    model, data = M.tie_corpus(), M.unit_data(6)
    w = numpy_helper.to_array(model.graph.initializer[0])
    s = np.float32(M.TIE_SCALE)
    for fmt in FORMATS:
        ref = _arrays(ort_quantize(model, data, tmp_path, fmt))
        got = _arrays(ours(model, data, tmp_path, fmt)[0])
        assert ref["w_scale"] == s and got["w_scale"] == s
        codes = ref["w_quantized"]
        assert codes.tobytes() == got["w_quantized"].tobytes()
        q = w / s
        for k in range(-8, 8):
            tie = (k + 0.5) * np.float64(s)
            at = w == np.float32(tie)
            assert at.any() and (codes[at] == np.round(k + 0.5)).all()  # half to even
        below = q == np.float32(np.nextafter(np.float32(2.5), np.float32(0)))
        assert below.any() and (codes[below] == 2).all()
        # int32 bias: float64 division, half to even (0.5 and -0.5 exactly -> 0)
        assert ref["b_quantized"][:4].tolist() == [0, 0, 2, -2]
        assert ref["b_quantized"].tobytes() == got["b_quantized"].tobytes()
