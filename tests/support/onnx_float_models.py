"""Small float ONNX models built with onnx.helper, for ``quantspec.onnxmodels.convert_model`` (weight-only
quantization): every weight layout the converter maps (MatMul B, Gemm B with transB 0 and 1, Conv W),
biases it must keep, and helpers that run a model in onnxruntime and onnx.reference with the
DequantizeLinear outputs exposed."""

from __future__ import annotations

import numpy as np

from onnx_models import onnx_api
from refs import require

from quantspec.dtypes import qtype

#: name -> (ONNX shape, layout): the weights of :func:`float_model`
WEIGHTS = {"W1": ((40, 24), "in-out"), "W2": ((24, 17), "in-out"), "W3": ((10, 17), "out-in"),
           "Wc": ((5, 3, 3, 3), "out-in")}
BIASES = {"C2": (17,), "Bc": (5,)}


def weights(seed: int = 0) -> dict[str, np.ndarray]:
    """The float32 weights and biases: standard normal, with an all-zero output channel, a channel a
    hundred times larger, and a negative zero (a partial last block everywhere: K = 40, 24, 17)."""
    rng = np.random.default_rng(seed)
    out = {n: rng.standard_normal(shape).astype(np.float32) for n, (shape, _) in WEIGHTS.items()}
    out.update({n: (rng.standard_normal(shape) * 0.1).astype(np.float32) for n, shape in BIASES.items()})
    out["W1"][:, 3] = 0                       # an all-zero output channel (a column of B)
    out["W1"][:, 5] *= 100
    out["W1"][0, 7] = -0.0
    out["W3"][2] = 0                          # an all-zero output channel (a row of B^T)
    out["Wc"][1] *= 0.01
    return out


def float_model(opset: int = 13, dtype: str = "float", seed: int = 0, ir: int = 8, values=None):
    """x [3, 40] -> MatMul W1 -> Gemm W2 + C2 (transB=0) -> Gemm W3 (transB=1) -> y [3, 10];
    img [1, 3, 6, 6] -> Conv Wc + Bc -> z [1, 5, 4, 4].  ``dtype``: float, float16 or bfloat16."""
    onnx, helper, numpy_helper = onnx_api()
    values = weights(seed) if values is None else values
    t = qtype(dtype)
    inits = [numpy_helper.from_array(a.astype(t.dtype), n) for n, a in values.items()]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h1"], name="mm"),
             helper.make_node("Gemm", ["h1", "W2", "C2"], ["h2"], name="gemm_kn"),
             helper.make_node("Gemm", ["h2", "W3"], ["y"], name="gemm_nk", transB=1),
             helper.make_node("Conv", ["img", "Wc", "Bc"], ["z"], name="conv")]
    g = helper.make_graph(nodes, "float", [helper.make_tensor_value_info("x", t.onnx, [3, 40]),
                                           helper.make_tensor_value_info("img", t.onnx, [1, 3, 6, 6])],
                          [helper.make_tensor_value_info("y", t.onnx, [3, 10]),
                           helper.make_tensor_value_info("z", t.onnx, [1, 5, 4, 4])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def inputs(dtype: str = "float", seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = qtype(dtype)
    return {"x": rng.standard_normal((3, 40)).astype(t.dtype), "img": rng.standard_normal((1, 3, 6, 6)).astype(t.dtype)}


def rows(name: str, a: np.ndarray) -> np.ndarray:
    """A weight in the checkpoint layout [out, in...] (the transpose of an in-out weight)."""
    return a.T if WEIGHTS[name][1] == "in-out" else a


def from_rows(name: str, a: np.ndarray) -> np.ndarray:
    return a.T if WEIGHTS[name][1] == "in-out" else a


def dq_outputs(model) -> list[str]:
    """The outputs of the model's DequantizeLinear nodes (main graph)."""
    return [n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear"]


def exposing(model, names):
    """A copy of ``model`` with the tensors ``names`` (float32) added to its outputs."""
    onnx, helper, _ = onnx_api()
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in names:
        m.graph.output.append(helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None))
    return m


def run_ort(model, feeds, names=None, optimize: bool = False):
    """onnxruntime's values of ``names`` (default: the model's outputs); graph optimizations off unless
    ``optimize`` (then what a user gets: DequantizeLinear may be folded or fused into the consumer)."""
    ort = require("onnxruntime")
    opts = ort.SessionOptions()
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    m = exposing(model, names) if names else model
    sess = ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(list(names) if names else None, feeds)


def run_reference(model, feeds, names=None):
    require("onnx")
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator(model).run(list(names) if names else None, feeds)


def rel_rms(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.sqrt(((a - b) ** 2).sum() / (b ** 2).sum()))
