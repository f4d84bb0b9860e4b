"""Every scheme of ``quantspec convert``, byte for byte against the tools and rules it names.

A sharded bfloat16 checkpoint with Llama-style names (tests/support/checkpoint_corpus.py, values that break
converters planted in it) is converted under every scheme, in slabs of a few rows (so that slab
boundaries, packed rows and the row steps are exercised), on the fast path and on the numpy path.
Then, for each scheme:

- integer schemes: codes, scales and zero points equal ``onnxruntime.quantization``'s
  ``quantize_data`` per channel (per tensor for int8-tensor), the routine its weight quantizer calls;
- int4 / uint4: equal to onnxruntime's MatMulNBits QDQ routine (``quantize_qdq_matmul_4bits``) on the
  ``[in, out]`` float32 weight the quantizer builds, and to ``MatMulNBitsQuantizer`` itself on a model;
- float8: the scale by its rule (computed here), codes equal onnxruntime's QuantizeLinear of it;
- MX: equal to an independent implementation of the OCP MX v1.0 rule written below;
- litert: equal to ``quantspec.litert.weight_params`` / ``quantize_weights``;
- every scheme: ``dequantize`` equals ONNX DequantizeLinear run on the stored bytes by onnxruntime
  (or onnx.reference where onnxruntime lacks the types: e8m0 scales, float4, float6); every file opens
  with ``safetensors.safe_open(framework="pt")`` (bfloat16 and float8 tensors under their safetensors
  dtypes) and the index names every tensor once.
"""

from __future__ import annotations

import ctypes
import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import checkpoint_corpus
from refs import require, require_fast

from quantspec import checkpoint
from quantspec.checkpoint import layout
from quantspec.checkpoint.schemes import SCHEMES
from quantspec.dtypes import qtype

ALL = list(SCHEMES)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "src"
    return path, checkpoint_corpus.build(path)


@pytest.fixture(scope="module")
def converted(corpus, tmp_path_factory):
    """scheme -> converted checkpoint directory (fast path; slabs of about 3 KB)."""
    require_fast()
    src, _ = corpus
    base = tmp_path_factory.mktemp("out")
    saved = layout.SLAB_BYTES
    layout.SLAB_BYTES = 3000
    try:
        return {s: _convert(src, base / s, s) for s in ALL}
    finally:
        layout.SLAB_BYTES = saved


def _convert(src, dst, scheme):
    rep = checkpoint.convert(src, dst, scheme, max_shard_size="20KB", progress=False)
    assert rep.quantized and len(rep.shards) > 1
    return dst


def _weights(values, scheme):
    s = SCHEMES[scheme]
    return {n: v for n, v in values.items() if v.dtype == np.float32 and s.takes("bfloat16", v.shape) is None}


def test_the_numpy_path_writes_the_same_bytes(corpus, converted, tmp_path, monkeypatch):
    """Every file, error statistics included: the sums are taken in one fixed order on both paths
    (a run whose workers take different paths, or a cluster of unlike machines, writes the same
    bytes as one process)."""
    src, _ = corpus
    monkeypatch.setenv("QUANTSPEC_FAST", "0")
    monkeypatch.setattr(layout, "SLAB_BYTES", 3000)
    for s in ALL:
        ref = _convert(src, tmp_path / s, s)
        names = sorted(p.name for p in converted[s].iterdir())
        assert names == sorted(p.name for p in ref.iterdir())
        for f in names:
            assert (ref / f).read_bytes() == (converted[s] / f).read_bytes(), (s, f)


