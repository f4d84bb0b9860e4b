"""The int32 / int64 / bool / float32 kernels of the shape arithmetic (quantspec/litert/kernels/
shape_arithmetic.py, and the plain paths of existing ops) one operator at a time, in the three
kernel modes against LiteRT with the matching resolver (tests/support/litert_modes.py): edge values
(the int32 minimum, negative divisors, wrap-around, ties, -0.0 and NaN) included.  And the errors:
what LiteRT fails on is a quantspec error, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

import litert_build
from litert_build import T
from litert_modes import MODES, check_mode

I32_MIN, I32_MAX = -2**31, 2**31 - 1
#: operator versions the models name (the lowest LiteRT registers)
VERSIONS = {"BROADCAST_TO": 2}


@pytest.fixture(autouse=True)
def _options_tables(monkeypatch):
    # the options tables of the ops litert_build does not list (it writes none for them otherwise)
    for op, table in (("ARG_MIN", "ArgMinOptions"), ("CAST", "CastOptions"),
                      ("GATHER_ND", "GatherNdOptions")):
        monkeypatch.setitem(litert_build.OPTIONS_TABLE, op, table)


def _i32(*v):
    return np.array(v, np.int32)


def _check(op, inputs, outputs, feeds, options=None):
    for mode in MODES:
        check_mode(op, inputs, outputs, options, feeds, mode, version=VERSIONS.get(op, 1))


def test_neg():
    _check("NEG", [T((6,), "int32")], [T((6,), "int32")], [_i32(0, 1, -5, I32_MIN, I32_MAX, 77)])
    _check("NEG", [T((3,), "int64")], [T((3,), "int64")], [np.array([-2**63, 5, 0], np.int64)])


def test_neg_float_xnnpack_zero():
    """The XNNPACK delegate takes float32 NEG and computes 0 - x: +0.0 for -0.0 and for +0.0."""
    x = np.array([0.0, -0.0, 1.5, -2.0, np.inf, np.nan], np.float32)
    outs = {mode: check_mode("NEG", [T((6,), "float")], [T((6,), "float")], None, [x], mode, version=1)[0]
            for mode in MODES}
    assert np.signbit(outs["reference"][0]) and not np.signbit(outs["xnnpack"][0])


_NUM = _i32(7, -7, 7, -7, 0, 1, -1, I32_MAX, I32_MIN, I32_MIN + 1, 5, -13)
_DEN = _i32(2, 2, -2, -2, 3, -4, 4, -3, 7, -1, 5, 4)


@pytest.mark.parametrize("op", ["FLOOR_DIV", "FLOOR_MOD"])
def test_floor_div_mod_int32(op):
    _check(op, [T((12,), "int32"), T((12,), "int32")], [T((12,), "int32")], [_NUM, _DEN])
    # broadcasting, divisor constant
    _check(op, [T((2, 3), "int32"), T((3,), "int32", data=_i32(3, -3, 5))], [T((2, 3), "int32")],
           [_i32(-8, 8, -1, 9, -9, 0).reshape(2, 3)])


def test_floor_div_int32_min_by_minus_one():
    """floor(double(-2^31) / -1) = 2^31 converts out of range: x86 gives -2^31 (LiteRT's result)."""
    _check("FLOOR_DIV", [T((1,), "int32"), T((1,), "int32")], [T((1,), "int32")], [_i32(I32_MIN), _i32(-1)])


def test_floor_mod_int64_and_float():
    x = np.array([7, -7, 2**40 + 3, -(2**40) - 3], np.int64)
    _check("FLOOR_MOD", [T((4,), "int64"), T((4,), "int64")], [T((4,), "int64")], [x, np.array([-3, 3, -5, 5], np.int64)])
    r = np.random.default_rng(3)
    a = r.uniform(-10, 10, 40).astype(np.float32)
    b = r.choice([-3.5, -1.25, 0.75, 2.0], 40).astype(np.float32)
    for op in ("FLOOR_MOD", "FLOOR_DIV"):
        _check(op, [T((40,), "float"), T((40,), "float")], [T((40,), "float")], [a, b])


def test_maximum_minimum_plain():
    x, y = _i32(1, -5, I32_MIN, 9), _i32(2, -6, I32_MAX, 9)
    for op in ("MAXIMUM", "MINIMUM"):
        _check(op, [T((4,), "int32"), T((4,), "int32")], [T((4,), "int32")], [x, y])
        _check(op, [T((2, 4), "int64"), T((4,), "int64")], [T((2, 4), "int64")],
               [np.arange(-4, 4, dtype=np.int64).reshape(2, 4), np.array([0, -1, 1, 2], np.int64)])
        f = np.array([0.0, -0.0, 1.0, np.nan, 2.0], np.float32)
        g = np.array([-0.0, 0.0, np.nan, 1.0, 3.0], np.float32)
        _check(op, [T((5,), "float"), T((5,), "float")], [T((5,), "float")], [f, g])


def test_logical_ops():
    a = np.array([[True, False, True], [False, False, True]])
    b = np.array([True, False, False])
    for op in ("LOGICAL_AND", "LOGICAL_OR"):
        _check(op, [T((2, 3), "bool"), T((3,), "bool")], [T((2, 3), "bool")], [a, b])
    _check("LOGICAL_NOT", [T((2, 3), "bool")], [T((2, 3), "bool")], [a])


def test_comparisons_int32():
    x, y = _i32(1, -5, I32_MIN, 9), _i32(2, -6, I32_MAX, 9)
    for op in ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"):
        _check(op, [T((4,), "int32"), T((4,), "int32")], [T((4,), "bool")], [x, y])


def test_select_and_select_v2():
    cond = np.array([True, False, True])
    x = np.arange(6, dtype=np.int32).reshape(3, 2)
    y = -x - 1
    _check("SELECT", [T((3,), "bool"), T((3, 2), "int32"), T((3, 2), "int32")], [T((3, 2), "int32")], [cond, x, y])
    full = np.array([[True, False], [False, True], [True, True]])
    _check("SELECT", [T((3, 2), "bool"), T((3, 2), "float"), T((3, 2), "float")], [T((3, 2), "float")],
           [full, x.astype(np.float32), y.astype(np.float32)])
    # SELECT_V2 broadcasts all three; int8 codes are copied (same parameters)
    _check("SELECT_V2", [T((2,), "bool"), T((3, 2), "int32"), T((1,), "int32")], [T((3, 2), "int32")],
           [np.array([True, False]), x, _i32(-9)])
    q = np.arange(-3, 3, dtype=np.int8).reshape(3, 2)
    _check("SELECT_V2", [T((3, 1), "bool"), T((3, 2), "int8", 0.5, 1), T((3, 2), "int8", 0.5, 1)],
           [T((3, 2), "int8", 0.5, 1)], [np.array([[True], [False], [True]]), q, -q])


def test_range():
    _check("RANGE", [T((), "int32"), T((), "int32"), T((), "int32")], [T((4,), "int32")], [_i32(10)[0], _i32(-3)[0],
                                                                                         _i32(-4)[0]])
    _check("RANGE", [T((), "int32", data=_i32(0)), T((), "int32"), T((), "int32", data=_i32(1))], [T((1,), "int32")],
           [np.array(5, np.int32)])
    _check("RANGE", [T((), "float"), T((), "float"), T((), "float")], [T((1,), "float")],
           [np.float32(0.1), np.float32(2.3), np.float32(0.1)])


def test_fill():
    _check("FILL", [T((2,), "int32"), T((), "int32")], [T((1, 1), "int32")], [_i32(2, 3), np.array(-7, np.int32)])
    _check("FILL", [T((1,), "int64"), T((), "bool")], [T((1,), "bool")], [np.array([4], np.int64), np.array(True)])
    _check("FILL", [T((3,), "int32"), T((), "float")], [T((1, 1, 1), "float")], [_i32(1, 2, 2), np.float32(-0.5)])


@pytest.mark.parametrize("src,dst,x", [
    ("int32", "float", _i32(0, -3, 2**24 + 1, I32_MIN, I32_MAX)),
    ("float", "int32", np.array([0.0, -0.0, 2.9, -2.9, 1e9, -1e9, 0.5], np.float32)),
    ("int32", "bool", _i32(0, -3, 4, 0, I32_MIN)),
    ("bool", "int32", np.array([True, False, True])),
    ("int32", "int64", _i32(0, -3, I32_MIN, I32_MAX)),
    ("int64", "int32", np.array([2**40 + 5, -(2**33) - 1, 7, -1], np.int64)),
    ("int32", "int8", _i32(127, 128, -129, 300, -1)),
    ("float", "int8", np.array([1.9, -1.9, 127.5, -128.9], np.float32)),
    ("bool", "float", np.array([True, False])),
])
def test_cast(src, dst, x):
    _check("CAST", [T(x.shape, src)], [T(x.shape, dst)], [x])


def test_expand_dims_broadcast_to_tile():
    x = _i32(1, 2, 3)
    _check("EXPAND_DIMS", [T((3,), "int32"), T((1,), "int32", data=_i32(-1))], [T((3, 1), "int32")], [x])
    _check("EXPAND_DIMS", [T((3,), "bool"), T((), "int32")], [T((1, 3), "bool")], [x > 1, np.array(0, np.int32)])
    _check("BROADCAST_TO", [T((3, 1), "int32"), T((3,), "int32")], [T((2, 3, 4), "int32")], [x.reshape(3, 1),
                                                                                           _i32(2, 3, 4)])
    _check("TILE", [T((2, 3), "int32"), T((2,), "int32")], [T((4, 3), "int32")],
           [np.arange(6, dtype=np.int32).reshape(2, 3), _i32(2, 1)])
    _check("TILE", [T((3,), "bool"), T((1,), "int64")], [T((6,), "bool")], [x > 1, np.array([2], np.int64)])


def test_gather_nd():
    params = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    _check("GATHER_ND", [T((2, 3, 4), "int32"), T((3, 2), "int32")], [T((3, 4), "int32")],
           [params, _i32(1, 2, 0, 0, 1, 1).reshape(3, 2)])
    _check("GATHER_ND", [T((2, 3, 4), "int32"), T((2, 3), "int32")], [T((2,), "int32")],
           [params, _i32(1, 2, 3, 0, 0, 0).reshape(2, 3)])
    _check("GATHER_ND", [T((3, 2), "float"), T((2, 1), "int64")], [T((2, 2), "float")],
           [np.arange(6, dtype=np.float32).reshape(3, 2), np.array([[2], [0]], np.int64)])


def test_reduce_prod():
    x = _i32(65536, 65536, 3, -7, I32_MAX, 2).reshape(2, 3)       # wraps
    axis = T((1,), "int32", data=_i32(1))
    _check("REDUCE_PROD", [T((2, 3), "int32"), axis], [T((2,), "int32")], [x])
    _check("REDUCE_PROD", [T((2, 3), "int32"), T((2,), "int32", data=_i32(0, -1))], [T((1, 1), "int32")], [x],
           options={"keep_dims": True})
    f = np.random.default_rng(5).uniform(0.5, 1.5, (4, 7)).astype(np.float32)
    _check("REDUCE_PROD", [T((4, 7), "float"), T((1,), "int32", data=_i32(1))], [T((4,), "float")], [f])


def test_arg_min_max_ties():
    x = _i32(3, 1, 1, 5, 5, -2, -2, 5).reshape(2, 4)
    for op in ("ARG_MIN", "ARG_MAX"):
        for out in ("INT32", "INT64"):
            _check(op, [T((2, 4), "int32"), T((1,), "int32", data=_i32(1))], [T((2,), out.lower())], [x],
                   options={"output_type": out})
        _check(op, [T((2, 4), "int32"), T((), "int32")], [T((4,), "int32")], [x, np.array(0, np.int32)],
               options={"output_type": "INT32"})


def test_existing_movement_on_int32():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4) - 10
    _check("SQUEEZE", [T((1, 3, 1), "int32")], [T((3,), "int32")], [_i32(4, -5, 6).reshape(1, 3, 1)])
    _check("STRIDED_SLICE", [T((2, 3, 4), "int32"), T((3,), "int32", data=_i32(0, 1, -1)),
                             T((3,), "int32", data=_i32(0, 3, 0)), T((3,), "int32", data=_i32(1, 1, -2))],
           [T((3, 2), "int32")], [x], options={"begin_mask": 1, "end_mask": 5, "shrink_axis_mask": 1})
    _check("PACK", [T((2,), "int32"), T((2,), "int32")], [T((2, 2), "int32")], [_i32(1, 2), _i32(3, 4)],
           options={"values_count": 2, "axis": 1})
    _check("CONCATENATION", [T((2,), "int32"), T((1,), "int32")], [T((3,), "int32")], [_i32(1, 2), _i32(-3)],
           options={"axis": 0})
    _check("GATHER", [T((2, 3, 4), "int32"), T((2, 2), "int32")], [T((2, 3, 2), "int32")],
           [x, _i32(3, 0, 1, 1).reshape(2, 2)], options={"axis": 2, "batch_dims": 1})


