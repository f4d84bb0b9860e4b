"""Every input the ONNX rules forbid raises a quantspec error naming the argument, the rule and the
value — and nothing else (no IndexError, AssertionError or numpy broadcast error) ever escapes."""

from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

from quantspec import onnx as qo
from quantspec.errors import (AxisError, DTypeError, InvalidArgumentError, OpsetError, QuantSpecError, RangeError,
                              RuntimeUnsupportedError, ShapeError)

X = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
F32 = np.float32


def q(*args, **kw):
    return qo.quantize_linear(*args, **kw)


def dq(*args, **kw):
    return qo.dequantize_linear(*args, **kw)


QUANTIZE_CASES = [
    # (id, call, exception class, message fragment)
    ("compat", lambda: q(X, F32(1), compat="ort"), InvalidArgumentError, "compat: must be one of"),
    ("opset too old", lambda: q(X, F32(1), opset=9), OpsetError, "first exist in opset 10"),
    ("opset not int", lambda: q(X, F32(1), opset="13"), OpsetError, "opset: must be an integer"),
    ("axis before 13", lambda: q(X, F32(1), axis=0, opset=10), OpsetError, "has no attribute 'axis'"),
    ("saturate before 19", lambda: q(X, F32(1), saturate=False, opset=13), OpsetError, "arrived in opset 19"),
    ("block_size before 21", lambda: q(X, np.ones((1, 3, 4), F32), block_size=2, axis=0, opset=19), OpsetError,
     "arrived in opset 21"),
    ("output_dtype before 21", lambda: q(X, F32(1), output_dtype="int8", opset=19), OpsetError,
     "has no attribute 'output_dtype'"),
    ("precision before 23", lambda: q(X, F32(1), precision="float16", opset=21), OpsetError, "arrived in opset 23"),
    ("x float64", lambda: q(X.astype(np.float64), F32(1)), DTypeError, "x: QuantizeLinear-28 accepts x of type"),
    ("x bool", lambda: q(np.array([True]), F32(1)), DTypeError, "x: QuantizeLinear-28 accepts x"),
    ("x strings", lambda: q(np.array(["a"]), F32(1)), DTypeError, "x: must be a numeric array"),
    ("x float16 at 13", lambda: q(X.astype(np.float16), F32(1), opset=13), DTypeError, "QuantizeLinear-13 accepts x"),
    ("unknown type name", lambda: q(X, F32(1), output_dtype="int3"), DTypeError, "not a type name quantspec knows"),
    ("unknown type number", lambda: q(X, F32(1), output_dtype=99), DTypeError, "not an ONNX TensorProto"),
    ("output not quantized", lambda: q(X, F32(1), output_dtype="float32"), DTypeError, "accepts outputs of type"),
    ("int2 before 25", lambda: q(X, F32(1), output_dtype="int2", opset=24), DTypeError, "QuantizeLinear-24 accepts"),
    ("float6 before 28", lambda: q(X, F32(1), output_dtype="float6e2m3", opset=25), DTypeError, "QuantizeLinear-25"),
    ("float4 before 23", lambda: q(X, F32(1), output_dtype="float4e2m1", opset=21), DTypeError, "QuantizeLinear-21"),
    ("zp vs output_dtype", lambda: q(X, F32(1), np.int8(0), output_dtype="uint8"), DTypeError,
     "must equal the type of y_zero_point"),
    ("zp float32", lambda: q(X, F32(1), np.float32(0)), DTypeError, "y_zero_point"),
    ("scale float64", lambda: q(X, np.float64(1)), DTypeError, "y_scale: QuantizeLinear-28 accepts a scale"),
    ("e8m0 scale before 24", lambda: q(X, np.array(1, ml_dtypes.float8_e8m0fnu), opset=23), DTypeError,
     "QuantizeLinear-23 accepts a scale"),
    ("mixed scale before 23", lambda: q(X, np.float16(1), opset=21), DTypeError, "share one type"),
    ("precision int8", lambda: q(X, F32(1), precision="int8"), DTypeError, "precision: QuantizeLinear-28 accepts"),
    ("per-axis before 13", lambda: q(X, np.ones(3, F32), opset=10), OpsetError, "per-axis quantization arrived"),
    ("axis out of range", lambda: q(X, np.ones(3, F32), axis=3), AxisError, "must be in [-3, 2] for a rank-3 input"),
    ("axis negative out of range", lambda: q(X, np.ones(3, F32), axis=-4), AxisError, "must be in [-3, 2]"),
    ("axis not int", lambda: q(X, np.ones(3, F32), axis=1.5), AxisError, "axis: must be an integer"),
    ("per-axis length", lambda: q(X, np.ones(4, F32), axis=1), ShapeError, "one entry per element of axis 1"),
    ("per-axis scalar zp", lambda: q(X, np.ones(3, F32), np.uint8(0), axis=1), ShapeError,
     "y_zero_point: must have the shape of y_scale"),
    ("zp shape", lambda: q(X, np.ones(3, F32), np.zeros(2, np.uint8), axis=1), ShapeError, "must have the shape"),
    ("per-tensor zp not scalar", lambda: q(X, F32(1), np.zeros(3, np.uint8)), ShapeError, "must be a scalar"),
    ("per-tensor with block", lambda: q(X, F32(1), block_size=2), RangeError, "must be 0 when the scale is a scalar"),
    ("negative block", lambda: q(X, np.ones((2, 3, 2), F32), block_size=-1, axis=2), RangeError, "must be >= 0"),
    ("block out of range", lambda: q(X, np.ones((2, 3, 2), F32), block_size=4, axis=2), RangeError,
     "accepted block sizes [2, 3]"),
    ("block too small", lambda: q(X, np.ones((2, 3, 2), F32), block_size=1, axis=2), RangeError,
     "ceil(x.shape[2] / block_size)"),
    ("blocked rank", lambda: q(X, np.ones((3, 2), F32), block_size=2, axis=1), ShapeError,
     "must have the rank of x (3)"),
    ("blocked other dim", lambda: q(X, np.ones((2, 2, 2), F32), block_size=2, axis=2), ShapeError,
     "except on the blocked axis 2"),
    ("rank-2 scale without block", lambda: q(X, np.ones((3, 4), F32), axis=1), ShapeError, "needs block_size > 0"),
    ("rank-1 default axis", lambda: q(np.ones(5, F32), np.ones(5, F32)), AxisError,
     "must be in [-1, 0] for a rank-1 input"),
    ("rank-0 per-axis", lambda: q(F32(1), np.ones(2, F32), axis=0), AxisError, "rank-0 input"),
    ("python zp out of uint8", lambda: q(X, 0.5, -3), InvalidArgumentError, "must lie in [0, 255] for uint8"),
    ("python zp not integer", lambda: q(X, 0.5, 1.5, output_dtype="int8"), DTypeError, "must hold integers"),
    ("block_size float", lambda: q(X, F32(1), block_size=2.5), InvalidArgumentError, "block_size: must be an integer"),
    ("saturate string", lambda: q(X, F32(1), saturate="yes"), InvalidArgumentError, "saturate: must be a bool"),
    ("out shape", lambda: q(X, F32(1), out=np.empty(3, np.uint8)), ShapeError, "out: must be an array of shape"),
    ("out dtype", lambda: q(X, F32(1), out=np.empty(X.shape, np.int8)), ShapeError, "dtype uint8"),
    ("ort bfloat16", lambda: q(X.astype(ml_dtypes.bfloat16), np.array(1, ml_dtypes.bfloat16), compat="onnxruntime",
                               ort_version="1.31.1"),
     RuntimeUnsupportedError, "onnxruntime 1.31 has no CPU kernel for QuantizeLinear from bfloat16"),
    ("ort 1.32 bfloat16", lambda: q(X.astype(ml_dtypes.bfloat16), np.array(1, ml_dtypes.bfloat16),
                                    compat="onnxruntime", ort_version="1.32.0"),
     RuntimeUnsupportedError, "onnxruntime 1.32 has no CPU kernel for QuantizeLinear from bfloat16"),
    ("ort int32", lambda: q(np.arange(4, dtype=np.int32), np.int32(1), compat="onnxruntime"),
     RuntimeUnsupportedError, "no CPU kernel"),
    ("ort mixed", lambda: q(X, np.float16(1), compat="onnxruntime", opset=25, ort_version="1.31"),
     RuntimeUnsupportedError, "different types"),
    ("ort float4", lambda: q(X, F32(1), output_dtype="float4e2m1", compat="onnxruntime"), RuntimeUnsupportedError,
     "QuantizeLinear to float4e2m1"),
    ("ort opset 28", lambda: q(X, F32(1), opset=28, compat="onnxruntime", ort_version="1.31.1"),
     RuntimeUnsupportedError, "up to opset 26"),
    ("ort 1.32 opset 28", lambda: q(X, F32(1), opset=28, compat="onnxruntime", ort_version="1.32.0"),
     RuntimeUnsupportedError, "no CPU kernel for QuantizeLinear-28"),
    ("ort 1.32 opset 29", lambda: q(X, F32(1), opset=29, compat="onnxruntime", ort_version="1.32.0"),
     QuantSpecError, "opset"),
    ("ort e8m0", lambda: q(X, np.array(1, ml_dtypes.float8_e8m0fnu), compat="onnxruntime"), RuntimeUnsupportedError,
     "no CPU kernel"),
]

