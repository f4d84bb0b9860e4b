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
