"""MEAN, SUM (both semantics), ARG_MAX, REDUCE_PROD, REDUCE_MAX and REDUCE_MIN: quantspec's kernels
against LiteRT BUILTIN_REF (REDUCE_*: and each kernel mode against its resolver), 0 differing bytes;
the default SUM against an independent integer oracle."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import (N_MODELS, check, int8, litert_outcome, quantspec_run, rng_for, scale, shape,
                                 sweep, zero_point)
from quantspec.errors import QuantSpecError


def _axes(r, rank):
    k = int(r.integers(0, rank + 1))
    axes = [int(a) for a in r.choice(rank, size=k, replace=False)] if k else []
    axes = [a - rank if r.random() < 0.3 else a for a in axes]
    if axes and r.random() < 0.2:
        axes.append(axes[0])                          # a repeated axis
    return np.array(axes, np.int32)


def _case(r, i):
    shp = shape(r, 4, 6)
    axes = _axes(r, len(shp))
    s_in = scale(r)
    s_out = s_in if i % 4 == 0 else scale(r)
    return shp, axes, s_in, zero_point(r), s_out, zero_point(r), bool(i % 2)


def test_mean_matches_litert():
    r = rng_for("mean")
    for i in range(N_MODELS * 2):
        shp, axes, s_in, z_in, s_out, z_out, keep = _case(r, i)
        axis_t = T(axes.shape, "int32", data=axes) if i % 3 else T(axes.shape, "int32")    # constant or run-time
        feeds = [int8(r, shp, z_in)] + ([] if i % 3 else [axes])
        sweep("MEAN", [T(shp, "int8", s_in, z_in), axis_t], [T(_out_shape(shp, axes, keep), "int8", s_out, z_out)],
              {"keep_dims": keep}, feeds)
    # a large reduction (n > 2^16) and a 4-D spatial mean
    x = int8(r, (1, 300, 300, 2))
    check("MEAN", [T(x.shape, "int8", 0.1, 3), T((2,), "int32", data=np.array([1, 2], np.int32))],
          [T((1, 1, 1, 2), "int8", 0.05, -4)], {"keep_dims": True}, [x])


def _out_shape(shp, axes, keep):
    rank = len(shp)
    ax = {int(a) % rank for a in axes} if rank else set()
    return tuple(1 if i in ax else d for i, d in enumerate(shp)) if keep else tuple(d for i, d in enumerate(shp)
                                                                                 if i not in ax)


def test_sum_reference_semantics_matches_litert():
    r = rng_for("sum")
    for i in range(N_MODELS * 2):
        shp, axes, s_in, z_in, s_out, z_out, keep = _case(r, i)
        ins = [T(shp, "int8", s_in, z_in), T(axes.shape, "int32", data=axes)]
        outs = [T(_out_shape(shp, axes, keep), "int8", s_out, z_out)]
        sweep("SUM", ins, outs, {"keep_dims": keep, "quantspec_sum_semantics": "reference"}, [int8(r, shp, z_in)],
              model_options={"keep_dims": keep})


def _sum_oracle(x, axes, keep, s_in, z_in, s_out, z_out):
    """The correct int8 SUM, written independently: exact rational arithmetic for the real
    multiplier's fixed-point form, then the LiteRT rounding (double rounding, ties away)."""
    from fractions import Fraction
    import math
    rank = x.ndim
    ax = tuple(sorted({int(a) % rank for a in axes})) if rank else ()
    total = x.astype(np.int64).sum(axis=ax, keepdims=keep) if ax else x.astype(np.int64)
    n = int(np.prod([x.shape[a] for a in ax])) if ax else 1
    real = Fraction(float(np.float32(s_in))) / Fraction(float(np.float32(s_out)))
    # QuantizeMultiplier, exactly
    e = 0
    while real >= Fraction(2) ** e:
        e += 1
    while real < Fraction(2) ** (e - 1):
        e -= 1
    m = math.floor(real * 2 ** 31 / Fraction(2) ** e + Fraction(1, 2))
    if m == 2 ** 31:
        m, e = m // 2, e + 1

    def rnd_up(v):        # SRDHM: nearest, ties toward +infinity
        return math.floor(v + Fraction(1, 2))

    def rnd_away(v):      # RoundingDivideByPOT: nearest, ties away from zero
        return math.floor(v + Fraction(1, 2)) if v >= 0 else -math.floor(-v + Fraction(1, 2))

    out = []
    for v in np.asarray(total).reshape(-1).tolist():
        d = v - z_in * n
        left, right = max(e, 0), max(-e, 0)
        hi = rnd_up(Fraction(d * 2 ** left * m, 2 ** 31))
        out.append(max(-128, min(127, rnd_away(Fraction(hi, 2 ** right)) + z_out)))
    return np.array(out, np.int8).reshape(np.shape(total))


