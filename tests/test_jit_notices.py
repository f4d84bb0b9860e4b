"""What quantspec says about its fast kernels: once, on stderr, and only when it matters.

- numba that cannot be imported: every call takes the reference path (the same bytes), and the
  reason is said once (not when QUANTSPEC_FAST=0 asked for the reference path);
- the command line says once that it compiles kernels for this machine;
- ``quantspec warmup`` compiles each kernel form (serial, parallel, streamed) of the calls it runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from quantspec.cli import main

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import numpy as np, quantspec.onnx as qo, quantspec.tf as qtf
from quantspec._fastpath import jit
x = np.linspace(-3, 3, 5001, dtype=np.float32)
a = qo.quantize_linear(x, np.float32(0.05), np.int8(1))
b = qo.quantize_linear(x, np.float32(0.07), np.uint8(9))
c = qtf.quantize(x, -3.0, 3.0, "qint8")[0]
print(jit.enabled(), a.tobytes().hex()[:64], b.sum(), c.sum())
"""


def _run(code: str, env_extra: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("QUANTSPEC_FAST", "NUMBA_CACHE_DIR")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)


def test_numba_that_cannot_be_imported(tmp_path):
    fake = tmp_path / "fake" / "numba"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('this numba was built for another numpy')\n")
    path = os.pathsep.join([str(tmp_path / "fake"), str(ROOT / "src")])
    broken = _run(CHILD, {"PYTHONPATH": path}, tmp_path)
    assert broken.returncode == 0, broken.stderr
    notes = [line for line in broken.stderr.splitlines() if line.startswith("quantspec:")]
    assert notes == ["quantspec: the fast kernels are off, every call runs on the numpy reference path "
                     "(the same results, slower): numba could not be imported (ImportError: this numba was "
                     "built for another numpy)"], broken.stderr
    assert broken.stdout.startswith("False ")
    reference = _run(CHILD, {"PYTHONPATH": str(ROOT / "src"), "QUANTSPEC_FAST": "0"}, tmp_path)
    assert reference.returncode == 0 and reference.stderr == ""            # asked for: nothing to say
    assert broken.stdout.split()[1:] == reference.stdout.split()[1:]       # the same results
    asked = _run(CHILD, {"PYTHONPATH": path, "QUANTSPEC_FAST": "0"}, tmp_path)
    assert asked.stderr == ""


def test_the_command_line_says_once_that_it_compiles(tmp_path):
    np.save(tmp_path / "w.npy", np.linspace(-1, 1, 3000, dtype=np.float32).reshape(60, 50))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT / "src"), NUMBA_CACHE_DIR=str(tmp_path / "cache"), QUANTSPEC_FAST="1")
    argv = [sys.executable, "-m", "quantspec", "quantize", "w.npy", "q.npz", "--spec", "onnx", "--scale", "0.01",
            "--output-dtype", "int4"]
    first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    notices = [line for line in first.stderr.splitlines() if "compiling fast kernels" in line]
    assert len(notices) == 1 and "quantspec warmup" in notices[0] and str(tmp_path / "cache") in notices[0]
    again = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert again.returncode == 0 and "compiling" not in again.stderr      # cached: nothing compiles


def test_warmup_compiles_every_form(monkeypatch):
    from quantspec import onnx as qo
    from quantspec import warmup
    from quantspec._fastpath import jit

    if not jit.enabled():
        pytest.skip("no fast path here")
    x = np.linspace(-2, 2, 3000, dtype=np.float32)
    monkeypatch.setattr(warmup, "_JOBS", {"onnx": lambda: iter([lambda: qo.quantize_linear(x, np.float32(0.03),
                                                                                            np.int16(5))])})
    kernels = warmup._run(warmup.jobs(("onnx",)))
    plain = [k for k in kernels if "fastmap._plain" in k and "uint16" in k]
    streamed = [k for k in kernels if "fastmap._streamed" in k and "uint16" in k]
    assert plain and streamed, kernels
    assert warmup.SPECS == ("onnx", "tf", "litert")


def test_the_notice_ends_with_the_command(tmp_path, monkeypatch, capsys):
    """An in-process command (``quantspec.cli.main``) announces compiles only while it runs, and a
    notice whose stream has been closed since breaks nothing (the notice used to keep the command's
    stderr after it returned, and a later compile in library code died on it: 'I/O operation on
    closed file')."""
    import io

    from quantspec import cli
    from quantspec._fastpath import jit

    monkeypatch.chdir(tmp_path)
    assert cli.main(["example", "ex"]) == 0
    assert jit._ANNOUNCE is None                    # off again once the command returned
    stream = io.StringIO()
    with jit.announce_compiles(stream):
        stream.close()
        jit._announce()                             # a closed stream: nothing raised
    assert jit._ANNOUNCE is None


def test_warmup_lists_kernels_beside_dead_weak_references():
    """``quantspec warmup`` lists the kernels it compiled from quantspec's own registry, not by scanning
    every object of the process (a dead weak proxy there raised ReferenceError)."""
    import weakref

    from quantspec import warmup
    from quantspec._fastpath import jit

    if not jit.enabled():
        pytest.skip("no fast path here")

    class Thing:
        pass

    t = Thing()
    proxies = [weakref.proxy(t)]
    del t
    assert isinstance(warmup._jitted(), set)
    assert proxies


def test_warmup_covers_calibrate_checkpoint_and_equiv():
    """``quantspec warmup`` also runs the calibration observers, a checkpoint conversion (and verify)
    under every scheme, and translations between the specs: each of those jobs runs cleanly (no
    quantspec error swallowed, no warning), and compiles its group's own kernels."""
    import warnings

    from quantspec import checkpoint, warmup
    from quantspec._fastpath import jit

    if not jit.enabled():
        pytest.skip("no fast path here")
    assert warmup.GROUPS == ("onnx", "tf", "litert", "calibrate", "checkpoint", "equiv")
    assert {spec for spec, _ in warmup.jobs()} == set(warmup.GROUPS)
    ckpt = list(warmup._JOBS["checkpoint"]())
    assert len(ckpt) == 3 * len(checkpoint.SCHEMES) + 9         # and three presets in the three types
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for job in warmup._JOBS["calibrate"]():
            job()
        for job in warmup._JOBS["equiv"]():
            job()
        for s in range(len(checkpoint.SCHEMES)):       # each scheme from one of the three source types
            ckpt[3 * s + s % 3]()
        for job in ckpt[3 * len(checkpoint.SCHEMES):]:
            job()
    kernels = warmup._jitted()
    for module in ("quantspec.calibrate._jitted", "quantspec.checkpoint._jitted", "quantspec.equiv._jitted",
                   "quantspec.checkpoint._jitted_ct"):
        assert any(k.startswith(module) for k in kernels), module


@pytest.mark.parametrize("value", ["0", "-1"])
def test_warmup_refuses_a_process_count_below_one(value, capsys):
    """Found by fuzzing the command line: ``quantspec warmup --processes 0`` (or -1) started a full warmup (minutes) on one process
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
