"""Small calls that repeat the last one take a shortcut (quantspec.onnx.fast.repeat): it must give
the same bytes as the reference path, take only what it can (flat contiguous data, no overlap with
``out``, one-pass operations), and see QUANTSPEC_FAST switched off between two calls."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import quantspec.onnx as qo
from quantspec._fastpath import jit
from quantspec.onnx import fast, reference

pytestmark = pytest.mark.skipif(not jit.enabled(), reason="the shortcut is the fast path's")


@pytest.fixture
def counted(monkeypatch):
    """How many calls the shortcut served."""
    served = []
    real = fast.repeat

    def repeat(*args):
        result = real(*args)
        served.append(result is not None)
        return result

    monkeypatch.setattr(fast, "repeat", repeat)
    return served


def _x(n=1000, seed=0):
    x = np.random.default_rng(seed).normal(0, 40, n).astype(np.float32)
    x[::7] = np.float32(0.4) * np.arange(x[::7].size, dtype=np.float32)        # ties at s = 0.8
    x[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return x


@pytest.mark.parametrize("out_type,zp", [("int8", np.int8(3)), ("uint8", np.uint8(128)), ("int16", np.int16(-7)),
                                         ("uint16", np.uint16(9)), ("int4", None),
                                         ("float8e4m3fn", None)])
def test_repeated_quantize(counted, out_type, zp):
    x = _x()
    s = np.float32(0.8)
    want = reference.quantize(qo.plan_quantize(x, s, zp, output_dtype=out_type), x)
    out = np.empty_like(want)
    for k in range(4):
        got = qo.quantize_linear(x, s, zp, output_dtype=out_type, out=out if k % 2 else None)
        assert got.tobytes() == want.tobytes()
    assert any(counted[1:]), "the shortcut never served a repeated call"


@pytest.mark.parametrize("code", ["int8", "uint8", "int16", "int32", "float8e5m2", "int4"])
def test_repeated_dequantize(counted, code):
    s = np.float32(0.8)                              # the same object each call
    q = (np.arange(-500, 500, dtype=np.int32) * 4099 if code == "int32"
         else qo.quantize_linear(_x(), s, output_dtype=code))
    want = reference.dequantize(qo.plan_dequantize(q, s), q)
    out = np.empty(q.shape, np.float32)
    for k in range(4):
        got = qo.dequantize_linear(q, s, out=out if k % 2 else None)
        assert got.tobytes() == want.tobytes()
    assert any(counted[1:])


def test_overlapping_out_and_views_take_the_general_path(counted):
    buf = np.zeros(4096, np.float32)
    x = buf[:1000]
    s, z = np.float32(0.8), np.int8(1)
    want = reference.quantize(qo.plan_quantize(_x(), s, z), _x()).tobytes()
    for _ in range(3):
        x[:] = _x()                                  # (the last call wrote over it)
        out = buf.view(np.int8)[:1000]               # the same memory as x
        got = qo.quantize_linear(x, s, z, out=out)
        assert got.tobytes() == want
    assert not any(counted), "a view (which may overlap out) took the shortcut"


def test_switching_the_fast_path_off_between_calls(counted, monkeypatch):
    x = _x()
    s, z = np.float32(0.8), np.int8(1)
    first = qo.quantize_linear(x, s, z)
    qo.quantize_linear(x, s, z)
    monkeypatch.setenv("QUANTSPEC_FAST", "0")
    served = len(counted)
    assert qo.quantize_linear(x, s, z).tobytes() == first.tobytes()
    assert len(counted) == served                     # not even tried


def test_a_different_value_is_a_different_plan():
    x = _x()
    a = qo.quantize_linear(x, np.float32(0.8), np.int8(1))
    b = qo.quantize_linear(x, np.float32(0.5), np.int8(1))
    assert b.tobytes() == reference.quantize(qo.plan_quantize(x, np.float32(0.5), np.int8(1)), x).tobytes()
    assert a.tobytes() != b.tobytes()
    y = x.astype(ml_dtypes.bfloat16)               # same shape, another dtype: another plan
    c = qo.quantize_linear(y, np.float32(0.8), np.int8(1))
    assert c.tobytes() == reference.quantize(qo.plan_quantize(y, np.float32(0.8), np.int8(1)), y).tobytes()
