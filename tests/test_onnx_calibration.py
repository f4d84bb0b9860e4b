"""quantspec.onnxmodels.calibration.collect_ranges against onnxruntime's own calibrator.

For each model (a small CNN with a residual Add, a constant tensor and a dead Relu channel; a tiny
single-head transformer with an embedding Gather on int64 ids) and each calibration method, the
ranges quantspec collects are compared field by field (dtype, shape and bytes of lowest, highest,
hist, hist_edges, avg, std) with what onnxruntime's ``create_calibrator`` + ``collect_data`` +
``compute_data`` give for the same data and options, exactly as ``quantize_static`` calls them
(its op types, its mapping of the ``Calib*`` extra options, ``CalibStridedMinMax``), and the set of
calibrated tensors is the same.  The data forms (dict of stacked samples, list of feed dicts,
CalibrationDataReader, .npz file) give the same ranges.  The CNN's samples hold exact ties, -0.0
and +0.0, large values and a constant input region.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest

from refs import require

from quantspec.errors import DTypeError, InvalidArgumentError, QuantSpecError, ShapeError
from quantspec.onnxmodels import calibration as cal

SEED = int(os.environ.get("QUANTSPEC_CALIB_SEED", "0"))
SAMPLES = int(os.environ.get("QUANTSPEC_CALIB_SAMPLES", "6"))


def _api():
    onnx = require("onnx")
    require("onnxruntime")
    from onnx import helper, numpy_helper

    return onnx, helper, numpy_helper


def cnn_model(seed: int = SEED):
    """x [1,3,8,8] -> Conv(4,3x3,pad 1)+B -> Relu (channel 2 dead: zero weights, bias -1) -> Conv(4,3x3,pad 1)
    -> Add(residual) -> Mul by a zero constant + Add (a constant tensor) -> MaxPool 2 -> GlobalAveragePool
    -> Flatten -> Gemm(4->5) -> y [1,5]."""
    onnx, helper, nh = _api()
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(4) * 0.1).astype(np.float32)
    w1[2] = 0
    b1[2] = -1
    w2 = (rng.standard_normal((4, 4, 3, 3)) * 0.3).astype(np.float32)
    g = (rng.standard_normal((5, 4)) * 0.5).astype(np.float32)
    gb = (rng.standard_normal(5) * 0.1).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "W2"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
        helper.make_node("Mul", ["s", "zero"], ["z"], name="mul_zero"),
        helper.make_node("Add", ["s", "z"], ["s2"], name="add_zero"),
        helper.make_node("MaxPool", ["s2"], ["p"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
        helper.make_node("GlobalAveragePool", ["p"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "G", "GB"], ["y"], transB=1, name="gemm"),
    ]
    inits = [nh.from_array(w1, "W1"), nh.from_array(b1, "B1"), nh.from_array(w2, "W2"),
             nh.from_array(np.zeros((1,), np.float32), "zero"), nh.from_array(g, "G"), nh.from_array(gb, "GB")]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", 1, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", 1, [1, 5])], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def transformer_model(seed: int = SEED):
    """ids [1,6] int64 -> Gather(embedding 11x8) -> LayerNormalization -> q,k,v MatMuls -> Transpose k ->
    MatMul -> Mul(1/sqrt 8) -> Softmax -> MatMul v -> MatMul Wo -> Add residual -> y [1,6,8]."""
    onnx, helper, nh = _api()
    rng = np.random.default_rng(seed + 1)
    f = lambda *s: (rng.standard_normal(s) * 0.4).astype(np.float32)   # noqa: E731
    nodes = [
        helper.make_node("Gather", ["E", "ids"], ["e"], axis=0, name="embed"),
        helper.make_node("LayerNormalization", ["e", "ln_g", "ln_b"], ["h"], axis=-1, epsilon=1e-5, name="ln"),
        helper.make_node("MatMul", ["h", "Wq"], ["q"], name="q"),
        helper.make_node("MatMul", ["h", "Wk"], ["k"], name="k"),
        helper.make_node("MatMul", ["h", "Wv"], ["v"], name="v"),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
        helper.make_node("MatMul", ["q", "kt"], ["sc"], name="qk"),
        helper.make_node("Mul", ["sc", "scale"], ["sc2"], name="scale"),
        helper.make_node("Softmax", ["sc2"], ["pr"], axis=-1, name="softmax"),
        helper.make_node("MatMul", ["pr", "v"], ["a"], name="av"),
        helper.make_node("MatMul", ["a", "Wo"], ["o"], name="o"),
        helper.make_node("Add", ["o", "e"], ["y"], name="residual"),
    ]
    inits = [nh.from_array(f(11, 8), "E"), nh.from_array(np.ones(8, np.float32) + f(8) * 0.1, "ln_g"),
             nh.from_array(f(8) * 0.1, "ln_b"), nh.from_array(f(8, 8), "Wq"), nh.from_array(f(8, 8), "Wk"),
             nh.from_array(f(8, 8), "Wv"), nh.from_array(f(8, 8), "Wo"),
             nh.from_array(np.array(1 / np.sqrt(8), np.float32), "scale")]
    graph = helper.make_graph(nodes, "tf", [helper.make_tensor_value_info("ids", 7, [1, 6])],
                              [helper.make_tensor_value_info("y", 1, [1, 6, 8])], initializer=inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def cnn_data(n: int = SAMPLES, seed: int = SEED) -> np.ndarray:
    """[n, 1, 3, 8, 8] float32: random samples, with exact ties (k + 0.5, multiples of 1/256), -0.0 and
    +0.0 extremes, large values and a constant region."""
    rng = np.random.default_rng(seed + 2)
    x = rng.standard_normal((n, 1, 3, 8, 8)).astype(np.float32)
    x[0, 0, 0] = np.round(x[0, 0, 0] * 4) / 4 + 0.5              # ties
    x[0, 0, 1, :4] = -0.0
    if n > 1:
        x[1] = np.abs(x[1])                                      # min of the input: +0.0 or -0.0 below
        x[1, 0, 0, 0, 0] = -0.0
        x[1, 0, 2] = 7.0                                         # a constant channel
    if n > 2:
        x[2, 0, 1, 3, 3] = 3.0e4                                 # large values
        x[2, 0, 0, 0, 0] = -2.5e4
    if n > 3:
        x[3] = np.round(x[3] * 256) / 256                        # on a power-of-two grid
    return x


def ids_data(n: int = SAMPLES, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng(seed + 3)
    return rng.integers(0, 11, size=(n, 1, 6), dtype=np.int64)


class Reader:
    """onnxruntime's CalibrationDataReader protocol over a list of feeds (with len and set_range)."""

    def __init__(self, feeds):
        self.feeds = list(feeds)
        self.start, self.end = 0, len(self.feeds)
        self.i = 0

    def get_next(self):
        if self.start + self.i >= self.end:
            return None
        self.i += 1
        return self.feeds[self.start + self.i - 1]

    def __len__(self):
        return len(self.feeds)

    def set_range(self, start_index, end_index):
        self.start, self.end, self.i = start_index, end_index, 0