def test_sum_default_is_the_correct_integer_sum():
    r = rng_for("sum-correct")
    for i in range(N_MODELS * 2):
        shp, axes, s_in, z_in, s_out, z_out, keep = _case(r, i)
        s_out = float(np.float32(s_in * r.uniform(1, 40)))      # sums need a coarser output scale
        x = int8(r, shp, z_in)
        ins = [T(shp, "int8", s_in, z_in), T(axes.shape, "int32", data=axes)]
        outs = [T(_out_shape(shp, axes, keep), "int8", s_out, z_out)]
        (ours,) = quantspec_run("SUM", ins, outs, {"keep_dims": keep}, [x])
        assert ours.tobytes() == _sum_oracle(x, axes, keep, s_in, z_in, s_out, z_out).tobytes()


def test_sum_reference_bug_differs_from_correct_sum():
    x = np.array([[-1, -2, 3, 4]], np.int8)
    ins = [T((1, 4), "int8", 1.0, 0), T((1,), "int32", data=np.array([1], np.int32))]
    outs = [T((1,), "int8", 8.0, 0)]
    ref = check("SUM", ins, outs, {"quantspec_sum_semantics": "reference"}, [x], model_options={})
    (ours,) = quantspec_run("SUM", ins, outs, {}, [x])
    assert ours.tolist() == [1]                   # (-1 - 2 + 3 + 4) / 8 = 0.5 -> 1
    assert ref[0].tolist() == [65]                # BUILTIN_REF: (255 + 254 + 3 + 4) / 8 = 64.5 -> 65


def test_arg_max_matches_litert():
    r = rng_for("arg_max")
    for i in range(N_MODELS * 2):
        shp = shape(r, 4, 6)
        rank = len(shp)
        a = int(r.integers(-rank, rank))
        x = r.integers(-3, 3, shp).astype(np.int8) if i % 2 else int8(r, shp)     # many ties
        axis_dtype = "int32" if i % 3 else "int64"
        axis_data = np.array([a], np.int32 if axis_dtype == "int32" else np.int64)
        axis_t = T((1,), axis_dtype, data=axis_data) if i % 4 else T((1,), axis_dtype)
        out_type = "INT32" if i % 2 else "INT64"
        out_shape = tuple(d for j, d in enumerate(shp) if j != a % rank)
        feeds = [x] + ([] if i % 4 else [axis_data])
        sweep("ARG_MAX", [T(shp, "int8", 0.5, 0), axis_t], [T(out_shape, out_type.lower())],
              {"output_type": out_type}, feeds)


