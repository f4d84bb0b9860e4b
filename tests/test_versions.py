"""Versions: the locked test environment, `quantspec versions`, the unverified-version warning, and
compat="reference" under each ml_dtypes whose float-to-integer cast onnx.reference computes through."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refs import REQUIRE, locked, require
from quantspec import versions
from quantspec.cli import main

ROOT = Path(__file__).resolve().parents[1]


def _alt(variable: str) -> str:
    """The directory ./dev test installs another version of a dependency into (requirements/alt.txt)."""
    path = os.environ.get(variable)
    if not path or not Path(path).is_dir():
        message = f"{variable} does not name an install of requirements/alt.txt (./dev test sets it)"
        if REQUIRE:
            pytest.fail(message + " (QUANTSPEC_REQUIRE_REFERENCES=1)")
        pytest.skip(message)
    return path


# -- the lock -----------------------------------------------------------------------------------
def test_the_lock_pins_every_package_at_one_exact_version():
    pins = locked()
    assert len(pins) > 50
    for name in ("numpy", "ml-dtypes", "numba", "onnx", "onnxruntime", "tensorflow-cpu", "ai-edge-litert",
                 "compressed-tensors", "torch"):
        assert name in pins, name


@pytest.mark.parametrize("name", [r.distribution for r in versions.LIBRARIES + versions.RUNTIMES])
def test_the_environment_is_the_lock_and_the_lock_is_verified(name):
    """The suite runs on the lock's versions, and each runtime's is one quantspec lists as verified
    (so the conformance suites that just ran are what verified it)."""
    if name == "llmcompressor":
        # the oracle's own environment (requirements/llmcompressor.txt): llm-compressor and the
        # compressed-tensors its release requires
        import llmc

        got = llmc.llmc_versions()
        lock = dict(line.split("==", 1) for line in (Path(__file__).parents[1] / "requirements" /
                                                      "llmcompressor.txt").read_text().splitlines()
                    if "==" in line and not line.startswith("#"))
        for dist in ("llmcompressor", "compressed-tensors"):
            assert got[dist] == lock[dist] and versions.is_verified(dist, lock[dist]), dist
        return
    if name in ("onnx", "onnxruntime", "tensorflow-cpu", "ai-edge-litert", "compressed-tensors"):
        require({"tensorflow-cpu": "tensorflow", "ai-edge-litert": "ai_edge_litert.interpreter",
                 "compressed-tensors": "compressed_tensors"}.get(name, name))
    lock = locked()[name.replace("_", "-")]
    assert versions.installed(name) == lock
    assert versions.is_verified(name, lock)


# -- quantspec versions ---------------------------------------------------------------------------
def test_versions_command_lists_each_runtime_and_the_fast_path(capsys):
    assert main(["versions"]) == 0
    out = capsys.readouterr().out
    for r in versions.LIBRARIES + versions.RUNTIMES:
        assert r.distribution in out
        installed = versions.installed(r.distribution)
        if installed:
            assert installed in out
    assert "fast path: " in out and "compile cache: " in out


def test_versions_json_is_the_report(capsys):
    assert main(["versions", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in rep["libraries"] + rep["runtimes"]]
    assert names == [r.distribution for r in versions.LIBRARIES + versions.RUNTIMES]
    numpy_row = rep["libraries"][0]
    assert numpy_row["installed"] == np.__version__
    assert numpy_row["verified"] is versions.is_verified("numpy")
    assert isinstance(rep["fast_path"]["enabled"], bool) and rep["fast_path"]["cache_dir"]


def test_versions_command_refuses_an_unknown_option(capsys):
    with pytest.raises(SystemExit) as e:
        main(["versions", "--yaml"])
    assert e.value.code == 2


def test_version_tuple():
    assert versions.version_tuple("1.31.1") == (1, 31, 1)
    assert versions.version_tuple("2.13.0+cpu") == (2, 13, 0)
    assert versions.version_tuple("0.7.0rc1") == (0, 7, 0)
    assert versions.is_verified("onnx", "1.23.2") and not versions.is_verified("onnx", "1.22.0")
    assert not versions.is_verified("onnx", "1.23")


# -- the warning ----------------------------------------------------------------------------------
_WARN_SCRIPT = r"""
import warnings, numpy as np
from quantspec import versions
versions.VERIFIED[{name!r}] = ("0.0.1",)          # the installed version is now not a verified one
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        {call}
print("WARNINGS", len([w for w in caught if issubclass(w.category, versions.UnverifiedVersionWarning)]))
for w in caught:
    print("TEXT", w.message)
