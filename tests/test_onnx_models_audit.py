"""quantspec.onnxmodels.audit: per-node counts against a direct comparison of onnxruntime's exposed
tensors with quantspec's compat modes (and, where it runs, onnx.reference itself), on a model made
by quantize_static and on models where onnxruntime departs from the spec: float16 QDQ, float8 with
saturate=0, int4 per-axis with an odd channel length."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from onnx_models import differing, model, nbits_model, node, onnx_api, run_exposing, static_quantized, tensor
from refs import require

from quantspec import onnx as qo
from quantspec._fastpath import jit
from quantspec.onnxmodels import audit, check_model


def qdq_nodes(path):
    onnx, _, _ = onnx_api()
    m = onnx.load(str(path))
    inits = {t.name: t for t in m.graph.initializer}
    return m, inits, [(k, n) for k, n in enumerate(m.graph.node) if n.op_type in ("QuantizeLinear", "DequantizeLinear")]


def direct(path, feeds, opset, ir=None):
    """Per node: (elements, onnxruntime != spec, onnxruntime != compat="onnxruntime"), from the tests'
    own onnxruntime run with the node's tensors exposed."""
    _, _, numpy_helper = onnx_api()
    m, inits, nodes = qdq_nodes(path)
    wanted = sorted({i for _, n in nodes for i in list(n.input)[:3] + [n.output[0]] if i and i not in inits
                     and i not in feeds})
    got = {**feeds, **run_exposing(path, wanted, feeds, ir=ir)}
    with jit.reference_only():     # the numpy reference kernels (the audit may take the fast path: the same bytes)
        return _direct(nodes, inits, got, opset)


def _direct(nodes, inits, got, opset):
    _, _, numpy_helper = onnx_api()
    value = {**{k: numpy_helper.to_array(t) for k, t in inits.items()}, **got}
    out = {}
    for k, n in nodes:
        attrs = {a.name: a.i for a in n.attribute}
        x, s = value[n.input[0]], value[n.input[1]]
        z = value[n.input[2]] if len(n.input) > 2 and n.input[2] else None
        f = qo.quantize_linear if n.op_type == "QuantizeLinear" else qo.dequantize_linear
        spec = f(x, s, z, opset=opset, **attrs)
        ort = f(x, s, z, opset=opset, compat="onnxruntime", **attrs)
        y = value[n.output[0]]
        out[k] = (y.size, differing(y, spec), differing(y, ort), x, s, z, attrs, spec)
    return out


def reference_outputs(op, opset, x, s, z, attrs):
    """onnx.reference's output for one node (ReferenceEvaluator on a one-node model)."""
    onnx, helper, numpy_helper = onnx_api()
    ref = require("onnx.reference")
    inits = [numpy_helper.from_array(np.asarray(s), "s")] + ([numpy_helper.from_array(np.asarray(z), "z")]
                                                             if z is not None else [])
    ins = ["x", "s"] + (["z"] if z is not None else [])
    from quantspec.dtypes import qtype
    m = model([node(op, ins, ["y"], **attrs)], [("x", qtype(x.dtype).name, list(x.shape))], [("y", None, None)],
              inits, opset=opset)
    with np.errstate(invalid="ignore", over="ignore"):   # its division of huge values and int32 cast of inf and NaN
        return np.asarray(ref.ReferenceEvaluator(m).run(None, {"x": x})[0])


def specials(shape, rng, scale=1.0):
    x = (rng.standard_normal(shape) * scale).astype(np.float32)
    flat = x.reshape(-1)
    flat[:6] = [np.inf, -np.inf, np.nan, 3e9, -1e38, 0.5]
    return x


def test_quantize_static_qdq_counts_equal_a_direct_comparison(tmp_path):
    path = static_quantized(tmp_path, "QDQ", per_channel=True)
    rng = np.random.default_rng(5)
    feeds = {"x": specials((1, 3, 8, 8), rng)}
    report = audit(path, feeds)
    assert report.ran and report.confirmed and report.onnxruntime == "1.31.1"
    want = direct(path, feeds, opset=13)
    assert {n.node_index for n in report.nodes} == set(want)
    for n in report.nodes:
        elements, ort_spec, ort_compat, x, s, z, attrs, spec = want[n.node_index]
        assert (n.elements, n.onnxruntime_vs_spec, n.onnxruntime_vs_compat) == (elements, ort_spec, ort_compat) == \
            (elements, ort_spec, 0), n
        if n.op_type == "QuantizeLinear":    # onnx.reference itself, where it has the operator
            ref = reference_outputs("QuantizeLinear", 13, x, s, z, attrs)
            assert n.reference_vs_spec == differing(ref, spec)
    first_q = report.node(3)
    assert first_q.op_type == "QuantizeLinear" and first_q.reference_vs_spec == 2   # +inf and 3e9: qmin in the reference
    assert {r.key for r in first_q.risks} == {"inf-to-int", "huge-to-int"}
    assert report.ok and not report.departures


