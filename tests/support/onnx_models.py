"""Test helpers for ONNX models: small graphs built with onnx.helper, and models made by
onnxruntime's quantization tools (``quantize_static`` in the QDQ and QOperator formats, per tensor
and per channel; ``MatMulNBitsQuantizer``).

``MatMulNBitsQuantizer`` imports ``onnx_ir`` (a test dependency): a missing one is a skip, or a
failure under ``QUANTSPEC_REQUIRE_REFERENCES=1``, like any missing reference runtime.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from refs import require

from quantspec.dtypes import qtype
from quantspec.onnx import unpack


def onnx_api():
    onnx = require("onnx")
    from onnx import helper, numpy_helper

    return onnx, helper, numpy_helper


def tensor(name: str, value, dtype=None):
    """An initializer from a numpy value (ml_dtypes types included)."""
    _, _, numpy_helper = onnx_api()
    a = np.asarray(value, dtype=dtype) if dtype is not None else np.asarray(value)
    return numpy_helper.from_array(a, name)


def model(nodes, inputs, outputs, initializers=(), opset: int | None = 21, ir: int | None = None, domains=()):
    """A model of ``nodes``; ``inputs`` / ``outputs``: (name, type name or None, shape or None)."""
    onnx, helper, _ = onnx_api()

    def vi(name, t, shape):
        if t is None:
            return onnx.ValueInfoProto(name=name)
        return helper.make_tensor_value_info(name, qtype(t).onnx, shape)

    g = helper.make_graph(list(nodes), "g", [vi(*i) for i in inputs], [vi(*o) for o in outputs],
                          initializer=list(initializers))
    opsets = ([helper.make_opsetid("", opset)] if opset is not None else []) + \
        [helper.make_opsetid(d, v) for d, v in domains]
    m = helper.make_model(g, opset_imports=opsets)
    if ir is not None:
        m.ir_version = ir
    return m


def node(op, inputs, outputs, domain="", **attrs):
    _, helper, _ = onnx_api()
    return helper.make_node(op, inputs, outputs, domain=domain or None, **attrs)


# ------------------------------------------------------------------------------------------------
# models made by onnxruntime's quantization tools
# ------------------------------------------------------------------------------------------------

def float_cnn(path: Path, seed: int = 0) -> Path:
    """A small float model: Conv (4 output channels, 3x3) -> Relu -> Reshape -> MatMul (144 x 10)."""
    onnx, helper, numpy_helper = onnx_api()
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    b = (rng.standard_normal(4) * 0.1).astype(np.float32)
    m = (rng.standard_normal((144, 10)) * 0.1).astype(np.float32)
    nodes = [node("Conv", ["x", "W", "B"], ["c"], pads=[0, 0, 0, 0]), node("Relu", ["c"], ["r"]),
             node("Reshape", ["r", "shape"], ["f"]), node("MatMul", ["f", "M"], ["y"])]
    inits = [tensor("W", w), tensor("B", b), tensor("M", m), tensor("shape", np.array([1, 144], np.int64))]
    out = model(nodes, [("x", "float", [1, 3, 8, 8])], [("y", "float", [1, 10])], inits, opset=13, ir=8)
    onnx.save(out, str(path))
    return path


def calibration(seed: int = 1, count: int = 4):
    """A CalibrationDataReader over seeded random inputs of :func:`float_cnn`."""
    from onnxruntime.quantization import CalibrationDataReader

    rng = np.random.default_rng(seed)
    batches = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(count)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(batches)

        def get_next(self):
            return next(self.it, None)

    return Reader()


def static_quantized(directory: Path, fmt: str, per_channel: bool, contrib_int16: bool = False) -> Path:
    """:func:`float_cnn` quantized by ``onnxruntime.quantization.quantize_static`` (uint8 activations,
    int8 weights) in the ``fmt`` format ("QDQ" or "QOperator"); ``contrib_int16``: int16 activations
    with onnxruntime's com.microsoft QuantizeLinear / DequantizeLinear."""
    require("onnxruntime")
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    src = float_cnn(directory / "float.onnx")
    out = directory / f"static_{fmt}_{'channel' if per_channel else 'tensor'}{'_ms16' if contrib_int16 else ''}.onnx"
    quantize_static(str(src), str(out), calibration(), quant_format=getattr(QuantFormat, fmt), per_channel=per_channel,
                    activation_type=QuantType.QInt16 if contrib_int16 else QuantType.QUInt8,
                    weight_type=QuantType.QInt8, extra_options={"UseQDQContribOps": contrib_int16})
    return out


def nbits_model(directory: Path, symmetric: bool, fmt: str = "QDQ", seed: int = 0) -> Path:
    """A MatMul (x (2, 64) @ W (64, 40)) quantized by onnxruntime's ``MatMulNBitsQuantizer`` (4 bits,
    blocks of 32, default RTN)."""
    onnx, _, _ = onnx_api()
    require("onnxruntime")
    require("onnx_ir")                  # MatMulNBitsQuantizer imports it
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer

    w = np.random.default_rng(seed).standard_normal((64, 40)).astype(np.float32)
    w[:32, 5] = 0                        # an all-zero block: the quantizer writes a zero scale for it
    m = model([node("MatMul", ["x", "W"], ["y"])], [("x", "float", [2, 64])], [("y", "float", [2, 40])],
              [tensor("W", w)], opset=21, ir=10)
    cfg = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=symmetric, quant_format=getattr(QuantFormat, fmt))
    q = MatMulNBitsQuantizer(m, algo_config=cfg)
    q.process()
    out = directory / f"nbits_{fmt}_{'sym' if symmetric else 'asym'}.onnx"
    onnx.save(q.model.model, str(out))
    return out


# ------------------------------------------------------------------------------------------------
# onnxruntime with intermediate tensors exposed (the tests' own, to compare the audit with)
# ------------------------------------------------------------------------------------------------

def run_exposing(model_path: Path, names: list[str], feeds: dict, ir: int | None = None) -> dict[str, np.ndarray]:
    """Run the model in onnxruntime (optimizations off) returning the tensors ``names``."""
    onnx, _, _ = onnx_api()
    ort = require("onnxruntime")
    m = onnx.load(str(model_path))
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=n))
    if ir is not None:
        m.ir_version = ir
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    ovs = sess.run_with_ort_values(names, {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in feeds.items()})
    out = {}
    for n, ov in zip(names, ovs):
        t = qtype(ov.element_type())
        shape = tuple(ov.shape())
        count = int(np.prod(shape, dtype=np.int64))
        size = (count * t.bits + 7) // 8 if t.is_packed else count * t.dtype.itemsize
        out[n] = unpack(ctypes.string_at(ov.data_ptr(), size) if count else b"", t, shape)
    return out


def differing(a: np.ndarray, b: np.ndarray) -> int:
    """Elements whose values (integers) or bit patterns (floats) differ."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    if qtype(a.dtype).is_int:
        return int(np.count_nonzero(a.astype(np.int64) != b.astype(np.int64)))
    u = np.dtype(f"u{a.dtype.itemsize}")
    return int(np.count_nonzero(a.view(u) != b.view(u)))
