"""quantspec.litert parameter functions against the TensorFlow 2.21 converter (the tensors of
converter-made int8 models, given the calibration statistics the converter recorded) and the
element-wise conversions against the LiteRT interpreter's QUANTIZE / DEQUANTIZE (BUILTIN_REF)."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

from quantspec.errors import AxisError, DTypeError, InvalidArgumentError, RangeError, ShapeError, UnsupportedError
from quantspec.litert import (QuantParams, activation_params, adjust_for_bias, bias_params, dequantize, quantize,
                              quantize_bias, quantize_weights, weight_params)
from refs import require

SEED = int(os.environ.get("QUANTSPEC_TEST_SEED", "0"))


# ---------------------------------------------------------------------------------------------
# converter-made models (notes/litert.md §7A)
# ---------------------------------------------------------------------------------------------

def _convert(module, data, per_channel=True):
    """(calibrated float model, quantized int8 model) for ``module.f`` and the representative
    ``data``.  The calibrated model carries the min/max the calibrator recorded per tensor."""
    tf = require("tensorflow")

    def rep():
        for d in data:
            yield [d]

    def make():
        c = tf.lite.TFLiteConverter.from_concrete_functions([module.f.get_concrete_function()], module)
        c.optimizations = [tf.lite.Optimize.DEFAULT]
        c.representative_dataset = rep
        c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        c.inference_input_type = tf.int8
        c.inference_output_type = tf.int8
        if not per_channel:
            c._experimental_disable_per_channel_quantization_for_dense_layers = True
        return c

    c = make()
    c._experimental_calibrate_only = True
    calibrated = c.convert()
    return calibrated, make().convert()


def _tensors(model: bytes):
    fu = require("ai_edge_litert.tools.flatbuffer_utils")
    m = fu.read_model_from_bytearray(bytearray(model))
    sg = m.subgraphs[0]
    ops = [(fu.opcode_to_name(m, o.opcodeIndex), list(o.inputs), list(o.outputs)) for o in sg.operators]
    tensors = []
    for t in sg.tensors:
        buf = m.buffers[t.buffer].data
        tensors.append({"name": t.name.decode(), "shape": list(t.shape), "type": t.type, "q": t.quantization,
                        "data": None if buf is None else np.asarray(buf, np.uint8)})
    return ops, tensors


def _params(t) -> QuantParams:
    q = t["q"]
    return QuantParams(np.asarray(q.scale, np.float32), np.asarray(q.zeroPoint, np.int64), q.quantizedDimension)


def _stats(calibrated: bytes) -> dict[str, tuple[float, float]]:
    _, tensors = _tensors(calibrated)
    return {t["name"]: (np.float32(t["q"].min[0]), np.float32(t["q"].max[0])) for t in tensors
            if t["q"] is not None and t["q"].min is not None and len(t["q"].min)}


def _same(a: QuantParams, b: QuantParams, what: str):
    assert a.scale.tobytes() == b.scale.tobytes(), (what, a.scale, b.scale)
    assert a.zero_point.tolist() == b.zero_point.tolist(), (what, a.zero_point, b.zero_point)
    if a.per_axis:
        assert a.quantized_dimension == b.quantized_dimension, what


def _check_weighted_model(calibrated, quantized, op_name, w_tflite, bias, data, axis):
    """Every tensor of a one-op quantized model against quantspec's parameter functions."""
    ops, tensors = _tensors(quantized)
    names = [o[0] for o in ops]
    assert names == [op_name], names
    _, inputs, outputs = ops[0]
    stats = _stats(calibrated)
    x, w, b = (tensors[i] for i in inputs[:3])
    y = tensors[outputs[0]]
    # activations, from the recorded statistics; the input's are the data's global min/max
    assert stats[x["name"]] == (min(d.min() for d in data), max(d.max() for d in data))
    in_params = activation_params(*stats[x["name"]])
    _same(in_params, _params(x), "input")
    _same(activation_params(*stats[y["name"]]), _params(y), "output")
    # weights and bias: scales (widened where the bias would overflow) and values
    plain = weight_params(w_tflite, axis=axis)
    w_params, b_params = adjust_for_bias(in_params, plain, bias)
    widened = w_params.scale != plain.scale
    if not np.any(widened):
        _same(b_params, bias_params(in_params, plain), "bias without widening")
    _same(w_params, _params(w), "weights")
    assert np.array_equal(w["data"].view(np.int8).reshape(w["shape"]), quantize_weights(w_tflite, w_params))
    _same(b_params, _params(b), "bias")
    assert np.array_equal(b["data"].view(np.int32), quantize_bias(bias, b_params))
    return widened