def test_error_statistics_are_summed_in_the_documented_order():
    """encode._ordered_sum against a plain-Python statement of the order, on rows whose rounding
    depends on it (odd lengths, partial lane groups, magnitudes a few decades apart)."""
    from quantspec.checkpoint.encode import STATS_LANES, _ordered_sum

    rng = np.random.default_rng(7)
    for rows, cols in [(1, 1), (3, 63), (2, 64), (5, 65), (4, 200), (1, 1000)]:
        a = rng.standard_normal((rows, cols)) ** 2 * 10.0 ** rng.integers(-3, 3, (rows, cols))
        total = 0.0
        for r in range(rows):
            lanes = [0.0] * STATS_LANES
            for j in range(cols):
                lanes[j % STATS_LANES] += float(a[r, j])
            while len(lanes) > 1:
                lanes = [lanes[2 * k] + lanes[2 * k + 1] for k in range(len(lanes) // 2)]
            total += lanes[0]
        assert _ordered_sum(a) == total


def test_block_reductions_of_the_kernels_equal_numpy():
    """nbprim.minmax_keys32 / minmax_keys16 / amax_bits32 (the blocks' ranges of the blocked and MX
    kernels: one vector load and LLVM's vector reductions) against numpy on the order keys, with
    ties, both zeros, subnormals and extreme values, at every offset of a row."""
    require_fast()
    from numba import njit

    from quantspec._fastpath.nbprim import amax_bits32, minmax_keys16, minmax_keys32, uxor

    @njit
    def reduce_all(buf, out):
        for j in range(buf.size - 31):
            k = np.uint64(j)
            out[j, 0], out[j, 1] = minmax_keys32(buf, k)
            out[j, 2], out[j, 3] = minmax_keys16(buf, k)
            out[j, 4] = amax_bits32(buf, k)
            out[j, 5] = uxor(out[j, 4], np.uint32(0xFFFFFFFF))

    rng = np.random.default_rng(3)
    special = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, -3.4028235e38, 3.4028235e38, 0.5, -0.5, 2.0],
                       np.float32)
    buf = np.concatenate([rng.standard_normal(64).astype(np.float32), rng.choice(special, 96),
                          np.zeros(40, np.float32), -np.zeros(40, np.float32)])
    out = np.zeros((buf.size - 31, 6), np.uint32)
    reduce_all(buf, out)
    bits = buf.view(np.uint32)
    keys = np.where(bits >> 31 == 1, ~bits, bits | np.uint32(0x80000000))
    for j in range(buf.size - 31):
        assert out[j, 0] == keys[j:j + 32].min() and out[j, 1] == keys[j:j + 32].max(), j
        assert out[j, 2] == keys[j:j + 16].min() and out[j, 3] == keys[j:j + 16].max(), j
        assert out[j, 4] == (bits[j:j + 32] & np.uint32(0x7FFFFFFF)).max(), j
        assert out[j, 5] == ~out[j, 4], j