_ORT_METHOD = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile", "distribution": "Distribution"}


def ort_ranges(model, feeds, method, op_types=None, extra_options=None):
    """onnxruntime's calibration as quantize_static runs it: its op types, its Calib* mapping, its
    strided collect_data calls, then compute_data."""
    onnx, _, _ = _api()
    from onnxruntime.quantization.calibrate import CalibrationMethod, create_calibrator
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    extra_options = extra_options or {}
    ops = op_types or list(set(list(QLinearOpsRegistry) + list(QDQRegistry)))
    keys = [("CalibTensorRangeSymmetric", "symmetric"), ("CalibMovingAverage", "moving_average"),
            ("CalibMovingAverageConstant", "averaging_constant"),
            ("CalibMaxIntermediateOutputs", "max_intermediate_outputs"), ("CalibPercentile", "percentile")]
    calib_extra = {k: extra_options.get(n) for n, k in keys if n in extra_options}
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "model.onnx"
        onnx.save(model, str(p))
        c = create_calibrator(p, ops, augmented_model_path=str(Path(d) / "aug.onnx"),
                              calibrate_method=CalibrationMethod[_ORT_METHOD[method]], extra_options=calib_extra)
        reader = Reader(feeds)
        stride = extra_options.get("CalibStridedMinMax")
        if stride:
            for start in range(0, len(reader), stride):
                reader.set_range(start_index=start, end_index=start + stride)
                c.collect_data(reader)
        else:
            c.collect_data(reader)
        return c.compute_data()


