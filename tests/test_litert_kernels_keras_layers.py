"""Kernels of common Keras layers the zoo needed, in every kernel mode against the matching LiteRT
resolver, 0 differing bytes:

- MAXIMUM / MINIMUM (``Maximum`` / ``Minimum`` layers): a selection of raw int16 values with
  broadcasting;
- RESIZE_BILINEAR (``UpSampling2D(interpolation="bilinear")``, ``tf.image.resize``): the integer
  kernel of int8 on int16 codes (plain, ``align_corners``, ``half_pixel_centers``; constant and
  run-time sizes; up and down), the extreme codes included;
- EXP on int8 (the ``selu`` / ``elu`` activations): the float32 table of ``expf``.
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


def test_int8_exp_matches_litert_in_every_mode():
    """EXP on int8 (Keras ``selu`` / ``elu`` written with tf ops): the float32 table of expf; random
    parameters, saturation both ways; int16 (an interpolated table in LiteRT) is refused."""
    from litert_kernel_check import int8, quantspec_run, zero_point
    from quantspec.errors import UnsupportedError

    r = rng_for("EXP")
    x = np.arange(-128, 128, dtype=np.int8).reshape(4, 64)
    for i in range(N_MODELS):
        s_in, z_in = scale(r, -3, 0), zero_point(r)
        s_out, z_out = scale(r, -3, 1), zero_point(r)
        feeds = [x if i % 2 else int8(r, (3, 5), z_in)]
        ins, outs = [T(feeds[0].shape, "int8", s_in, z_in)], [T(feeds[0].shape, "int8", s_out, z_out)]
        check("EXP", ins, outs, None, feeds)
        for mode in MODES:
            check_mode("EXP", ins, outs, None, feeds, mode)
    with pytest.raises(UnsupportedError):
        quantspec_run("EXP", [T((2,), "int16", 0.01, 0)], [T((2,), "int16", 0.01, 0)], None,
                      [np.zeros(2, np.int16)])