def _weights(rng, shape, axis, specials=True):
    """Random weights, with special slices along ``axis``: all zero, tiny (widened range), a slice
    whose values sit on the quantization grid (ties), and one dominated by a single value."""
    w = (rng.standard_normal(shape) * rng.uniform(0.01, 3.0)).astype(np.float32)
    if specials and shape[axis] >= 4:
        idx = [slice(None)] * len(shape)
        idx[axis] = 0
        w[tuple(idx)] = 0.0
        idx[axis] = 1
        w[tuple(idx)] *= np.float32(1e-7)
        idx[axis] = 2
        grid = rng.integers(-254, 255, w[tuple(idx)].shape).astype(np.float32) / np.float32(2)
        grid.flat[0] = 127.0
        w[tuple(idx)] = grid * np.float32(0.01)
        idx[axis] = 3
        w[tuple(idx)] = np.float32(0.5)
    return w


@pytest.fixture(scope="module")
def tf():
    return require("tensorflow")


def test_converter_fully_connected_per_channel_and_per_tensor(tf):
    rng = np.random.default_rng(SEED + 1)
    widened = []
    for per_channel, big_bias in ((True, False), (True, True), (False, False), (False, True)):
        W = _weights(rng, (12, 6), axis=1, specials=per_channel)       # TF layout [in, out]
        B = rng.standard_normal(6).astype(np.float32)
        if not big_bias:
            B[:2] = 0.0                                                 # the zero and tiny channels keep their scales
        elif not per_channel:
            W *= np.float32(1e-6)                                       # a per-tensor bias that overflows
        lo, hi = sorted(rng.uniform(-4, 4, 2))

        class M(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([1, 12], tf.float32)])
            def f(self, x):
                return tf.matmul(x, W) + B

        data = [rng.uniform(lo, hi, (1, 12)).astype(np.float32) for _ in range(30)]
        calibrated, quantized = _convert(M(), data, per_channel=per_channel)
        widened.append(np.any(_check_weighted_model(calibrated, quantized, "FULLY_CONNECTED", W.T.copy(), B, data,
                                                    axis=0 if per_channel else None)))
    assert widened == [False, True, False, True]


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_converter_conv_2d(tf, padding):
    rng = np.random.default_rng(SEED + 2 + (padding == "SAME"))
    W = _weights(rng, (3, 3, 4, 7), axis=3)                           # TF layout HWIO
    B = (rng.standard_normal(7) * 0.5).astype(np.float32)

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 8, 8, 4], tf.float32)])
        def f(self, x):
            return tf.nn.conv2d(x, W, strides=[1, 2, 2, 1], padding=padding) + B

    data = [rng.uniform(-1.0, 2.5, (1, 8, 8, 4)).astype(np.float32) for _ in range(20)]
    calibrated, quantized = _convert(M(), data)
    _check_weighted_model(calibrated, quantized, "CONV_2D", np.transpose(W, (3, 0, 1, 2)).copy(), B, data, axis=0)


def test_converter_depthwise_conv_2d(tf):
    rng = np.random.default_rng(SEED + 4)
    W = _weights(rng, (3, 3, 3, 2), axis=2)                           # TF layout [H, W, in, multiplier]
    W[:, :, 1, 1] = 0.0                                                # an all-zero output channel (1*2+1 = 3)
    B = (rng.standard_normal(6) * 0.5).astype(np.float32)

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 7, 7, 3], tf.float32)])
        def f(self, x):
            return tf.nn.depthwise_conv2d(x, W, strides=[1, 1, 1, 1], padding="SAME") + B

    data = [rng.uniform(-3.0, 0.5, (1, 7, 7, 3)).astype(np.float32) for _ in range(20)]
    calibrated, quantized = _convert(M(), data)
    _check_weighted_model(calibrated, quantized, "DEPTHWISE_CONV_2D", W.reshape(1, 3, 3, 6), B, data, axis=3)


