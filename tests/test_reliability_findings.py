"""What fuzzing of the public API, the model reader and the CLI found, one test (or a few) per
finding; each failed before its fix.  The fuzzers themselves are the ``test_fuzz_*`` files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import refs
from litert_models import example_bytes, edit
from quantspec import onnxmodels
from quantspec.cli import main
from quantspec.errors import ModelError
from quantspec.litert import check_model, load_model

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _litert_refuses(data: bytes) -> str:
    """LiteRT's reason for refusing to load ``data`` (the test fails if it loads it)."""
    L = refs.require("ai_edge_litert.interpreter")
    with pytest.raises(ValueError) as e:
        L.Interpreter(model_content=data)
    return str(e.value)


# --- 1. the .tflite reader requires what LiteRT's flatbuffer verifier requires -----------------

def _unterminated_string() -> bytes:
    """The bundled mlp_softmax.tflite with the NUL that ends the string "Identity" overwritten."""
    data = bytearray(example_bytes("mlp_softmax"))
    k = data.find(b"Identity\x00")
    assert k > 0
    data[k + 8] = 1
    return bytes(data)


def _patched(name: str, at: int, old: bytes, new: bytes) -> bytes:
    data = bytearray(example_bytes(name))
    assert data[at:at + len(old)] == old, "the bundled model changed: find a new place for this patch"
    data[at:at + len(new)] = new
    return bytes(data)


#: single patches of the bundled mlp_softmax.tflite that quantspec's reader accepted and LiteRT's
#: flatbuffer verifier refuses (found by the mutation fuzzer)
VERIFIER_CASES = {
    "string without its NUL": (_unterminated_string, "not terminated by a NUL byte"),
    # the root table's signature_defs field: an offset of 0
    "offset of 0": (lambda: _patched("mlp_softmax", 32, b"\x1c\x00\x00\x00", b"\x00"), "offset of 0"),
    # the subgraph's vtable names a field at an odd place: a misaligned int32 field
    "misaligned field": (lambda: _patched("mlp_softmax", 1566, b"\x0e\x00", b"\x80"), "not aligned"),
}


@pytest.mark.parametrize("case", sorted(VERIFIER_CASES))
def test_f1_what_litert_verifier_refuses_is_unreadable(case, tmp_path, capsys):
    make, match = VERIFIER_CASES[case]
    data = make()
    assert "not a valid Flatbuffer buffer" in _litert_refuses(data)
    with pytest.raises(ModelError, match=match):
        load_model(data)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    assert main(["check", str(path)]) == 2                      # not "conformant"
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "flatbuffer verifier" in err


def test_f1_a_table_referenced_more_than_a_million_times_is_refused():
    """The verifier counts every table it walks, shared ones each time (at most 1,000,000)."""
    from test_litert_model_fuzz import _shared_tensor_model

    data = _shared_tensor_model(1_000_001, 1)
    assert "not a valid Flatbuffer buffer" in _litert_refuses(data)
    with pytest.raises(ModelError, match="more than 1000000"):
        load_model(data)
    load_model(_shared_tensor_model(1000, 1))


def _bias_quantized_dimension_5() -> bytes:
    def change(obj):
        (t,) = [t for t in obj.subgraphs[0].tensors if t.name == b"arith.constant2"]
        t.quantization.quantizedDimension = 5
    from quantspec.litert.model import example_model

    return edit(Path(example_model("mlp_softmax")).with_name("bench_cnn.tflite").read_bytes(), change)


@pytest.mark.parametrize("make", [_unterminated_string, _bias_quantized_dimension_5],
                         ids=["verifier", "quantized_dimension"])
def test_f1_compare_litert_on_a_model_litert_refuses_exits_2(make, tmp_path, capsys, monkeypatch):
    """LiteRT's refusal is one line naming it and its reason (the reader now refuses the first model
    itself, so the LiteRT call is reached here by lending the run the unchecked model)."""
    data = make()
    reason = _litert_refuses(data)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    if make is _unterminated_string:       # reach the LiteRT call with a model quantspec would refuse
        from quantspec.litert import _verify
        monkeypatch.setattr(_verify, "verify", lambda buf: None)
    assert main(["run", str(path), "--random", "0", "--compare-litert"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "LiteRT refused the model" in captured.err and reason.split(".")[0] in captured.err


def test_f1_check_still_reports_what_litert_rejects_at_load():
    report = check_model(_bias_quantized_dimension_5())
    assert not report.ok and any(v.rule == "quantization-malformed" for v in report.violations)


# --- 2. signals during a CLI write leave no temporary behind ----------------------------------

_SLOW_WRITER = textwrap.dedent("""
    import sys, time
    from quantspec._tensorfiles import tensorio
    real = tensorio._write_pieces
    def slow(f, *args, **kwargs):       # the write starts, then takes its time
        real(f, *args, **kwargs)
        f.flush()
        print("writing", flush=True)
        time.sleep(60)
    tensorio._write_pieces = slow
    from quantspec.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _default_termination_signals() -> None:
    """The child starts with SIGINT / SIGTERM / SIGHUP at their defaults, whatever this test runs under
    (under ``nohup`` SIGHUP is ignored, a background job of a shell without job control ignores
    SIGINT, and quantspec, like Python, rightly leaves an ignored signal ignored)."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)


def _interrupted_write(tmp_path: Path, sig: int, suffix: str) -> tuple[int, set[str], str]:
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / f"y{suffix}"
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), QUANTSPEC_FAST="0")
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, "quantize", str(tmp_path / "x.npy"), str(out),
                          "--spec", "onnx", "--scale", "0.01", "--output-dtype", "int8"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                         preexec_fn=_default_termination_signals)
    try:
        assert p.stdout.readline() == "writing\n"
        p.send_signal(sig)
        _, err = p.communicate(timeout=60)
    finally:
        p.kill()
    return p.returncode, set(os.listdir(tmp_path)), err


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP", "SIGINT"])
@pytest.mark.parametrize("suffix", [".npy", ".safetensors"])
def test_f2_a_terminated_write_leaves_nothing_behind(tmp_path, sig, suffix):
    code, left, err = _interrupted_write(tmp_path, getattr(signal, sig), suffix)
    assert left == {"x.npy"}, left
    assert code == 128 + getattr(signal, sig) and err.count("\n") == 1, (code, err)


def test_f2_a_killed_write_leaves_nothing_behind(tmp_path):
    """SIGKILL cannot be caught: the output is written to an unnamed file (O_TMPFILE), named only when
    it is complete, so a killed run leaves no temporary file."""
    if not hasattr(os, "O_TMPFILE"):
        pytest.skip("no O_TMPFILE on this system: a killed run leaves its named temporary file")
    code, left, _ = _interrupted_write(tmp_path, signal.SIGKILL, ".npy")
    assert code == -signal.SIGKILL
    assert left == {"x.npy"}, left


def test_f2_a_killed_write_keeps_the_old_destination(tmp_path):
    (tmp_path / "y.npy").write_bytes(b"old")
    code, left, _ = _interrupted_write(tmp_path, signal.SIGKILL, ".npy")
    assert (tmp_path / "y.npy").read_bytes() == b"old"
    if hasattr(os, "O_TMPFILE"):
        assert left == {"x.npy", "y.npy"}, left


@pytest.mark.parametrize("how", ["unnamed", "link refused", "no O_TMPFILE"])
@pytest.mark.parametrize("suffix", [".npy", ".npz", ".safetensors"])
def test_f2_every_way_of_writing_gives_the_same_file(tmp_path, monkeypatch, how, suffix):
    """The unnamed temporary file, its copy where the file system will not link it, and the named
    temporary file where there is no O_TMPFILE: the same bytes, ordinary permissions, nothing left."""
    from quantspec._tensorfiles import tensorio

    if how == "link refused":
        def refuse(*args):
            raise OSError(18, "Invalid cross-device link")
        monkeypatch.setattr(tensorio, "_name_unnamed", refuse)
    elif how == "no O_TMPFILE":
        monkeypatch.setattr(tensorio, "_unnamed_file", lambda directory: None)
    tensors = {"a": np.arange(10, dtype=np.int8), "b": np.linspace(0, 1, 7, dtype=np.float32)}
    if suffix == ".npy":
        tensors = {"y": tensors["a"]}      # a .npy's tensor is named after the file
    tensorio.write_tensors(tmp_path / f"y{suffix}", tensors)
    back = tensorio.read_tensors(tmp_path / f"y{suffix}")
    assert {k: v.tobytes() for k, v in back.items()} == {k: v.tobytes() for k, v in tensors.items()}
    assert os.listdir(tmp_path) == [f"y{suffix}"]
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / f"y{suffix}").stat().st_mode & 0o777 == 0o666 & ~mask

    def full(f):
        f.write(b"x")
        raise OSError(28, "No space left on device")

    from quantspec.errors import TensorFileError

    with pytest.raises(TensorFileError, match="No space left"):
        tensorio._atomic_with(tmp_path / "z.npy", full)
    assert os.listdir(tmp_path) == [f"y{suffix}"]


