"""``quantspec convert MODEL.onnx OUT.onnx --scheme int4-bN|uint4-bN-asym --format matmulnbits``, the
audit of com.microsoft MatMulNBits nodes, the checker's MatMulNBits shapes, and the opset upgrade
without the weights.

The converted models are compared with what onnxruntime's own ``MatMulNBitsQuantizer`` (QOperator
format, its default RTN quantizer) writes for the same model: every initializer, every node (its
attributes included), the opset imports, byte for byte; and both run in onnxruntime on one input give
the same output bits.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from onnx_models import model as make_model
from onnx_models import node, onnx_api, tensor
from refs import require

from quantspec._fastpath import jit
from quantspec.checkpoint.schemes import SCHEMES
from quantspec.cli import main
from quantspec.errors import InvalidArgumentError, RangeError
from quantspec.onnxmodels import audit, check_model, convert_model, nbits
from quantspec.onnxmodels import converter
from quantspec.onnxmodels.encoder import quantize_weight
from quantspec.onnxmodels.weights import IN_OUT


def ort_quantized(m, block: int, symmetric: bool):
    """The model as onnxruntime's MatMulNBitsQuantizer (QOperator, RTN) writes it."""
    onnx = require("onnx")
    require("onnxruntime")
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    from onnxruntime.quantization.quant_utils import QuantFormat

    copy = onnx.ModelProto()
    copy.CopyFrom(m)
    logging.disable(logging.INFO)
    try:
        q = MatMulNBitsQuantizer(copy, block_size=block, is_symmetric=symmetric, quant_format=QuantFormat.QOperator)
        q.process()
    finally:
        logging.disable(logging.NOTSET)
    return q.model.model


def scheme_name(block: int, symmetric: bool) -> str:
    return f"int4-b{block}" if symmetric else f"uint4-b{block}-asym"


def mlp(shapes, opset: int, seed: int = 0, activation_matmul: bool = True, scale: float = 1.0):
    """x -> MatMul(W0) -> Relu -> MatMul(W1) -> ... [-> MatMul(y, x2), whose B is an activation]."""
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"
    for i, (k, n) in enumerate(shapes):
        w = (rng.standard_normal((k, n)) * scale).astype(np.float32)
        if i == 0:
            w[: min(k, 16)] = 0          # an all-zero block
        inits.append(tensor(f"W{i}", w))
        nodes.append(node("MatMul", [x, f"W{i}"], [f"m{i}"], **({"name": f"mm{i}"} if i % 2 == 0 else {})))
        nodes.append(node("Relu", [f"m{i}"], [f"r{i}"]))
        x = f"r{i}"
    n_last = shapes[-1][1]
    inputs = [("x", "float", [3, shapes[0][0]])]
    if activation_matmul:
        nodes.append(node("MatMul", [x, "x2"], ["y"], name="activations"))
        inputs.append(("x2", "float", [n_last, 5]))
        out = ("y", "float", [3, 5])
    else:
        out = (x, "float", [3, n_last])
    return make_model(nodes, inputs, [out], inits, opset=opset, ir=10)


def feeds_for(m, seed=1):
    rng = np.random.default_rng(seed)
    out = {}
    for i in m.graph.input:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        out[i.name] = rng.standard_normal(shape).astype(np.float32)
    return out


def run(m, feeds):
    ort = require("onnxruntime")
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def assert_same_model(ours, theirs):
    _, _, numpy_helper = onnx_api()
    a = {t.name: t for t in ours.graph.initializer}
    b = {t.name: t for t in theirs.graph.initializer}
    assert sorted(a) == sorted(b)
    for name in a:
        assert a[name].data_type == b[name].data_type and list(a[name].dims) == list(b[name].dims), name
        x, y = numpy_helper.to_array(a[name]), numpy_helper.to_array(b[name])
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    assert [n.SerializeToString() for n in ours.graph.node] == [n.SerializeToString() for n in theirs.graph.node]
    assert sorted((o.domain, o.version) for o in ours.opset_import) == \
        sorted((o.domain, o.version) for o in theirs.opset_import)
    assert [i.SerializeToString() for i in ours.graph.input] == [i.SerializeToString() for i in theirs.graph.input]
    assert [o.SerializeToString() for o in ours.graph.output] == [o.SerializeToString() for o in theirs.graph.output]
    assert ours.ir_version == theirs.ir_version


