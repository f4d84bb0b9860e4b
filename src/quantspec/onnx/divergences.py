"""Where the ONNX operator text, onnx.reference 1.23.2 and onnxruntime 1.31.1 / 1.32.0 disagree — as data.

Each :class:`Divergence` row names a behaviour, gives one concrete input that shows it, and records
what each of them does with it: the output codes, or ``ERROR`` when that runtime refuses the
input.  The ``onnxruntime`` column is onnxruntime 1.31.1's; ``onnxruntime_132`` is 1.32.0's where
it differs (``SAME``: as 1.31.1); :func:`onnxruntime_for` reads the column of a release.
``docs/onnx.md`` renders this table (:func:`markdown`), and ``tests/test_onnx_divergences.py``
runs every row through onnx.reference, the installed onnxruntime (against its release's column),
the independent spec oracle and quantspec's compat modes (``"onnxruntime"`` with every reproduced
``ort_version``), so the table can never drift from what the runtimes really do.

Outputs are written as integers for integer types and as their bit patterns (hex) for the float8 /
float4 / float6 types; floats for DequantizeLinear.  ``not_reproduced`` lists a mode whose runtime
behaviour quantspec deliberately does not copy, with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Divergence", "DIVERGENCES", "ERROR", "SAME", "ORT_COLUMNS", "onnxruntime_for", "markdown"]

ERROR = "error"
SAME = "same"           # onnxruntime 1.32.0 gives what 1.31.1 gives
INF = float("inf")
NAN = float("nan")


@dataclass(frozen=True)
class Divergence:
    key: str
    behaviour: str
    op: str                         # "QuantizeLinear" or "DequantizeLinear"
    x: tuple                        # flat values; reshaped to ``shape``
    x_type: str
    scale: Any                      # a number or a tuple (with ``scale_shape``)
    scale_type: str
    zero_point: Any = None          # a number, a tuple, or None
    zero_point_type: str | None = None
    attrs: dict = field(default_factory=dict)
    shape: tuple | None = None
    scale_shape: tuple = ()
    opset: int = 25
    spec: Any = None                # expected outputs (tuple) or ERROR
    reference: Any = None
    onnxruntime: Any = None         # onnxruntime 1.31.1
    note: str = ""
    not_reproduced: dict = field(default_factory=dict)   # mode -> reason
    onnxruntime_132: Any = SAME     # onnxruntime 1.32.0, where it differs from 1.31.1


#: the onnxruntime releases of the table and their columns
ORT_COLUMNS = {"1.31.1": "onnxruntime", "1.32.0": "onnxruntime_132"}


def onnxruntime_for(row: Divergence, version: str) -> Any:
    """What onnxruntime ``version`` (a reproduced release: "1.31.1", "1.32.0") gives for ``row``."""
    from .plan import ort_support

    column = ORT_COLUMNS[ort_support(version).version]
    values = getattr(row, column)
    return row.onnxruntime if values == SAME else values


def _q(key, behaviour, x, x_type, scale, scale_type, zp, zp_type, spec, reference, onnxruntime, **kw):
    return Divergence(key, behaviour, "QuantizeLinear", tuple(x), x_type, scale, scale_type, zp, zp_type,
                      spec=spec, reference=reference, onnxruntime=onnxruntime, **kw)


DIVERGENCES: tuple[Divergence, ...] = (
    _q("f16-quotient", "float16 x and scale: precision of the quotient", [112.375], "float16", 1.37890625, "float16",
       0, "uint8", spec=(82,), reference=(82,), onnxruntime=(81,), onnxruntime_132=(82,),
       note="spec and onnx.reference divide in float16 (x/s = 81.4958 rounds to 81.5, then to even 82); "
            "onnxruntime 1.31 divides in float32 (81.4958 -> 81); 1.32 divides in the scale's type from Q-23 on"),
    _q("f16-quotient-before-23", "float16 x and scale before opset 23", [112.375], "float16", 1.37890625, "float16",
       0, "uint8", opset=21, spec=(82,), reference=(82,), onnxruntime=(81,),
       note="onnxruntime (1.32 too) divides in float32 before QuantizeLinear-23"),
    _q("f32-x-f16-scale", "float32 x, float16 scale, no `precision` (opset >= 23)", [164.11521911621094], "float",
       0.8662109375, "float16", 0, "uint8", spec=(190,), reference=(189,), onnxruntime=ERROR, onnxruntime_132=(190,),
       note="spec: the scale's type sets the precision, so x is rounded to float16 first; onnx.reference lets numpy "
            "promote to float32; onnxruntime 1.31 fails at run time on mixed types (microsoft/onnxruntime#32719), "
            "1.32 computes as the spec (microsoft/onnxruntime#32735)"),
    _q("precision-attribute", "`precision=float16` with float32 x and scale", [180.86685180664062], "float",
       1.6666924953460693, "float", 0, "uint8", attrs={"precision": "float16"}, spec=(108,), reference=(108,),
       onnxruntime=(109,), onnxruntime_132=(108,),
       note="onnxruntime 1.31 ignores `precision` and divides in float32; 1.32 divides in float16"),
    _q("precision-bfloat16", "`precision=bfloat16`", [180.86685180664062], "float", 1.6666924953460693, "float", 0,
       "uint8", attrs={"precision": "bfloat16"}, spec=(109,), reference=(109,), onnxruntime=(109,),
       onnxruntime_132=ERROR, note="onnxruntime 1.31 ignores `precision`; 1.32 accepts only float and float16 "
                                   "(it refuses the session)"),
    _q("inf-to-int", "±inf to an integer type", [INF, -INF], "float", 1.0, "float", 0, "int8",
       spec=(127, -128), reference=(-128, -128), onnxruntime=(127, -128),
       note="onnx.reference casts inf to int32 (INT32_MIN on x86), then clips; onnxruntime's MLAS path clamps in "
            "float first"),
    _q("huge-to-int", "|x/s| >= 2^31 to an integer type", [3e9, 1e38], "float", 1.0, "float", 0, "int8",
       spec=(127, 127), reference=(-128, -128), onnxruntime=(127, 127)),
    _q("nan-negative-zp", "NaN with a negative zero point", [NAN], "float", 1.0, "float", -3, "int8",
       spec=(-128,), reference=(127,), onnxruntime=(-128,),
       note="onnx.reference: NaN -> INT32_MIN, then `+= zp` wraps around in int32 to 2^31-3, which clips to qmax"),
    _q("f16-inf", "+inf in float16 input", [INF], "float16", 1.0, "float16", 0, "int8",
       spec=(127,), reference=(-128,), onnxruntime=(-128,), onnxruntime_132=(127,),
       note="onnxruntime 1.31's float16 path is a plain loop with a C int32 cast, like onnx.reference; 1.32 clamps "
            "in float"),
    _q("f16-nan-negative-zp", "NaN and ±inf in float16 input, int16 with a negative zero point", [NAN, INF, -INF],
       "float16", 1.0, "float16", -3, "int16", spec=(-32768, 32767, -32768), reference=(32767,) * 3,
       onnxruntime=(32767,) * 3, onnxruntime_132=(-32768, 32767, -32768),
       note="onnxruntime 1.31 (plain loop) and onnx.reference: INT32_MIN + zp wraps around to 2^31-3, which clips "
            "to qmax; onnxruntime 1.32 clamps in float (NaN -> qmin)"),
    _q("int4-position", "+inf to int4, per-axis, odd channel length", [INF] * 18, "float", (1.0, 1.0), "float",
       (0, 0), "int4", shape=(2, 9), scale_shape=(2,), attrs={"axis": 0},
       spec=(7,) * 18, reference=(-8,) * 18, onnxruntime=(7,) * 8 + (-8, -8) + (7,) * 8, onnxruntime_132=(7,) * 18,
       note="onnxruntime 1.31 quantizes the even-aligned middle of each channel with MLAS (7) and an odd head or "
            "tail element with a plain cast (-8): elements [0, 8] and [1, 0]; 1.32 clamps in float everywhere"),
    _q("int2-huge", "±inf and |x/s| >= 2^31 to int2", [3e9, INF, -1e10], "float", 1.0, "float", None, None,
       attrs={"output_dtype": "int2"}, spec=(1, 1, -2), reference=(-2, -2, -2), onnxruntime=(-2, -2, -2),
       onnxruntime_132=(1, 1, -2), note="onnxruntime 1.31 computes 2-bit outputs in its plain loop (INT32_MIN); "
                                        "1.32 clamps in float"),
    _q("blocked-non-last-axis", "+inf, blocked along a non-last axis", [INF] * 6, "float", (1.0,) * 4, "float",
       None, None, shape=(3, 2), scale_shape=(2, 2), attrs={"axis": 0, "block_size": 2, "output_dtype": "int8"},
       opset=21, spec=(127,) * 6, reference=(-128,) * 6, onnxruntime=(-128,) * 6, onnxruntime_132=(127,) * 6,
       note="onnxruntime 1.31 quantizes blocks along a non-last axis in its plain loop; 1.32 clamps in float"),
    _q("e4m3fn-sat0-480", "float8e4m3fn, saturate=0, 480 <= |x/s| < 496", [480.0, -490.0], "float", 1.0, "float",
       0.0, "float8e4m3fn", attrs={"saturate": 0}, spec=(0x7F, 0xFF), reference=(0x7F, 0xFF),
       onnxruntime=(0x7E, 0xFE), note="onnxruntime returns ±448 instead of NaN"),
    _q("e5m2-sat0-61440", "float8e5m2, saturate=0, 61440 <= |x/s| < 65536", [61440.0, -65000.0], "float", 1.0,
       "float", 0.0, "float8e5m2", attrs={"saturate": 0}, spec=(0x7C, 0xFC), reference=(0x7C, 0xFC),
       onnxruntime=(0x7F, 0xFF), note="onnxruntime returns NaN instead of ±inf"),
    _q("e5m2-nan", "NaN encoding of float8e5m2", [NAN], "float", 1.0, "float", 0.0, "float8e5m2",
       spec=(0x7E,), reference=(0x7E,), onnxruntime=(0x7F,), note="quantspec's spec mode encodes NaN as ml_dtypes does"),
    _q("f16-to-float8", "float16 x and scale to float8e4m3fn", [117.6875], "float16", 1.548828125, "float16", 0.0,
       "float8e4m3fn", spec=(0x6A,), reference=(0x6A,), onnxruntime=(0x69,), onnxruntime_132=(0x6A,),
       note="the float16 quotient 76.0 is a tie between 72 and 80 in e4m3fn (to even: 80, 0x6a); onnxruntime "
            "1.31's float32 quotient 75.98 rounds to 72 (0x69)"),
    _q("float4-zero-point", "a zero point with float4e2m1 output", [1.0], "float", 1.0, "float", 1.0, "float4e2m1",
       spec=(0x4,), reference=(0x4,), onnxruntime=ERROR,
       note="the zero point is added in float (1 + 1 = 2); onnxruntime has no float4 kernel"),
    _q("float4-nan", "NaN to float4e2m1 (no NaN encoding)", [NAN], "float", 1.0, "float", None, None,
       attrs={"output_dtype": "float4e2m1"}, spec=(0x7,), reference=(0x8,), onnxruntime=ERROR,
       note="spec: onnx docs/technical/float4.md says NaN -> 6; onnx.reference (ml_dtypes) gives -0"),
    _q("float6-nan", "NaN to float6e3m2 (no NaN encoding)", [NAN], "float", 1.0, "float", None, None,
       attrs={"output_dtype": "float6e3m2"}, opset=28, spec=(0x1F,), reference=(0x20,), onnxruntime=ERROR,
       note="spec: onnx docs/technical/float6.md saturates NaN to the maximum (28); onnx.reference gives -0"),
    _q("int32-x", "int32 x with a float32 scale", [16777729], "int32", 1024.0, "float", None, None,
       attrs={"output_dtype": "int16"}, spec=(16384,), reference=(16385,), onnxruntime=ERROR,
       note="spec: x is converted to float32 (16777728) and divided in float32 (a tie, to even); onnx.reference "
            "divides in float64 (numpy promotes int32 / float32)"),
    _q("per-axis-scalar-zp", "a scalar zero point with a per-axis scale", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "float",
       (1.0, 2.0, 4.0), "float", 5, "uint8", shape=(2, 3), scale_shape=(3,), attrs={"axis": 1},
       spec=ERROR, reference=(6, 6, 6, 9, 7, 7), onnxruntime=ERROR,
       note="the text requires the zero point to have the scale's shape; onnx.reference broadcasts it"),
    _q("blocked-out-of-range", "block_size outside [ceil(D/S), ceil(D/(S-1))-1]", [1.0, 2.0, 3.0, 4.0], "float",
       (1.0, 2.0), "float", None, None, shape=(1, 4), scale_shape=(1, 2), attrs={"axis": 1, "block_size": 5},
       spec=ERROR, reference=(1, 2, 3, 4), onnxruntime=ERROR,
       note="with D=4 and S=2 only block_size 2 or 3 is valid; onnx.reference repeats and cuts"),
    _q("size1-rank2-scale", "a [1, 1] scale with block_size 0", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "float", (0.5,),
       "float", None, None, shape=(3, 2), scale_shape=(1, 1), spec=ERROR, reference=(2, 4, 6, 8, 10, 12),
       onnxruntime=ERROR, note="onnx.reference takes any one-element scale as per-tensor"),
    Divergence("dq-int32-zero-point", "DequantizeLinear of int32 with a non-zero zero point", "DequantizeLinear",
               (-2147483648, 16777217), "int32", 1.0, "float", 3, "int32",
               spec=ERROR, reference=(-2147483648.0, 16777213.0), onnxruntime=(2147483648.0, 16777214.0),
               note="the text gives int32 no zero point; onnx.reference converts x to float32 and subtracts in "
                    "float64, onnxruntime subtracts in int32 with wrap-around (-2^31 - 3 -> 2^31 - 3)"),
    Divergence("dq-float8-zero-point-shape", "DequantizeLinear of float8 with an all-zero zero point of another "
               "shape than the scale", "DequantizeLinear", (1.0, 2.0), "float8e4m3fn", 1.0, "float", (0.0, 0.0, 0.0),
               "float8e4m3fn", spec=ERROR, reference=(1.0, 2.0), onnxruntime=ERROR,
               note="onnx.reference reads a float8 zero point only to check that it is zero (any shape; an empty one "
                    "fails) and then ignores it"),
    Divergence("dq-float8-zero-point-half", "DequantizeLinear of float8 with a zero point of 0.5",
               "DequantizeLinear", (1.0, 2.0), "float8e4m3fn", 1.0, "float", 0.5, "float8e4m3fn",
               spec=ERROR, reference=(1.0, 2.0), onnxruntime=ERROR,
               note="onnx.reference checks the zero point converted to uint8, which reads 0.5 (and -0.5, -0.0) as 0"),
    Divergence("dq-e8m0-no-output-dtype", "DequantizeLinear with a float8e8m0 scale and no output_dtype",
               "DequantizeLinear", (-3, 5), "int8", 0.5, "float8e8m0", opset=25,
               spec=ERROR, reference=(0xFF, 0x80), onnxruntime=ERROR,
               note="the output takes the scale's type, which is not an allowed output; onnx.reference returns e8m0 "
                    "(negative values become NaN 0xff)"),
    Divergence("dq-before-19", "DequantizeLinear at opset 10/13", "DequantizeLinear", (-3, 5), "int8", 0.5, "float",
               1, "int8", opset=13, spec=(-2.0, 2.0), reference=ERROR, onnxruntime=(-2.0, 2.0),
               note="onnx.reference implements DequantizeLinear only from version 19",
               not_reproduced={"reference": "quantspec computes the (unchanged) arithmetic instead of failing"}),
    _q("bfloat16-input", "bfloat16 input", [1.5, 2.5], "bfloat16", 1.0, "bfloat16", 0, "uint8",
       spec=(2, 2), reference=(2, 2), onnxruntime=ERROR, note="onnxruntime has no bfloat16 kernels"),
)


def _show(values) -> str:
    if values == ERROR:
        return "error"
    if not isinstance(values, tuple):
        return str(values)
    parts = []
    run_value, run = None, 0

    def flush():
        if run:
            parts.append(_fmt(run_value) + (f" ×{run}" if run > 1 else ""))

    for v in values:
        if run and _fmt(v) == _fmt(run_value):
            run += 1
        else:
            flush()
            run_value, run = v, 1
    flush()
    return ", ".join(parts)


def _fmt(v) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _codes(row: Divergence, values) -> str:
    from ..dtypes import qtype

    if values == ERROR:
        return "error"
    out = row.zero_point_type or row.attrs.get("output_dtype")
    if row.op == "DequantizeLinear":
        out = "float" if row.scale_type != "float8e8m0" else "float8e8m0"
    t = qtype(out) if out else None
    if t is not None and t.is_float and t.bits <= 8:
        return _show(tuple(f"0x{int(v):02x}" for v in values))
    return _show(values)


def markdown() -> str:
    """The divergence table as Markdown (the table in docs/onnx.md)."""
    head = ("| key | behaviour | input | spec (`compat=\"spec\"`) | onnx.reference 1.23.2 (`\"reference\"`) | "
            "onnxruntime 1.31.1 (`\"onnxruntime\"`, `ort_version=\"1.31\"`) | onnxruntime 1.32.0 "
            "(`ort_version=\"1.32\"`) | why |\n|---|---|---|---|---|---|---|---|\n")
    rows = []
    for r in DIVERGENCES:
        attrs = ", ".join(f"{k}={v}" for k, v in r.attrs.items())
        zp = "" if r.zero_point is None else f", zp={r.zero_point} ({r.zero_point_type})"
        shape = f" shape {r.shape}" if r.shape else ""
        inp = (f"{r.op[:-6]} x={_show(r.x)} ({r.x_type}{shape}), scale={r.scale} ({r.scale_type}){zp}"
               + (f", {attrs}" if attrs else "") + f", opset {r.opset}")
        why = r.note + "".join(f" **Not reproduced in `{m}` mode:** {why}." for m, why in r.not_reproduced.items())
        rows.append(f"| `{r.key}` | {r.behaviour} | {inp} | {_codes(r, r.spec)} | {_codes(r, r.reference)} | "
                    f"{_codes(r, r.onnxruntime)} | {_codes(r, onnxruntime_for(r, '1.32.0'))} | {why} |")
    return head + "\n".join(rows) + "\n"


if __name__ == "__main__":  # pragma: no cover
    print(markdown())