def test_reduce_errors():
    x = np.zeros((2, 3), np.int8)
    ins = [T((2, 3), "int8", 0.5, 0), T((1,), "int32", data=np.array([2], np.int32))]
    assert litert_outcome("MEAN", ins, [T((2,), "int8", 0.5, 0)], {}, [x]) == "error"
    with pytest.raises(QuantSpecError, match="Invalid axis index"):
        quantspec_run("MEAN", ins, [T((2,), "int8", 0.5, 0)], {}, [x])
    with pytest.raises(QuantSpecError, match="quantspec_sum_semantics"):
        quantspec_run("SUM", [ins[0], T((1,), "int32", data=np.array([1], np.int32))], [T((2,), "int8", 0.5, 0)],
                      {"quantspec_sum_semantics": "uint8"}, [x])
    with pytest.raises(QuantSpecError, match="applies to SUM only"):
        quantspec_run("MEAN", [ins[0], T((1,), "int32", data=np.array([1], np.int32))], [T((2,), "int8", 0.5, 0)],
                      {"quantspec_sum_semantics": "reference"}, [x])
    with pytest.raises(QuantSpecError, match="output_type"):
        quantspec_run("ARG_MAX", [ins[0], T((1,), "int32", data=np.array([1], np.int32))], [T((2,), "int32")],
                      {}, [x])


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
def test_reduce_extreme_scales_and_shapes(op):
    r = rng_for(op, "extremes")
    opts = {"quantspec_sum_semantics": "reference"} if op == "SUM" else {}
    x = int8(r, (2, 300, 300))
    for s_in, s_out in [(1e-9, 1.0), (1.0, 1e-6), (0.3, 0.3), (2.0 ** -20, 2.0 ** 5)]:
        ins = [T(x.shape, "int8", s_in, -7), T((2,), "int32", data=np.array([1, -1], np.int32))]
        check(op, ins, [T((2,), "int8", s_out, 11)], dict(opts), [x], model_options={})
    # no axes at all, and a scalar input
    check(op, [T((3, 4), "int8", 0.1, 2), T((0,), "int32", data=np.zeros(0, np.int32))],
          [T((3, 4), "int8", 0.2, -1)], dict(opts), [int8(r, (3, 4))], model_options={})
    check(op, [T((), "int8", 0.1, 2), T((1,), "int32", data=np.array([0], np.int32))],
          [T((), "int8", 0.2, -1)], dict(opts), [np.array(-5, np.int8)], model_options={})


# -- REDUCE_PROD on quantized int8 / int16 --------------------------------------------------------

def _prod_case(r, dtype: str, i: int):
    shp = shape(r, 4, 4)
    axes = _axes(r, len(shp))
    keep = bool(i % 2)
    out_shape = _out_shape(shp, axes, keep)
    n = int(np.prod(shp)) // max(1, int(np.prod(out_shape)))
    if dtype == "int8":
        s_in, z_in, z_out = scale(r, -3, 0), zero_point(r), zero_point(r)
        x = int8(r, shp, z_in)
        typical = 64.0
    else:
        s_in, z_in, z_out = scale(r, -5, -2), 0, 0
        x = r.integers(-(1 << 15), 1 << 15, shp).astype(np.int16)
        x.reshape(-1)[: min(2, x.size)] = (-(1 << 15), (1 << 15) - 1)[: min(2, x.size)]
        typical = 16384.0
    # an output scale near the size of a typical product (most outputs in range), or anywhere (saturation)
    if i % 3:
        exponent = n * np.log10(s_in * typical) + np.log10(r.uniform(0.05, 2))
        s_out = float(np.float32(10.0 ** np.clip(exponent, -30, 30)))
    else:
        s_out = scale(r, -4, 2)
    return shp, axes, keep, out_shape, s_in, z_in, s_out, z_out, x


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_reduce_prod_quantized_matches_litert_in_every_mode(dtype):
    """REDUCE_PROD's quantized kernel (``QuantizedReduceProd``: every step rescaled by
    s_in / s_out^(1/n), the int64 MultiplyByQuantizedMultiplier) against LiteRT BUILTIN_REF, and the
    optimized / xnnpack modes against BUILTIN_WITHOUT_DEFAULT_DELEGATES / AUTO (XNNPACK does not take
    REDUCE_PROD: the optimized kernel runs), 0 differing bytes."""
    from litert_modes import check_mode

    r = rng_for("reduce_prod", dtype)
    for i in range(N_MODELS * 2):
        shp, axes, keep, out_shape, s_in, z_in, s_out, z_out, x = _prod_case(r, dtype, i)
        runtime_axis = i % 4 == 3
        axis_t = T(axes.shape, "int32") if runtime_axis else T(axes.shape, "int32", data=axes)
        feeds = [x] + ([axes] if runtime_axis else [])
        ins = [T(shp, dtype, s_in, z_in), axis_t]
        outs = [T(out_shape, dtype, s_out, z_out)]
        opts = {"keep_dims": keep}
        if check("REDUCE_PROD", ins, outs, opts, feeds, allow_refusal=True) is None:
            continue
        for mode in ("optimized", "xnnpack"):
            check_mode("REDUCE_PROD", ins, outs, opts, feeds, mode)
    from litert_modes import ENGINES

    # the XNNPACK delegate does not take REDUCE_PROD: the optimized kernel runs in the xnnpack mode
    assert ENGINES[("REDUCE_PROD", "xnnpack", "optimized")] > 0 and not ENGINES[("REDUCE_PROD", "xnnpack", "xnnpack")]


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_reduce_prod_quantized_edges(dtype):
    """Saturation both ways, the extreme codes and zero points, a per-step scale so small the
    multiplier is flushed to 0, one so large the int64 step multiplies (shift up to 14), a reduction
    of one element, no axes, and a run-time axis; every mode."""
    from litert_modes import check_mode

    lo, hi = (-128, 127) if dtype == "int8" else (-(1 << 15), (1 << 15) - 1)
    zs = [(hi, lo), (lo, hi), (0, 0)] if dtype == "int8" else [(0, 0)]
    x = np.array([[lo, lo, lo, lo], [hi, hi, hi, hi], [lo, hi, lo, hi], [0, 1, -1, 2]], getattr(np, dtype))
    axis1 = T((1,), "int32", data=np.array([1], np.int32))
    cases = []
    for z_in, z_out in zs:
        for s_in, s_out in [(1.0, 1e6), (0.5, 1e-3), (1e-3, 1e-24), (1e-9, 1.0), (2.0 ** -7, 2.0 ** -20),
                            (30.0, 1e-6), (0.02, 0.02 ** 4)]:
            cases.append(([T(x.shape, dtype, s_in, z_in), axis1], [T((4,), dtype, s_out, z_out)], {}, [x]))
        # one element per output, and no axes at all: a plain requantization (the optimized kernel copies)
        cases.append(([T(x.shape, dtype, 0.1, z_in), T((0,), "int32", data=np.zeros(0, np.int32))],
                      [T(x.shape, dtype, 0.3, z_out)], {}, [x]))
        cases.append(([T((4, 1), dtype, 0.1, z_in), axis1], [T((4, 1), dtype, 0.05, z_out)], {"keep_dims": True},
                      [x[:, :1].copy()]))
        cases.append(([T(x.shape, dtype, 0.05, z_in), T((2,), "int32")], [T((), dtype, 1.0, z_out)], {},
                      [x, np.array([0, -1], np.int32)]))
    for ins, outs, opts, feeds in cases:
        check("REDUCE_PROD", ins, outs, opts, feeds)
        for mode in ("optimized", "xnnpack"):
            check_mode("REDUCE_PROD", ins, outs, opts, feeds, mode)


