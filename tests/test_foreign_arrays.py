"""Arrays of other libraries are taken the ecosystem's way, without a copy where the layout allows:
any object with ``__dlpack__`` (DLPack; bfloat16 and the float8 types too, which numpy's own
``from_dlpack`` refuses) or ``__array__``.  Every spec's element-wise functions and the LiteRT
interpreter give the same bytes as on the numpy array of the same values.

The protocol objects here are made from numpy arrays (no other library needed); torch (CPU), when
installed, is checked as the everyday case, bfloat16 included."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from refs import require

import quantspec.litert as L
import quantspec.onnx as qo
import quantspec.tf as qtf
from quantspec._semantics.arrays import from_foreign


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


class DLPackOnly:
    """An array that only speaks DLPack (as a JAX or cupy-on-CPU array would)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class ArrayOnly:
    """An array-like with ``__array__`` only."""

    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)


def _x(shape=(37, 29)):
    return np.random.default_rng(5).normal(0, 4, shape).astype(np.float32)


@pytest.mark.parametrize("wrap", [DLPackOnly, ArrayOnly])
def test_protocol_objects_are_views(wrap):
    a = _x()
    got = from_foreign(wrap(a))
    assert isinstance(got, np.ndarray) and _address(got) == _address(a) and got.shape == a.shape
    t = a.T                                     # a strided layout is kept, not copied
    got = from_foreign(wrap(t))
    assert _address(got) == _address(t) and got.strides == t.strides


@pytest.mark.parametrize("wrap", [DLPackOnly, ArrayOnly])
def test_every_spec_takes_them(wrap):
    x = _x()
    s = np.linspace(0.02, 0.05, x.shape[1]).astype(np.float32)
    assert qo.quantize_linear(wrap(x), wrap(s), axis=1).tobytes() == qo.quantize_linear(x, s, axis=1).tobytes()
    q = qo.quantize_linear(x, np.float32(0.03), np.int8(2))
    assert (qo.dequantize_linear(wrap(q), np.float32(0.03), np.int8(2)).tobytes()
            == qo.dequantize_linear(q, np.float32(0.03), np.int8(2)).tobytes())
    assert qtf.quantize(wrap(x), -5.0, 5.0, "qint8")[0].tobytes() == qtf.quantize(x, -5.0, 5.0, "qint8")[0].tobytes()
    assert qtf.dequantize(wrap(q), -5.0, 5.0).tobytes() == qtf.dequantize(q, -5.0, 5.0).tobytes()
    p = L.QuantParams(np.float32([0.04]), np.int64([-3]))
    assert L.quantize(wrap(x), p).tobytes() == L.quantize(x, p).tobytes()
    assert L.dequantize(wrap(q), p).tobytes() == L.dequantize(q, p).tobytes()


def test_plain_values_pass_through():
    for v in (None, 1, 2.5, [1, 2], (3,), np.float32(1), np.ones(3)):
        assert from_foreign(v) is v
    assert from_foreign(object) is object


@pytest.fixture(scope="module")
def torch():
    return require("torch")      # a test dependency: a failure in CI when missing, not a skip


def test_torch_float32_and_bfloat16_without_a_copy(torch):
    t = torch.linspace(-3, 3, 4096).reshape(64, 64)
    a = from_foreign(t)
    assert a.dtype == np.float32 and _address(a) == t.data_ptr()
    b = t.to(torch.bfloat16)
    v = from_foreign(b)
    assert v.dtype == ml_dtypes.bfloat16 and _address(v) == b.data_ptr()
    b[0, 0] = 7.0                               # the same memory
    assert float(v[0, 0]) == 7.0
    bt = b.t()                                  # a transposed view: strides kept
    vt = from_foreign(bt)
    assert _address(vt) == bt.data_ptr() and np.array_equal(vt.astype(np.float32), bt.float().numpy())
    for dtype, mine in ((torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn), (torch.float8_e5m2, ml_dtypes.float8_e5m2)):
        f8 = t.to(dtype)
        assert from_foreign(f8).dtype == mine


def test_torch_tensors_through_every_spec(torch):
    t = torch.randn(3, 50, generator=torch.Generator().manual_seed(3)) * 4
    x = t.numpy()
    for tensor, array in ((t, x), (t.to(torch.bfloat16), from_foreign(t.to(torch.bfloat16)).copy())):
        # (onnxruntime has no bfloat16 QuantizeLinear)
        for compat in ("spec", "onnxruntime") if tensor.dtype == torch.float32 else ("spec",):
            assert (qo.quantize_linear(tensor, np.float32(0.05), np.int8(1), compat=compat).tobytes()
                    == qo.quantize_linear(array, np.float32(0.05), np.int8(1), compat=compat).tobytes())
    assert qtf.quantize(t, -6.0, 6.0, "quint8", mode="MIN_FIRST")[0].tobytes() == \
        qtf.quantize(x, -6.0, 6.0, "quint8", mode="MIN_FIRST")[0].tobytes()
    p = L.QuantParams(np.float32([0.05]), np.int64([4]))
    assert L.quantize(t, p).tobytes() == L.quantize(x, p).tobytes()


def test_torch_input_to_the_interpreter(torch):
    interp = L.Interpreter(L.example_model("mlp_softmax.tflite"))
    (inp,) = interp.inputs
    x = np.random.default_rng(2).integers(-128, 128, inp.shape, dtype=np.int8)
    want = interp.run([x])[0]
    assert interp.run([torch.from_numpy(x)])[0].tobytes() == want.tobytes()
    assert interp.run(torch.from_numpy(x))[0].tobytes() == want.tobytes()