def f16_qdq(path):
    inits = [tensor("s", np.float16(0.0371)), tensor("z", np.uint8(128))]
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"]), node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    onnx, _, _ = onnx_api()
    onnx.save(model(nodes, [("x", "float16", [64, 64])], [("y", "float16", [64, 64])], inits, opset=21, ir=10),
              str(path))
    return path


def test_float16_qdq_model_departs_at_the_quantize_node(tmp_path):
    path = f16_qdq(tmp_path / "f16.onnx")
    feeds = {"x": (np.random.default_rng(2).standard_normal((64, 64)) * 3).astype(np.float16)}
    report = audit(path, feeds)
    want = direct(path, feeds, opset=21)
    q, dq = report.node(0), report.node(1)
    assert q.onnxruntime_vs_spec == want[0][1] > 0 and q.onnxruntime_vs_compat == 0
    assert dq.onnxruntime_vs_spec == want[1][1] == 0 and dq.onnxruntime_vs_compat == 0
    assert "f16-quotient" in {r.key for r in q.risks}
    assert report.departures == (q,) and report.confirmed and not report.ok
    # onnx.reference divides in float16 like the spec
    _, _, _, x, s, z, attrs, spec = want[0]
    assert q.reference_vs_spec == differing(reference_outputs("QuantizeLinear", 21, x, s, z, attrs), spec) == 0
    assert f"departed from the spec at 1 node(s), {q.onnxruntime_vs_spec} element(s)" in report.render()


def float8_sat0(path):
    e4, e5 = np.zeros((), ml_dtypes.float8_e4m3fn), np.zeros((), ml_dtypes.float8_e5m2)
    inits = [tensor("s", np.float32(1.0)), tensor("z4", e4), tensor("z5", e5)]
    nodes = [node("QuantizeLinear", ["x", "s", "z4"], ["q4"], saturate=0),
             node("DequantizeLinear", ["q4", "s", "z4"], ["y4"]),
             node("QuantizeLinear", ["x", "s", "z5"], ["q5"], saturate=0),
             node("DequantizeLinear", ["q5", "s", "z5"], ["y5"])]
    onnx, _, _ = onnx_api()
    onnx.save(model(nodes, [("x", "float", [4, 16])], [("y4", "float", [4, 16]), ("y5", "float", [4, 16])], inits,
                    opset=21), str(path))          # onnx's current IR version: newer than onnxruntime 1.31 reads
    return path


def test_float8_saturate_0(tmp_path):
    path = float8_sat0(tmp_path / "f8.onnx")
    x = np.random.default_rng(3).uniform(-500, 500, (4, 16)).astype(np.float32)
    x[0, :5] = [480, 490, -495.5, 61440, -65000]
    x[1, 0] = np.nan
    report = audit(path, {"x": x})
    assert any("IR version" in note for note in report.notes)
    want = direct(path, {"x": x}, opset=21, ir=10)
    e4m3, e5m2 = report.node(0), report.node(2)
    in_window = int(np.count_nonzero((np.abs(x) >= 480) & (np.abs(x) < 496)))
    assert e4m3.onnxruntime_vs_spec == want[0][1] == in_window == 3
    assert e5m2.onnxruntime_vs_spec == want[2][1] == 3      # 61440, -65000 and the NaN's encoding
    assert all(n.onnxruntime_vs_compat == 0 for n in report.nodes) and report.confirmed
    assert {r.key for r in e4m3.risks} == {"e4m3fn-sat0-480"}
    assert {r.key for r in e5m2.risks} == {"e5m2-sat0-61440", "e5m2-nan"}
    assert e4m3.first["index"] == [0, 0] and "0x7e" in e4m3.first["onnxruntime"] and "0x7f" in e4m3.first["spec"]


