"""``quantspec.onnxmodels.convert_model`` / ``quantspec convert MODEL.onnx OUT.onnx``: weight-only
quantization of a float ONNX model with the checkpoint schemes.

For every scheme, the converted model's DequantizeLinear outputs, run by onnxruntime (where it has a
kernel) and by onnx.reference, equal ``quantspec.checkpoint``'s dequantization of the same weights
(a checkpoint converted from a safetensors file, read back with ``checkpoint.open``) byte for byte;
the stored codes and parameters equal the checkpoint's; and the model's outputs are within a stated
relative RMS error of the float model's (:data:`TOLERANCE`, also in docs/onnx-models.md).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from onnx_float_models import (WEIGHTS, dq_outputs, float_model, from_rows, inputs, rel_rms, rows, run_ort,
                               run_reference, weights)
from onnx_models import model as make_model
from onnx_models import node, onnx_api, tensor
from refs import require

from quantspec import checkpoint
from quantspec._fastpath import jit
from quantspec._tensorfiles import tensorio
from quantspec.checkpoint.schemes import SCHEMES
from quantspec.cli import main
from quantspec.dtypes import qtype
from quantspec.errors import InvalidArgumentError, ModelError, QuantSpecError, RangeError, UnsupportedError
from quantspec.onnxmodels import check_model, convert_model
from quantspec.onnxmodels import encoder, load_model
from quantspec.onnxmodels.converter import onnxruntime_refusal, required_opset

#: the largest relative RMS error of each output of :func:`float_model` against the float model's, per
#: scheme (about twice the largest seen over seeds; the model chains three quantized weights)
TOLERANCE = {
    "int8": 0.03, "int8-tensor": 0.06, "uint8-asym": 0.03, "litert": 0.03, "mxint8": 0.03,
    **{f"int4-b{n}": 0.3 for n in (16, 32, 64, 128, 256)},
    **{f"uint4-b{n}-asym": 0.3 for n in (16, 32, 64, 128, 256)},
    "fp8-e4m3": 0.1, "fp8-e4m3-channel": 0.1, "fp8-e5m2": 0.3,
    "mxfp4": 0.35, "mxfp6-e2m3": 0.1, "mxfp6-e3m2": 0.2, "mxfp8-e4m3": 0.1, "mxfp8-e5m2": 0.2,
}


def ort_runs(s) -> bool:
    """onnxruntime 1.31 runs the scheme's DequantizeLinear, as quantspec's compat="onnxruntime" knows it
    (the test checks the real onnxruntime agrees: it runs these and refuses the others)."""
    return onnxruntime_refusal(s) is None


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def initializers(m) -> dict:
    _, _, numpy_helper = onnx_api()
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    onnx, _, _ = onnx_api()
    d = tmp_path_factory.mktemp("float")
    onnx.save(float_model(13), str(d / "f13.onnx"))
    onnx.save(float_model(21, ir=10), str(d / "f21.onnx"))
    return d


_CHECKPOINTS: dict = {}


def checkpoint_of(name: str, tmp: Path, dtype: str = "float"):
    """quantspec.checkpoint's conversion of the same weights (in its layout [out, in...]) under
    scheme ``name``: a checkpoint opened with ``checkpoint.open``."""
    key = (name, dtype)
    if key not in _CHECKPOINTS:
        t = qtype(dtype)
        src = tmp / f"{dtype}.safetensors"
        if not src.exists():
            tensorio.write_tensors(src, {n: np.ascontiguousarray(rows(n, w)).astype(t.dtype)
                                         for n, w in weights().items() if n in WEIGHTS})
        dst = tmp / f"ck-{dtype}-{name}"
        checkpoint.convert(src, dst, name, progress=False)
        _CHECKPOINTS[key] = checkpoint.open(dst)
    return _CHECKPOINTS[key]


@pytest.fixture(scope="module")
def ck_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("checkpoints")


# ------------------------------------------------------------------------------------------------
# every scheme: bytes against the checkpoint, through onnxruntime and onnx.reference
# ------------------------------------------------------------------------------------------------

def test_onnxruntime_runs_every_scheme_but_the_mx_ones():
    assert [n for n, s in SCHEMES.items() if not ort_runs(s)] == [n for n in SCHEMES if n.startswith("mx")]


def test_the_tolerances_are_documented():
    text = (Path(__file__).resolve().parents[1] / "docs" / "onnx-models.md").read_text()
    for name, tol in TOLERANCE.items():
        assert f"| `{name}` | {tol} |" in text, name


def test_required_opsets_come_from_the_opset_table():
    """The lowest opset whose DequantizeLinear takes each scheme's types and attributes (read from
    quantspec.onnx.opsets) is the opset the scheme table records."""
    for s in SCHEMES.values():
        assert required_opset(s) == s.opset, s.name
    assert {required_opset(n) for n in ("int8-tensor", "int8", "fp8-e4m3", "int4-b32", "mxfp4", "mxfp6-e2m3")} == \
        {10, 13, 19, 21, 24, 28}


@pytest.mark.parametrize("name", list(SCHEMES))
def test_every_scheme_dequantizes_as_the_checkpoint(name, sources, ck_dir, tmp_path):
    onnx, _, _ = onnx_api()
    s = SCHEMES[name]
    ck = checkpoint_of(name, ck_dir)
    dst = tmp_path / "q.onnx"
    report = convert_model(sources / "f13.onnx", dst, name)
    # the lowest opset with the scheme's DequantizeLinear, from an opset-13 model
    assert (report.opset_from, report.opset) == (13, max(13, s.opset))
    quantized = {t.name for t in report.quantized}
    assert quantized == {n for n in WEIGHTS if ck.scheme(n) != "keep"}          # the checkpoint's rules
    assert ("Wc" in quantized) == (s.granularity != "block")                    # blocked: 2-D weights only
    assert {"W1", "W2", "W3"} <= quantized and {t.name for t in report.kept} == ({"C2", "Bc"} | ({"Wc"} - quantized))
    assert report["C2"].reason.startswith("not a weight: input 2 of Gemm 'gemm_kn'")
    m = onnx.load(str(dst))
    onnx.checker.check_model(m, full_check=True)
    assert check_model(dst).ok, check_model(dst).render()
    inits = initializers(m)
    for n in quantized:
        codes, scale, zp = ck.codes(n), *ck.params(n)[:2]
        assert same_bytes(inits[f"{n}_quantized"], np.ascontiguousarray(from_rows(n, codes))), n
        want_scale = scale if s.granularity != "block" else from_rows(n, scale)
        assert same_bytes(inits[f"{n}_scale"], np.ascontiguousarray(want_scale)), n
        assert (f"{n}_zero_point" in inits) == s.zero_point
        if zp is not None:
            assert same_bytes(inits[f"{n}_zero_point"], np.ascontiguousarray(zp if s.granularity != "block"
                                                                             else from_rows(n, zp))), n
        assert report[n].attributes == converter_attributes(n, s)
    names = dq_outputs(m)
    assert sorted(names) == sorted(quantized)                                   # a float model: the weight's name
    expected = {n: np.ascontiguousarray(from_rows(n, ck.dequantize(n))) for n in quantized}
    feeds = inputs()
    if ort_runs(s):
        for n, got in zip(names, run_ort(m, feeds, names)):
            assert same_bytes(got, expected[n]), n
    else:
        with pytest.raises(Exception, match="NOT_IMPLEMENTED|IR version"):
            run_ort(m, feeds, names)
    ref_model = m
    if report.opset < 19:   # onnx.reference implements DequantizeLinear from version 19 on
        convert_model(sources / "f21.onnx", tmp_path / "q21.onnx", name)
        ref_model = onnx.load(str(tmp_path / "q21.onnx"))
    for n, got in zip(names, run_reference(ref_model, feeds, names)):
        assert same_bytes(got, expected[n]), n
    # the model's outputs: close to the float model's, in both runtimes (onnxruntime optimizing, as users run it)
    y_float = run_ort(float_model(13), feeds)
    runs = [run_reference(ref_model, feeds)] + ([run_ort(m, feeds, optimize=True)] if ort_runs(s) else [])
    for ys in runs:
        for y, yf in zip(ys, y_float):
            assert rel_rms(y, yf) <= TOLERANCE[name], (name, rel_rms(y, yf))


def converter_attributes(n: str, s) -> dict:
    """DequantizeLinear's axis / block_size as docs/onnx-models.md maps them (written out here)."""
    in_out = WEIGHTS[n][1] == "in-out"
    if s.granularity == "tensor":
        return {}
    if s.granularity == "channel":
        return {"axis": 1 if in_out else 0}
    return {"axis": 0 if in_out else 1, "block_size": s.block}


