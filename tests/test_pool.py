"""quantspec's thread pool (quantspec._fastpath.pool): the caller never waits for a helper that does not
come, helpers never spin, concurrent callers each get their own result, and a parallel call gives the
serial kernel's bytes."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from quantspec import onnx as qo
from quantspec._fastpath import runner as core
from quantspec._fastpath import jit, pool

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="the pool runs the fast kernels (numba)")

N = (1 << 21) + 77


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setenv(pool.ENV, "2")


def _x(seed=0, n=N):
    return np.random.default_rng(seed).normal(0, 40, n).astype(np.float32)


def _serial(f):
    with core.serial_below(1 << 62):
        return f()


def test_parallel_call_equals_serial(two_threads):
    x = _x()
    assert core.parallel(x.size)
    got = qo.quantize_linear(x, np.float32(0.8), np.int8(3))
    assert got.tobytes() == _serial(lambda: qo.quantize_linear(x, np.float32(0.8), np.int8(3))).tobytes()
    assert pool._POOL._threads, "no helper was made"


def test_caller_does_all_the_work_when_no_helper_comes(two_threads, monkeypatch):
    """A helper that never wakes (asleep, or no core for it on a busy machine) costs the caller
    nothing: it claims every work item itself and returns."""
    p = pool._Pool()
    monkeypatch.setattr(p, "_ensure", lambda helpers: None)        # helpers that never come
    monkeypatch.setattr(pool, "_POOL", p)
    x = _x(1)
    t0 = time.perf_counter()
    got = qo.quantize_linear(x, np.float32(0.5), np.int8(-2))
    assert time.perf_counter() - t0 < 30
    assert got.tobytes() == _serial(lambda: qo.quantize_linear(x, np.float32(0.5), np.int8(-2))).tobytes()


def test_idle_helpers_do_not_spin(two_threads):
    x = _x(2)
    for _ in range(3):
        qo.quantize_linear(x, np.float32(0.8), np.int8(3))
    assert any(t.is_alive() for t in pool._POOL._threads)
    c0, t0 = time.process_time(), time.perf_counter()
    time.sleep(0.3)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    assert cpu < 0.05 * wall + 0.01, f"the process used {cpu:.3f} s of CPU in {wall:.3f} s idle"


def test_concurrent_callers(two_threads):
    xs = [_x(10 + k, N - k) for k in range(4)]
    want = [_serial(lambda x=x: qo.quantize_linear(x, np.float32(0.7), np.int8(1))).tobytes() for x in xs]
    got: dict[int, list[bytes]] = {}

    def work(k):
        got[k] = [qo.quantize_linear(xs[k], np.float32(0.7), np.int8(1)).tobytes() for _ in range(3)]

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(not t.is_alive() for t in threads)
    for k in range(4):
        assert got[k] == [want[k]] * 3, k


def test_numba_openmp_pool_is_not_started(two_threads):
    import sys

    qo.quantize_linear(_x(3), np.float32(0.8), np.int8(3))
    omp = sys.modules.get("numba.np.ufunc.parallel")
    assert omp is None or not omp._is_initialized


def test_thread_count(monkeypatch):
    monkeypatch.setenv(pool.ENV, "3")
    assert pool.threads() == 3
    monkeypatch.setenv(pool.ENV, "junk")
    assert pool.threads() >= 1
    monkeypatch.delenv(pool.ENV)
    assert pool.threads() >= 1
