"""Fuzzing of the ONNX model tools: ``quantspec.onnxmodels.check_model`` and ``quantspec.onnxmodels.audit``.

- Odd models (hypothesis): QuantizeLinear -> DequantizeLinear graphs with drawn operator versions,
  attributes (axis, block_size, output_dtype, saturate, precision, unknown ones), scale and zero
  point types and shapes (every quantized type, float8 / 4-bit / 2-bit included, scalars, vectors
  of the wrong length, blocks), input types and shapes.  ``check_model`` returns a report or raises
  a quantspec error; so does ``audit`` with its onnxruntime run on seeded inputs.
- Damaged models (mutation): valid models (per tensor, per channel, blocked int4, float8, int16, a
  MatMul between QDQ pairs) serialized, then damaged byte by byte (fuzz_files.mutate) or in their
  structure (an operator version, an attribute, a tensor's type, dims or data, a missing initializer
  or input, a cycle); both calls as above, on the bytes.

Every call runs in a forked child with a time limit (fuzz_support.isolated): another exception, a
crash or a hang fails the test.  ``QUANTSPEC_FUZZ_EXAMPLES`` scales the counts (fuzz_support)."""

from __future__ import annotations

import random

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, seed
from hypothesis import strategies as st

import fuzz_files
import fuzz_support as F
from onnx_models import model, node, onnx_api, tensor

TIMEOUT = 90.0
#: quantized types drawn for zero points (and so for the output)
Q_TYPES = ("int8", "uint8", "int16", "uint16", "int32", "int4", "uint4", "int2", "uint2", "float8e4m3fn",
           "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1", "float8e8m0")
F_TYPES = ("float32", "float16", "bfloat16", "float64")


def _np(name: str) -> np.dtype:
    from quantspec.dtypes import qtype

    return np.dtype(qtype(name).dtype)


def _check_and_audit(data, inputs):
    """check_model, then audit with its onnxruntime run (and statically): each a report or an error."""
    from quantspec import onnxmodels
    from quantspec.errors import QuantSpecError

    got = []
    for call in (lambda: onnxmodels.check_model(data), lambda: onnxmodels.audit(data, inputs, run=True, seed=1),
                 lambda: onnxmodels.audit(data, run=False)):
        try:
            report = call()
            report.to_json()
            str(report.render() if hasattr(report, "render") else report)
            got.append(f"ok:{bool(report.ok)}")
        except QuantSpecError as e:
            assert str(e)
            got.append(f"error:{type(e).__name__}")
    return " ".join(got)


# -- odd models -----------------------------------------------------------------------------------