DEQUANTIZE_CASES = [
    ("x list", lambda: dq([1, 2], F32(1)), DTypeError, "a Python list carries no type"),
    ("x float32", lambda: dq(X, F32(1)), DTypeError, "DequantizeLinear-28 accepts x of type"),
    ("int16 before 21", lambda: dq(np.zeros(3, np.int16), F32(1), opset=19), DTypeError, "DequantizeLinear-19"),
    ("zp type", lambda: dq(np.zeros(3, np.int8), F32(1), np.uint8(0)), DTypeError,
     "x_zero_point: must have x's type (int8)"),
    ("int32 zp", lambda: dq(np.zeros(3, np.int32), F32(1), np.int32(4)), InvalidArgumentError,
     "int32 has no zero point"),
    ("float8 zp", lambda: dq(np.zeros(3, ml_dtypes.float8_e4m3fn), F32(1),
                             np.array(1, ml_dtypes.float8_e4m3fn)), InvalidArgumentError, "float8 has no zero point"),
    ("scale int32", lambda: dq(np.zeros(3, np.int8), np.int32(1)), DTypeError, "accepts a scale of type"),
    ("scale float16 at 13", lambda: dq(np.zeros(3, np.int8), np.float16(1), opset=13), DTypeError,
     "DequantizeLinear-13 accepts a scale"),
    ("e8m0 without output_dtype", lambda: dq(np.zeros(3, np.int8), np.array(1, ml_dtypes.float8_e8m0fnu)), DTypeError,
     "output_dtype: is required with a float8e8m0 scale"),
    ("output int8", lambda: dq(np.zeros(3, np.int8), F32(1), output_dtype="int8"), DTypeError,
     "accepts outputs of type"),
    ("output_dtype before 23", lambda: dq(np.zeros(3, np.int8), F32(1), output_dtype="float16", opset=21), OpsetError,
     "has no attribute 'output_dtype'"),
    ("axis out of range", lambda: dq(np.zeros((2, 3), np.int8), np.ones(3, F32), axis=2), AxisError, "[-2, 1]"),
    ("per-axis length", lambda: dq(np.zeros((2, 3), np.int8), np.ones(2, F32), axis=1), ShapeError,
     "one entry per element of axis 1"),
    ("block range", lambda: dq(np.zeros((2, 8), np.int8), np.ones((2, 2), F32), axis=1, block_size=3), RangeError,
     "accepted block sizes [4, 7]"),
    ("ort bf16 scale", lambda: dq(np.zeros(3, np.int8), np.array(1, ml_dtypes.bfloat16), compat="onnxruntime"),
     RuntimeUnsupportedError, "bfloat16 scale"),
    ("ort float4", lambda: dq(np.zeros(4, ml_dtypes.float4_e2m1fn), F32(1), compat="onnxruntime"),
     RuntimeUnsupportedError, "DequantizeLinear from float4e2m1"),
    ("ort float8 -0.0 zero point", lambda: dq(np.zeros(3, ml_dtypes.float8_e4m3fn), F32(1),
                                              np.array(-0.0, ml_dtypes.float8_e4m3fn), compat="onnxruntime"),
     RuntimeUnsupportedError, "other than +0.0"),
    ("out dtype", lambda: dq(np.zeros(3, np.int8), F32(1), out=np.empty(3, np.float16)), ShapeError,
     "dtype float32"),
]

