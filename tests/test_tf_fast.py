"""The fast path of TensorFlow QuantizeV2 / Dequantize gives the reference path's bytes.

The fused kernels (:mod:`quantspec.tf.fast`) and the readable numpy path
(:func:`quantspec.tf.quantize_op.compute_quantize`, :func:`quantspec.tf.dequantize_op.compute_dequantize`)
run on the same plan for every case of the TensorFlow conformance corpora (:mod:`tf_oracle`: every
type x mode x round mode, per-tensor and per-axis, narrow range, degenerate and huge ranges, ±0, ±inf,
NaN, subnormals (flushed), near-ties), under both ``kernel="eigen"`` and ``kernel="onednn"``, and
must produce identical bytes.  A selection runs again with the parallel kernels and streaming stores
switched on at small sizes.
"""

from __future__ import annotations

import numpy as np
import pytest

import tf_oracle as O
from refs import require_fast
from quantspec import tf as qtf
from quantspec.errors import DTypeError, ShapeError
from quantspec.tf import dequantize_op as D
from quantspec.tf import fast
from quantspec.tf import quantize_op as Q

@pytest.fixture(autouse=True)
def _numba():
    require_fast()

KERNELS = ("eigen", "onednn")


def _attrs(c):
    return {k: v for k, v in c.attrs.items() if k != "T"}


def _check_quantize(cases, T, kernel):
    compared = 0
    for c in cases:
        x = np.asarray(c.x, np.float32)
        try:
            plan = Q.prepare_quantize(c.a, c.b, T, shape=x.shape, kernel=kernel, **_attrs(c))
        except ValueError:          # a call TensorFlow refuses (quantspec errors are ValueErrors)
            continue
        if plan.path == "onednn-scalar":
            assert fast.path_quantize(plan) == "reference"
            continue
        assert fast.path_quantize(plan) == "fast"
        want, got = Q.compute_quantize(x, plan), fast.quantize(x, plan)
        assert want.dtype == got.dtype and want.tobytes() == got.tobytes(), (c.label(), plan.path)
        compared += 1
    return compared


def _check_dequantize(cases, T, kernel):
    compared = 0
    for c in cases:
        q = np.asarray(c.x)
        try:
            plan = D.prepare_dequantize(c.a, c.b, T, shape=q.shape, kernel=kernel, **_attrs(c))
        except ValueError:
            continue
        assert fast.path_dequantize(plan) == "fast"
        want, got = D.compute_dequantize(q, plan), fast.dequantize(q, plan)
        assert want.dtype == got.dtype and want.tobytes() == got.tobytes(), c.label()
        compared += 1
    return compared


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("mode,round_mode", O.QUANTIZE_COMBOS)
@pytest.mark.parametrize("T", O.TYPES)
def test_quantize_per_tensor(T, mode, round_mode, kernel):
    assert _check_quantize(O.quantize_cases(T, mode, round_mode, kernel), T, kernel) > 0


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("T", O.TYPES)
def test_quantize_per_axis(T, kernel):
    assert _check_quantize(O.quantize_axis_cases(T), T, kernel) > 0


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("T", O.TYPES)
def test_dequantize(T, kernel):
    assert _check_dequantize(O.dequantize_cases(T), T, kernel) > 0


def _tiled(cases, n=9000):
    """The cases with their data tiled to ``n`` elements per slice (per-axis: along the axis)."""
    out = []
    for c in cases:
        x = np.asarray(c.x)
        if x.ndim <= 1 and c.attrs.get("axis") is None and x.size:
            out.append(O.Case(c.op, np.resize(x, n), c.a, c.b, c.attrs))
    return out


# the parallel kernels are the serial ones compiled with prange (the work splitting and the streamed
# stores do not depend on the operation): one case per mode covers them; the corpora above cover the rules
PARALLEL = [("qint8", "MIN_COMBINED", "HALF_AWAY_FROM_ZERO", "eigen"), ("quint8", "MIN_FIRST", "HALF_AWAY_FROM_ZERO", "eigen"),
            ("qint8", "SCALED", "HALF_TO_EVEN", "onednn")]