def test_the_dequantize_nodes_are_as_documented(sources, tmp_path):
    """W1 (MatMul B, [40, 24]) under int4-b16: blocks along axis 0 of a [K, N] weight, the scale [3, 24];
    W3 (Gemm B, transB=1, [10, 17]): blocks along axis 1, scale [10, 2]; mxfp4: output_dtype float."""
    onnx, _, _ = onnx_api()
    convert_model(sources / "f13.onnx", tmp_path / "q.onnx", "int4-b16")
    m = onnx.load(str(tmp_path / "q.onnx"))
    by_out = {n.output[0]: n for n in m.graph.node}
    inits = initializers(m)
    dq = by_out["W1"]
    assert list(dq.input) == ["W1_quantized", "W1_scale"] and dq.op_type == "DequantizeLinear"
    assert {a.name: a.i for a in dq.attribute} == {"axis": 0, "block_size": 16}
    assert inits["W1_scale"].shape == (3, 24) and inits["W1_quantized"].dtype == qtype("int4").dtype
    assert {a.name: a.i for a in by_out["W3"].attribute} == {"axis": 1, "block_size": 16}
    assert inits["W3_scale"].shape == (10, 2)
    assert [n.op_type for n in m.graph.node][:3] == ["DequantizeLinear"] * 3    # at the head of the graph
    assert "W1" not in inits and "Wc" in inits
    convert_model(sources / "f13.onnx", tmp_path / "mx.onnx", "mxfp4")
    m = onnx.load(str(tmp_path / "mx.onnx"))
    dq = {n.output[0]: n for n in m.graph.node}["W2"]
    assert {a.name: a.i for a in dq.attribute} == {"axis": 0, "block_size": 32, "output_dtype": onnx.TensorProto.FLOAT}
    assert m.ir_version == 12 and [(o.domain, o.version) for o in m.opset_import] == [("", 24)]