"""

_CALLS = {
    "onnxruntime": "import quantspec; quantspec.onnx.quantize_linear(np.float32([1.5]), np.float32(1), np.int8(0), "
                   "compat='onnxruntime')",
    "onnx": "import quantspec; quantspec.onnx.quantize_linear(np.float32([1.5]), np.float32(1), np.int8(0), "
            "compat='reference')",
    "tensorflow-cpu": "import quantspec; quantspec.tf.quantize(np.array([1.0], np.float32), -1.0, 1.0, 'qint8')",
    "ai-edge-litert": "import quantspec, importlib.resources as r; "
                      "quantspec.litert.Interpreter(r.files('quantspec') / 'data' / 'cnn.tflite')",
    "compressed-tensors": "from quantspec.checkpoint.ctlayout import CompressedTensorsFormat; CompressedTensorsFormat()",
}


@pytest.mark.parametrize("name", sorted(_CALLS))
def test_an_unverified_installed_version_warns_once_per_process(name):
    version = versions.installed(name)
    if version is None:
        require({"tensorflow-cpu": "tensorflow", "compressed-tensors": "compressed_tensors",
                 "ai-edge-litert": "ai_edge_litert.interpreter"}.get(name, name))
    out = subprocess.run([sys.executable, "-c", _WARN_SCRIPT.format(name=name, call=_CALLS[name])],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "WARNINGS 1" in out.stdout, out.stdout + out.stderr
    assert f"{name} {version} is installed" in out.stdout
    assert "0.0.1" in out.stdout


def test_a_verified_or_missing_version_does_not_warn(monkeypatch, recwarn):
    monkeypatch.setattr(versions, "_warned", set())
    versions.note_reproducing("numpy")                   # installed and verified
    versions.note_reproducing("no-such-runtime")          # not installed: nothing to compare
    assert not [w for w in recwarn if issubclass(w.category, versions.UnverifiedVersionWarning)]


def test_note_reproducing_warns_once(monkeypatch):
    monkeypatch.setattr(versions, "_warned", set())
    monkeypatch.setitem(versions.VERIFIED, "numpy", ("0.0.1",))
    with pytest.warns(versions.UnverifiedVersionWarning, match=f"numpy {np.__version__} is installed"):
        versions.note_reproducing("numpy")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        versions.note_reproducing("numpy")               # the second time: silent


# -- compat="reference" follows the installed ml_dtypes ------------------------------------------
_BF16_SCRIPT = r"""
import json, ml_dtypes, numpy as np, onnx
from onnx import helper, TensorProto
from onnx.reference import ReferenceEvaluator
import quantspec
x = np.array([np.inf, -np.inf, np.nan, 1e30, -1e30, 3e9, 2.5, -126.0], np.float32).astype(ml_dtypes.bfloat16)
s = np.array(1.0, ml_dtypes.bfloat16)
out = {}
for zp in (np.int8(-2), np.uint8(3), np.int16(5)):
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    t = helper.np_dtype_to_tensor_dtype(zp.dtype)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [8]),
                                        helper.make_tensor_value_info("s", TensorProto.BFLOAT16, []),
                                        helper.make_tensor_value_info("z", t, [])],
                          [helper.make_tensor_value_info("y", t, [8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    want = ReferenceEvaluator(m).run(None, {"x": x, "s": s, "z": np.asarray(zp)})[0]
    got = quantspec.onnx.quantize_linear(x, s, zp, compat="reference")
    out[str(zp.dtype)] = [want.tolist(), got.tolist()]
print(json.dumps({"ml_dtypes": ml_dtypes.__version__, "results": out}))
"""


def _bf16_run(pythonpath: str | None) -> dict:
    require("onnx.reference")
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _BF16_SCRIPT], capture_output=True, text=True, env=env,
                         timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_reference_bfloat16_edges_agree_with_onnx_reference_under_both_ml_dtypes():
    """The same inputs under ml_dtypes 0.7 (the lock) and 0.6 (requirements/alt.txt): onnx.reference's
    codes for inf, NaN and huge bfloat16 quotients differ between the two, and quantspec follows each."""
    new = _bf16_run(None)
    old = _bf16_run(_alt("QUANTSPEC_ML_DTYPES_ALT"))
    assert new["ml_dtypes"] == locked()["ml-dtypes"] and old["ml_dtypes"] == "0.6.0"
    for run in (new, old):
        for zp, (want, got) in run["results"].items():
            assert got == want, (run["ml_dtypes"], zp)
    # the oracle itself moved: +inf with zero point -2 is 0 - 2 = -2 under 0.7, INT32_MIN + wrap -> 127 under 0.6
    assert new["results"]["int8"][0][0] == -2 and old["results"]["int8"][0][0] == 127


def test_reference_conformance_under_the_other_ml_dtypes():
    """The whole compat="reference" conformance corpus against onnx.reference with ml_dtypes 0.6.0 in a
    subprocess (the in-process suite runs it with the lock's ml_dtypes)."""
    env = dict(os.environ, PYTHONPATH=_alt("QUANTSPEC_ML_DTYPES_ALT") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "tests/test_onnx_conformance.py", "-k", "reference",
                          "tests/test_versions.py::test_ml_dtypes_in_this_process"],
                         capture_output=True, text=True, env=env, timeout=900, cwd=ROOT)
    tail = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-2000:]
    assert out.returncode == 0 and " passed" in tail and "failed" not in tail and "skipped" not in tail, \
        out.stdout[-4000:] + out.stderr[-2000:]


def test_ml_dtypes_in_this_process():
    """Says which ml_dtypes the conformance ran with (the subprocess above asserts it is the other one)."""
    import ml_dtypes

    alt = os.environ.get("QUANTSPEC_ML_DTYPES_ALT")
    expected = "0.6.0" if alt and os.environ.get("PYTHONPATH", "").startswith(alt) else locked()["ml-dtypes"]
    assert ml_dtypes.__version__ == expected
    assert versions.ml_dtypes_invalid_int() == (0 if versions.version_tuple(expected) >= (0, 7) else -(2 ** 31))
