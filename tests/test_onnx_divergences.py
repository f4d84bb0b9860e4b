"""Every row of the ONNX divergence table, run through the real runtimes and quantspec.

For each row: onnx.reference and the installed onnxruntime give exactly the documented result of
their column (the installed release's: 1.31.1, or 1.32.0 under ``PYTHONPATH=$QUANTSPEC_ORT_ALT``,
tests/test_onnx_ort_versions.py), or fail where the table says "error"; the independent spec oracle
gives the documented spec result; and quantspec's compat modes reproduce their column, onnxruntime
once per reproduced release (except where the row documents that a mode does not).  docs/onnx.md
must contain the table as rendered from the data.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import onnx_corpus as C
import onnx_oracles as O
import onnx_spec_oracle as S
import quantspec
from quantspec.dtypes import qtype
from quantspec.errors import QuantSpecError
from quantspec.onnx.divergences import DIVERGENCES, ERROR, ORT_COLUMNS, markdown, onnxruntime_for

DOCS = Path(__file__).resolve().parents[1] / "docs" / "onnx.md"


def _inputs(r):
    xt = qtype(r.x_type)
    with np.errstate(all="ignore"):
        x = np.array(r.x, dtype=np.float64 if xt.is_float else np.int64).astype(
            np.float32 if xt.is_float else xt.storage).astype(xt.dtype)
    if r.shape:
        x = x.reshape(r.shape)
    st = qtype(r.scale_type)
    s = np.asarray(r.scale, dtype=np.float32).astype(st.dtype).reshape(r.scale_shape)
    zp = None
    if r.zero_point is not None:
        zt = qtype(r.zero_point_type)
        zp = np.asarray(r.zero_point, dtype=np.float64 if zt.is_float else np.int64)
        zp = zp.astype(np.float32 if zt.is_float else zt.storage).astype(zt.dtype)
        if zp.size == s.size:
            zp = zp.reshape(r.scale_shape)
    attrs = {k: (qtype(v).onnx if k in ("output_dtype", "precision") else v) for k, v in r.attrs.items()}
    return x, s, zp, attrs


def _as_documented(r, y: np.ndarray):
    t = qtype(y.dtype)
    flat = y.reshape(-1)
    if t.is_int:
        return tuple(int(v) for v in flat.astype(np.int64))
    if t.bits <= 8:
        return tuple(int(v) for v in flat.view(np.uint8))
    return tuple(float(v) for v in flat.astype(np.float64))


def _same(a, b) -> bool:
    if a == ERROR or b == ERROR:
        return a == b
    return len(a) == len(b) and all(
        (isinstance(u, float) and isinstance(v, float) and math.isnan(u) and math.isnan(v)) or u == v
        for u, v in zip(a, b))


def _out_type(r) -> str:
    if r.op == "DequantizeLinear":
        return r.scale_type if "output_dtype" not in r.attrs else r.attrs["output_dtype"]
    return r.zero_point_type or r.attrs.get("output_dtype", "uint8")


@pytest.mark.parametrize("row", DIVERGENCES, ids=lambda r: r.key)
def test_runtimes_do_what_the_table_says(row):
    x, s, zp, attrs = _inputs(row)
    try:
        with np.errstate(all="ignore"):
            got = _as_documented(row, O.reference(row.op, row.opset, x, s, zp, **attrs))
    except Exception:
        got = ERROR
    assert _same(got, row.reference), f"onnx.reference gives {got}"
    try:
        with np.errstate(all="ignore"):
            got = _as_documented(row, O.ort(row.op, min(row.opset, 25), x, s, zp, out_type=_out_type(row), **attrs))
    except Exception:
        got = ERROR
    want = onnxruntime_for(row, O.ort_version())
    assert _same(got, want), f"onnxruntime {O.ort_version()} gives {got}"


@pytest.mark.parametrize("row", [r for r in DIVERGENCES if r.spec != ERROR], ids=lambda r: r.key)
def test_spec_column_matches_the_independent_oracle(row):
    x, s, zp, attrs = _inputs(row)
    out = _out_type(row)
    axis = row.attrs.get("axis", 1)
    g = "tensor" if s.size == 1 else "block" if row.attrs.get("block_size") else "axis"
    s_full = C.expand(s, x.shape, axis, row.attrs.get("block_size", 0), g)
    z_full = (C.expand(zp, x.shape, axis, row.attrs.get("block_size", 0), g if zp.size > 1 else "tensor")
              if zp is not None else None)
    precision = row.attrs.get("precision") or {"int32": "double", "float8e8m0": "float"}.get(row.scale_type,
                                                                                            row.scale_type)
    want = []
    for i in np.ndindex(x.shape):
        xv = int(x[i]) if qtype(x.dtype).is_int else float(x[i].astype(np.float32))
        sv = float(s_full[i].astype(np.float32))
        zv = None if z_full is None else (int(z_full[i].astype(np.int64)) if qtype(z_full.dtype).is_int
                                          else float(z_full[i].astype(np.float32)))
        if row.op == "QuantizeLinear":
            v = S.quantize(xv, sv, zv, precision, out, bool(row.attrs.get("saturate", 1)))
        else:
            v = S.dequantize(xv, sv, zv, out)
        want.append(v)
    t = qtype(out)
    if t.is_float and t.bits <= 8:
        with np.errstate(all="ignore"):
            codes = np.array(want, np.float64).astype(np.float32).astype(t.dtype).view(np.uint8)
        want = tuple(int(c) for c in codes)
    else:
        want = tuple(want)
    assert _same(want, row.spec), f"oracle gives {want}"


@pytest.mark.parametrize("mode", ["spec", "reference"] + [f"onnxruntime {v}" for v in ORT_COLUMNS])
@pytest.mark.parametrize("row", DIVERGENCES, ids=lambda r: r.key)
def test_quantspec_reproduces_each_column(row, mode):
    x, s, zp, _ = _inputs(row)
    mode, _, ort_version = mode.partition(" ")
    expected = (row.not_reproduced and mode in row.not_reproduced and row.spec
                or (onnxruntime_for(row, ort_version) if ort_version else getattr(row, mode)))
    kw = {"ort_version": ort_version} if ort_version else {}
    fn = quantspec.onnx.quantize_linear if row.op == "QuantizeLinear" else quantspec.onnx.dequantize_linear
    try:
        got = _as_documented(row, fn(x, s, zp, opset=row.opset, compat=mode, **row.attrs, **kw))
    except QuantSpecError:
        got = ERROR
    assert _same(got, expected), f"quantspec compat={mode!r} gives {got}"


def test_docs_hold_the_rendered_table():
    assert markdown() in DOCS.read_text()
