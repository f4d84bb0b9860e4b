"""Kernels of common Keras layers the zoo needed, in every kernel mode against the matching LiteRT
resolver, 0 differing bytes:

- MAXIMUM / MINIMUM (``Maximum`` / ``Minimum`` layers): a selection of raw int16 values with
  broadcasting;
- RESIZE_BILINEAR (``UpSampling2D(interpolation="bilinear")``, ``tf.image.resize``): the integer
  kernel of int8 on int16 codes (plain, ``align_corners``, ``half_pixel_centers``; constant and
  run-time sizes; up and down), the extreme codes included;
- EXP, LOG and ABS on int8 and int16 (the ``selu``, ``softplus`` and ``softsign`` activations):
  the float32 tables of ``expf`` / ``logf``, the rescaled absolute value.
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
