"""`quantspec calibrate MODEL.onnx DATA.npz` and `quantspec convert MODEL.onnx OUT.onnx --static`, run
in-process through quantspec.cli.main.

calibrate: every tensor's range equals onnxruntime's calibrator's (create_calibrator + collect_data +
compute_data, as quantize_static runs it), and the zero point and scale equal onnxruntime's own
``compute_scale_zp`` on that range.  convert --static: the written model's initializers and nodes
equal those of onnxruntime's quantize_static on the same data (an installation without
quantspec.onnxmodels.quantize_static, simulated, fails with exit 2 and one line).  Bad input: exit 2,
one line on stderr, no traceback.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from refs import require

from quantspec.cli import main
from test_onnx_calibration import Reader, cnn_data, cnn_model, ort_ranges, transformer_model, ids_data


@pytest.fixture
def files(tmp_path):
    onnx = require("onnx")
    x = cnn_data()
    onnx.save(cnn_model(), str(tmp_path / "m.onnx"))
    np.savez(tmp_path / "d.npz", x=x)
    np.savez(tmp_path / "unnamed.npz", x)
    return tmp_path, x


def _ort_params(td, qtype: str, symmetric: bool):
    from onnx import TensorProto
    from onnxruntime.quantization.quant_utils import compute_scale_zp, get_qmin_qmax_for_qType

    t = {"uint8": TensorProto.UINT8, "int8": TensorProto.INT8, "uint16": TensorProto.UINT16,
         "int16": TensorProto.INT16}[qtype]
    qmin, qmax = get_qmin_qmax_for_qType(t, symmetric=symmetric)
    return compute_scale_zp(td.range_value[0], td.range_value[1], qmin, qmax, symmetric=symmetric)


def _f32(v) -> float:
    return float(np.ravel(np.asarray(v, np.float32))[0])


@pytest.mark.parametrize("method,qtype,symmetric", [("minmax", "uint8", False), ("entropy", "int8", True),
                                                     ("percentile", "int8", False), ("distribution", "uint16", False)])
def test_calibrate_json_equals_onnxruntime(files, capsys, method, qtype, symmetric):
    require("onnxruntime")
    d, x = files
    argv = ["calibrate", str(d / "m.onnx"), str(d / "d.npz"), "--method", method, "--activation-type", qtype,
            "--json"] + (["--symmetric"] if symmetric else [])
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == len(x) and out["methods"] == [method]
    import onnx

    want = ort_ranges(onnx.load(str(d / "m.onnx")), [{"x": a} for a in x], method)
    assert set(out["tensors"]) == set(want.keys())
    for name in want.keys():
        got = out["tensors"][name][method]
        td = want[name]
        assert got["lowest"] == _f32(td.range_value[0]) and got["highest"] == _f32(td.range_value[1]), name
        zp, scale = _ort_params(td, qtype, symmetric)
        assert got["zero_point"] == int(np.ravel(zp)[0]) and got["scale"] == _f32(scale), (name, got, zp, scale)


def test_calibrate_all_methods_text(files, capsys):
    d, x = files
    assert main(["calibrate", str(d / "m.onnx"), str(d / "unnamed.npz"), "--method", "all"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("quantspec calibrate:") and f"{len(x)} samples" in text[0]
    assert text[1].split()[:4] == ["tensor", "method", "lowest", "highest"]
    rows = [line.split() for line in text[2:]]
    assert len(rows) == 11 * 4 and {r[1] for r in rows} == {"minmax", "entropy", "percentile", "distribution"}


def test_calibrate_transformer_json(tmp_path, capsys):
    onnx = require("onnx")
    onnx.save(transformer_model(), str(tmp_path / "t.onnx"))
    ids = ids_data()
    np.savez(tmp_path / "ids.npz", ids=ids)
    assert main(["calibrate", str(tmp_path / "t.onnx"), str(tmp_path / "ids.npz"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = ort_ranges(transformer_model(), [{"ids": a} for a in ids], "minmax")
    assert set(out["tensors"]) == set(want.keys())


def _one_error_line(capsys, *words):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    for w in words:
        assert w in err[0], err
    return err[0]


@pytest.mark.parametrize("argv,words", [
    (["calibrate", "{d}/m.onnx", "{d}/missing.npz"], ["DATA.npz", "exists"]),
    (["calibrate", "{d}/m.onnx", "{d}/m.onnx"], ["DATA.npz", ".npz"]),
    (["calibrate", "{d}/m.onnx", "{d}/wrong.npz"], ["DATA.npz", "'y'"]),
    (["calibrate", "{d}/m.onnx", "{d}/plain.npy"], ["DATA.npz", "not a single .npy array"]),
    (["calibrate", "{d}/nosuch.onnx", "{d}/d.npz"], ["model", "exists"]),
    (["calibrate", "{d}/m.onnx", "{d}/d64.npz"], ["dtype", "float64"]),
    (["convert", "{d}/m.onnx", "{d}/o.onnx", "--static", "--scheme", "int8", "--calibration", "{d}/d.npz"],
     ["--static", "--scheme"]),
    (["convert", "{d}/m.onnx", "{d}/o.onnx", "--static", "--format", "qdq", "--calibration", "{d}/d.npz"],
     ["--static", "--format"]),
    (["convert", "{d}/m.onnx", "{d}/o.onnx", "--static"], ["--calibration", "required"]),
    (["convert", "{d}/m.onnx", "{d}/o.onnx", "--scheme", "int8", "--per-channel"], ["--per-channel", "--static"]),
    (["convert", "{d}/m.onnx", "{d}/o.onnx", "--static", "--calibration", "{d}/wrong.npz"], ["DATA.npz"]),
])
def test_bad_input_exit_2(files, capsys, argv, words):
    d, x = files
    np.savez(d / "wrong.npz", y=x)
    np.savez(d / "d64.npz", x=x.astype(np.float64))
    np.save(d / "plain.npy", x)
    assert main([a.format(d=d) for a in argv]) == 2
    _one_error_line(capsys, *words)
    assert not (d / "o.onnx").exists()


def test_calibrate_usage_errors(files, capsys):
    d, _ = files
    assert main(["calibrate", str(d / "m.onnx")]) == 2
    assert main(["calibrate", str(d / "m.onnx"), str(d / "d.npz"), "--method", "kl"]) == 2
    assert main(["calibrate", "--help"]) == 0
    assert "DATA.npz" in capsys.readouterr().out


def _model_bytes(path):
    """(initializer name -> (dtype, dims, bytes), node (op type, inputs, outputs) list) of a model."""
    import onnx
    from onnx import numpy_helper

    m = onnx.load(str(path))
    inits = {}
    for t in m.graph.initializer:
        a = numpy_helper.to_array(t)
        inits[t.name] = (t.data_type, tuple(t.dims), a.tobytes())
    nodes = sorted((n.op_type, tuple(n.input), tuple(n.output)) for n in m.graph.node)
    return inits, nodes


@pytest.mark.parametrize("fmt,per_channel,method,more", [
    ("qdq", False, "minmax", []), ("qoperator", True, "entropy", []), ("qdq", True, "percentile", []),
    ("qoperator", False, "distribution", ["--reduce-range"]),
    ("qdq", False, "minmax", ["--activation-type", "int8", "--reduce-range"]),
    ("qdq", True, "entropy", ["--weight-type", "uint8"]),
])
def test_convert_static_equals_onnxruntime(files, capsys, fmt, per_channel, method, more):
    d, x = files
    argv = ["convert", str(d / "m.onnx"), str(d / "o.onnx"), "--static", "--calibration", str(d / "d.npz"),
            "--quant-format", fmt, "--calibrate-method", method] + (["--per-channel"] if per_channel else []) + more
    require("onnxruntime")
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    types = {"uint8": QuantType.QUInt8, "int8": QuantType.QInt8}
    act = more[more.index("--activation-type") + 1] if "--activation-type" in more else "uint8"
    wt = more[more.index("--weight-type") + 1] if "--weight-type" in more else "int8"
    assert main(argv) == 0
    assert "wrote" in capsys.readouterr().out
    quantize_static(str(d / "m.onnx"), str(d / "ort.onnx"), Reader([{"x": a} for a in x]),
                    quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator, per_channel=per_channel,
                    reduce_range="--reduce-range" in more, activation_type=types[act], weight_type=types[wt],
                    calibrate_method=getattr(CalibrationMethod, {"minmax": "MinMax", "entropy": "Entropy",
                                                                  "percentile": "Percentile",
                                                                  "distribution": "Distribution"}[method]))
    got_inits, got_nodes = _model_bytes(d / "o.onnx")
    want_inits, want_nodes = _model_bytes(d / "ort.onnx")
    assert got_inits == want_inits and got_nodes == want_nodes


def test_convert_static_json_report(files, capsys):
    d, _ = files
    assert main(["convert", str(d / "m.onnx"), str(d / "o.onnx"), "--static", "--calibration",
                 str(d / "unnamed.npz"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["quant_format"].lower() == "qdq" and report["output"] == str(d / "o.onnx")


def test_options_before_the_model_route_to_onnx(files, capsys):
    """quantspec.cli finds MODEL.onnx behind the static options' values (an ONNX source: the ONNX converter)."""
    d, _ = files
    code = main(["convert", "--static", "--calibration", str(d / "d.npz"), "--quant-format", "qdq",
                 str(d / "m.onnx"), str(d / "o.onnx")])
    assert code == 0 and (d / "o.onnx").exists()


