"""Run ONNX QuantizeLinear / DequantizeLinear in the real runtimes: onnx.reference and onnxruntime.

Test-only helper.  Both take numpy / ml_dtypes arrays and return the output array with its exact
type.  onnxruntime runs with ``ORT_DISABLE_ALL`` (no constant folding or Q/DQ fusion) and 2 intra-op
threads; sub-byte and float8 tensors cross the boundary as raw bytes (its Python binding has no numpy
type for them): such inputs are stored in the model as initializers, outputs are read with
``run_with_ort_values`` and ``data_ptr``.  ORT 1.31 refuses opset > 26 and IR > 11 for these
versions, so ORT models declare the opset of the operator version (<= 25) and IR version 11.

:func:`ort_version` is the installed onnxruntime's version: the tests compare
``compat="onnxruntime"`` with ``ort_version=ort_version()`` against it, so the same tests check
quantspec's reproduction of whichever reproduced release is installed (1.31.1 in the locked
environment, 1.32.0 under ``PYTHONPATH=$QUANTSPEC_ORT_ALT``: tests/test_onnx_ort_versions.py).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from refs import require

from quantspec._semantics.packing import unpack_codes
from quantspec.dtypes import qtype


def _helpers():
    onnx = require("onnx")
    from onnx import helper, numpy_helper

    return onnx, helper, numpy_helper


def _tensor_type(a: np.ndarray) -> int:
    return qtype(a.dtype).onnx


def _build(op: str, opset: int, inputs: list, attrs: dict, out_type: int, ir_version: int,
           as_initializer: set[int]) -> tuple[bytes, list[str]]:
    onnx, helper, numpy_helper = _helpers()
    names = ["x", "scale", "zero_point"][: len(inputs)]
    node_inputs, graph_inputs, inits, feeds = [], [], [], []
    for i, (name, a) in enumerate(zip(names, inputs)):
        if a is None:
            node_inputs.append("")
            continue
        node_inputs.append(name)
        if i in as_initializer:
            inits.append(numpy_helper.from_array(np.asarray(a), name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, _tensor_type(np.asarray(a)), np.shape(a)))
            feeds.append(name)
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    node = helper.make_node(op, node_inputs, ["y"], **{k: v for k, v in attrs.items() if v is not None})
    out = helper.make_tensor_value_info("y", out_type, None)
    graph = helper.make_graph([node], "g", graph_inputs, [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model.SerializeToString(), feeds


def reference(op: str, opset: int, x, scale, zero_point=None, **attrs) -> np.ndarray:
    """onnx.reference's result (ReferenceEvaluator on a one-node model)."""
    onnx, helper, numpy_helper = _helpers()
    ref = require("onnx.reference")
    inputs = [np.asarray(x), np.asarray(scale)] + ([np.asarray(zero_point)] if zero_point is not None else [])
    out_type = attrs.get("output_dtype") or onnx.TensorProto.UINT8
    model, feeds = _build(op, opset, inputs, attrs, out_type, 10 if opset < 21 else 11, set())
    sess = ref.ReferenceEvaluator(onnx.load_from_string(model))
    feed = {n: a for n, a in zip(["x", "scale", "zero_point"], inputs)}
    (y,) = sess.run(None, feed)
    return np.asarray(y)


@functools.lru_cache(maxsize=None)
def ort_version() -> str:
    """The installed onnxruntime's version (the module's, which is the one that runs)."""
    return require("onnxruntime").__version__


@functools.lru_cache(maxsize=None)
def _ort_session(model: bytes):
    ort = require("onnxruntime")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


_ORT_NUMPY_OK = {"float", "float16", "int8", "uint8", "int16", "uint16", "int32", "int64", "double", "bool"}


def ort(op: str, opset: int, x, scale, zero_point=None, *, out_type: str, **attrs) -> np.ndarray:
    """onnxruntime's result as an array of type ``out_type`` (raw bytes for sub-byte/float8)."""
    onnx, helper, numpy_helper = _helpers()
    ort_mod = require("onnxruntime")
    inputs = [np.asarray(x), np.asarray(scale)] + ([np.asarray(zero_point)] if zero_point is not None else [])
    init = {i for i, a in enumerate(inputs) if qtype(a.dtype).name not in _ORT_NUMPY_OK}
    out_t = qtype(out_type)
    model, feeds = _build(op, opset, inputs, attrs, out_t.onnx, 11, init)
    sess = _ort_session(model)
    feed = {n: a for n, a in zip(["x", "scale", "zero_point"], inputs) if n in feeds}
    if out_t.name in _ORT_NUMPY_OK:
        (y,) = sess.run(None, feed)
        return np.asarray(y)
    ovs = {k: ort_mod.OrtValue.ortvalue_from_numpy(v) for k, v in feed.items()}
    (ov,) = sess.run_with_ort_values(["y"], ovs)
    shape = tuple(ov.shape())
    n = int(np.prod(shape, dtype=np.int64))
    if out_t.is_packed:
        raw = ctypes.string_at(ov.data_ptr(), (n * out_t.bits + 7) // 8) if n else b""
        codes = unpack_codes(raw, out_t.bits, n)
        if out_t.kind == "int" and out_t.signed:
            codes = codes.astype(np.int8)
            codes = np.where(codes >= (1 << (out_t.bits - 1)), codes - (1 << out_t.bits), codes).astype(np.int8)
            return codes.astype(out_t.dtype).reshape(shape)
        return codes.view(out_t.dtype).reshape(shape) if out_t.kind == "float" else codes.astype(out_t.dtype).reshape(shape)
    raw = ctypes.string_at(ov.data_ptr(), n * out_t.dtype.itemsize) if n else b""
    return np.frombuffer(raw, dtype=out_t.storage).view(out_t.dtype).reshape(shape).copy()