@pytest.mark.parametrize("scheme", ALL)
def test_files_open_with_safetensors_and_the_index_names_each_tensor_once(converted, scheme):
    safetensors = require("safetensors")
    require("torch")
    from safetensors import safe_open

    out = converted[scheme]
    index = json.loads((out / "model.safetensors.index.json").read_text())
    seen = []
    for shard in sorted(out.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as f:
            for k in f.keys():
                f.get_tensor(k)
                seen.append(k)
                assert index["weight_map"][k] == shard.name
    assert sorted(seen) == sorted(index["weight_map"]) and len(set(seen)) == len(seen)
    assert safetensors is not None
    assert not [p for p in out.iterdir() if p.name.startswith(".")]     # nothing temporary is left


def _ck(converted, scheme):
    return checkpoint.open(converted[scheme])


# -- onnxruntime's integer weight parameters ---------------------------------------------------------
@pytest.mark.parametrize("scheme", ["int8", "uint8-asym", "int8-tensor"])
def test_integer_schemes_equal_onnxruntime_quantize_data(corpus, converted, scheme):
    require("onnxruntime")
    from onnx import TensorProto
    from onnxruntime.quantization.quant_utils import quantize_data

    _, values = corpus
    ck = _ck(converted, scheme)
    s = SCHEMES[scheme]
    qtype_ = TensorProto.UINT8 if s.zero_point else TensorProto.INT8
    for name, w in _weights(values, scheme).items():
        codes = ck.codes(name)
        scale, zp, attrs = ck.params(name)
        if s.granularity == "tensor":
            z, sc, q = quantize_data(w.flatten(), qtype_, True)
            assert np.float32(sc).tobytes() == scale.astype(np.float32).tobytes(), name
            assert int(z) == 0 and zp is None and attrs == {}
            assert q.tobytes() == codes.tobytes(), name
            continue
        assert attrs == {"axis": 0}
        for c in range(w.shape[0]):
            z, sc, q = quantize_data(w[c].flatten(), qtype_, not s.zero_point)
            assert np.asarray(sc, np.float32).tobytes() == scale[c:c + 1].tobytes(), (name, c)
            assert q.tobytes() == codes[c].tobytes(), (name, c)
            if s.zero_point:
                assert int(z) == int(zp[c]), (name, c)
            else:
                assert int(z) == 0 and zp is None


# -- onnxruntime MatMulNBits -------------------------------------------------------------------------
def _nbits_routine(w: np.ndarray, block: int, symmetric: bool):
    """onnxruntime's QDQ int4 routine on the [in, out] weight the quantizer builds: (codes [out, in],
    scales [out, blocks], zero points [out, blocks])."""
    from onnxruntime.capi._pybind_state import quantize_qdq_matmul_4bits

    b = np.ascontiguousarray(w.T)
    rows, cols = b.shape
    kb = -(-rows // block)
    packed = np.zeros((rows * cols + 1) // 2, np.uint8)
    zp = np.zeros((cols * kb + 1) // 2, np.uint8)
    sc = np.zeros((kb, cols), np.float32)
    quantize_qdq_matmul_4bits(packed, b, sc, zp, block, cols, rows, symmetric)
    return _unpack4(packed, (rows, cols)).T, sc.T, _unpack4(zp, (kb, cols)).T


def _unpack4(raw: np.ndarray, shape) -> np.ndarray:
    n = math.prod(shape)
    u = np.empty(raw.size * 2, np.uint8)
    u[0::2], u[1::2] = raw & 15, raw >> 4
    return u[:n].reshape(shape)


NBITS = [s for s in ALL if SCHEMES[s].params == "ort-nbits"]


@pytest.mark.parametrize("scheme", NBITS)
def test_int4_schemes_equal_onnxruntime_matmulnbits_routine(corpus, converted, scheme):
    require("onnxruntime")
    _, values = corpus
    s = SCHEMES[scheme]
    ck = _ck(converted, scheme)
    for name, w in _weights(values, scheme).items():
        codes, scale, zp = _nbits_routine(w, s.block, not s.zero_point)
        ours_scale, ours_zp, attrs = ck.params(name)
        assert attrs == {"axis": 1, "block_size": s.block}
        assert (ck.codes(name).view(np.uint8) & 15).tobytes() == codes.tobytes(), name
        assert np.ascontiguousarray(scale).tobytes() == ours_scale.tobytes(), name
        if s.zero_point:
            assert ours_zp.view(np.uint8).tobytes() == np.ascontiguousarray(zp).tobytes(), name
        else:
            assert ours_zp is None


@pytest.mark.parametrize("scheme", ["int4-b32", "uint4-b16-asym", "uint4-b256-asym", "int4-b128"])
def test_int4_schemes_equal_matmulnbitsquantizer_on_a_model(corpus, converted, scheme):
    """The tool itself (needs the ``onnx_ir`` package, which the quantizer imports)."""
    require("onnx_ir")
    import logging

    from onnx import TensorProto, helper, numpy_helper
    from onnxruntime.quantization.matmul_nbits_quantizer import (DefaultWeightOnlyQuantConfig,
                                                                 MatMulNBitsQuantizer)
    from onnxruntime.quantization.quant_utils import QuantFormat

    _, values = corpus
    s = SCHEMES[scheme]
    ck = _ck(converted, scheme)
    logging.disable(logging.INFO)
    try:
        for name in ["model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.odd_proj.weight", "lm_head.weight"]:
            w = values[name]
            n, k = w.shape
            g = helper.make_graph([helper.make_node("MatMul", ["a", "w"], ["y"])], "g",
                                  [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, k])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
                                  initializer=[numpy_helper.from_array(np.ascontiguousarray(w.T), "w")])
            model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
            q = MatMulNBitsQuantizer(model, algo_config=DefaultWeightOnlyQuantConfig(
                block_size=s.block, is_symmetric=not s.zero_point, quant_format=QuantFormat.QDQ))
            q.process()
            inits = {i.name: i for i in q.model.model.graph.initializer}
            codes = _unpack4(np.frombuffer(inits["w_DQ_Q4"].raw_data, np.uint8), (k, n)).T
            assert (ck.codes(name).view(np.uint8) & 15).tobytes() == np.ascontiguousarray(codes).tobytes(), name
            scale = numpy_helper.to_array(inits["w_DQ_scales"]).T
            assert np.ascontiguousarray(scale).tobytes() == ck.params(name)[0].tobytes(), name
            if s.zero_point:
                zp = numpy_helper.to_array(inits["w_DQ_zero_points"]).T
                assert np.ascontiguousarray(zp).view(np.uint8).tobytes() == ck.params(name)[1].view(np.uint8).tobytes()
            dq = [nd for nd in q.model.model.graph.node if nd.op_type == "DequantizeLinear"][0]
            assert {a.name: helper.get_attribute_value(a) for a in dq.attribute} == {"axis": 0, "block_size": s.block}
    finally:
        logging.disable(logging.NOTSET)


def test_int4_ties_round_half_away_as_the_tool_does(corpus, converted):
    """The rule's recorded departure from QuantizeLinear: x * (1/scale) rounded half away from zero
    (the planted row: scale 1, so 2.5 -> 3 where QuantizeLinear gives 2)."""
    _, values = corpus
    ck = _ck(converted, "int4-b32")
    row = checkpoint_corpus_row(values["model.layers.0.mlp.down_proj.weight"], -8)
    codes = ck.codes("model.layers.0.mlp.down_proj.weight")[row].astype(np.int8)
    assert ck.params("model.layers.0.mlp.down_proj.weight")[0][row, 0] == 1.0
    assert codes[:8].tolist() == [-8, 0, 3, -2, 1, 4, -3, 7]          # QuantizeLinear: [.., 2, -2, 0, 4, -2, 7]
    assert ck.describe("model.layers.0.mlp.down_proj.weight")["codes_rule"] == "ort-nbits"


def checkpoint_corpus_row(w: np.ndarray, first: float) -> int:
    return int(np.nonzero(w[:, 0] == first)[0][0])


# -- float8 ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scheme", ["fp8-e4m3", "fp8-e5m2", "fp8-e4m3-channel"])
def test_fp8_scale_rule_and_codes_equal_onnxruntime_quantizelinear(corpus, converted, scheme):
    require("onnxruntime")
    _, values = corpus
    s = SCHEMES[scheme]
    ck = _ck(converted, scheme)
    t = qtype(s.codes)
    big = np.float32(ml_dtypes.finfo(t.dtype).max)
    for name, w in _weights(values, scheme).items():
        amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=None if s.granularity == "tensor" else 1).astype(np.float32)
        want = np.where(amax == 0, np.float32(1), amax / big).astype(np.float32)
        scale, zp, attrs = ck.params(name)
        assert zp is None and scale.tobytes() == np.ascontiguousarray(want).tobytes(), name
        got = _ort_q(w, scale, s.codes, attrs)
        assert got.tobytes() == ck.codes(name).view(np.uint8).tobytes(), name


def _ort_q(x, scale, out_type, attrs):
    """onnxruntime QuantizeLinear (opset 21, ORT_DISABLE_ALL), output read as raw bytes."""
    ort = require("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper

    t = qtype(out_type)
    zp = helper.make_tensor("zp", t.onnx, list(np.shape(scale)), np.zeros(np.size(scale), np.uint8).tobytes(),
                            raw=True)
    node = helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", t.onnx, list(x.shape))],
                          initializer=[numpy_helper.from_array(np.asarray(scale, np.float32), "scale"), zp])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    (ov,) = sess.run_with_ort_values(None, {"x": ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(x))})
    return np.frombuffer(ctypes.string_at(ov.data_ptr(), x.size), np.uint8)


# -- OCP MX, written independently ------------------------------------------------------------------------
_ELEMENTS = {"float4e2m1": (ml_dtypes.float4_e2m1fn, 2), "float6e2m3": (ml_dtypes.float6_e2m3fn, 2),
             "float6e3m2": (ml_dtypes.float6_e3m2fn, 4), "float8e4m3fn": (ml_dtypes.float8_e4m3fn, 8),
             "float8e5m2": (ml_dtypes.float8_e5m2, 15)}


def _grid(dtype):
    """(positive finite values sorted, their codes) of an element type."""
    bits = {ml_dtypes.float4_e2m1fn: 4, ml_dtypes.float6_e2m3fn: 6, ml_dtypes.float6_e3m2fn: 6}.get(dtype, 8)
    codes = np.arange(1 << (bits - 1), dtype=np.uint8)          # the sign bit clear
    vals = codes.view(dtype).astype(np.float64)
    keep = np.isfinite(vals)
    order = np.argsort(vals[keep], kind="stable")
    return vals[keep][order], codes[keep][order], bits


def ocp_mx(x: np.ndarray, elem: str):
    """OCP MX v1.0 §6.3 on rows of float32 values, blocks of 32 along axis 1: per block
    shared_exp = floor(log2(max |V|)) - emax_elem (clamped to the E8M0 range [-127, 127]; an all-zero
    block takes -127), X = 2^shared_exp, P_i = the element nearest V_i / X (ties to the even
    encoding), normal values beyond the largest clamped to it.  INT8 elements: two's complement
    values k * 2^-6, rounded half to even, clamped to [-128, 127].  Returns (shared exponents,
    element codes as uint8)."""
    rows, cols = x.shape
    nb = -(-cols // 32)
    shared = np.zeros((rows, nb), np.int64)
    codes = np.zeros((rows, cols), np.uint8)
    emax = 0 if elem == "int8" else _ELEMENTS[elem][1]
    grid = None if elem == "int8" else _grid(_ELEMENTS[elem][0])
    for r in range(rows):
        for b in range(nb):
            v = x[r, 32 * b:32 * b + 32].astype(np.float64)
            amax = np.abs(v).max()
            e = math.frexp(amax)[1] - 1 - emax if amax > 0 else -127
            e = min(max(e, -127), 127)
            shared[r, b] = e
            q = v / 2.0 ** e
            if elem == "int8":
                k = np.clip(np.rint(q * 64), -128, 127).astype(np.int64)
                codes[r, 32 * b:32 * b + len(v)] = (k & 0xFF).astype(np.uint8)
                continue
            vals, vcodes, bits = grid
            a = np.minimum(np.abs(q), vals[-1])
            hi = np.clip(np.searchsorted(vals, a), 1, len(vals) - 1)
            lo = hi - 1
            dlo, dhi = a - vals[lo], vals[hi] - a
            pick = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(vcodes[lo] % 2 == 0, lo, hi)))
            c = vcodes[pick].astype(np.uint8)
            c[a == vals[0]] = vcodes[0]
            sign = np.signbit(q)
            codes[r, 32 * b:32 * b + len(v)] = c | (sign.astype(np.uint8) << (bits - 1))
    return shared, codes