PACKING_CASES = [
    ("pack list", lambda: qo.pack([1, 2]), DTypeError, "array: must be a numpy array"),
    ("pack complex", lambda: qo.pack(np.zeros(2, np.complex64)), DTypeError, "no quantization spec uses"),
    ("unpack size", lambda: qo.unpack(b"\x00", "int4", (3,)), InvalidArgumentError, "must hold 2 bytes"),
    ("unpack dtype", lambda: qo.unpack(b"\x00", "int5", (1,)), DTypeError, "not a type name"),
    ("unpack shape", lambda: qo.unpack(b"\x00", "int8", (-1,)), ShapeError, "non-negative integers"),
    ("unpack data", lambda: qo.unpack("00", "int8", (1,)), DTypeError, "data: must be bytes"),
]


@pytest.mark.parametrize("call,cls,fragment", [pytest.param(c, e, f, id=i)
                                               for i, c, e, f in QUANTIZE_CASES + DEQUANTIZE_CASES + PACKING_CASES])
def test_invalid_input_raises(call, cls, fragment):
    with pytest.raises(cls) as info:
        call()
    assert fragment in str(info.value)
    assert isinstance(info.value, (ValueError, TypeError))


def test_error_names_argument_rule_and_value():
    with pytest.raises(AxisError) as info:
        q(X, np.ones(3, F32), axis=7)
    e = info.value
    assert e.argument == "axis" and e.value == 7 and "rank-3" in e.rule
    assert str(e) == "axis: must be in [-3, 2] for a rank-3 input (got 7)"


