"""Kernels of common Keras layers the zoo needed, in every kernel mode against the matching LiteRT
resolver, 0 differing bytes:

- MAXIMUM / MINIMUM (``Maximum`` / ``Minimum`` layers): a selection of raw int16 values with
  broadcasting;
- RESIZE_BILINEAR (``UpSampling2D(interpolation="bilinear")``, ``tf.image.resize``): the integer
  kernel of int8 on int16 codes (plain, ``align_corners``, ``half_pixel_centers``; constant and
  run-time sizes; up and down), the extreme codes included;
- EXP, LOG and ABS on int8 and int16 (the ``selu``, ``softplus`` and ``softsign`` activations):
  the float32 tables of ``expf`` / ``logf``, the rescaled absolute value;
- DIV on int8 (``softsign``): fixed point with the divisor's Q0.31 reciprocal;
- TRANSPOSE_CONV with a run-time output shape (``Conv2DTranspose`` with a dynamic batch);
- SQUARE on float32 (``UnitNormalization``, kept in float by the converter).
"""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import N_MODELS, broadcast_pair, check, rng_for, scale
from litert_modes import MODES, check_mode


def _int16(r, shp):
    x = r.integers(-(1 << 15), 1 << 15, shp).astype(np.int16)
    flat = x.reshape(-1)
    flat[: min(2, flat.size)] = (-(1 << 15), (1 << 15) - 1)[: min(2, flat.size)]
    return x


@pytest.mark.parametrize("op", ["MAXIMUM", "MINIMUM"])
def test_int16_maximum_minimum_match_litert_in_every_mode(op):
    r = rng_for(op, "int16")
    for i in range(N_MODELS):
        s1, s2 = broadcast_pair(r, max_rank=5)
        s = scale(r, -5, -2)
        # the converter gives the inputs the output's parameters; LiteRT does not check them
        t = scale(r, -5, -2) if i % 3 == 2 else s
        out = np.broadcast_shapes(s1, s2)
        ins, outs = [T(s1, "int16", s, 0), T(s2, "int16", t, 0)], [T(out, "int16", s, 0)]
        feeds = [_int16(r, s1), _int16(r, s2)]
        check(op, ins, outs, {}, feeds)
        for mode in MODES:
            check_mode(op, ins, outs, {}, feeds, mode)


def test_int16_resize_bilinear_matches_litert_in_every_mode():
    r = rng_for("RESIZE_BILINEAR", "int16")
    for i in range(N_MODELS * 2):
        n, h, w, ch = (int(v) for v in r.integers(1, 6, 4))
        oh, ow = (int(v) for v in r.integers(1, 13, 2))
        flags = [{}, {"align_corners": True}, {"half_pixel_centers": True}][i % 3]
        options = {"align_corners": False, "half_pixel_centers": False, **flags}
        size = np.array([oh, ow], np.int32)
        const_size = i % 4 != 3
        s = scale(r, -5, -2)
        ins = [T((n, h, w, ch), "int16", s, 0), T((2,), "int32", data=size) if const_size else T((2,), "int32")]
        outs = [T((n, oh, ow, ch), "int16", s, 0)]
        feeds = [_int16(r, (n, h, w, ch))] + ([] if const_size else [size])
        check("RESIZE_BILINEAR", ins, outs, options, feeds, version=4)
        for mode in MODES:
            check_mode("RESIZE_BILINEAR", ins, outs, options, feeds, mode, version=4)
    x = np.full((1, 3, 3, 2), (1 << 15) - 1, np.int16)
    x[0, 1, 1, 1] = -(1 << 15)
    ins = [T(x.shape, "int16", 1e-3, 0), T((2,), "int32", data=np.array([7, 5], np.int32))]
    outs = [T((1, 7, 5, 2), "int16", 1e-3, 0)]
    for mode in MODES:
        check_mode("RESIZE_BILINEAR", ins, outs, {"half_pixel_centers": True, "align_corners": False}, [x], mode,
                   version=4)