MX = [s for s in ALL if SCHEMES[s].params == "mx"]


@pytest.mark.parametrize("scheme", MX)
def test_mx_schemes_equal_an_independent_ocp_implementation(corpus, converted, scheme):
    _, values = corpus
    s = SCHEMES[scheme]
    ck = _ck(converted, scheme)
    elem = "int8" if s.codes == "int8" else s.codes
    for name, w in _weights(values, scheme).items():
        shared, codes = ocp_mx(w, elem)
        scale, zp, attrs = ck.params(name)
        assert zp is None and attrs == {"axis": 1, "block_size": 32}
        stored = scale.view(np.uint8).astype(np.int64) - 127
        ours = ck.codes(name).view(np.uint8)
        if elem != "int8":
            assert (stored == shared).all(), name
            assert ours.tobytes() == codes.tobytes(), name
            continue
        # MXINT8: the stored scale is X * 2^-6, which e8m0 holds unless X < 2^-121 (the recorded departure)
        fits = shared - 6 >= -127
        assert (stored[fits] == shared[fits] - 6).all() and (stored[~fits] == -127).all(), name
        block_ok = np.repeat(fits, 32, axis=1)[:, :w.shape[1]]
        assert (ours[block_ok] == codes[block_ok]).all(), name


def test_mxint8_departure_is_only_where_e8m0_cannot_hold_the_scale(corpus, converted):
    _, values = corpus
    w = values["model.layers.0.mlp.down_proj.weight"]
    shared, _ = ocp_mx(w, "int8")
    assert (shared - 6 < -127).any()                    # the planted subnormal rows reach it
    assert (shared - 6 >= -127).sum() > 10