FIELDS = ("lowest", "highest", "hist", "hist_edges", "avg", "std")


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same(ours: dict, theirs) -> None:
    """Every field of onnxruntime's TensorData, bytes, dtype and shape.  Its histogram sits in
    ``hist`` + ``hist_edges`` or ``bins`` (Entropy, Distribution); for Percentile onnxruntime stores
    hist[0] and hist[1] of the (hist, edges) pair in ``hist`` / ``bins``."""
    assert set(ours) == set(theirs.keys())
    method = theirs.calibration_method.name
    for name in theirs.keys():
        td, r = theirs[name], ours[name]
        assert _same(r.lowest, td.lowest) and _same(r.highest, td.highest), (name, td.range_value, r)
        if method == "MinMax":
            assert r.hist is None and r.avg is None and set(td._attrs) == {"lowest", "highest"}, name
        elif method == "Percentile":
            assert _same(r.hist[0], td.hist) and _same(r.hist[1], td.bins), name
        else:
            edges = td.hist_edges if hasattr(td, "hist_edges") else td.bins
            assert _same(r.hist, td.hist) and _same(r.hist_edges, edges), name
        if method == "Distribution":
            assert _same(r.avg, td.avg) and _same(r.std, td.std), name


def _feeds_cnn(x):
    return [{"x": x[i]} for i in range(len(x))]


@pytest.fixture(scope="module")
def cnn():
    return cnn_model()


@pytest.fixture(scope="module")
def tfm():
    return transformer_model()


@pytest.fixture(autouse=True)
def _quiet(capsys):
    yield   # onnxruntime's histogram collector prints a line per call


@pytest.mark.parametrize("method", ["minmax", "entropy", "percentile", "distribution"])
def test_cnn_every_method(cnn, method):
    x = cnn_data()
    ours = cal.collect_ranges(cnn, {"x": x}, method=method)
    assert_same(ours, ort_ranges(cnn, _feeds_cnn(x), method))
    assert "x" in ours and "y" in ours and "z" in ours      # inputs, outputs, the constant tensor


@pytest.mark.parametrize("method", ["minmax", "entropy", "percentile", "distribution"])
def test_transformer_every_method(tfm, method):
    ids = ids_data()
    ours = cal.collect_ranges(tfm, {"ids": ids}, method=method)
    assert_same(ours, ort_ranges(tfm, [{"ids": ids[i]} for i in range(len(ids))], method))
    assert "ids" not in ours and "E" not in ours and "pr" in ours


@pytest.mark.parametrize("method,extra", [
    ("minmax", {"CalibTensorRangeSymmetric": True}),
    ("minmax", {"CalibMovingAverage": True}),
    ("minmax", {"CalibMovingAverage": True, "CalibMovingAverageConstant": 0.25}),
    ("minmax", {"CalibMaxIntermediateOutputs": 4}),
    ("minmax", {"CalibStridedMinMax": 2}),
    ("minmax", {"CalibStridedMinMax": 3, "CalibMovingAverage": True}),
    ("entropy", {"CalibTensorRangeSymmetric": True}),
    ("entropy", {"CalibStridedMinMax": 2, "model": "tfm"}),   # on the CNN's data the histogram grows to 500k bins
    ("percentile", {"CalibTensorRangeSymmetric": False}),
    ("percentile", {"CalibPercentile": 99.0}),
    ("percentile", {"CalibStridedMinMax": 3}),
    ("distribution", {"CalibStridedMinMax": 2, "ActivationSymmetric": True}),
])
def test_extra_options(cnn, tfm, method, extra):
    extra = dict(extra)
    if extra.pop("model", None) == "tfm":
        model, data = tfm, {"ids": ids_data()}
        feeds = [{"ids": a} for a in data["ids"]]
    else:
        model, data = cnn, {"x": cnn_data()}
        feeds = _feeds_cnn(data["x"])
    ours = cal.collect_ranges(model, data, method=method, extra_options=extra)
    assert_same(ours, ort_ranges(model, feeds, method, extra_options=extra))