def test_converter_activation_ranges(tf):
    """Input ranges of every kind: both signs, only positive, only negative, degenerate (all zero,
    a single tiny value, narrower than 1e-6), huge."""
    cases = [(-1.5, 2.25), (0.0, 5.0), (0.25, 0.75), (-3.0, -1.0), (0.0, 0.0), (1e-30, 1e-30), (-3e-7, -3e-7),
             (0.0, 2e-7), (-1e-3, 1e-3), (-6.1e4, 3.3e5), (-0.1, 0.1)]
    rng = np.random.default_rng(SEED + 5)
    cases += [tuple(sorted(rng.uniform(-10, 10, 2))) for _ in range(6)]

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def f(self, x):
            return tf.nn.softmax(x)

    m = M()
    for lo, hi in cases:
        data = [np.array([[lo, hi, lo, hi]], np.float32)]
        calibrated, quantized = _convert(m, data)
        _, tensors = _tensors(quantized)
        x = [t for t in tensors if t["name"].startswith("serving_default")][0]
        _same(activation_params(np.float32(lo), np.float32(hi)), _params(x), f"range {lo}, {hi}")


# ---------------------------------------------------------------------------------------------
# quantize / dequantize against LiteRT QUANTIZE / DEQUANTIZE
# ---------------------------------------------------------------------------------------------

def _grid_and_random(rng, scale, zp, n):
    s = np.float32(scale)
    k = np.arange(-300, 300, dtype=np.float32)
    ties = (k + np.float32(0.5)) * s                    # exact ties of x / scale (when representable)
    wild = np.array([0.0, -0.0, 1e30, -1e30, np.inf, -np.inf, np.nan, 3e9, -3e9, 2.0 ** 31, -(2.0 ** 31)], np.float32)
    rand = (rng.standard_normal(n) * s * rng.uniform(1, 200)).astype(np.float32)
    return np.concatenate([ties, k * s, wild, rand]).astype(np.float32)


def test_quantize_matches_litert_quantize():
    from litert_build import T, build, run_ref
    rng = np.random.default_rng(SEED + 10)
    cases = [(1.0, 0), (0.5, 3), (0.1, -7), (1 / 256, -128), (2.0 ** -20, 127), (3.7e-3, 100), (1e-10, 0), (12.5, -128)]
    cases += [(float(np.float32(10.0 ** rng.uniform(-8, 2))), int(rng.integers(-128, 128))) for _ in range(12)]
    for scale, zp in cases:
        x = _grid_and_random(rng, scale, zp, 500)
        model = build("QUANTIZE", [T((x.size,), "float")], [T((x.size,), "int8", scale, zp)], version=2)
        (ref,) = run_ref(model, [x])
        ours = quantize(x, QuantParams(scale, zp))
        assert ours.dtype == np.int8
        assert ours.tobytes() == ref.tobytes(), (scale, zp, np.flatnonzero(ours != ref)[:5])


def test_quantize_per_axis_matches_litert():
    from litert_build import T, build, run_ref
    rng = np.random.default_rng(SEED + 11)
    x = (rng.standard_normal((3, 5, 4)) * 3).astype(np.float32)
    x[0, 0, 0] = 0.25 * 0.5                                              # a tie
    for axis in (0, 1, 2):
        n = x.shape[axis]
        scales = rng.uniform(0.01, 0.5, n).astype(np.float32)
        zps = rng.integers(-20, 20, n)
        model = build("QUANTIZE", [T(x.shape, "float")], [T(x.shape, "int8", scales, zps, axis)], version=2)
        (ref,) = run_ref(model, [x])
        assert quantize(x, QuantParams(scales, zps, axis)).tobytes() == ref.tobytes()


def test_dequantize_matches_litert_dequantize():
    from litert_build import T, build, run_ref
    rng = np.random.default_rng(SEED + 12)
    q = np.arange(-128, 128, dtype=np.int8)
    for scale, zp in [(1.0, 0), (0.1, 5), (3.3e-5, -128), (7.7e8, 127), (float(np.float32(rng.uniform())), -3)]:
        model = build("DEQUANTIZE", [T((256,), "int8", scale, zp)], [T((256,), "float")], version=2)
        (ref,) = run_ref(model, [q])
        ours = dequantize(q, QuantParams(scale, zp))
        assert ours.dtype == np.float32 and ours.tobytes() == ref.tobytes()