# ------------------------------------------------------------------------------------------------
# float16 and bfloat16 models
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["int8", "uint4-b32-asym", "fp8-e4m3", "mxfp8-e4m3", "litert"])
def test_half_precision_models(name, dtype, ck_dir, tmp_path):
    """The DequantizeLinear output is float32 (the checkpoint's dequantized value of the float16 /
    bfloat16 weight, byte for byte) and a Cast gives the model's type back."""
    onnx, _, _ = onnx_api()
    s = SCHEMES[name]
    ck = checkpoint_of(name, ck_dir, dtype)
    opset = 22 if dtype == "bfloat16" else 21          # Conv takes bfloat16 from opset 22
    src = float_model(opset, dtype, ir=10)
    report = convert_model(src, tmp_path / "q.onnx", name)
    assert report.opset == max(opset, s.opset) and {t.dtype for t in report.tensors} == {dtype}
    m = onnx.load(str(tmp_path / "q.onnx"))
    onnx.checker.check_model(m, full_check=True)
    by_out = {n.output[0]: n for n in m.graph.node}
    names = dq_outputs(m)
    quantized = [t.name for t in report.quantized]
    assert sorted(names) == sorted(f"{n}_dequantized" for n in quantized)
    for n in quantized:
        cast = by_out[n]
        assert cast.op_type == "Cast" and list(cast.input) == [f"{n}_dequantized"]
        assert cast.attribute[0].i == qtype(dtype).onnx
    expected = [np.ascontiguousarray(from_rows(n[:-len("_dequantized")], ck.dequantize(n[:-len("_dequantized")])))
                for n in names]
    feeds = inputs(dtype)
    runners = [run_reference] + ([run_ort] if dtype == "float16" and ort_runs(s) else [])
    for run in runners:
        for got, want in zip(run(m, feeds, names), expected):
            assert same_bytes(got, want)
    y_float = run_reference(src, feeds)
    for run in runners:
        for y, yf in zip(run(m, feeds), y_float):
            assert y.dtype == qtype(dtype).dtype
            assert rel_rms(y, yf) <= TOLERANCE[name] + (0.02 if dtype == "bfloat16" else 0.005)


# ------------------------------------------------------------------------------------------------
# which initializers are weights
# ------------------------------------------------------------------------------------------------

def structure_model():
    """Weights in every situation the converter must recognise (opset 21)."""
    rng = np.random.default_rng(3)
    w = lambda *shape: (rng.standard_normal(shape) * 0.5).astype(np.float32)  # noqa: E731
    onnx, helper, _ = onnx_api()
    then_g = helper.make_graph([helper.make_node("MatMul", ["x", "Wsub"], ["then_out"])], "then", [],
                               [helper.make_tensor_value_info("then_out", onnx.TensorProto.FLOAT, [2, 8])])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["else_out"])], "else", [],
                               [helper.make_tensor_value_info("else_out", onnx.TensorProto.FLOAT, [2, 8])])
    nodes = [node("MatMul", ["x", "Wshared"], ["a"], name="m1"), node("MatMul", ["x", "Wshared"], ["b"], name="m2"),
             node("Add", ["a", "b"], ["h0"]), node("MatMul", ["x", "Wadd"], ["c"]), node("Add", ["c", "Wadd8"], ["h1"]),
             node("Transpose", ["Wadd"], ["wt"]), node("MatMul", ["x", "wt"], ["l"]),
             node("Add", ["h0", "h1"], ["h"]),
             node("MatMul", ["Aconst", "x8"], ["d"]),                               # a constant left operand
             node("MatMul", ["x3", "Wstack"], ["e"]),                                # a stack of matrices
             node("Gemm", ["x", "Wboth"], ["f"]), node("Gemm", ["x8b", "Wboth"], ["g"], transB=1),
             node("MatMul", ["x", "Winput"], ["k"]),
             node("If", ["cond"], ["sub"], then_branch=then_g, else_branch=else_g),
             node("Reshape", ["h", "shape"], ["r"])]
    inits = [tensor("Wshared", w(8, 8)), tensor("Wadd", w(8, 8)), tensor("Wadd8", w(8)), tensor("Aconst", w(4, 8)),
             tensor("Wstack", w(3, 8, 8)), tensor("Wboth", w(8, 8)), tensor("Winput", w(8, 8)), tensor("Wsub", w(8, 8)),
             tensor("shape", np.array([16], np.int64)), tensor("Wdouble", np.ones((4, 4)))]
    m = make_model(nodes, [("x", "float", [2, 8]), ("x8", "float", [8, 5]), ("x3", "float", [3, 2, 8]),
                           ("x8b", "float", [2, 8]), ("Winput", "float", [8, 8]), ("cond", "bool", [])],
                   [("r", "float", [16]), ("d", "float", [4, 5]), ("e", "float", [3, 2, 8]), ("f", "float", [2, 8]),
                    ("g", "float", [2, 8]), ("k", "float", [2, 8]), ("sub", "float", [2, 8]), ("l", "float", [2, 8])], inits, opset=21, ir=10)
    return m


