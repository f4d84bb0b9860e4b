"""`quantspec quantize|dequantize --spec onnx`, run in-process through quantspec.cli.main; also the
warnings and the `--spec` error these commands give with the other specs."""

import ml_dtypes
import numpy as np
import pytest

import quantspec
from quantspec.cli import main
from quantspec._tensorfiles.tensorio import read_tensors


@pytest.fixture
def weights(tmp_path):
    w = np.random.default_rng(0).normal(size=(4, 10)).astype(np.float32)
    np.save(tmp_path / "w.npy", w)
    return w


def test_quantize_per_axis_int4_npz_and_back(tmp_path, weights, capsys):
    assert main(["quantize", str(tmp_path / "w.npy"), str(tmp_path / "q.npz"), "--spec", "onnx", "--scale",
                 "0.1,0.2,0.3,0.4", "--axis", "0", "--output-dtype", "int4"]) == 0
    q = read_tensors(tmp_path / "q.npz")["w"]
    s = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    want = quantspec.onnx.quantize_linear(weights, s, axis=0, output_dtype="int4")
    assert q.dtype == ml_dtypes.int4 and q.tobytes() == want.tobytes()
    assert main(["dequantize", str(tmp_path / "q.npz"), str(tmp_path / "d.safetensors"), "--spec", "onnx",
                 "--scale", "0.1,0.2,0.3,0.4", "--axis", "0"]) == 0
    d = read_tensors(tmp_path / "d.safetensors")["w"]
    assert d.tobytes() == quantspec.onnx.dequantize_linear(want, s, axis=0).tobytes()


def test_blocked_scale_from_file_and_every_flag(tmp_path, weights):
    scale = np.full((4, 3), 0.05, np.float16)
    np.save(tmp_path / "s.npy", scale)
    assert main(["quantize", str(tmp_path / "w.npy"), str(tmp_path / "q.npy"), "--spec", "onnx", "--scale",
                 f"@{tmp_path / 's.npy'}", "--axis", "-1", "--block-size", "4", "--zero-point", "3",
                 "--output-dtype", "uint8", "--precision", "float", "--opset", "23", "--compat", "reference"]) == 0
    got = np.load(tmp_path / "q.npy")
    want = quantspec.onnx.quantize_linear(weights, scale, np.uint8(3), axis=-1, block_size=4, precision="float",
                                          opset=23, compat="reference")
    assert got.dtype == np.uint8 and got.tobytes() == want.tobytes()


def test_float8_saturate_flag(tmp_path):
    np.save(tmp_path / "x.npy", np.array([1000.0, -1e9], np.float32))
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "y.npz"), "--spec", "onnx", "--scale", "1",
                 "--output-dtype", "float8e4m3fn", "--saturate", "0"]) == 0
    y = read_tensors(tmp_path / "y.npz")["x"]
    assert np.isnan(y.astype(np.float32)).all()


def test_npy_output_of_int4_tells_the_user(tmp_path, weights, capsys):
    assert main(["quantize", str(tmp_path / "w.npy"), str(tmp_path / "q.npy"), "--spec", "onnx", "--scale", "0.3",
                 "--output-dtype", "int4"]) == 0
    assert "cannot record int4; stored as int8 values" in capsys.readouterr().err
    assert main(["dequantize", str(tmp_path / "q.npy"), str(tmp_path / "d.npy"), "--spec", "onnx", "--scale", "0.3",
                 "--input-dtype", "int4"]) == 0
    assert np.load(tmp_path / "d.npy").dtype == np.float32


