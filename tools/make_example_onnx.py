#!/usr/bin/env python3
"""Make ``src/quantspec/data/mlp_float.onnx``, the float ONNX model ``quantspec example`` writes as
``model.onnx``: ``x [1, 128] -> MatMul (128 x 256) -> Relu -> MatMul (256 x 10) -> y``, float32 weights
from a seeded normal distribution, opset 21 (IR version 10, which onnxruntime reads).

Run from the repository root with the test environment (the ``onnx`` package):
``.venv/bin/python tools/make_example_onnx.py``.  The script is deterministic.
"""

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "src" / "quantspec" / "data" / "mlp_float.onnx"


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(2026)
    w1 = (rng.standard_normal((128, 256)) / np.sqrt(128)).astype(np.float32)
    w2 = (rng.standard_normal((256, 10)) / np.sqrt(256)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "fc1.weight"], ["h"], name="fc1"),
         helper.make_node("Relu", ["h"], ["h_relu"], name="relu"),
         helper.make_node("MatMul", ["h_relu", "fc2.weight"], ["y"], name="fc2")],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(w1, "fc1.weight"), numpy_helper.from_array(w2, "fc2.weight")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], producer_name="quantspec-example")
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    OUT.write_bytes(build().SerializeToString())
    print(OUT)
