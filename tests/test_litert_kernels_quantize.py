"""QUANTIZE (int8 requantize, float -> int8 per-tensor and per-axis, int8 <-> uint8) and DEQUANTIZE:
quantspec's kernels against LiteRT BUILTIN_REF, 0 differing bytes."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import (N_MODELS, check, int8, quantspec_run, rng_for, scale, shape, sweep, zero_point)
from quantspec.errors import QuantSpecError


def test_requantize_matches_litert():
    r = rng_for("requantize")
    x = np.arange(-128, 128, dtype=np.int8)
    for i in range(N_MODELS * 2):
        s_in, s_out = scale(r, -6, 2), scale(r, -6, 2)
        if i % 5 == 0:
            s_out = s_in                                         # ratio 1: M = 2^30, shift 1
        if i % 5 == 1:
            s_out = float(np.float32(s_in * 2.0 ** int(r.integers(-8, 9))))   # exact ties
        z_in, z_out = zero_point(r), zero_point(r)
        sweep("QUANTIZE", [T((256,), "int8", s_in, z_in)], [T((256,), "int8", s_out, z_out)], {}, [x])
    shp = shape(r, 5, 6)
    check("QUANTIZE", [T(shp, "int8", 0.02, 3)], [T(shp, "int8", 0.05, -9)], {}, [int8(r, shp)])


def test_int8_uint8_requantize():
    x = np.arange(-128, 128, dtype=np.int8)
    u = np.arange(256, dtype=np.uint8)
    check("QUANTIZE", [T((256,), "int8", 0.1, -5)], [T((256,), "uint8", 0.1, 123)], {}, [x])      # xor path
    check("QUANTIZE", [T((256,), "uint8", 0.1, 123)], [T((256,), "int8", 0.1, -5)], {}, [u])      # xor path
    check("QUANTIZE", [T((256,), "int8", 0.1, -5)], [T((256,), "uint8", 0.07, 120)], {}, [x])
    check("QUANTIZE", [T((256,), "uint8", 0.3, 0)], [T((256,), "int8", 0.2, 7)], {}, [u])


def test_float_quantize_matches_litert():
    r = rng_for("float-quantize")
    for i in range(N_MODELS):
        shp = shape(r, 4, 6)
        s, z = scale(r, -5, 2), zero_point(r)
        k = r.integers(-300, 300, shp).astype(np.float32)
        x = (k + np.float32(0.5) * (r.random(shp) < 0.5)) * np.float32(s)       # grid points and ties
        x = np.where(r.random(shp) < 0.2, r.standard_normal(shp) * 1e10, x).astype(np.float32)
        sweep("QUANTIZE", [T(shp, "float")], [T(shp, "int8", s, z)], {}, [x])
    shp = (2, 3, 4)
    x = (r.standard_normal(shp) * 3).astype(np.float32)
    for axis in range(3):
        n = shp[axis]
        check("QUANTIZE", [T(shp, "float")],
              [T(shp, "int8", r.uniform(0.01, 0.5, n).astype(np.float32), r.integers(-9, 9, n), axis)], {}, [x])


def test_dequantize_matches_litert():
    r = rng_for("dequantize")
    for i in range(N_MODELS):
        shp = shape(r, 4, 6)
        s, z = scale(r, -8, 8), zero_point(r)
        sweep("DEQUANTIZE", [T(shp, "int8", s, z)], [T(shp, "float")], {}, [int8(r, shp)])
    shp = (3, 4)
    for axis in (0, 1):
        n = shp[axis]
        check("DEQUANTIZE", [T(shp, "int8", r.uniform(0.01, 0.5, n).astype(np.float32), r.integers(-9, 9, n), axis)],
              [T(shp, "float")], {}, [int8(r, shp)])
    check("DEQUANTIZE", [T((6,), "int16", 0.001, 0)], [T((6,), "float")], {},
          [np.array([-32768, -1, 0, 1, 12345, 32767], np.int16)])


def test_quantize_kernel_errors():
    with pytest.raises(QuantSpecError, match="needs quantization parameters"):
        quantspec_run("QUANTIZE", [T((3,), "float")], [T((3,), "int8")], {}, [np.zeros(3, np.float32)])
    with pytest.raises(QuantSpecError, match="left shift of 31"):
        quantspec_run("QUANTIZE", [T((3,), "int8", 1.0, 0)], [T((3,), "int8", 1e-10, 0)], {}, [np.zeros(3, np.int8)])
    with pytest.raises(QuantSpecError, match="int8 / uint8 / int16 only"):
        quantspec_run("QUANTIZE", [T((3,), "int32", 1.0, 0)], [T((3,), "int8", 1.0, 0)], {}, [np.zeros(3, np.int32)])
