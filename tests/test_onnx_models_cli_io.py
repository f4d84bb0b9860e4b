"""``quantspec check MODEL.onnx`` and ``quantspec audit MODEL.onnx`` (exit 0 / 1 / 2, --json), and the
model reading and writing helpers: external data, a model over 2 GB, atomic saving."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from onnx_models import model, node, onnx_api, static_quantized, tensor
from quantspec.cli import main
from quantspec.errors import ModelError
from quantspec.onnxmodels import audit, check_model
from quantspec.onnxmodels import load_model, save_model
from quantspec.onnxmodels.io import set_external
from quantspec.onnxmodels.io import looks_like_onnx


@pytest.fixture(scope="module")
def qdq_path(tmp_path_factory):
    return static_quantized(tmp_path_factory.mktemp("static"), "QDQ", per_channel=True)


def zero_scale(tmp_path):
    m = model([node("Identity", ["x"], ["r"]), node("QuantizeLinear", ["r", "s", "z"], ["y"])], [("x", "float", [4])],
              [("y", "uint8", [4])], [tensor("s", np.float32(0)), tensor("z", np.uint8(0))], opset=13)
    path = tmp_path / "broken.onnx"
    onnx_api()[0].save(m, str(path))
    return path


def f16_model(tmp_path):
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"]), node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    m = model(nodes, [("x", "float16", [32, 32])], [("y", "float16", [32, 32])],
              [tensor("s", np.float16(0.0371)), tensor("z", np.uint8(128))], opset=21, ir=10)
    path = tmp_path / "f16.onnx"
    onnx_api()[0].save(m, str(path))
    return path


# ------------------------------------------------------------------------------------------------
# quantspec check
# ------------------------------------------------------------------------------------------------

def test_check_conformant_onnx_exits_0(qdq_path, capsys):
    assert main(["check", str(qdq_path)]) == 0
    out = capsys.readouterr().out
    assert "conformant" in out and "opset 13" in out and str(qdq_path) in out


def test_check_violations_exit_1_with_a_table_and_json(tmp_path, capsys):
    path = zero_scale(tmp_path)
    assert main(["check", str(path)]) == 1
    header, blank, columns, rule, row = capsys.readouterr().out.splitlines()[:5]
    assert "1 violation" in header and columns.split() == ["rule", "node", "tensor", "expected", "found"]
    assert row.split()[:5] == ["scale", "1", "QuantizeLinear", "s", "finite"]
    assert main(["check", str(path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and data["format"] == "onnx" and data["model"] == str(path)
    (v,) = data["violations"]
    assert (v["rule"], v["node_index"], v["op_type"], v["tensor"], v["found"]) == ("scale", 1, "QuantizeLinear", "s", 0.0)


def test_check_unreadable_exits_2(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing.onnx")]) == 2
    assert "cannot be read" in capsys.readouterr().err
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x08\x07\x12\xff\xff\xff\xff\x0f" + b"\x00" * 40)     # a ModelProto's first tag, then garbage
    assert main(["check", str(junk)]) == 2
    assert "ModelError" in capsys.readouterr().err
    text = tmp_path / "notes.onnx"
    text.write_text("not a model")
    assert main(["check", str(text), "--json"]) == 2


def test_check_still_reads_tflite_by_content(tmp_path, capsys):
    from quantspec.litert import example_model

    renamed = tmp_path / "model.bin"                      # the content decides, not the name
    renamed.write_bytes(open(example_model("cnn"), "rb").read())
    assert main(["check", str(renamed)]) == 0
    assert "LiteRT int8 spec" in capsys.readouterr().out
    assert main(["check", "--help"]) == 0
    assert "ONNX" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# quantspec audit
# ------------------------------------------------------------------------------------------------

def test_audit_conformant_model_exits_0(qdq_path, capsys):
    assert main(["audit", str(qdq_path), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "onnxruntime computed every node as the spec does" in out and "random inputs (seed 3)" in out


def test_audit_departures_exit_1(tmp_path, capsys):
    path = f16_model(tmp_path)
    x = (np.random.default_rng(0).standard_normal((32, 32)) * 3).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    assert main(["audit", str(path), "--input", str(tmp_path / "x.npy"), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ran"] and data["confirmed"] and data["summary"]["departures"] == 1
    q = data["nodes"][0]
    assert q["onnxruntime_vs_spec"] > 0 and q["onnxruntime_vs_compat"] == 0 and "f16-quotient" in data["summary"]["divergences"]
    assert q["onnxruntime_vs_spec"] == audit(path, {"x": x}).node(0).onnxruntime_vs_spec
    np.savez(tmp_path / "inputs.npz", x=x)                # inputs by name
    assert main(["audit", str(path), "--input", str(tmp_path / "inputs.npz")]) == 1
    assert "departed from the spec at 1 node(s)" in capsys.readouterr().out


def test_audit_static_and_bad_input(tmp_path, capsys):
    path = f16_model(tmp_path)
    assert main(["audit", str(path), "--static"]) == 0
    assert "static audit" in capsys.readouterr().out
    np.save(tmp_path / "x.npy", np.zeros((32, 32), np.float16))
    assert main(["audit", str(path), "--static", "--input", str(tmp_path / "x.npy")]) == 2
    np.save(tmp_path / "bad.npy", np.zeros((32, 32), np.float32))
    assert main(["audit", str(path), "--input", str(tmp_path / "bad.npy")]) == 2
    assert "float16" in capsys.readouterr().err
    assert main(["audit", str(tmp_path / "missing.onnx")]) == 2
    assert main(["audit", str(path), "--seed", "-1"]) == 2


# ------------------------------------------------------------------------------------------------
# reading and writing
# ------------------------------------------------------------------------------------------------

def test_load_from_a_path_bytes_or_a_proto(qdq_path):
    onnx, _, _ = onnx_api()
    data = qdq_path.read_bytes()
    assert looks_like_onnx(data) and not looks_like_onnx(b"\x1c\x00\x00\x00TFL3")
    for source in (qdq_path, str(qdq_path), data, onnx.load(str(qdq_path))):
        assert check_model(source).ok
    with pytest.raises(ModelError):
        load_model(b"\xff" * 10)
    with pytest.raises(ModelError):
        load_model(42)


def test_save_with_external_data(qdq_path, tmp_path):
    onnx, _, _ = onnx_api()
    proto = onnx.load(str(qdq_path))
    before = proto.SerializeToString()
    out = tmp_path / "ext" / "model.onnx"
    out.parent.mkdir()
    written = save_model(proto, out, external_data=True, size_threshold=0)
    assert written == [out, out.parent / "model.onnx.data"]
    assert proto.SerializeToString() == before                  # the model passed in is left as it was
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx", "model.onnx.data"]   # no temporary files
    stored = onnx.load(str(out), load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.EXTERNAL for t in stored.graph.initializer)
    reread = onnx.load(str(out))                                 # onnx reads the data back, value for value
    orig = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    assert {t.name: onnx.numpy_helper.to_array(t).tobytes() for t in reread.graph.initializer} == \
        {k: v.tobytes() for k, v in orig.items()}
    assert check_model(out).ok
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    loaded = load_model(out)
    kept = loaded.proto.SerializeToString()
    a, b = audit(qdq_path, {"x": x}), audit(loaded, {"x": x})   # onnxruntime finds the data file too
    assert loaded.proto.SerializeToString() == kept              # the audit leaves the model as it was
    assert a.ok and b.ok and [n.to_json() for n in a.nodes] == [n.to_json() for n in b.nodes]
    again = tmp_path / "again.onnx"                              # an external model copied through load_model
    save_model(load_model(out), again, external_data=True)
    assert check_model(again).ok and (tmp_path / "again.onnx.data").stat().st_size == (out.parent /
                                                                                         "model.onnx.data").stat().st_size
    inline = tmp_path / "inline.onnx"
    assert save_model(proto, inline) == [inline] and inline.read_bytes() == before


def test_external_data_outside_the_model_directory_is_refused(tmp_path):
    onnx, _, _ = onnx_api()
    s = onnx.TensorProto(name="s", data_type=onnx.TensorProto.FLOAT)
    set_external(s, "../evil.data", 0, 4)
    (tmp_path / "evil.data").write_bytes(np.float32(0.5).tobytes())
    (tmp_path / "m").mkdir()
    m = model([node("QuantizeLinear", ["x", "s"], ["y"])], [("x", "float", [4])], [("y", "uint8", [4])], [s], opset=13)
    path = tmp_path / "m" / "model.onnx"
    onnx.save(m, str(path))
    with pytest.raises(ModelError, match="outside the model's directory"):
        check_model(path)


def big_model(directory, scale):
    """A DequantizeLinear of a 3 GiB int8 weight kept in external data (a sparse file: no disk used)."""
    onnx, _, _ = onnx_api()
    rows, cols = 3, 1 << 30
    w = onnx.TensorProto(name="w", data_type=onnx.TensorProto.INT8, dims=[rows, cols])
    set_external(w, "weights.data", 0, rows * cols)
    with open(directory / "weights.data", "wb") as f:
        f.truncate(rows * cols)
    m = model([node("DequantizeLinear", ["w", "s", "z"], ["y"], axis=0)], [], [("y", "float", [rows, cols])],
              [w, tensor("s", np.array(scale, np.float32)), tensor("z", np.array([0, 1, -2], np.int8))], opset=21)
    path = directory / "big.onnx"
    onnx.save(m, str(path))
    return path


def test_a_model_over_2_gb(tmp_path):
    """Checked and audited statically from its structure and parameters: the weight is never read."""
    import tracemalloc

    path = big_model(tmp_path, [0.1, 0.2, 0.3])
    assert path.stat().st_size < 4096 and (tmp_path / "weights.data").stat().st_size == 3 << 30
    tracemalloc.start()
    try:
        report = check_model(path)
        static = audit(path, run=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert report.ok and report.nodes == 1, report.render()
    (n,) = static.nodes
    assert n.op_type == "DequantizeLinear" and n.risks == () and not static.ran
    assert peak < 64 << 20, peak
    (v,) = check_model(big_model(tmp_path, [0.1, np.inf, 0.3])).violations
    assert (v.rule, v.node_index, v.tensor) == ("scale", 0, "s")


def test_damaged_models_give_a_report_or_a_model_error(tmp_path):
    """Bytes of tool-made models changed at random: the checker and the static audit answer with a
    report or a quantspec error, never another exception (QUANTSPEC_SEED, QUANTSPEC_SWEEP_SIZE)."""
    from quantspec.errors import QuantSpecError

    from onnx_models import nbits_model

    seed = int(os.environ.get("QUANTSPEC_SEED", "20261126"))
    count = 150 * max(1, int(os.environ.get("QUANTSPEC_SWEEP_SIZE", "1")))
    sources = [static_quantized(tmp_path, "QDQ", True).read_bytes(),
               static_quantized(tmp_path, "QOperator", True).read_bytes(), nbits_model(tmp_path, True).read_bytes()]
    rng = np.random.default_rng(seed)
    outcomes = {"report": 0, "error": 0}
    for i in range(count):
        data = bytearray(sources[i % len(sources)])
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        try:
            check_model(bytes(data))
            audit(bytes(data), run=False)
            outcomes["report"] += 1
        except QuantSpecError:
            outcomes["error"] += 1
    assert outcomes["report"] and outcomes["error"], outcomes


@pytest.mark.parametrize("external", [True, False], ids=["external", "inline"])
def test_save_initializers_given_as_arrays(tmp_path, external):
    """A model whose large initializers come as arrays (the tensor in the model holds only name, type
    and dims): the arrays are written straight to the file, as onnx and onnxruntime then read them."""
    import ml_dtypes

    onnx, _, numpy_helper = onnx_api()
    codes = np.random.default_rng(2).integers(-8, 8, (64, 40)).astype(ml_dtypes.int4)
    stub = onnx.TensorProto(name="w", data_type=onnx.TensorProto.INT4, dims=[64, 40])
    scales = np.random.default_rng(3).uniform(0.01, 0.1, (2, 40)).astype(np.float32)
    m = model([node("DequantizeLinear", ["w", "s"], ["y"], axis=0, block_size=32)], [], [("y", "float", [64, 40])],
              [stub, onnx.TensorProto(name="s", data_type=onnx.TensorProto.FLOAT, dims=[2, 40])], opset=21, ir=10)
    path = tmp_path / "w.onnx"
    written = save_model(m, path, external_data=external, arrays={"w": codes, "s": scales})
    assert len(written) == (2 if external else 1)
    reread = onnx.load(str(path))
    values = {t.name: numpy_helper.to_array(t) for t in reread.graph.initializer}
    assert values["w"].astype(int).tolist() == codes.astype(int).tolist() and values["s"].tobytes() == scales.tobytes()
    report = audit(path)
    assert report.ok and report.nodes[0].elements == 64 * 40
    with pytest.raises(ModelError, match="must match its initializer"):
        save_model(m, tmp_path / "bad.onnx", arrays={"w": codes.astype(np.int8), "s": scales})
    with pytest.raises(ModelError, match="not an initializer"):
        save_model(m, tmp_path / "bad.onnx", arrays={"nope": scales})
