"""What fuzzing of the public API, the model reader and the CLI found, one test (or a few) per
finding; each failed before its fix.  The fuzzers themselves are the ``test_fuzz_*`` files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import refs
from litert_models import example_bytes, edit
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
    from quantspec._core import tensorio
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


def _interrupted_write(tmp_path: Path, sig: int, suffix: str) -> tuple[int, set[str], str]:
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / f"y{suffix}"
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""), QUANTSPEC_FAST="0")
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, "quantize", str(tmp_path / "x.npy"), str(out),
                          "--spec", "onnx", "--scale", "0.01", "--output-dtype", "int8"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
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
    from quantspec._core import tensorio

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