def int4_odd_axis(path):
    onnx, _, _ = onnx_api()
    inits = [tensor("s", np.array([0.5, 0.25], np.float32)), tensor("z", np.zeros(2, ml_dtypes.int4))]
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=0), node("DequantizeLinear", ["q", "s", "z"], ["y"],
                                                                          axis=0)]
    onnx.save(model(nodes, [("x", "float", [2, 9])], [("y", "float", [2, 9])], inits, opset=21, ir=10), str(path))
    return path


def test_int4_with_an_odd_channel_length(tmp_path):
    path = int4_odd_axis(tmp_path / "int4.onnx")
    x = np.random.default_rng(4).standard_normal((2, 9)).astype(np.float32)
    x[0, 8] = x[1, 0] = x[0, 3] = np.inf          # two at the channels' odd tail / head, one in the middle
    report = audit(path, {"x": x})
    want = direct(path, {"x": x}, opset=21)
    q = report.node(0)
    assert q.onnxruntime_vs_spec == want[0][1] == 2 and q.onnxruntime_vs_compat == 0
    (risk,) = [r for r in q.risks if r.key == "int4-position"]
    assert risk.runtimes == ("onnxruntime",) and "2 position(s)" in risk.when
    assert q.reference_vs_spec == 3               # onnx.reference: every +inf to qmin
    assert report.departures == (q,)


def test_static_audit_runs_nothing(tmp_path):
    path = int4_odd_axis(tmp_path / "int4.onnx")
    report = audit(path, run=False)
    assert not report.ran and report.onnxruntime is None and not report.ok
    q = report.node(0)
    assert q.elements is None and q.onnxruntime_vs_spec is None
    assert {"inf-to-int", "huge-to-int", "int4-position"} <= {r.key for r in q.risks}
    assert "static audit" in report.render()


def test_random_inputs_are_seeded(tmp_path):
    path = f16_qdq(tmp_path / "f16.onnx")
    a, b, c = audit(path, seed=1), audit(path, seed=1), audit(path, seed=2)
    assert a.inputs == "random inputs (seed 1)"
    assert a.to_json()["nodes"] == b.to_json()["nodes"]
    assert a.node(0).onnxruntime_vs_spec > 0 and c.node(0).onnxruntime_vs_spec > 0


def test_bad_inputs_are_refused(tmp_path):
    from quantspec.errors import InvalidArgumentError

    path = f16_qdq(tmp_path / "f16.onnx")
    with pytest.raises(InvalidArgumentError, match="inputs"):
        audit(path, {"y": np.zeros((64, 64), np.float16)})
    with pytest.raises(InvalidArgumentError, match="float16"):
        audit(path, {"x": np.zeros((64, 64), np.float32)})
    with pytest.raises(InvalidArgumentError, match="could not run"):
        audit(path, {"x": np.zeros((3, 3), np.float16)})


def test_checker_and_audit_agree_on_what_is_refused(tmp_path):
    """The spec refuses a scalar zero point with a per-axis scale; onnx.reference broadcasts it."""
    inits = [tensor("s", np.array([1.0, 2.0, 4.0], np.float32)), tensor("z", np.uint8(5))]
    m = model([node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)], [("x", "float", [2, 3])],
              [("y", "uint8", [2, 3])], inits, opset=21, ir=10)
    (v,) = check_model(m).violations
    assert v.rule == "zero-point-shape"
    (q,) = audit(m, run=False).nodes
    assert "per-axis-scalar-zp" in {r.key for r in q.risks}


@pytest.mark.parametrize("symmetric", [True, False], ids=["symmetric", "asymmetric"])
def test_matmul_nbits_qdq_model(tmp_path, symmetric):
    """A weight-only model: its DequantizeLinear (int4 blocks, some scales negative or zero) runs
    alone in onnxruntime, and equals the node's output inside the whole model."""
    path = nbits_model(tmp_path, symmetric)
    feeds = {"x": np.random.default_rng(6).standard_normal((2, 64)).astype(np.float32)}
    report = audit(path)                      # no inputs needed
    assert report.inputs == "the nodes' constant inputs" and report.ok
    want = direct(path, feeds, opset=21)
    (n,) = report.nodes
    assert (n.elements, n.onnxruntime_vs_spec, n.onnxruntime_vs_compat, n.reference_vs_spec) == \
        (want[n.node_index][0], want[n.node_index][1], 0, 0) == (2560, 0, 0, 0)