def test_fuzzed_arguments_raise_only_quantspec_errors():
    """Random shapes, axes, block sizes, types, opsets and modes: a result or a QuantSpecError."""
    rng = np.random.default_rng(7)
    types = ["uint8", "int8", "int16", "uint4", "int4", "int2", "float8e4m3fn", "float4e2m1", "float6e3m2", None]
    xtypes = [np.float32, np.float16, ml_dtypes.bfloat16, np.int32, np.float64, np.int8]
    for _ in range(600):
        ndim = int(rng.integers(0, 4))
        shape = tuple(int(d) for d in rng.integers(0, 5, ndim))
        x = rng.normal(size=shape).astype(xtypes[rng.integers(len(xtypes))])
        sndim = int(rng.integers(0, 4))
        s = rng.uniform(0.1, 2, tuple(int(d) for d in rng.integers(0, 5, sndim))).astype(np.float32)
        out = types[rng.integers(len(types))]
        zp = None
        if out is not None and rng.random() < 0.5:
            zshape = s.shape if rng.random() < 0.7 else tuple(int(d) for d in rng.integers(0, 4, int(rng.integers(0, 3))))
            zp = np.zeros(zshape, np.dtype(getattr(ml_dtypes, out, None) or {"float8e4m3fn": ml_dtypes.float8_e4m3fn,
                                                                                "float4e2m1": ml_dtypes.float4_e2m1fn,
                                                                                "float6e3m2": ml_dtypes.float6_e3m2fn
                                                                                }.get(out, out)))
        kw = dict(axis=int(rng.integers(-4, 4)), block_size=int(rng.integers(-1, 4)),
                  opset=[None, 10, 13, 19, 21, 23, 25, 28][rng.integers(8)],
                  compat=["spec", "reference", "onnxruntime"][rng.integers(3)])
        try:
            y = q(x, s, zp, output_dtype=out if zp is None else None, **kw)
            assert y.shape == x.shape
            z = dq(y, s, zp, **{k: v for k, v in kw.items()})
            assert z.shape == x.shape
        except QuantSpecError:
            pass


# -- found by a hostile-input hunt ----------------------------------------------------------------
@pytest.mark.parametrize("block_size", [4, 5, 1 << 40, 1 << 62, (1 << 63) - 1])
@pytest.mark.parametrize("compat", ["spec", "reference", "onnxruntime"])
def test_a_block_longer_than_its_axis_is_one_block(block_size, compat):
    """Valid ONNX (ceil(4 / block_size) == 1 block): the same result as a block of the axis's length,
    at once (the layouts grew with the block size: 2^40 took 12 s, 2^62 never ended)."""
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    s = np.array([[0.1], [0.2], [0.3]], np.float32)
    z = np.array([[1], [-2], [3]], np.int8)
    want = qo.quantize_linear(x, s, z, axis=1, block_size=4, compat=compat)
    got = qo.quantize_linear(x, s, z, axis=1, block_size=block_size, compat=compat)
    assert got.tobytes() == want.tobytes()
    back = qo.dequantize_linear(got, s, z, axis=1, block_size=block_size, compat=compat)
    assert back.tobytes() == qo.dequantize_linear(want, s, z, axis=1, block_size=4, compat=compat).tobytes()