def test_reduce_prod_optimized_copies_a_reduction_over_size_one_axes():
    """LiteRT's optimized kernel drops the size-1 axes; with none left it copies the input bytes, where
    the reference kernel requantizes: quantspec's modes follow each."""
    from litert_modes import check_mode

    x = np.array([[-100], [3], [50], [127]], np.int8)
    ins = [T((4, 1), "int8", 0.1, 2), T((1,), "int32", data=np.array([1], np.int32))]
    outs = [T((4,), "int8", 0.3, -5)]
    ref = check("REDUCE_PROD", ins, outs, {}, [x])[0]
    opt = check_mode("REDUCE_PROD", ins, outs, {}, [x], "optimized")[0]
    assert opt.tobytes() == x.tobytes() and ref.tobytes() != opt.tobytes()


def test_reduce_prod_quantized_refusals():
    """int16 needs zero points 0 (LiteRT rejects the model at prepare); a per-step scale of 2^14 or
    more needs a shift LiteRT's int64 requantization cannot do (undefined in C++)."""
    x = np.zeros((2, 3), np.int16)
    axis = T((1,), "int32", data=np.array([1], np.int32))
    ins = [T((2, 3), "int16", 0.5, 3), axis]
    outs = [T((2,), "int16", 0.5, 0)]
    assert litert_outcome("REDUCE_PROD", ins, outs, {}, [x]) == "error"
    with pytest.raises(QuantSpecError, match="zero points") as caught:
        quantspec_run("REDUCE_PROD", ins, outs, {}, [x])
    assert caught.value.limit == "int16-zero-point"
    with pytest.raises(QuantSpecError, match="undefined behaviour") as caught:
        quantspec_run("REDUCE_PROD", [T((2, 3), "int8", 100.0, 0), axis], [T((2,), "int8", 1e-9, 0)], {},
                      [np.zeros((2, 3), np.int8)])
    assert caught.value.limit == "multiplier-shift"


