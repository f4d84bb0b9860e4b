"""``quantspec demo``: the main job, on data that ships with quantspec.

1. Quantizes a bundled weight tensor (``data/demo_weights.npz``: one linear layer, 128 x 256,
   heavy-tailed, with outliers) under several ONNX schemes — per-tensor, per-channel, blocked, int8 to
   float4 — and prints each scheme's round-trip error and size, and how many codes onnxruntime and
   onnx.reference would compute differently for the float16 copy of the same weights (reproduced by
   quantspec's compat modes: neither runtime needs to be installed).
2. Further sections (TensorFlow, LiteRT) when those halves of quantspec are present.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from dataclasses import dataclass
from importlib import resources

import ml_dtypes
import numpy as np

from .dtypes import qtype
from .errors import QuantSpecError
from .onnx.plan import ort_support
from .onnxmodels.io import one_node_model
from .versions import VERIFIED

__all__ = ["main", "load_demo_weights", "onnx_schemes"]


def load_demo_weights() -> np.ndarray:
    with resources.files("quantspec.data").joinpath("demo_weights.npz").open("rb") as f:
        with np.load(f) as z:
            return z["weight"]


@dataclass
class Row:
    scheme: str
    bits: float          # storage bits per weight, scales included
    rel_rms: float       # ||w - dq(q(w))|| / ||w||
    max_abs: float
    vs_ort: str          # differing codes vs onnxruntime on the float16 weights
    vs_ref: str          # differing codes vs onnx.reference on the float16 weights
    ran_ort: bool = False   # onnxruntime itself ran (else compat="onnxruntime" computed the column)
    ran_ref: bool = False   # onnx.reference itself ran


def _amax(w: np.ndarray, axis=None, keepdims=False) -> np.ndarray:
    a = np.max(np.abs(w), axis=axis, keepdims=keepdims)
    return np.where(a == 0, 1.0, a).astype(np.float32)


def _blocks(w: np.ndarray, b: int) -> np.ndarray:
    r, c = w.shape
    return w.reshape(r, c // b, b)


def onnx_schemes(w: np.ndarray):
    """(name, quantize kwargs, bits per weight) for each scheme, with scales fitted to ``w``."""
    r, c = w.shape
    mn, mx = float(min(w.min(), 0)), float(max(w.max(), 0))
    s_u8 = np.float32((mx - mn) / 255)
    zp_u8 = np.uint8(np.clip(np.rint(-mn / s_u8), 0, 255))
    mx_exp = np.floor(np.log2(_amax(_blocks(w, 32), axis=2))) - 2  # OCP MX: shared exponent - emax(e2m1)
    return [
        ("int8 per-tensor symmetric", dict(y_scale=_amax(w) / 127, y_zero_point=np.int8(0)), 8 + 32 / w.size),
        ("uint8 per-tensor asymmetric", dict(y_scale=s_u8, y_zero_point=zp_u8), 8 + 40 / w.size),
        ("int8 per-channel (axis 0)", dict(y_scale=_amax(w, 1) / 127, y_zero_point=np.zeros(r, np.int8), axis=0),
         8 + 40 / c),
        ("int4 per-channel (axis 0)", dict(y_scale=_amax(w, 1) / 7, output_dtype="int4", axis=0), 4 + 32 / c),
        ("int4 blocked, block 32", dict(y_scale=_amax(_blocks(w, 32), 2) / 7, output_dtype="int4", axis=1,
                                         block_size=32), 4 + 32 / 32),
        ("float8e4m3fn per-tensor", dict(y_scale=_amax(w) / 448, output_dtype="float8e4m3fn"), 8 + 32 / w.size),
        ("float8e5m2 per-tensor", dict(y_scale=_amax(w) / 57344, output_dtype="float8e5m2"), 8 + 32 / w.size),
        ("float4e2m1 blocked 32, e8m0 scales (MXFP4)",
         dict(y_scale=np.ldexp(1.0, mx_exp.astype(int)).astype(np.float32).astype(ml_dtypes.float8_e8m0fnu),
              output_dtype="float4e2m1", axis=1, block_size=32), 4 + 8 / 32),
    ]


def _f16_kwargs(kwargs: dict) -> dict:
    kw = dict(kwargs)
    if np.asarray(kw["y_scale"]).dtype == np.float32:
        kw["y_scale"] = np.asarray(kw["y_scale"]).astype(np.float16)
    return kw


def _qdq_model(x: np.ndarray, kw: dict):
    """A one-node QuantizeLinear model (opset 25) of these arguments, for the real runtimes."""
    out = qtype(kw.get("output_dtype") or np.asarray(kw["y_zero_point"]).dtype)
    attrs = {k: kw[k] for k in ("axis", "block_size") if k in kw}
    if kw.get("output_dtype"):
        attrs["output_dtype"] = out.onnx
    return one_node_model("QuantizeLinear", x, kw["y_scale"], kw.get("y_zero_point"), attrs, out, opset=25)


def _ran(mode: str, x16: np.ndarray, kw: dict) -> np.ndarray | None:
    """The installed runtime's codes (onnxruntime with graph optimizations off, or onnx.reference), or
    None when it is not installed; an exception when it cannot run this model."""
    try:
        if mode == "onnxruntime":
            import onnxruntime  # noqa: F401
        else:
            from onnx.reference import ReferenceEvaluator
    except Exception:
        return None
    model = _qdq_model(x16, kw)
    if mode == "reference":
        with np.errstate(all="ignore"):
            return np.asarray(ReferenceEvaluator(model).run(None, {"x": x16})[0])
    from .onnxmodels.graph import read_graph
    from .onnxmodels.ortrun import run_exposed

    return run_exposed(read_graph(model), ["y"], {"x": x16}, [])["y"]


def _differences(x16: np.ndarray, kwargs: dict, mode: str) -> tuple[str, bool]:
    """How many codes the runtime (``mode``) gives differently from the spec on ``x16``, and whether the
    runtime itself ran (else quantspec's ``compat=mode`` computed them).  Where it ran, quantspec's
    reproduction must give its bytes: a mismatch is reported, never hidden."""
    from . import onnx as qo

    kw = _f16_kwargs(kwargs)
    try:
        spec = qo.quantize_linear(x16, **kw)
        ours = qo.quantize_linear(x16, compat=mode, **kw)
    except QuantSpecError as e:
        return ("no kernel" if "no CPU kernel" in str(e) else "refuses"), False
    try:
        theirs = _ran(mode, x16, kw)
    except Exception:
        theirs = None
    ran = theirs is not None
    if ran and theirs.view(np.uint8).tobytes() != ours.view(np.uint8).tobytes():
        return "MISMATCH", True           # quantspec's reproduction is wrong: say so
    n = int(np.count_nonzero(spec.view(np.uint8) != ours.view(np.uint8)))
    return (f"{n} codes" if n else "identical"), ran


def onnx_rows(w: np.ndarray) -> list[Row]:
    from . import onnx as qo

    rows = []
    x16 = w.astype(np.float16)
    for name, kw, bits in onnx_schemes(w):
        q = qo.quantize_linear(w, **kw)
        dq_kw = {k.replace("y_", "x_"): v for k, v in kw.items() if k != "output_dtype"}
        if np.asarray(kw["y_scale"]).dtype == ml_dtypes.float8_e8m0fnu:
            dq_kw["output_dtype"] = "float"
        back = qo.dequantize_linear(q, **dq_kw).astype(np.float32)
        err = back - w
        (vs_ort, ran_ort), (vs_ref, ran_ref) = _differences(x16, kw, "onnxruntime"), _differences(x16, kw, "reference")
        rows.append(Row(name, bits, float(np.linalg.norm(err) / np.linalg.norm(w)), float(np.abs(err).max()),
                        vs_ort, vs_ref, ran_ort, ran_ref))
    return rows


def _print_rows(rows: list[Row], out) -> None:
    head = f"{'scheme':<44} {'bits/w':>6} {'rel. RMS err':>12} {'max |err|':>10}   {'onnxruntime':>12} {'onnx.reference':>14}"
    print(head, file=out)
    print("-" * len(head), file=out)
    for r in rows:
        print(f"{r.scheme:<44} {r.bits:6.2f} {r.rel_rms:12.2e} {r.max_abs:10.2e}   {r.vs_ort:>12} {r.vs_ref:>14}",
              file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="quantspec demo", description=__doc__.split("\n\n")[0])
    parser.parse_args(argv or [])
    out = sys.stdout
    t0 = time.perf_counter()
    w = load_demo_weights()
    print(f"quantspec demo — bundled weight tensor {w.shape} {w.dtype}, max |w| = {np.abs(w).max():.4f}\n", file=out)
    from ._fastpath import jit

    # small data, one process: the numpy reference path (the same bytes) is done before the fast
    # kernels would have loaded (or, on a new machine, compiled); QUANTSPEC_FAST=1 forces them
    small = jit.prefer_reference(w.size)
    with jit.reference_only() if small else contextlib.nullcontext():
        rows = onnx_rows(w)
        print("ONNX QuantizeLinear / DequantizeLinear (spec semantics). The last two columns count the codes that\n"
              "onnxruntime and onnx.reference compute differently from the spec for the float16 copy of the weights:",
              file=out)
        print(_sources(rows) + "\n", file=out)
        _print_rows(rows, out)
        for section in _extra_sections():
            print(file=out)
            section(w, out)
    path = "quantspec's numpy reference path (the fast kernels give the same bytes; at this size they " \
        "would not pay for loading)" if small or not jit.enabled() else "quantspec's fast kernels"
    print(f"\ndone in {time.perf_counter() - t0:.2f} s, computed on {path}", file=out)
    return 0


def _sources(rows: list[Row]) -> str:
    """Which columns the installed runtimes computed themselves, and which quantspec's compat modes
    computed (reproducing the version named)."""
    from . import versions

    def says(name: str, ran: bool, mode: str, version: str) -> str:
        if ran:
            return f"{name} {versions.installed(name if name != 'onnx.reference' else 'onnx')} ran (installed); " \
                   f"quantspec's compat=\"{mode}\" gave the same bytes"
        return f"{name} is not installed: quantspec's compat=\"{mode}\" computed its column ({name} {version})"

    ort = says("onnxruntime", any(r.ran_ort for r in rows), "onnxruntime", ort_support().version)
    ref = says("onnx.reference", any(r.ran_ref for r in rows), "reference", VERIFIED["onnx"][0])
    return f"- {ort};\n- {ref}."


def _extra_sections():
    """Sections contributed by the TensorFlow and LiteRT halves, when present."""
    sections = []
    for module in ("quantspec.tf._demo", "quantspec.litert._demo"):
        try:
            mod = __import__(module, fromlist=["section"])
        except ImportError:
            continue
        sections.append(mod.section)
    return sections
