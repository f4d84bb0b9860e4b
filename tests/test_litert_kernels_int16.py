"""The 16x8 kernels (int16 activations, int8 weights: the converter's
EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8 mode) against LiteRT BUILTIN_REF, byte for
byte: CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED with int64 and int32 bias, ADD / SUB (general and
power-of-two scales), MUL, MEAN, SOFTMAX, LOGISTIC, TANH, the pools, QUANTIZE to and from int16.
Codes span the whole int16 range; a model LiteRT refuses must be refused by quantspec too."""

from __future__ import annotations

import numpy as np
import pytest

from litert_build import T
from litert_kernel_check import N_MODELS, broadcast_pair, litert_outcome, quantspec_run, rng_for, scale, shape, sweep
from quantspec.errors import QuantSpecError
from quantspec.litert.kernels._common import window_geometry

ALL16 = np.arange(-32768, 32768, dtype=np.int16)
ALL8 = np.arange(-128, 128, dtype=np.int8)


def i16(r, shp):
    x = r.integers(-32768, 32768, shp).astype(np.int16)
    flat = x.reshape(-1)
    for k, v in enumerate((-32768, 32767, 0)[: flat.size]):
        flat[int(r.integers(0, flat.size))] = v
    return x


def _bias_scale(s_in, s_w):
    return (np.float64(np.float32(s_in)) * np.atleast_1d(np.asarray(s_w, np.float32)).astype(np.float64)
            ).astype(np.float32)