def test_reduce_prod_of_a_constant_is_computed_by_the_optimized_kernel_in_every_mode():
    """LiteRT computes a REDUCE_PROD of constant input and axis with at most 8 outputs at prepare, with
    the optimized kernel whatever the resolver: over a size-1 axis that is a copy, in BUILTIN_REF too."""
    from litert_build import build_graph
    from litert_modes import litert_run
    from quantspec.litert import Interpreter

    x = np.array([[-100], [3], [50], [127]], np.int8)
    tensors = [T((4, 1), "int8", 0.1, 2, data=x), T((1,), "int32", data=np.array([1], np.int32)),
               T((4,), "int8", 0.3, -5), T((4,), "int8", 0.3, -5), T((4,), "int8", 0.3, -5)]
    ops = [("REDUCE_PROD", [0, 1], [2], {"keep_dims": False}),
           ("ADD", [2, 3], [4], {"fused_activation_function": "NONE"})]     # + 0: the product, unchanged
    model = build_graph(tensors, ops, [3], [4])
    zero = np.full(4, -5, np.int8)
    for mode in ("reference", "optimized", "xnnpack"):
        want = litert_run(model, [zero], mode)[0]
        assert want.tobytes() == x.tobytes()
        assert Interpreter(model, kernels=mode).run([zero])[0].tobytes() == want.tobytes()


# -- REDUCE_MAX / REDUCE_MIN on int8 / int16 --------------------------------------------------------

@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_reduce_max_min_match_litert_in_every_mode(op, dtype):
    """The largest / smallest raw code over the axes (constant or run-time, negative, repeated, none,
    keep_dims) in every mode against the matching resolver; a scalar input."""
    from litert_modes import MODES, check_mode

    r = rng_for(op, dtype)
    for i in range(N_MODELS * 2):
        shp = shape(r, 4, 5)
        axes = _axes(r, len(shp))
        keep = bool(i % 2)
        s, z = (scale(r), zero_point(r)) if dtype == "int8" else (scale(r, -5, -2), 0)
        x = int8(r, shp, z) if dtype == "int8" else r.integers(-(1 << 15), 1 << 15, shp).astype(np.int16)
        runtime_axis = i % 4 == 3
        ins = [T(shp, dtype, s, z), T(axes.shape, "int32") if runtime_axis else T(axes.shape, "int32", data=axes)]
        outs = [T(_out_shape(shp, axes, keep), dtype, s, z)]
        feeds = [x] + ([axes] if runtime_axis else [])
        check(op, ins, outs, {"keep_dims": keep}, feeds)             # BUILTIN_REF, and check == run
        for mode in MODES:
            check_mode(op, ins, outs, {"keep_dims": keep}, feeds, mode)
    x = np.array(-7, getattr(np, dtype))
    for mode in MODES:
        check_mode(op, [T((), dtype, 0.5, 0), T((1,), "int32", data=np.array([0], np.int32))], [T((), dtype, 0.5, 0)],
                   None, [x], mode)


@pytest.mark.parametrize("op", ["REDUCE_MAX", "REDUCE_MIN"])
def test_reduce_max_min_need_the_input_parameters(op):
    """LiteRT fails at eval where the output's scale or zero point is not the input's; quantspec refuses
    at prepare, naming the rule."""
    x = np.zeros((2, 3), np.int8)
    axis = T((1,), "int32", data=np.array([1], np.int32))
    for out, rule in [(T((2,), "int8", 0.25, 1), "same-scale"), (T((2,), "int8", 0.5, 2), "same-zero-point")]:
        ins = [T((2, 3), "int8", 0.5, 1), axis]
        assert litert_outcome(op, ins, [out], None, [x]) == "error"
        with pytest.raises(QuantSpecError) as caught:
            quantspec_run(op, ins, [out], None, [x])
        assert caught.value.limit == rule
