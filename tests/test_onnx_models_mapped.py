"""Reading a model's large inline initializers from the file where they lie instead of parsing them
into protobuf messages (``load_model(path, map_weights=True)``, which ``convert_model`` uses): the
model and every tensor's values equal ``onnx.load``'s, the converter writes byte-identical files
either way, and a file the mapped reader does not take plainly is read by ``onnx.load`` instead."""

from __future__ import annotations

import numpy as np
import pytest

from onnx_float_models import float_model, weights
from onnx_models import onnx_api

from quantspec.errors import ModelError
from quantspec.onnxmodels import convert_model, load_model, mapped


@pytest.fixture
def small_threshold(monkeypatch):
    """Map every initializer of 64 bytes or more (the models here are small)."""
    monkeypatch.setattr(mapped, "MAPPED_FROM", 64)


def without_data(t):
    onnx, _, _ = onnx_api()
    c = onnx.TensorProto()
    c.CopyFrom(t)
    c.ClearField("raw_data")
    c.ClearField("external_data")
    c.data_location = onnx.TensorProto.DEFAULT
    return c.SerializeToString()


def test_the_model_and_its_values_equal_onnx_load(small_threshold, tmp_path):
    onnx, _, numpy_helper = onnx_api()
    src = tmp_path / "m.onnx"
    m = float_model(seed=3)
    m.graph.initializer[0].doc_string = "a documented weight"
    onnx.save(m, str(src))
    got = load_model(src, map_weights=True)
    want = onnx.load(str(src))
    assert got.mapped == {"W1", "W2", "W3", "Wc", "C2"}      # all but the 20-byte bias Bc
    assert [without_data(t) for t in got.proto.graph.initializer] == \
        [without_data(t) for t in want.graph.initializer]
    for t in got.proto.graph.initializer:
        if t.name in got.mapped:
            assert t.data_location == onnx.TensorProto.EXTERNAL and not t.raw_data
    a, b = onnx.ModelProto(), onnx.ModelProto()
    a.CopyFrom(got.proto)
    b.CopyFrom(want)
    a.graph.ClearField("initializer")
    b.graph.ClearField("initializer")
    assert a.SerializeToString() == b.SerializeToString()
    for t, u in zip(got.proto.graph.initializer, want.graph.initializer):
        x, y = got.values(t), numpy_helper.to_array(u)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), t.name


@pytest.mark.parametrize("scheme,fmt", [("int8", "qdq"), ("uint4-b16-asym", "qdq"), ("int4-b16", "matmulnbits")])
@pytest.mark.parametrize("external", [None, False, True])
@pytest.mark.parametrize("opset", [13, 21])
def test_the_converter_writes_the_same_files(small_threshold, tmp_path, monkeypatch, scheme, fmt, external, opset):
    """Mapped or parsed, the same bytes: quantized weights, kept ones (Gemm and Conv weights under
    --format matmulnbits, the biases) inline or in a data file, the opset upgraded or not."""
    onnx, _, _ = onnx_api()
    src = tmp_path / "m.onnx"
    onnx.save(float_model(opset=opset, seed=4), str(src))
    kw = {"external_data": external, "format": fmt}
    mapped_report = convert_model(src, tmp_path / "a.onnx", scheme, **kw)
    monkeypatch.setattr("quantspec.onnxmodels.io.load_mapped", lambda path: None)
    plain_report = convert_model(src, tmp_path / "b.onnx", scheme, **kw)
    assert len(mapped_report.files) == len(plain_report.files) == (2 if external else 1)
    for a, b in zip(mapped_report.files, plain_report.files):
        got, want = open(a, "rb").read(), open(b, "rb").read()
        if a.endswith(".onnx") and external:
            got = got.replace(b"a.onnx.data", b"b.onnx.data")
        assert got == want, a
    onnx.checker.check_model(str(tmp_path / "a.onnx"), full_check=True)


def test_a_large_weight_is_mapped_at_the_default_threshold(tmp_path):
    onnx, helper, numpy_helper = onnx_api()
    w = np.random.default_rng(0).standard_normal((1024, 300)).astype(np.float32)      # 1.2 MB
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1024])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 300])],
                          [numpy_helper.from_array(w, "W")])
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(src))
    model = load_model(src, map_weights=True)
    assert model.mapped == {"W"}
    assert model.values(model.proto.graph.initializer[0]).tobytes() == w.tobytes()
    convert_model(src, tmp_path / "q.onnx", "int4-b32", format="matmulnbits")
    onnx.checker.check_model(str(tmp_path / "q.onnx"), full_check=True)


def test_files_the_mapped_reader_does_not_take_are_read_whole(small_threshold, tmp_path):
    onnx, helper, numpy_helper = onnx_api()
    m = float_model(seed=5)
    # a tensor in float_data (not raw_data) stays parsed; the others are mapped
    w1 = numpy_helper.to_array(m.graph.initializer[0])
    typed = helper.make_tensor("W1", onnx.TensorProto.FLOAT, list(w1.shape), w1.reshape(-1).tolist())
    m.graph.initializer[0].CopyFrom(typed)
    src = tmp_path / "typed.onnx"
    onnx.save(m, str(src))
    got = load_model(src, map_weights=True)
    assert "W1" not in got.mapped and "W2" in got.mapped
    assert got.values(got.proto.graph.initializer[0]).tobytes() == w1.tobytes()
    # the graph in two pieces (protobuf merges them): read by onnx.load
    a = float_model(seed=6)
    b = onnx.ModelProto()
    b.graph.initializer.add().CopyFrom(numpy_helper.from_array(np.ones(40, np.float32), "extra"))
    two = tmp_path / "two.onnx"
    two.write_bytes(a.SerializeToString() + b.SerializeToString())
    got = load_model(two, map_weights=True)
    assert got.mapped == frozenset()
    assert [t.name for t in got.proto.graph.initializer] == [*weights(6), "extra"]
    # a damaged file is the same error as before
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(src.read_bytes()[:-7])
    with pytest.raises(ModelError, match="not a readable ONNX model"):
        load_model(bad, map_weights=True)
