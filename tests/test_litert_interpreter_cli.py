"""``quantspec run MODEL --input FILE [--compare-litert] [--output FILE]``, in-process through
quantspec.cli.main."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T, build, run_ref
from quantspec.cli import main
from quantspec.litert import OPS, Interpreter

R = np.random.default_rng(11)


@pytest.fixture
def conv_model(tmp_path):
    """A small CONV_2D model: one input, one output."""
    if "CONV_2D" not in OPS:
        pytest.skip("kernels not merged yet: CONV_2D")
    sw = np.array([0.01, 0.02], np.float32)
    data = build("CONV_2D", [T((1, 4, 4, 3), "int8", 0.05, 2, name="image"),
                             T((2, 3, 3, 3), "int8", sw, 0, 0, R.integers(-127, 128, (2, 3, 3, 3), dtype=np.int8)),
                             T((2,), "int32", (np.float64(np.float32(0.05)) * sw.astype(np.float64)).astype(np.float32),
                               0, 0, np.array([100, -100], np.int32))],
                 [T((1, 4, 4, 2), "int8", 0.1, -1, name="features")], {"padding": "SAME", "stride_w": 1, "stride_h": 1})
    path = tmp_path / "conv.tflite"
    path.write_bytes(data)
    return path


def test_run_prints_a_summary(conv_model, tmp_path, capsys):
    x = R.integers(-128, 128, (1, 4, 4, 3), dtype=np.int8)
    np.save(tmp_path / "x.npy", x)
    assert main(["run", str(conv_model), "--input", str(tmp_path / "x.npy")]) == 0
    out = capsys.readouterr().out
    (y,) = Interpreter(str(conv_model)).run([x])
    assert "features: int8[1, 4, 4, 2]" in out and f"min {y.min()} max {y.max()}" in out


def test_compare_litert_identical_and_output_file(conv_model, tmp_path, capsys):
    x = R.integers(-128, 128, (1, 4, 4, 3), dtype=np.int8)
    np.savez(tmp_path / "in.npz", image=x)
    out_file = tmp_path / "y.npy"
    assert main(["run", str(conv_model), "--input", str(tmp_path / "in.npz"), "--compare-litert",
                 "--output", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "compared with LiteRT (BUILTIN_REF): identical" in out and "features: identical (32 values)" in out
    y = np.load(out_file)
    assert y.tobytes() == run_ref(conv_model.read_bytes(), [x])[0].tobytes()


def test_compare_litert_reports_where_and_by_how_much(conv_model, tmp_path, capsys, monkeypatch):
    """A stand-in LiteRT that differs in two places: the report says where and by how much."""
    import quantspec.litert._cli as cli

    real = cli.run_litert_reference

    def off_by_some(path, inputs):
        (y,) = real(path, inputs)
        y = y.copy()
        y[0, 1, 2, 1] = np.int8(int(y[0, 1, 2, 1]) ^ 1)
        y[0, 3, 3, 0] = np.int8(-128 if y[0, 3, 3, 0] > 0 else 127)
        return [y]

    monkeypatch.setattr(cli, "run_litert_reference", off_by_some)
    assert main(["run", str(conv_model), "--random", "3", "--compare-litert"]) == 1
    out = capsys.readouterr().out
    assert "DIFFERENT" in out and "features: 2 of 32 values differ" in out
    assert "at (0, 1, 2, 1)" in out and "at (0, 3, 3, 0)" in out and "largest difference" in out


def test_bad_inputs_exit_2(conv_model, tmp_path, capsys):
    assert main(["run", str(conv_model)]) == 2
    assert "--input: is required" in capsys.readouterr().err
    np.save(tmp_path / "wrong.npy", np.zeros((1, 4, 4), np.int8))
    assert main(["run", str(conv_model), "--input", str(tmp_path / "wrong.npy")]) == 2
    assert "must have shape [1, 4, 4, 3]" in capsys.readouterr().err
    np.save(tmp_path / "f.npy", np.zeros((1, 4, 4, 3), np.float32))
    assert main(["run", str(conv_model), "--input", str(tmp_path / "f.npy")]) == 2
    assert "must have dtype int8" in capsys.readouterr().err
    np.savez(tmp_path / "named.npz", nope=np.zeros((1, 4, 4, 3), np.int8))
    assert main(["run", str(conv_model), "--input", str(tmp_path / "named.npz")]) == 2
    assert "names no input" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.tflite"), "--random", "1"]) == 2


def test_unsupported_operator_exits_2(tmp_path, capsys):
    data = build("CONV_2D", [T((1, 2, 2, 1), "int8", 0.5, 0), T((1, 1, 1, 1), "int8", 0.5, 0, 0,
                                                               np.ones((1, 1, 1, 1), np.int8)), None],
                 [T((1, 2, 2, 1), "int8", 0.5, 0)], {})
    from litert_models import edit, schema

    def to_custom(obj):
        obj.operatorCodes[0].builtinCode = obj.operatorCodes[0].deprecatedBuiltinCode = schema().BuiltinOperator.CUSTOM
        obj.operatorCodes[0].customCode = b"Mystery"

    path = tmp_path / "custom.tflite"
    path.write_bytes(edit(data, to_custom))
    assert main(["run", str(path), "--random", "0"]) == 2
    err = capsys.readouterr().err
    assert "no kernel for" in err and "CUSTOM:Mystery" in err
