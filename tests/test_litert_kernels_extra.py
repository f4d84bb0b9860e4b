"""The kernels of the ops converter-made models hold beyond the spec's list — HARD_SWISH, GELU, RSQRT,
RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, LEAKY_RELU, SQUARED_DIFFERENCE, PRELU, BATCH_MATMUL — in int8
and int16, against LiteRT BUILTIN_REF: 0 differing bytes.

Unary ops run every input code (256 int8, 65536 int16) through random scales and zero points,
extremes included; a model LiteRT refuses (Prepare error or abort, measured in a child process)
must be refused by quantspec too (``sweep``).
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import (N_MODELS, broadcast_pair, check, int8, litert_outcome, quantspec_run, rng_for, scale,
                                 sweep, zero_point)
from quantspec.errors import QuantSpecError

ALL8 = np.arange(-128, 128, dtype=np.int8)
ALL16 = np.arange(-32768, 32768, dtype=np.int16)

#: ops whose only registered LiteRT version is 1 (the builder writes version 2 by default)
VERSION1 = {"HARD_SWISH", "RELU_N1_TO_1", "RELU_0_TO_1", "GELU", "RSQRT", "PRELU", "BATCH_MATMUL"}


def _version(op):
    return 1 if op in VERSION1 else 2


UNARY = {"HARD_SWISH": ("int8",), "GELU": ("int8", "int16"), "RELU": ("int8", "int16"),
         "RELU6": ("int8", "int16"), "RELU_N1_TO_1": ("int8",), "RELU_0_TO_1": ("int8",),
         "LEAKY_RELU": ("int8", "int16")}


def _edge_scale(r, i):
    """Mostly ordinary scales, sometimes extreme ones (huge or tiny multipliers)."""
    if i % 7 == 3:
        return scale(r, -8, -6)
    if i % 7 == 5:
        return scale(r, 2, 4)
    return scale(r, -3, 1)


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_every_code_matches_litert(op):
    r = rng_for("unary", op)
    for i in range(N_MODELS * 2):
        for dtype in UNARY[op]:
            s_in, s_out = _edge_scale(r, i), _edge_scale(r, i + 1)
            z_in = zero_point(r) if dtype == "int8" else 0
            z_out = zero_point(r) if dtype == "int8" else 0
            options = {}
            if op == "GELU":
                options = {"approximate": bool(i % 2)}
            if op == "LEAKY_RELU":
                options = {"alpha": float(np.float32(r.choice([0.2, 0.01, -0.3, 1.5, 0.0, r.uniform(-2, 2)])))}
            x = ALL8 if dtype == "int8" else ALL16
            sweep(op, [T(x.shape, dtype, s_in, z_in)], [T(x.shape, dtype, s_out, z_out)], options, [x],
                  version=_version(op))


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_odd_shapes(op):
    r = rng_for("unary-shape", op)
    shp = (3, 1, 5, 7)
    check(op, [T(shp, "int8", 0.05, -3)], [T(shp, "int8", 0.04, -100)], {}, [int8(r, shp)], version=_version(op))
    check(op, [T((), "int8", 0.05, -3)], [T((), "int8", 0.04, 5)], {}, [np.array(17, np.int8)], version=_version(op))


def test_hard_swish_rejects_an_output_multiplier_of_one():
    # LiteRT: TF_LITE_ENSURE(output_multiplier_exponent <= 0), i.e. s_in / 128 / s_out < 1
    args = ("HARD_SWISH", [T((256,), "int8", 1.0, 0)], [T((256,), "int8", 1 / 256, 0)], {}, [ALL8])
    assert litert_outcome(*args, version=1) == "error"
    with pytest.raises(QuantSpecError, match="output multiplier"):
        quantspec_run(*args)
    check("HARD_SWISH", [T((256,), "int8", 1.0, 0)], [T((256,), "int8", 1 / 127, 0)], {}, [ALL8], version=1)


def test_rsqrt_matches_litert_on_valid_inputs():
    r = rng_for("rsqrt")
    for i in range(N_MODELS * 2):
        for dtype in ("int8", "int16"):
            s_in, s_out = scale(r, -4, 1), scale(r, -3, 1)
            z_in = zero_point(r) if dtype == "int8" else 0
            z_out = zero_point(r) if dtype == "int8" else 0
            top = 128 if dtype == "int8" else 32768
            x = np.arange(z_in, top).astype(dtype)                       # every code from the zero point up
            sweep("RSQRT", [T(x.shape, dtype, s_in, z_in)], [T(x.shape, dtype, s_out, z_out)], {}, [x], version=1)


def test_rsqrt_of_a_negative_value_fails_at_eval_in_both():
    x = np.array([5, 3, 4], np.int8)
    args = ("RSQRT", [T((3,), "int8", 0.1, 4)], [T((3,), "int8", 0.1, 0)], {}, [x])
    assert litert_outcome(*args, version=1) == "error"
    with pytest.raises(QuantSpecError, match="positive"):
        quantspec_run(*args)


def test_squared_difference_matches_litert():
    r = rng_for("squared-difference")
    for i in range(N_MODELS * 3):
        a, b = broadcast_pair(r, 4)
        s1, s2, so = _edge_scale(r, i), scale(r, -3, 1), scale(r, -3, 1) if i % 6 else scale(r, -9, -7)
        z1, z2, zo = zero_point(r), zero_point(r), zero_point(r)
        sweep("SQUARED_DIFFERENCE", [T(a, "int8", s1, z1), T(b, "int8", s2, z2)],
              [T(np.broadcast_shapes(a, b), "int8", so, zo)], {}, [int8(r, a, z1), int8(r, b, z2)])


def test_squared_difference_tiny_output_scale_aborts_in_both():
    args = ("SQUARED_DIFFERENCE", [T((4,), "int8", 1.0, 0), T((4,), "int8", 1.0, 0)], [T((4,), "int8", 1e-6, 0)],
            {}, [ALL8[:4], ALL8[-4:]])
    assert litert_outcome(*args) == "abort"
    with pytest.raises(QuantSpecError, match="abort"):
        quantspec_run(*args)


def test_prelu_matches_litert():
    r = rng_for("prelu")
    for i in range(N_MODELS * 2):
        for dtype in ("int8", "int16"):
            a, b = broadcast_pair(r, 4)
            full = np.broadcast_shapes(a, b)
            s_in, s_a, s_out = _edge_scale(r, i), scale(r, -3, 0), scale(r, -3, 1)
            z_in = zero_point(r) if dtype == "int8" else 0
            z_out = zero_point(r) if dtype == "int8" else 0
            z_a = zero_point(r)
            x = int8(r, full, z_in) if dtype == "int8" else r.integers(-32768, 32768, full).astype(np.int16)
            sweep("PRELU", [T(full, dtype, s_in, z_in), T(b, "int8", s_a, z_a)], [T(full, dtype, s_out, z_out)], {},
                  [x, int8(r, b, z_a)], version=1)


def _batch_matmul_case(r, i, lhs_type, rhs_type):
    rank = int(r.integers(2, 6))
    batch = [int(d) for d in r.integers(1, 4, rank - 2)]
    m, k, n = (int(v) for v in r.integers(1, 9, 3))
    if i % 7 == 0:
        k = int(r.integers(200, 1500))                              # beyond one float32 chunk
    adj_x, adj_y = bool(r.integers(0, 2)), bool(r.integers(0, 2))
    bl, br = list(batch), list(batch)
    for j in range(len(batch)):
        u = r.integers(0, 3)
        if u == 0:
            bl[j] = 1
        elif u == 1:
            br[j] = 1
    if i % 3 == 0 and br:
        br = br[int(r.integers(0, len(br) + 1)):]                   # a lower-rank right operand
    a = tuple(bl) + ((k, m) if adj_x else (m, k))
    b = tuple(br) + ((n, k) if adj_y else (k, n))
    out = tuple(np.broadcast_shapes(tuple(bl), tuple(br))) + (m, n)
    return a, b, out, {"adj_x": adj_x, "adj_y": adj_y}


def _codes(r, shp, dtype):
    if dtype == "int8":
        return int8(r, shp)
    x = r.integers(-32768, 32768, shp).astype(np.int16)
    flat = x.reshape(-1)
    flat[: min(2, flat.size)] = [-32768, 32767][: min(2, flat.size)]
    return x


@pytest.mark.parametrize("types", [("int8", "int8", "int8"), ("int8", "int8", "int32"), ("int16", "int16", "int16"),
                                   ("int16", "int8", "int16")])
def test_batch_matmul_matches_litert(types):
    lhs_type, rhs_type, out_type = types
    r = rng_for("batch-matmul", *types)
    for i in range(N_MODELS * 2):
        a, b, out, options = _batch_matmul_case(r, i, lhs_type, rhs_type)
        wide = lhs_type == "int16"
        s1, s2, so = scale(r, -3, 0), scale(r, -3, 0), scale(r, -2, 1)
        z1 = 0 if wide else zero_point(r)
        z2 = 0 if wide else zero_point(r)
        zo = 0 if wide else zero_point(r)
        o = T(out, "int32") if out_type == "int32" else T(out, out_type, so, zo)
        sweep("BATCH_MATMUL", [T(a, lhs_type, s1, z1), T(b, rhs_type, s2, z2)], [o], options,
              [_codes(r, a, lhs_type), _codes(r, b, rhs_type)], version=1)


def test_batch_matmul_int16_zero_point_is_rejected_in_both():
    args = ("BATCH_MATMUL", [T((2, 3), "int16", 0.01, 1), T((3, 2), "int16", 0.01, 0)], [T((2, 2), "int16", 0.1, 0)],
            {}, [np.ones((2, 3), np.int16), np.ones((3, 2), np.int16)])
    assert litert_outcome(*args, version=1) == "error"
    with pytest.raises(QuantSpecError):
        quantspec_run(*args)


# ---------------------------------------------------------------------------------------------
# STRIDED_SLICE, SPLIT, SPLIT_V, PACK, UNPACK, TRANSPOSE_CONV
# ---------------------------------------------------------------------------------------------

def _slice_case(r, i):
    rank = int(r.integers(1, 5))
    shp = tuple(int(d) for d in r.integers(1, 6, rank))
    n = int(r.integers(1, rank + 2)) if i % 3 else rank
    begin, end = r.integers(-7, 7, n).astype(np.int32), r.integers(-7, 8, n).astype(np.int32)
    strides = r.choice([-3, -2, -1, 1, 1, 2, 3], n).astype(np.int32)
    options = {"begin_mask": int(r.integers(0, 1 << n)), "end_mask": int(r.integers(0, 1 << n))}
    if i % 4 == 0:
        options["shrink_axis_mask"] = int(r.integers(0, 1 << n))
    if i % 5 == 0:
        options["ellipsis_mask"] = 1 << int(r.integers(0, n))
    if i % 7 == 0:
        options["new_axis_mask"] = int(r.integers(0, 1 << n)) & ~options.get("ellipsis_mask", 0)
    if i % 11 == 0:
        options, strides, end = {"offset": True}, np.abs(strides), np.abs(end)
    return shp, begin, end, strides, options


def test_strided_slice_matches_litert():
    from quantspec.errors import QuantSpecError as Refused
    from quantspec.litert.kernels.slicing import _plan

    r = rng_for("strided-slice")
    for i in range(N_MODELS * 20):
        shp, begin, end, strides, options = _slice_case(r, i)
        masks = tuple(options.get(k, 0) for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask",
                                                    "shrink_axis_mask"))
        try:
            out = _plan(shp, begin, end, strides, masks, options.get("offset", False))[2]
        except Refused:
            out = (1,)                      # quantspec refuses: the sweep checks that it is undefined in LiteRT
        dtype = "int8" if i % 2 else "int16"
        x = int8(r, shp) if dtype == "int8" else r.integers(-32768, 32768, shp).astype(np.int16)
        sweep("STRIDED_SLICE", [T(shp, dtype, 0.1, 0), T((len(begin),), "int32", data=begin),
                                T((len(end),), "int32", data=end), T((len(strides),), "int32", data=strides)],
              [T(out, dtype, 0.1, 0)], options, [x], version=1)


def test_split_split_v_pack_unpack_match_litert():
    r = rng_for("split")
    for i in range(N_MODELS * 3):
        rank = int(r.integers(1, 5))
        shp = tuple(int(d) for d in r.integers(1, 7, rank))
        axis = int(r.integers(-rank, rank))
        ax = axis % rank
        dtype = str(r.choice(["int8", "int16", "int32"]))
        s = None if dtype == "int32" else 0.1
        x = r.integers(-100, 100, shp).astype(dtype)
        n = int(r.choice([d for d in range(1, shp[ax] + 1) if shp[ax] % d == 0]))
        outs = [T(tuple(v if k != ax else v // n for k, v in enumerate(shp)), dtype, s, 0) for _ in range(n)]
        sweep("SPLIT", [T((), "int32", data=np.array(axis, np.int32)), T(shp, dtype, s, 0)], outs,
              {"num_splits": n}, [x], version=1)
        k = int(r.integers(1, 4))
        cuts = sorted(r.integers(0, shp[ax] + 1, k - 1).tolist())
        sizes = np.diff([0] + cuts + [shp[ax]]).tolist()
        if i % 3 == 0:
            sizes[int(r.integers(0, k))] = -1
        real = list(sizes)
        if -1 in real:
            real[real.index(-1)] = shp[ax] - sum(v for v in sizes if v != -1)
        outs = [T(tuple(v if kk != ax else sz for kk, v in enumerate(shp)), dtype, s, 0) for sz in real]
        sweep("SPLIT_V", [T(shp, dtype, s, 0), T((k,), "int32", data=np.array(sizes, np.int32)),
                          T((), "int32", data=np.array(axis, np.int32))], outs, {"num_splits": k}, [x], version=1)
        m, pack_axis = int(r.integers(1, 4)), int(r.integers(-(rank + 1), rank + 1))
        xs = [r.integers(-100, 100, shp).astype(dtype) for _ in range(m)]
        sweep("PACK", [T(shp, dtype, s, 0) for _ in range(m)], [T(np.stack(xs, axis=pack_axis).shape, dtype, s, 0)],
              {"values_count": m, "axis": pack_axis}, xs, version=1)
        unpack_axis = int(r.integers(-rank, rank))
        size = shp[unpack_axis % rank]
        outs = [T(tuple(v for kk, v in enumerate(shp) if kk != unpack_axis % rank), dtype, s, 0) for _ in range(size)]
        sweep("UNPACK", [T(shp, dtype, s, 0)], outs, {"num": size, "axis": unpack_axis}, [x], version=1)


def test_pack_with_other_parameters_is_rejected_in_both():
    args = ("PACK", [T((3,), "int8", 0.1, 0), T((3,), "int8", 0.2, 0)], [T((2, 3), "int8", 0.1, 0)],
            {"values_count": 2, "axis": 0}, [np.zeros(3, np.int8)] * 2)
    assert litert_outcome(*args, version=1) == "error"
    with pytest.raises(QuantSpecError, match="scale"):
        quantspec_run(*args)


def test_transpose_conv_matches_litert():
    from quantspec.litert.kernels._common import out_size

    r = rng_for("transpose-conv")
    done = 0
    for i in range(N_MODELS * 6):
        dtype = "int8" if i % 2 else "int16"
        h, w, ci = int(r.integers(1, 5)), int(r.integers(1, 5)), int(r.integers(1, 5))
        oc, kh, kw = int(r.integers(1, 5)), int(r.integers(1, 4)), int(r.integers(1, 4))
        sh, sw = int(r.integers(1, 3)), int(r.integers(1, 3))
        padding = str(r.choice(["SAME", "VALID"]))
        heights = [o for o in range(1, 20) if out_size(padding, o, kh, sh, 1) == h]
        widths = [o for o in range(1, 20) if out_size(padding, o, kw, sw, 1) == w]
        if not heights or not widths:
            continue
        oh, ow = int(r.choice(heights)), int(r.choice(widths))
        s_in, s_out = scale(r, -3, -1), scale(r, -3, 0)
        per_channel = bool(i % 3)
        s_w = [scale(r, -3, -1) for _ in range(oc)] if per_channel else scale(r, -3, -1)
        z_in = zero_point(r) if dtype == "int8" else 0
        z_out = zero_point(r) if dtype == "int8" else 0
        bias_type = "int32" if dtype == "int8" else str(r.choice(["int32", "int64"]))
        b_scale = (np.float64(np.float32(s_in)) * np.atleast_1d(np.asarray(s_w, np.float32)).astype(np.float64)
                   ).astype(np.float32)
        options = {"padding": padding, "stride_h": sh, "stride_w": sw,
                   "fused_activation_function": str(r.choice(["NONE", "RELU", "RELU6"]))}
        if dtype == "int16":
            options["quantized_bias_type"] = bias_type.upper()
        inputs = [T((4,), "int32", data=np.array([1, oh, ow, oc], np.int32)),
                  T((oc, kh, kw, ci), "int8", s_w, 0, 0, r.integers(-127, 128, (oc, kh, kw, ci)).astype(np.int8)),
                  T((1, h, w, ci), dtype, s_in, z_in)]
        if i % 4:
            inputs.append(T((oc,), bias_type, b_scale if per_channel else float(b_scale[0]), 0, 0,
                            r.integers(-3000, 3000, oc).astype(bias_type)))
        x = int8(r, (1, h, w, ci)) if dtype == "int8" else r.integers(-32768, 32768, (1, h, w, ci)).astype(np.int16)
        sweep("TRANSPOSE_CONV", inputs, [T((1, oh, ow, oc), dtype, s_out, z_out)], options, [x], version=1)
        done += 1
    assert done >= N_MODELS
