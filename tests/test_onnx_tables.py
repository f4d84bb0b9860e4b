"""The ONNX opset table against onnx.defs, and pack/unpack against onnx.numpy_helper."""

import numpy as np
import pytest

from refs import require

import quantspec
from quantspec.dtypes import TABLE, qtype
from quantspec.onnx import opsets


def _allowed(schema, param):
    for tc in schema.type_constraints:
        if tc.type_param_str == param:
            return {t[len("tensor("):-1] for t in tc.allowed_type_strs}
    raise AssertionError(param)


def _input_types(schema, index):
    s = schema.inputs[index].type_str
    return {s[len("tensor("):-1]} if s.startswith("tensor(") else _allowed(schema, s)


@pytest.mark.parametrize("row", opsets.VERSIONS, ids=lambda r: f"v{r.version}")
def test_opset_table_matches_onnx_defs(row):
    defs = require("onnx.defs")
    q = defs.get_schema("QuantizeLinear", row.version)
    d = defs.get_schema("DequantizeLinear", row.version)
    assert q.since_version == row.version and d.since_version == row.version
    assert _input_types(q, 0) == set(row.q_x)
    assert _input_types(q, 1) == set(row.q_scale)
    assert (q.inputs[0].type_str == q.inputs[1].type_str) == row.q_scale_is_x_type
    assert _input_types(q, 2) == set(row.q_out)
    assert set(q.attributes) == set(row.q_attrs)
    assert _input_types(d, 0) == set(row.dq_x)
    assert _input_types(d, 1) == set(row.dq_scale)
    assert set(d.attributes) == set(row.dq_attrs)
    if "output_dtype" in d.attributes:
        assert _allowed(d, d.outputs[0].type_str) == set(row.dq_out)
    else:
        assert {t for t in _input_types(d, 1) if t != "float8e8m0"} == set(row.dq_out)


def test_every_version_and_no_other():
    defs = require("onnx.defs")
    found = {defs.get_schema("QuantizeLinear", v).since_version for v in range(10, 40)}
    assert found == {r.version for r in opsets.VERSIONS}


def test_type_numbers_match_onnx():
    onnx = require("onnx")
    for t in TABLE:
        assert onnx.helper.tensor_dtype_to_np_dtype(t.onnx) == t.dtype, t.name


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2", "float4e2m1", "float6e2m3", "float6e3m2",
                                  "int8", "uint8", "int16", "uint16", "int32", "float8e4m3fn", "float8e5m2fnuz",
                                  "float16", "bfloat16"])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 33])
def test_pack_matches_numpy_helper(name, n):
    nh = require("onnx.numpy_helper")
    t = qtype(name)
    rng = np.random.default_rng(n)
    if t.is_int:
        a = rng.integers(int(t.qmin), int(t.qmax), size=n, endpoint=True).astype(t.storage).astype(t.dtype)
    else:
        bits = rng.integers(0, 1 << min(t.bits, 16), size=n).astype(t.storage)
        a = bits.view(t.dtype)
    shape = (n,) if n % 3 else (n // 3, 3)
    a = a.reshape(shape)
    raw = nh.from_array(a).raw_data
    assert quantspec.onnx.pack(a) == raw
    back = quantspec.onnx.unpack(raw, name, shape)
    assert back.dtype == a.dtype and back.shape == a.shape and back.tobytes() == a.tobytes()


def test_pack_documented_example():
    import ml_dtypes

    # notes/onnx.md §2.7: [1, -2, 3] as int4 packs to e1 03
    assert quantspec.onnx.pack(np.array([1, -2, 3], ml_dtypes.int4)) == bytes([0xE1, 0x03])