# -- litert -----------------------------------------------------------------------------------------------
def test_litert_equals_quantspec_litert_converter_weights(corpus, converted):
    from quantspec.litert.params import quantize_weights, weight_params

    _, values = corpus
    ck = _ck(converted, "litert")
    for name, w in _weights(values, "litert").items():
        p = weight_params(w, axis=0)
        q = quantize_weights(w, p)
        scale, zp, attrs = ck.params(name)
        assert zp is None and attrs == {"axis": 0}
        assert scale.tobytes() == p.scale.tobytes() and ck.codes(name).tobytes() == q.tobytes(), name


# -- dequantize is DequantizeLinear on the stored bytes ------------------------------------------------------
def _raw_initializer(name: str, type_name: str, shape, data: bytes):
    from onnx import helper

    return helper.make_tensor(name, qtype(type_name).onnx, list(shape), data, raw=True)


def _stored_bytes(ck, spec: dict) -> bytes:
    return np.ascontiguousarray(ck.raw(spec["name"])).tobytes()


@pytest.mark.parametrize("scheme", ALL)
def test_dequantize_equals_dequantizelinear_on_the_stored_bytes(corpus, converted, scheme):
    onnx = require("onnx")
    from onnx import TensorProto, helper

    _, values = corpus
    ck = _ck(converted, scheme)
    s = SCHEMES[scheme]
    ort_ok = s.scale_type == "float" and qtype(s.codes).bits in (4, 8)
    for name in _weights(values, scheme):
        rec = ck.describe(name)
        inits = [_raw_initializer("x", s.codes, rec["codes"]["shape"], _stored_bytes(ck, rec["codes"])),
                 _raw_initializer("scale", rec["scale"]["type"], rec["scale"]["shape"], _stored_bytes(ck, rec["scale"]))]
        inputs = ["x", "scale"]
        if rec["zero_point"] is not None:
            inits.append(_raw_initializer("zp", s.codes, rec["zero_point"]["shape"], _stored_bytes(ck, rec["zero_point"])))
            inputs.append("zp")
        attrs = dict(rec["dequantize"]["attributes"])
        node = helper.make_node("DequantizeLinear", inputs, ["y"], **attrs)
        shape = rec["source"]["shape"]
        g = helper.make_graph([node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                              initializer=inits)
        opset = 21 if ort_ok else max(rec["dequantize"]["opset"], 25)
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        if ort_ok:
            ort = require("onnxruntime")
            model.ir_version = 10
            so = ort.SessionOptions()
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            (y,) = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {})
        else:
            from onnx.reference import ReferenceEvaluator

            (y,) = ReferenceEvaluator(model).run(None, {})
        ours = ck.dequantize(name)
        assert ours.dtype == np.float32 and y.dtype == np.float32
        assert ours.tobytes() == np.ascontiguousarray(y).tobytes(), (scheme, name)
    assert onnx is not None