CASES = [
    # (shapes of the weights, block, opset)
    ([(64, 32), (32, 16)], 32, 17),
    ([(70, 33), (33, 9)], 16, 21),         # K not a multiple of the block; odd K
    ([(41, 7), (7, 3)], 32, 17),           # odd K in the second block of a 2-block slice; K < block
    ([(65, 5), (5, 4)], 32, 21),           # odd K whose last element starts a 2-block slice
    ([(300, 40), (40, 40), (40, 6)], 128, 17),
    ([(96, 20)], 64, 21),
    ([(256, 24), (24, 8)], 256, 17),
]


@pytest.mark.parametrize("symmetric", [True, False], ids=["int4", "uint4-asym"])
@pytest.mark.parametrize("shapes,block,opset", CASES, ids=[f"case{i}" for i in range(len(CASES))])
def test_matmulnbits_equals_the_matmulnbits_quantizer(tmp_path, shapes, block, opset, symmetric):
    onnx = require("onnx")
    m = mlp(shapes, opset, seed=len(shapes) + block)
    src = tmp_path / "m.onnx"
    onnx.save(m, str(src))
    report = convert_model(src, tmp_path / "q.onnx", scheme_name(block, symmetric), format="matmulnbits")
    ours = onnx.load(str(tmp_path / "q.onnx"))
    theirs = ort_quantized(m, block, symmetric)
    assert_same_model(ours, theirs)
    assert [n.op_type for n in ours.graph.node].count("MatMulNBits") == len(shapes)
    assert any(n.op_type == "MatMul" and n.input[1] == "x2" for n in ours.graph.node)   # B an activation: kept
    assert report.opset_from == report.opset == opset          # MatMulNBits needs no default-domain upgrade
    feeds = feeds_for(m)
    (y_ours,), (y_theirs,) = run(ours, feeds), run(theirs, feeds)
    assert y_ours.dtype == np.float32 and y_ours.tobytes() == y_theirs.tobytes()
    # the codes round-trip as the operator defines them: close to the float weights
    w0 = onnx.numpy_helper.to_array(m.graph.initializer[0])
    b = {t.name: onnx.numpy_helper.to_array(t) for t in ours.graph.initializer}
    deq = nbits.dequantize(b["W0_Q4"], b["W0_scales"], b.get("W0_zero_points"), *w0.shape, 4, block)
    assert deq.shape == w0.shape and np.max(np.abs(deq - w0)) <= np.max(np.abs(w0)) / 7 + 1e-6


def test_the_zero_point_is_added_before_rounding(tmp_path):
    """MatMulNBits' quantizer rounds ``v / scale + 8``: a block [8, 0.5, ...] has scale -1 and 0.5
    becomes -0.5 + 8 = 7.5 -> 8, where the QDQ quantizer (the checkpoint scheme's codes) rounds -0.5
    to -1 (code 7).  The converter writes onnxruntime's 8."""
    onnx = require("onnx")
    w = np.zeros((32, 2), np.float32)
    w[0, :] = 8.0
    w[1, :] = 0.5
    w[2:, 1] = np.linspace(-3, 3, 30, dtype=np.float32)
    m = make_model([node("MatMul", ["x", "W"], ["y"])], [("x", "float", [1, 32])], [("y", "float", [1, 2])],
                   [tensor("W", w)], opset=17, ir=10)
    onnx.save(m, str(tmp_path / "m.onnx"))
    convert_model(tmp_path / "m.onnx", tmp_path / "q.onnx", "int4-b32", format="matmulnbits")
    ours = onnx.load(str(tmp_path / "q.onnx"))
    assert_same_model(ours, ort_quantized(m, 32, True))
    b = onnx.numpy_helper.to_array(next(t for t in ours.graph.initializer if t.name == "W_Q4"))
    assert (b[0, 0, 0] >> 4) == 8                                  # element 1 of column 0
    qdq = quantize_weight(SCHEMES["int4-b32"], w, "float", IN_OUT, "W")
    assert int(qdq.codes[1, 0]) + 8 == 7                           # what the QDQ rounding would have written


