"""``compat="onnxruntime"`` reproduces each onnxruntime release of ``quantspec.onnx.plan.ORT_VERSIONS``.

- The locked environment holds one release (1.31.1); the onnxruntime tests of
  tests/test_onnx_conformance.py and tests/test_onnx_divergences.py compare against the installed
  one with ``ort_version=`` its version.  :func:`test_conformance_against_the_other_release` runs
  them again in a subprocess whose ``PYTHONPATH`` puts another release first: the directory in
  ``QUANTSPEC_ORT_ALT`` (``pip install --target DIR onnxruntime==1.32.0``; ``./dev test`` makes it).
  Without the variable the test is skipped, or fails under ``QUANTSPEC_REQUIRE_REFERENCES=1``.
- ``ort_version`` argument checks and its default.
- Hand-picked inputs whose 1.31.1 and 1.32.0 results differ, each with the values both releases
  were measured to give; checked against the installed onnxruntime too (so against both releases,
  with the subprocess run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import onnx_oracles as O
from refs import REQUIRE
from quantspec import onnx as qo
from quantspec.dtypes import qtype
from quantspec.errors import InvalidArgumentError, QuantSpecError, RuntimeUnsupportedError
from quantspec.onnx import plan as P

ROOT = Path(__file__).resolve().parents[1]
RELEASES = [r.version for r in P.ORT_VERSIONS]


# -- the other release, in a subprocess --------------------------------------------------------------
_VERSION = "import onnxruntime, sys; sys.stdout.write(onnxruntime.__version__)"


def _alt_env(alt: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "PYTHONPATH"))}
    env["PYTHONPATH"] = alt + os.pathsep + str(ROOT / "src")
    return env


def test_conformance_against_the_other_release():
    alt = os.environ.get("QUANTSPEC_ORT_ALT")
    if not alt:
        message = ("QUANTSPEC_ORT_ALT is not set: it names a directory holding another onnxruntime release "
                   "(pip install --target DIR onnxruntime==1.32.0)")
        if REQUIRE:
            pytest.fail(message + " (QUANTSPEC_REQUIRE_REFERENCES=1: a missing runtime is a failure)")
        pytest.skip(message)
    env = _alt_env(alt)
    v = subprocess.run([sys.executable, "-c", _VERSION], env=env, capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, f"onnxruntime does not import from {alt}: {v.stderr[-2000:]}"
    assert v.stdout in RELEASES, f"{alt} holds onnxruntime {v.stdout}, which quantspec does not reproduce"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                          "tests/test_onnx_conformance.py", "tests/test_onnx_divergences.py", "tests/test_onnx_ort_versions.py",
                          "-k", "onnxruntime or runtimes_do_what_the_table_says or installed"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, f"onnxruntime {v.stdout}: {tail}"
    assert re.search(r"\d+ passed", summary) and not re.search(r"\d+ (failed|error|skipped)", summary), tail


# -- ort_version -------------------------------------------------------------------------------------
X = np.array([1.5, 2.5, -7.25], np.float32)


@pytest.mark.parametrize("value", ["1.30.0", "1.31.0", "1.32.1", "1", "1.31.1rc1", "latest", "", 1.31, 132, True,
                                   ("1", "31")])
def test_an_unknown_ort_version_is_an_invalid_argument(value):
    with pytest.raises(InvalidArgumentError, match="ort_version: must be one of '1.31.1', '1.32.0'"):
        qo.quantize_linear(X, np.float32(1), compat="onnxruntime", ort_version=value)
    with pytest.raises(InvalidArgumentError, match="ort_version: must be one of"):
        qo.dequantize_linear(np.int8([1, 2]), np.float32(1), compat="onnxruntime", ort_version=value)
    with pytest.raises(InvalidArgumentError, match="ort_version: must be one of"):
        qo.plan_quantize(X, np.float32(1), compat="onnxruntime", ort_version=value)
    with pytest.raises(InvalidArgumentError, match="ort_version: must be one of"):
        qo.QuantizeLinearOp(0.5, compat="onnxruntime", ort_version=value)


@pytest.mark.parametrize("compat", ["spec", "reference"])
def test_ort_version_with_another_compat_mode_is_an_invalid_argument(compat):
    with pytest.raises(InvalidArgumentError, match="ort_version: is only meaningful with compat=\"onnxruntime\""):
        qo.quantize_linear(X, np.float32(1), compat=compat, ort_version="1.32.0")
    with pytest.raises(InvalidArgumentError, match="ort_version: is only meaningful"):
        qo.dequantize_linear(np.int8([1, 2]), np.float32(1), compat=compat, ort_version="1.31")
    with pytest.raises(InvalidArgumentError, match="ort_version: is only meaningful"):
        qo.plan_dequantize(np.int8([1, 2]), np.float32(1), compat=compat, ort_version="1.31")
    with pytest.raises(InvalidArgumentError, match="ort_version: is only meaningful"):
        qo.DequantizeLinearOp(0.5, compat=compat, ort_version="1.31")


@pytest.mark.parametrize("name,version", [("1.31.1", "1.31.1"), ("1.31", "1.31.1"), (" 1.31 ", "1.31.1"),
                                          ("1.32.0", "1.32.0"), ("1.32", "1.32.0")])
def test_ort_version_names_a_release(name, version):
    assert qo.plan_quantize(X, np.float32(1), compat="onnxruntime", ort_version=name).ort.version == version
    assert qo.plan_dequantize(np.int8([1]), np.float32(1), compat="onnxruntime", ort_version=name).ort.version == version
    op = qo.QuantizeLinearOp(0.5, compat="onnxruntime", ort_version=name)
    assert op.ort_version == version and f"ort_version={version}" in op.spec_string()
    assert P.ort_support(name) is P.ort_support(version)


@pytest.mark.parametrize("installed,want", [("1.31.1", "1.31.1"), ("1.32.0", "1.32.0"), ("1.31.0", "1.32.0"),
                                            ("1.33.0", "1.32.0"), (None, "1.32.0")])
def test_the_default_is_the_installed_release_else_the_newest(monkeypatch, installed, want):
    monkeypatch.setattr(P, "installed", lambda name: installed if name == "onnxruntime" else None)
    assert P.ort_support(None).version == want
    assert qo.plan_quantize(X, np.float32(1), compat="onnxruntime").ort.version == want
    assert qo.plan_quantize(X, np.float32(1)).ort is None             # other modes have no row


def test_the_installed_release_is_reproduced_by_default():
    version = O.ort_version()
    assert qo.plan_quantize(X, np.float32(1), compat="onnxruntime").ort.version == version


def test_cached_plans_keep_their_release():
    x = np.array([1.5, np.inf], np.float16)
    s = np.float16(1 / 3)
    for _ in range(2):                                  # the second round comes from the plan cache
        assert qo.quantize_linear(x, s, output_dtype="int8", compat="onnxruntime", ort_version="1.31").tolist() == [5, -128]
        assert qo.quantize_linear(x, s, output_dtype="int8", compat="onnxruntime", ort_version="1.32").tolist() == [4, 127]


def test_the_rows_are_data():
    """One row per release; the 1.32.0 flags are the measured differences."""
    old, new = P.ort_support("1.31"), P.ort_support("1.32")
    assert (old.precision_since, old.mixed_types, old.plain_loop, old.empty_block_crash) == (None, False, True, True)
    assert (new.precision_since, new.mixed_types, new.plain_loop, new.empty_block_crash) == (23, True, False, False)
    assert (old.max_opset, new.max_opset, old.max_version, new.max_version) == (26, 28, 25, 25)
    assert P.ORT is P.ORT_VERSIONS[-1]


# -- inputs whose 1.31.1 and 1.32.0 results differ ---------------------------------------------------
ERR = "error"


@dataclass(frozen=True)
class Case:
    key: str
    why: str
    x: tuple
    x_type: str
    scale: object
    scale_type: str
    out: str
    v131: object                 # codes (float8: bit patterns), or ERR
    v132: object
    zp: object = None
    attrs: dict = field(default_factory=dict)
    shape: tuple | None = None
    scale_shape: tuple = ()
    opset: int = 25
    crashes: tuple = ()          # releases that kill the process on this input (never run there)


INF, NAN = float("inf"), float("nan")

CASES = [
    Case("f16-tie", "float16 x / float16 scale: 1.31 divides in float32 (4.5011 -> 5), 1.32 in float16 (4.5, to even 4)",
         (1.5,), "float16", 1 / 3, "float16", "int8", (5,), (4,)),
    Case("f16-inf-nan", "float16 x: 1.31's plain loop (x86 cast: INT32_MIN), 1.32 clamps in float",
         (INF, -INF, NAN), "float16", 1.0, "float16", "int8", (-128, -128, -128), (127, -128, -128)),
    Case("f16-nan-int16-negative-zp", "1.31: INT32_MIN - 3 wraps to 2^31 - 3 -> qmax; 1.32: NaN -> qmin",
         (NAN,), "float16", 1.0, "float16", "int16", (32767,), (-32768,), zp=-3),
    Case("precision-float16", "1.31 ignores precision (108.516 -> 109); 1.32 divides in float16 (108.5 -> 108)",
         (180.86685180664062,), "float", 1.6666924953460693, "float", "uint8", (109,), (108,), zp=0,
         attrs={"precision": "float16"}),
    Case("precision-float16-per-axis", "per-axis uint8, zp 131: x/s = 6.5000005 in float32, 6.5 (to even 6) in float16",
         (5.2000003, -1.0), "float", (0.8, 0.5), "float", "uint8", (138, 129), (137, 129), zp=(131, 131),
         attrs={"precision": "float16", "axis": 0}, shape=(2, 1), scale_shape=(2,)),
    Case("precision-bfloat16", "1.31 ignores precision; 1.32 refuses bfloat16", (180.86685180664062,), "float",
         1.6666924953460693, "float", "uint8", (109,), ERR, zp=0, attrs={"precision": "bfloat16"}),
    Case("mixed-types", "float32 x, float16 scale: 1.31 fails at run time, 1.32 divides in float16", (164.11521911621094,),
         "float", 0.8662109375, "float16", "uint8", ERR, (190,), zp=0),
    Case("int2-huge", "2-bit outputs: 1.31's plain loop (INT32_MIN -> -2), 1.32 clamps in float", (3e9, INF, -1e10),
         "float", 1.0, "float", "int2", (-2, -2, -2), (1, 1, -2)),
    Case("int4-odd-edges", "per-axis int4, channels of 9: 1.31 casts the odd head/tail element (-8)", (INF,) * 18,
         "float", (1.0, 1.0), "float", "int4", (7,) * 8 + (-8, -8) + (7,) * 8, (7,) * 18, attrs={"axis": 0},
         shape=(2, 9), scale_shape=(2,)),
    Case("blocked-non-last-axis", "1.31 quantizes blocks along a non-last axis in its plain loop", (INF,) * 6, "float",
         (1.0,) * 4, "float", "int8", (-128,) * 6, (127,) * 6, attrs={"axis": 0, "block_size": 2}, shape=(3, 2),
         scale_shape=(2, 2), opset=21),
    Case("f16-float8", "the float16 quotient 76.0 ties to 80 (0x6a); 1.31's float32 75.98 rounds to 72 (0x69)",
         (117.6875,), "float16", 1.548828125, "float16", "float8e4m3fn", (0x69,), (0x6A,)),
    Case("e5m2fnuz-saturate-0", "precision float16: 61439 rounds to 61440, beyond e5m2fnuz's range: NaN (0x80) with "
         "saturate=0; 1.31's float32 61439 rounds down to the largest finite 57344 (0x7f)", (61439.0,), "float", 1.0,
         "float", "float8e5m2fnuz", (0x7F,), (0x80,), attrs={"precision": "float16", "saturate": 0}),
    Case("empty-blocked-axis", "1.31 dies of SIGFPE; 1.32 returns the empty result", (), "float", (), "float", "uint8",
         ERR, (), attrs={"axis": 1, "block_size": 2}, shape=(3, 0), scale_shape=(3, 0), crashes=("1.31.1",)),
    Case("opset-27", "1.31 loads ai.onnx up to opset 26; 1.32 up to 28 (opset 27 runs QuantizeLinear-25)", (1.5,),
         "float", 1.0, "float", "uint8", ERR, (2,), opset=27),
]


def _inputs(c: Case):
    xt, st = qtype(c.x_type), qtype(c.scale_type)
    x = np.array(c.x, np.float64).astype(np.float32).astype(xt.dtype)
    x = x.reshape(c.shape) if c.shape else x
    s = np.array(c.scale, np.float64).astype(np.float32).astype(st.dtype).reshape(c.scale_shape)
    zp = None if c.zp is None else np.array(c.zp).astype(qtype(c.out).dtype).reshape(c.scale_shape)
    return x, s, zp


def _codes(y: np.ndarray) -> tuple:
    t = qtype(y.dtype)
    flat = np.asarray(y).reshape(-1)
    return tuple(int(v) for v in (flat.astype(np.int64) if t.is_int else flat.view(np.uint8)))


def _quantspec(c: Case, version: str):
    x, s, zp = _inputs(c)
    kw = dict(c.attrs)
    if zp is None:
        kw["output_dtype"] = c.out
    try:
        return _codes(qo.quantize_linear(x, s, zp, opset=c.opset, compat="onnxruntime", ort_version=version, **kw))
    except QuantSpecError:
        return ERR


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.key)
def test_the_releases_differ_on_these_inputs(c):
    assert c.v131 != c.v132
    assert _quantspec(c, "1.31.1") == c.v131, c.why
    assert _quantspec(c, "1.32.0") == c.v132, c.why
    assert _quantspec(c, "1.31") == c.v131 and _quantspec(c, "1.32") == c.v132


_DIES = """
import sys
sys.path[:0] = [{tests!r}, {support!r}]
import numpy as np
import onnx_oracles as O
import test_onnx_ort_versions as T
c = next(c for c in T.CASES if c.key == {key!r})
x, s, zp = T._inputs(c)
attrs = dict(c.attrs)
if zp is None:
    attrs["output_dtype"] = T.qtype(c.out).onnx