def test_which_initializers_are_weights(tmp_path):
    onnx, _, _ = onnx_api()
    src = structure_model()
    onnx.checker.check_model(src, full_check=True)
    report = convert_model(src, tmp_path / "q.onnx", "int8")
    assert [t.name for t in report.quantized] == ["Wshared", "Wsub"]
    reasons = {t.name: t.reason for t in report.kept}
    assert reasons["Wadd"].startswith("not a weight: input 0 of Transpose (node 5)")
    assert reasons["Wadd8"].startswith("not a weight: input 1 of Add")
    assert reasons["Aconst"].startswith("not a weight: input 0 of MatMul")
    assert reasons["Wstack"].startswith("MatMul weights of 3-D are kept")
    assert reasons["Wboth"] == "used as a weight in both layouts (in-out and out-in)"
    assert reasons["Winput"] == "also a graph input (a value the caller may override)"
    assert reasons["shape"].startswith("not a weight: input 1 of Reshape")
    assert reasons["Wdouble"] == "not used by any node"
    assert report["Wshared"].use == "MatMul B (2 nodes)" and report["Wsub"].use == "MatMul B"
    m = onnx.load(str(tmp_path / "q.onnx"))
    onnx.checker.check_model(m, full_check=True)
    assert [n.op_type for n in m.graph.node].count("DequantizeLinear") == 2         # one for the shared weight
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 8)).astype(np.float32), "x8": rng.standard_normal((8, 5)).astype(np.float32),
             "x3": rng.standard_normal((3, 2, 8)).astype(np.float32), "x8b": rng.standard_normal((2, 8)).astype(np.float32),
             "cond": np.array(True)}
    for run in (run_ort, run_reference):
        ys, yf = run(m, feeds), run(src, feeds)
        for y, f in zip(ys, yf):
            assert rel_rms(y, f) < TOLERANCE["int8"]
        assert same_bytes(ys[1], yf[1]) and same_bytes(ys[2], yf[2])               # kept weights: unchanged


def test_an_old_model_whose_initializers_are_inputs(tmp_path):
    """Before IR 4 every initializer is also a graph input: a quantized weight leaves the inputs, and
    the model is upgraded (opset 8 -> 13, IR 3 -> 7)."""
    onnx, helper, _ = onnx_api()
    w = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)
    m = make_model([node("MatMul", ["x", "W"], ["y"])], [("x", "float", [2, 6]), ("W", "float", [6, 4])],
                   [("y", "float", [2, 4])], [tensor("W", w)], opset=8, ir=3)
    report = convert_model(m, tmp_path / "q.onnx", "int8")
    assert (report.opset_from, report.opset, report.ir_version) == (8, 13, 7)
    q = onnx.load(str(tmp_path / "q.onnx"))
    assert [i.name for i in q.graph.input] == ["x"]
    onnx.checker.check_model(q, full_check=True)
    x = np.ones((2, 6), np.float32)
    assert rel_rms(run_ort(q, {"x": x})[0], x @ w) < 0.01


def test_opsets_already_high_enough_are_kept(sources, tmp_path):
    onnx, _, _ = onnx_api()
    for opset, name in ((22, "int8"), (23, "int4-b32"), (25, "mxfp4")):
        m = float_model(opset, ir=10)
        report = convert_model(m, tmp_path / "q.onnx", name)
        assert report.opset_from == report.opset == opset
        onnx.checker.check_model(onnx.load(str(tmp_path / "q.onnx")), full_check=True)
    assert convert_model(sources / "f13.onnx", tmp_path / "q.onnx", "int8").opset == 13