# ------------------------------------------------------------------------------------------------
# the static audit is sound: every departure a run shows was announced by a risk naming that runtime
# ------------------------------------------------------------------------------------------------

def one_q(path, x_type, scale, zp=None, opset=21, shape=(4, 9), **attrs):
    onnx, _, _ = onnx_api()
    inits = [tensor("s", scale)] + ([tensor("z", zp)] if zp is not None else [])
    ins = ["x", "s"] + (["z"] if zp is not None else [])
    m = model([node("QuantizeLinear", ins, ["y"], **attrs)], [("x", x_type, list(shape))], [("y", None, None)], inits,
              opset=opset, ir=10)
    onnx.save(m, str(path))
    return path


NODES = {
    "int8": dict(x_type="float", scale=np.float32(0.5), zp=np.int8(0)),
    "int8-negative-zp": dict(x_type="float", scale=np.float32(0.5), zp=np.int8(-3)),
    "f16-uint8": dict(x_type="float16", scale=np.float16(0.0371), zp=np.uint8(128)),
    "int4-axis0-odd": dict(x_type="float", scale=np.full(4, 0.5, np.float32), zp=np.zeros(4, ml_dtypes.int4), axis=0),
    "int4-axis1": dict(x_type="float", scale=np.full(9, 0.5, np.float32), zp=np.zeros(9, ml_dtypes.int4), axis=1),
    "uint4-even-tensor": dict(x_type="float", scale=np.float32(0.5), zp=np.asarray(3, ml_dtypes.uint4), shape=(4, 8)),
    "int2": dict(x_type="float", scale=np.float32(0.5), zp=np.asarray(0, ml_dtypes.int2), opset=25),
    "int8-blocked-axis0": dict(x_type="float", scale=np.full((2, 9), 0.5, np.float32), zp=np.zeros((2, 9), np.int8),
                               axis=0, block_size=2),
    "int8-blocked-last": dict(x_type="float", scale=np.full((4, 3), 0.5, np.float32), zp=np.zeros((4, 3), np.int8),
                              axis=1, block_size=3),
    "e4m3fn-sat0": dict(x_type="float", scale=np.float32(1), zp=np.zeros((), ml_dtypes.float8_e4m3fn), saturate=0),
    "e5m2-sat0": dict(x_type="float", scale=np.float32(1), zp=np.zeros((), ml_dtypes.float8_e5m2), saturate=0),
    "e5m2": dict(x_type="float", scale=np.float32(1), zp=np.zeros((), ml_dtypes.float8_e5m2)),
    "f16-e4m3fn": dict(x_type="float16", scale=np.float16(1.548828125), zp=np.zeros((), ml_dtypes.float8_e4m3fn)),
    "precision-f16": dict(x_type="float", scale=np.float32(1.6666924953460693), zp=np.uint8(0), opset=23,
                          precision=10),
}


def adversarial(shape, x_type):
    rng = np.random.default_rng(11)
    fills = [np.inf, -np.inf, np.nan, 3e9, -3e9, 485.0, -490.0, 62000.0, 117.6875]
    dtype = np.float16 if x_type == "float16" else np.float32
    with np.errstate(over="ignore"):       # 3e9 and 62000 are inf in float16
        out = [np.full(shape, v).astype(dtype) for v in fills]
    out.append((rng.standard_normal(shape) * 60).astype(dtype))
    out.append(rng.uniform(0, 255 * 1.67, shape).astype(dtype))
    return out