O.ort("QuantizeLinear", c.opset, x, s, zp, out_type=c.out, **attrs)
print("ran")
"""


def _assert_the_runtime_dies(c):
    """The installed release kills the process on this input (so quantspec refuses it): measured in a
    subprocess, which must end by a signal."""
    p = subprocess.run([sys.executable, "-c", _DIES.format(tests=str(Path(__file__).parent), support=str(Path(__file__).parent / "support"), key=c.key)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode < 0, (p.returncode, p.stdout[-500:], p.stderr[-2000:])


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.key)
def test_the_installed_onnxruntime_gives_its_column(c):
    """The measured values, against the installed release (the subprocess run checks the other)."""
    version = O.ort_version()
    if version in c.crashes:
        _assert_the_runtime_dies(c)
        return
    x, s, zp = _inputs(c)
    attrs = {k: (qtype(v).onnx if k == "precision" else v) for k, v in c.attrs.items()}
    if zp is None:
        attrs["output_dtype"] = qtype(c.out).onnx
    try:
        with np.errstate(all="ignore"):
            got = _codes(O.ort("QuantizeLinear", c.opset, x, s, zp, out_type=c.out, **attrs))
    except Exception:
        got = ERR
    assert got == {"1.31.1": c.v131, "1.32.0": c.v132}[version], c.why


def test_the_fast_and_reference_paths_agree_on_these_inputs(monkeypatch):
    for c in CASES:
        for version in RELEASES:
            fast = _quantspec(c, version)
            monkeypatch.setenv("QUANTSPEC_FAST", "0")
            ref = _quantspec(c, version)
            monkeypatch.delenv("QUANTSPEC_FAST")
            assert fast == ref, (c.key, version)


def test_the_empty_blocked_axis_refusal_names_the_release():
    x, s = np.zeros((3, 0), np.float32), np.ones((3, 0), np.float32)
    with pytest.raises(RuntimeUnsupportedError, match="onnxruntime 1.31 crashes the process"):
        qo.quantize_linear(x, s, axis=1, block_size=2, compat="onnxruntime", ort_version="1.31")
    assert qo.quantize_linear(x, s, axis=1, block_size=2, compat="onnxruntime", ort_version="1.32").shape == (3, 0)


# -- the command line ---------------------------------------------------------------------------------
@pytest.mark.parametrize("version,want", [("1.31", [81, 0]), ("1.32.0", [82, 255])])
def test_the_command_line_takes_ort_version(tmp_path, version, want):
    """float16 112.375 / 1.37890625 (a float16 tie that 1.32 divides in float16, 1.31 in float32) and
    +inf (1.31's float16 path casts it to INT32_MIN -> 0; 1.32 clamps to 255)."""
    from quantspec.cli import main

    np.save(tmp_path / "x.npy", np.array([112.375, np.inf], np.float16))
    argv = ["quantize", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--spec", "onnx", "--scale", "1.37890625",
            "--scale-dtype", "float16", "--output-dtype", "uint8", "--compat", "onnxruntime", "--ort-version", version]
    assert main(argv) == 0
    assert np.load(tmp_path / "y.npy").tolist() == want


def test_the_command_line_refuses_an_unknown_ort_version(tmp_path, capsys):
    from quantspec.cli import main

    np.save(tmp_path / "x.npy", np.array([1.0], np.float32))
    argv = ["quantize", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--spec", "onnx", "--scale", "1",
            "--output-dtype", "int8", "--compat", "onnxruntime", "--ort-version", "1.30"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "ort_version: must be one of '1.31.1', '1.32.0'" in err and "Traceback" not in err
    assert not (tmp_path / "y.npy").exists()