def test_random_weights_and_shapes_equal_the_quantizer():
    """nbits.pack against MLAS on many shapes (the arrays only; the models are compared above)."""
    require("onnx")
    rng = np.random.default_rng(7)
    for trial in range(24):
        block = int(rng.choice([16, 32, 64, 128]))
        k, n = int(rng.integers(1, 200)), int(rng.integers(1, 12))
        w = (rng.standard_normal((k, n)) * float(rng.choice([1e-3, 1.0, 40.0]))).astype(np.float32)
        if trial % 3 == 0:
            w = (np.round(w * 4) / 4).astype(np.float32)           # many exact ties
        for symmetric in (True, False):
            s = SCHEMES[scheme_name(block, symmetric)]
            m = make_model([node("MatMul", ["x", "W"], ["y"])], [("x", "float", [1, k])], [("y", "float", [1, n])],
                           [tensor("W", w)], opset=17, ir=10)
            theirs = {t.name: onnx_api()[2].to_array(t) for t in ort_quantized(m, block, symmetric).graph.initializer}
            q = quantize_weight(s, w, "float", IN_OUT, "W")
            p = nbits.pack(s, w, q.scale, q.zero_point)
            assert p.b.shape == theirs["W_Q4"].shape and p.b.tobytes() == theirs["W_Q4"].tobytes(), (k, n, block)
            assert p.scales.tobytes() == theirs["W_scales"].tobytes()
            if not symmetric:
                assert p.zero_points.tobytes() == theirs["W_zero_points"].tobytes()
                assert p.zero_points.shape == theirs["W_zero_points"].shape
            # the fused kernel (a slab of columns at a time, in threads) writes the same arrays
            assert jit.enabled()
            f = nbits.quantize(s, w, IN_OUT, "W", workers=2)
            assert f.b.shape == p.b.shape and f.b.tobytes() == p.b.tobytes(), (k, n, block)
            assert f.scales.tobytes() == p.scales.tobytes()
            assert (f.zero_points is None) == symmetric
            if not symmetric:
                assert f.zero_points.tobytes() == p.zero_points.tobytes()
            assert f.attributes == p.attributes
            assert f.rel_rms == pytest.approx(p.rel_rms, rel=1e-9, abs=1e-30)
            assert f.max_abs == p.max_abs


def test_the_fused_kernel_in_slabs_and_threads_equals_the_quantizer(monkeypatch):
    """Many slabs of columns (the slab size made small), on two threads, with ties, zeros, signed
    zeros, subnormals and large values: the same arrays as MLAS."""
    require("onnx")
    monkeypatch.setattr(nbits, "SLAB_BYTES", 1)       # one tile of 64 columns per slab: three slabs
    rng = np.random.default_rng(11)
    k, n = 97, 150
    w = (np.round(rng.standard_normal((k, n)) * 8) / 8).astype(np.float32)
    w[:, 0] = 0
    w[:, 1] = -0.0
    w[::3, 2] = np.float32(1e-40)
    w[5, 3] = 3e30
    w[:, 4] = np.linspace(-7.5, 7.5, k, dtype=np.float32)
    for symmetric in (True, False):
        s = SCHEMES[scheme_name(32, symmetric)]
        m = make_model([node("MatMul", ["x", "W"], ["y"])], [("x", "float", [1, k])], [("y", "float", [1, n])],
                       [tensor("W", w)], opset=17, ir=10)
        theirs = {t.name: onnx_api()[2].to_array(t) for t in ort_quantized(m, 32, symmetric).graph.initializer}
        f = nbits.quantize(s, w, IN_OUT, "W", workers=2)
        assert f.b.tobytes() == theirs["W_Q4"].tobytes()
        assert f.scales.tobytes() == theirs["W_scales"].tobytes()
        if not symmetric:
            assert f.zero_points.tobytes() == theirs["W_zero_points"].tobytes()
    w[60, 130] = np.nan
    with pytest.raises(RangeError, match=r"NaN or infinity \(at \[60, 130\]\)"):
        nbits.quantize(SCHEMES["int4-b32"], w, IN_OUT, "W", workers=2)


