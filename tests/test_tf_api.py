"""The public API contract of quantspec.tf (DESIGN.md): argument forms, result types and shapes, out=,
the prepare/compute split, the routing table.  Numeric correctness is tests/test_tf_conformance.py's job;
here quantspec is compared with itself (never with a value copied from its own output)."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import quantspec
import quantspec.tf as qt
from quantspec.tf import spec
from quantspec.tf.dequantize_op import prepare_dequantize
from quantspec.tf.quantize_op import compute_quantize, prepare_quantize

f32 = np.float32
X = np.linspace(-3, 3, 24, dtype=f32).reshape(2, 3, 4)


def test_exports():
    assert set(qt.__all__) == {
        "quantize", "dequantize", "quantize_and_dequantize_v2", "quantize_and_dequantize_v3",
        "quantize_and_dequantize_v4", "fake_quant_with_min_max_args", "fake_quant_with_min_max_vars",
        "fake_quant_with_min_max_vars_per_channel",
        "QuantizeV2Op", "DequantizeOp", "FakeQuantOp", "QuantizeAndDequantizeOp"}   # quantizer records
    assert quantspec.tf is qt


@pytest.mark.parametrize("T,dtype", [("qint8", np.int8), ("quint8", np.uint8), ("qint16", np.int16),
                                     ("quint16", np.uint16), ("qint32", np.int32)])
def test_result_types(T, dtype):
    q, lo, hi = qt.quantize(X, -1.0, 2.0, T)
    assert q.dtype == dtype and q.shape == X.shape
    assert lo.dtype == hi.dtype == f32 and lo.shape == hi.shape == ()
    q, lo, hi = qt.quantize(X, [-1, -2, -3], [1, 2, 3], T, axis=1)
    assert lo.shape == hi.shape == (3,) and lo.dtype == f32
    q1, lo1, hi1 = qt.quantize(X[:, :1], [-1], [1], T, axis=-2)  # an axis of length 1: still 1-D
    assert lo1.shape == (1,)
    y = qt.dequantize(q, lo, hi, axis=1)
    assert y.dtype == f32 and y.shape == X.shape


def test_type_spellings_are_equivalent():
    want = qt.quantize(X, -1.0, 1.0, "qint16")[0]
    for T in ("QINT16", "int16", np.int16, np.dtype(np.int16)):
        assert qt.quantize(X, -1.0, 1.0, T)[0].tobytes() == want.tobytes()
    q = want
    base = qt.dequantize(q, -1.0, 1.0)
    assert qt.dequantize(q, -1.0, 1.0, "qint16").tobytes() == base.tobytes()
    assert qt.dequantize(q.tolist(), -1.0, 1.0, "qint16").tobytes() == base.tobytes()


def test_bfloat16_spellings():
    q = np.arange(-128, 128, dtype=np.int8)
    ref = qt.dequantize(q, -1.0, 1.0, dtype="bfloat16")
    assert ref.dtype == ml_dtypes.bfloat16
    for dt in (ml_dtypes.bfloat16, np.dtype(ml_dtypes.bfloat16), "BFLOAT16"):
        assert qt.dequantize(q, -1.0, 1.0, dtype=dt).tobytes() == ref.tobytes()
    # bfloat16 is the float32 result rounded to nearest even
    assert ref.tobytes() == qt.dequantize(q, -1.0, 1.0).astype(ml_dtypes.bfloat16).tobytes()


def test_python_data():
    q1 = qt.quantize([[0.5, -0.25]], -1, 1, "qint8", mode="SCALED")[0]
    q2 = qt.quantize(np.array([[0.5, -0.25]], f32), f32(-1), f32(1), "qint8", mode="SCALED")[0]
    assert q1.tobytes() == q2.tobytes()
    assert qt.quantize(0.5, -1, 1, "qint8")[0].shape == ()


def test_out():
    out = np.empty(X.shape, np.uint8)
    r = qt.quantize(X, -1.0, 1.0, "quint8", mode="SCALED", out=out)
    assert r[0] is out and out.tobytes() == qt.quantize(X, -1.0, 1.0, "quint8", mode="SCALED")[0].tobytes()
    q = r[0]
    out_f = np.empty(X.shape, f32)
    assert qt.dequantize(q, r[1], r[2], mode="SCALED", out=out_f) is out_f
    assert out_f.tobytes() == qt.dequantize(q, r[1], r[2], mode="SCALED").tobytes()
    out_b = np.empty(X.shape, ml_dtypes.bfloat16)
    assert qt.dequantize(q, r[1], r[2], dtype="bfloat16", out=out_b) is out_b


def test_inputs_are_not_modified():
    x = np.array([1e-40, -1e-40, 0.5, np.nan], f32)
    keep = x.tobytes()
    lo = np.array([-1e-39], f32)
    for call in (lambda: qt.quantize(x, lo, 1.0, "qint8"), lambda: qt.quantize_and_dequantize_v2(x),
                 lambda: qt.fake_quant_with_min_max_vars(x, lo[0], f32(1))):
        call()
        assert x.tobytes() == keep and lo.tobytes() == np.array([-1e-39], f32).tobytes()


def test_prepare_then_compute():
    plan = prepare_quantize(np.array([-1, -2, -3], f32), np.array([1, 2, 3], f32), "qint8", shape=X.shape,
                            mode="SCALED", axis=1)
    assert dataclasses.is_dataclass(plan) and plan.__dataclass_params__.frozen
    for name in ("lo", "hi", "scale", "bias", "output_min", "output_max"):
        a = getattr(plan, name)
        assert a.dtype == f32 and a.shape == (3,) and a.flags.c_contiguous
    q = compute_quantize(X, plan)
    assert q.tobytes() == qt.quantize(X, [-1, -2, -3], [1, 2, 3], "qint8", mode="SCALED", axis=1)[0].tobytes()
    dplan = prepare_dequantize(np.float32(-1), np.float32(1), "qint8", shape=X.shape)
    assert dplan.scale.shape == (1,) and dplan.scale.dtype == f32


def test_negative_axis_is_normalised():
    a = qt.quantize(X, [-1, -2, -3], [1, 2, 3], "qint8", axis=1)
    b = qt.quantize(X, [-1, -2, -3], [1, 2, 3], "qint8", axis=-2)
    assert all(u.tobytes() == v.tobytes() for u, v in zip(a, b))
    assert (qt.dequantize(a[0], a[1], a[2], axis=-2).tobytes() == qt.dequantize(a[0], a[1], a[2], axis=1).tobytes())
    assert (qt.quantize_and_dequantize_v2(X, axis=-1).tobytes() == qt.quantize_and_dequantize_v2(X, axis=2).tobytes())


def test_onednn_equals_eigen_where_not_rewritten():
    for T in spec.TYPES:
        for mode, rm in (("MIN_COMBINED", "HALF_AWAY_FROM_ZERO"), ("SCALED", "HALF_AWAY_FROM_ZERO"),
                         ("MIN_FIRST", "HALF_AWAY_FROM_ZERO")):
            if mode == "MIN_FIRST" and T == "quint8":
                continue
            e = qt.quantize(X, -1.5, 2.5, T, mode=mode, round_mode=rm)
            o = qt.quantize(X, -1.5, 2.5, T, mode=mode, round_mode=rm, kernel="onednn")
            assert all(u.tobytes() == v.tobytes() for u, v in zip(e, o)), (T, mode)
        # narrow_range and per-axis calls are not rewritten either
        e = qt.quantize(X, -1.5, 2.5, T, mode="SCALED", round_mode="HALF_TO_EVEN", narrow_range=True)
        o = qt.quantize(X, -1.5, 2.5, T, mode="SCALED", round_mode="HALF_TO_EVEN", narrow_range=True, kernel="onednn")
        assert e[0].tobytes() == o[0].tobytes()


def test_routes():
    r = spec.route
    assert r("quantize", "onednn", "SCALED", "qint8", round_mode="HALF_TO_EVEN").kernel == "onednn"
    assert r("quantize", "onednn", "SCALED", "qint8", round_mode="HALF_AWAY_FROM_ZERO").kernel == "eigen"
    assert r("quantize", "onednn", "SCALED", "qint8", round_mode="HALF_TO_EVEN", narrow_range=True).kernel == "eigen"
    assert r("quantize", "onednn", "SCALED", "qint8", round_mode="HALF_TO_EVEN", per_axis=True).kernel == "eigen"
    assert r("quantize", "onednn", "SCALED", "qint32", round_mode="HALF_TO_EVEN").kernel == "missing"
    assert r("quantize", "onednn", "SCALED", "quint16", round_mode="HALF_TO_EVEN").kernel == "eigen"
    assert r("quantize", "onednn", "MIN_FIRST", "quint8", round_mode="HALF_AWAY_FROM_ZERO").kernel == "onednn"
    assert r("quantize", "onednn", "MIN_FIRST", "qint8", round_mode="HALF_AWAY_FROM_ZERO").kernel == "eigen"
    assert r("dequantize", "onednn", "SCALED", "quint8", narrow_range=True).kernel == "onednn"
    assert r("dequantize", "onednn", "MIN_COMBINED", "quint8").kernel == "eigen"
    assert r("dequantize", "eigen", "SCALED", "qint32").kernel == "eigen"


def test_spec_types_come_from_the_type_table():
    from quantspec import dtypes
    for name, t in spec.TYPES.items():
        row = dtypes.qtype(name)
        assert (t.lowest, t.highest, t.dtype) == (row.qmin, row.qmax, row.dtype)
    assert list(spec.TYPES) == ["qint8", "quint8", "qint16", "quint16", "qint32"]


def test_qdq_ignores_range_when_not_given():
    a = qt.quantize_and_dequantize_v2(X)
    b = qt.quantize_and_dequantize_v2(X, np.ones((5, 5), f32), None, range_given=False)
    assert a.tobytes() == b.tobytes()
    assert qt.quantize_and_dequantize_v3(X, None, None, 8, range_given=False).tobytes() == a.tobytes()
    assert qt.quantize_and_dequantize_v4(X.astype(np.float64)).dtype == np.float64


def test_byte_order():
    x = X.astype(">f4")
    q = qt.quantize(x, -1.0, 1.0, "qint16")[0]
    assert q.tobytes() == qt.quantize(X, -1.0, 1.0, "qint16")[0].tobytes()
    assert qt.dequantize(q.astype(">i2"), -1.0, 1.0).tobytes() == qt.dequantize(q, -1.0, 1.0).tobytes()


def test_zero_d_float64_arrays_too_and_other_inexact_values_still_refused():
    """Found by the API fuzzer (a numpy float64 scalar is a float32 range argument, rounded as
    TensorFlow rounds it): 0-d float64 arrays are taken the same way; other inexact values, such as
    float64 per-channel ranges, are still refused."""
    import quantspec.tf as qt
    from quantspec.errors import DTypeError

    x = np.linspace(-1, 1, 9, dtype=np.float32)
    a = qt.quantize(x, np.array(-0.1), np.array(1 / 3), "qint8")
    b = qt.quantize(x, -0.1, 1 / 3, "qint8")
    assert all(np.asarray(u).tobytes() == np.asarray(v).tobytes() for u, v in zip(a, b))
    with pytest.raises(DTypeError, match="cannot be converted exactly"):
        qt.fake_quant_with_min_max_vars_per_channel(x.reshape(3, 3), np.array([-0.1, -1, -1]), np.ones(3))