@pytest.mark.parametrize("argv,fragment", [
    (["--scale", "0.1", "--axis", "3", "--block-size", "2"], "block_size: must be 0 when the scale is a scalar"),
    (["--scale", "abc"], "--scale: must be a number"),
    (["--scale", "1", "--zero-point", "300"], "--zero-point: must lie in [0, 255] for uint8"),
    (["--scale", "1", "--output-dtype", "int3"], "not a type name quantspec knows"),
    (["--scale", "1", "--opset", "9"], "first exist in opset 10"),
])
def test_bad_flags_exit_2_with_a_message(tmp_path, weights, capsys, argv, fragment):
    assert main(["quantize", str(tmp_path / "w.npy"), str(tmp_path / "o.npy"), "--spec", "onnx", *argv]) == 2
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "o.npy").exists()


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit) as e:
        main(["quantize", "--spec", "onnx", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for flag in ["--scale", "--scale-dtype", "--zero-point", "--output-dtype", "--saturate", "--precision",
                 "--axis", "--block-size", "--opset", "--compat", "--tensor"]:
        assert flag in text
    assert main([]) == 2 and main(["--help"]) == 0 and main(["nosuch"]) == 2


def test_a_small_job_runs_without_loading_numba(tmp_path):
    """A one-shot quantize of a small tensor takes the numpy reference path (numba's import and the
    cached kernels' load cost ~0.6 s, more than the job), with the fast path's bytes."""
    import subprocess
    import sys

    from refs import require_fast

    require_fast()
    x = np.random.default_rng(1).normal(0, 3, (64, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    code = ("import sys; from quantspec.cli import main; "
            f"rc = main(['quantize', r'{tmp_path / 'x.npy'}', r'{tmp_path / 'q.npz'}', '--spec', 'onnx', "
            "'--scale', '0.02', '--output-dtype', 'int4']); "
            "print(rc, 'numba' in sys.modules)")
    env = {k: v for k, v in __import__("os").environ.items() if k != "QUANTSPEC_FAST"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["0", "False"]
    want = quantspec.onnx.fast.quantize(quantspec.onnx.plan_quantize(x, np.float32(0.02), None, output_dtype="int4"),
                                        x)                   # the fast kernels' bytes
    q = read_tensors(tmp_path / "q.npz")["x"]
    assert q.dtype == want.dtype and q.tobytes() == want.tobytes()


def test_reference_only_is_scoped_and_prefer_reference_respects_the_user():
    from quantspec._fastpath import jit

    before = jit.enabled()
    with jit.reference_only():
        assert not jit.enabled()
        with jit.reference_only():
            assert not jit.enabled()
        assert not jit.enabled()
    assert jit.enabled() == before
    assert not jit.prefer_reference(jit.CLI_FAST_FROM)            # large: the fast path
    import sys
    if "numba" in sys.modules:
        assert not jit.prefer_reference(10)                        # already paid for: use it


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("spec", ["onnx", "litert"])
def test_a_scale_beyond_float32_is_a_clear_error_without_warnings(tmp_path, capsys, spec):
    np.save(tmp_path / "a.npy", np.linspace(-1, 1, 8, dtype=np.float32))
    assert main(["quantize", str(tmp_path / "a.npy"), str(tmp_path / "o.npy"), "--spec", spec, "--scale", "1e50"]) == 2
    err = capsys.readouterr().err
    assert "--scale" in err or "scale" in err
    assert "1e+50" in err and "Warning" not in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["1e400", "-1e400", "0.5,1e999"])
def test_a_number_beyond_float64_is_refused_not_read_as_infinity(tmp_path, capsys, value):
    """Python reads 1e400 as inf: it was accepted as an infinite scale, while 1e39 is refused."""
    np.save(tmp_path / "a.npy", np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    flags = ["--axis", "0"] if "," in value else []
    assert main(["quantize", str(tmp_path / "a.npy"), str(tmp_path / "o.npy"), "--spec", "onnx", f"--scale={value}",
                 *flags]) == 2
    assert "--scale: must lie within the float64 range" in capsys.readouterr().err
    assert not (tmp_path / "o.npy").exists()
    # an infinity written as one is still a value the operator defines (x / inf)
    assert main(["quantize", str(tmp_path / "a.npy"), str(tmp_path / "o.npy"), "--spec", "onnx", "--scale", "inf"]) == 0
    x = np.load(tmp_path / "a.npy")
    assert np.load(tmp_path / "o.npy").tobytes() == quantspec.onnx.quantize_linear(x, np.float32(np.inf)).tobytes()


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("value", ["1e39", "0", "1e-50", "0.5,1e39"])
def test_a_float8e8m0_scale_it_cannot_hold_is_a_clear_error(tmp_path, capsys, value):
    """float8e8m0 has no infinity and no zero: 1e39 (beyond 2^127) and 0 became a NaN scale silently,
    where a value beyond another scale type's range is refused."""
    np.save(tmp_path / "a.npy", np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4))
    flags = ["--axis", "0"] if "," in value else []
    assert main(["quantize", str(tmp_path / "a.npy"), str(tmp_path / "o.npy"), "--spec", "onnx", "--scale", value,
                 "--scale-dtype", "float8e8m0", *flags]) == 2
    err = capsys.readouterr().err
    assert "--scale: must lie within the float8e8m0 range (a finite value that becomes NaN)" in err
    assert not (tmp_path / "o.npy").exists()
    # a power of two within range is exact
    assert main(["quantize", str(tmp_path / "a.npy"), str(tmp_path / "o.npy"), "--spec", "onnx", "--scale", "0.25",
                 "--scale-dtype", "float8e8m0"]) == 0
    x = np.load(tmp_path / "a.npy")
    assert np.load(tmp_path / "o.npy").tobytes() == quantspec.onnx.quantize_linear(
        x, np.array(0.25, ml_dtypes.float8_e8m0fnu)).tobytes()


def test_at_file_parameters_in_the_npy_form_quantspec_writes(tmp_path):
    """quantspec writes a float8 or bfloat16 array to .npy as its uint8 / uint16 bit patterns.  As an
    @FILE zero point or scale of that type it is read back as that type (as float4 / float6 / int4
    ones already were); a float8 zero point was refused as 'uint8'."""
    from quantspec._tensorfiles.tensorio import write_tensors
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    np.save(tmp_path / "x.npy", x)
    zp = np.zeros(3, ml_dtypes.float8_e4m3fn)
    scale = np.array([0.5, 0.25, 1.5], ml_dtypes.bfloat16)
    write_tensors(tmp_path / "z.npy", {"z": zp})
    write_tensors(tmp_path / "s.npy", {"s": scale})
    assert np.load(tmp_path / "z.npy").dtype == np.uint8 and np.load(tmp_path / "s.npy").dtype == np.uint16
    assert main(["quantize", str(tmp_path / "x.npy"), str(tmp_path / "q.npz"), "--spec", "onnx", "--scale",
                 f"@{tmp_path / 's.npy'}", "--scale-dtype", "bfloat16", "--zero-point", f"@{tmp_path / 'z.npy'}",
                 "--output-dtype", "float8e4m3fn", "--axis", "0"]) == 0
    want = quantspec.onnx.quantize_linear(x, scale, zp, axis=0)
    got = read_tensors(tmp_path / "q.npz")["x"]
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    write_tensors(tmp_path / "q.npy", {"q": want})
    assert main(["dequantize", str(tmp_path / "q.npy"), str(tmp_path / "d.npz"), "--spec", "onnx", "--scale",
                 f"@{tmp_path / 's.npy'}", "--scale-dtype", "bfloat16", "--zero-point", f"@{tmp_path / 'z.npy'}",
                 "--input-dtype", "float8e4m3fn", "--axis", "0", "--output-dtype", "float"]) == 0
    back = read_tensors(tmp_path / "d.npz")["q"]
    assert back.tobytes() == quantspec.onnx.dequantize_linear(want, scale, zp, axis=0, output_dtype="float").tobytes()


# --- the command line's silent traps get a one-line warning ---------------------------------------

def _cli(tmp_path, capsys, *args, x=None):
    x = np.array([[-1.0, -0.5, 0.25], [0.5, 1.0, 2.0]], np.float32) if x is None else x
    np.save(tmp_path / "x.npy", x)
    code = main([args[0], str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), *args[1:]])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if "warning" in line]


WARNINGS = {
    "onnx scale 0": (("quantize", "--spec", "onnx", "--scale", "0", "--output-dtype", "int8"), "scale of 0"),
    "onnx scale 0 per-axis": (("quantize", "--spec", "onnx", "--scale", "0.1,0,0.2", "--axis", "1",
                               "--output-dtype", "int8"), "scale of 0"),
    "onnx negative scale": (("quantize", "--spec", "onnx", "--scale", "-0.1", "--output-dtype", "int8"),
                            "negative scale"),
    "onnx dequantize scale 0": (("dequantize", "--spec", "onnx", "--scale", "0"), "scale of 0"),
    "onnx axis with a per-tensor scale": (("quantize", "--spec", "onnx", "--scale", "0.1", "--axis", "0",
                                           "--output-dtype", "int8"), "--axis is ignored"),
    "onnx default uint8": (("quantize", "--spec", "onnx", "--scale", "0.1"), "uint8"),
    "litert axis with a per-tensor scale": (("quantize", "--spec", "litert", "--scale", "0.1", "--axis", "1"),
                                            "--axis is ignored"),
}


@pytest.mark.parametrize("case", sorted(WARNINGS))
def test_cli_traps_warn(case, tmp_path, capsys):
    """Found by fuzzing the command line: its silent traps (a scale of 0, a negative scale, an --axis
    that a per-tensor scale ignores, the default uint8 output) get a one-line warning."""
    args, words = WARNINGS[case]
    x = None
    if args[0] == "dequantize":
        x = np.array([[-3, 5, 7]], np.int8)
    code, warnings = _cli(tmp_path, capsys, *args, x=x)
    assert code == 0
    assert len(warnings) == 1 and words in warnings[0], warnings
    assert warnings[0].startswith(f"quantspec {args[0]}: warning: ")


@pytest.mark.parametrize("args", [
    ("quantize", "--spec", "onnx", "--scale", "0.1", "--output-dtype", "int8"),
    ("quantize", "--spec", "onnx", "--scale", "0.1", "--output-dtype", "uint8"),
    ("quantize", "--spec", "onnx", "--scale", "0.1", "--zero-point", "128"),
    ("quantize", "--spec", "onnx", "--scale", "0.1,0.2,0.3", "--axis", "1", "--output-dtype", "int8"),
    ("quantize", "--spec", "litert", "--scale", "0.1"),
    ("quantize", "--spec", "litert", "--scale", "0.1,0.2,0.3", "--axis", "1"),
], ids=str)
def test_no_warning_without_a_trap(args, tmp_path, capsys):
    """Found by fuzzing the command line (its silent traps get a one-line warning): no warning where
    there is no trap."""
    code, warnings = _cli(tmp_path, capsys, *args)
    assert code == 0 and warnings == []


def test_an_invalid_spec_names_the_command(capsys):
    """Found by fuzzing the command line: ``--spec -``: the error came from a helper parser named after the interpreter's script
    ("__main__.py: error: ..."), not "quantspec quantize: error: ..."."""
    with pytest.raises(SystemExit) as e:
        main(["quantize", "x.npy", "y.npy", "--spec", "-", "litert"])
    assert e.value.code == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ": error:" in ln]
    assert len(errors) == 1 and errors[0].startswith("quantspec quantize: error: argument --spec")