@pytest.mark.parametrize("op", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_conv_16x8_matches_litert(op):
    r = rng_for("conv16", op)
    done = 0
    for i in range(N_MODELS * 4):
        h, w, c = int(r.integers(1, 9)), int(r.integers(1, 9)), int(r.integers(1, 6))
        kh, kw = int(r.integers(1, 4)), int(r.integers(1, 4))
        options = {"padding": str(r.choice(["SAME", "VALID"])), "stride_h": int(r.integers(1, 3)),
                   "stride_w": int(r.integers(1, 3)), "fused_activation_function": str(r.choice(["NONE", "RELU", "RELU6"]))}
        bias_type = "int64"
        if op == "CONV_2D":
            if i % 5 == 0:
                c = 300                                     # a deep accumulation
            o, wshape, qd = int(r.integers(1, 7)), None, 0
            wshape = (o, kh, kw, c)
            bias_type = str(r.choice(["int64", "int32"]))
            options["quantized_bias_type"] = bias_type.upper()
        else:
            m = int(r.integers(1, 3))
            o, wshape, qd = c * m, (1, kh, kw, c * m), 3
            options["depth_multiplier"] = m
        try:
            (oh, ow), _ = window_geometry(op, options["padding"], (h, w), (kh, kw),
                                          (options["stride_h"], options["stride_w"]), (1, 1))
        except QuantSpecError:
            continue
        s_in, s_out = scale(r, -5, -2), scale(r, -5, -1)
        s_w = [scale(r, -3, -1) for _ in range(o)]
        weights = r.integers(-127, 128, wshape).astype(np.int8)
        bias = r.integers(-100000, 100000, o).astype(bias_type)
        sweep(op, [T((1, h, w, c), "int16", s_in, 0), T(wshape, "int8", s_w, 0, qd, weights),
                   T((o,), bias_type, _bias_scale(s_in, s_w), 0, 0, bias)],
              [T((1, oh, ow, o), "int16", s_out, 0)], options, [i16(r, (1, h, w, c))], version=1)
        done += 1
    assert done >= N_MODELS


def test_fully_connected_16x8_matches_litert():
    r = rng_for("fc16")
    for i in range(N_MODELS * 3):
        rows, k, o = int(r.integers(1, 5)), int(r.integers(1, 40)), int(r.integers(1, 9))
        if i % 6 == 0:
            k = int(r.integers(300, 3000))
        per_channel = bool(i % 3)
        s_in, s_out = scale(r, -5, -2), scale(r, -4, 0)
        s_w = [scale(r, -3, -1) for _ in range(o)] if per_channel else scale(r, -3, -1)
        bias_type = str(r.choice(["int64", "int32"]))
        b_scale = _bias_scale(s_in, s_w)
        bias = None if i % 4 == 0 else T((o,), bias_type, b_scale if per_channel else float(b_scale[0]), 0, 0,
                                          r.integers(-100000, 100000, o).astype(bias_type))
        sweep("FULLY_CONNECTED", [T((rows, k), "int16", s_in, 0),
                                  T((o, k), "int8", s_w, 0, 0, r.integers(-127, 128, (o, k)).astype(np.int8)), bias],
              [T((rows, o), "int16", s_out, 0)],
              {"fused_activation_function": str(r.choice(["NONE", "RELU", "RELU6"])),
               "quantized_bias_type": bias_type.upper()}, [i16(r, (rows, k))], version=1)


def test_an_int32_bias_without_quantized_bias_type_is_refused():
    """LiteRT's 16x8 CONV_2D reads the bias as int64 unless quantized_bias_type says INT32: an int32 bias is
    read past its end.  quantspec refuses the model."""
    args = ("CONV_2D", [T((1, 2, 2, 1), "int16", 0.01, 0), T((2, 1, 1, 1), "int8", [0.1, 0.1], 0, 0,
                                                              np.ones((2, 1, 1, 1), np.int8)),
                        T((2,), "int32", [0.001, 0.001], 0, 0, np.array([5, 7], np.int32))],
            [T((1, 2, 2, 2), "int16", 0.01, 0)], {"padding": "VALID", "stride_h": 1, "stride_w": 1},
            [np.zeros((1, 2, 2, 1), np.int16)])
    with pytest.raises(QuantSpecError, match="read"):
        quantspec_run(*args)


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_binary_16x8_matches_litert(op):
    r = rng_for("binary16", op)
    for i in range(N_MODELS * 3):
        a, b = broadcast_pair(r, 4)
        if i % 3 == 0:     # power-of-two scales: the pot kernels of ADD and SUB
            e_out = int(r.integers(-14, -6))
            shifts = (0, -int(r.integers(0, 4))) if i % 2 else (-int(r.integers(0, 4)), 0)
            s1, s2, so = (float(2.0 ** (e_out + shifts[0])), float(2.0 ** (e_out + shifts[1])), float(2.0 ** e_out))
        else:
            s1, s2, so = scale(r, -5, -2), scale(r, -5, -2), scale(r, -5, -1)
        options = {"fused_activation_function": str(r.choice(["NONE", "RELU", "RELU6"]))}
        if op != "MUL" and i % 5 == 1:
            options["pot_scale_int16"] = False
        sweep(op, [T(a, "int16", s1, 0), T(b, "int16", s2, 0)], [T(np.broadcast_shapes(a, b), "int16", so, 0)],
              options, [i16(r, a), i16(r, b)], version=3 if op == "SUB" else 1)


def test_power_of_two_add_does_not_broadcast():
    args = ("ADD", [T((2, 3), "int16", 2 ** -10, 0), T((1, 3), "int16", 2 ** -10, 0)], [T((2, 3), "int16", 2 ** -10, 0)],
            {}, [np.ones((2, 3), np.int16), np.ones((1, 3), np.int16)])
    assert litert_outcome(*args, version=1) == "abort"
    with pytest.raises(QuantSpecError, match="abort"):
        quantspec_run(*args)


def test_mean_16x8_matches_litert():
    r = rng_for("mean16")
    for i in range(N_MODELS * 3):
        shp = shape(r, 4, 7)
        axes = sorted(r.choice(len(shp), int(r.integers(1, len(shp) + 1)), replace=False).tolist())
        keep = bool(i % 2)
        out = tuple(1 if d in axes else n for d, n in enumerate(shp)) if keep else \
            tuple(n for d, n in enumerate(shp) if d not in axes)
        sweep("MEAN", [T(shp, "int16", scale(r, -5, -2), 0), T((len(axes),), "int32", data=np.array(axes, np.int32))],
              [T(out, "int16", scale(r, -5, -2), 0)], {"keep_dims": keep}, [i16(r, shp)], version=1)


def test_softmax_16x8_matches_litert():
    r = rng_for("softmax16")
    for i in range(N_MODELS * 3):
        shp = shape(r, 4, 6)[:-1] + (int(r.choice([1, 2, 7, 30, 300, 3000])),)
        beta = float(np.float32(r.choice([1.0, 0.5, 2.0, r.uniform(0.05, 20)])))
        x = i16(r, shp)
        x.reshape(-1, shp[-1])[0] = x.reshape(-1)[0]                 # a row of equal values
        s_out = 1 / 32768 if i % 5 else float(np.float32(1 / 32768) * np.float32(1 + r.uniform(-2e-3, 2e-3)))
        sweep("SOFTMAX", [T(shp, "int16", scale(r, -6, -1), 0)], [T(shp, "int16", s_out, 0)], {"beta": beta}, [x],
              version=1)


@pytest.mark.parametrize("op", ["LOGISTIC", "TANH"])
def test_logistic_tanh_16x8_every_code(op):
    r = rng_for("act16", op)
    for i in range(N_MODELS * 2):
        s_in = float(2.0 ** int(r.integers(-14, -9))) if i % 3 == 0 else scale(r, -6, -1)   # pot and general
        s_out = 1 / 32768 if i % 6 else scale(r, -6, -3)
        sweep(op, [T((65536,), "int16", s_in, 0)], [T((65536,), "int16", s_out, 0)], {}, [ALL16], version=1)


@pytest.mark.parametrize("op", ["AVERAGE_POOL_2D", "MAX_POOL_2D"])
def test_pools_16x8_match_litert(op):
    r = rng_for("pool16", op)
    for i in range(N_MODELS * 2):
        h, w, c = int(r.integers(1, 9)), int(r.integers(1, 9)), int(r.integers(1, 4))
        fh, fw = int(r.integers(1, 4)), int(r.integers(1, 4))
        options = {"padding": str(r.choice(["SAME", "VALID"])), "stride_h": int(r.integers(1, 3)),
                   "stride_w": int(r.integers(1, 3)), "filter_height": fh, "filter_width": fw,
                   "fused_activation_function": str(r.choice(["NONE", "RELU"]))}
        try:
            (oh, ow), _ = window_geometry(op, options["padding"], (h, w), (fh, fw),
                                          (options["stride_h"], options["stride_w"]), (1, 1))
        except QuantSpecError:
            continue
        s = scale(r, -5, -2)
        sweep(op, [T((1, h, w, c), "int16", s, 0)], [T((1, oh, ow, c), "int16", s, 0)], options,
              [i16(r, (1, h, w, c))], version=1)


def test_quantize_to_and_from_int16():
    r = rng_for("quantize16")
    floats = np.concatenate([r.standard_normal(1000).astype(np.float32) * 100,
                             np.array([np.nan, np.inf, -np.inf, 0.5, -0.5, 1e30, -1e30], np.float32)])
    for i in range(N_MODELS * 2):
        for src, dst in (("int16", "int16"), ("int16", "int8"), ("int8", "int16"), ("float", "int16")):
            s_in, s_out = scale(r, -5, 0), scale(r, -5, 0)
            z_in = int(r.integers(-128, 128)) if src == "int8" else 0
            z_out = int(r.integers(-128, 128)) if dst == "int8" else 0
            x = floats if src == "float" else (ALL16 if src == "int16" else ALL8)
            inp = T(x.shape, "float") if src == "float" else T(x.shape, src, s_in, z_in)
            sweep("QUANTIZE", [inp], [T(x.shape, dst, s_out, z_out)], {}, [x], version=1)


def test_int16_zero_points_must_be_zero():
    for op in ("ADD", "MEAN", "SOFTMAX", "LOGISTIC"):
        if op == "ADD":
            args = (op, [T((4,), "int16", 0.01, 1), T((4,), "int16", 0.01, 0)], [T((4,), "int16", 0.02, 0)], {},
                    [np.zeros(4, np.int16)] * 2)
        elif op == "MEAN":
            args = (op, [T((2, 4), "int16", 0.01, 1), T((1,), "int32", data=np.array([1], np.int32))],
                    [T((2,), "int16", 0.01, 0)], {}, [np.zeros((2, 4), np.int16)])
        else:
            args = (op, [T((4,), "int16", 0.01, 3)], [T((4,), "int16", 1 / 32768, 0)], {}, [np.zeros(4, np.int16)])
        assert litert_outcome(*args, version=1) == "error", op
        with pytest.raises(QuantSpecError, match="must be 0"):
            quantspec_run(*args)