def test_without_quantize_static_a_clear_error(files, capsys, monkeypatch):
    """An installation without quantspec.onnxmodels.quantize_static: exit 2, one line naming it."""
    import quantspec.onnxmodels as om

    monkeypatch.delitem(om._CONVERTER, "quantize_static")
    monkeypatch.delattr(om, "quantize_static", raising=False)
    d, _ = files
    assert main(["convert", str(d / "m.onnx"), str(d / "o.onnx"), "--static", "--calibration", str(d / "d.npz")]) == 2
    _one_error_line(capsys, "--static", "quantize_static")
    assert not (d / "o.onnx").exists()


def test_calibrate_damaged_inputs_never_trace(files, capsys):
    """Seeded damaged models and data files: exit 0, or 2 with one error line; never a traceback."""
    d, x = files
    rng = np.random.default_rng(int(__import__("os").environ.get("QUANTSPEC_CALIB_SEED", "0")))
    good = (d / "m.onnx").read_bytes()
    (d / "cut.onnx").write_bytes(good[: len(good) // 2])
    (d / "noise.onnx").write_bytes(rng.integers(0, 256, 300, dtype=np.uint8).tobytes())
    datas = {
        "nan": {"x": np.where(rng.random(x.shape) < 0.01, np.nan, x).astype(np.float32)},
        "inf": {"x": np.where(rng.random(x.shape) < 0.01, np.inf, x).astype(np.float32)},
        "empty": {"x": x[:0]},
        "scalar": {"x": np.float32(1.0)},
        "int": {"x": x.astype(np.int32)},
        "two": {"x": x, "z": x},
        "shape": {"x": x[..., :5]},
        "huge": {"x": np.where(x > 2, np.float32(3e38), x).astype(np.float32)},
        "zeros": {"x": np.zeros_like(x)},
    }
    for name, arrays in datas.items():
        np.savez(d / f"{name}.npz", **arrays)
    np.save(d / "plain.npy", x)
    models = ["m.onnx", "cut.onnx", "noise.onnx", "d.npz"]
    data_files = [f"{n}.npz" for n in datas] + ["plain.npy", "d.npz"]
    methods = ["minmax", "entropy", "percentile", "distribution", "all"]
    for _ in range(int(__import__("os").environ.get("QUANTSPEC_CALIB_FUZZ", "12"))):
        argv = ["calibrate", str(d / rng.choice(models)), str(d / rng.choice(data_files)),
                "--method", str(rng.choice(methods))]
        if rng.random() < 0.3:
            argv.append("--json")
        if rng.random() < 0.3:
            argv += ["--activation-type", str(rng.choice(["int8", "uint16", "int16"]))]
        code = main(argv)
        captured = capsys.readouterr()
        assert code in (0, 2), argv
        assert "Traceback" not in captured.err, (argv, captured.err)
        if code == 2:
            lines = [line for line in captured.err.splitlines() if line.strip()]
            assert len(lines) == 1 and lines[0].startswith("quantspec calibrate: error:"), (argv, captured.err)