def test_op_types(cnn, tfm):
    x = cnn_data()
    ours = cal.collect_ranges(cnn, {"x": x}, op_types=["Conv", "Gemm"])
    assert_same(ours, ort_ranges(cnn, _feeds_cnn(x), "minmax", op_types=["Conv", "Gemm"]))
    assert set(ours) == {"x", "c1", "r1", "c2", "f", "y"}
    onnx, _, _ = _api()
    inferred = onnx.shape_inference.infer_shapes(tfm)
    assert list(cal.select_tensors(inferred, ["Softmax"])) == ["sc2", "pr"]


def test_default_op_types_are_quantize_statics():
    require("onnxruntime")
    from onnxruntime.quantization.registry import QDQRegistry, QLinearOpsRegistry

    assert cal.DEFAULT_OP_TYPES == set(QLinearOpsRegistry) | set(QDQRegistry)


def test_max_intermediate_outputs_drops_everything(cnn):
    """4 samples, CalibMaxIntermediateOutputs=2: onnxruntime drops both pairs and has no data."""
    x = cnn_data(4)
    with pytest.raises(ValueError, match="No data is collected"):
        ort_ranges(cnn, _feeds_cnn(x), "minmax", extra_options={"CalibMaxIntermediateOutputs": 2})
    with pytest.raises(InvalidArgumentError, match="calibration_data"):
        cal.collect_ranges(cnn, {"x": x}, extra_options={"CalibMaxIntermediateOutputs": 2})


def test_data_forms_agree(cnn, tmp_path):
    x = cnn_data()
    want = cal.collect_ranges(cnn, {"x": x}, method="entropy")
    forms = {
        "list": _feeds_cnn(x),
        "reader": Reader(_feeds_cnn(x)),
        "rank-of-input": {"x": x.reshape(-1, 3, 8, 8)},     # the samples along the input's own batch axis
    }
    np.savez(tmp_path / "named.npz", x=x)
    np.savez(tmp_path / "unnamed.npz", x)
    forms["npz"] = tmp_path / "named.npz"
    forms["npz-str"] = str(tmp_path / "unnamed.npz")
    p = tmp_path / "m.onnx"
    onnx, _, _ = _api()
    onnx.save(cnn, str(p))
    for label, data in forms.items():
        got = cal.collect_ranges(cnn if label != "npz" else p, data, method="entropy")
        assert list(got) == list(want), label
        for name in want:
            for f in FIELDS:
                a, b = getattr(want[name], f), getattr(got[name], f)
                assert (a is None) == (b is None) and (a is None or a.tobytes() == b.tobytes()), (label, name, f)
    feeds = list(cal.iter_feeds(cnn, {"x": x}))
    assert len(feeds) == len(x) and feeds[1]["x"].shape == (1, 3, 8, 8)
    assert cal.count_samples(cnn, str(tmp_path / "named.npz")) == len(x)