@pytest.mark.parametrize("T,mode,round_mode,kernel", PARALLEL)
def test_parallel(small_parallel, T, mode, round_mode, kernel):
    cases = _tiled(O.quantize_cases(T, mode, round_mode, kernel)[:6])
    assert _check_quantize(cases, T, kernel) > 0
    dq_kernel = "eigen" if T == "qint32" else kernel      # oneDNN has no qint32 kernel
    assert _check_dequantize(_tiled([c for c in O.dequantize_cases(T) if c.attrs["mode"] == mode][:4]), T,
                             dq_kernel) > 0


def test_parallel_per_axis(small_parallel):
    rng = np.random.default_rng(5)
    x = (rng.normal(0, 3, (7, 1500)) + 0.5).astype(np.float32)
    x[:, ::97] = np.nan
    lo, hi = np.linspace(-4, -1, 7).astype(np.float32), np.linspace(1, 5, 7).astype(np.float32)
    for axis, lo_, hi_ in ((0, lo, hi), (1, np.resize(lo, 1500), np.resize(hi, 1500))):
        for mode in ("MIN_COMBINED", "SCALED"):
            plan = Q.prepare_quantize(lo_, hi_, "qint8", shape=x.shape, mode=mode, axis=axis)
            assert Q.compute_quantize(x, plan).tobytes() == fast.quantize(x, plan).tobytes()
            q = Q.compute_quantize(x, plan)
            dplan = D.prepare_dequantize(plan.output_min, plan.output_max, "qint8", shape=q.shape, mode=mode,
                                         axis=axis)
            assert D.compute_dequantize(q, dplan).tobytes() == fast.dequantize(q, dplan).tobytes()


@pytest.mark.parametrize("kernel", KERNELS)
def test_long_rows_four_at_a_time(small_parallel, kernel):
    """Per-axis along a last axis of 1600: 16 bytes of parameters an element (lo, hi, scale, bias),
    enough for the kernels to take four rows at a time (core.ROWS_TOGETHER_FROM); 37 rows, so the
    last work item has one."""
    from quantspec._fastpath import runner as core

    rng = np.random.default_rng(6)
    x = (rng.normal(0, 3, (37, 1600)) + 0.5).astype(np.float32)
    x[:, ::89] = np.nan
    lo, hi = np.linspace(-4, -1, 1600).astype(np.float32), np.linspace(1, 5, 1600).astype(np.float32)
    for T, mode in (("qint8", "MIN_COMBINED"), ("quint8", "MIN_COMBINED"), ("qint8", "SCALED")):
        plan = Q.prepare_quantize(lo, hi, T, shape=x.shape, mode=mode, axis=1, kernel=kernel)
        prepared = fast.prepare_quantize(plan, x.shape)
        assert core.together(prepared[0], prepared[1])
        want = Q.compute_quantize(x, plan)
        assert want.tobytes() == fast.quantize(x, plan).tobytes(), (T, mode)


@pytest.mark.parametrize("path", ["fast", "reference"])
def test_out_argument_and_selection(monkeypatch, path):
    if path == "reference":
        monkeypatch.setenv("QUANTSPEC_FAST", "0")
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    plan = Q.prepare_quantize(-3.0, 3.0, "qint8", shape=x.shape)
    assert fast.path_quantize(plan) == path
    out = np.empty((4, 6), np.int8)
    codes, lo, hi = qtf.quantize(x, -3.0, 3.0, "qint8", out=out)
    assert codes is out and out.tobytes() == Q.compute_quantize(x, plan).tobytes()
    strided = np.zeros((4, 12), np.int8)[:, ::2]
    assert qtf.quantize(x, -3.0, 3.0, "qint8", out=strided)[0] is strided
    assert np.ascontiguousarray(strided).tobytes() == out.tobytes()
    y = np.empty((4, 6), np.float32)
    assert qtf.dequantize(out, lo, hi, out=y) is y
    with pytest.raises(ShapeError):
        qtf.quantize(x, -3.0, 3.0, "qint8", out=np.empty((6, 4), np.int8))
    with pytest.raises(DTypeError):
        qtf.dequantize(out, lo, hi, out=np.empty((4, 6), np.float64))


def test_empty_and_scalar_inputs():
    for shape in ((), (0,), (3, 0)):
        x = np.full(shape, 1.5, np.float32)
        for mode in ("MIN_COMBINED", "MIN_FIRST", "SCALED"):
            plan = Q.prepare_quantize(-2.0, 2.0, "quint8", shape=x.shape, mode=mode)
            assert Q.compute_quantize(x, plan).tobytes() == fast.quantize(x, plan).tobytes()
