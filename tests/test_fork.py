"""quantspec in a process forked after its thread pool has started (multiprocessing's default start
method on Linux, a PyTorch DataLoader worker, ...).

A forked child has none of its parent's threads.  quantspec's pool (quantspec._fastpath.pool) makes the
child its own helpers on its first parallel call (GNU OpenMP, which numba's parallel kernels used,
could not run in such a child at all: numba terminated the child, and a ``multiprocessing.Pool``
waited forever).  The child must compute the same bytes as the parent, in parallel, for every spec
and every kernel that runs in parallel for large arrays; numba's OpenMP pool is never started."""

from __future__ import annotations

import multiprocessing
import os
import sys

import ml_dtypes
import numpy as np
import pytest

from quantspec import litert as ql
from quantspec import onnx as qo
from quantspec import tf as qtf
from quantspec._fastpath import runner as core
from quantspec._fastpath import jit, pool

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")

N = (1 << 20) + 4099          # above every serial threshold (core.SERIAL_BELOW); odd


def _cases():
    rng = np.random.default_rng(7)
    x = rng.normal(0, 40, N).astype(np.float32)
    x[::97] = np.float32(0.5) * rng.integers(-300, 300, x[::97].size)        # ties
    q = rng.integers(-128, 128, N).astype(np.int8)
    x2 = x[: 1 << 20].reshape(1024, 1024)
    s_axis = np.linspace(0.5, 1.5, 1024).astype(np.float32)
    s_block = np.linspace(0.5, 1.5, x2.size // 32).astype(np.float32).reshape(x2.shape[0], -1)
    p = ql.QuantParams(np.array([0.7], np.float32), np.array([-3]))
    a = np.abs(np.resize(x, (17000, 63)))        # odd row length: int4 slices with edges
    s_odd = np.linspace(0.5, 1.5, a.shape[0]).astype(np.float32)
    return {
        "onnx Q per-tensor": lambda: qo.quantize_linear(x, np.float32(0.8), np.int8(3)),
        "onnx Q per-axis": lambda: qo.quantize_linear(x2, s_axis, axis=1),
        "onnx Q int4 blocked": lambda: qo.quantize_linear(x2, s_block, axis=1, block_size=32, output_dtype="int4"),
        "onnx Q int4 onnxruntime edges": lambda: qo.quantize_linear(
            a, s_odd, axis=0, output_dtype="int4", compat="onnxruntime"),
        "onnx Q packed int4": lambda: qo.quantize_linear_packed(x, np.float32(0.8), output_dtype="int4"),
        "onnx Q float8": lambda: qo.quantize_linear(x, np.float32(0.8), output_dtype=ml_dtypes.float8_e4m3fn),
        "onnx DQ": lambda: qo.dequantize_linear(q, np.float32(0.8), np.int8(3)),
        "tf QuantizeV2": lambda: qtf.quantize(x, -50.0, 60.0, "quint8", mode="MIN_FIRST")[0],
        "tf Dequantize": lambda: qtf.dequantize(q, -50.0, 60.0),
        "litert quantize": lambda: ql.quantize(x, p),
        "litert dequantize": lambda: ql.dequantize(q, p),
    }


def _helpers() -> int:
    """Helper threads this process has made (and still has)."""
    p = pool._POOL
    return sum(t.is_alive() for t in p._threads) if p._pid == os.getpid() else 0


def _child(conn):
    try:
        result = {name: f().tobytes() for name, f in _cases().items()}
        result["helpers"] = _helpers()
        conn.send(result)
    except BaseException as e:            # noqa: BLE001 - reported to the parent
        conn.send(repr(e))
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def two_threads(monkeypatch):
    monkeypatch.setenv(pool.ENV, "2")      # a helper, whatever the cores


def test_forked_child_computes_the_same_bytes():
    want = {name: f().tobytes() for name, f in _cases().items()}       # starts the pool here
    if jit.enabled():
        assert _helpers() >= 1, "the parent never started its pool"
        omp = sys.modules.get("numba.np.ufunc.parallel")
        assert omp is None or not omp._is_initialized, "numba's OpenMP pool was started"
    assert not core.FORKED_AFTER_POOL
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child,))
    proc.start()
    child.close()
    try:
        got = parent.recv() if parent.poll(300) else None
    except EOFError:                      # the child died before it sent anything
        got = None
    proc.join(60)
    if proc.is_alive():
        proc.kill()
    assert proc.exitcode == 0, f"the forked child ended with exit code {proc.exitcode}"
    assert isinstance(got, dict), got
    assert got.pop("helpers") == (1 if jit.enabled() else 0)     # its own helper, made in the child
    assert got.keys() == want.keys()
    for name in want:
        assert got[name] == want[name], name


def test_pool_map_after_fork():
    """The everyday form: a fork Pool's workers quantizing after the parent has."""
    x = np.random.default_rng(1).normal(0, 40, N).astype(np.float32)
    want = qo.quantize_linear(x, np.float32(0.5), np.int8(1)).tobytes()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        result = pool.map_async(_quantize_hash, [x[: N - k] for k in range(3)])
        got = result.get(timeout=300)
    assert got[0] == want
    for k in (1, 2):
        assert got[k] == qo.quantize_linear(x[: N - k], np.float32(0.5), np.int8(1)).tobytes()


def _quantize_hash(x):
    return qo.quantize_linear(x, np.float32(0.5), np.int8(1)).tobytes()