def test_other_weights_are_kept_with_the_reason(tmp_path):
    onnx = require("onnx")
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    nodes = [node("MatMul", ["x", "W"], ["a"]), node("Gemm", ["a", "G"], ["b"]),
             node("MatMul", ["x", "S"], ["c"]), node("Add", ["c", "S2"], ["d"]),
             node("Cast", ["x"], ["x16"], to=10), node("MatMul", ["x16", "H"], ["e"])]
    inits = [tensor("W", f(32, 16)), tensor("G", f(16, 8)), tensor("S", f(32, 32)), tensor("S2", f(32, 32)),
             tensor("H", f(32, 4).astype(np.float16))]
    m = make_model(nodes, [("x", "float", [2, 32])], [("b", "float", None), ("d", "float", None), ("e", "float16", None)],
                   inits, opset=17, ir=10)
    onnx.save(m, str(tmp_path / "m.onnx"))
    report = convert_model(tmp_path / "m.onnx", tmp_path / "q.onnx", "int4-b16", format="matmulnbits")
    by = {w.name: w for w in report.tensors}
    assert by["W"].scheme == "int4-b16" and by["W"].layout == "MatMulNBits"
    assert by["S"].scheme == "int4-b16"
    assert by["G"].scheme == "keep" and "MatMul weights (B) only" in by["G"].reason
    assert by["H"].scheme == "keep" and "float32" in by["H"].reason
    out = onnx.load(str(tmp_path / "q.onnx"))
    assert [n.op_type for n in out.graph.node] == ["MatMulNBits", "Gemm", "MatMulNBits", "Add", "Cast", "MatMul"]
    assert check_model(tmp_path / "q.onnx").ok


def test_schemes_without_a_matmulnbits_form_are_refused(tmp_path):
    onnx = require("onnx")
    m = mlp([(32, 8)], 17, activation_matmul=False)
    onnx.save(m, str(tmp_path / "m.onnx"))
    with pytest.raises(InvalidArgumentError, match="no MatMulNBits form"):
        convert_model(tmp_path / "m.onnx", tmp_path / "q.onnx", "int8", format="matmulnbits")
    with pytest.raises(InvalidArgumentError, match="format"):
        convert_model(tmp_path / "m.onnx", tmp_path / "q.onnx", "int4-b32", format="qoperator")
    assert not (tmp_path / "q.onnx").exists()


