"""The 27 QuantizeLinear / DequantizeLinear backend node cases of onnx 1.23, compared bit-exactly.

onnx 1.23 ships no node test data on disk; ``load_model_tests(kind="node")`` builds the cases in
memory (notes/onnx.md §4).  The runner's own comparison uses a tolerance (rtol 1e-3); here every
output is compared byte for byte, dtype included, with quantspec in spec mode (and in reference
mode, which must reproduce onnx.reference's expected outputs too).
"""

import functools

import numpy as np
import pytest

from refs import require

import quantspec

EXPECTED_COUNT = 27


@functools.lru_cache(maxsize=1)
def _cases():
    require("onnx")
    import warnings

    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = [t for t in load_model_tests(kind="node")
                 if "quantizelinear" in t.name and "dynamic" not in t.name]
    return {t.name: t for t in cases}


def _arr(a):
    import onnx
    from onnx import numpy_helper

    return np.asarray(numpy_helper.to_array(a) if isinstance(a, onnx.TensorProto) else a)


NAMES = [
    "test_dequantizelinear", "test_dequantizelinear_axis", "test_dequantizelinear_blocked",
    "test_dequantizelinear_e4m3fn", "test_dequantizelinear_e4m3fn_float16", "test_dequantizelinear_e4m3fn_zero_point",
    "test_dequantizelinear_e5m2", "test_dequantizelinear_float4e2m1", "test_dequantizelinear_int16",
    "test_dequantizelinear_int2", "test_dequantizelinear_int4", "test_dequantizelinear_uint16",
    "test_dequantizelinear_uint2", "test_dequantizelinear_uint4",
    "test_quantizelinear", "test_quantizelinear_axis", "test_quantizelinear_blocked_asymmetric",
    "test_quantizelinear_blocked_symmetric", "test_quantizelinear_e4m3fn", "test_quantizelinear_e5m2",
    "test_quantizelinear_float4e2m1", "test_quantizelinear_int16", "test_quantizelinear_int2",
    "test_quantizelinear_int4", "test_quantizelinear_uint16", "test_quantizelinear_uint2", "test_quantizelinear_uint4",
]


def test_the_27_cases_are_there():
    assert sorted(_cases()) == sorted(NAMES)
    assert len(NAMES) == EXPECTED_COUNT


@pytest.mark.parametrize("compat", ["spec", "reference"])
@pytest.mark.parametrize("name", NAMES)
def test_backend_case_bit_exact(name, compat):
    case = _cases()[name]
    model = case.model
    node = model.graph.node[0]
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    inputs, outputs = case.data_sets[0]
    args = [_arr(a) for a in inputs]
    expected = _arr(outputs[0])
    fn = quantspec.onnx.quantize_linear if node.op_type == "QuantizeLinear" else quantspec.onnx.dequantize_linear
    got = fn(*args, opset=opset, compat=compat, **attrs)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert got.tobytes() == expected.tobytes(), (got, expected)