def test_transformer_two_inputs_counts():
    """Two inputs with different sample counts, unknown and missing names."""
    onnx, helper, nh = _api()
    nodes = [helper.make_node("Add", ["a", "b"], ["c"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", 1, [2]),
                                       helper.make_tensor_value_info("b", 1, [2])],
                          [helper.make_tensor_value_info("c", 1, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    a = np.ones((3, 2), np.float32)
    with pytest.raises(ShapeError, match="same number of samples"):
        cal.collect_ranges(m, {"a": a, "b": np.ones((4, 2), np.float32)})
    with pytest.raises(InvalidArgumentError, match="missing"):
        cal.collect_ranges(m, {"a": a})
    with pytest.raises(InvalidArgumentError, match="only the model's inputs"):
        cal.collect_ranges(m, {"a": a, "b": a, "zz": a})
    got = cal.collect_ranges(m, {"a": a, "b": -a})
    assert set(got) == {"a", "b", "c"}


@pytest.mark.parametrize("data,error,text", [
    ({"x": np.zeros((2, 1, 3, 8, 8), np.float64)}, DTypeError, "dtype of model input"),
    ({"x": np.zeros((2, 3, 8), np.float32)}, ShapeError, "rank"),
    ({"x": np.zeros((0, 1, 3, 8, 8), np.float32)}, InvalidArgumentError, "at least one sample"),
    ([], InvalidArgumentError, "at least one sample"),
    ([{"x": np.zeros((1, 3, 8, 8), np.float32)}, {"y": np.zeros((1, 3, 8, 8), np.float32)}],
     InvalidArgumentError, r"calibration_data\[1\]"),
    (Reader([]), InvalidArgumentError, "at least one sample"),
    (42, InvalidArgumentError, "dict of stacked samples"),
    ("/nonexistent/data.npz", InvalidArgumentError, "exists"),
    ({"x": np.zeros((2, 1, 3, 9, 9), np.float32)}, InvalidArgumentError, "onnxruntime can run"),
])
def test_bad_data(cnn, data, error, text):
    with pytest.raises(error, match=text) as e:
        cal.collect_ranges(cnn, data)
    assert isinstance(e.value, QuantSpecError) and e.value.argument.startswith("calibration_data")


@pytest.mark.parametrize("kw,text", [
    ({"method": "kl"}, "method"),
    ({"extra_options": {"CalibMovingAverage": True, "CalibMovingAverageConstant": 2.0}}, "CalibMovingAverageConstant"),
    ({"extra_options": {"CalibPercentile": "high"}}, "CalibPercentile"),
    ({"extra_options": {"CalibMaxIntermediateOutputs": -1}}, "CalibMaxIntermediateOutputs"),
    ({"extra_options": {"CalibStridedMinMax": 4}}, "CalibStridedMinMax"),
    ({"op_types": [3]}, "op_types"),
])
def test_bad_options(cnn, kw, text):
    with pytest.raises(InvalidArgumentError, match=text):
        cal.collect_ranges(cnn, {"x": cnn_data()}, **kw)


def test_ort_enum_method(cnn):
    require("onnxruntime")
    from onnxruntime.quantization import CalibrationMethod

    x = cnn_data(3)
    a = cal.collect_ranges(cnn, {"x": x}, method=CalibrationMethod.Percentile)
    b = cal.collect_ranges(cnn, {"x": x}, method="Percentile")
    assert all(a[k].lowest.tobytes() == b[k].lowest.tobytes() for k in a)


def test_nan_and_signed_zero_extremes():
    """MinMax on tensors whose extremes are -0.0 / +0.0 or NaN, through Relu and Neg-free graphs:
    onnxruntime's ReduceMin / ReduceMax order decides the sign and whether NaN counts."""
    onnx, helper, nh = _api()
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "m"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [4, 37])],
                          [helper.make_tensor_value_info("y", 1, [4, 37])],
                          initializer=[nh.from_array(np.array(-1.0, np.float32), "m")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    rng = np.random.default_rng(SEED + 5)
    x = rng.standard_normal((5, 4, 37)).astype(np.float32)
    x[0] = -np.abs(x[0])
    x[0, 1, 3] = -0.0
    x[1] = np.abs(x[1])
    x[1, 2, 5] = -0.0
    x[1, 0, 0] = 0.0
    x[2, 3, 36] = np.nan
    x[3, 0, 0] = np.nan
    x[4] = 0.0
    x[4, 1, 1] = -0.0
    feeds = [{"x": x[i]} for i in range(len(x))]
    for extra in ({}, {"CalibTensorRangeSymmetric": True}, {"CalibMovingAverage": True}):
        ours = cal.collect_ranges(m, {"x": x}, extra_options=extra)
        assert_same(ours, ort_ranges(m, feeds, "minmax", extra_options=extra))


@pytest.mark.parametrize("method,stride", [("minmax", 2), ("percentile", 3), ("entropy", 3)])
def test_strided_reader(cnn, method, stride):
    """CalibStridedMinMax with a reader: onnxruntime's len() and set_range() calls, one collect_data per group."""
    x = cnn_data()
    extra = {"CalibStridedMinMax": stride}
    ours = cal.collect_ranges(cnn, Reader(_feeds_cnn(x)), method=method, extra_options=extra)
    assert_same(ours, ort_ranges(cnn, _feeds_cnn(x), method, extra_options=extra))

    class NoLen:
        def get_next(self):
            return None

    with pytest.raises(InvalidArgumentError, match="len"):
        cal.collect_ranges(cnn, NoLen(), method=method, extra_options=extra)


def test_percentile_extended_edges_bin_on_float64_edges(cnn):
    """A later call that extends the absolute histogram's edges is binned on the float64 edges
    np.arange / np.hstack make (they are stored rounded to float32): binned on the rounded edges, a
    value on one (here |y| = 4833.687, with 675696 bins) would land one bin lower than onnxruntime's."""
    x = cnn_data()
    extra = {"CalibStridedMinMax": 2}
    ours = cal.collect_ranges(cnn, {"x": x}, method="percentile", extra_options=extra)
    assert_same(ours, ort_ranges(cnn, _feeds_cnn(x), "percentile", extra_options=extra))


def test_float16_tensors_are_refused():
    onnx, helper, nh = _api()
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", 10, [4])],
                          [helper.make_tensor_value_info("y", 10, [4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    from quantspec.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="float16"):
        cal.collect_ranges(m, {"x": np.ones((2, 4), np.float16)})


def _sibling_models():
    import onnx_static_models as M

    names = ["cnn", "transformer", "zoo_common", "zoo_qdq", "zoo_qoperator", "with_subgraph", "shared",
             "tie_corpus", "extreme_corpus"]
    return M, names


def _data_for(model, seed: int = SEED, n: int = 3) -> dict:
    """Seeded samples for each graph input of ``model`` (its static shape; int64 ids below 16)."""
    rng = np.random.default_rng(seed + 11)
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == 7:
            out[vi.name] = rng.integers(0, 16, size=(n, *shape), dtype=np.int64)
        else:
            out[vi.name] = (rng.standard_normal((n, *shape)) * 2).astype(np.float32)
    return out


@pytest.mark.filterwarnings("ignore::RuntimeWarning")   # numpy, inside onnxruntime's calibrator
@pytest.mark.parametrize("name", _sibling_models()[1])
@pytest.mark.parametrize("method", ["minmax", "entropy", "percentile", "distribution"])
def test_sibling_models_every_op_type(name, method):
    """The static quantizer's test models (every op type of onnxruntime's two registries, a subgraph, shared
    weights, weights at ties and extremes): the same tensors and ranges as onnxruntime's calibrator."""
    require("onnxruntime")
    M, _ = _sibling_models()
    model = getattr(M, name)()
    data = _data_for(model)
    feeds = [{k: v[i] for k, v in data.items()} for i in range(3)]
    try:
        want = ort_ranges(model, feeds, method)
    except ValueError as e:      # extreme_corpus's 3e38 weights: numpy cannot bin the histogram methods' range
        with pytest.raises(InvalidArgumentError, match="calibration_data"):
            cal.collect_ranges(model, data, method=method)
        assert "Too many bins" in str(e)
        return
    assert_same(cal.collect_ranges(model, data, method=method), want)


@pytest.mark.parametrize("method", ["minmax", "entropy"])
def test_large_initializers(method):
    """Initializers of 64 KiB and more (float32 weights, int64 indices) reach onnxruntime as arrays, the
    rest of the model serialized without them: the same activations and ranges."""
    onnx, helper, nh = _api()
    rng = np.random.default_rng(SEED + 7)
    w = (rng.standard_normal((256, 128)) * 0.1).astype(np.float32)          # 128 KiB
    e = rng.standard_normal((600, 64)).astype(np.float32)                    # 150 KiB
    idx = rng.integers(0, 600, size=(12000,), dtype=np.int64)               # 94 KiB
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gather", ["E", "idx"], ["g"], axis=0), helper.make_node("Mul", ["g", "two"], ["y2"])]
    g = helper.make_graph(nodes, "big", [helper.make_tensor_value_info("x", 1, [1, 256])],
                          [helper.make_tensor_value_info("r", 1, [1, 128]), helper.make_tensor_value_info("y2", 1, None)],
                          initializer=[nh.from_array(w, "W"), nh.from_array(e, "E"), nh.from_array(idx, "idx"),
                                       nh.from_array(np.array(2.0, np.float32), "two")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x = rng.standard_normal((3, 1, 256)).astype(np.float32)
    assert [t.name for t in m.graph.initializer if cal._array(t) is not None] == ["W", "E", "idx"]
    before = m.SerializeToString()
    ours = cal.collect_ranges(m, {"x": x}, method=method)
    assert m.SerializeToString() == before                                   # the model is left as it was
    assert_same(ours, ort_ranges(m, [{"x": a} for a in x], method))
    assert {"x", "h", "r", "g", "y2"} <= set(ours)
