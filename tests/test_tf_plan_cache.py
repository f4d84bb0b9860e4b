"""tf.quantize / tf.dequantize keep the plans of recent calls (``quantize_op._PLANS``,
``dequantize_op._PLANS``: :class:`quantspec._fastpath.plancache.PlanCache`, shared with ONNX and
tested in depth in test_onnx_plan_cache.py).  Here: the TensorFlow calls that could meet a stale
plan, each checked against the numpy reference path with a fresh plan."""

from __future__ import annotations

import numpy as np
import pytest

from quantspec import tf as qtf
from quantspec.errors import InvalidArgumentError
from quantspec.tf import dequantize_op, quantize_op

X = np.array([[-3.0, -1.25, 0.0, 0.5, 2.75], [6.0, -6.0, 1.0, -0.0, 4.5]], np.float32)


@pytest.fixture(autouse=True)
def _fresh():
    quantize_op._PLANS.clear()
    dequantize_op._PLANS.clear()
    yield
    quantize_op._PLANS.clear()
    dequantize_op._PLANS.clear()


def _q_want(x, lo, hi, T, **kw):
    plan = quantize_op.prepare_quantize(lo, hi, T, shape=x.shape, **kw)
    return quantize_op.compute_quantize(x, plan)


def test_repeated_calls_hit_the_cache():
    a = qtf.quantize(X, -6.0, 6.0, "qint8", mode="SCALED")
    b = qtf.quantize(X, -6.0, 6.0, "qint8", mode="SCALED")
    assert len(quantize_op._PLANS) == 1
    assert a[0].tobytes() == b[0].tobytes() == _q_want(X, -6.0, 6.0, "qint8", mode="SCALED").tobytes()


def test_changed_and_reused_range_arrays():
    lo = np.array([-3.0, -6.0], np.float32)
    hi = np.array([3.0, 6.0], np.float32)
    lo0, hi0 = lo.copy(), hi.copy()
    qtf.quantize(X, lo, hi, "qint8", mode="SCALED", axis=0)
    lo[...] = -1.0                                 # the caller reuses its arrays ...
    hi[...] = 1.0
    got = qtf.quantize(X, lo, hi, "qint8", mode="SCALED", axis=0)[0]
    assert got.tobytes() == _q_want(X, lo, hi, "qint8", mode="SCALED", axis=0).tobytes()
    got = qtf.quantize(X, lo0.copy(), hi0.copy(), "qint8", mode="SCALED", axis=0)[0]   # ... the first values again
    assert got.tobytes() == _q_want(X, lo0, hi0, "qint8", mode="SCALED", axis=0).tobytes()


def test_the_returned_range_is_the_callers_own():
    _, out_min, out_max = qtf.quantize(X, -6.0, 6.0, "quint8", mode="MIN_FIRST")
    first = (float(out_min), float(out_max))
    out_min[...] = 99.0
    out_max[...] = 99.0
    _, again_min, again_max = qtf.quantize(X, -6.0, 6.0, "quint8", mode="MIN_FIRST")
    assert (float(again_min), float(again_max)) == first


def test_an_attribute_of_another_type_is_checked_again():
    lo, hi = np.array([-3.0, -6.0], np.float32), np.array([3.0, 6.0], np.float32)
    qtf.quantize(X, lo, hi, "qint8", mode="SCALED", axis=0)
    with pytest.raises(InvalidArgumentError):
        qtf.quantize(X, lo, hi, "qint8", mode="SCALED", axis=False)     # False == 0, but not an axis


def test_dequantize_with_a_changed_range():
    q = np.array([[-128, -1, 0, 1, 127]], np.int8)
    lo = np.array(-2.0, np.float32)
    a = qtf.dequantize(q, lo, 2.0, mode="SCALED")
    lo[...] = -4.0
    b = qtf.dequantize(q, lo, 2.0, mode="SCALED")
    plan = dequantize_op.prepare_dequantize(np.float32(-4.0), 2.0, "qint8", shape=q.shape, mode="SCALED")
    assert b.tobytes() == dequantize_op.compute_dequantize(q, plan).tobytes()
    assert a.tobytes() != b.tobytes()


@pytest.mark.parametrize("changed", ["min_range", "max_range", "T", "mode", "ensure_minimum_range"])
def test_each_argument_is_part_of_the_key(changed):
    base = dict(min_range=-6.0, max_range=6.0, T="qint8", mode="MIN_COMBINED", ensure_minimum_range=0.01)
    other = dict(base)
    other[changed] = {"min_range": -2.0, "max_range": 3.0, "T": "quint8", "mode": "MIN_FIRST",
                      "ensure_minimum_range": 20.0}[changed]
    qtf.quantize(X, base["min_range"], base["max_range"], base["T"], mode=base["mode"],
                 ensure_minimum_range=base["ensure_minimum_range"])
    got = qtf.quantize(X, other["min_range"], other["max_range"], other["T"], mode=other["mode"],
                       ensure_minimum_range=other["ensure_minimum_range"])
    want = _q_want(X, other["min_range"], other["max_range"], other["T"], mode=other["mode"],
                   ensure_minimum_range=other["ensure_minimum_range"])
    assert got[0].dtype == want.dtype and got[0].tobytes() == want.tobytes()