@pytest.mark.parametrize("scheme", ["int8", "int4-b32", "mxfp4", "fp8-e4m3"])
def test_kept_tensors_pass_through_and_read_back(corpus, converted, scheme):
    _, values = corpus
    ck = _ck(converted, scheme)
    for name, v in values.items():
        if name in _weights(values, scheme):
            continue
        assert ck.scheme(name) == "keep"
        data = ck.codes(name)
        if v.dtype == np.float32:
            assert data.dtype == ml_dtypes.bfloat16 and (data.astype(np.float32) == v).all()
            assert ck.dequantize(name).tobytes() == v.tobytes()
        else:
            assert data.dtype == v.dtype and (data == v).all()
    rec = ck.describe("model.norm.weight")
    assert rec["data"]["stored"] == "BF16" and rec["data"]["type"] == "bfloat16" and "takes" in rec["reason"]


def test_manifest_records_source_spec_operator_and_digest(corpus, converted):
    from quantspec.checkpoint.digest import xxh64_py

    src, values = corpus
    ck = _ck(converted, "uint4-b32-asym")
    name = "model.layers.1.self_attn.q_proj.weight"
    rec = ck.describe(name)
    assert rec["spec"] == "onnx" and rec["dequantize"] == {"operator": "DequantizeLinear", "opset": 21,
                                                          "attributes": {"axis": 1, "block_size": 32}}
    assert rec["source"]["dtype"] == "bfloat16" and rec["source"]["shape"] == [80, 80]
    # the digest: XXH64 over the XXH64 hashes of the source bytes, digest_rows rows at a time (the
    # plain-Python twin of the kernel, itself tested against xxHash's vectors)
    raw = values[name].astype(ml_dtypes.bfloat16).view(np.uint8).reshape(80, -1)
    step = rec["source"]["digest_rows"]
    pieces = b"".join(xxh64_py(raw[r:r + step].tobytes()).to_bytes(8, "big") for r in range(0, 80, step))
    assert rec["source"]["digest"] == "xxh64:" + xxh64_py(pieces).to_bytes(8, "big").hex()
    assert ck.source(name)["file"].startswith("model-0000")
    with open(sorted(Path(converted["uint4-b32-asym"]).glob("model-00001-of-*.safetensors"))[0], "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n))["__metadata__"]
    shard_records = json.loads(meta["quantspec.manifest"])["tensors"]
    for k, v in shard_records.items():               # each shard's metadata holds its tensors' records
        full = ck.describe(k)
        assert v["source"] == full["source"] and v["scheme"] == full["scheme"]
