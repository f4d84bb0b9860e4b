"""onnxruntime's MatMulNBitsQuantizer writes different 4-bit codes in its two formats at ties and near them.

With ``quant_format=QOperator`` (a com.microsoft MatMulNBits node) MLAS quantizes
``roundf(v * (1 / scale) + zp)`` in float32, the zero point (8 for a symmetric block) added before
rounding; with ``quant_format=QDQ`` (a DequantizeLinear of int4 codes) it rounds ``v * (1 / scale)``
first, ``roundf`` (ties away from zero).  So a tie below zero rounds up in one and down in the other
(-2.5: -2 against -3), and where the float32 addition rounds the quotient onto a tie the codes
differ below it too: ``2.4999998 + 8`` is ``10.5`` in float32, which rounds to 11, code 3, where
``roundf(2.4999998)`` is 2.  Measured here against onnxruntime (the codes are its own), with the rule
computed independently in numpy, and quantspec's two forms (``format="matmulnbits"`` and the
DequantizeLinear form of ``int4-b32``) checked to follow each format.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

from refs import require

#: v / scale for scale 1 (a block whose largest magnitude is -8.0): ties, values one float32 step
#: below ties, values whose float32 sum with 8 is a tie
QUOTIENTS = np.array([np.nextafter(np.float32(2.5), np.float32(0)), 2.5, -0.5, 0.5, 1.5,
                      np.nextafter(np.float32(-2.5), np.float32(0)), -2.5, 3.5, -1.5,
                      np.nextafter(np.float32(0.5), np.float32(0)), 0.0, -0.0], np.float32)
K, N = 32, 2


def _weight() -> np.ndarray:
    w = np.zeros((K, N), np.float32)
    w[0, :] = -8.0                                   # symmetric block scale: -8 / -8 = 1 (column 0)
    w[1:1 + QUOTIENTS.size, 0] = QUOTIENTS
    w[1:1 + QUOTIENTS.size, 1] = QUOTIENTS * np.float32(0.75)
    return w


def _roundf(x: np.ndarray) -> np.ndarray:
    """C's roundf: ties away from zero (exact in float64 for float32 inputs)."""
    x = x.astype(np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _model(path):
    onnx = require("onnx")
    from onnx import helper, numpy_helper

    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", 1, [1, K])],
                          [helper.make_tensor_value_info("y", 1, [1, N])],
                          initializer=[numpy_helper.from_array(_weight(), "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, str(path))
    return path


def _ort(path, fmt: str) -> dict:
    onnx = require("onnx")
    require("onnxruntime")
    require("onnx_ir")
    from onnx import numpy_helper
    from onnxruntime.quantization import QuantFormat
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    q = MatMulNBitsQuantizer(onnx.load(str(path)), block_size=32, is_symmetric=True,
                             quant_format=getattr(QuantFormat, fmt))
    q.process()
    return {t.name: numpy_helper.to_array(t) for t in q.model.model.graph.initializer}


def _qoperator_codes(packed: np.ndarray) -> np.ndarray:
    """MatMulNBits' uint8 [N, blocks, 16] (two codes a byte, the even one low) as signed codes [K, N]."""
    codes = np.stack([packed & 15, packed >> 4], -1).reshape(N, -1)[:, :K].astype(np.int64) - 8
    return codes.T


@pytest.fixture(scope="module")
def ort_codes(tmp_path_factory):
    path = _model(tmp_path_factory.mktemp("ties") / "w.onnx")
    qop = _ort(path, "QOperator")
    qdq = _ort(path, "QDQ")
    return path, qop, qdq


def test_the_two_formats_differ_as_the_rule_says(ort_codes):
    _, qop, qdq = ort_codes
    assert sorted(qop) == ["W_Q4", "W_scales"] and sorted(qdq) == ["W_DQ_Q4", "W_DQ_scales"]
    assert qop["W_scales"].tobytes() == qdq["W_DQ_scales"].T.tobytes()        # the same scales
    s = qop["W_scales"][0, 0]
    assert s == 1.0
    rows = slice(1, 1 + QUOTIENTS.size)
    got_qop = _qoperator_codes(qop["W_Q4"])[rows, 0]
    got_qdq = np.asarray(qdq["W_DQ_Q4"]).astype(np.int64)[rows, 0]
    q = QUOTIENTS * (np.float32(1) / s)
    want_qop = _roundf(q + np.float32(8)) - 8               # the sum in float32, then roundf
    want_qdq = _roundf(q)
    assert got_qop.tolist() == want_qop.astype(np.int64).tolist()
    assert got_qdq.tolist() == want_qdq.astype(np.int64).tolist()
    # the example of the docs: x / s = 2.4999998 gives 3 in QOperator, 2 in QDQ; the tie -2.5: -2 and -3
    assert (got_qop[0], got_qdq[0]) == (3, 2)
    assert (got_qop[6], got_qdq[6]) == (-2, -3)
    assert int((got_qop != got_qdq).sum()) == 5


def test_quantspec_follows_each_format(ort_codes, tmp_path):
    onnx = require("onnx")
    from onnx import numpy_helper

    from quantspec.onnxmodels import convert_model

    path, qop, qdq = ort_codes
    convert_model(str(path), tmp_path / "nb.onnx", "int4-b32", format="matmulnbits")
    convert_model(str(path), tmp_path / "dq.onnx", "int4-b32")
    nb = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "nb.onnx")).graph.initializer}
    dq = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "dq.onnx")).graph.initializer}
    assert all(nb[k].tobytes() == qop[k].tobytes() for k in qop)
    assert dq["W_quantized"].astype(np.int64).tolist() == np.asarray(qdq["W_DQ_Q4"]).astype(np.int64).tolist()
