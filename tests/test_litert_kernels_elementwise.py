"""ADD, SUB, MUL, MAXIMUM, MINIMUM and the six comparisons: quantspec's kernels against LiteRT
BUILTIN_REF on random single-op int8 models (random shapes with broadcasting up to rank 8, scales,
zero points, every fused activation, saturation edges), 0 differing bytes; plus the configurations
LiteRT rejects or aborts on."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import (N_MODELS, broadcast_pair, check, int8, litert_outcome, quantspec_run, rng_for,
                                 scale, sweep, zero_point)
from quantspec.errors import QuantSpecError

FUSED = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1", "TANH", "SIGN_BIT"]
COMPARISONS = ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"]


def _binary_case(r, op, i):
    s1, s2 = broadcast_pair(r, max_rank=8 if i % 5 == 4 else 6)
    scales = [scale(r), scale(r), scale(r)]
    if i % 4 == 1:
        scales[1] = scales[0]                      # equal input scales
    if i % 4 == 2:
        scales[2] = scales[0] * 64                 # coarse output: saturation
    if op in ("ADD", "SUB") and i % 6 == 3:
        scales[2] = float(np.float32(2 * max(scales[:2]) / 2 ** 19))   # near the largest output multiplier
    if op == "MUL" and i % 4 == 3:
        scales[2] = float(np.float32(scales[0] * scales[1] / 300))     # a multiplier > 1 (left shift)
    zps = [zero_point(r) for _ in range(3)]
    fused = FUSED[i % 6]
    return s1, s2, scales, zps, fused


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_arithmetic_matches_litert(op):
    r = rng_for(op)
    for i in range(N_MODELS):
        s1, s2, (a, b, o), (za, zb, zo), fused = _binary_case(r, op, i)
        out = np.broadcast_shapes(s1, s2)
        sweep(op, [T(s1, "int8", a, za), T(s2, "int8", b, zb)], [T(out, "int8", o, zo)],
              {"fused_activation_function": fused}, [int8(r, s1, za), int8(r, s2, zb)])


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_arithmetic_exhaustive_pairs(op):
    """All 65536 input pairs for a few parameter sets (every rounding tie the op can hit)."""
    x = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    y = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    r = rng_for(op, "pairs")
    for a, za, b, zb, o, zo, fused in [(0.5, 0, 0.5, 0, 0.5, 0, "NONE"), (0.02, -7, 0.013, 100, 0.031, 3, "RELU"),
                                       (1.0, 127, 0.25, -128, 2.0, -128, "RELU6"),
                                       (scale(r), zero_point(r), scale(r), zero_point(r), scale(r), zero_point(r),
                                        "RELU_N1_TO_1")]:
        check(op, [T((65536,), "int8", a, za), T((65536,), "int8", b, zb)], [T((65536,), "int8", o, zo)],
              {"fused_activation_function": fused}, [x, y])


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
def test_maximum_minimum_match_litert(op):
    r = rng_for(op)
    for i in range(N_MODELS):
        s1, s2, (a, b, o), (za, zb, zo), _ = _binary_case(r, op, i)
        if i % 2:
            b, zb, o, zo = a, za, a, za            # conformant: one set of parameters
        out = np.broadcast_shapes(s1, s2)
        sweep(op, [T(s1, "int8", a, za), T(s2, "int8", b, zb)], [T(out, "int8", o, zo)], {},
              [int8(r, s1), int8(r, s2)])


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparisons_match_litert(op):
    r = rng_for(op)
    for i in range(N_MODELS):
        s1, s2 = broadcast_pair(r, max_rank=8 if i % 5 == 4 else 5)
        a, b = scale(r, -4, 0.5), scale(r, -4, 0.5)
        if i % 3 == 0:
            b = a
        if i % 4 == 1:
            a = scale(r, 0.1, 3)                     # an input scale > 1
        za, zb = zero_point(r), zero_point(r)
        x, y = int8(r, s1, za), int8(r, s2, zb)
        if i % 3 == 0 and x.shape == y.shape:
            y = x.copy()                             # equal values: exercises EQUAL / LESS_EQUAL ties
            zb = za
        out = np.broadcast_shapes(s1, s2)
        sweep(op, [T(s1, "int8", a, za), T(s2, "int8", b, zb)], [T(out, "bool")], {}, [x, y])


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparisons_exhaustive_pairs(op):
    x = np.repeat(np.arange(-128, 128, dtype=np.int8), 256)
    y = np.tile(np.arange(-128, 128, dtype=np.int8), 256)
    for a, za, b, zb in [(0.1, 0, 0.1, 0), (0.1, 3, 0.05, -4), (0.37, -128, 0.0123, 127), (3.5, 1, 0.5, 2)]:
        check(op, [T((65536,), "int8", a, za), T((65536,), "int8", b, zb)], [T((65536,), "bool")], {}, [x, y])


# ---------------------------------------------------------------------------------------------
# what LiteRT refuses, and what quantspec refuses with it
# ---------------------------------------------------------------------------------------------

def _raises(op, inputs, outputs, options, feeds, match):
    with pytest.raises(QuantSpecError, match=match):
        quantspec_run(op, inputs, outputs, options, feeds)


def test_add_output_multiplier_at_least_one_aborts_litert():
    ins = [T((4,), "int8", 1.0, 0), T((4,), "int8", 1.0, 0)]
    outs = [T((4,), "int8", 1e-7, 0)]
    feeds = [np.arange(4, dtype=np.int8), np.arange(4, dtype=np.int8)]
    assert litert_outcome("ADD", ins, outs, {}, feeds) == "abort"
    _raises("ADD", ins, outs, {}, feeds, "makes LiteRT abort")


def test_sub_large_output_multiplier():
    """An output multiplier > 1 in SUB: LiteRT's values where every code path agrees, an error
    where they would differ."""
    r = rng_for("sub-big")
    for so in (1e-7, 2.5e-7):
        x, y = int8(r, (37,)), int8(r, (37,))
        check("SUB", [T((37,), "int8", 1.0, 3), T((37,), "int8", 0.7, -2)], [T((37,), "int8", so, 5)], {}, [x, y])
    x = np.array([127, -128, 0, 5], np.int8)
    _raises("SUB", [T((4,), "int8", 1.0, 3), T((4,), "int8", 0.7, -2)], [T((4,), "int8", 1e-9, 5)], {},
            [x, x[::-1].copy()], "undefined behaviour")


def test_comparison_large_scale_beyond_the_determined_range_raises():
    # scale 2^20: the rescaled values leave the range where LiteRT's code paths agree
    ins = [T((4,), "int8", 2.0 ** 20, 0), T((4,), "int8", 0.5, 0)]
    _raises("GREATER", ins, [T((4,), "bool")], {}, [np.array([100, -100, 0, 1], np.int8), np.zeros(4, np.int8)],
            "undefined behaviour")
    # small values stay within it and match
    check("GREATER", ins, [T((4,), "bool")], {}, [np.array([3, -3, 0, 1], np.int8), np.array([1, 2, 0, -1], np.int8)])


def test_comparison_scale_one_aborts_litert():
    ins = [T((4,), "int8", 1.0, 0), T((4,), "int8", 0.5, 0)]
    outs = [T((4,), "bool")]
    feeds = [np.arange(4, dtype=np.int8), np.arange(4, dtype=np.int8)]
    assert litert_outcome("LESS", ins, outs, {}, feeds) == "abort"
    _raises("LESS", ins, outs, {}, feeds, "scale of exactly 1.0 makes LiteRT abort")


def test_broadcast_above_rank_8_aborts_litert():
    s1, s2 = (2,) * 9, (1,) + (2,) * 8
    ins = [T(s1, "int8", 0.5, 0), T(s2, "int8", 0.5, 0)]
    outs = [T(s1, "int8", 0.5, 0)]
    feeds = [np.ones(s1, np.int8), np.ones(s2, np.int8)]
    assert litert_outcome("ADD", ins, outs, {}, feeds) == "abort"
    _raises("ADD", ins, outs, {}, feeds, "above rank 8 aborts LiteRT")
    # equal shapes go element-wise at any rank
    check("ADD", [T(s1, "int8", 0.5, 0), T(s1, "int8", 0.5, 0)], [T(s1, "int8", 0.5, 0)], {},
          [np.ones(s1, np.int8), np.ones(s1, np.int8)])


def test_sub_zero_point_out_of_range_is_rejected_add_computes_it():
    ins = [T((4,), "int8", 0.5, 300), T((4,), "int8", 0.5, 0)]
    outs = [T((4,), "int8", 0.5, 0)]
    feeds = [np.array([1, -1, 127, -128], np.int8), np.arange(4, dtype=np.int8)]
    assert litert_outcome("SUB", ins, outs, {}, feeds) == "error"
    _raises("SUB", ins, outs, {}, feeds, "LiteRT rejects")
    check("ADD", ins, outs, {}, feeds)


def test_invalid_kernel_inputs():
    f = [np.zeros(3, np.int8), np.zeros(4, np.int8)]
    _raises("ADD", [T((3,), "int8", 0.5, 0), T((4,), "int8", 0.5, 0)], [T((4,), "int8", 0.5, 0)], {}, f,
            "shapes do not broadcast")
    _raises("MUL", [T((3,), "int8", 0.5, 0), T((3,), "int8", [0.5, 0.25, 0.1], 0)], [T((3,), "int8", 0.5, 0)], {},
            [np.zeros(3, np.int8)] * 2, "must be quantized per-tensor")
    _raises("ADD", [T((3,), "uint8", 0.5, 0), T((3,), "uint8", 0.5, 0)], [T((3,), "uint8", 0.5, 0)], {},
            [np.zeros(3, np.uint8)] * 2, "int8 / int16 only")
    _raises("ADD", [T((3,), "int8", 0.5, 0), T((3,), "int8", 0.5, 0)], [T((3,), "int8", 0.5, 0)],
            {"fused_activation_function": "SIGMOID"}, [np.zeros(3, np.int8)] * 2, "fused_activation_function")
    _raises("ADD", [T((3,), "int8", 0.0, 0), T((3,), "int8", 0.5, 0)], [T((3,), "int8", 0.5, 0)], {},
            [np.zeros(3, np.int8)] * 2, "must be finite and > 0")
    from litert_kernel_check import spec
    from quantspec.litert import OPS
    p = OPS["ADD"].prepare([spec(T((3,), "int8", 0.5, 0))] * 2, [spec(T((3,), "int8", 0.5, 0))], {})
    with pytest.raises(QuantSpecError, match="must have the prepared shape"):
        OPS["ADD"].compute(p, [np.zeros(4, np.int8), np.zeros(3, np.int8)])
    with pytest.raises(QuantSpecError, match="must have dtype int8"):
        OPS["ADD"].compute(p, [np.zeros(3, np.uint8), np.zeros(3, np.int8)])
    # a comparison's output stored as int8 is made bool, as LiteRT does (tests/test_litert_types.py)
    p = OPS["LESS"].prepare([spec(T((3,), "int8", 0.5, 0))] * 2, [spec(T((3,), "int8", 0.5, 0))], {})
    assert OPS["LESS"].compute(p, [np.zeros(3, np.int8), np.ones(3, np.int8)])[0].dtype == np.bool_
