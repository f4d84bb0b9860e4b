"""``out=`` of every shape and kind, and inputs in any byte order: the element-wise functions give
the same bytes as the plain call.  An ``out`` that is an ndarray subclass (np.matrix reshapes
differently) or that overlaps the input (the kernels read and write in parallel, in their own order)
once gave wrong values or crashed the process."""

from __future__ import annotations

import numpy as np
import pytest

import quantspec.litert as ql
import quantspec.onnx as qo
import quantspec.tf as qt

pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix

SIZES = [200, 1 << 17, (1 << 20) + 3]      # serial and parallel kernels


def _onnx_q(x, out=None):
    return qo.quantize_linear(x, np.float32(0.07), np.int8(3), out=out)


def _onnx_dq(q, out=None):
    return qo.dequantize_linear(q, np.float32(0.07), np.int8(3), out=out)


def _litert_q(x, out=None):
    return ql.quantize(x, ql.QuantParams(0.07, 3), out=out)


def _litert_dq(q, out=None):
    return ql.dequantize(q, ql.QuantParams(0.07, 3), out=out)


def _tf_q(x, out=None):
    return qt.quantize(x, -3.0, 3.0, "qint8", out=out)[0]


def _tf_dq(q, out=None):
    return qt.dequantize(q, -3.0, 3.0, mode="MIN_COMBINED", out=out)


QUANTIZE = {"onnx": _onnx_q, "litert": _litert_q, "tf": _tf_q}
DEQUANTIZE = {"onnx": _onnx_dq, "litert": _litert_dq, "tf": _tf_dq}


def _x(n):
    x = np.linspace(-3, 3, n, dtype=np.float32)
    x[:4] = [np.nan, np.inf, -0.0, 0.035]
    return x


@pytest.mark.parametrize("spec", sorted(QUANTIZE))
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("where", ["tail", "head"])
def test_quantize_into_its_own_input(spec, n, where):
    f = QUANTIZE[spec]
    x = _x(n)
    want = f(x.copy())
    out = x.view(np.int8)[-n:] if where == "tail" else x.view(np.int8)[:n]
    assert f(x, out=out) is out
    assert out.tobytes() == want.tobytes()


@pytest.mark.parametrize("spec", sorted(DEQUANTIZE))
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("where", ["tail", "head"])
def test_dequantize_over_its_own_codes(spec, n, where):
    f = DEQUANTIZE[spec]
    codes = QUANTIZE[spec](_x(n))
    want = f(codes)
    buf = np.zeros(4 * n, np.int8)
    q = buf[:n] if where == "head" else buf[3 * n:]
    q[:] = codes
    out = buf.view(np.float32)
    f(q, out=out)
    assert out.tobytes() == want.tobytes()


@pytest.mark.parametrize("spec", sorted(QUANTIZE))
def test_out_may_be_an_ndarray_subclass(spec):
    x = _x(48).reshape(6, 8)
    m = np.matrix(np.zeros((6, 8), np.int8))
    assert QUANTIZE[spec](x, out=m) is m
    assert np.asarray(m).tobytes() == QUANTIZE[spec](x).tobytes()
    codes = QUANTIZE[spec](x)
    mf = np.matrix(np.zeros((6, 8), np.float32))
    DEQUANTIZE[spec](codes, out=mf)
    assert np.asarray(mf).tobytes() == DEQUANTIZE[spec](codes).tobytes()


@pytest.mark.parametrize("n", [5, 1 << 17])
def test_big_endian_inputs(n):
    x = _x(n)
    big = x.astype(">f4")
    assert _onnx_q(big).tobytes() == _onnx_q(x).tobytes()
    assert _litert_q(big).tobytes() == _litert_q(x).tobytes()
    for codes in (np.arange(n).astype(np.int16) - 50, np.arange(n).astype(np.int32) - 7):
        swapped = codes.astype(codes.dtype.newbyteorder(">"))
        assert qo.dequantize_linear(swapped, np.float32(0.5)).tobytes() == \
            qo.dequantize_linear(codes, np.float32(0.5)).tobytes()
        assert _litert_dq(swapped).tobytes() == _litert_dq(codes).tobytes()
    assert qo.pack(np.arange(-3, 4).astype(">i2")) == qo.pack(np.arange(-3, 4).astype(np.int16))


def test_litert_dequantize_reads_big_endian_values():
    got = ql.dequantize(np.array([-100, -1, 0, 1, 100], ">i2"), ql.QuantParams(0.5, 3))
    assert got.tolist() == [-51.5, -2.0, -1.5, -1.0, 48.5]


@pytest.mark.parametrize("n", [6, 1 << 17])
def test_onnx_big_endian_scales_and_zero_points(n):
    # they were refused as "a dtype no quantization spec uses (got '>f4')" while a big-endian x ran
    x = _x(n).reshape(2, -1)
    cases = [(np.array(0.25, ">f4"), np.array(3, ">i2"), {}),
             (np.array([0.25, 0.75], ">f4"), np.array([-2, 5], ">i2"), {"axis": 0}),
             (np.array([0.25, 0.75], ">f2"), None, {"axis": 0}),
             (np.array(0.5, ">f8").astype(">f4"), np.array(7, ">u2"), {})]
    for scale, zp, attrs in cases:
        s = scale.astype(scale.dtype.newbyteorder("="))
        z = None if zp is None else zp.astype(zp.dtype.newbyteorder("="))
        for _ in range(2):                                  # a planned call, then the cached plan
            got = qo.quantize_linear(x, scale, zp, **attrs)
            want = qo.quantize_linear(x, s, z, **attrs)
            assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
            back = qo.dequantize_linear(want, scale, zp, **attrs)
            assert back.tobytes() == qo.dequantize_linear(want, s, z, **attrs).tobytes()
        # the cache must not confuse the two byte orders of the same bytes
        swapped = np.frombuffer(s.tobytes(), scale.dtype).reshape(s.shape)
        assert qo.quantize_linear(x, swapped, zp, **attrs).tobytes() == \
            qo.quantize_linear(x, swapped.astype(swapped.dtype.newbyteorder("=")), z, **attrs).tobytes()


def test_onnx_plans_read_big_endian_parameters():
    x = _x(8).reshape(2, 4)
    for plan, scale, zp in ((qo.plan_quantize, np.array([0.5, 2.0], ">f4"), np.array([1, -1], ">i2")),
                            (qo.plan_dequantize, np.array([0.5, 2.0], ">f4"), np.array([1, -1], ">i2"))):
        arg = x if plan is qo.plan_quantize else np.arange(8, dtype=np.int16).reshape(2, 4)
        p = plan(arg, scale, zp, axis=0)
        assert p.scale.dtype.isnative and p.scale.tolist() == [0.5, 2.0]
        assert p.zero_point.dtype.isnative and p.zero_point.tolist() == [1, -1]