@pytest.mark.parametrize("op", ["EXP", "LOG", "ABS"])
@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_exp_log_abs_match_litert_in_every_mode(op, dtype):
    """EXP, LOG and ABS (the Keras ``selu`` / ``elu``, ``softplus`` and ``softsign`` activations):
    random parameters (equal scales now and then: ABS adds the zero point only), every code."""
    from litert_kernel_check import int8, zero_point

    r = rng_for(op, dtype)
    every = (np.arange(-128, 128, dtype=np.int8) if dtype == "int8"
             else np.arange(-(1 << 15), 1 << 15, 8, dtype=np.int16)).reshape(2, -1)
    for i in range(N_MODELS):
        if dtype == "int8":
            s_in, z_in = scale(r, -3, 0), zero_point(r)
            s_out, z_out = (s_in if i % 4 == 0 else scale(r, -3, 1)), zero_point(r)
            x = every if i % 2 else int8(r, (3, 5), z_in)
        else:
            s_in, s_out = scale(r, -5, -2), scale(r, -5, -1)
            s_out = s_in if i % 4 == 0 else s_out
            z_in = z_out = 0
            x = every if i % 2 else _int16(r, (3, 5))
        ins, outs = [T(x.shape, dtype, s_in, z_in)], [T(x.shape, dtype, s_out, z_out)]
        check(op, ins, outs, None, [x])
        for mode in MODES:
            check_mode(op, ins, outs, None, [x], mode)


def test_int8_div_matches_litert_in_every_mode():
    """DIV on int8 (Keras ``softsign``, ``x / (1 + |x|)``): random parameters with broadcasting and the
    fused activations, divisors of both signs, every dividend; a zero divisor fails in LiteRT and is
    refused here."""
    from litert_kernel_check import int8, litert_outcome, quantspec_run, zero_point
    from quantspec.errors import QuantSpecError

    r = rng_for("DIV")
    done = 0
    for i in range(N_MODELS * 3):
        s1, s2 = broadcast_pair(r, max_rank=4)
        a_s, b_s = scale(r, -3, 0), scale(r, -3, 0)
        o_s = float(np.float32(a_s / b_s * r.uniform(0.02, 2)))
        za, zb, zo = zero_point(r), zero_point(r), zero_point(r)
        x = int8(r, s1, za)
        y = int8(r, s2, zb)
        y[y == zb] = np.int8(zb + 1 if zb < 127 else zb - 1)          # no zero divisor
        fused = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"][i % 4]
        ins, outs = [T(s1, "int8", a_s, za), T(s2, "int8", b_s, zb)], [T(np.broadcast_shapes(s1, s2), "int8", o_s, zo)]
        opts = {"fused_activation_function": fused}
        try:
            quantspec_run("DIV", ins, outs, opts, [x, y])
        except QuantSpecError as e:
            assert "undefined behaviour" in str(e), e                # shifts C++ leaves undefined
            continue
        check("DIV", ins, outs, opts, [x, y])
        for mode in MODES:
            check_mode("DIV", ins, outs, opts, [x, y], mode)
        done += 1
    assert done >= N_MODELS
    # every dividend code against large divisors of both signs: small dividends need rounding shifts
    # past 31 (undefined in C++; x86 shifts modulo 32), the saturated outputs
    x = np.arange(-128, 128, dtype=np.int8)
    for k in range(4):
        a_s, b_s, zb = scale(r, -3, 0), scale(r, -3, 0), int(r.integers(-100, 100))
        y = np.where(np.arange(256) % 2 == 0, 127, -128).astype(np.int8)
        ins = [T((256,), "int8", a_s, int(r.integers(-128, 128))), T((256,), "int8", b_s, zb)]
        outs = [T((256,), "int8", float(np.float32(a_s / b_s * r.uniform(0.02, 2))), int(r.integers(-128, 128)))]
        for mode in MODES:
            check_mode("DIV", ins, outs, {"fused_activation_function": "NONE"}, [x, y], mode)
    ins, outs = [T((3,), "int8", 0.1, 0), T((3,), "int8", 0.1, 4)], [T((3,), "int8", 0.2, 0)]
    zero = [np.array([1, 2, 3], np.int8), np.array([5, 4, 6], np.int8)]
    assert litert_outcome("DIV", ins, outs, {"fused_activation_function": "NONE"}, zero) == "error"
    with pytest.raises(QuantSpecError, match="zero divisor"):
        quantspec_run("DIV", ins, outs, {"fused_activation_function": "NONE"}, zero)


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_transpose_conv_with_a_run_time_output_shape_matches_litert_in_every_mode(dtype):
    """TRANSPOSE_CONV whose output shape is a run-time tensor (Keras ``Conv2DTranspose`` with a dynamic
    batch: the converter computes the shape), batch 1 to 3, with and without a bias, in every mode
    (the XNNPACK delegate declines it: the optimized kernel runs)."""
    from litert_kernel_check import int8, zero_point

    r = rng_for("TRANSPOSE_CONV", "run-time shape", dtype)
    for i in range(N_MODELS):
        n, h, w, ci, oc = int(r.integers(1, 4)), int(r.integers(1, 5)), int(r.integers(1, 5)), int(r.integers(1, 4)), \
            int(r.integers(1, 10))
        kh, kw, sh, sw = int(r.integers(1, 4)), int(r.integers(1, 4)), int(r.integers(1, 3)), int(r.integers(1, 3))
        oh, ow = h * sh, w * sw                                   # SAME padding
        s_in, s_out, s_w = scale(r, -3, -1), scale(r, -3, 0), [scale(r, -3, -1) for _ in range(oc)]
        z_in, z_out = (zero_point(r), zero_point(r)) if dtype == "int8" else (0, 0)
        options = {"padding": "SAME", "stride_h": sh, "stride_w": sw, "fused_activation_function": "NONE"}
        bias_type = "int32" if dtype == "int8" else "int64"
        inputs = [T((4,), "int32"), T((oc, kh, kw, ci), "int8", s_w, 0, 0,
                                      r.integers(-127, 128, (oc, kh, kw, ci)).astype(np.int8)),
                  T((n, h, w, ci), dtype, s_in, z_in)]
        if i % 2:
            b_scale = (np.float64(np.float32(s_in)) * np.asarray(s_w, np.float32).astype(np.float64)).astype(np.float32)
            inputs.append(T((oc,), bias_type, list(b_scale), 0, 0, r.integers(-3000, 3000, oc).astype(bias_type)))
        x = int8(r, (n, h, w, ci)) if dtype == "int8" else _int16(r, (n, h, w, ci))
        feeds = [np.array([n, oh, ow, oc], np.int32), x]
        outs = [T((n, oh, ow, oc), dtype, s_out, z_out)]
        check("TRANSPOSE_CONV", inputs, outs, options, feeds, version=3)
        for mode in MODES:
            check_mode("TRANSPOSE_CONV", inputs, outs, options, feeds, mode, version=3)