def test_quantize_dequantize_out_argument():
    x = np.linspace(-3, 3, 50, dtype=np.float32)
    p = QuantParams(0.05, 4)
    buf = np.empty(50, np.int8)
    assert quantize(x, p, out=buf) is buf
    assert np.array_equal(buf, quantize(x, p))
    fbuf = np.empty(50, np.float32)
    assert dequantize(buf, p, out=fbuf) is fbuf
    assert np.array_equal(fbuf, dequantize(buf, p))
    with pytest.raises(DTypeError, match="out: must have dtype int8"):
        quantize(x, p, out=np.empty(50, np.int16))
    with pytest.raises(ShapeError, match="out: must have the result's shape"):
        dequantize(buf, p, out=np.empty(49, np.float32))


def test_per_axis_weight_values_and_bias_by_hand():
    # independent of the converter: the formulas of notes/litert.md §4 written out for one channel
    w = np.array([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0], [1e-8, -2e-8, 0.0]], np.float32)
    p = weight_params(w, axis=0)
    m = np.float32(1.0)
    assert p.scale[0] == (m + m) / np.float32(254)
    assert p.scale[1] == p.scale[2] == (np.float32(5e-7) + np.float32(5e-7)) / np.float32(254)
    assert quantize_weights(w, p)[0].tolist() == [64, -127, 32]     # 63.5 rounds away from zero
    b = bias_params(QuantParams(0.5, 0), p)
    assert b.scale[0] == np.float32(0.5 * np.float64(p.scale[0]))
    assert quantize_bias(np.array([1.0, 0.0, 3.0e9], np.float32), b).tolist()[:2] == [
        int(np.round(np.float32(1.0) * np.float32(1.0 / np.float64(b.scale[0])))), 0]
    assert quantize_bias(np.array([1.0, 0.0, 3.0e9], np.float32), b)[2] == 2 ** 31 - 1
    assert quantize_bias(np.array([-1e30, np.nan, 0.0], np.float32), b).tolist()[:2] == [-(2 ** 31 - 1), 0]


# ---------------------------------------------------------------------------------------------
# invalid input
# ---------------------------------------------------------------------------------------------