# ------------------------------------------------------------------------------------------------
# recipes, include / exclude
# ------------------------------------------------------------------------------------------------

def test_recipes_and_globs(sources, tmp_path):
    onnx, _, _ = onnx_api()
    recipe = {"default": "int8", "rules": [{"match": "W1", "scheme": "int4-b32"}, {"match": "Wc", "scheme": "keep"}]}
    report = convert_model(sources / "f13.onnx", tmp_path / "q.onnx", recipe=recipe)
    assert {t.name: t.scheme for t in report.tensors} == {"W1": "int4-b32", "W2": "int8", "W3": "int8", "Wc": "keep",
                                                          "C2": "keep", "Bc": "keep"}
    assert report.opset == 21 and report["Wc"].reason == "kept by rule 'Wc'"
    m = onnx.load(str(tmp_path / "q.onnx"))
    onnx.checker.check_model(m, full_check=True)
    toml = tmp_path / "recipe.toml"
    toml.write_text('default = "fp8-e4m3"\n[[rules]]\nmatch = "W[12]"\nscheme = "mxfp4"\n')
    report = convert_model(sources / "f13.onnx", tmp_path / "q2.onnx", recipe=toml, exclude=["W2"])
    assert {t.name: t.scheme for t in report.quantized} == {"W1": "mxfp4", "W3": "fp8-e4m3", "Wc": "fp8-e4m3"}
    assert report.opset == 24 and report["W2"].reason == "excluded by 'W2'"
    report = convert_model(sources / "f13.onnx", tmp_path / "q3.onnx", "int4-b64", include=["W*"])
    assert [t.name for t in report.quantized] == ["W1", "W2", "W3"]
    assert report["Wc"].reason == "int4-b64 takes 2-D weights (got 4-D)"             # the checkpoint's rule
    # a rule naming a tensor exactly with a scheme it cannot take is an error, as for checkpoints
    with pytest.raises(InvalidArgumentError, match="asks for scheme int4-b32 on weight 'Wc'"):
        convert_model(sources / "f13.onnx", tmp_path / "e.onnx", "int8", recipe={"rules": [{"match": "Wc", "scheme": "int4-b32"}]})
    with pytest.raises(InvalidArgumentError, match="initializer 'C2', which is not a weight"):
        convert_model(sources / "f13.onnx", tmp_path / "e.onnx", recipe={"rules": [{"match": "C2", "scheme": "int8"}]})
    assert not (tmp_path / "e.onnx").exists()


# ------------------------------------------------------------------------------------------------
# external data, paths, the fast and reference paths, bad input
# ------------------------------------------------------------------------------------------------

def external_model(rng):
    """x [2, 256] -> MatMul W [256, 64] -> Gemm W2 [48, 64] + C (transB=1) -> y [2, 48]."""
    values = {"W": rng.standard_normal((256, 64)).astype(np.float32),
              "W2": rng.standard_normal((48, 64)).astype(np.float32), "C": rng.standard_normal(48).astype(np.float32)}
    nodes = [node("MatMul", ["x", "W"], ["h"]), node("Gemm", ["h", "W2", "C"], ["y"], transB=1)]
    m = make_model(nodes, [("x", "float", [2, 256])], [("y", "float", [2, 48])],
                   [tensor(n, a) for n, a in values.items()], opset=13, ir=7)
    return m, values


