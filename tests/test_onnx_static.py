"""quantspec.onnxmodels.static against onnxruntime 1.31.1's quantize_static: the same calibrated
ranges in, every initializer (scales, zero points, quantized weights, int32 biases) byte-identical,
the same op types, and the outputs of the two models bitwise equal in onnxruntime (default graph
optimizations and ORT_DISABLE_ALL)."""

from __future__ import annotations

import copy
import warnings
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
    types = {"uint8": q.QuantType.QUInt8, "int8": q.QuantType.QInt8, "uint16": q.QuantType.QUInt16,
             "int16": q.QuantType.QInt16}
    return dict(quant_format=q.QuantFormat.QDQ if fmt == "qdq" else q.QuantFormat.QOperator,
                activation_type=types[act], weight_type=types[wt],
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
    # each initializer serialized identically (the same TensorProto fields: typed lists or raw bytes)
    ser_a = {t.name: t.SerializeToString() for t in ref.graph.initializer}
    ser_b = {t.name: t.SerializeToString() for t in got.graph.initializer}
    assert [n for n in ser_a if ser_a[n] != ser_b[n]] == []
    # the same nodes: names, wiring and attributes (order aside)
    from onnx import helper

    def node_key(n):
        attrs = tuple(sorted((a.name, repr(helper.get_attribute_value(a))) for a in n.attribute))
        return (n.domain, n.op_type, n.name, tuple(n.input), tuple(n.output), attrs)

    assert sorted(map(node_key, ref.graph.node)) == sorted(map(node_key, got.graph.node))
    assert [o.name for o in ref.graph.output] == [o.name for o in got.graph.output]
    assert sorted((o.domain, o.version) for o in ref.opset_import) == sorted((o.domain, o.version)
                                                                             for o in got.opset_import)
    assert ref.ir_version == got.ir_version
    assert {p.key: p.value for p in ref.metadata_props} == {p.key: p.value for p in got.metadata_props}
    assert sorted(v.SerializeToString() for v in ref.graph.value_info) == sorted(
        v.SerializeToString() for v in got.graph.value_info)
    assert sorted(i.name for i in ref.graph.input) == sorted(i.name for i in got.graph.input)
    qa = sorted(n.input[0] for n in ref.graph.node if n.op_type == "QuantizeLinear")
    qb = sorted(n.input[0] for n in got.graph.node if n.op_type == "QuantizeLinear")
    assert qa == qb
    if check_outputs:
        ort = _ort()
        for level in (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL):
            so = ort.SessionOptions()
            so.graph_optimization_level = level
            so.intra_op_num_threads = 1
            try:
                sa = ort.InferenceSession(ref.SerializeToString(), so, providers=["CPUExecutionProvider"])
            except Exception as e:  # onnxruntime cannot load its own model: nor ours
                with pytest.raises(type(e)):
                    ort.InferenceSession(got.SerializeToString(), so, providers=["CPUExecutionProvider"])
                continue
            sb = ort.InferenceSession(got.SerializeToString(), so, providers=["CPUExecutionProvider"])
            for feed in inputs:
                try:
                    want = sa.run(None, feed)
                except Exception as e:  # onnxruntime's own model does not run: ours fails the same way
                    with pytest.raises(type(e)):
                        sb.run(None, feed)
                    continue
                for ya, yb in zip(want, sb.run(None, feed)):
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


EXTRA_CASES = [
    {"ForceQuantizeNoInputCheck": True},
    {"DedicatedQDQPair": True},
    {"AddQDQPairToWeight": True},
    {"OpTypesToExcludeOutputQuantization": ["Conv", "MatMul"]},
    {"QDQKeepRemovableActivations": True},
    {"QuantizeBias": False},
    {"MatMulConstBOnly": True},
    {"MinimumRealRange": 0.5},
    {"QDQOpTypePerChannelSupportToAxis": {"MatMul": 0}},
    {"extra.Sigmoid.nnapi": True},
    {"CalibTensorRangeSymmetric": True},
    {"ActivationRestrictedAsymmetric": True},
    {"UseQDQContribOps": True},
    {"ActivationRestrictedAsymmetric": True, "MinimumRealRange": 4.0},
    {"CalibMovingAverage": True, "CalibMovingAverageConstant": 0.25},
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("extra", EXTRA_CASES, ids=lambda e: "-".join(e))
def test_extra_options(tmp_path, fmt, extra):
    for model, data in ((CNN, CNN_DATA), (TRF, TRF_DATA)):
        _check(model, data, tmp_path, fmt, per_channel=True, extra=extra)


@pytest.mark.parametrize("fmt", FORMATS)
def test_selection_options(tmp_path, fmt):
    _check(CNN, CNN_DATA, tmp_path, fmt, op_types=["Conv", "Relu"])
    _check(CNN, CNN_DATA, tmp_path, fmt, exclude=["conv2", "fc"])
    _check(TRF, TRF_DATA, tmp_path, fmt, op_types=["MatMul", "Gather", "Softmax"])
    _check(TRF, TRF_DATA, tmp_path, fmt, exclude=["mm_scores", "add_pos", "ln1"], reduce_range=True)
    _check(TRF, TRF_DATA, tmp_path, fmt, act="int8", reduce_range=True, per_channel=True)


def test_data_forms_and_enums(tmp_path):
    """The calibration data as a dict of stacked samples, a list of feed dicts, a CalibrationDataReader;
    the options as onnxruntime's enums; the model as a path."""
    from quantspec.onnx import quantize_static

    ref = ort_quantize(CNN, CNN_DATA, tmp_path, "qoperator", per_channel=True)
    path = tmp_path / "cnn.onnx"
    onnx.save_model(CNN, str(path))
    kw = _enum_kwargs("qoperator", "uint8", "int8", "minmax")
    for i, data in enumerate((CNN_DATA, M.feeds(CNN_DATA), M.reader(CNN_DATA))):
        out = tmp_path / f"o{i}.onnx"
        report = quantize_static(path, out, data, per_channel=True, **kw)
        assert report.quant_format == "qoperator" and "conv1" in report.quantized_nodes
        assert_same_model(ref, onnx.load(str(out)), M.feeds(CNN_DATA)[:1], check_outputs=(i == 0))
    assert not list(tmp_path.glob("o*.onnx.*")) and not list(tmp_path.glob(".*"))  # no temporary left


def test_report_and_no_output(tmp_path):
    from quantspec.onnxmodels import StaticQuantizationReport, quantize_static

    report = quantize_static(TRF, None, TRF_DATA)
    assert isinstance(report, StaticQuantizationReport) and report.output is None
    assert set(report.weights) >= {"wq", "bq", "emb"} and "softmax" in report.quantized_nodes
    assert "QDQ" in report.summary() and report.to_json()["quant_format"] == "qdq"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("extra", [None, {"ForceQuantizeNoInputCheck": True}, {"ActivationSymmetric": True}],
                         ids=["plain", "force", "act_sym"])
@pytest.mark.parametrize("exclude", [None, ["where", "concat"]], ids=["all", "excluded"])
def test_zoo_qoperator(tmp_path, fmt, extra, exclude):
    """Where onnxruntime's QOperator model does not run (a Where reading a float tensor whose producer
    was quantized), quantspec's fails the same way: the same model."""
    from quantspec.errors import UnsupportedError

    model, data = M.zoo_qoperator(), M.zoo_data()
    try:
        ref = ort_quantize(model, data, tmp_path, fmt, extra=extra, exclude=exclude)
    except RuntimeError as e:  # onnxruntime refuses the model it wrote: so does quantspec
        assert "unknown initializers/tensors" in str(e) and fmt == "qoperator"
        assert not (extra or {}).get("ForceQuantizeNoInputCheck")
        with pytest.raises(UnsupportedError, match="without a producer"):
            ours(model, data, tmp_path, fmt, extra=extra, exclude=exclude)
        return
    got, _ = ours(model, data, tmp_path, fmt, extra=extra, exclude=exclude)
    assert_same_model(ref, got, M.feeds(data)[:2])


@pytest.mark.parametrize("kwargs,error,words", [
    ({"quant_format": "qlinear"}, "InvalidArgumentError", "quant_format"),
    ({"calibrate_method": "mse"}, "InvalidArgumentError", "calibrate_method"),
    ({"activation_type": "uint7"}, "InvalidArgumentError", "activation_type"),
    ({"activation_type": "int4"}, "UnsupportedError", "activation_type"),
    ({"activation_type": "int16", "quant_format": "qoperator"}, "UnsupportedError", "quant_format"),
    ({"activation_type": "uint16"}, "UnsupportedError", "opset 21"),
    ({"weight_type": "float8e4m3fn"}, "UnsupportedError", "weight_type"),
    ({"activation_type": "int8", "weight_type": "uint8"}, "UnsupportedError", "weight_type"),
    ({"per_channel": "yes"}, "DTypeError", "per_channel"),
    ({"op_types_to_quantize": "Conv"}, "DTypeError", "op_types_to_quantize"),
    ({"nodes_to_exclude": ["conv9"]}, "InvalidArgumentError", "nodes_to_exclude"),
    ({"extra_options": {"EnableSubgraph": True}}, "UnsupportedError", "EnableSubgraph"),
    ({"extra_options": {"TensorQuantOverrides": {"w1": [{"scale": 1.0}]}}}, "InvalidArgumentError",
     "TensorQuantOverrides"),
    ({"extra_options": {"TensorQuantOverrides": {"w1": [{"quant_type": "x", "scale": 1.0, "zero_point": 0}]}}},
     "UnsupportedError", "quant_type"),
    ({"extra_options": {"TensorQuantOverrides": {"x": [{"scale": 1.0, "zero_point": 0}]}}}, "UnsupportedError",
     "activations"),
    ({"extra_options": {"TensorQuantOverrides": {"b1": [{"scale": 1.0, "zero_point": 0}]}}}, "UnsupportedError",
     "bias"),
    ({"extra_options": {"TensorQuantOverrides": {"w1": [{"axis": 0, "scale": 1.0, "zero_point": 0}]}}},
     "UnsupportedError", "one dict per channel"),
    ({"extra_options": {"TensorQuantOverrides": {"w1": [{"scale": 1.0, "zero_point": 300}]}}},
     "InvalidArgumentError", "zero_point"),
    ({"extra_options": {"BlockSize": 32}}, "UnsupportedError", "BlockSize"),
    ({"extra_options": ["ActivationSymmetric"]}, "DTypeError", "extra_options"),
    ({"extra_options": {"ActivationSymetric": True}}, "InvalidArgumentError", "ActivationSymetric"),
])
def test_bad_options(tmp_path, kwargs, error, words):
    import quantspec.errors as E
    from quantspec.onnxmodels import quantize_static

    with pytest.raises(getattr(E, error), match=words):
        quantize_static(CNN, tmp_path / "x.onnx", CNN_DATA, **kwargs)
    assert not (tmp_path / "x.onnx").exists()


def test_bad_inputs(tmp_path):
    from quantspec.errors import InvalidArgumentError, ModelError
    from quantspec.onnxmodels import quantize_static

    with pytest.raises(ModelError, match="model_input"):
        quantize_static(tmp_path / "missing.onnx", tmp_path / "x.onnx", CNN_DATA)
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ModelError, match="model_input"):
        quantize_static(tmp_path / "junk.onnx", tmp_path / "x.onnx", CNN_DATA)
    with pytest.raises(InvalidArgumentError, match="model_output"):
        quantize_static(CNN, 3, CNN_DATA)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("poison", [np.nan, np.inf])
def test_non_finite_calibration_data_fails_as_in_onnxruntime(tmp_path, fmt, poison):
    """NaN or infinite activations give a range with no scale: onnxruntime's quantizer fails its
    assertion ("scale issue"); quantspec raises a RangeError naming the tensor, and writes nothing."""
    from quantspec.errors import RangeError
    from quantspec.onnxmodels import quantize_static

    data = {k: v.copy() for k, v in CNN_DATA.items()}
    first = next(iter(data))
    data[first].reshape(-1)[::37] = poison
    with pytest.raises(AssertionError, match="scale issue"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ort_quantize(CNN, data, tmp_path, fmt)
    out = tmp_path / "ours.onnx"
    with pytest.raises(RangeError, match="calibration_data: gives tensor '.*' a range with no quantization scale"), \
            warnings.catch_warnings():
        warnings.simplefilter("error")
        quantize_static(CNN, out, data, quant_format=fmt)
    assert not out.exists()


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act", ["uint8", "int8"])
@pytest.mark.parametrize("extra", [None, {"ActivationSymmetric": True}, {"ForceQuantizeNoInputCheck": True},
                                   {"extra.Sigmoid.nnapi": True}], ids=["plain", "act_sym", "force", "nnapi"])
def test_zoo_common(tmp_path, fmt, per_channel, act, extra):
    _check(M.zoo_common(), M.zoo_data(), tmp_path, fmt, per_channel=per_channel, act=act, extra=extra)


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("extra", [None, {"ActivationSymmetric": True}, {"ForceQuantizeNoInputCheck": True},
                                   {"DedicatedQDQPair": True}], ids=["plain", "act_sym", "force", "dedicated"])
def test_zoo_qdq(tmp_path, per_channel, extra):
    _check(M.zoo_qdq(), M.zoo_data(), tmp_path, "qdq", per_channel=per_channel, extra=extra)


def test_float16_model_is_refused(tmp_path):
    from onnx import TensorProto, numpy_helper

    from quantspec.errors import UnsupportedError
    from quantspec.onnxmodels.static import quantize_with_ranges

    m = copy.deepcopy(CNN)
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for vi in list(m.graph.input) + list(m.graph.output):
        vi.type.tensor_type.elem_type = TensorProto.FLOAT16
    with pytest.raises(UnsupportedError, match="float16"):
        quantize_with_ranges(m, {})


@pytest.mark.parametrize("fmt", FORMATS)
def test_subgraph_reads_are_kept(tmp_path, fmt):
    data = {"x": np.random.default_rng(2).standard_normal((3, 1, 2, 2, 2)).astype(np.float32)}
    _check(M.with_subgraph(), data, tmp_path, fmt)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("per_channel", [False, True])
def test_shared_weights_and_biases(tmp_path, fmt, per_channel):
    data = {"x": np.random.default_rng(3).standard_normal((3, 1, 3, 2, 2)).astype(np.float32)}
    _check(M.shared(), data, tmp_path, fmt, per_channel=per_channel)


SWEEP_SEED = int(os.environ.get("QUANTSPEC_ONNX_STATIC_SEED", "0"))
SWEEP_CASES = int(os.environ.get("QUANTSPEC_ONNX_STATIC_CASES", "6"))


@pytest.mark.parametrize("case", range(SWEEP_CASES))
def test_random_sweep(tmp_path, case):
    """Random models and options (QUANTSPEC_ONNX_STATIC_SEED, QUANTSPEC_ONNX_STATIC_CASES for more)."""
    rng = np.random.default_rng([SWEEP_SEED, case])
    which = rng.integers(0, 4)
    seed = int(rng.integers(0, 2**31))
    model, data = [(M.cnn(seed=seed, channels=int(rng.integers(2, 9))), M.cnn_data(seed=seed + 1)),
                   (M.transformer(seed=seed), M.transformer_data(seed=seed + 1)),
                   (M.zoo_common(seed=seed), M.zoo_data(seed=seed + 1)),
                   (M.shared(seed=seed), {"x": np.random.default_rng(seed).standard_normal((3, 1, 3, 2, 2))
                                          .astype(np.float32)})][which]
    act, wt = [("uint8", "int8"), ("int8", "int8"), ("uint8", "uint8")][rng.integers(0, 3)]
    extra = {}
    for key in ("ActivationSymmetric", "WeightSymmetric", "QDQKeepRemovableActivations", "DedicatedQDQPair"):
        if rng.random() < 0.3:
            extra[key] = bool(rng.integers(0, 2))
    kw = dict(per_channel=bool(rng.integers(0, 2)), reduce_range=bool(rng.integers(0, 2)), act=act, wt=wt,
              method=METHODS[rng.integers(0, 4)], extra=extra or None)
    _check(model, data, tmp_path, FORMATS[rng.integers(0, 2)], **kw)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("opset", [10, 11, 13])
@pytest.mark.parametrize("per_channel", [False, True])
def test_older_opsets(tmp_path, fmt, opset, per_channel):
    """MaxPool below opset 12 is not quantized; per-channel weights below opset 13 are written as
    onnxruntime writes them (a model onnxruntime cannot load: quantspec's fails to load the same way)."""
    model = copy.deepcopy(CNN)
    model.opset_import[0].version = opset
    _check(model, CNN_DATA, tmp_path, fmt, per_channel=per_channel)


def test_opset_below_10_is_refused():
    from quantspec.errors import UnsupportedError
    from quantspec.onnxmodels.static import quantize_with_ranges

    model = copy.deepcopy(CNN)
    model.opset_import[0].version = 9
    with pytest.raises(UnsupportedError, match="opset"):
        quantize_with_ranges(model, {})


@pytest.mark.parametrize("act,wt", [("uint16", "int8"), ("int16", "int16"), ("uint16", "uint16"), ("uint8", "int16")])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("extra", [None, {"ActivationSymmetric": True}], ids=["plain", "act_sym"])
def test_16_bit_qdq(tmp_path, act, wt, per_channel, extra):
    for model, data in ((CNN, CNN_DATA), (TRF, TRF_DATA), (M.extreme_corpus(), M.unit_data(4))):
        model = copy.deepcopy(model)
        model.opset_import[0].version = 21
        _check(model, data, tmp_path, "qdq", act=act, wt=wt, per_channel=per_channel, extra=extra)


def test_where_the_formats_write_different_codes(tmp_path):
    """onnxruntime's two writers share the code arithmetic but not the parameters of some tensors:
    a constant operand of Add (here ``pos``) with int8 activations and weights is asymmetric in QDQ
    (ActivationSymmetric) and symmetric in QOperator (WeightSymmetric, as its type is the weight type);
    reduce_range narrows it in QDQ only; uint8 per-channel weights are symmetric (zero point 128) in
    QDQ, asymmetric in QOperator's MatMul.  quantspec writes each format's own."""
    cases = [dict(act="int8", wt="int8"), dict(act="int8", wt="int8", reduce_range=True),
             dict(act="uint8", wt="uint8", per_channel=True)]
    names = ["pos", "pos", "wq"]
    for kw, name in zip(cases, names):
        written = {}
        for fmt in FORMATS:
            ref = _arrays(ort_quantize(TRF, TRF_DATA, tmp_path, fmt, **kw))
            got = _arrays(ours(TRF, TRF_DATA, tmp_path, fmt, **kw)[0])
            for suffix in ("_scale", "_zero_point", "_quantized"):
                assert ref[name + suffix].tobytes() == got[name + suffix].tobytes()
            written[fmt] = ref
        assert written["qdq"][name + "_scale"].tobytes() != written["qoperator"][name + "_scale"].tobytes()
        assert written["qdq"][name + "_quantized"].tobytes() != written["qoperator"][name + "_quantized"].tobytes()


@pytest.mark.parametrize("method,extra", [
    ("minmax", {"CalibStridedMinMax": 2}),
    ("minmax", {"CalibMovingAverage": True, "CalibMovingAverageConstant": 0.3}),
    ("minmax", {"CalibTensorRangeSymmetric": True, "CalibMaxIntermediateOutputs": 1}),
    ("minmax", {"CalibMaxIntermediateOutputs": 3}),
    ("percentile", {"CalibPercentile": 99.0}),
    ("percentile", {"CalibPercentile": 90.0, "CalibTensorRangeSymmetric": False}),
    ("entropy", {"CalibTensorRangeSymmetric": True}),
])
def test_calibration_options_end_to_end(tmp_path, method, extra):
    from quantspec.onnxmodels import quantize_static

    from quantspec.errors import QuantSpecError

    for fmt in FORMATS:
        try:
            ref = ort_quantize(CNN, CNN_DATA, tmp_path, fmt, method=method, extra=extra)
        except ValueError as e:  # onnxruntime's calibration refuses (no data left to compute from): so does ours
            assert "No data is collected" in str(e)
            with pytest.raises(QuantSpecError, match="No data is collected"):
                quantize_static(CNN, None, CNN_DATA, quant_format=fmt, calibrate_method=method, extra_options=extra)
            continue
        out = tmp_path / f"ours_{fmt}.onnx"
        quantize_static(CNN, out, M.reader(CNN_DATA), quant_format=fmt, calibrate_method=method,
                        extra_options=extra)
        assert_same_model(ref, onnx.load(str(out)), M.feeds(CNN_DATA)[:1])


def _override_model():
    """A Conv whose weight holds w with w / s = -3.4999998 in float64 but -3.5 after the float32
    division (s = 0.015685882636331853), and a Gemm."""
    rng = np.random.default_rng(0)
    w = rng.uniform(-0.2, 0.2, (5, 6, 3, 3)).astype(np.float32)
    w[0, 0, 0, 0] = np.float32(-0.05490058660507202)
    w[1, 0, 0, 0] = np.float32(-0.05490058660507202)
    wf = (rng.standard_normal((5, 3)) * 0.3).astype(np.float32)
    return M._conv_gemm(w, (rng.standard_normal(5) * 0.05).astype(np.float32), wf,
                        np.zeros(3, np.float32))


OVERRIDE_SCALE = 0.015685882636331853


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("wt", ["int8", "uint8"])
def test_explicit_scales_tie_differs_between_formats(tmp_path, per_channel, wt):
    """TensorQuantOverrides: QDQ divides by float32(s) (the scale cast to the weight's dtype), QOperator
    by the float64 s; at w / s = -3.4999998 (float64) = -3.5 (float32) QDQ writes -4, QOperator -3.
    quantspec writes each format's codes."""
    s = OVERRIDE_SCALE
    zp = 0 if wt == "int8" else 128
    if per_channel:
        entries = [{"axis": 0, "scale": s, "zero_point": zp}] + [{"scale": s * (1 + k), "zero_point": zp}
                                                                for k in range(1, 5)]
    else:
        entries = [{"scale": s, "zero_point": zp}]
    wf = ([{"axis": 1, "scale": 0.004, "zero_point": zp}] + [{"scale": 0.005, "zero_point": zp}] * 2
          if per_channel else [{"scale": 0.004, "zero_point": zp}])
    extra = {"TensorQuantOverrides": {"w": entries, "wf": wf}, "QDQDisableWeightAdjustForInt32Bias": True}
    model, data = _override_model(), M.unit_data(6)
    codes = {}
    for fmt in FORMATS:
        try:
            ref = ort_quantize(model, data, tmp_path, fmt, per_channel=per_channel, wt=wt, extra=extra)
        except OverflowError:  # QOperator's per-channel Conv weights are int8 whatever weight_type: 128 overflows
            assert fmt == "qoperator" and per_channel and wt == "uint8"
            from quantspec.errors import InvalidArgumentError

            with pytest.raises(InvalidArgumentError, match="zero_point"):
                ours(model, data, tmp_path, fmt, per_channel=per_channel, wt=wt, extra=extra)
            continue
        got, _ = ours(model, data, tmp_path, fmt, per_channel=per_channel, wt=wt, extra=extra)
        assert_same_model(ref, got, M.feeds(data)[:2])
        codes[fmt] = _arrays(ref)["w_quantized"][0, 0, 0, 0].astype(int) - zp
    assert codes["qdq"] == -4 and codes.get("qoperator", -3) == -3
    assert "qoperator" in codes or (per_channel and wt == "uint8")


@pytest.mark.parametrize("fmt", FORMATS)
def test_explicit_scales_raised_for_the_bias(tmp_path, fmt):
    """An explicit int8 weight scale too small for the int32 bias is raised as onnxruntime raises it
    (QOperator then quantizes the weight again, now dividing in float32)."""
    extra = {"TensorQuantOverrides": {"w": [{"scale": 1e-9, "zero_point": 0}]}}
    model = _override_model()
    _check(model, M.unit_data(6), tmp_path, fmt, extra=extra)
    extra = {"TensorQuantOverrides": {"w": [{"axis": 0, "scale": 1e-9, "zero_point": 0}]
                                      + [{"scale": 0.01, "zero_point": 0}] * 4}}
    _check(model, M.unit_data(6), tmp_path, fmt, extra=extra, per_channel=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_explicit_scales_on_activation_initializers(tmp_path, fmt):
    extra = {"TensorQuantOverrides": {"pos": [{"scale": 0.01, "zero_point": 3}],
                                      "wq": [{"axis": 1} | {"scale": 0.02 + 0.001 * k, "zero_point": 0}
                                             for k in range(8)]}}
    extra["TensorQuantOverrides"]["wq"][1:] = [{k: v for k, v in e.items() if k != "axis"}
                                               for e in extra["TensorQuantOverrides"]["wq"][1:]]
    _check(TRF, TRF_DATA, tmp_path, fmt, extra=extra, per_channel=True)


OVERRIDE_OPTION_CASES = [
    {"w1": [{"symmetric": False}], "wf": [{"reduce_range": True}]},
    {"w1": [{"rmin": -0.5, "rmax": 2.0}], "w2": [{"symmetric": True, "rmin": -0.1, "rmax": 0.05}]},
    {"w1": [{"axis": 0, "symmetric": False, "rmin": -1.0, "rmax": 0.5}]
     + [{"rmin": -0.25 * k, "rmax": 0.1 * k} for k in range(1, 8)]},
    {"w2": [{"axis": 0, "reduce_range": True}] + [{}] * 7},
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("case", range(len(OVERRIDE_OPTION_CASES)))
@pytest.mark.parametrize("wt", ["int8", "uint8"])
def test_override_options(tmp_path, fmt, per_channel, case, wt):
    """TensorQuantOverrides of initializers with symmetric / reduce_range / rmin-rmax: the same as
    onnxruntime, or refused where onnxruntime fails (a per-tensor override on a weight its QOperator
    writer quantizes per channel, or the reverse)."""
    from quantspec.errors import UnsupportedError

    extra = {"TensorQuantOverrides": copy.deepcopy(OVERRIDE_OPTION_CASES[case])}
    try:
        ref = ort_quantize(CNN, CNN_DATA, tmp_path, fmt, per_channel=per_channel, wt=wt, extra=extra)
    except ValueError as e:
        assert fmt == "qoperator" and "overrides" in str(e)
        with pytest.raises(UnsupportedError, match="TensorQuantOverrides"):
            ours(CNN, CNN_DATA, tmp_path, fmt, per_channel=per_channel, wt=wt, extra=extra)
        return
    got, _ = ours(CNN, CNN_DATA, tmp_path, fmt, per_channel=per_channel, wt=wt, extra=extra)
    assert_same_model(ref, got, M.feeds(CNN_DATA)[:2])