# --- 3. every argument is checked before the data is touched ------------------------------------

def _huge(dtype, n=58, shape=None):
    """A broadcast view declaring 2^n elements (no memory behind it)."""
    return np.broadcast_to(np.array(0.5 if np.dtype(dtype).kind == "f" else 3, dtype), shape or (2 ** (n // 2), 2 ** (n - n // 2)))


def _quick(call, error):
    t0 = time.process_time()
    with pytest.raises(error) as e:
        call()
    assert time.process_time() - t0 < 1.0
    return e.value


def test_f3_weight_params_checks_the_axis_before_reading_the_weights():
    import quantspec.litert as L
    from quantspec.errors import AxisError

    for axis in (5, 1.0, np.float64(0), True, "0"):
        _quick(lambda: L.weight_params(_huge(np.float32), axis=axis), AxisError)
    # a valid call over a broadcast view reads only its distinct values
    t0 = time.process_time()
    p = L.weight_params(_huge(np.float32, shape=(3, 2 ** 56)), axis=0)
    assert time.process_time() - t0 < 1.0 and p.scale.tolist() == [np.float32(0.5 / 127)] * 3


def test_f3_other_arguments_before_the_data():
    """A bad argument beside a huge input is named at once (nothing scanned, copied or allocated)."""
    import quantspec.litert as L
    import quantspec.onnx as O
    import quantspec.tf as T
    from quantspec import errors

    xf, xi = _huge(np.float32), _huge(np.int8)
    cases = [
        (lambda: O.quantize_linear(xf, np.float32(0.1), np.int8(0), axis=7, block_size=2), errors.QuantSpecError),
        (lambda: O.dequantize_linear(xi, np.float32(0.1), np.uint8(0)), errors.DTypeError),
        (lambda: T.quantize(xf, 1.0, -1.0, "qint8"), errors.InvalidArgumentError),
        (lambda: T.quantize_and_dequantize_v2(xf, num_bits=99), errors.RangeError),
        (lambda: T.fake_quant_with_min_max_args(xf, num_bits=1), errors.RangeError),
        (lambda: L.quantize(xf, L.QuantParams([0.1, 0.2], 0, 1)), errors.ShapeError),
        (lambda: L.quantize_weights(xf, L.QuantParams(0.1, 3)), errors.InvalidArgumentError),
        (lambda: L.quantize_weights(_huge(np.float64), L.QuantParams(0.1, 3)), errors.InvalidArgumentError),
        (lambda: L.quantize_bias(xf, L.QuantParams(0.1, 1)), errors.InvalidArgumentError),
        (lambda: L.dequantize(xi, L.QuantParams([0.1, 0.2], 0, 5)), errors.AxisError),
        (lambda: L.fixedpoint.multiply_by_quantized_multiplier(_huge(np.int64), 1 << 30, 99), errors.QuantSpecError),
    ]
    for call, error in cases:
        _quick(call, error)


# --- 4. a result too large for memory is a quantspec error, before anything is allocated ----------

def _too_large_calls():
    import quantspec.litert as L
    import quantspec.onnx as O
    import quantspec.tf as T

    p = L.QuantParams(0.1, 0)
    return {
        "onnx.quantize_linear": lambda x: O.quantize_linear(x, np.float32(0.1), np.int8(0)),
        "onnx.quantize_linear_packed": lambda x: O.quantize_linear_packed(x, np.float32(0.1), output_dtype="int4"),
        "onnx.dequantize_linear": lambda x: O.dequantize_linear(np.broadcast_to(np.int8(3), x.shape), np.float32(0.1)),
        "onnx.pack": lambda x: O.pack(np.broadcast_to(np.int8(3), x.shape)),
        "tf.quantize": lambda x: T.quantize(x, -1.0, 1.0, "qint8"),
        "tf.dequantize": lambda x: T.dequantize(np.broadcast_to(np.int8(3), x.shape), -1.0, 1.0),
        "tf.quantize_and_dequantize_v2": lambda x: T.quantize_and_dequantize_v2(x, -1.0, 1.0, range_given=True),
        "tf.quantize_and_dequantize_v3": lambda x: T.quantize_and_dequantize_v3(x, -1.0, 1.0, 8),
        "tf.quantize_and_dequantize_v4": lambda x: T.quantize_and_dequantize_v4(x),
        "tf.fake_quant_with_min_max_args": lambda x: T.fake_quant_with_min_max_args(x),
        "tf.fake_quant_with_min_max_vars": lambda x: T.fake_quant_with_min_max_vars(x, -1.0, 1.0),
        "tf.fake_quant_with_min_max_vars_per_channel": lambda x: T.fake_quant_with_min_max_vars_per_channel(
            x, np.full(x.shape[-1], -1, np.float32), np.ones(x.shape[-1], np.float32)),
        "litert.quantize": lambda x: L.quantize(x, p),
        "litert.quantize_weights": lambda x: L.quantize_weights(x, p),
        "litert.quantize_bias": lambda x: L.quantize_bias(x, p),
        "litert.dequantize": lambda x: L.dequantize(np.broadcast_to(np.int8(3), x.shape), p),
        "litert.fixedpoint.multiply_by_quantized_multiplier": lambda x: L.fixedpoint.multiply_by_quantized_multiplier(
            np.broadcast_to(np.int32(3), x.shape), 1 << 30, 1),
        "litert.fixedpoint.saturating_rounding_doubling_high_mul (broadcast)":
            lambda x: L.fixedpoint.saturating_rounding_doubling_high_mul(
                np.broadcast_to(np.int32(1), (2 ** (x.size.bit_length() // 2), 1)),
                np.broadcast_to(np.int32(1), (1, x.size // 2 ** (x.size.bit_length() // 2)))),
        "big-endian x": lambda x: O.quantize_linear(np.broadcast_to(np.array(0.5, ">f4"), x.shape), np.float32(0.1)),
    }


@pytest.mark.parametrize("n", [31, 40, 58])
@pytest.mark.parametrize("name", sorted(_too_large_calls()))
def test_f4_huge_results_are_too_large_errors(name, n, monkeypatch):
    from quantspec import errors
    from quantspec._semantics import arrays

    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [1 << 30])     # a 1 GiB machine, wherever the test runs
    x = _huge(np.float32, n, shape=(2 ** (n - 8), 2 ** 8))   # 256 channels on the last axis
    e = _quick(lambda: _too_large_calls()[name](x), errors.TooLargeError)
    assert isinstance(e, MemoryError) and isinstance(e, ValueError)
    assert "bytes" in str(e) and e.argument
    if "broadcast" not in name or n < 58:   # (at 2^58 an operand is already too large for its work arrays)
        assert f"{2 ** n} elements" in str(e)


def test_f4_what_fits_still_runs(monkeypatch):
    import quantspec.onnx as O
    from quantspec._semantics import arrays

    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [1 << 30])
    x = np.broadcast_to(np.float32(0.5), (1000, 1000))
    assert O.quantize_linear(x, np.float32(0.1), np.int8(0)).tolist() == np.full((1000, 1000), 5, np.int8).tolist()


# --- 5. a numpy float64 scalar is a float32 range argument, rounded as TensorFlow rounds it -------

#: float64 values that float32 cannot hold exactly: ties to even both ways, beyond the float32
#: range, below its subnormals, NaN
F64_RANGES = [-0.1, 1 / 3, 1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, -(1 + 2.0 ** -24), 3.4028235677973366e38,
              1e300, -1e300, 1e-310, -7e-46, 2.5000001, float("nan")]


def _tf_calls(tf, qt, v):
    """(TensorFlow's call, quantspec's call) pairs taking the float64 scalar ``v`` as a float32 range end;
    TensorFlow gets the numpy scalar itself, as a user would pass it."""
    x = np.array([-3.0, -1.0, -0.4, -0.1, 0.0, 0.1, 0.3, 0.49, 1.0, 2.5, 3.0, 100.0], np.float32)
    q = np.arange(-128, 128, 23, dtype=np.int8)
    lo, hi = (v, np.float64(4.0)) if not v > 0 else (np.float64(-4.0), v)
    return {
        "quantize": (lambda: [r.numpy() for r in tf.quantization.quantize(x, lo, hi, tf.qint8)],
                     lambda: [np.asarray(r) for r in qt.quantize(x, lo, hi, "qint8")]),
        "quantize SCALED": (lambda: [r.numpy() for r in tf.quantization.quantize(x, lo, hi, tf.qint8, mode="SCALED")],
                            lambda: [np.asarray(r) for r in qt.quantize(x, lo, hi, "qint8", mode="SCALED")]),
        "dequantize": (lambda: [tf.quantization.dequantize(tf.bitcast(tf.constant(q), tf.qint8), lo, hi).numpy()],
                       lambda: [qt.dequantize(q, lo, hi)]),
        "qdq v2": (lambda: [tf.raw_ops.QuantizeAndDequantizeV2(input=x, input_min=lo, input_max=hi, range_given=True)
                            .numpy()],
                   lambda: [qt.quantize_and_dequantize_v2(x, lo, hi, range_given=True)]),
        "qdq v3": (lambda: [tf.raw_ops.QuantizeAndDequantizeV3(input=x, input_min=lo, input_max=hi, num_bits=8).numpy()],
                   lambda: [qt.quantize_and_dequantize_v3(x, lo, hi, 8)]),
        "fake quant vars": (lambda: [tf.quantization.fake_quant_with_min_max_vars(x, lo, hi).numpy()],
                            lambda: [qt.fake_quant_with_min_max_vars(x, lo, hi)]),
        "fake quant args": (lambda: [tf.quantization.fake_quant_with_min_max_args(x, min=lo, max=hi).numpy()],
                            lambda: [qt.fake_quant_with_min_max_args(x, min=lo, max=hi)]),
    }


@pytest.mark.parametrize("value", F64_RANGES, ids=repr)
def test_f5_float64_scalar_ranges_as_tensorflow_takes_them(value):
    tf = refs.require("tensorflow")
    import quantspec.tf as qt
    from quantspec.errors import QuantSpecError

    for name, (theirs, ours) in _tf_calls(tf, qt, np.float64(value)).items():
        try:
            want = theirs()
        except Exception as e:   # TensorFlow refuses it: so must quantspec
            with pytest.raises(QuantSpecError):
                ours()
            continue
        got = ours()
        if name.startswith("quantize"):   # NaN pre-cast values: TensorFlow's codes depend on the position
            from tf_oracle import Case, compare

            x = np.array([-3.0, -1.0, -0.4, -0.1, 0.0, 0.1, 0.3, 0.49, 1.0, 2.5, 3.0, 100.0], np.float32)
            lo, hi = (np.float64(value), np.float64(4.0)) if not value > 0 else (np.float64(-4.0), np.float64(value))
            case = Case("quantize", x, lo, hi, dict(T="qint8", mode=name.split()[-1] if " " in name else "MIN_COMBINED",
                                                     round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False, axis=None))
            assert compare(case, [np.asarray(w).view(np.int8) if i == 0 else w for i, w in enumerate(want)], got) is None
        else:
            assert [w.tobytes() for w in want] == [np.asarray(g).tobytes() for g in got], (name, value, want, got)
        # the same as the Python float of that value
        python = _tf_calls(tf, qt, float(value))[name][1]()
        assert [np.asarray(g).tobytes() for g in got] == [np.asarray(g).tobytes() for g in python], name


def test_f5_zero_d_float64_arrays_too_and_other_inexact_values_still_refused():
    import quantspec.tf as qt
    from quantspec.errors import DTypeError

    x = np.linspace(-1, 1, 9, dtype=np.float32)
    a = qt.quantize(x, np.array(-0.1), np.array(1 / 3), "qint8")
    b = qt.quantize(x, -0.1, 1 / 3, "qint8")
    assert all(np.asarray(u).tobytes() == np.asarray(v).tobytes() for u, v in zip(a, b))
    with pytest.raises(DTypeError, match="cannot be converted exactly"):
        qt.fake_quant_with_min_max_vars_per_channel(x.reshape(3, 3), np.array([-0.1, -1, -1]), np.ones(3))


# --- 6. compat="reference": float8 (and float4) zero points exactly as onnx.reference 1.23 ---------

def _f8_zero_points(t):
    """Zero points of every shape, of the type ``t``: all zero (+0, -0, values that uint8 reads as 0),
    empty, and non-zero."""
    import ml_dtypes  # noqa: F401 - the dtypes come from quantspec's table

    from quantspec.dtypes import qtype

    dt = qtype(t).dtype
    vals = {"0": [0.0], "-0": [-0.0], "0.5": [0.5], "1": [1.0], "-1": [-1.0], "nan": [float("nan")]}
    out = {}
    for name, v in vals.items():
        with np.errstate(all="ignore"):
            a = np.array(v, np.float32).astype(dt)
        for shape in [(), (1,), (2,), (2, 2), (3,), (1, 1, 1)]:
            out[f"{name}{list(shape)}"] = np.broadcast_to(a.reshape(()), shape).copy()
    out["empty"] = np.zeros((0,), dt)
    out["[0, 1]"] = np.array([0.0, 1.0], np.float32).astype(dt)
    out["[0, 0.5]"] = np.array([0.0, 0.5], np.float32).astype(dt)
    return out


@pytest.mark.parametrize("t", ["float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1"])
def test_f6_reference_float_zero_points_accept_and_refuse_as_onnx_reference(t):
    import onnx_oracles
    import quantspec.onnx as O
    from quantspec.dtypes import qtype
    from quantspec.errors import QuantSpecError

    dt = qtype(t).dtype
    x = np.array([1.0, 2.0], np.float32).astype(dt)
    for scale in (np.float32(1.0), np.array([0.5, 2.0], np.float32)):
        for name, zp in _f8_zero_points(t).items():
            try:
                with np.errstate(all="ignore"):
                    want = onnx_oracles.reference("DequantizeLinear", 25, x, scale, zp, axis=0)
            except Exception:      # onnx.reference fails: quantspec refuses
                with pytest.raises(QuantSpecError):
                    O.dequantize_linear(x, scale, zp, axis=0, compat="reference")
                continue
            got = O.dequantize_linear(x, scale, zp, axis=0, compat="reference")
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (t, name, scale, want, got)


# --- 7. a 0-d input gives 0-d arrays, everywhere ------------------------------------------------

def _zero_d_calls():
    import quantspec.litert as L
    import quantspec.onnx as O
    import quantspec.tf as T
    from quantspec.litert import fixedpoint as F

    x, q, p = np.array(0.7, np.float32), np.array(3, np.int8), L.QuantParams(0.1, 0)
    i = np.array(-12345, np.int32)
    s = np.array(1 << 30, np.int32)
    return {
        "litert.quantize": lambda: L.quantize(x, p),
        "litert.quantize_weights": lambda: L.quantize_weights(x, p),
        "litert.quantize_weights (python float)": lambda: L.quantize_weights(0.7, p),
        "litert.quantize_weights (per-tensor, own range)": lambda: L.quantize_weights(x, L.weight_params(x, None)),
        "litert.quantize_bias": lambda: L.quantize_bias(x, p),
        "litert.dequantize": lambda: L.dequantize(q, p),
        "onnx.quantize_linear": lambda: O.quantize_linear(x, np.float32(0.1)),
        "onnx.dequantize_linear": lambda: O.dequantize_linear(q, np.float32(0.1)),
        "onnx.unpack": lambda: O.unpack(b"\x03", "int8", ()),
        "tf.quantize": lambda: T.quantize(x, -1.0, 1.0, "qint8"),
        "tf.dequantize": lambda: T.dequantize(q, -1.0, 1.0),
        "tf.quantize_and_dequantize_v2": lambda: T.quantize_and_dequantize_v2(x, -1.0, 1.0, range_given=True),
        "tf.fake_quant_with_min_max_args": lambda: T.fake_quant_with_min_max_args(x),
        "tf.fake_quant_with_min_max_vars": lambda: T.fake_quant_with_min_max_vars(x, -1.0, 1.0),
        "fixedpoint.quantize_multiplier": lambda: F.quantize_multiplier(np.array(0.3)),
        "fixedpoint.saturating_rounding_doubling_high_mul": lambda: F.saturating_rounding_doubling_high_mul(i, s),
        "fixedpoint.rounding_divide_by_pot": lambda: F.rounding_divide_by_pot(i, np.array(3)),
        "fixedpoint.multiply_by_quantized_multiplier": lambda: F.multiply_by_quantized_multiplier(i, s, np.array(1)),
        "fixedpoint.multiply_by_quantized_multiplier single": lambda: F.multiply_by_quantized_multiplier(
            i, s, np.array(1), rounding="single"),
        "fixedpoint.multiply_by_quantized_multiplier_smaller_than_one_exp":
            lambda: F.multiply_by_quantized_multiplier_smaller_than_one_exp(i, s, np.array(-1)),
        "fixedpoint.multiply_by_quantized_multiplier_greater_than_one":
            lambda: F.multiply_by_quantized_multiplier_greater_than_one(i, s, np.array(1)),
        "fixedpoint.multiply_by_quantized_multiplier_int64":
            lambda: F.multiply_by_quantized_multiplier_int64(i, s, np.array(1)),
        "fixedpoint.saturating_rounding_multiply_by_pot": lambda: F.saturating_rounding_multiply_by_pot(i, 3),
        "fixedpoint.saturating_left_shift": lambda: F.saturating_left_shift(i, 3),
        "fixedpoint.wrap_int32": lambda: F.wrap_int32(np.array(1 << 40)),
        "fixedpoint.saturate_int32": lambda: F.saturate_int32(np.array(1 << 40)),
        "fixedpoint.rounding_half_sum": lambda: F.rounding_half_sum(i, s),
        "fixedpoint.count_leading_zeros": lambda: F.count_leading_zeros(i),
        "fixedpoint.exp_on_interval_between_negative_one_quarter_and_0_excl":
            lambda: F.exp_on_interval_between_negative_one_quarter_and_0_excl(np.array(-(1 << 28), np.int32)),
        "fixedpoint.exp_on_negative_values": lambda: F.exp_on_negative_values(i, 5),
        "fixedpoint.one_over_one_plus_x_for_x_in_0_1": lambda: F.one_over_one_plus_x_for_x_in_0_1(s),
        "fixedpoint.one_minus_x_over_one_plus_x_for_x_in_0_1": lambda: F.one_minus_x_over_one_plus_x_for_x_in_0_1(s),
        "fixedpoint.logistic": lambda: F.logistic(i, 5),
        "fixedpoint.tanh": lambda: F.tanh(i, 5),
        "fixedpoint.log_x_for_x_greater_than_or_equal_to_1":
            lambda: F.log_x_for_x_greater_than_or_equal_to_1(np.array(1 << 28, np.int32), 5, 5),
        "fixedpoint.get_reciprocal": lambda: F.get_reciprocal(np.array(1000, np.int32), 12),
        "fixedpoint.get_inv_sqrt_quantized_multiplier_exp":
            lambda: F.get_inv_sqrt_quantized_multiplier_exp(np.array(1000, np.int32), -1),
        "fixedpoint.rescale": lambda: F.rescale(i, 5, 8),
    }


@pytest.mark.parametrize("name", sorted(_zero_d_calls()))
def test_f7_zero_d_inputs_give_zero_d_arrays(name):
    result = _zero_d_calls()[name]()
    for r in (result if isinstance(result, tuple) else (result,)):
        assert type(r) is np.ndarray and r.shape == (), (name, type(r), r)


# --- 8. the command line's silent traps get a one-line warning --------------------------------------

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
def test_f8_cli_traps_warn(case, tmp_path, capsys):
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
def test_f8_no_warning_without_a_trap(args, tmp_path, capsys):
    code, warnings = _cli(tmp_path, capsys, *args)
    assert code == 0 and warnings == []


# --- found by the fuzzers ---------------------------------------------------------------------------

def test_fuzz_tiny_per_tensor_weights_as_the_converter_quantizes_them():
    """Weights whose largest magnitude is below 127 / FLT_MAX: the converter's 127 / max|w| is +inf in
    float32, every w * inf (and 0 * inf = NaN) converts to INT32_MIN on x86, which clamps to -127.
    quantspec gave 127 / 0 / -127 (and numpy's overflow warning).  Checked against the converter."""
    from test_litert_params import _convert, _tensors

    import quantspec.litert as L

    tf = refs.require("tensorflow")
    w = np.array([[1e-40], [0.0], [-2e-40], [3e-38]], np.float32)

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def f(self, x):
            return tf.matmul(x, tf.constant(w))

    data = [np.random.default_rng(i).uniform(-1, 1, (1, 4)).astype(np.float32) for i in range(4)]
    _, quantized = _convert(M(), data, per_channel=False)
    (want,) = [t["data"].view(np.int8).reshape(t["shape"]) for t in _tensors(quantized)[1]
               if t["data"] is not None and t["type"] == 9]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = L.quantize_weights(w.T, L.weight_params(w.T, None))
    assert got.tolist() == want.tolist() == [[-127, -127, -127, -127]]


def test_fuzz_per_axis_weight_scales_whose_reciprocal_overflows():
    """A per-axis scale below 1 / FLT_MAX: f32(1.0 / scale) is +inf, and the C++ cast of w * inf gives
    INT32_MIN, clamped to -127 (SymmetricPerChannelQuantizeValues), without a numpy warning."""
    import quantspec.litert as L

    w = np.array([[0.5, -0.5, 0.0], [1.0, 2.0, -3.0]], np.float32)
    p = L.QuantParams([1e-39, 0.01], [0, 0], 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = L.quantize_weights(w, p)
    assert got.tolist() == [[-127, -127, -127], [100, 127, -127]]


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
@pytest.mark.parametrize("recorded", ["flo`t4e2m1", "nonsense", 5])
def test_fuzz_a_file_recording_an_unknown_type_is_a_tensor_file_error(tmp_path, suffix, recorded):
    """A damaged type entry (.npz's __quantspec_dtypes__, safetensors' quantspec.dtype.* metadata) was a
    DTypeError about the user's arguments; it is the file's fault: a TensorFileError naming the file."""
    import json
    import zipfile

    from quantspec._tensorfiles import tensorio
    from quantspec.errors import TensorFileError

    path = tmp_path / f"x{suffix}"
    tensorio.write_tensors(path, {"t": np.zeros(4, "int4")})
    if suffix == ".npz":
        with zipfile.ZipFile(path) as z:
            members = {n: z.read(n) for n in z.namelist()}
        entry = np.frombuffer(json.dumps({"t": recorded}).encode(), np.uint8)
        import io
        buf = io.BytesIO()
        np.save(buf, entry)
        members["__quantspec_dtypes__.npy"] = buf.getvalue()
        with zipfile.ZipFile(path, "w") as z:
            for n, b in members.items():
                z.writestr(n, b)
    else:
        raw = path.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        header["__metadata__"]["quantspec.dtype.t"] = recorded
        h = json.dumps(header).encode()
        h += b" " * (-len(h) % 8)
        path.write_bytes(len(h).to_bytes(8, "little") + h + raw[8 + n:])
    for mapped in (False, True):
        with pytest.raises(TensorFileError, match=path.name):
            tensorio.read_tensors(path, mapped=mapped)


def test_fuzz_an_invalid_spec_names_the_command(capsys):
    """``--spec -``: the error came from a helper parser named after the interpreter's script
    ("__main__.py: error: ..."), not "quantspec quantize: error: ..."."""
    with pytest.raises(SystemExit) as e:
        main(["quantize", "x.npy", "y.npy", "--spec", "-", "litert"])
    assert e.value.code == 2
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ": error:" in ln]
    assert len(errors) == 1 and errors[0].startswith("quantspec quantize: error: argument --spec")


def _onnx_model_named(name: str) -> bytes:
    from onnx_models import model, node, tensor

    m = model([node("QuantizeLinear", [name, "s", "z"], ["q"]), node("DequantizeLinear", ["q", "s", "z"], ["y"])],
              [(name, "float32", [2, 3])], [("y", "float32", [2, 3])],
              [tensor("s", np.float32(0.5)), tensor("z", np.int8(0))])
    return m.SerializeToString()


def test_fuzz_onnx_names_that_are_not_utf8_are_a_model_error():
    """A mutated .onnx whose input name is not UTF-8: protobuf returns the name as bytes, and
    ``audit`` died with a TypeError joining the input names (found by fuzzing)."""
    refs.require("onnx")
    from quantspec import onnx as qo

    data = _onnx_model_named("inputname").replace(b"inputname", b"\xffnputname")
    for call in (lambda: onnxmodels.check_model(data), lambda: onnxmodels.audit(data, {"inputname": np.zeros((2, 3), np.float32)}),
                 lambda: onnxmodels.audit(data, run=False)):
        with pytest.raises(ModelError, match="not valid UTF-8"):
            call()
    assert onnxmodels.check_model(_onnx_model_named("inputname")).ok


def test_fuzz_onnx_negative_dimensions():
    """A scale initializer with dims [-1] made check_model raise numpy's ValueError ("all elements
    of broadcast shape must be non-negative"); a negative dim_value declared for an input is treated
    as unknown (found by fuzzing)."""
    refs.require("onnx")
    import onnx

    from quantspec import onnx as qo

    m = onnx.ModelProto()
    m.ParseFromString(_onnx_model_named("x"))
    m.graph.initializer[0].dims.extend([-1])
    for call in (lambda: onnxmodels.check_model(m.SerializeToString()), lambda: onnxmodels.audit(m.SerializeToString(), run=False)):
        with pytest.raises(ModelError, match="negative dimension"):
            call()
    m.ParseFromString(_onnx_model_named("x"))
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -2
    assert onnxmodels.check_model(m.SerializeToString()).ok
    onnxmodels.audit(m.SerializeToString(), run=False)


@pytest.mark.parametrize("suffix", [".npy", ".npz"])
def test_fuzz_a_damaged_npy_header_prints_no_syntax_warning(suffix, tmp_path):
    """A .npy header numpy cannot parse as a literal ("(1and)") made Python print
    "<unknown>:1: SyntaxWarning: invalid decimal literal" before the TensorFileError (found by
    fuzzing): the command's one error line had a stray line above it."""
    from quantspec._tensorfiles import tensorio
    from quantspec.errors import TensorFileError

    buf = __import__("io").BytesIO()
    np.save(buf, np.zeros((1, 2), np.float32))
    raw = buf.getvalue().replace(b"(1, 2)", b"(1and)")
    path = tmp_path / f"x{suffix}"
    if suffix == ".npy":
        path.write_bytes(raw)
    else:
        import zipfile
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("a.npy", raw)
    with pytest.raises(TensorFileError, match="not a readable"):
        tensorio.read_tensors(path)
    # the warning is printed once per process and place: look at a fresh interpreter's stderr
    code = ("from quantspec._tensorfiles.tensorio import read_tensors\n"
            "try:\n    read_tensors(__import__('sys').argv[1])\nexcept ValueError:\n    pass\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and "Warning" not in done.stderr, done.stderr


def test_f6_reference_one_element_parameters_of_higher_rank_as_onnx_reference():
    """compat="reference": a one-element scale or zero point of rank >= 2 is read by onnx.reference as
    its first row, broadcast into the result: where that gives another shape than x (a 0-d x with a
    (1, 1) zero point: a (1,) result), quantspec refuses; where the shape is x's, it computes
    onnx.reference's values (found by a 20000-example fuzz run)."""
    import ml_dtypes

    import onnx_oracles
    import quantspec.onnx as O
    from quantspec.errors import ShapeError

    for x_shape, p_shape in [((), (1, 1)), ((), (1, 1, 1)), ((3,), (1, 1)), ((3,), (1, 1, 1)), ((2, 3), (1, 1)),
                             ((2, 3), (1, 1, 1, 1)), ((3,), (1,)), ((), (1,))]:
        x = np.arange(int(np.prod(x_shape)), dtype=np.int8).reshape(x_shape)
        scale = np.full(p_shape, 0.5, np.float32)
        zp = np.full(p_shape, -2, np.int8)
        want = onnx_oracles.reference("DequantizeLinear", 21, x, scale, zp)
        if want.shape != x.shape:
            with pytest.raises(ShapeError):
                O.dequantize_linear(x, scale, zp, compat="reference")
            with pytest.raises(ShapeError):
                O.dequantize_linear(x, np.float32(0.5), zp, compat="reference")
        else:
            got = O.dequantize_linear(x, scale, zp, compat="reference")
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), (x_shape, p_shape)
    x = np.array(0, ml_dtypes.int2)
    with pytest.raises(ShapeError):       # the fuzzer's case
        O.dequantize_linear(x, np.array(1.79, np.float32), np.array([[-2]], ml_dtypes.int2), axis=1,
                            compat="reference")


def _same_as_onnx_reference(op, call, *args, **attrs):
    """quantspec's compat="reference" call against onnx.reference on the same inputs: both refuse
    (onnx.reference fails, or returns another shape than x: no output of the operator), or the bytes
    are equal."""
    import onnx_oracles
    from quantspec.errors import QuantSpecError

    x = args[0]
    try:
        with np.errstate(all="ignore"):
            want = onnx_oracles.reference(op, 25, *args, **attrs)
        if want.shape != np.shape(x):
            raise ValueError("another shape")
    except Exception:      # noqa: BLE001 - onnx.reference refuses
        with pytest.raises(QuantSpecError):
            call()
        return "refused"
    got = call()
    assert got.shape == want.shape and got.tobytes() == want.tobytes(), (op, args, attrs, want, got)
    return "equal"


def test_f6_reference_float8_output_zero_point_only_reshaped_and_negative_block_size():
    """compat="reference": onnx.reference's QuantizeLinear reshapes a float8 output's zero point (its
    own asserts apply) and then computes without it, so a zero point whose length does not match the
    axis, or of rank >= 2 with one element, is accepted; a negative block_size is accepted where every
    parameter has one value (reshape_input never reads it) and refused otherwise (found by a
    20000-example fuzz run)."""
    import ml_dtypes

    import quantspec.onnx as O

    f8 = ml_dtypes.float8_e4m3fn
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(6, 4)
    outcomes = set()
    for zp in (np.zeros(2, f8), np.zeros(6, f8), np.zeros((1, 1), f8), np.zeros((2, 2), f8), np.zeros(4, f8),
               np.array([1.0, 0], f8)):
        for axis in (0, 1, -2, 2):
            outcomes.add(_same_as_onnx_reference(
                "QuantizeLinear", lambda zp=zp, axis=axis: O.quantize_linear(x, np.float32(0.5), zp, axis=axis,
                                                                             compat="reference"),
                x, np.float32(0.5), zp, axis=axis))
    q = np.array([0.01953125, 3.0], f8)
    for scale in (np.array([2.896484375], np.float16), np.float16(2.0), np.array([2.0, 1.0], np.float16)):
        outcomes.add(_same_as_onnx_reference(
            "DequantizeLinear", lambda scale=scale: O.dequantize_linear(q, scale, axis=0, block_size=-1,
                                                                        compat="reference"),
            q, scale, axis=0, block_size=-1))
    assert outcomes == {"refused", "equal"}


def test_f4_run_random_inputs_larger_than_memory(tmp_path, capsys):
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


# --- the translation between specs (found by the fuzzers' equiv recipes) ------------------------

@pytest.mark.parametrize("text", ["tf:FakeQuant variant=vars min=0 max=0",
                                  "tf:FakeQuant variant=per_channel min=0,0,-1 max=0,0,2"])
def test_fuzz_a_fake_quant_without_a_grid_is_refused_by_translate_and_equivalent(text):
    """FakeQuant with min == max == 0 (Vars, PerChannel: TensorFlow gives 0 for every input) has no
    grid: its zero point is NaN, and nudged() / grid() / real_range() raised a bare ValueError
    ("cannot convert float NaN to integer"), which escaped from translate and equivalent."""
    import quantspec
    from quantspec.equiv import parse
    from quantspec.errors import UnsupportedError

    r = parse(text)
    x = np.array([[1.0, -1.0, 0.5]] * 2, np.float32)
    assert (r(x if r.variant == "per_channel" else x[0])[..., 0] == 0).all()    # the record runs
    for call in (r.nudged, r.grid, r.real_range, lambda: quantspec.translate(r, "onnx", inputs=None),
                 lambda: quantspec.translate(r, "litert", inputs="float16"),
                 lambda: quantspec.equivalent(r, r, "float16")):
        with pytest.raises(UnsupportedError, match="without a grid"):
            call()


# --- the calibration observers near the float32 limit (found by the fuzzers' calibrate recipes) -----

_HUGE = np.array([3e38, -1.0, 2.0, 0.5], np.float32)
_HUGE_BOTH = np.array([3e38, -3e38, 1.0, 0.0], np.float32)
_SMALL = np.array([1.0, 2.0, -1.0, 0.5], np.float32)
_TOP = np.array([3.3e38, 2.0, -1.0, 0.5], np.float32)
_FULL = np.full(4, 3.4e38, np.float32)


@pytest.mark.parametrize("make,groups,ok", [
    # [-t, t] overflows float32: numpy (and onnxruntime) refuse "Too many bins"; numpy's overflow
    # warning escaped before the refusal
    (lambda C: C.EntropyObserver(num_bins=16), [[_HUGE]], False),
    (lambda C: C.DistributionObserver(num_bins=512), [[_HUGE_BOTH]], False),
    # a merge whose old bin width is infinite: Python's OverflowError escaped
    (lambda C: C.PercentileObserver(num_bins=16, symmetric=False), [[_HUGE_BOTH], [_TOP]], False),
    # the symmetric percentile's edges extended past the float32 range: numpy's "Maximum allowed
    # size exceeded" ValueError escaped
    (lambda C: C.PercentileObserver(num_bins=16), [[_SMALL], [_TOP]], False),
    # |x| all equal to 3.4e38: numpy's widened range [x - 0.5, x + 0.5] is one value: "Too many bins"
    # (quantspec returned a histogram of empty bins)
    (lambda C: C.PercentileObserver(num_bins=16), [[_FULL]], False),
    # a symmetric percentile range near the float32 limit: no warning, onnxruntime's result
    (lambda C: C.PercentileObserver(num_bins=16), [[_HUGE_BOTH]], True),
])
def test_fuzz_histogram_observers_near_the_float32_limit(make, groups, ok, tmp_path):
    """Histogram observers fed values near float32's largest: onnxruntime either fails (numpy's "Too
    many bins", an OverflowError, "Maximum allowed size exceeded") -- quantspec must raise a quantspec
    error there, not let Python's exception or numpy's overflow warning escape -- or gives a range
    that quantspec must equal."""
    import quantspec.calibrate as C
    from quantspec.errors import InvalidArgumentError
    import test_calibrate as T

    refs.require("onnxruntime")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            obs0 = make(C)
            method = type(obs0).__name__.replace("Observer", "")
            kw = {k: getattr(obs0, k) for k in ("num_bins", "symmetric") if hasattr(obs0, k)}
            if method != "Percentile":
                kw.pop("symmetric", None)
            want = T._ort_calibrate(tmp_path, method, groups, kw)
    except Exception:   # noqa: BLE001 - onnxruntime's refusal
        want = None
    assert (want is not None) == ok
    obs = make(C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if not ok:
            with pytest.raises(InvalidArgumentError):
                T.observe(obs, groups)
            return
        r = T.observe(obs, groups)
    lo, hi = want.range_value
    assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes()


@pytest.mark.parametrize("make,groups", [
    # the moving average of an infinite range and a finite one: inf + c * (x - inf) is NaN, and
    # numpy's "invalid value encountered in add" escaped
    (lambda C: C.MinMaxObserver(moving_average=True), [[np.array(np.inf, np.float32)],
                                                       [np.array(-0.92, np.float32)]]),
    # an empty batch: the Distribution statistics divide 0 by 0 ("invalid value encountered in
    # scalar divide" escaped)
    (lambda C: C.DistributionObserver(), [[np.zeros(0, np.float32)]]),
])
def test_fuzz_observers_print_no_numpy_warning(make, groups):
    """Observers computing numpy's NaN the way onnxruntime does let numpy's RuntimeWarning escape."""
    import quantspec.calibrate as C
    from quantspec.errors import QuantSpecError

    obs = make(C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            for g in groups:
                for b in g:
                    obs.update(b)
                obs.flush()
            obs.range()
        except QuantSpecError:
            pass


def test_fuzz_entropy_over_a_histogram_grown_past_memory_is_refused():
    """A second call 66,000 times wider than the first grows the entropy histogram to millions of bins;
    its candidate distributions (about bins^2 / 4 values) would take 65 TiB: numpy's MemoryError escaped
    (onnxruntime would loop bins^2 / 4 Python steps).  A TooLargeError is raised before allocating."""
    import quantspec.calibrate as C
    from quantspec.errors import TooLargeError

    obs = C.EntropyObserver()
    obs.update(np.array(0.5621489, np.float32)).flush()
    obs.update(np.array(37200.29, np.float32)).flush()
    with pytest.raises(TooLargeError, match="entropy"):
        obs.range()


@pytest.mark.parametrize("value", ["x", [1.0, 2.0], object()])
def test_fuzz_onnx_params_refuses_a_min_real_range_that_is_not_a_number(value):
    """``onnx_params(..., min_real_range="x")`` let numpy's ValueError (or TypeError) escape."""
    import quantspec.calibrate as C
    from quantspec.errors import InvalidArgumentError

    r = C.MinMaxObserver().update(np.array([-1.0, 2.0], np.float32)).range()
    with pytest.raises(InvalidArgumentError, match="min_real_range"):
        C.onnx_params(r, "uint8", min_real_range=value)
    assert C.onnx_params(r, "uint8", min_real_range=0.5)[1].dtype == np.float32


@pytest.mark.parametrize("lo,hi", [(-np.inf, np.inf), (-1.0, np.inf), (-np.inf, 2.0)])
@pytest.mark.parametrize("symmetric", [False, True])
def test_fuzz_onnx_params_of_an_infinite_range_prints_no_warning(lo, hi, symmetric):
    """``onnx_params`` of a range with an infinite end (an observer fed inf) computed inf / inf and a
    NaN cast as onnxruntime does, and numpy's "invalid value" RuntimeWarning escaped.  The result is
    compute_scale_zp's."""
    import quantspec.calibrate as C

    q = refs.require("onnxruntime.quantization.quant_utils")
    from onnx import TensorProto

    rng_ = (np.array([lo], np.float32), np.array([hi], np.float32))
    qmin, qmax = q.get_qmin_qmax_for_qType(TensorProto.UINT8, symmetric=symmetric)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z, s = q.compute_scale_zp(rng_[0], rng_[1], qmin, qmax, symmetric)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        z2, s2 = C.onnx_params(rng_, "uint8", symmetric=symmetric)
    assert z.tobytes() == z2.tobytes() and s.tobytes() == s2.tobytes() and z.dtype == z2.dtype


@pytest.mark.parametrize("symmetric", [False, True])
def test_fuzz_a_histogram_grown_past_memory_is_refused(symmetric):
    """A call whose range is 10^38 times the first call's grows the histogram by whole bins of the first
    call's width, to ~10^38 bins: numpy's "Maximum allowed size exceeded" ValueError escaped (from
    linspace; from arange for the symmetric percentile), where a TooLargeError names the batch."""
    import quantspec.calibrate as C
    from quantspec.errors import TooLargeError

    obs = C.PercentileObserver(num_bins=1, symmetric=symmetric)
    obs.update(np.array([-1.5, -0.17, -5.7], np.float32)).flush()
    with pytest.raises(TooLargeError, match="histogram"):
        obs.update(np.array([-3.4e38, -1.0, 0.5], np.float32)).flush()


def test_fuzz_symmetric_percentile_of_an_empty_first_call_is_onnxruntimes(tmp_path):
    """An empty batch in the first call: numpy's histogram of no values bins [0, 1], and onnxruntime's
    symmetric percentile gives the range (-0.0, 0.0); quantspec refused it ("holds NaN or inf values").
    An empty later call fails in onnxruntime (np.nanmax of no values): quantspec refuses it."""
    import quantspec.calibrate as C
    from quantspec.errors import ShapeError
    import test_calibrate as T

    refs.require("onnxruntime")
    empty = np.zeros((2, 0), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = T._ort_calibrate(tmp_path, "Percentile", [[empty]], {"num_bins": 16})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = C.PercentileObserver(num_bins=16).update(empty).range()
    lo, hi = want.range_value
    assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes()
    obs = C.PercentileObserver(num_bins=16).update(empty).flush()
    with pytest.raises(ShapeError, match="at least one value"):
        obs.update(empty).flush()


@pytest.mark.parametrize("num_bins", [128, 16, 3, 1])
def test_fuzz_entropy_with_one_quantized_bin_is_onnxruntimes(num_bins, tmp_path):
    """``EntropyObserver(num_quantized_bins=1)`` was refused ("must be between 2 and ..."), where
    onnxruntime's entropy search runs (its candidates start at width 1): the range must be its."""
    import quantspec.calibrate as C
    import test_calibrate as T

    refs.require("onnxruntime")
    rng = np.random.default_rng(7)
    data = [[rng.normal(0, 2, (6,)).astype(np.float32), rng.standard_cauchy(6).astype(np.float32)]]
    kw = {"num_bins": num_bins, "num_quantized_bins": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = T._ort_calibrate(tmp_path, "Entropy", data, kw)
    obs = C.EntropyObserver(**kw)
    for b in data[0]:
        obs.update(b)
    r = obs.range()
    lo, hi = want.range_value
    assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes()


def test_fuzz_calibration_range_of_no_value_prints():
    """``repr`` of a CalibrationRange holding empty arrays raised IndexError (``as_floats`` read
    element 0); ``as_floats`` now raises a ShapeError and ``repr`` shows the arrays."""
    import quantspec.calibrate as C
    from quantspec.errors import ShapeError

    r = C.CalibrationRange("entropy", np.zeros(0, np.float32), np.zeros(0, np.float32))
    assert "CalibrationRange(entropy" in repr(r)
    with pytest.raises(ShapeError):
        r.as_floats()


@pytest.mark.parametrize("lo,hi", [(np.zeros(0, np.float32), np.zeros(0, np.float32)),
                                   (np.array([-1.0, -2.0], np.float32), np.array([1.0, 2.0], np.float32)),
                                   (np.array([-1], np.int32), np.array([2], np.int32))])
def test_fuzz_onnx_params_refuses_a_range_that_is_not_one_float(lo, hi):
    """``onnx_params`` of a range of no values or of several let numpy's "truth value of an array is
    ambiguous" ValueError escape; an integer range, numpy's finfo ValueError."""
    import quantspec.calibrate as C
    from quantspec.errors import QuantSpecError

    with pytest.raises(QuantSpecError, match="calibrated"):
        C.onnx_params((lo, hi), "uint8")


@pytest.mark.parametrize("value", ["0", "-1"])
def test_fuzz_warmup_refuses_a_process_count_below_one(value, capsys):
    """``quantspec warmup --processes 0`` (or -1) started a full warmup (minutes) on one process
    per core, or one process, instead of refusing the count: exit status 2 and one error line,
    at once."""
    from quantspec.warmup import warmup
    from quantspec.errors import InvalidArgumentError

    t0 = time.perf_counter()
    try:
        code = main(["warmup", "--processes", value, "--spec", "equiv"])
    except SystemExit as e:
        code = e.code
    assert code == 2 and time.perf_counter() - t0 < 5
    assert "error: argument --processes: must be a positive integer" in capsys.readouterr().err
    with pytest.raises(InvalidArgumentError, match="processes"):
        warmup(("equiv",), int(value))


@pytest.mark.parametrize("symmetric", [True, False])
def test_fuzz_percentile_of_one_bin_is_refused_as_onnxruntime_fails(symmetric, tmp_path):
    """A one-bin percentile histogram: onnxruntime's calibrator fails (its result tuple holds
    ``hist[:2]``, one element short: it raises while formatting its own TypeError), and quantspec
    returned a range.  It now refuses, where a later call has not grown the histogram."""
    import quantspec.calibrate as C
    from quantspec.errors import InvalidArgumentError
    import test_calibrate as T

    refs.require("onnxruntime")
    data = [[np.array([0.945], np.float32)]]
    with pytest.raises(Exception):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            T._ort_calibrate(tmp_path, "Percentile", data, {"num_bins": 1, "symmetric": symmetric})
    with pytest.raises(InvalidArgumentError, match="num_bins"):
        C.PercentileObserver(num_bins=1, symmetric=symmetric).update(data[0][0]).range()


def test_fuzz_convert_with_an_option_missing_its_value_prints_one_error_line(tmp_path, capsys, monkeypatch):
    """``quantspec convert x.npy out --format -- compressed-tensors``: the pre-parser that finds SRC
    printed its own usage and "__main__.py: error: ..." line before the converter's: two error lines
    (found by the command-line fuzzer)."""
    np.save(tmp_path / "x.npy", np.zeros((2, 3), np.float32))
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["convert", "x.npy", "out.onnx", "--scheme", "mxfp4", "--format", "--", "compressed-tensors",
                     "--quiet"])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code == 2
    errors = [ln for ln in err.splitlines() if ": error:" in ln]
    assert len(errors) == 1 and errors[0].startswith("quantspec convert: error:"), err


@pytest.mark.parametrize("text", ["tf:Dequantize T=qint8 min=-1.42 max=inf mode=MIN_FIRST",
                                  "tf:QuantizeV2 T=qint8 min=-1.42 max=inf mode=MIN_FIRST"])
def test_fuzz_translate_of_an_infinite_range_is_refused(text):
    """``quantspec equiv --from "tf:Dequantize ... max=inf" --to onnx``: the source's grid has a NaN
    zero, and translate raised "cannot convert float NaN to integer" (a traceback from the command)."""
    import quantspec
    from quantspec.equiv import parse
    from quantspec.errors import QuantSpecError

    try:
        rec = parse(text)
    except QuantSpecError:
        return                       # refused when the record is made: nothing to translate
    with pytest.raises(QuantSpecError):
        quantspec.translate(rec, "onnx", inputs=None)


@pytest.mark.parametrize("extra", [{}, {"moving_average": True}, {"symmetric": True}])
def test_fuzz_minmax_of_empty_batches_is_onnxruntimes(extra, tmp_path):
    """An empty batch was refused by MinMaxObserver (ShapeError: 'onnxruntime's ReduceMin has no
    value'); onnxruntime's ReduceMin / ReduceMax of no value are +inf / -inf, and its calibrator
    goes on from there: the ranges must be its, byte for byte."""
    import quantspec.calibrate as C
    import test_calibrate as T

    refs.require("onnxruntime")
    empty = np.zeros((3, 0), np.float32)
    for groups in ([[empty]], [[empty, empty]], [[empty], [empty, empty]]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = T._ort_calibrate(tmp_path, "MinMax", groups, extra)
        obs = C.MinMaxObserver(**extra)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            r = T.observe(obs, groups)
        lo, hi = want.range_value
        assert r.lowest.tobytes() == np.asarray(lo).tobytes() and r.highest.tobytes() == np.asarray(hi).tobytes(), \
            (groups, extra, want.range_value, r)


def test_f6_reference_short_blocked_axis_of_an_empty_tensor():
    """compat="reference": onnx.reference expands a blocked scale by np.repeat then np.take of x's
    length, and numpy's take checks no index when its result is empty, so a blocked scale whose
    blocked axis is too short (even empty) is accepted for an empty x (another axis of length 0) and
    refused otherwise (found by a 20000-example fuzz run)."""
    import ml_dtypes

    import quantspec.onnx as O

    outcomes = set()
    for x_shape, s_shape in [((0, 5, 2), (0, 5, 0)), ((0, 5, 9), (0, 5, 1)), ((0, 5, 8), (0, 5, 2)),
                             ((1, 5, 9), (1, 5, 1)), ((1, 5, 8), (1, 5, 2)), ((2, 0, 6), (2, 0, 1))]:
        x = np.zeros(x_shape, np.int32)
        scale = np.full(s_shape, 0.5, np.float32)
        zp = np.zeros(s_shape, ml_dtypes.uint4)
        outcomes.add(_same_as_onnx_reference(
            "QuantizeLinear", lambda x=x, scale=scale, zp=zp: O.quantize_linear(x, scale, zp, axis=2, block_size=4,
                                                                               compat="reference"),
            x, scale, zp, axis=2, block_size=4))
    assert outcomes == {"refused", "equal"}


def test_fuzz_a_scale_beyond_the_precision_range_prints_no_warning():
    """QuantizeLinear with ``precision="float16"`` and a float32 scale beyond float16's range (1e30):
    the fast path's cast of the scale to the precision printed numpy's 'overflow encountered in cast'
    (found by a 20000-example fuzz run); the scale is inf in that precision, silently, on both paths,
    with the same codes."""
    import ml_dtypes

    import quantspec.onnx as O
    from quantspec._fastpath import jit

    x = np.array([-0.000114, 0.000225, 4.24e-05, -2.29e-05], ml_dtypes.bfloat16)
    s = np.array([9.5367431640625e-07, 9.5367431640625e-07, np.nan, 1e30], np.float32)
    zp = np.array([-73, 63, 86, 79], np.int8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = O.quantize_linear(x, s, zp, axis=-1, output_dtype="int8", precision="float16")
        with jit.reference_only():
            want = O.quantize_linear(x, s, zp, axis=-1, output_dtype="int8", precision="float16")
    assert got.tobytes() == want.tobytes() and got[3] == 79


@pytest.mark.parametrize("fmt", ["quantspec", "compressed-tensors"])
@pytest.mark.parametrize("damage", [{}, {"name": 7}, [], "nope"])
def test_fuzz_a_kept_tensor_record_without_a_stored_name_is_a_damaged_manifest(fmt, damage, tmp_path):
    """A manifest whose kept tensor's ``data`` record has no name (found by the 20000-example run:
    ``verify`` raised a bare KeyError): ``verify`` and ``open(...).codes`` say the manifest is damaged."""
    import json

    from quantspec import checkpoint
    from quantspec.errors import QuantSpecError, TensorFileError
    from safetensors.numpy import save_file

    src = tmp_path / "src.safetensors"
    save_file({"w": np.linspace(-1, 1, 64, dtype=np.float32).reshape(4, 16), "norm": np.ones(16, np.float32)},
              str(src))
    dst = tmp_path / "dst"
    checkpoint.convert(src, dst, "int8", format=fmt, progress=False)
    manifest = dst / "quantspec.json"
    doc = json.loads(manifest.read_text())
    kept = [r for r in doc["tensors"].values() if r.get("scheme") == "keep"] if isinstance(doc.get("tensors"), dict) \
        else [r for r in doc["tensors"] if r.get("scheme") == "keep"]
    assert kept, "the source's 1-D tensor is kept"
    for r in kept:
        r["data"] = damage
    manifest.write_text(json.dumps(doc))
    with pytest.raises(TensorFileError, match="damaged manifest|no stored tensor 'nope'"):
        checkpoint.verify(src, dst)
    with pytest.raises(QuantSpecError):
        checkpoint.open(dst).codes("norm")


def test_fuzz_a_model_whose_tensors_together_exceed_memory_is_refused_at_load(monkeypatch):
    """A damaged model can declare tensors that each fit in memory but not together (the .tflite
    fuzzer at 20000 examples met 0.3-1,700 GB in all, which filled the machine): the Interpreter
    refuses it when made, naming the bytes, instead of a run the system kills.  The bundled model's
    own tensors pass; with the limit set just below their sum (72 bytes), the same model is refused."""
    from quantspec._semantics import arrays
    from quantspec.litert import Interpreter

    data = example_bytes("mlp_softmax")
    model = load_model(data)
    sg = model.subgraphs[0]
    total = sum(int(np.prod(t.shape)) * t.dtype.dtype.itemsize for t in sg.tensors
                if t.data is None and t.dtype is not None)
    Interpreter(data)                                     # fits
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [total - 1])
    with pytest.raises(ModelError, match=f"declares tensors of {total} bytes"):
        Interpreter(data)

    def huge(obj):        # every activation 2^31 - 1 rows
        sub = obj.subgraphs[0]
        for t in sub.tensors:
            if obj.buffers[t.buffer].data is None and list(t.shape) and t.shape[0] == 1:
                t.shape = [(1 << 31) - 1] + list(t.shape[1:])
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [])
    grown = edit(data, huge)
    with pytest.raises(ModelError, match="more than this machine's memory"):
        Interpreter(grown)


def test_fuzz_onnx_check_of_a_scale_declaring_more_elements_than_any_array_is_a_quantspec_error():
    """A damaged .onnx model whose scale constant declares 3 x (2^31 - 1)^3 elements (found by the
    20000-example run: numpy's 'iterator is too large' ValueError escaped from ``check_model``, which
    broadcast a stand-in array to the declared shape): a quantspec error, from check and audit."""
    from onnx import TensorProto, helper

    import quantspec.onnx as qo
    from quantspec.errors import QuantSpecError

    s = TensorProto()
    s.name, s.data_type, s.raw_data = "s", TensorProto.FLOAT, b""
    s.dims.extend([3, 2**31 - 1, 2**31 - 1, 2**31 - 1])
    z = helper.make_tensor("z", TensorProto.INT8, [3], vals=np.zeros(3, np.int8).tobytes(), raw=True)
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [3, 4])], [s, z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    data = m.SerializeToString()
    with pytest.raises(QuantSpecError):
        onnxmodels.check_model(data)
    with pytest.raises(QuantSpecError):
        onnxmodels.audit(data, {"x": np.zeros((3, 4), np.float32)}, run=True, seed=1)
    # the same shape declared by a graph input (no data to read): a scale-shape finding naming it
    g = helper.make_graph([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                           helper.make_tensor_value_info("s", TensorProto.FLOAT, list(s.dims))],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, [3, 4])], [z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    report = onnxmodels.check_model(m.SerializeToString())
    found = [v for v in report.violations if v.rule == "scale-shape"]
    assert found and "a shape no tensor can have" in found[0].message, report
    # no element at all (a zero dimension), but numpy counts the others (about 2^93 here) and refuses
    g.input[1].type.tensor_type.shape.dim[0].dim_value = 0
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    report = onnxmodels.check_model(m.SerializeToString())
    found = [v for v in report.violations if v.rule == "scale-shape"]
    assert found and "a shape no tensor can have" in found[0].message, report
    # fewer elements than an int64 counts, more bytes than numpy allows (its "array is too big"
    # ValueError, mutant 38412 of the same run)
    g.input[1].type.tensor_type.shape.dim[1].dim_value = 1 << 60
    del g.input[1].type.tensor_type.shape.dim[2:]
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    report = onnxmodels.check_model(m.SerializeToString())
    found = [v for v in report.violations if v.rule == "scale-shape"]
    assert found and "a shape no tensor can have" in found[0].message, report


def test_fuzz_an_operator_whose_run_time_inputs_outgrow_memory_is_refused_before_it_runs(monkeypatch):
    """A damaged model whose run-time data grow a tensor far past its declared shape (the bundled
    mixed.tflite with RESIZE_BILINEAR's size constant set to 9 x 4194313: the 20000-example .tflite
    fuzzer met it, and the reference kernels' int64 working arrays took 10 GB, then the machine's
    out-of-memory killer ended the fuzzer): the next operator is refused with a ModelError naming the
    working memory, before it runs, where that passes the machine's memory (here set to 2 GiB)."""
    from litert_models import random_inputs

    from quantspec._semantics import arrays
    from quantspec.litert import Interpreter

    def grow(obj):
        sub = obj.subgraphs[0]
        t = next(t for t in sub.tensors if t.name.decode() == "ResizeBilinear/size")
        obj.buffers[t.buffer].data = list(np.array([9, 4194313], "<i4").view(np.uint8))
    model = load_model(edit(example_bytes("mixed"), grow))
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [2 << 30])
    with pytest.raises(ModelError, match=r"operator 1 \(PAD\): needs about .* of working memory"):
        Interpreter(model).run(random_inputs(model, 0))
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [])
    out = Interpreter(load_model(example_bytes("mixed"))).run(random_inputs(load_model(example_bytes("mixed")), 0))
    assert out[0].shape == (1, 8, 12, 12)


@pytest.mark.parametrize("shape", [[944111617, 1295271263, 51, 4], [1 << 30, 1 << 30, 1 << 4, 1]])
def test_fuzz_a_tensor_whose_size_overflows_64_bits_is_refused_as_litert_refuses_it(shape):
    """A tensor whose dimensions multiply past 2^64 elements (or bytes) counted as LiteRT's
    BytesRequired counts them: LiteRT refuses the model at load ("Tensor 7 is invalidly specified in
    schema"); check_model called it conformant (found by the 20000-example .tflite fuzzer, mutant
    21401 of mixed.tflite)."""
    def big(obj):
        obj.subgraphs[0].tensors[7].shape = shape
    data = edit(example_bytes("mixed"), big)
    reason = _litert_refuses(data)
    assert "overflowed" in reason or "invalidly specified" in reason, reason
    report = check_model(data)
    found = [v for v in report.violations if v.rule == "litert-load" and v.tensor_index == 7]
    assert not report.ok and found and "overflows 64 bits" in found[0].message, report
    assert check_model(example_bytes("mixed")).ok


@pytest.mark.parametrize("value", [np.array([0.0, 0.0], np.float32), np.float32(2.0), [1.0], None])
def test_fuzz_float8_params_of_something_that_is_not_a_range_is_refused(value):
    """``float8_params(np.array([0., 0.]))`` read the array's ``std`` method as a standard deviation
    (a TypeError escaped; found by the 20000-example run): anything but a calibrated range (or an
    observer) is an InvalidArgumentError naming ``calibrated``."""
    from quantspec.calibrate import float8_params
    from quantspec.errors import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="calibrated"):
        float8_params(value)


def test_fuzz_a_run_whose_grown_tensors_fill_half_the_memory_is_stopped(monkeypatch):
    """PAD's paddings constant of a damaged model set to 1000 on both spatial axes: the padded tensor
    (1 x 2012 x 2012 x 4 int8, 16 MB) fits a machine of 20 MB, but it leaves the run holding more than
    half of it, with the next operators still to run: the run stops there with a ModelError naming
    the bytes, before the next operator's working arrays (a chain of such operators filled the
    machine in the 20000-example .tflite run)."""
    from litert_models import random_inputs

    from quantspec._semantics import arrays
    from quantspec.litert import Interpreter

    def pad(obj):
        sub = obj.subgraphs[0]
        t = next(t for t in sub.tensors if t.name.decode() == "Pad/paddings")
        obj.buffers[t.buffer].data = list(np.array([0, 0, 1000, 1000, 1000, 1000, 0, 0], "<i4").view(np.uint8))
    model = load_model(edit(example_bytes("mixed"), pad))
    monkeypatch.setattr(arrays, "_MEMORY_LIMIT", [20 << 20])
    with pytest.raises(ModelError, match=r"operator 1 \(PAD\): leaves this run holding"):
        Interpreter(model).run(random_inputs(model, 0))
