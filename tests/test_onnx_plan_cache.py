"""quantize_linear / dequantize_linear keep the plans of recent calls (``quantspec.onnx.PLANS``, a
:class:`quantspec._fastpath.plancache.PlanCache`).

A cached plan must never stand in for a call it does not describe: the key holds the parameters'
bytes and every attribute's type, and the plan owns copies of the parameters.  Each test below
makes a call that would hit a wrongly keyed entry and checks its answer against a fresh plan on
the numpy reference path (``quantspec.onnx.reference``), or checks that the error of an uncached call
still comes.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnx_corpus as C
from quantspec import onnx as qo
from quantspec.onnx import functions as onnx_functions
from quantspec._fastpath import runner as core
from quantspec.errors import AxisError
from quantspec.onnx import reference


@pytest.fixture(autouse=True)
def _fresh_cache():
    onnx_functions.PLANS.clear()
    yield
    onnx_functions.PLANS.clear()


X = np.array([[1.5, -2.5, 3.0, 0.5], [-7.0, 8.25, 100.0, -100.0], [0.0, -0.0, 2.5, -3.5]], np.float32)


def _q_want(x, s, z, **kw):
    return reference.quantize(qo.plan_quantize(x, s, z, **kw), x)


def _dq_want(q, s, z, **kw):
    return reference.dequantize(qo.plan_dequantize(q, s, z, **kw), q)


def test_repeated_calls_hit_the_cache_and_agree():
    s, z = np.float32(0.5), np.int8(3)
    first = qo.quantize_linear(X, s, z)
    assert len(onnx_functions.PLANS) == 1
    assert C.same_bits(qo.quantize_linear(X, s, z), first)
    assert len(onnx_functions.PLANS) == 1
    assert C.same_bits(first, _q_want(X, s, z))


def test_a_changed_scale_array_is_a_new_plan():
    s = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    z = np.array([0, 1, 2, 3], np.int8)
    a = qo.quantize_linear(X, s, z)
    s[1] = 0.25
    z[2] = -5
    b = qo.quantize_linear(X, s, z)
    assert C.same_bits(b, _q_want(X, s, z))
    assert not C.same_bits(a, b)


@pytest.mark.parametrize("path", ["fast", "reference"])
@pytest.mark.parametrize("per", ["tensor", "axis"])
def test_the_cached_plan_owns_its_parameters(monkeypatch, path, per):
    if path == "reference":
        monkeypatch.setenv("QUANTSPEC_FAST", "0")
    s = np.array(0.5, np.float32) if per == "tensor" else np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    z = np.array(3, np.int8) if per == "tensor" else np.array([0, 1, 2, 3], np.int8)
    s0, z0 = s.copy(), z.copy()
    qo.quantize_linear(X, s, z)
    qo.dequantize_linear(qo.quantize_linear(X, s, z), s, z)       # caches both plans
    s[...] = 8.0                                # the caller reuses its arrays ...
    z[...] = 7
    got = qo.quantize_linear(X, s0.copy(), z0.copy())    # ... and a later call has the first values
    assert C.same_bits(got, _q_want(X, s0, z0))
    assert C.same_bits(qo.dequantize_linear(got, s0.copy(), z0.copy()), _dq_want(got, s0, z0))


def test_signed_zero_scales_are_different_plans():
    x = np.array([1.0, -2.0, 3.0], np.float32)
    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        onnx_functions.PLANS.clear()
        qo.quantize_linear(x, first, np.int8(0))
        got = qo.quantize_linear(x, second, np.int8(0))
        assert C.same_bits(got, _q_want(x, second, np.int8(0)))
    q = np.array([1, 2], np.int8)
    qo.dequantize_linear(q, np.float32(0.0))
    assert C.same_bits(qo.dequantize_linear(q, np.float32(-0.0)), _dq_want(q, np.float32(-0.0), None))


def test_an_attribute_of_another_type_is_checked_again():
    s = np.array([0.5, 1.0, 2.0, 4.0], np.float32)
    qo.quantize_linear(X, s, None, axis=1)
    with pytest.raises(AxisError):
        qo.quantize_linear(X, s, None, axis=True)       # True == 1, but a bool is not an axis


def test_a_python_list_scale_is_not_cached_and_still_works():
    x = np.array([1.0, 2.0], np.float32)
    got = qo.quantize_linear(x, [0.5], None)
    assert C.same_bits(got, _q_want(x, [0.5], None))
    assert len(onnx_functions.PLANS) == 0


def test_large_parameters_are_not_cached():
    from quantspec._fastpath.plancache import SMALL

    x = np.ones((2, SMALL + 1), np.float32)
    s = np.full(SMALL + 1, 0.5, np.float32)
    qo.quantize_linear(x, s, None, axis=1)
    assert len(onnx_functions.PLANS) == 0


def test_the_layout_follows_the_chunk_size(monkeypatch):
    """Tests shrink core.CHUNK to exercise small work items: a plan cached before must not keep
    the old layout."""
    x = np.linspace(-5, 5, 5000, dtype=np.float32)
    qo.quantize_linear(x, np.float32(0.1), np.int8(0))
    monkeypatch.setattr(core, "CHUNK", 1600)
    qo.quantize_linear(x, np.float32(0.1), np.int8(0))
    chunks = {prepared.lay.chunk for _, prepared in onnx_functions.PLANS.values() if prepared is not None}
    if chunks:                                   # the fast path prepared them (numba installed)
        assert chunks == {1 << 15, 1600}


def test_the_cache_is_bounded():
    x = np.array([1.0], np.float32)
    for i in range(onnx_functions.PLANS.size + 10):
        qo.quantize_linear(x, np.float32(1 + i), None)
    assert len(onnx_functions.PLANS) <= onnx_functions.PLANS.size


@pytest.mark.parametrize("first, second", [(np.int8(3), np.uint8(3)), (np.float32(0.5), np.float16(0.5)),
                                           (np.int8(0), 0), (np.float32(2.0), 2.0)])
def test_equal_values_of_other_types_are_other_plans(first, second):
    """The zero point's type is the output type; the scale's type, the division's precision."""
    x = np.array([1.0, -2.5, 300.0, -300.0, 0.75], np.float32)
    s, z = (first, None) if first.dtype.kind == "f" else (np.float32(0.5), first)
    s2, z2 = (second, None) if first.dtype.kind == "f" else (np.float32(0.5), second)
    a = qo.quantize_linear(x, s, z)
    b = qo.quantize_linear(x, s2, z2)
    assert len(onnx_functions.PLANS) == 2
    assert C.same_bits(a, _q_want(x, s, z)) and C.same_bits(b, _q_want(x, s2, z2))