# -- errors: LiteRT fails, quantspec raises its own error ------------------------------------------

def _run(op, inputs, outputs, arrays, options=None):
    from litert_kernel_check import spec
    from quantspec.litert import OPS

    kernel = OPS[op]
    return kernel.compute(kernel.prepare([spec(t) for t in inputs], [spec(t) for t in outputs], options or {}), arrays)


def _litert_fails(op, inputs, outputs, feeds, options=None):
    from litert_modes import litert_run

    with pytest.raises((RuntimeError, ValueError)):
        litert_run(litert_build.build(op, inputs, outputs, options), feeds, "reference")


@pytest.mark.parametrize("op", ["FLOOR_DIV", "FLOOR_MOD"])
def test_division_by_zero(op):
    from quantspec.errors import InvalidArgumentError

    ins, outs, feeds = [T((2,), "int32"), T((2,), "int32")], [T((2,), "int32")], [_i32(4, 5), _i32(2, 0)]
    _litert_fails(op, ins, outs, feeds)
    with pytest.raises(InvalidArgumentError, match="Division by 0"):
        _run(op, ins, outs, feeds)


def test_range_and_gather_nd_errors():
    from quantspec.errors import InvalidArgumentError

    ins = [T((), "int32"), T((), "int32"), T((), "int32")]
    feeds = [np.array(0, np.int32), np.array(5, np.int32), np.array(-1, np.int32)]
    _litert_fails("RANGE", ins, [T((1,), "int32")], feeds)
    with pytest.raises(InvalidArgumentError):
        _run("RANGE", ins, [T((1,), "int32")], feeds)
    g = [T((2, 2), "int32"), T((1, 2), "int32")]
    feeds = [np.zeros((2, 2), np.int32), _i32(0, 2).reshape(1, 2)]
    _litert_fails("GATHER_ND", g, [T((1,), "int32")], feeds)
    with pytest.raises(InvalidArgumentError):
        _run("GATHER_ND", g, [T((1,), "int32")], feeds)


def test_unsupported_types_are_errors():
    from quantspec.errors import DTypeError, QuantSpecError, UnsupportedError

    with pytest.raises(DTypeError):
        _run("LOGICAL_AND", [T((2,), "int32"), T((2,), "int32")], [T((2,), "bool")], [_i32(1, 0), _i32(1, 1)])
    with pytest.raises(UnsupportedError):
        _run("REDUCE_PROD", [T((2,), "int8"), T((1,), "int32", data=_i32(0))], [T((), "int8")],   # not quantized
             [np.array([1, 2], np.int8)])
    with pytest.raises(UnsupportedError):
        _run("FLOOR_MOD", [T((1,), "int32"), T((1,), "int32")], [T((1,), "int32")], [_i32(I32_MIN), _i32(-1)])
    with pytest.raises(UnsupportedError):
        _run("CAST", [T((1,), "float")], [T((1,), "int32")], [np.array([np.nan], np.float32)])
    with pytest.raises(QuantSpecError):
        _run("SELECT", [T((2,), "bool"), T((3,), "int32"), T((3,), "int32")], [T((3,), "int32")],
             [np.array([True, False]), _i32(1, 2, 3), _i32(1, 2, 3)])
