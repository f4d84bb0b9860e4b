"""Calls outside TensorFlow's rules: quantspec raises the right quantspec error, whose message names the
argument, the rule and carries TensorFlow's meaning; and TensorFlow itself refuses the same call
(in-process, wherever refusing does not abort the process).  The oneDNN-only refusals (qint32, ranks,
NaN ranges, empty inputs) are also compared with TensorFlow in tests/test_tf_onednn.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import quantspec.tf as qt
from quantspec import errors as E
from refs import require

f32 = np.float32
X = np.linspace(-2, 2, 12).astype(f32).reshape(3, 4)
Q8 = np.arange(12, dtype=np.int8).reshape(3, 4)
ONES3, ONES4 = np.ones(3, f32), np.ones(4, f32)


def _q8(tf):
    return tf.bitcast(tf.constant(Q8), tf.qint8)


# (id, quantspec call, error class, message fragment, the same call to TensorFlow or None where it aborts)
RULES = [
    # -- QuantizeV2 ------------------------------------------------------------------------------
    ("q-min>max", lambda: qt.quantize(X, 1.0, -1.0, "qint8"), E.RangeError, "must not be smaller than min_range",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=f32(1), max_range=f32(-1), T=tf.qint8)),
    ("q-min>max-axis", lambda: qt.quantize(X, ONES3, -ONES3, "qint8", axis=0), E.RangeError, "in slice 0",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=ONES3, max_range=-ONES3, T=tf.qint8, axis=0)),
    ("q-min-not-single", lambda: qt.quantize(X, -ONES3, 1.0, "qint8"), E.ShapeError, "single value",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=-ONES3, max_range=f32(1), T=tf.qint8)),
    ("q-max-not-single", lambda: qt.quantize(X, -1.0, ONES3, "qint8"), E.ShapeError, "max_range",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=f32(-1), max_range=ONES3, T=tf.qint8)),
    ("q-axis-min-rank", lambda: qt.quantize(X, -np.ones((3, 1), f32), ONES3, "qint8", axis=0), E.ShapeError,
     "1-D array", lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=-np.ones((3, 1), f32), max_range=ONES3,
                                                   T=tf.qint8, axis=0)),
    ("q-axis-min-size", lambda: qt.quantize(X, -ONES4, ONES4, "qint8", axis=0), E.ShapeError, "one value per slice",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=-ONES4, max_range=ONES4, T=tf.qint8, axis=0)),
    ("q-axis-max-size", lambda: qt.quantize(X, -ONES3, ONES4, "qint8", axis=0), E.ShapeError, "max_range",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=-ONES3, max_range=ONES4, T=tf.qint8, axis=0)),
    ("q-axis-range", lambda: qt.quantize(X, -ONES3, ONES3, "qint8", axis=2), E.AxisError, "must be in [-2, 1]",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=-ONES3, max_range=ONES3, T=tf.qint8, axis=2)),
    ("q-axis-negative-range", lambda: qt.quantize(X, -ONES3, ONES3, "qint8", axis=-3), E.AxisError, "got -3",
     lambda tf: tf.quantization.quantize(tf.constant(X), -ONES3, ONES3, tf.qint8, axis=-3)),
    ("q-axis-rank0", lambda: qt.quantize(f32(1), -np.ones(1, f32), np.ones(1, f32), "qint8", axis=0), E.AxisError,
     "rank-0", lambda tf: tf.raw_ops.QuantizeV2(input=f32(1), min_range=-np.ones(1, f32), max_range=np.ones(1, f32),
                                                T=tf.qint8, axis=0)),
    ("q-min-first-axis", lambda: qt.quantize(X, -ONES3, ONES3, "qint8", mode="MIN_FIRST", axis=0), E.UnsupportedError,
     "no per-axis kernel", lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=-ONES3, max_range=ONES3, T=tf.qint8,
                                                             mode="MIN_FIRST", axis=0)),
    ("q-half-to-even-min-combined", lambda: qt.quantize(X, -1, 1, "qint8", round_mode="HALF_TO_EVEN"),
     E.InvalidArgumentError, "HALF_TO_EVEN needs mode 'SCALED'",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=f32(-1), max_range=f32(1), T=tf.qint8,
                                      round_mode="HALF_TO_EVEN")),
    ("q-half-to-even-min-first", lambda: qt.quantize(X, -1, 1, "quint8", mode="MIN_FIRST", round_mode="HALF_TO_EVEN"),
     E.InvalidArgumentError, "round_mode", lambda tf: tf.raw_ops.QuantizeV2(
         input=X, min_range=f32(-1), max_range=f32(1), T=tf.quint8, mode="MIN_FIRST", round_mode="HALF_TO_EVEN")),
    ("q-mode", lambda: qt.quantize(X, -1, 1, "qint8", mode="MAX_FIRST"), E.InvalidArgumentError, "mode: must be one of",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=f32(-1), max_range=f32(1), T=tf.qint8, mode="MAX_FIRST")),
    ("q-round-mode", lambda: qt.quantize(X, -1, 1, "qint8", round_mode="HALF_UP"), E.InvalidArgumentError,
     "round_mode: must be one of", lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=f32(-1), max_range=f32(1),
                                                                     T=tf.qint8, round_mode="HALF_UP")),
    ("q-T", lambda: qt.quantize(X, -1, 1, "int64"), E.DTypeError, "TensorFlow quantized type",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=f32(-1), max_range=f32(1), T=tf.int64)),
    ("q-T-float", lambda: qt.quantize(X, -1, 1, "float16"), E.DTypeError, "qint8, quint8",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=f32(-1), max_range=f32(1), T=tf.float16)),
    ("q-x-int", lambda: qt.quantize(Q8, -1, 1, "qint8"), E.DTypeError, "must be float32",
     lambda tf: tf.raw_ops.QuantizeV2(input=tf.constant(Q8), min_range=f32(-1), max_range=f32(1), T=tf.qint8)),
    ("q-x-float64", lambda: qt.quantize(X.astype(np.float64), -1, 1, "qint8"), E.DTypeError, "float32", None),
    ("q-x-string", lambda: qt.quantize("abc", -1, 1, "qint8"), E.DTypeError, "x", None),
    ("q-min-inexact", lambda: qt.quantize(X, np.int64(2 ** 40 + 1), 1.0, "qint8"), E.DTypeError,
     "cannot be converted exactly", None),
    ("q-min-none", lambda: qt.quantize(X, None, 1.0, "qint8"), E.InvalidArgumentError, "min_range: is required", None),
    ("q-min-bool", lambda: qt.quantize(X, True, 1.0, "qint8"), E.DTypeError, "not a bool", None),
    ("q-narrow", lambda: qt.quantize(X, -1, 1, "qint8", narrow_range="yes"), E.InvalidArgumentError, "narrow_range",
     None),
    ("q-emr", lambda: qt.quantize(X, -1, 1, "qint8", ensure_minimum_range="0.1"), E.InvalidArgumentError,
     "ensure_minimum_range", None),
    ("q-emr-huge-int", lambda: qt.quantize(X, -1, 1, "qint8", ensure_minimum_range=2 ** 1030), E.RangeError,
     "range of a double", lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=f32(-1), max_range=f32(1), T=tf.qint8,
                                                           ensure_minimum_range=2 ** 1030)),
    ("q-max-huge-int", lambda: qt.quantize(X, -1, 2 ** 1030, "qint8"), E.RangeError, "max_range",
     lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=-1.0, max_range=2 ** 1030, T=tf.qint8)),
    ("q-min-huge-int-list", lambda: qt.quantize(X, [-2 ** 1030] * 3, ONES3, "qint8", axis=0), E.RangeError,
     "min_range", lambda tf: tf.raw_ops.QuantizeV2(input=X, min_range=[-2 ** 1030] * 3, max_range=ONES3, T=tf.qint8,
                                                   axis=0)),
    ("q-axis-float", lambda: qt.quantize(X, -ONES3, ONES3, "qint8", axis=0.0), E.InvalidArgumentError, "axis", None),
    ("q-kernel", lambda: qt.quantize(X, -1, 1, "qint8", kernel="mkl"), E.InvalidArgumentError, "kernel", None),
    ("q-onednn-qint32", lambda: qt.quantize(X, -1, 1, "qint32", mode="SCALED", round_mode="HALF_TO_EVEN",
                                            kernel="onednn"), E.RuntimeUnsupportedError, "no qint32 kernel", None),
    ("q-onednn-rank0", lambda: qt.quantize(f32(1), -1, 1, "qint8", mode="SCALED", round_mode="HALF_TO_EVEN",
                                           kernel="onednn"), E.RuntimeUnsupportedError, "rank 1 to 5", None),
    ("q-onednn-rank6", lambda: qt.quantize(np.ones((1,) * 6, f32), -1, 1, "qint8", mode="SCALED",
                                           round_mode="HALF_TO_EVEN", kernel="onednn"), E.RuntimeUnsupportedError,
     "rank 6", None),
    ("q-onednn-nan-range", lambda: qt.quantize(X, np.nan, 1, "quint8", mode="MIN_FIRST", kernel="onednn"), E.RangeError,
     "NaN", None),
    ("q-onednn-rank0-min-shape", lambda: qt.quantize(f32(1), [-1.0], 1, "quint8", mode="MIN_FIRST", kernel="onednn"),
     E.ShapeError, "rank-0 input", None),
    ("q-out-dtype", lambda: qt.quantize(X, -1, 1, "qint8", out=np.empty((3, 4), np.uint8)), E.DTypeError, "out", None),
    ("q-out-shape", lambda: qt.quantize(X, -1, 1, "qint8", out=np.empty((4, 3), np.int8)), E.ShapeError, "out", None),
    ("q-out-readonly", lambda: qt.quantize(X, -1, 1, "qint8", out=_readonly((3, 4), np.int8)),
     E.InvalidArgumentError, "writeable", None),
    # -- Dequantize ------------------------------------------------------------------------------
    ("dq-axis-range", lambda: qt.dequantize(Q8, -ONES3, ONES3, axis=2), E.AxisError, "axis",
     lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=-ONES3, max_range=ONES3, axis=2)),
    ("dq-axis-min-size", lambda: qt.dequantize(Q8, -ONES4, ONES4, axis=0), E.ShapeError, "dequantization axis: 3",
     lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=-ONES4, max_range=ONES4, axis=0)),
    ("dq-axis-max-size", lambda: qt.dequantize(Q8, -ONES3, ONES4, axis=0), E.ShapeError, "max_range",
     lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=-ONES3, max_range=ONES4, axis=0)),
    ("dq-min-not-single", lambda: qt.dequantize(Q8, -ONES3, ONES3), E.ShapeError, "as many elements",
     lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=-ONES3, max_range=ONES3)),
    ("dq-axis-min-rank2", lambda: qt.dequantize(Q8, -np.ones((3, 1), f32), np.ones((3, 1), f32), axis=0), E.ShapeError,
     "aborts", None),  # TensorFlow CHECK-fails: the process dies
    ("dq-min-first-axis", lambda: qt.dequantize(Q8, -ONES3, ONES3, mode="MIN_FIRST", axis=0), E.UnsupportedError,
     "no per-axis kernel", lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=-ONES3, max_range=ONES3,
                                                            mode="MIN_FIRST", axis=0)),
    ("dq-bf16-scaled", lambda: qt.dequantize(Q8, -1, 1, mode="SCALED", dtype="bfloat16"), E.UnsupportedError,
     "bfloat16", lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=f32(-1), max_range=f32(1), mode="SCALED",
                                                  dtype=tf.bfloat16)),
    ("dq-bf16-min-first", lambda: qt.dequantize(Q8, -1, 1, mode="MIN_FIRST", dtype="bfloat16"), E.UnsupportedError,
     "MIN_COMBINED", lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=f32(-1), max_range=f32(1),
                                                      mode="MIN_FIRST", dtype=tf.bfloat16)),
    ("dq-dtype", lambda: qt.dequantize(Q8, -1, 1, dtype="float16"), E.DTypeError, "float32 or bfloat16",
     lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=f32(-1), max_range=f32(1), dtype=tf.float16)),
    ("dq-x-vs-T", lambda: qt.dequantize(Q8, -1, 1, T="qint16"), E.DTypeError, "int16", None),
    ("dq-x-float", lambda: qt.dequantize(X, -1, 1), E.DTypeError, "TensorFlow quantized type", None),
    ("dq-list-no-T", lambda: qt.dequantize([1, 2], -1, 1), E.DTypeError, "T: is required", None),
    ("dq-mode", lambda: qt.dequantize(Q8, -1, 1, mode="scaled!"), E.InvalidArgumentError, "mode",
     lambda tf: tf.raw_ops.Dequantize(input=_q8(tf), min_range=f32(-1), max_range=f32(1), mode="scaled!")),
    ("dq-onednn-qint32", lambda: qt.dequantize(Q8.astype(np.int32), -1, 1, mode="SCALED", kernel="onednn"),
     E.RuntimeUnsupportedError, "_MklDequantize", None),
    ("dq-onednn-rank0", lambda: qt.dequantize(np.int8(3), -1, 1, mode="SCALED", kernel="onednn"),
     E.RuntimeUnsupportedError, "rank", None),
    ("dq-onednn-empty", lambda: qt.dequantize(np.zeros((0, 2), np.int8), -1, 1, mode="SCALED", kernel="onednn"),
     E.RuntimeUnsupportedError, "aborts", None),  # TensorFlow with oneDNN dies on this
    ("dq-out-dtype", lambda: qt.dequantize(Q8, -1, 1, out=np.empty((3, 4), np.float64)), E.DTypeError, "out", None),
    # -- QuantizeAndDequantize -------------------------------------------------------------------
    ("qdq-bits-0", lambda: qt.quantize_and_dequantize_v2(X, -1, 1, num_bits=0), E.RangeError, "num_bits",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(input=X, input_min=f32(-1), input_max=f32(1), num_bits=0)),
    ("qdq-bits-62-signed", lambda: qt.quantize_and_dequantize_v4(X, -1, 1, num_bits=62), E.RangeError, "[1, 61]",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV4(input=X, input_min=f32(-1), input_max=f32(1), num_bits=62)),
    ("qdq-bits-63-unsigned", lambda: qt.quantize_and_dequantize_v2(X, -1, 1, num_bits=63, signed_input=False),
     E.RangeError, "[1, 62]", lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(
         input=X, input_min=f32(-1), input_max=f32(1), num_bits=63, signed_input=False)),
    ("qdq-v3-bits-0", lambda: qt.quantize_and_dequantize_v3(X, -1, 1, 0), E.RangeError, "num_bits",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(input=X, input_min=f32(-1), input_max=f32(1),
                                                   num_bits=np.int32(0))),
    ("qdq-v3-bits-vector", lambda: qt.quantize_and_dequantize_v3(X, -1, 1, np.array([8], np.int32)), E.ShapeError,
     "scalar", lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(input=X, input_min=f32(-1), input_max=f32(1),
                                                              num_bits=np.array([8], np.int32))),
    ("qdq-min>max", lambda: qt.quantize_and_dequantize_v2(X, 1, -1, range_given=True), E.RangeError,
     "must not be larger than input_max", lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(
         input=X, input_min=f32(1), input_max=f32(-1), range_given=True)),
    ("qdq-v3-min>max", lambda: qt.quantize_and_dequantize_v3(X, 1, -1, 8), E.RangeError, "input_min",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(input=X, input_min=f32(1), input_max=f32(-1),
                                                   num_bits=np.int32(8))),
    ("qdq-nan-range", lambda: qt.quantize_and_dequantize_v4(X, np.nan, 1, range_given=True), E.RangeError, "NaN",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV4(input=X, input_min=f32(np.nan), input_max=f32(1), range_given=True)),
    ("qdq-round-mode", lambda: qt.quantize_and_dequantize_v2(X, -1, 1, round_mode="HALF_AWAY_FROM_ZERO"),
     E.InvalidArgumentError, "HALF_UP", lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(
         input=X, input_min=f32(-1), input_max=f32(1), round_mode="HALF_AWAY_FROM_ZERO")),
    ("qdq-axis-range", lambda: qt.quantize_and_dequantize_v2(X, -ONES3, ONES3, axis=2), E.AxisError, "axis",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(input=X, input_min=-ONES3, input_max=ONES3, axis=2)),
    ("qdq-v3-axis-range", lambda: qt.quantize_and_dequantize_v3(X, -ONES3, ONES3, 8, axis=2), E.AxisError, "axis",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(input=X, input_min=-ONES3, input_max=ONES3, num_bits=np.int32(8),
                                                   axis=2)),
    ("qdq-axis-rank0", lambda: qt.quantize_and_dequantize_v2(f32(1), -1, 1, axis=0), E.AxisError, "rank-0",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(input=f32(1), input_min=-np.ones(1, f32),
                                                   input_max=np.ones(1, f32), axis=0)),
    ("qdq-min-shape-1", lambda: qt.quantize_and_dequantize_v2(X, [-1.0], [1.0], range_given=True), E.ShapeError,
     "scalar", lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(input=X, input_min=-np.ones(1, f32),
                                                              input_max=np.ones(1, f32), range_given=True)),
    ("qdq-v3-min-3", lambda: qt.quantize_and_dequantize_v3(X, -ONES3, ONES3, 8), E.ShapeError, "aborts",
     None),  # TensorFlow CHECK-fails: the process dies
    ("qdq-axis-min-size", lambda: qt.quantize_and_dequantize_v3(X, -ONES4, ONES4, 8, axis=0), E.ShapeError,
     "one value per slice", lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(
         input=X, input_min=-ONES4, input_max=ONES4, num_bits=np.int32(8), axis=0)),
    ("qdq-axis-min-rank0", lambda: qt.quantize_and_dequantize_v3(X, -1.0, 1.0, 8, axis=0), E.ShapeError, "1-D",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(input=X, input_min=f32(-1), input_max=f32(1), num_bits=np.int32(8),
                                                   axis=0)),
    ("qdq-x-huge-int", lambda: qt.quantize_and_dequantize_v2([1.0, 2 ** 1030], -1, 1), E.RangeError, "x: must be",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(input=[1.0, 2 ** 1030], input_min=-1.0, input_max=1.0)),
    ("qdq-max-huge-int", lambda: qt.quantize_and_dequantize_v3(X, -1, 2 ** 1030, 8), E.RangeError, "input_max",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(input=X, input_min=-1.0, input_max=2 ** 1030,
                                                   num_bits=np.int32(8))),
    ("qdq-x-half", lambda: qt.quantize_and_dequantize_v2(X.astype(np.float16), -1, 1), E.DTypeError, "float32 or float64",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(input=X.astype(np.float16), input_min=np.float16(-1),
                                                   input_max=np.float16(1))),
    ("qdq-x-int", lambda: qt.quantize_and_dequantize_v4(Q8.astype(np.int32), -1, 1), E.DTypeError, "float32",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV4(input=Q8.astype(np.int32), input_min=np.int32(-1),
                                                   input_max=np.int32(1))),
    # -- FakeQuant -------------------------------------------------------------------------------
    ("fq-args-min>=max", lambda: qt.fake_quant_with_min_max_args(X, min=1.0, max=1.0), E.RangeError,
     "must be smaller than max", lambda tf: tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=X, min=1.0, max=1.0)),
    # TensorFlow compares min < max with subnormals flushed to zero: these are 0 >= 0 and -0 >= 0 there
    ("fq-args-subnormal-max", lambda: qt.fake_quant_with_min_max_args(X, min=0.0, max=1e-39), E.RangeError,
     "flushed to zero", lambda tf: tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=X, min=0.0, max=1e-39)),
    ("fq-args-subnormal-both", lambda: qt.fake_quant_with_min_max_args(X, min=-1e-40, max=1e-40), E.RangeError,
     "(-0.0 >= 0.0)", lambda tf: tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=X, min=-1e-40, max=1e-40)),
    ("fq-args-subnormal-positive", lambda: qt.fake_quant_with_min_max_args(X, min=1e-40, max=1e-39), E.RangeError,
     "must be smaller than max", lambda tf: tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=X, min=1e-40, max=1e-39)),
    ("fq-args-huge-int", lambda: qt.fake_quant_with_min_max_args(X, max=2 ** 1030), E.RangeError, "range of a double",
     lambda tf: tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=X, min=-1.0, max=2 ** 1030)),
    ("fq-args-nan", lambda: qt.fake_quant_with_min_max_args(X, min=float("nan")), E.RangeError, "NaN",
     lambda tf: tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=X, min=float("nan"), max=1.0)),
    ("fq-args-bits-1", lambda: qt.fake_quant_with_min_max_args(X, num_bits=1), E.RangeError, "between 2 and 16",
     lambda tf: tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=X, num_bits=1)),
    ("fq-vars-bits-17", lambda: qt.fake_quant_with_min_max_vars(X, -1.0, 1.0, num_bits=17), E.RangeError, "num_bits",
     lambda tf: tf.raw_ops.FakeQuantWithMinMaxVars(inputs=X, min=f32(-1), max=f32(1), num_bits=17)),
    ("fq-vars-min-rank1", lambda: qt.fake_quant_with_min_max_vars(X, [-1.0], 1.0), E.ShapeError, "rank 0",
     lambda tf: tf.raw_ops.FakeQuantWithMinMaxVars(inputs=X, min=-np.ones(1, f32), max=f32(1))),
    ("fq-vars-max-rank1", lambda: qt.fake_quant_with_min_max_vars(X, -1.0, [1.0]), E.ShapeError, "max",
     lambda tf: tf.raw_ops.FakeQuantWithMinMaxVars(inputs=X, min=f32(-1), max=np.ones(1, f32))),
    ("fq-channel-min-rank0", lambda: qt.fake_quant_with_min_max_vars_per_channel(X, -1.0, ONES4), E.ShapeError,
     "rank 1", lambda tf: tf.raw_ops.FakeQuantWithMinMaxVarsPerChannel(inputs=X, min=f32(-1), max=ONES4)),
    ("fq-channel-size", lambda: qt.fake_quant_with_min_max_vars_per_channel(X, -ONES3, ONES3), E.ShapeError,
     "last axis: 4", lambda tf: tf.raw_ops.FakeQuantWithMinMaxVarsPerChannel(inputs=X, min=-ONES3, max=ONES3)),
    ("fq-channel-bits", lambda: qt.fake_quant_with_min_max_vars_per_channel(X, -ONES4, ONES4, num_bits=17),
     E.RangeError, "num_bits", lambda tf: tf.raw_ops.FakeQuantWithMinMaxVarsPerChannel(
         inputs=X, min=-ONES4, max=ONES4, num_bits=17)),
    ("fq-channel-scalar-x", lambda: qt.fake_quant_with_min_max_vars_per_channel(f32(1), -np.ones(1, f32),
                                                                                np.ones(1, f32)),
     E.ShapeError, "aborts", None),  # TensorFlow CHECK-fails: the process dies
    ("fq-x-float64", lambda: qt.fake_quant_with_min_max_args(X.astype(np.float64)), E.DTypeError, "float32", None),
    ("qdq2-list-beyond-float32", lambda: qt.quantize_and_dequantize_v2([1.0, 1e300], -1.0, 1.0, range_given=True),
     E.RangeError, "within the float32 range",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV2(input=[1.0, 1e300], input_min=-1.0, input_max=1.0,
                                                   range_given=True)),
    ("qdq3-scalar-x", lambda: qt.quantize_and_dequantize_v3(f32(0.3), -1.0, 1.0, 8), E.ShapeError,
     "at least one dimension", lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(input=f32(0.3), input_min=f32(-1),
                                                                             input_max=f32(1), num_bits=8)),
    ("qdq3-scalar-x-range", lambda: qt.quantize_and_dequantize_v3(f32(0.3), -1.0, 1.0, 8, range_given=False),
     E.ShapeError, "at least one dimension",
     lambda tf: tf.raw_ops.QuantizeAndDequantizeV3(input=f32(0.3), input_min=f32(-1), input_max=f32(1), num_bits=8,
                                                   range_given=False)),
]


def _readonly(shape, dtype):
    a = np.empty(shape, dtype)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("name,call,cls,fragment,tf_call", RULES, ids=[r[0] for r in RULES])
def test_rule(name, call, cls, fragment, tf_call):
    with pytest.raises(cls) as info:
        call()
    message = str(info.value)
    assert fragment in message, message
    # the message names the argument and the value it got
    assert info.value.argument and message.startswith(info.value.argument + ":"), message
    assert "(got " in message, message
    assert isinstance(info.value, (ValueError, TypeError))
    if tf_call is not None:
        tf = require("tensorflow")
        with pytest.raises((tf.errors.OpError, TypeError, ValueError, OverflowError)):
            tf_call(tf)


@pytest.mark.parametrize("emr", [2 ** 200, 1e300, float("inf"), 2 ** 62 + 2 ** 38 + 1, np.float64(1e39),
                                 np.int64(2 ** 62)])
def test_large_ensure_minimum_range_as_tensorflow(emr):
    """A float attribute is float(value) rounded to float32 (to inf beyond its range), as TensorFlow
    stores it; 2**62 + 2**38 + 1 tells that rounding (through a double: 2**62) from a direct one."""
    tf = require("tensorflow")
    x = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3e38], f32)
    codes, omin, omax = qt.quantize(x, -1.0, 1.0, "qint16", mode="MIN_FIRST", ensure_minimum_range=emr)
    r = tf.raw_ops.QuantizeV2(input=x, min_range=f32(-1), max_range=f32(1), T=tf.qint16, mode="MIN_FIRST",
                              ensure_minimum_range=emr)
    assert codes.tobytes() == np.asarray(r.output.numpy()).view(np.int16).tobytes()
    assert omin.tobytes() == r.output_min.numpy().tobytes() and omax.tobytes() == r.output_max.numpy().tobytes()


def test_no_stray_exceptions():
    """Malformed arguments of every kind end in a quantspec error, never an IndexError, a numpy
    broadcasting error or an AssertionError."""
    junk = [None, "x", [[1, 2], [3]], object(), np.array(["a"]), np.ones((2, 2, 2), f32), np.array([], f32),
            -1, 2 ** 40, 2 ** 1030, [1.0, -2 ** 1030], 1.5, True, np.complex64(1)]
    calls = [
        lambda v: qt.quantize(X, v, 1.0, "qint8"), lambda v: qt.quantize(X, -1.0, 1.0, v),
        lambda v: qt.quantize(X, -ONES3, ONES3, "qint8", axis=v), lambda v: qt.quantize(v, -1, 1, "qint8"),
        lambda v: qt.quantize(X, -1, 1, "qint8", mode=v), lambda v: qt.quantize(X, -1, 1, "qint8", out=v),
        lambda v: qt.quantize(X, -1, 1, "qint8", ensure_minimum_range=v),
        lambda v: qt.dequantize(v, -1, 1), lambda v: qt.dequantize(Q8, v, 1), lambda v: qt.dequantize(Q8, -1, 1, dtype=v),
        lambda v: qt.dequantize(Q8, -1, 1, axis=v), lambda v: qt.dequantize(Q8, -1, 1, T=v),
        lambda v: qt.quantize_and_dequantize_v2(X, v, 1.0, range_given=True),
        lambda v: qt.quantize_and_dequantize_v2(X, -1.0, 1.0, num_bits=v),
        lambda v: qt.quantize_and_dequantize_v3(X, -1.0, 1.0, v), lambda v: qt.quantize_and_dequantize_v4(v),
        lambda v: qt.fake_quant_with_min_max_args(X, min=v), lambda v: qt.fake_quant_with_min_max_vars(X, v, 1.0),
        lambda v: qt.fake_quant_with_min_max_vars_per_channel(X, v, ONES4),
        lambda v: qt.fake_quant_with_min_max_vars(X, -1.0, 1.0, narrow_range=v),
    ]
    for call in calls:
        for v in junk:
            try:
                call(v)
            except E.QuantSpecError:
                pass


@pytest.mark.filterwarnings("error")
def test_a_float32_op_takes_list_values_beyond_float32_as_infinities_like_tensorflow():
    """QuantizeV2 and FakeQuant take float32: TensorFlow converts 1e300 in a Python list to inf (no
    error); quantspec gives the same bytes, without numpy's overflow warning."""
    tf = require("tensorflow")
    data = [1.0, 1e300, -1e300, 0.25]
    got = qt.quantize(data, -1.0, 1.0, "qint8")[0]
    want = tf.raw_ops.QuantizeV2(input=data, min_range=-1.0, max_range=1.0, T=tf.qint8)[0].numpy()
    assert got.tobytes() == want.tobytes()
    got = qt.fake_quant_with_min_max_args(data)
    assert got.tobytes() == tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=data).numpy().tobytes()