@st.composite
def _qdq(draw):
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    opset = draw(st.sampled_from([10, 13, 19, 21, 23, 24, 25, 30]))
    shape = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 4, 8, 9]), min_size=0, max_size=3)))
    x_type = draw(st.sampled_from(F_TYPES))
    qt = draw(st.sampled_from(Q_TYPES))
    s_type = draw(st.sampled_from((x_type,) * 3 + F_TYPES))
    attrs = {}
    if F.chance(draw, 0.5):
        attrs["axis"] = draw(st.integers(-4, 4))
    if F.chance(draw, 0.3):
        attrs["block_size"] = draw(st.sampled_from([0, -1, 1, 2, 3, 4, 32]))
    if F.chance(draw, 0.2):
        attrs["saturate"] = draw(st.integers(-1, 2))
    if F.chance(draw, 0.15):
        attrs["output_dtype"] = draw(st.integers(0, 27))
    if F.chance(draw, 0.1):
        attrs["precision"] = draw(st.integers(0, 27))
    if F.chance(draw, 0.05):
        attrs["no_such_attribute"] = 1
    # the parameters' shape: scalar, one per slice of an axis, blocked, or something odd
    p_shape = draw(st.sampled_from([(), (), (1,), None, None, "blocked", (7,), (2, 2)]))
    if p_shape is None:
        ax = attrs.get("axis", 1)
        p_shape = (shape[ax],) if shape and -len(shape) <= ax < len(shape) else (1,)
    elif p_shape == "blocked":
        bs = attrs.get("block_size", 2) or 2
        ax = attrs.get("axis", 1)
        p_shape = tuple(-(-d // abs(bs)) if shape and i == ax % max(len(shape), 1) else d
                        for i, d in enumerate(shape))
    with np.errstate(all="ignore"):
        scale = (np.abs(F.values(rng, p_shape, np.dtype(np.float32))) if F.chance(draw, 0.2)
                 else rng.uniform(0.001, 2, size=p_shape).astype(np.float32)).astype(_np(s_type))
        zp_shape = p_shape if F.chance(draw, 0.9) else draw(st.sampled_from([(), (3,), (1, 1)]))
        zp = F.values(rng, zp_shape, _np(qt)) if _np(qt).kind in "iu" else \
            rng.uniform(-2, 2, size=zp_shape).astype(np.float32).astype(_np(qt))
        if F.chance(draw, 0.5):
            zp = np.zeros(zp_shape, _np(qt))
    with_zp = F.chance(draw, 0.85)
    ins = ["x", "s", "z"] if with_zp else ["x", "s"]
    inits = [tensor("s", scale)] + ([tensor("z", zp)] if with_zp else [])
    nodes = [node("QuantizeLinear", ins, ["q"], **attrs),
             node("DequantizeLinear", ["q"] + ins[1:], ["y"], **{k: v for k, v in attrs.items()
                                                               if k not in ("saturate", "precision")})]
    m = model(nodes, [("x", x_type, list(shape))], [("y", None, None)], inits, opset=opset)
    x = F.values(rng, shape, np.dtype(np.float32))
    with np.errstate(all="ignore"):
        x = x.astype(_np(x_type))
    return m.SerializeToString(), {"x": x}, f"opset {opset}, x {x_type}{list(shape)}, zp {qt}{list(zp_shape)}" \
        f"{'' if with_zp else ' (absent)'}, scale {s_type}{list(p_shape)}, attrs {attrs}"


@seed(F.SEED)
@F.fuzz_settings(0.5)
@given(case=_qdq())
def test_fuzz_odd_qdq_models(case):
    data, inputs, what = case
    F.isolated(lambda: _check_and_audit(data, inputs), TIMEOUT, what)


# -- damaged models ---------------------------------------------------------------------------------

def _seeds():
    onnx, helper, numpy_helper = onnx_api()
    rng = np.random.default_rng(F.SEED)
    out = {}

    def qdq(name, x_shape, scale, zp, opset=21, **attrs):
        ins = ["x", "s", "z"] if zp is not None else ["x", "s"]
        inits = [tensor("s", scale)] + ([tensor("z", zp)] if zp is not None else [])
        nodes = [node("QuantizeLinear", ins, ["q"], **attrs), node("DequantizeLinear", ["q"] + ins[1:], ["y"],
                                                                  **{k: v for k, v in attrs.items() if k != "saturate"})]
        out[name] = (model(nodes, [("x", "float32", list(x_shape))], [("y", "float32", list(x_shape))], inits,
                           opset=opset).SerializeToString(), {"x": rng.normal(size=x_shape).astype(np.float32)})

    qdq("per-tensor-uint8", (2, 6), np.float32(0.05), np.uint8(128), opset=13)
    qdq("per-channel-int8", (3, 4), np.array([0.1, 0.2, 0.3], np.float32), np.zeros(3, np.int8), axis=0)
    qdq("blocked-int4", (4, 8), np.full((4, 2), 0.25, np.float32), np.zeros((4, 2), ml_dtypes.int4), axis=1,
        block_size=4)
    qdq("float8", (5,), np.float32(0.5), np.zeros((), ml_dtypes.float8_e4m3fn), opset=19, saturate=0)
    qdq("int16", (2, 3), np.float32(0.001), np.int16(-3), opset=21)
    # x -> Q -> DQ -> MatMul(DQ(weight)) -> y
    w = rng.integers(-127, 128, size=(6, 4)).astype(np.int8)
    nodes = [node("QuantizeLinear", ["x", "s", "z"], ["q"]), node("DequantizeLinear", ["q", "s", "z"], ["xd"]),
             node("DequantizeLinear", ["w", "ws"], ["wd"], axis=1), node("MatMul", ["xd", "wd"], ["y"])]
    inits = [tensor("s", np.float32(0.02)), tensor("z", np.int8(0)), tensor("w", w),
             tensor("ws", np.full(4, 0.01, np.float32))]
    out["matmul"] = (model(nodes, [("x", "float32", [2, 6])], [("y", "float32", [2, 4])], inits).SerializeToString(),
                     {"x": rng.normal(size=(2, 6)).astype(np.float32)})
    return out


def _structural(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One structural damage of the model, through the protobuf messages."""
    onnx, helper, numpy_helper = onnx_api()
    m = onnx.ModelProto()
    m.ParseFromString(data)
    g = m.graph
    kind = rng.choice(["opset", "ir", "attribute", "drop-attribute", "tensor-type", "tensor-dims", "tensor-data",
                       "drop-initializer", "drop-input", "cycle", "op-type", "domain", "external", "raw-empty"])
    n = rng.choice(list(g.node))
    init = rng.choice(list(g.initializer))
    if kind == "opset":
        m.opset_import[0].version = rng.choice([0, 1, 9, 10, 12, 18, 22, 26, 99, -1, 2**40])
    elif kind == "ir":
        m.ir_version = rng.choice([0, 1, 3, 11, 99, -5])
    elif kind == "attribute":
        name = rng.choice(["axis", "block_size", "saturate", "output_dtype", "precision", "to"])
        value = rng.choice([-(2**40), -3, -1, 0, 1, 2, 5, 16, 2**31, 2**62])
        for a in list(n.attribute):
            if a.name == name:
                n.attribute.remove(a)
        n.attribute.append(rng.choice([helper.make_attribute(name, value), helper.make_attribute(name, float(value)),
                                       helper.make_attribute(name, [value, 1]), helper.make_attribute(name, "x")]))
    elif kind == "drop-attribute" and n.attribute:
        n.attribute.remove(rng.choice(list(n.attribute)))
    elif kind == "tensor-type":
        init.data_type = rng.choice([0, 1, 2, 3, 5, 6, 7, 9, 10, 11, 16, 17, 19, 20, 21, 22, 23, 25, 26, 40])
    elif kind == "tensor-dims":
        del init.dims[:]
        init.dims.extend(rng.choice([[], [0], [-1], [2**40], [1, 1, 1], [3], [2, 2], [4, 2]]))
    elif kind == "tensor-data":
        raw = init.raw_data
        init.raw_data = rng.choice([b"", raw[: len(raw) // 2], raw + b"\x00", b"\xff" * max(len(raw), 1),
                                    raw[::-1]])
    elif kind == "drop-initializer":
        g.initializer.remove(init)
    elif kind == "drop-input":
        del g.input[:]
    elif kind == "cycle":
        n.input[0] = n.output[0]
    elif kind == "op-type":
        n.op_type = rng.choice(["QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "QLinearMatMul", "Nope"])
    elif kind == "domain":
        n.domain = rng.choice(["com.microsoft", "ai.onnx", "bogus"])
    elif kind == "external":
        init.data_location = onnx.TensorProto.EXTERNAL
        del init.external_data[:]
        for k, v in rng.choice([[("location", "../../etc/passwd")], [("location", "missing.bin")],
                                [("location", "x"), ("offset", "-1"), ("length", "99999999999")], []]):
            e = init.external_data.add()
            e.key, e.value = k, v
    elif kind == "raw-empty":
        init.ClearField("raw_data")
    return m.SerializeToString(), f"{kind} ({n.op_type} / {init.name})"


def test_fuzz_damaged_onnx_models(tmp_path):
    seeds = _seeds()
    names = sorted(seeds)
    rng = random.Random(f"{F.SEED}-onnx-models")
    count = max(20, int(100 * F.SCALE))
    stats = {"reports": 0, "refused": 0}
    for i in range(count):
        name = names[i % len(names)]
        data, inputs = seeds[name]
        if i < len(names):
            damage = "none"
        elif i % 2:
            data, damage = _structural(data, rng)
        else:
            data, damage = fuzz_files.mutate(data, rng), "bytes mutated"
        if F.FROM > i >= len(names):      # a resumed run: made, not checked
            continue
        what = f"mutant {i} of {name}: {damage}"
        got = F.isolated(lambda: _check_and_audit(data, inputs), TIMEOUT, what)
        if i < len(names):
            assert "error" not in got[1], (what, got)
        stats["reports" if got[1].startswith("'ok") else "refused"] += 1
    print(f"onnx models: {count} damaged{f' (checked from mutant {F.FROM})' if F.FROM else ''}, {stats}")
    assert stats["refused"] and stats["reports"], stats