def test_attributes_beyond_int64_and_arrays_are_refused():
    x = np.zeros((3, 4), np.float32)
    with pytest.raises(RangeError, match="must fit int64"):
        qo.quantize_linear(x, np.full((3, 1), 0.1, np.float32), block_size=1 << 70)
    with pytest.raises(InvalidArgumentError, match="compat: must be one of"):
        qo.quantize_linear(x, np.float32(0.1), compat=np.array(["spec", "x"]))
    with pytest.raises(OpsetError, match="has no attribute 'axis'"):
        qo.quantize_linear(x, np.float32(0.1), opset=10, axis=np.array([0, 1]))


def test_unpack_shapes_must_be_integers():
    with pytest.raises(ShapeError, match="non-negative integers"):
        qo.unpack(b"\x00" * 3, "int4", (2.5, 3))
    with pytest.raises(InvalidArgumentError, match="must hold"):
        qo.unpack(b"", "int4", (1 << 32, 1 << 32))      # the element count overflowed int64
    assert qo.unpack(b"\x21\x03", "int4", np.array([3])).tolist() == [1, 2, 3]


def test_onnxruntime_mode_says_it_would_crash_on_an_empty_blocked_axis():
    """onnxruntime 1.31 dies of SIGFPE on a blocked QuantizeLinear whose blocked axis is empty (measured
    in a subprocess); compat="onnxruntime" says so instead of returning the empty array that the spec
    gives.  An empty other axis runs in onnxruntime (an empty result)."""
    with pytest.raises(RuntimeUnsupportedError, match="SIGFPE"):
        qo.quantize_linear(np.zeros((3, 0), np.float32), np.ones((3, 0), np.float32), axis=1, block_size=2,
                           compat="onnxruntime", ort_version="1.31.1")
    assert qo.quantize_linear(np.zeros((3, 0), np.float32), np.ones((3, 0), np.float32), axis=1,
                              block_size=2).shape == (3, 0)
    assert qo.quantize_linear(np.zeros((0, 4), np.float32), np.ones((0, 2), np.float32), axis=1, block_size=2,
                              compat="onnxruntime").shape == (0, 4)


_ORT_BLOCKED = """
import sys, numpy as np
sys.path.insert(0, {tests!r})
import onnx_oracles
x_shape, s_shape, axis = {case!r}
y = onnx_oracles.ort("QuantizeLinear", 21, np.zeros(x_shape, np.float32), np.ones(s_shape, np.float32), None,
                     out_type="uint8", axis=axis, block_size=2)
print("ran", y.shape)
"""


@pytest.mark.parametrize("case", [((3, 0), (3, 0), 1), ((4, 0), (2, 0), 0), ((2, 4, 0), (2, 2, 0), 1),
                                  ((0, 4), (0, 2), 1), ((0, 4, 3), (0, 2, 3), 1), ((2, 4, 3), (2, 2, 3), 1)])
def test_onnxruntime_mode_refuses_exactly_where_blocked_quantize_crashes_it(case):
    """Measured in a subprocess: onnxruntime 1.31 dies of a signal on a blocked QuantizeLinear whose
    blocked axis, or an axis after it, is empty (found by a 20000-example fuzz run: SIGSEGV with an
    empty last axis); compat="onnxruntime" refuses exactly those, and computes the others."""
    import os
    import subprocess
    import sys

    from refs import require

    require("onnxruntime")
    x_shape, s_shape, axis = case
    p = subprocess.run([sys.executable, "-c", _ORT_BLOCKED.format(tests=os.path.join(os.path.dirname(__file__), "support"), case=case)],
                       capture_output=True, text=True, timeout=120)
    crashed = p.returncode < 0
    assert crashed or (p.returncode == 0 and "ran" in p.stdout), p.stderr[-2000:]
    call = lambda: qo.quantize_linear(np.zeros(x_shape, np.float32), np.ones(s_shape, np.float32), axis=axis,  # noqa: E731
                                      block_size=2, output_dtype="uint8", compat="onnxruntime")
    if crashed:
        with pytest.raises(RuntimeUnsupportedError, match="crashes the process"):
            call()
    else:
        assert call().shape == x_shape