def test_cli_format_matmulnbits(tmp_path, capsys):
    onnx = require("onnx")
    m = mlp([(70, 33), (33, 9)], 17)
    onnx.save(m, str(tmp_path / "m.onnx"))
    assert main(["convert", str(tmp_path / "m.onnx"), str(tmp_path / "cli.onnx"), "--scheme", "uint4-b16-asym",
                 "--format", "matmulnbits", "--quiet"]) == 0
    assert_same_model(onnx.load(str(tmp_path / "cli.onnx")), ort_quantized(m, 16, False))
    capsys.readouterr()
    assert main(["convert", str(tmp_path / "m.onnx"), str(tmp_path / "bad.onnx"), "--scheme", "fp8-e4m3",
                 "--format", "matmulnbits"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no MatMulNBits form" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "bad.onnx").exists()


# ------------------------------------------------------------------------------------------------
# audit and check of MatMulNBits nodes
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("symmetric", [True, False], ids=["int4", "uint4-asym"])
def test_audit_computes_matmulnbits_weights(tmp_path, symmetric):
    onnx = require("onnx")
    m = mlp([(70, 33), (33, 9)], 17, activation_matmul=False)
    onnx.save(ort_quantized(m, 16, symmetric), str(tmp_path / "ort.onnx"))      # onnxruntime's own model
    report = audit(tmp_path / "ort.onnx")
    assert report.ok and len(report.matmul_nbits) == 2 and not report.not_audited
    assert [(a.elements, a.differences) for a in report.matmul_nbits] == [(70 * 33, 0), (33 * 9, 0)]
    text = report.render()
    assert "onnxruntime computed every node as the spec does" in text
    assert "onnxruntime's weight equals the operator's dequantization (2310 elements)" in text
    assert report.to_json()["summary"]["matmul_nbits_run"] == 2


def test_audit_finds_a_wrong_dequantization(tmp_path, monkeypatch):
    """The comparison is real: a dequantization with zero point 0 for symmetric nodes (not the
    operator's 8) differs from onnxruntime's weight, and the audit says so."""
    onnx = require("onnx")
    m = mlp([(64, 8)], 17, activation_matmul=False)
    onnx.save(ort_quantized(m, 32, True), str(tmp_path / "ort.onnx"))
    real = nbits.dequantize

    def zero_default(b, scales, zp, K, N, bits, block):
        if zp is None:
            zp = np.zeros((N, -(-(-(-K // block)) * bits // 8)), np.uint8)
        return real(b, scales, zp, K, N, bits, block)

    monkeypatch.setattr(nbits, "dequantize", zero_default)
    report = audit(tmp_path / "ort.onnx")
    assert not report.ok and report.matmul_nbits[0].differences > 0
    assert "DIFFERED" in report.render() and report.matmul_nbits[0].first is not None


def test_audit_names_the_nodes_it_does_not_compute(tmp_path):
    require("onnxruntime")
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             node("QLinearMatMul", ["xq", "s", "z", "w", "ws", "wz", "s", "z"], ["yq"]),
             node("DequantizeLinear", ["yq", "s", "z"], ["y"])]
    inits = [tensor("s", np.float32(0.1)), tensor("z", np.uint8(128)), tensor("w", np.ones((4, 3), np.uint8)),
             tensor("ws", np.float32(0.01)), tensor("wz", np.uint8(0))]
    m = make_model(nodes, [("x", "float", [2, 4])], [("y", "float", [2, 3])], inits, opset=13, ir=8)
    report = audit(m.SerializeToString())
    text = report.render()
    assert any("QLinearMatMul node 1" in n for n in report.not_audited)
    assert "not audited: QLinearMatMul node 1" in text
    assert "onnxruntime computed every node" not in text
    assert "onnxruntime computed the 2 audited node(s) as the spec does (1 quantized node not audited)" in text


def _nbits_node_model(a_k=64, bias=None):
    inits = [tensor("B", np.zeros((8, 2, 16), np.uint8)), tensor("S", np.full((8, 2), 0.1, np.float32))]
    inputs = ["A", "B", "S"]
    if bias is not None:
        inits.append(tensor("bias", np.zeros(bias, np.float32)))
        inputs += ["", "", "bias"]
    return make_model([node("MatMulNBits", inputs, ["y"], domain="com.microsoft", K=64, N=8, bits=4, block_size=32)],
                      [("A", "float", [2, a_k])], [("y", "float", None)], inits, opset=21,
                      domains=[("com.microsoft", 1)])


def test_check_reports_matmulnbits_shapes():
    require("onnx")
    assert check_model(_nbits_node_model().SerializeToString()).ok
    bad_a = check_model(_nbits_node_model(a_k=60).SerializeToString())
    assert not bad_a.ok and any(f.rule == "shape" and "K" in f.message for f in bad_a.violations)
    bad_bias = check_model(_nbits_node_model(bias=7).SerializeToString())
    assert not bad_bias.ok and any(f.rule == "shape" and "bias" in f.message for f in bad_bias.violations)


# ------------------------------------------------------------------------------------------------
# the opset upgrade without the weights
# ------------------------------------------------------------------------------------------------

def _upgrade_models():
    rng = np.random.default_rng(3)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)   # noqa: E731
    yield "mlp-17", mlp([(256, 128), (128, 64)], 17, activation_matmul=False)
    # opset 11: Split's split attribute and ReduceSum's axes become inputs on the way to 21
    nodes = [node("MatMul", ["x", "W"], ["h"]), node("Split", ["h"], ["p", "q"], axis=1, split=[40, 24]),
             node("ReduceSum", ["p"], ["r"], axes=[1], keepdims=1), node("Reshape", ["q", "shape"], ["t"]),
             node("Conv", ["img", "C"], ["c"]), node("BatchNormalization", ["c", "g", "b", "mu", "var"], ["bn"])]
    inits = [tensor("W", f(300, 64)), tensor("shape", np.array([-1, 8], np.int64)), tensor("C", f(16, 3, 5, 5)),
             tensor("g", f(16)), tensor("b", f(16)), tensor("mu", f(16)), tensor("var", np.abs(f(16)) + 1)]
    yield "ops-11", make_model(nodes, [("x", "float", [2, 300]), ("img", "float", [1, 3, 12, 12])],
                               [("r", "float", None), ("t", "float", None), ("bn", "float", None)], inits, opset=11,
                               ir=6)
    nodes = [node("Gemm", ["x", "G", "gb"], ["g"], transB=1), node("Clip", ["g"], ["y"], min=-1.0, max=1.0)]
    yield "gemm-clip-9", make_model(nodes, [("x", "float", [2, 64])], [("y", "float", None)],
                                    [tensor("G", f(128, 64)), tensor("gb", f(128))], opset=9, ir=4)


@pytest.mark.parametrize("name,m,target", [(n, m, t) for n, m in _upgrade_models() for t in (13, 18, 21)
                                           if t > m.opset_import[0].version],
                         ids=lambda v: v if isinstance(v, str) else str(v) if isinstance(v, int) else "")
def test_upgrade_without_the_weights_equals_version_converter(name, m, target):
    require("onnx")
    from onnx import version_converter

    original = m.SerializeToString()
    full = version_converter.convert_version(m, target)
    light = converter.upgrade_opset(m, target)
    assert m.SerializeToString() == original                      # the source is left as it was
    assert light.SerializeToString() == full.SerializeToString()
    assert any(t.ByteSize() >= converter._LIGHT_FROM for t in m.graph.initializer)    # some weights travelled light


def test_convert_upgrades_as_version_converter_did(tmp_path, monkeypatch):
    """An opset-17 model to int4-b32 (DequantizeLinear blocks need opset 21): the written model is the
    one the full-model version converter gave."""
    onnx = require("onnx")
    from onnx import version_converter

    m = mlp([(256, 128), (128, 64)], 17)
    onnx.save(m, str(tmp_path / "m.onnx"))
    convert_model(tmp_path / "m.onnx", tmp_path / "light.onnx", "int4-b32")
    monkeypatch.setattr(converter, "upgrade_opset", version_converter.convert_version)
    convert_model(tmp_path / "m.onnx", tmp_path / "full.onnx", "int4-b32")
    assert (tmp_path / "light.onnx").read_bytes() == (tmp_path / "full.onnx").read_bytes()
    assert onnx.load(str(tmp_path / "light.onnx")).opset_import[0].version == 21


def test_an_adapter_that_rewrites_a_weight_falls_back_to_the_whole_model(monkeypatch):
    """Should a version adapter write data into an initializer it was given empty, the light result
    is not used: the whole model is converted."""
    require("onnx")
    from onnx import version_converter

    m = mlp([(256, 64)], 17, activation_matmul=False)
    real = version_converter.convert_version
    calls = []

    def meddling(model, target):
        out = real(model, target)
        light = any(t.ByteSize() < 64 and list(t.dims) == [256, 64] for t in model.graph.initializer)
        calls.append(light)
        if light:
            w = next(t for t in out.graph.initializer if list(t.dims) == [256, 64])
            w.raw_data = b"\0" * (256 * 64 * 4)
        return out

    monkeypatch.setattr(version_converter, "convert_version", meddling)
    out = converter.upgrade_opset(m, 21)
    assert calls == [True, False]
    assert out.SerializeToString() == real(m, 21).SerializeToString()


def test_cli_audit_of_a_matmulnbits_model(tmp_path, capsys):
    onnx = require("onnx")
    m = mlp([(70, 33)], 17, activation_matmul=False)
    onnx.save(m, str(tmp_path / "m.onnx"))
    assert main(["convert", str(tmp_path / "m.onnx"), str(tmp_path / "q.onnx"), "--scheme", "int4-b32",
                 "--format", "matmulnbits", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["audit", str(tmp_path / "q.onnx")]) == 0
    out = capsys.readouterr().out
    assert "1 MatMulNBits node(s)" in out and "onnxruntime computed every node as the spec does" in out
    assert "MatMulNBits node 0 m0 (K=70, N=33, bits=4, block_size=32): onnxruntime's weight equals" in out
    assert main(["audit", str(tmp_path / "q.onnx"), "--static"]) == 0
    assert "static audit (not run)" in capsys.readouterr().out