def test_an_unhashable_attribute_is_neither_found_nor_kept():
    from quantspec._fastpath.plancache import PlanCache

    cache = PlanCache()
    key = cache.key("q", X, (np.float32(1.0), None), (1, [2]))
    assert key is not None and cache.get(key) is None
    cache.put(key, "plan")
    assert len(cache) == 0


def test_the_same_scalar_objects_skip_reading_their_bytes_and_arrays_never_do():
    """The key remembers the last call's parameter objects when all are immutable (numbers): the
    same objects again reuse their keys.  A 0-d array is not a number: changed in place, it is a new
    plan."""
    s, z = np.float32(0.5), np.int8(3)
    qo.quantize_linear(X, s, z)
    assert onnx_functions.PLANS._last[0] == (s, z) and onnx_functions.PLANS._last[0][0] is s
    assert C.same_bits(qo.quantize_linear(X, s, z), _q_want(X, s, z))
    assert C.same_bits(qo.quantize_linear(X, np.float32(0.25), np.int8(3)), _q_want(X, np.float32(0.25), z))
    assert len(onnx_functions.PLANS) == 2
    s0 = np.array(0.5, np.float32)
    a = qo.quantize_linear(X, s0, z)
    s0[...] = 0.125
    assert C.same_bits(qo.quantize_linear(X, s0, z), _q_want(X, np.float32(0.125), z))
    assert not C.same_bits(a, qo.quantize_linear(X, s0, z))
