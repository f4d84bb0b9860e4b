"""Run a quantizer record in its real runtime: TensorFlow (raw ops, Eigen kernels: conftest switches
oneDNN off), onnxruntime or onnx.reference (by the record's ``compat``), the LiteRT interpreter
(BUILTIN_REF).  Test-only helper for tests/test_equiv_runtimes.py: ``run(record, x)`` returns the
runtime's output for the 1-D input ``x`` (the record's ``run`` shape: one channel), with the type
quantspec's record gives.
"""

from __future__ import annotations

import numpy as np

import onnx_oracles
from litert_build import T, build, run_ref
from refs import require

from quantspec._semantics.oprecord import flat_input
from quantspec.dtypes import qtype


def _tf():
    return require("tensorflow")


def _t(tf, v):
    return tf.constant(np.asarray(v))


def run(record, x: np.ndarray) -> np.ndarray:
    """The real runtime's output of ``record`` (one channel) on the 1-D array ``x``."""
    kind = (record.spec, record.op)
    if kind == ("tf", "QuantizeV2"):
        return _tf_quantize(record, x)
    if kind == ("tf", "Dequantize"):
        return _tf_dequantize(record, x)
    if kind == ("tf", "FakeQuant"):
        return _tf_fake_quant(record, x)
    if kind == ("tf", "QuantizeAndDequantize"):
        return _tf_qdq(record, x)
    if kind == ("onnx", "QuantizeLinear"):
        return _onnx_q(record, x)
    if kind == ("onnx", "DequantizeLinear"):
        return _onnx_dq(record, x)
    if kind == ("litert", "QUANTIZE"):
        return _litert(record, x, "QUANTIZE")
    if kind == ("litert", "DEQUANTIZE"):
        return _litert(record, x, "DEQUANTIZE")
    raise ValueError(kind)


def _tf_quantize(r, x):
    tf = _tf()
    xs = flat_input(np.ascontiguousarray(x, np.float32), r.axis)
    ax = -1 if r.axis is None else r.axis % xs.ndim
    mn = np.asarray(r.min_range, np.float32)
    mx = np.asarray(r.max_range, np.float32)
    res = tf.raw_ops.QuantizeV2(input=tf.constant(xs), min_range=_t(tf, mn), max_range=_t(tf, mx), T=getattr(tf, r.T),
                                mode=r.mode, round_mode=r.round_mode, narrow_range=r.narrow_range, axis=ax,
                                ensure_minimum_range=r.ensure_minimum_range)
    return np.asarray(res.output.numpy()).view(qtype(r.T).dtype).reshape(-1)


def _tf_dequantize(r, q):
    tf = _tf()
    qs = flat_input(np.ascontiguousarray(q), r.axis)
    ax = -1 if r.axis is None else r.axis % qs.ndim
    y = tf.raw_ops.Dequantize(input=tf.bitcast(tf.constant(qs), getattr(tf, r.T)),
                              min_range=_t(tf, np.asarray(r.min_range, np.float32)),
                              max_range=_t(tf, np.asarray(r.max_range, np.float32)), mode=r.mode,
                              narrow_range=r.narrow_range, axis=ax, dtype=getattr(tf, r.dtype))
    return np.asarray(y.numpy()).reshape(-1)


def _tf_fake_quant(r, x):
    tf = _tf()
    x = np.ascontiguousarray(x, np.float32)
    if r.variant == "args":
        y = tf.raw_ops.FakeQuantWithMinMaxArgs(inputs=tf.constant(x), min=float(r.min), max=float(r.max),
                                               num_bits=r.num_bits, narrow_range=r.narrow_range)
    elif r.variant == "vars":
        y = tf.raw_ops.FakeQuantWithMinMaxVars(inputs=tf.constant(x), min=_t(tf, np.float32(r.min)),
                                               max=_t(tf, np.float32(r.max)), num_bits=r.num_bits,
                                               narrow_range=r.narrow_range)
    else:
        y = tf.raw_ops.FakeQuantWithMinMaxVarsPerChannel(inputs=tf.constant(x.reshape(-1, 1)),
                                                         min=_t(tf, np.asarray(r.min, np.float32)),
                                                         max=_t(tf, np.asarray(r.max, np.float32)),
                                                         num_bits=r.num_bits, narrow_range=r.narrow_range)
    return np.asarray(y.numpy()).reshape(-1)


def _tf_qdq(r, x):
    tf = _tf()
    # TensorFlow 2.21 refuses V2 and V4 with range_given and an axis ("input_min must be a scalar",
    # a documented regression); the record computes the intended per-slice result, which TensorFlow
    # gives for one slice as a per-tensor call with that slice's range (as test_tf checks slice by slice)
    axis = None if (r.version in (2, 4) and r.range_given) else r.axis
    xs = flat_input(np.ascontiguousarray(x, np.float32), axis)
    ax = -1 if axis is None else axis % xs.ndim
    mn, mx = np.asarray(r.input_min, np.float32), np.asarray(r.input_max, np.float32)
    common = dict(input=tf.constant(xs), input_min=_t(tf, mn.reshape(-1)[0] if axis is None else mn),
                  input_max=_t(tf, mx.reshape(-1)[0] if axis is None else mx), signed_input=r.signed_input,
                  range_given=r.range_given, narrow_range=r.narrow_range, axis=ax)
    if r.version == 3:
        y = tf.raw_ops.QuantizeAndDequantizeV3(num_bits=np.int32(r.num_bits), **common)
    else:
        op = tf.raw_ops.QuantizeAndDequantizeV2 if r.version == 2 else tf.raw_ops.QuantizeAndDequantizeV4
        y = op(num_bits=r.num_bits, round_mode=r.round_mode, **common)
    return np.asarray(y.numpy()).reshape(-1)


def _onnx_q(r, x):
    from quantspec.onnx import opsets

    version = opsets.version_for(r.opset)
    xs = np.ascontiguousarray(x, qtype(r.x_dtype).dtype)
    attrs = {}
    if r.zero_point is None and r.output_dtype != "uint8":
        attrs["output_dtype"] = qtype(r.output_dtype).onnx
    if not r.saturate:
        attrs["saturate"] = 0
    if r.precision is not None:
        attrs["precision"] = qtype(r.precision).onnx
    if r.compat == "reference":
        return onnx_oracles.reference("QuantizeLinear", version, xs, r._s, r._z, **attrs).reshape(-1)
    version = min(version, 25)
    return onnx_oracles.ort("QuantizeLinear", version, xs, r._s, r._z, out_type=r.output_dtype, **attrs).reshape(-1)


def _onnx_dq(r, q):
    from quantspec.onnx import opsets

    version = min(opsets.version_for(r.opset), 25)
    attrs = {}
    if r.output_dtype is not None:
        attrs["output_dtype"] = qtype(r.output_dtype).onnx
    if r.compat == "reference":
        return onnx_oracles.reference("DequantizeLinear", version, q, r._s, r._z, **attrs).reshape(-1)
    return onnx_oracles.ort("DequantizeLinear", version, np.ascontiguousarray(q), r._s, r._z,
                            out_type=r.output_dtype or r.scale_dtype, **attrs).reshape(-1)


def _litert(r, x, op):
    p = r.params
    n = x.size
    q = T((n,), "int8" if op == "QUANTIZE" else r.input_dtype_name, [float(s) for s in p.scale],
          [int(z) for z in p.zero_point])
    f = T((n,), "float")
    model = build(op, [f], [q]) if op == "QUANTIZE" else build(op, [q], [f])
    (y,) = run_ref(model, [np.ascontiguousarray(x)])
    return np.asarray(y).reshape(-1)
