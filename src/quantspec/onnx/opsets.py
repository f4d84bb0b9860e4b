"""The ONNX opset table for QuantizeLinear (Q) and DequantizeLinear (DQ): what each version allows.

One row per operator version (10, 13, 19, 21, 23, 24, 25, 28), transcribed from the operator
schemas of onnx 1.23.2 (``onnx.defs.get_schema``).  The validation in
:mod:`quantspec.onnx.plan`, the error messages and ``docs/onnx.md`` all read this table; a test
checks it against ``onnx.defs`` so it cannot drift.

A version is *the* version in force for a model's opset: opset 22 uses version 21, opset 26 and 27
use version 25.  :func:`version_for` maps an opset to its version.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import OpsetError

__all__ = ["OpsetRow", "VERSIONS", "NEWEST", "version_for", "row", "ATTRIBUTE_SINCE"]

_INT8 = ("int8", "uint8")
_F8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
_FLOATS = ("float", "float16", "bfloat16")


@dataclass(frozen=True)
class OpsetRow:
    """What one version of Q and DQ accepts (type names as in :mod:`quantspec.dtypes`)."""

    version: int
    q_x: tuple[str, ...]             # QuantizeLinear x (T1)
    q_scale: tuple[str, ...]         # QuantizeLinear y_scale
    q_scale_is_x_type: bool          # y_scale shares x's type parameter (versions 19 and 21)
    q_out: tuple[str, ...]           # QuantizeLinear y / y_zero_point
    q_attrs: tuple[str, ...]         # QuantizeLinear attributes
    dq_x: tuple[str, ...]            # DequantizeLinear x / x_zero_point
    dq_scale: tuple[str, ...]        # DequantizeLinear x_scale
    dq_out: tuple[str, ...]          # DequantizeLinear y (output_dtype choices; else the scale type)
    dq_attrs: tuple[str, ...]        # DequantizeLinear attributes
    precision: tuple[str, ...] = ()  # QuantizeLinear `precision` choices


VERSIONS: tuple[OpsetRow, ...] = (
    OpsetRow(10, q_x=("float", "int32"), q_scale=("float",), q_scale_is_x_type=False, q_out=_INT8,
             q_attrs=(), dq_x=(*_INT8, "int32"), dq_scale=("float",), dq_out=("float",), dq_attrs=()),
    OpsetRow(13, q_x=("float", "int32"), q_scale=("float",), q_scale_is_x_type=False, q_out=_INT8,
             q_attrs=("axis",), dq_x=(*_INT8, "int32"), dq_scale=("float",), dq_out=("float",),
             dq_attrs=("axis",)),
    OpsetRow(19, q_x=(*_FLOATS, "int32"), q_scale=(*_FLOATS, "int32"), q_scale_is_x_type=True,
             q_out=(*_INT8, *_F8), q_attrs=("axis", "saturate"),
             dq_x=(*_INT8, "int32", *_F8), dq_scale=_FLOATS, dq_out=_FLOATS, dq_attrs=("axis",)),
    OpsetRow(21, q_x=(*_FLOATS, "int32"), q_scale=(*_FLOATS, "int32"), q_scale_is_x_type=True,
             q_out=(*_INT8, "int16", "uint16", *_F8, "uint4", "int4"),
             q_attrs=("axis", "saturate", "block_size", "output_dtype"),
             dq_x=(*_INT8, "int16", "uint16", "int32", *_F8, "uint4", "int4"), dq_scale=_FLOATS,
             dq_out=_FLOATS, dq_attrs=("axis", "block_size")),
    OpsetRow(23, q_x=(*_FLOATS, "int32"), q_scale=(*_FLOATS, "int32"), q_scale_is_x_type=False,
             q_out=(*_INT8, "int16", "uint16", *_F8, "uint4", "int4", "float4e2m1"),
             q_attrs=("axis", "saturate", "block_size", "output_dtype", "precision"),
             dq_x=(*_INT8, "int16", "uint16", "int32", *_F8, "uint4", "int4", "float4e2m1"), dq_scale=_FLOATS,
             dq_out=_FLOATS, dq_attrs=("axis", "block_size", "output_dtype"), precision=_FLOATS),
    OpsetRow(24, q_x=(*_FLOATS, "int32"), q_scale=(*_FLOATS, "int32", "float8e8m0"), q_scale_is_x_type=False,
             q_out=(*_INT8, "int16", "uint16", *_F8, "uint4", "int4", "float4e2m1"),
             q_attrs=("axis", "saturate", "block_size", "output_dtype", "precision"),
             dq_x=(*_INT8, "int16", "uint16", "int32", *_F8, "uint4", "int4", "float4e2m1"),
             dq_scale=(*_FLOATS, "float8e8m0"), dq_out=_FLOATS, dq_attrs=("axis", "block_size", "output_dtype"),
             precision=_FLOATS),
    OpsetRow(25, q_x=(*_FLOATS, "int32"), q_scale=(*_FLOATS, "int32", "float8e8m0"), q_scale_is_x_type=False,
             q_out=(*_INT8, "int16", "uint16", *_F8, "uint4", "int4", "float4e2m1", "uint2", "int2"),
             q_attrs=("axis", "saturate", "block_size", "output_dtype", "precision"),
             dq_x=(*_INT8, "int16", "uint16", "int32", *_F8, "uint4", "int4", "float4e2m1", "uint2", "int2"),
             dq_scale=(*_FLOATS, "float8e8m0"), dq_out=_FLOATS, dq_attrs=("axis", "block_size", "output_dtype"),
             precision=_FLOATS),
    OpsetRow(28, q_x=(*_FLOATS, "int32"), q_scale=(*_FLOATS, "int32", "float8e8m0"), q_scale_is_x_type=False,
             q_out=(*_INT8, "int16", "uint16", *_F8, "uint4", "int4", "float4e2m1", "uint2", "int2",
                    "float6e2m3", "float6e3m2"),
             q_attrs=("axis", "saturate", "block_size", "output_dtype", "precision"),
             dq_x=(*_INT8, "int16", "uint16", "int32", *_F8, "uint4", "int4", "float4e2m1", "uint2", "int2",
                   "float6e2m3", "float6e3m2"),
             dq_scale=(*_FLOATS, "float8e8m0"), dq_out=_FLOATS, dq_attrs=("axis", "block_size", "output_dtype"),
             precision=_FLOATS),
)

NEWEST = VERSIONS[-1].version
_BY_VERSION = {r.version: r for r in VERSIONS}

#: attribute -> (first Q version, first DQ version) that has it; None = never
ATTRIBUTE_SINCE = {
    attr: tuple(next((r.version for r in VERSIONS if attr in getattr(r, f"{op}_attrs")), None) for op in ("q", "dq"))
    for attr in ("axis", "saturate", "block_size", "output_dtype", "precision")
}


def version_for(opset: int | None, argument: str = "opset") -> int:
    """The Q/DQ version in force for ``opset`` (None = the newest)."""
    if opset is None:
        return NEWEST
    if isinstance(opset, bool) or not isinstance(opset, int):
        raise OpsetError(argument, "must be an integer ONNX opset number (or None for the newest)", opset)
    if opset < VERSIONS[0].version:
        raise OpsetError(argument, f"QuantizeLinear/DequantizeLinear first exist in opset {VERSIONS[0].version}", opset)
    return max(r.version for r in VERSIONS if r.version <= opset)


def row(opset: int | None, argument: str = "opset") -> OpsetRow:
    """The table row in force for ``opset``."""
    return _BY_VERSION[version_for(opset, argument)]


def markdown() -> str:
    """The opset table as Markdown (the table in docs/onnx.md)."""

    def names(types):
        return ", ".join(types)

    lines = ["| version | Q: x | Q: y_scale | Q: outputs | Q attributes | DQ: x | DQ: x_scale | DQ attributes |",
             "|---|---|---|---|---|---|---|---|"]
    for r in VERSIONS:
        scale = "same type as x" if r.q_scale_is_x_type else names(r.q_scale)
        lines.append(f"| {r.version} | {names(r.q_x)} | {scale} | {names(r.q_out)} | {names(r.q_attrs) or '-'} | "
                     f"{names(r.dq_x)} | {names(r.dq_scale)} | {names(r.dq_attrs) or '-'} |")
    return "\n".join(lines) + "\n"
