"""LOGISTIC, TANH (float32 LUTs), SOFTMAX, LOG_SOFTMAX (fixed-point reference kernels) and
L2_NORMALIZATION: quantspec's kernels against LiteRT BUILTIN_REF, 0 differing bytes."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import (N_MODELS, check, int8, litert_outcome, quantspec_run, rng_for, scale, shape,
                                 sweep, zero_point)
from quantspec.errors import QuantSpecError

ALL = np.arange(-128, 128, dtype=np.int8)


def test_logistic_matches_litert():
    r = rng_for("logistic")
    for i in range(N_MODELS * 2):
        s_in, z_in = scale(r, -3, 1.5), zero_point(r)
        z_out = -128 if i % 3 else zero_point(r)           # LiteRT does not check the zero point
        sweep("LOGISTIC", [T((256,), "int8", s_in, z_in)], [T((256,), "int8", 1 / 256, z_out)], {}, [ALL])
    shp = shape(r, 5)
    check("LOGISTIC", [T(shp, "int8", 0.05, 3)], [T(shp, "int8", 1 / 256, -128)], {}, [int8(r, shp)])


def test_tanh_matches_litert():
    r = rng_for("tanh")
    for i in range(N_MODELS * 2):
        s_in, z_in = scale(r, -3, 1.5), zero_point(r)
        s_out, z_out = (1 / 128, 0) if i % 3 else (scale(r, -10, 0), zero_point(r))   # unchecked by LiteRT
        sweep("TANH", [T((256,), "int8", s_in, z_in)], [T((256,), "int8", s_out, z_out)], {}, [ALL])
    shp = shape(r, 5)
    check("TANH", [T(shp, "int8", 0.05, 3)], [T(shp, "int8", 1 / 128, 0)], {}, [int8(r, shp)])


def _rows_with_ties(r, shp):
    x = int8(r, shp)
    flat = x.reshape(-1, shp[-1])
    flat[0] = flat[0, 0]                                    # a row of equal values
    if flat.shape[0] > 1:
        flat[1] = -128
        flat[1, -1] = 127                                   # one large value, the rest far below
    return x


def test_softmax_matches_litert():
    r = rng_for("softmax")
    eps = np.float32(0.001) / np.float32(256)
    for i in range(N_MODELS * 2):
        shp = shape(r, 4, 6)[:-1] + (int(r.choice([1, 2, 7, 30, 300])),)
        s_in = scale(r, -5, 1.5) if i % 5 else scale(r, -7.5, -7)        # tiny input scales, huge left shifts
        beta = float(np.float32(r.choice([1.0, 0.5, 2.0, r.uniform(0.05, 20)])))
        s_out = 1 / 256 if i % 4 else float(np.float32(1 / 256) + np.float32(r.uniform(-0.9, 0.9)) * eps)
        sweep("SOFTMAX", [T(shp, "int8", s_in, zero_point(r))], [T(shp, "int8", s_out, -128)], {"beta": beta},
              [_rows_with_ties(r, shp)])
    check("SOFTMAX", [T((1, 256), "int8", 100.0, 0)], [T((1, 256), "int8", 1 / 256, -128)], {"beta": 1e6},
          [ALL.reshape(1, 256)])                                          # multiplier capped at 2^31 - 1


def test_log_softmax_matches_litert():
    r = rng_for("log-softmax")
    for i in range(N_MODELS * 2):
        shp = shape(r, 4, 6)[:-1] + (int(r.choice([1, 2, 7, 30, 300])),)
        s_in = scale(r, -5, 1.5) if i % 5 else scale(r, -7.5, -7)
        sweep("LOG_SOFTMAX", [T(shp, "int8", s_in, zero_point(r))], [T(shp, "int8", 16 / 256, 127)], {},
              [_rows_with_ties(r, shp)])


def test_l2_normalization_matches_litert():
    r = rng_for("l2")
    for i in range(N_MODELS * 2):
        shp = shape(r, 4, 6)[:-1] + (int(r.choice([1, 3, 16, 200])),)
        z = zero_point(r)
        x = int8(r, shp, z)
        flat = x.reshape(-1, shp[-1])
        flat[0] = z                                          # an all-zero row (acc = 0)
        if flat.shape[0] > 1:
            flat[1] = z
            flat[1, 0] = 127 if z < 0 else -128              # a single non-zero value (acc = v^2)
        sweep("L2_NORMALIZATION", [T(shp, "int8", scale(r), z)], [T(shp, "int8", 1 / 128, 0)], {}, [x])


def test_softmax_row_of_512_equal_values_aborts_litert():
    # a sum of exponentials >= 512 gives GetReciprocal an exponent beyond 31: TFLITE_CHECK
    n = 512
    ins, outs = [T((1, n), "int8", 0.1, 0)], [T((1, n), "int8", 1 / 256, -128)]
    feeds = [np.full((1, n), 5, np.int8)]
    assert litert_outcome("SOFTMAX", ins, outs, {"beta": 1.0}, feeds) == "abort"
    with pytest.raises(QuantSpecError, match="LiteRT aborts"):
        quantspec_run("SOFTMAX", ins, outs, {"beta": 1.0}, feeds)
    check("SOFTMAX", [T((1, 511), "int8", 0.1, 0)], [T((1, 511), "int8", 1 / 256, -128)], {"beta": 1.0},
          [np.full((1, 511), 5, np.int8)])


def test_activation_prepare_errors_match_litert():
    cases = [
        ("SOFTMAX", [T((4,), "int8", 1e-9, 0)], [T((4,), "int8", 1 / 256, -128)], {"beta": 1.0}, "abort",
         "makes LiteRT abort"),
        ("SOFTMAX", [T((4,), "int8", 0.1, 0)], [T((4,), "int8", 1 / 256, -128)], {}, "abort",
         "makes LiteRT abort"),                                           # beta defaults to 0
        ("SOFTMAX", [T((4,), "int8", 0.1, 0)], [T((4,), "int8", 1 / 255, -128)], {"beta": 1.0}, "error",
         "LiteRT rejects"),
        ("LOGISTIC", [T((4,), "int8", 0.1, 0)], [T((4,), "int8", 1 / 255, -128)], {}, "error", "LiteRT rejects"),
        ("LOG_SOFTMAX", [T((4,), "int8", 0.1, 0)], [T((4,), "int8", 1 / 16, 126)], {}, "error", "LiteRT rejects"),
        ("L2_NORMALIZATION", [T((4,), "int8", 0.1, 0)], [T((4,), "int8", 1 / 128, 0)],
         {"fused_activation_function": "RELU"}, "error", "must be NONE"),
    ]
    for op, ins, outs, options, outcome, match in cases:
        feeds = [np.arange(4, dtype=np.int8)]
        assert litert_outcome(op, ins, outs, options, feeds) == outcome, op
        with pytest.raises(QuantSpecError, match=match):
            quantspec_run(op, ins, outs, options, feeds)