@pytest.mark.parametrize("name", sorted(NODES))
def test_static_risks_name_the_runtimes_that_depart(tmp_path, name):
    spec = dict(NODES[name])
    shape = spec.pop("shape", (4, 9))
    path = one_q(tmp_path / f"{name}.onnx", shape=shape, **spec)
    totals = {"onnxruntime_vs_spec": 0, "reference_vs_spec": 0}
    risks = None
    for x in adversarial(shape, spec["x_type"]):
        (n,) = audit(path, {"x": x}).nodes
        assert n.onnxruntime_vs_compat == 0 and not n.errors, n
        for k in totals:
            totals[k] += getattr(n, k)
        risks = n.risks
    who = {r for risk in risks for r in risk.runtimes}
    # the corpus meets every risk's condition: the runtimes the risks name are exactly those that departed
    assert who == {k.split("_")[0] for k, v in totals.items() if v}, (name, totals, risks)
    plain = [r for r in risks if r.key == "int4-position"]
    if name == "int4-axis0-odd":       # 4 channels of 9: each has one odd head or tail element
        assert "4 position(s)" in plain[0].when and totals["onnxruntime_vs_spec"] > 0
    if name in ("uint4-even-tensor", "int8", "int8-blocked-last"):   # MLAS only: +inf, huge and NaN as the spec
        assert totals["onnxruntime_vs_spec"] == 0 and "onnxruntime" not in who


def test_contrib_int16_qdq_model(tmp_path):
    """quantize_static with int16 activations in onnxruntime's com.microsoft QuantizeLinear /
    DequantizeLinear: checked, and audited node by node like the default domain's."""
    path = static_quantized(tmp_path, "QDQ", per_channel=True, contrib_int16=True)
    assert check_model(path).ok
    feeds = {"x": specials((1, 3, 8, 8), np.random.default_rng(8))}
    report = audit(path, feeds)
    assert {n.domain for n in report.nodes} == {"com.microsoft"} and report.ok
    want = direct(path, feeds, opset=21)
    assert {n.node_index: (n.elements, n.onnxruntime_vs_spec, n.onnxruntime_vs_compat) for n in report.nodes} == \
        {k: (v[0], v[1], v[2]) for k, v in want.items()}
    assert any(n.reference_vs_spec for n in report.nodes)       # the ±inf and huge inputs, in onnx.reference


def _weight_only(path, broken: bool):
    """x @ DequantizeLinear(W) then ReduceMean: a weight-only model whose one QDQ node is on a constant.
    ``broken``: the ReduceMean takes its axes as an attribute, which ReduceMean-18 and later no longer
    have, so onnxruntime refuses to load the model (as it refuses onnxruntime's own MatMulNBits QDQ
    output of some models)."""
    onnx, _, _ = onnx_api()
    w = np.arange(-12, 12, dtype=np.int8).reshape(4, 6)
    reduce = node("ReduceMean", ["y"], ["out"], axes=[1]) if broken else node("ReduceMean", ["y", "axes"], ["out"])
    m = model([node("DequantizeLinear", ["w", "s"], ["wf"]), node("MatMul", ["x", "wf"], ["y"]), reduce],
              [("x", "float", [2, 4])], [("out", "float", None)],
              [tensor("w", w), tensor("s", np.float32(0.5)), tensor("axes", np.array([1], np.int64))])
    onnx.save(m, str(path))
    return path


def test_a_model_onnxruntime_cannot_load_is_an_error_not_a_pass(tmp_path, capsys):
    """Its DequantizeLinear runs alone in onnxruntime and matches the spec, but the model does not
    load: the audit says so (exit 2), never that onnxruntime computed every node as the spec does."""
    require("onnxruntime")
    from quantspec.cli import main
    from quantspec.errors import RuntimeUnsupportedError

    bad = _weight_only(tmp_path / "bad.onnx", broken=True)
    with pytest.raises(RuntimeUnsupportedError, match="cannot load it"):
        audit(str(bad))
    assert main(["audit", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cannot load it" in err and "Traceback" not in err
    assert audit(str(bad), run=False).nodes                # the static audit needs no onnxruntime load
    good = _weight_only(tmp_path / "good.onnx", broken=False)
    assert audit(str(good)).ok


def test_given_inputs_run_the_whole_model_even_when_every_node_is_on_a_constant(tmp_path):
    """``audit(model, inputs)`` of a weight-only model runs the model on the inputs (they are checked
    against the model, and a model that fails on them is an error), not only the weight nodes alone."""
    require("onnxruntime")
    from quantspec.errors import QuantSpecError

    good = _weight_only(tmp_path / "good.onnx", broken=False)
    report = audit(str(good), {"x": np.ones((2, 4), np.float32)})
    assert report.ok and any("whole model ran on the given inputs" in n for n in report.notes)
    with pytest.raises(QuantSpecError):
        audit(str(good), {"x": np.ones((3, 5), np.float32)})      # the wrong shape for the model