def test_invalid_inputs():
    with pytest.raises(RangeError, match=r"min: must be <= max"):
        activation_params(2.0, 1.0)
    with pytest.raises(RangeError, match="max: must be finite"):
        activation_params(0.0, float("inf"))
    with pytest.raises(RangeError, match="min: must be finite"):
        activation_params(float("nan"), 1.0)
    with pytest.raises(ShapeError, match="min: must be a scalar"):
        activation_params(np.zeros(2), 1.0)
    with pytest.raises(DTypeError, match="min: must be a float array or scalar, not a bool"):
        activation_params(True, 1.0)
    with pytest.raises(UnsupportedError, match="only 'int8' activations"):
        activation_params(0.0, 1.0, dtype="int16")
    with pytest.raises(RangeError, match="max: gives a range wider than float32"):
        activation_params(-3e38, 3e38)
    with pytest.raises(AxisError, match=r"axis: must be in \[-2, 1\]"):
        weight_params(np.ones((2, 3)), axis=2)
    with pytest.raises(RangeError, match="w: must be finite"):
        weight_params(np.array([1.0, np.nan]))
    with pytest.raises(DTypeError, match="w: must be a real-valued"):
        weight_params(np.array(["a"]))
    with pytest.raises(ShapeError, match="per-axis weights need at least one dimension"):
        weight_params(np.float32(1.0))
    with pytest.raises(ShapeError, match="input_params: must be per-tensor"):
        bias_params(QuantParams([0.1, 0.2], 0), QuantParams([0.1], 0))
    with pytest.raises(DTypeError, match="weight_params: must be a quantspec.litert.QuantParams"):
        bias_params(QuantParams(0.1, 0), 0.5)
    with pytest.raises(RangeError, match=r"params.scale: must be finite and > 0"):
        quantize(np.ones(3), QuantParams(-1.0, 0))
    with pytest.raises(RangeError, match=r"params.scale: must be finite and > 0"):
        dequantize(np.ones(3, np.int8), QuantParams(float("nan"), 0))
    with pytest.raises(RangeError, match=r"params.zero_point: must lie in \[-128, 127\]"):
        quantize(np.ones(3), QuantParams(1.0, 200))
    with pytest.raises(ShapeError, match="one scale per slice of dimension 1"):
        quantize(np.ones((2, 3)), QuantParams([1.0, 2.0], 0, 1))
    with pytest.raises(AxisError, match="params.quantized_dimension: must be < the rank"):
        dequantize(np.ones((2, 3), np.int8), QuantParams([1.0, 2.0], 0, 2))
    with pytest.raises(InvalidArgumentError, match="params.zero_point: must be 0 for weights"):
        quantize_weights(np.ones(3), QuantParams(1.0, 1))
    with pytest.raises(InvalidArgumentError, match="params.zero_point: must be 0 for a bias"):
        quantize_bias(np.ones(3), QuantParams(1.0, 1))
    with pytest.raises(DTypeError, match="q: must be an int8"):
        dequantize(np.ones(3, np.float32), QuantParams(1.0, 0))
    with pytest.raises(DTypeError, match="x: must be a real-valued"):
        quantize(np.array([1 + 2j]), QuantParams(1.0, 0))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_weight_maxabs_is_the_maximum_of_the_absolute_values(axis):
    """Two reductions (max, -min) instead of a copy of |w|: the same float64 per slice, -0.0 and
    all-zero slices included."""
    from quantspec.litert.params import _weight_maxabs
    rng = np.random.default_rng(9)
    for shape in [(5, 7, 3), (1, 4, 2), (6, 1, 1)]:
        w = rng.normal(size=shape).astype(np.float32) * np.float32(rng.choice([1e-30, 1, 1e30], size=shape))
        w[0] = -0.0
        w.reshape(-1)[-1] = -w.reshape(-1)[-1]
        ax = None if axis is None else axis % w.ndim
        a = np.abs(w.astype(np.float64))
        want = np.array([a.max()]) if ax is None else a.max(axis=tuple(i for i in range(w.ndim) if i != ax))
        got = _weight_maxabs(w, ax)
        assert got.dtype == np.float64 and got.tobytes() == want.tobytes()
    assert _weight_maxabs(np.zeros((0, 3), np.float32), 1).tolist() == [0, 0, 0]
    assert _weight_maxabs(np.array([-0.0, 2.0], np.float32), 0).tolist() == [0.0, 2.0]


def test_tiny_per_tensor_weights_as_the_converter_quantizes_them():
    """Weights whose largest magnitude is below 127 / FLT_MAX: the converter's 127 / max|w| is +inf in
    float32, every w * inf (and 0 * inf = NaN) converts to INT32_MIN on x86, which clamps to -127.
    quantspec gave 127 / 0 / -127 (and numpy's overflow warning).  Checked against the converter.
    Found by the API fuzzer."""
    import quantspec.litert as L

    tf = require("tensorflow")
    w = np.array([[1e-40], [0.0], [-2e-40], [3e-38]], np.float32)

    class M(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
        def f(self, x):
            return tf.matmul(x, tf.constant(w))

    data = [np.random.default_rng(i).uniform(-1, 1, (1, 4)).astype(np.float32) for i in range(4)]
    _, quantized = _convert(M(), data, per_channel=False)
    (want,) = [t["data"].view(np.int8).reshape(t["shape"]) for t in _tensors(quantized)[1]
               if t["data"] is not None and t["type"] == 9]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = L.quantize_weights(w.T, L.weight_params(w.T, None))
    assert got.tolist() == want.tolist() == [[-127, -127, -127, -127]]


def test_per_axis_weight_scales_whose_reciprocal_overflows():
    """A per-axis scale below 1 / FLT_MAX: f32(1.0 / scale) is +inf, and the C++ cast of w * inf gives
    INT32_MIN, clamped to -127 (SymmetricPerChannelQuantizeValues), without a numpy warning.  Found by
    the API fuzzer."""
    import quantspec.litert as L

    w = np.array([[0.5, -0.5, 0.0], [1.0, 2.0, -3.0]], np.float32)
    p = L.QuantParams([1e-39, 0.01], [0, 0], 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = L.quantize_weights(w, p)
    assert got.tolist() == [[-127, -127, -127], [100, 127, -127]]
