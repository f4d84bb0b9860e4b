"""``quantspec run MODEL --input FILE [--compare-litert] [--output FILE]``, in-process through
quantspec.cli.main."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T, build, run_ref
from litert_models import bias_quantized_dimension_5, litert_refuses, unterminated_string
from quantspec.cli import main
from quantspec.litert import OPS, Interpreter

R = np.random.default_rng(11)


@pytest.fixture
def conv_model(tmp_path):
    """A small CONV_2D model: one input, one output."""
    assert "CONV_2D" in OPS
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


def test_compare_litert_with_a_scalar_input(tmp_path, capsys):
    """A 0-d model input (the converter makes one for ``x * s`` with a scalar ``s``) reaches LiteRT 0-d."""
    data = build("MUL", [T((2, 3), "int8", 0.05, -3, name="x"), T((), "int8", 0.1, 4, name="s")],
                 [T((2, 3), "int8", 0.2, 1, name="y")], {})
    path = tmp_path / "mul.tflite"
    path.write_bytes(data)
    x = R.integers(-128, 128, (2, 3), dtype=np.int8)
    s = np.array(-77, np.int8)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "s.npy", s)
    assert main(["run", str(path), "--input", str(tmp_path / "x.npy"), "--input", str(tmp_path / "s.npy"),
                 "--compare-litert"]) == 0
    out = capsys.readouterr().out
    assert "compared with LiteRT (BUILTIN_REF): identical" in out and "y: identical (6 values)" in out
    assert main(["run", str(path), "--random", "5", "--compare-litert"]) == 0
    assert "identical" in capsys.readouterr().out


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


def test_an_output_file_type_it_cannot_write_is_refused_before_the_model_runs(conv_model, tmp_path, capsys):
    """--output out.txt was refused only after the whole model had run and its summary was printed."""
    assert main(["run", str(conv_model), "--random", "3", "--output", str(tmp_path / "out.txt")]) == 2
    captured = capsys.readouterr()
    assert "--output: must end in one of .npy, .npz, .safetensors" in captured.err
    assert captured.out == "" and not (tmp_path / "out.txt").exists()


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


# --- quantspec quantize|dequantize --spec litert ------------------------------------------------------

def _ref_quantize(x, scale, zp):
    data = build("QUANTIZE", [T(x.shape, "float")], [T(x.shape, "int8", scale, zp)])
    return run_ref(data, [x])[0]


def _ref_dequantize(q, scale, zp):
    data = build("DEQUANTIZE", [T(q.shape, "int8", scale, zp)], [T(q.shape, "float")])
    return run_ref(data, [q])[0]


def _half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)  # exact for the float64 products used here


def test_quantize_matches_litert_quantize(tmp_path, capsys):
    x = np.concatenate([R.normal(0, 3, 200), [0.5, -0.5, 1.5, -2.5, 1e9, -1e9]]).astype(np.float32).reshape(2, -1)
    np.save(tmp_path / "x.npy", x)
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "q.npy"), "--spec", "litert",
                 "--scale", "0.05", "--zero-point", "-7"]) == 0
    q = np.load(tmp_path / "q.npy")
    assert q.dtype == np.int8 and q.tobytes() == _ref_quantize(x, 0.05, -7).tobytes()
    assert "scale 0.0500000007, zero point -7" in capsys.readouterr().err


def test_dequantize_matches_litert_dequantize(tmp_path):
    q = R.integers(-128, 128, (3, 7), dtype=np.int8)
    np.save(tmp_path / "q.npy", q)
    assert main(["dequantize", str(tmp_path / "q.npy"), str(tmp_path / "d.npy"), "--spec", "litert",
                 "--scale", "0.0377", "--zero-point", "12"]) == 0
    assert np.load(tmp_path / "d.npy").tobytes() == _ref_dequantize(q, 0.0377, 12).tobytes()


def test_quantize_with_the_converters_activation_parameters(tmp_path):
    """--range / --from-data: scale = f32((f32(max) - f32(min)) / 255) over the range widened to 0,
    zp = round(-128 - min / scale) (notes/litert.md §4), then LiteRT QUANTIZE."""
    x = R.uniform(-1.3, 4.1, (5, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    lo, hi = np.float32(min(x.min(), 0)), np.float32(max(x.max(), 0))
    scale = np.float32((hi - lo) / np.float32(255))
    zp = int(_half_away(np.float32(-128 - np.float64(lo) / np.float64(scale))))
    expected = _ref_quantize(x, scale, zp)
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "a.npy"), "--spec", "litert", "--from-data"]) == 0
    assert np.load(tmp_path / "a.npy").tobytes() == expected.tobytes()
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "b.npy"), "--spec", "litert",
                 "--range", str(float(x.min())), str(float(x.max()))]) == 0
    assert np.load(tmp_path / "b.npy").tobytes() == expected.tobytes()


def test_quantize_weights_per_axis(tmp_path, capsys):
    """--weights: scale_c = f32(max|w_c| / 127), q = clamp(round(w * f32(1 / scale_c)), -127, 127)."""
    w = R.normal(0, 1, (4, 3, 3, 2)).astype(np.float32)
    np.save(tmp_path / "w.npy", w)
    assert main(["quantize", str(tmp_path / "w.npy"), str(tmp_path / "wq.npy"), "--spec", "litert",
                 "--weights", "--axis", "0"]) == 0
    maxabs = np.abs(w).reshape(4, -1).max(axis=1).astype(np.float64)
    scale = (maxabs / 127).astype(np.float32)
    inv = (1.0 / scale.astype(np.float64)).astype(np.float32)
    expected = np.clip(_half_away((w * inv[:, None, None, None]).astype(np.float64)), -127, 127).astype(np.int8)
    assert np.load(tmp_path / "wq.npy").tobytes() == expected.tobytes()
    assert "4 scales along dimension 0" in capsys.readouterr().err


def test_elementwise_needs_parameters(tmp_path, capsys):
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "q.npy"), "--spec", "litert"]) == 2
    assert "--scale: is required" in capsys.readouterr().err
    assert main(["dequantize", str(tmp_path / "x.npy"), str(tmp_path / "q.npy"), "--spec", "litert"]) == 2
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "q.npy"), "--spec", "litert",
                 "--scale", "abc"]) == 2


@pytest.mark.parametrize("direction", ["quantize", "dequantize"])
def test_a_zero_point_beyond_int64_is_a_clear_error(tmp_path, capsys, direction):
    """--zero-point 99999999999999999999999 died of an OverflowError (a traceback, exit 1) when it
    became the int64 array QuantParams holds."""
    np.save(tmp_path / "x.npy", np.zeros(3, np.float32 if direction == "quantize" else np.int8))
    for zp in ("99999999999999999999999", "0,-9223372036854775809"):
        assert main([direction, str(tmp_path / "x.npy"), str(tmp_path / "q.npy"), "--spec", "litert",
                     "--scale", "0.1" if "," not in zp else "0.1,0.2", "--zero-point", zp]) == 2
        err = capsys.readouterr().err
        assert "--zero-point: must fit in int64" in err and zp.split(",")[-1] in err
    assert not (tmp_path / "q.npy").exists()


def test_a_small_model_runs_without_loading_numba(tmp_path, monkeypatch):
    """``quantspec run`` on a small model takes the numpy reference kernels (numba's import and the
    cached kernels' load cost more than the whole run), with the fast kernels' bytes."""
    import os
    import subprocess
    import sys
    from importlib.resources import files

    model = str(files("quantspec") / "data" / "bench_cnn.tflite")
    code = ("import sys; from quantspec.cli import main; "
            f"rc = main(['run', r'{model}', '--random', '3', '--output', r'{tmp_path / 'y.npz'}']); "
            "print(rc, 'numba' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k != "QUANTSPEC_FAST"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split()[-2:] == ["0", "False"]
    monkeypatch.setenv("QUANTSPEC_FAST", "1")                   # in-process, on the fast kernels
    assert main(["run", model, "--random", "3", "--output", str(tmp_path / "z.npz")]) == 0
    a, b = np.load(tmp_path / "y.npz"), np.load(tmp_path / "z.npz")
    assert a.files == b.files and all(a[k].tobytes() == b[k].tobytes() for k in a.files)


@pytest.mark.filterwarnings("error")
def test_from_data_on_an_all_nan_tensor_is_a_clear_error(tmp_path, capsys):
    """--from-data over a tensor of NaNs printed numpy's 'All-NaN slice encountered' warning, then an
    error about 'min' that named neither the option nor the tensor.  NaNs among other values are
    left out of the range, as before."""
    np.save(tmp_path / "n.npy", np.full(3, np.nan, np.float32))
    assert main(["quantize", str(tmp_path / "n.npy"), str(tmp_path / "q.npy"), "--spec", "litert", "--from-data"]) == 2
    err = capsys.readouterr().err
    assert "--from-data: needs a tensor with a value that is not NaN (got 'n')" in err and "Warning" not in err
    np.save(tmp_path / "m.npy", np.array([np.nan, 1.0, -2.0], np.float32))
    assert main(["quantize", str(tmp_path / "m.npy"), str(tmp_path / "q.npy"), "--spec", "litert", "--from-data"]) == 0
    import quantspec.litert as ql
    want = ql.quantize(np.load(tmp_path / "m.npy"), ql.activation_params(-2.0, 1.0))
    assert np.load(tmp_path / "q.npy").tobytes() == want.tobytes()


def test_random_without_a_seed_is_seed_0(capsys):
    """``quantspec run MODEL --random`` takes seed 0 (the value may be left out)."""
    from importlib import resources

    path = str(resources.files("quantspec") / "data" / "cnn.tflite")
    assert main(["run", path, "--random"]) == 0
    bare = capsys.readouterr().out
    assert main(["run", path, "--random", "0"]) == 0
    assert capsys.readouterr().out == bare and "Identity" in bare
    assert main(["run", path, "--random", "1"]) == 0
    assert capsys.readouterr().out != bare


@pytest.mark.parametrize("make", [unterminated_string, bias_quantized_dimension_5],
                         ids=["verifier", "quantized_dimension"])
def test_compare_litert_on_a_model_litert_refuses_exits_2(make, tmp_path, capsys, monkeypatch):
    """Found by fuzzing the .tflite reader: LiteRT's refusal is one line naming it and its reason (the
    reader now refuses the first model itself, so the LiteRT call is reached here by lending the run
    the unchecked model)."""
    data = make()
    reason = litert_refuses(data)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    if make is unterminated_string:       # reach the LiteRT call with a model quantspec would refuse
        from quantspec.litert import _verify
        monkeypatch.setattr(_verify, "verify", lambda buf: None)
    assert main(["run", str(path), "--random", "0", "--compare-litert"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "LiteRT refused the model" in captured.err and reason.split(".")[0] in captured.err


def test_run_random_inputs_larger_than_memory(tmp_path, capsys):
    """`quantspec run MODEL --random SEED` on a model whose input declares more values than memory
    holds (a damaged shape, 2^31 - 1 rows): exit 2 with one line naming --random, not numpy's
    MemoryError as a traceback (found by a 20000-example fuzz run of the command line)."""
    from litert_build import T, build

    from quantspec.cli import main

    from quantspec._semantics import arrays

    shape = (2 ** 31 - 1, 12, 12, 3)
    model = build("QUANTIZE", [T(shape, "float32", name="x")], [T(shape, "int8", 0.05, 0, name="y")])
    path = tmp_path / "huge.tflite"
    path.write_bytes(model)
    assert main(["run", str(path), "--random", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    # the model's tensors alone exceed memory: refused when the interpreter is made
    assert len(err) == 1 and err[0].startswith("quantspec run: error:") and "machine's memory" in err[0], err
    # tensors that fit, random values (float64, 8 bytes a value, against the model's 4 + 1) that do not
    shape = (4000,)
    model = build("QUANTIZE", [T(shape, "float32", name="x")], [T(shape, "int8", 0.05, 0, name="y")])
    path.write_bytes(model)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(arrays, "_MEMORY_LIMIT", [6 * 4000])
        assert main(["run", str(path), "--random", "7"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("quantspec run: error:") and "--random" in err[0] and "elements" in err[0], err