def test_external_data_in_and_out(tmp_path):
    """A model whose weights are in an external data file converts to one with its own data file (the
    initializers of 1 kB or more); onnxruntime and onnx.reference read it from its path."""
    onnx, _, _ = onnx_api()
    ort = require("onnxruntime")
    from onnx.reference import ReferenceEvaluator

    from quantspec.onnxmodels import save_model

    src_dir = tmp_path / "src"
    src_dir.mkdir()
    m, values = external_model(np.random.default_rng(5))
    src = src_dir / "model.onnx"
    written = save_model(m, src, external_data=True)
    assert [p.name for p in written] == ["model.onnx", "model.onnx.data"]
    out = tmp_path / "out" / "q.onnx"
    out.parent.mkdir()
    report = convert_model(src, out, "int8", exclude="W2")
    assert report.files == [str(out), str(out.parent / "q.onnx.data")]
    q = onnx.load(str(out), load_external_data=False)
    external = {t.name for t in q.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    assert external == {"W_quantized", "W2"}          # 16 kB of codes and the kept float weight; C (192 B) inline
    onnx.checker.check_model(str(out), full_check=True)
    assert check_model(out).ok
    tensorio.write_tensors(tmp_path / "w.safetensors", {"W": np.ascontiguousarray(values["W"].T)})
    checkpoint.convert(tmp_path / "w.safetensors", tmp_path / "ck", "int8", progress=False)
    want = np.ascontiguousarray(checkpoint.open(tmp_path / "ck").dequantize("W").T)
    full = onnx.load(str(out))
    x = {"x": np.random.default_rng(6).standard_normal((2, 256)).astype(np.float32)}
    assert same_bytes(run_ort(full, x, ["W"])[0], want)           # opset 13: onnx.reference has no DequantizeLinear-13
    y_float = run_reference(m, x)[0]
    y = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, x)[0]
    assert rel_rms(y, y_float) < TOLERANCE["int8"]
    # external_data=False writes one file; True gives an inline source a data file
    assert convert_model(src, tmp_path / "inline.onnx", "int8", external_data=False).files == [str(tmp_path / "inline.onnx")]
    onnx.checker.check_model(str(tmp_path / "inline.onnx"), full_check=True)
    report = convert_model(m, tmp_path / "ext.onnx", "int4-b32", external_data=True)
    assert report.files == [str(tmp_path / "ext.onnx"), str(tmp_path / "ext.onnx.data")]
    onnx.checker.check_model(str(tmp_path / "ext.onnx"), full_check=True)
    # upgraded (opset 13 -> 21) with the source's tensors still in their file
    report = convert_model(src, out, "int4-b32", exclude="W2")
    assert (report.opset_from, report.opset) == (13, 21) and report.files[1:] == [str(out.parent / "q.onnx.data")]
    onnx.checker.check_model(str(out), full_check=True)
    for y in (ort.InferenceSession(str(out), providers=["CPUExecutionProvider"]).run(None, x)[0],
              ReferenceEvaluator(str(out)).run(None, x)[0]):
        assert rel_rms(y, y_float) < TOLERANCE["int4-b32"]


def test_the_fast_and_reference_paths_write_the_same_model(sources, tmp_path, monkeypatch):
    """The checkpoint encoders' fused kernels and their numpy reference path, in one slab or in many
    slabs on two threads: byte-identical files."""
    require("numba")
    monkeypatch.setenv("QUANTSPEC_FAST", "1")
    if not jit.enabled():
        pytest.skip("the fast path is off")
    for name in SCHEMES:
        convert_model(sources / "f13.onnx", tmp_path / "fast.onnx", name)
        with jit.reference_only():
            convert_model(sources / "f13.onnx", tmp_path / "ref.onnx", name)
        monkeypatch.setattr(encoder, "SLAB_BYTES", 64)                              # slabs of one or two rows
        convert_model(sources / "f13.onnx", tmp_path / "slabs.onnx", name, workers=2)
        monkeypatch.setattr(encoder, "SLAB_BYTES", 16 << 20)
        fast = (tmp_path / "fast.onnx").read_bytes()
        assert fast == (tmp_path / "ref.onnx").read_bytes() == (tmp_path / "slabs.onnx").read_bytes(), name


def test_bad_input_is_a_quantspec_error_and_writes_nothing(sources, tmp_path):
    onnx, _, _ = onnx_api()
    dst = tmp_path / "q.onnx"
    nan = weights()
    nan["W2"][3, 5] = np.nan
    with pytest.raises(RangeError, match=r"weight 'W2' holds NaN or infinity \(at \[3, 5\]\)"):
        convert_model(float_model(13, values=nan), dst, "int4-b32")
    with pytest.raises(RangeError, match=r"weight 'W2' holds NaN or infinity \(at \[3, 5\]\)"):
        convert_model(float_model(13, values=nan), dst, "int8-tensor")              # per tensor: the range scan
    inf = weights()
    inf["Wc"][4, 0, 1, 2] = -np.inf
    for name in ("int8", "fp8-e4m3"):
        with pytest.raises(RangeError, match=r"weight 'Wc' holds NaN or infinity \(at \[4, 0, 1, 2\]\)"):
            convert_model(float_model(13, values=inf), dst, name)
    assert convert_model(float_model(13, values=nan), dst, "int8", exclude="W2").kept
    dst.unlink()
    with pytest.raises(InvalidArgumentError, match="scheme"):
        convert_model(sources / "f13.onnx", dst, "int3")
    with pytest.raises(InvalidArgumentError, match="scheme"):
        convert_model(sources / "f13.onnx", dst)
    with pytest.raises(InvalidArgumentError, match="must not be the source model"):
        convert_model(sources / "f13.onnx", sources / "f13.onnx", "int8")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        convert_model(sources / "f13.onnx", tmp_path, "int8")
    with pytest.raises(InvalidArgumentError, match="external_data"):
        convert_model(sources / "f13.onnx", dst, "int8", external_data="yes")
    with pytest.raises(ModelError, match="not an ONNX model"):
        convert_model(_write(tmp_path / "x.onnx", b"TFL3" * 8), dst, "int8")
    no_opset = float_model(13)
    del no_opset.opset_import[:]
    with pytest.raises(ModelError, match="imports no default-domain"):
        convert_model(no_opset, dst, "int8")
    assert not dst.exists() and not list(tmp_path.glob(".q.onnx*"))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_a_model_the_version_converter_cannot_upgrade_is_refused(tmp_path):
    """An opset-5 model holding Greater, for which onnx.version_converter has no adapter to opset 7."""
    w = np.ones((4, 4), np.float32)
    m = make_model([node("MatMul", ["x", "W"], ["h"]), node("Greater", ["h", "x"], ["y"])],
                   [("x", "float", [4, 4])], [("y", "bool", [4, 4])], [tensor("W", w)], opset=5, ir=3)
    with pytest.raises(UnsupportedError, match="is at opset 5, and scheme int4-b32 .* needs opset 21; "
                                               "onnx.version_converter cannot upgrade"):
        convert_model(m, tmp_path / "q.onnx", "int4-b32")
    with pytest.raises(UnsupportedError, match="scheme int8-tensor .* needs opset 10"):
        convert_model(m, tmp_path / "q.onnx", "int8-tensor")
    assert not (tmp_path / "q.onnx").exists()


