"""The compiled entry points that cached plans keep (``quantspec._fastpath.runner.run``'s ``memo``).

A cached plan's prepared state remembers, per kind of call, the entry point numba compiled for the
exact types of the kernel's arguments, and calls it directly (numba's dispatch types the records
anew on every call).  An entry point unboxes its arguments without checking their types, so the
memo's key must cover everything those types depend on.  The tests wrap :func:`core.dispatcher_entry` so
that every call through a remembered entry point re-derives numba's types of its arguments and
compares them with the types the entry point was compiled for; they run the public functions on
inputs whose numba types differ (read-only, unaligned, serial and parallel, streamed and not) and
check every result against the numpy reference path.
"""

from __future__ import annotations

import numpy as np
import pytest

from refs import require_fast

from quantspec import onnx as qo
from quantspec.onnx import functions as onnx_functions
from quantspec import tf as qtf
from quantspec._fastpath import runner as core
from quantspec.onnx import reference
from quantspec.tf import dequantize_op, quantize_op


@pytest.fixture(autouse=True)
def _fast_and_fresh():
    require_fast()
    for cache in (onnx_functions.PLANS, quantize_op._PLANS, dequantize_op._PLANS):
        cache.clear()
    yield
    for cache in (onnx_functions.PLANS, quantize_op._PLANS, dequantize_op._PLANS):
        cache.clear()


@pytest.fixture
def checked_entries(monkeypatch):
    """Every entry point handed out, wrapped in a check of its arguments' numba types; the list
    of (signature, calls) of each."""
    made = []
    real = core.dispatcher_entry

    def checking(dispatcher, args):
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        entry = real(dispatcher, args)
        assert entry is not dispatcher, "the compiled entry point was not found"
        record = [sig, 0]
        made.append(record)

        def call(*a):
            got = tuple(dispatcher.typeof_pyval(v) for v in a)
            assert got == sig, f"an entry point compiled for {sig} was called with {got}"
            record[1] += 1
            return entry(*a)

        return call

    monkeypatch.setattr(core, "dispatcher_entry", checking)
    return made


def _unaligned(a: np.ndarray, writeable: bool) -> np.ndarray:
    """A copy of ``a`` whose data starts one byte past an aligned address."""
    buf = bytearray(a.nbytes + 1) if writeable else bytes(1) + a.tobytes()
    v = np.frombuffer(buf, a.dtype, a.size, offset=1).reshape(a.shape)
    if writeable:
        v[...] = a
    assert not v.flags.aligned or a.dtype.itemsize == 1
    return v


def _variants(x: np.ndarray):
    ro = x.copy()
    ro.flags.writeable = False
    return {"plain": x, "read-only": ro, "unaligned": _unaligned(x, False)}


def _data(n: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(n) * 40).astype(np.float32)
    x[:8] = [np.nan, np.inf, -np.inf, -0.0, 0.5, 1.5, -2.5, 1e-42]
    return x


def test_onnx_entry_points_follow_the_argument_types(checked_entries):
    """On the serial kernels (each new type compiles a kernel; the parallel ones take longest)."""
    n = 1000
    x = _data(n)
    s, z = np.float32(0.75), np.int8(-3)
    want_q = reference.quantize(qo.plan_quantize(x, s, z), x)
    q = want_q.copy()
    want_dq = reference.dequantize(qo.plan_dequantize(q, s, z), q)
    for name, xv in _variants(x).items():
        for _ in range(2):
            assert qo.quantize_linear(xv, s, z).tobytes() == want_q.tobytes(), name
    for name, qv in _variants(q).items():
        for out in (None, np.empty(n, np.float32), _unaligned(np.zeros(n, np.float32), True)):
            for _ in range(2):
                got = qo.dequantize_linear(qv, s, z, out=out)
                assert got.tobytes() == want_dq.tobytes(), name
    # a float16 division precision: the quotient pass has its own entry points
    for name, xv in _variants(x).items():
        for _ in range(2):
            got = qo.quantize_linear(xv, np.float16(0.75), z)
            assert got.tobytes() == reference.quantize(qo.plan_quantize(x, np.float16(0.75), z), x).tobytes()
    # read-only / unaligned inputs and unaligned outputs have types of their own
    assert len({sig for sig, _ in checked_entries}) >= 6
    assert all(calls >= 2 for _, calls in checked_entries), "an entry point was made but not reused"


def test_parallel_entry_points(small_parallel, checked_entries):
    """Streamed (parallel, large outputs) and plain stores: each its own kernel and entry point; the
    serial and the parallel calls of one kernel share its entry point (the pool runs the same
    compiled code on every thread)."""
    x = _data(5000)
    s, z = np.float32(0.75), np.int8(-3)
    want = reference.quantize(qo.plan_quantize(x, s, z), x)
    for size in (5000, 1000):           # streamed from 1 KiB of output; serial below 2 Ki elements
        for _ in range(2):
            assert qo.quantize_linear(x[:size], s, z).tobytes() == want[:size].tobytes()
    keys = [key for _, prepared in onnx_functions.PLANS.values() for key in prepared.memo]
    assert sorted(k[0] for k in keys) == [False, True]
    assert all(calls >= 2 for _, calls in checked_entries)


def test_tf_entry_points_follow_the_argument_types(checked_entries):
    x = _data(1000)
    want = quantize_op.compute_quantize(x, quantize_op.prepare_quantize(-50.0, 40.0, "qint8", shape=x.shape))
    for name, xv in _variants(x).items():
        for _ in range(2):
            assert qtf.quantize(xv, -50.0, 40.0, "qint8")[0].tobytes() == want.tobytes(), name
    plan = dequantize_op.prepare_dequantize(np.float32(-50.0), np.float32(40.0), "qint8", shape=want.shape)
    want_dq = dequantize_op.compute_dequantize(want, plan)
    for name, qv in _variants(want).items():
        for _ in range(2):
            got = qtf.dequantize(qv, np.float32(-50.0), np.float32(40.0), T="qint8")
            assert got.tobytes() == want_dq.tobytes(), name
    assert len(checked_entries) >= 4
    assert all(calls >= 2 for _, calls in checked_entries)


def test_an_uncached_call_keeps_no_entry_points(checked_entries):
    """Parameters too large to key: the plan is made afresh on every call, and so would its memo be
    (finding an entry point costs more than numba's dispatch of one call)."""
    from quantspec._fastpath.plancache import SMALL

    x = np.tile(_data(SMALL + 1), (2, 1))
    s = np.full(SMALL + 1, 0.5, np.float32)
    z = np.zeros(SMALL + 1, np.int8)
    for _ in range(2):
        got = qo.quantize_linear(x, s, z, axis=1)
    assert got.tobytes() == reference.quantize(qo.plan_quantize(x, s, z, axis=1), x).tobytes()
    assert checked_entries == []


def test_without_numba_internals_the_dispatcher_runs():
    class Dispatcher:              # no typeof_pyval / compile / overloads
        pass

    d = Dispatcher()
    assert core.dispatcher_entry(d, (1, 2)) is d
