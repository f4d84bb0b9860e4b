"""The checker's table of the other quantization operators (quantspec.onnxmodels.qops) against the
operator schemas themselves: onnx.defs for the default domain, onnxruntime's contrib schemas for
com.microsoft.  The table cannot drift from them."""

from __future__ import annotations

import pytest

from refs import require

from quantspec.onnxmodels import qops
from quantspec.onnxmodels.report import RULES


def _types(strs) -> tuple[str, ...]:
    return tuple(sorted(s[len("tensor("):-1] for s in strs))


@pytest.mark.parametrize("row", qops.QOPS, ids=lambda r: r.op_type)
def test_default_domain_operators_match_onnx_defs(row):
    onnx = require("onnx")
    history = sorted({s.since_version for s in onnx.defs.get_all_schemas_with_history()
                      if s.name == row.op_type and s.domain == ""})
    assert tuple(history) == row.versions
    for version, types in row.types.items():
        schema = onnx.defs.get_schema(row.op_type, version)
        assert schema.since_version == version
        assert [(i.name, i.option == onnx.defs.OpSchema.FormalParameterOption.Optional) for i in schema.inputs] == \
            [(name, optional) for name, _, optional in row.inputs]
        constraints = {c.type_param_str: _types(c.allowed_type_strs) for c in schema.type_constraints}
        for i, (name, tp, _) in zip(schema.inputs, row.inputs):
            if i.type_str in constraints:
                assert i.type_str == tp and tuple(sorted(types[tp])) == constraints[tp], (version, name)
            else:   # a fixed type (the table may name it through a parameter of one type)
                assert types.get(tp, (tp,)) == _types([i.type_str]), (version, name)
        assert schema.outputs[0].type_str == row.output
        assert tuple(sorted(types[row.output])) == constraints[row.output]


def _contrib(name):
    require("onnxruntime")
    from onnxruntime.capi import _pybind_state as C

    (schema,) = [s for s in C.get_all_operator_schema() if s.domain == "com.microsoft" and s.name == name]
    return schema


def test_contrib_quantize_dequantize_match_onnxruntime():
    row = qops.CONTRIB_QDQ
    q, dq = _contrib("QuantizeLinear"), _contrib("DequantizeLinear")
    qc = {c.type_param_str: _types(c.allowed_type_strs) for c in q.type_constraints}
    dc = {c.type_param_str: _types(c.allowed_type_strs) for c in dq.type_constraints}
    assert [(i.name, i.typeStr) for i in q.inputs] == [("x", "T1"), ("y_scale", "T1"), ("y_zero_point", "T2")]
    assert tuple(sorted(row.q_x)) == tuple(sorted(row.q_scale)) == qc["T1"] and row.q_scale_is_x_type
    assert tuple(sorted(row.q_out)) == qc["T2"]
    assert [(i.name, i.typeStr) for i in dq.inputs] == [("x", "T1"), ("x_scale", "T2"), ("x_zero_point", "T1")]
    assert tuple(sorted(row.dq_x)) == dc["T1"] and tuple(sorted(row.dq_scale)) == dc["T2"]
    assert tuple(sorted(q.attributes)) == tuple(sorted(dq.attributes)) == row.q_attrs == row.dq_attrs == ("axis",)


def test_matmul_nbits_matches_onnxruntime():
    rule = qops.MATMUL_NBITS
    s = _contrib("MatMulNBits")
    assert [(i.name, i.typeStr) for i in s.inputs] == [(name, tp) for name, tp, _ in rule.inputs]
    assert {c.type_param_str: _types(c.allowed_type_strs) for c in s.type_constraints} == \
        {tp: tuple(sorted(types)) for tp, types in rule.types}
    assert set(s.attributes) == set(rule.attrs)
    assert "2, 4, 8" in s.attributes["bits"].description and "16" in s.attributes["block_size"].description


def test_rule_ids_are_documented():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "onnx-models.md").read_text()
    for rule in RULES:
        assert f"| `{rule}` |" in text


def test_the_model_half_loads_onnx_only_when_used():
    """``quantspec check model.tflite`` and ``import quantspec.onnx`` do not import the onnx package."""
    import subprocess
    import sys

    code = ("import sys, quantspec.onnx, quantspec.onnxmodels, quantspec.onnxmodels._cli; "
            "assert quantspec.onnxmodels.check_model is quantspec.onnxmodels.check_model; "
            "assert quantspec.onnxmodels.audit is quantspec.onnxmodels.audit; "
            "assert 'onnx' not in sys.modules and 'onnxruntime' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True)
    import quantspec.onnx

    with pytest.raises(AttributeError):
        quantspec.onnx.no_such_name