def test_the_source_external_data_is_never_overwritten(tmp_path):
    from quantspec.onnxmodels import save_model

    save_model(float_model(21, ir=10), tmp_path / "a.onnx", external_data=True, location="b.onnx.data",
               size_threshold=64)
    with pytest.raises(InvalidArgumentError, match="would overwrite the source model's external data file"):
        convert_model(tmp_path / "a.onnx", tmp_path / "b.onnx", "int8")


# ------------------------------------------------------------------------------------------------
# the command
# ------------------------------------------------------------------------------------------------

def test_the_command(sources, tmp_path, capsys):
    onnx, _, _ = onnx_api()
    out = tmp_path / "q.onnx"
    assert main(["convert", str(sources / "f13.onnx"), str(out), "--scheme", "int4-b32"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("quantspec convert: 3 weights quantized (int4-b32), 3 initializers kept; opset 13 -> 21")
    assert line.endswith(f"wrote {out}")
    onnx.checker.check_model(str(out), full_check=True)
    assert main(["convert", str(sources / "f13.onnx"), str(out), "--scheme", "int8", "--exclude", "W1", "--report"]) == 0
    table = capsys.readouterr().out
    assert "W1" in table and "excluded by 'W1'" in table and "Conv W" in table
    assert main(["convert", str(sources / "f13.onnx"), str(out), "--scheme", "int8", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["opset"] == 13 and [t["scheme"] for t in data["tensors"]][:2] == ["int8", "int8"]
    assert main(["convert", str(sources / "f13.onnx"), str(out), "--scheme", "int8", "--quiet"]) == 0
    assert capsys.readouterr().out == ""
    # chosen by content: an ONNX model under another name
    other = tmp_path / "model.bin"
    other.write_bytes((sources / "f13.onnx").read_bytes())
    assert main(["convert", str(other), str(out), "--scheme", "fp8-e4m3", "--quiet"]) == 0
    assert onnx.load(str(out)).opset_import[0].version == 19
    # bad input: exit 2, one line
    assert main(["convert", str(sources / "f13.onnx"), str(out), "--scheme", "int3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("quantspec convert: error: InvalidArgumentError: scheme") and "\n" not in err
    assert main(["convert", str(sources / "f13.onnx"), str(out), "--scheme", "int8", "--max-shard-size", "1GB"]) == 2


def test_checkpoints_still_go_to_the_checkpoint_converter(tmp_path, capsys):
    """A safetensors file whose header length is 8 mod 256 begins with a byte that would open an ONNX
    ModelProto: the content decides, and it is converted as a checkpoint."""
    from safetensors.numpy import save_file

    for k in range(600):
        src = tmp_path / f"w{k}.safetensors"
        save_file({"w" * (k + 1): np.ones((4, 4), np.float32)}, str(src))
        if src.read_bytes()[0] == 8:
            break
    else:
        pytest.fail("no header length of 8 mod 256 found")
    assert main(["convert", str(src), str(tmp_path / "ck"), "--scheme", "int8", "--quiet"]) == 0
    assert (tmp_path / "ck" / "quantspec.json").exists()
    with pytest.raises(SystemExit) as e:
        main(["convert", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "quantspec convert MODEL.onnx OUT.onnx" in text and "safetensors" in text


def test_errors_are_quantspec_errors_for_damaged_models(sources, tmp_path):
    """Bytes of the float model changed at random: convert_model answers with a converted model or a
    quantspec error, never another exception (QUANTSPEC_SEED, QUANTSPEC_SWEEP_SIZE)."""
    seed = int(os.environ.get("QUANTSPEC_SEED", "20261201"))
    count = 40 * max(1, int(os.environ.get("QUANTSPEC_SWEEP_SIZE", "1")))
    data0 = (sources / "f13.onnx").read_bytes()
    rng = np.random.default_rng(seed)
    outcomes = {"converted": 0, "error": 0}
    for i in range(count):
        data = bytearray(data0)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        try:
            convert_model(bytes(data), tmp_path / "q.onnx", ("int8", "int4-b32", "mxfp4")[i % 3])
            outcomes["converted"] += 1
        except QuantSpecError:
            outcomes["error"] += 1
    assert outcomes["converted"] and outcomes["error"], outcomes


def test_a_large_model_streams_through_external_data(tmp_path):
    """A MatMul weight in an external data file (float16, mapped, never read whole), converted in slabs
    on two threads; rows planted with values at both ends, the rest zeros (a sparse file).  The size
    in GB is ``QUANTSPEC_ONNX_CONVERT_GB`` (default 0.03; 2.2 gives a model over 2 GB)."""
    onnx, helper, _ = onnx_api()
    from quantspec.checkpoint import reference
    from quantspec.onnx import dequantize_linear, unpack
    from quantspec.onnxmodels.io import set_external

    gb = float(os.environ.get("QUANTSPEC_ONNX_CONVERT_GB", "0.03"))
    n = 4096
    k = max(512, int(gb * 2 ** 30) // (2 * n) // 256 * 256)
    rng = np.random.default_rng(11)
    planted = {0: (rng.standard_normal((256, n)) * 0.1).astype(np.float16),
               k - 256: (rng.standard_normal((256, n)) * 3).astype(np.float16)}
    with open(tmp_path / "model.onnx.data", "wb") as f:
        f.truncate(k * n * 2)
        for r0, rows_ in planted.items():
            f.seek(r0 * n * 2)
            f.write(rows_.tobytes())
    w = onnx.TensorProto(name="W", data_type=onnx.TensorProto.FLOAT16, dims=[k, n])
    set_external(w, "model.onnx.data", 0, k * n * 2)
    m = make_model([node("MatMul", ["x", "W"], ["y"])], [("x", "float16", [1, k])], [("y", "float16", [1, n])], [w],
                   opset=21, ir=10)
    onnx.save(m, str(tmp_path / "model.onnx"))
    out = tmp_path / "out" / "q.onnx"
    out.parent.mkdir()
    s = SCHEMES["int4-b128"]
    report = convert_model(tmp_path / "model.onnx", out, s.name, workers=2)
    assert report.files == [str(out), str(out.parent / "q.onnx.data")] and out.stat().st_size < 4096
    assert (out.parent / "q.onnx.data").stat().st_size >= k * n // 2
    onnx.checker.check_model(str(out), full_check=True)
    assert check_model(out).ok
    q = load_model(out)
    got = {t.name: t for t in q.proto.graph.initializer}
    scale = q.values(got["W_scale"])
    assert tuple(got["W_quantized"].dims) == (k, n) and scale.shape == (k // 128, n)
    where, offset, length = q.external_span(got["W_quantized"])
    assert length == k * n // 2

    def code_rows(r0: int, count: int) -> np.ndarray:       # rows of the packed int4 codes, read from the file
        with open(where, "rb") as f:
            f.seek(offset + r0 * n // 2)
            return unpack(f.read(count * n // 2), "int4", (count, n))

    for r0, rows_ in planted.items():   # the planted rows' blocks, by the checkpoint's numpy reference path
        c, sc, _ = reference.encode(s, np.ascontiguousarray(rows_.T.astype(np.float32)))
        want = reference.dequantize(s, c, sc, None).T
        dq = dequantize_linear(code_rows(r0, 256), np.asarray(scale[r0 // 128:r0 // 128 + 2]), axis=0, block_size=128)
        assert same_bytes(dq, np.ascontiguousarray(want))
    assert not code_rows(256, 256).view(np.uint8).any()                            # zeros between


@pytest.mark.parametrize("name", ["int8", "uint4-b32-asym", "fp8-e5m2"])
def test_the_audit_confirms_onnxruntime_dequantizes_as_the_spec(name, sources, tmp_path):
    """quantspec audit on a converted model: onnxruntime computes every DequantizeLinear as the spec does."""
    require("onnxruntime")
    from quantspec.onnxmodels import audit

    convert_model(sources / "f21.onnx", tmp_path / "q.onnx", name)
    report = audit(tmp_path / "q.onnx")
    assert report.ok and report.confirmed, report.render()
    assert sorted(n.output for n in report.nodes) == sorted(dq_outputs(onnx_api()[0].load(str(tmp_path / "q.onnx"))))