def test_float_square_matches_litert_in_every_mode():
    """SQUARE on float32 (the converter keeps Keras ``UnitNormalization``'s square in float): ``x * x``
    with the special values (signed zeros, infinities, NaN, overflow, underflow)."""
    r = rng_for("SQUARE")
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e20, -1e20, 1e-30, -3e-39, 1.5, -2.5], np.float32)
    for x in (special, r.standard_normal((3, 7)).astype(np.float32) * np.float32(100)):
        ins, outs = [T(x.shape, "float")], [T(x.shape, "float")]
        check("SQUARE", ins, outs, None, [x], version=1)
        for mode in MODES:
            check_mode("SQUARE", ins, outs, None, [x], mode, version=1)


def test_int16_exp_where_expf_overflows_matches_litert_in_every_mode():
    """int16 EXP whose input range reaches past expf's overflow (about 88.7): LiteRT's interpolated
    table gets NaN entries there (``inf - inf``), which x86 converts to 0 (``lut_int16``'s rule)."""
    from quantspec.litert import fixedpoint16 as f16

    x = np.arange(-(1 << 15), 1 << 15, dtype=np.int16).reshape(4, -1)
    for s_in, s_out in ((1e-2, 1e-2), (4e-3, 2e-3), (3e-2, 5e-1)):
        lut = f16.lut_int16(s_in, 0, s_out, 0, lambda v: np.exp(v.astype(np.float64)).astype(np.float32))
        first = int(np.ceil((88.8 / s_in + 32768) / (65535 / 512)))    # the first entry past the overflow
        assert first < 511 and np.all(lut[first:512] == 0), (s_in, s_out)
        ins, outs = [T(x.shape, "int16", s_in, 0)], [T(x.shape, "int16", s_out, 0)]
        check("EXP", ins, outs, None, [x])
        for mode in MODES:
            check_mode("EXP", ins, outs, None, [x], mode)
