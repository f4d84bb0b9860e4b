"""Prepare step of ONNX QuantizeLinear / DequantizeLinear: every check, and the resolved parameters.

:func:`plan_quantize` and :func:`plan_dequantize` turn the user's arguments into a frozen plan —
the output type, the division precision, the granularity with its normalised axis and block size,
the scale and zero point as typed arrays — or raise a :mod:`quantspec.errors` exception that names
the argument, the rule and the value.  The compute step (:mod:`quantspec.onnx.reference`) is then
plain array arithmetic on the plan.

The rules come from the operator text (QuantizeLinear / DequantizeLinear in the ONNX operator
documentation) and the opset table (:mod:`quantspec.onnx.opsets`).  ``compat="spec"`` and ``"onnxruntime"``
enforce the strict shape rules (they agree); ``"reference"`` accepts what onnx.reference
1.23 accepts (a scalar zero point with a per-axis scale, an over-long blocked scale, a size-1 scale of
any rank) and fails where it fails.  ``"onnxruntime"`` also refuses what the reproduced onnxruntime
release (1.31.1 or 1.32.0, ``ort_version=``) has no kernel for; what each release accepts and how it
computes is one :class:`OrtSupport` row of :data:`ORT_VERSIONS`, kept on the plan (``plan.ort``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._semantics.arrays import as_array, as_bool, as_int, native
from .._semantics.granularity import block_count, expand_blocks, normalize_axis, per_axis_view
from ..dtypes import QType, qtype
from ..errors import (AxisError, DTypeError, InvalidArgumentError, OpsetError, RangeError,
                      RuntimeUnsupportedError, ShapeError)
from ..versions import installed, note_reproducing, version_tuple
from . import opsets

__all__ = ["COMPAT_MODES", "QuantizePlan", "DequantizePlan", "plan_quantize", "plan_dequantize", "ORT", "resolve_granularity",
           "ORT_VERSIONS", "OrtSupport", "ort_support"]

COMPAT_MODES = ("spec", "reference", "onnxruntime")


@dataclass(frozen=True)
class OrtSupport:
    """What one onnxruntime release's CPU kernels accept and how its QuantizeLinear computes
    (measured on that release), as data: one row per reproduced release in :data:`ORT_VERSIONS`.
    The kernels (:mod:`quantspec.onnx.reference`, :mod:`quantspec.onnx.fast`) read these flags; no
    code compares version numbers."""

    version: str = "1.31.1"
    max_opset: int = 26                       # the newest ai.onnx opset a model may import
    max_version: int = 25                     # the newest Q/DQ operator version with a CPU kernel
    q_x: tuple[str, ...] = ("float", "float16")
    q_out: tuple[str, ...] = ("uint8", "int8", "uint16", "int16", "uint4", "int4", "uint2", "int2",
                              "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
    dq_x: tuple[str, ...] = ("uint8", "int8", "uint16", "int16", "int32", "uint4", "int4", "uint2", "int2",
                             "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
    dq_scale: tuple[str, ...] = ("float", "float16")
    #: QuantizeLinear's quotient.  None: x and y_scale are converted to float32 and divided in float32
    #: (``precision`` ignored).  A version v: from Q-v on, both are converted to the precision P (the
    #: ``precision`` attribute, else the scale's type) and divided once in P, correctly rounded; before
    #: Q-v, float32 as above
    precision_since: int | None = None
    #: the ``precision`` values accepted where it is honoured (others: refused at session creation)
    precisions: tuple[str, ...] = ("float", "float16")
    #: x and y_scale of different types (Q-23 on): computed (True) or a run-time failure (False,
    #: microsoft/onnxruntime#32719)
    mixed_types: bool = False
    #: integer outputs: True: two paths chosen per element (MLAS, and a plain loop with the x86 int32
    #: cast and int32 wrap: reference.ort_plain_mask); False: MLAS's clamp-then-round everywhere
    plain_loop: bool = True
    #: a blocked QuantizeLinear whose blocked axis, or an axis after it, is empty kills the process
    empty_block_crash: bool = True

    @property
    def release(self) -> str:
        """``"1.31"``: the major.minor the messages name."""
        return ".".join(self.version.split(".")[:2])


#: the reproduced onnxruntime releases, oldest first (docs/onnx.md, "onnxruntime versions")
ORT_VERSIONS: tuple[OrtSupport, ...] = (
    OrtSupport("1.31.1"),
    # measured on 1.32.0: `precision` and mixed x / scale types in CPU QuantizeLinear as
    # microsoft/onnxruntime#32735 describes them; integer outputs clamp in float everywhere; the
    # empty blocked shapes run; opsets 27 and 28 load (no Q/DQ-28 kernel)
    OrtSupport("1.32.0", max_opset=28, precision_since=23, mixed_types=True, plain_loop=False,
               empty_block_crash=False),
)

#: the newest reproduced release (its type lists are those of every reproduced release)
ORT = ORT_VERSIONS[-1]


def _ort_version_error(value: Any) -> InvalidArgumentError:
    names = ", ".join(repr(r.version) for r in ORT_VERSIONS)
    return InvalidArgumentError("ort_version", f"must be one of {names} (or their major.minor, or None: the installed "
                                "onnxruntime's version when it is one of these, else the newest)", value)


def ort_support(ort_version: Any = None) -> OrtSupport:
    """The :class:`OrtSupport` row that ``ort_version`` names: ``"1.31.1"`` or ``"1.31"`` (major.minor
    of a reproduced release), ...; None: the installed onnxruntime's release when it is reproduced,
    else the newest reproduced one."""
    if ort_version is None:
        v = installed("onnxruntime")
        if v is not None:
            for r in ORT_VERSIONS:
                if version_tuple(v) == version_tuple(r.version):
                    return r
        return ORT_VERSIONS[-1]
    if isinstance(ort_version, str) and re.fullmatch(r"\d+\.\d+(\.\d+)?", ort_version.strip()):
        t = version_tuple(ort_version.strip())
        for r in ORT_VERSIONS:
            full = version_tuple(r.version)
            if t == full or t == full[:2]:
                return r
    raise _ort_version_error(ort_version)


def _ort(compat: str, ort_version: Any) -> OrtSupport | None:
    """The plan's row: for compat="onnxruntime" only (``ort_version`` with another mode is an error)."""
    if compat != "onnxruntime":
        if ort_version is not None:
            raise InvalidArgumentError("ort_version", "is only meaningful with compat=\"onnxruntime\" (got compat="
                                       f"{compat!r})", ort_version)
        if compat == "reference":
            note_reproducing("onnx")
            note_reproducing("ml_dtypes")
        return None
    row = ort_support(ort_version)
    if ort_version is None:
        note_reproducing("onnxruntime")
    return row


@dataclass(frozen=True, eq=False)
class _Common:
    compat: str
    version: int                   # operator version in force (10, 13, 19, 21, 23, 24, 25, 28)
    shape: tuple[int, ...]         # x's shape
    granularity: str               # "tensor", "axis" or "block"
    axis: int | None               # normalised axis (per-axis and blocked)
    block_size: int
    scale: np.ndarray              # as given (typed), compact: 0-d, (D,) or blocked shape
    zero_point: np.ndarray | None  # as given (typed), compact like scale; None when absent
    ort: OrtSupport | None = None  # compat="onnxruntime": the reproduced release's row

    def expand(self, param: np.ndarray) -> np.ndarray:
        """``param`` (compact, like ``scale``) shaped to broadcast against x."""
        if self.granularity == "tensor":
            return param.reshape(())
        if self.granularity == "axis":
            return per_axis_view(param, len(self.shape), self.axis)
        return expand_blocks(param, self.shape, self.axis, self.block_size)


@dataclass(frozen=True, eq=False)
class QuantizePlan(_Common):
    x_type: QType = None
    out: QType = None              # the quantized output type
    precision: QType | None = None # the precision the division is done in (spec), or the attribute
    saturate: bool = True


@dataclass(frozen=True, eq=False)
class DequantizePlan(_Common):
    x_type: QType = None
    out: QType = None              # the float output type


# ---------------------------------------------------------------------------------------------
def _compat(compat: str) -> str:
    if not isinstance(compat, str) or compat not in COMPAT_MODES:
        raise InvalidArgumentError("compat", "must be one of " + ", ".join(map(repr, COMPAT_MODES)), compat)
    return compat


def _version(opset: int | None, compat: str, ort: OrtSupport | None = None, op: str = "q") -> int:
    version = opsets.version_for(opset)
    if compat == "onnxruntime":
        if opset is not None and opset > ort.max_opset:
            raise RuntimeUnsupportedError("opset", f"onnxruntime {ort.release} supports the ai.onnx domain up to opset "
                                          f"{ort.max_opset}", opset)
        if opset is None:                       # the newest the release runs
            version = min(version, ort.max_version)
        elif version > ort.max_version:
            opname = "QuantizeLinear" if op == "q" else "DequantizeLinear"
            raise RuntimeUnsupportedError("opset", f"onnxruntime {ort.release} has no CPU kernel for {opname}-{version} "
                                          f"(its newest is {opname}-{ort.max_version}); pass opset <= {version - 1}",
                                          opset)
    return version


def _check_attr(op: str, name: str, value: Any, default: Any, version: int) -> None:
    """An attribute the operator version did not have may only keep its default value."""
    row = opsets.row(version)
    attrs = row.q_attrs if op == "q" else row.dq_attrs
    if name not in attrs and not _is_default(value, default):
        since = opsets.ATTRIBUTE_SINCE[name][0 if op == "q" else 1]
        opname = "QuantizeLinear" if op == "q" else "DequantizeLinear"
        raise OpsetError(name, f"{opname}-{version} has no attribute {name!r} (it arrived in opset {since})", value)


def _attribute_int(value: Any, argument: str) -> int:
    """An integer attribute: ONNX stores it as int64."""
    v = as_int(value, argument)
    if not -(1 << 63) <= v < (1 << 63):
        raise RangeError(argument, "must fit int64 (an ONNX attribute)", v)
    return v


def _is_default(value: Any, default: Any) -> bool:
    """``value == default`` for a scalar attribute value; anything else (an array, ...) is not the default."""
    try:
        return bool(value == default)
    except (TypeError, ValueError):      # an array's comparison has no single truth value
        return False


def _allowed(kind: str, t: QType, allowed: tuple[str, ...], version: int, argument: str, op: str) -> None:
    if t.name not in allowed:
        opname = "QuantizeLinear" if op == "q" else "DequantizeLinear"
        raise DTypeError(argument, f"{opname}-{version} accepts {kind} of type " + ", ".join(allowed), t.name)


def _unset(value: Any) -> bool:
    """ONNX writes an absent output_dtype / precision as 0."""
    return value is None or (isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value == 0)


def _ort_refuse(ort: OrtSupport, argument: str, what: str, value: Any) -> None:
    raise RuntimeUnsupportedError(argument, f"onnxruntime {ort.release} has no CPU kernel for {what}", value)


def _scalar_to(value: Any, argument: str, t: QType | str) -> np.ndarray:
    """Arrays keep their type (a big-endian one its values, in this machine's byte order); Python
    scalars and lists take ``t``."""
    return native(as_array(value, argument, None if isinstance(value, (np.ndarray, np.generic)) else t))


def resolve_granularity(x_shape: tuple[int, ...], scale: np.ndarray, zp: np.ndarray | None, axis: Any, block_size: int,
                 compat: str, version: int, scale_name: str, zp_name: str, zp_used: bool = True):
    """(granularity, axis, block_size) after checking every shape rule (``zp_used=False``: onnx.reference
    reshapes the zero point but computes nothing with it, so only the reshape's own rules apply)."""
    ndim = len(x_shape)
    if block_size < 0 and compat != "reference":
        raise RangeError("block_size", "must be >= 0 (0 means per-tensor or per-axis)", block_size)
    per_tensor = scale.size == 1 and scale.ndim <= 1
    if scale.size > 1 and version < 13:
        raise OpsetError(scale_name, "must be a scalar before opset 13 (per-axis quantization arrived in opset 13)",
                         scale.shape)
    if compat == "reference":
        return _granularity_reference(x_shape, scale, zp, axis, block_size, scale_name, zp_name, zp_used)
    if per_tensor:
        if block_size != 0:
            raise RangeError("block_size", "must be 0 when the scale is a scalar (per-tensor quantization)",
                             block_size)
        if zp is not None and not (zp.size == 1 and zp.ndim <= 1):
            raise ShapeError(zp_name, f"must be a scalar like {scale_name} (per-tensor quantization)", zp.shape)
        return "tensor", None, 0
    a = normalize_axis(axis, ndim)
    if block_size == 0:
        if scale.ndim != 1:
            raise ShapeError(scale_name, f"of rank {scale.ndim} needs block_size > 0 (blocked quantization); "
                             "per-axis quantization takes a 1-D scale", scale.shape)
        if scale.shape[0] != x_shape[a]:
            raise ShapeError(scale_name, f"must have one entry per element of axis {a} (length {x_shape[a]}) for "
                             "per-axis quantization", scale.shape)
        if zp is not None and zp.shape != scale.shape:
            raise ShapeError(zp_name, f"must have the shape of {scale_name} {scale.shape}", zp.shape)
        return "axis", a, 0
    if scale.ndim != ndim:
        raise ShapeError(scale_name, f"must have the rank of x ({ndim}) for blocked quantization", scale.shape)
    for i, (s, d) in enumerate(zip(scale.shape, x_shape)):
        want = block_count(d, block_size) if i == a else d
        if s != want:
            if i == a:
                lo = block_count(d, s) if s else None
                hi = (block_count(d, s - 1) - 1) if s > 1 else None
                accepted = (f"[{lo}, {hi}]" if hi is not None else f">= {lo}") if s else "none (the scale is empty)"
                raise RangeError("block_size", f"must satisfy ceil(x.shape[{a}] / block_size) == "
                                 f"{scale_name}.shape[{a}] ({d} elements, {s} blocks: accepted block sizes "
                                 f"{accepted})", block_size)
            raise ShapeError(scale_name, f"must equal x's shape {x_shape} except on the blocked axis {a}",
                             scale.shape)
    if zp is not None and zp.shape != scale.shape:
        raise ShapeError(zp_name, f"must have the shape of {scale_name} {scale.shape}", zp.shape)
    return "block", a, _effective_block(block_size, x_shape[a])


def _effective_block(block_size: int, length: int) -> int:
    """A block longer than its axis is one block covering the axis: the same elements share the same
    parameters with the axis's length as the block size, which keeps the layouts' sizes and the
    reference expansion bounded (a block_size of 2^62 is valid ONNX)."""
    return min(block_size, max(length, 1))


def _broadcast_scale(scale: np.ndarray, zp: np.ndarray | None, compat: str) -> np.ndarray:
    """onnx.reference: a single scale with per-axis or blocked zero points is broadcast over them."""
    if compat == "reference" and zp is not None and scale.size == 1 and zp.size > 1:
        return np.broadcast_to(scale.reshape(()), zp.shape).copy()
    return scale


def _granularity_reference(x_shape, scale, zp, axis, block_size, scale_name, zp_name, zp_used=True):
    """What onnx.reference 1.23 (``_quant_utils.reshape_input``) accepts and how it reads it; a zero
    point it only reshapes (``zp_used=False``) meets the reshape's own rules alone, and the granularity
    is the scale's."""
    ndim = len(x_shape)

    def check(v: np.ndarray, name: str, used: bool = True):
        if v.ndim == 0 or v.size == 1:
            # onnx.reference reads a one-element parameter of rank >= 1 as its first row, of shape
            # v.shape[1:], which numpy broadcasts with x: where that is not x's shape, its result has
            # another shape than x (a 0-d x with a (1, 1) zero point gives a (1,) result)
            if used and v.ndim >= 2 and np.broadcast_shapes(tuple(x_shape), v.shape[1:]) != tuple(x_shape):
                raise ShapeError(name, f"must be a scalar or 1-D for an input of shape {tuple(x_shape)} (onnx.reference "
                                 f"broadcasts its first row, of shape {v.shape[1:]}, into the result, which then "
                                 "has another shape than the input)", v.shape)
            return "tensor", None
        if not block_size:
            if v.ndim != 1:
                raise ShapeError(name, "must be a scalar or 1-D when block_size is 0 (onnx.reference asserts this)",
                                 v.shape)
            if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
                raise AxisError("axis", f"must be in [{-ndim}, {ndim - 1}] for a rank-{ndim} input", axis)
            a = int(axis) % ndim
            if used and v.shape[0] != x_shape[a]:
                raise ShapeError(name, f"does not broadcast along axis {a} (length {x_shape[a]})", v.shape)
            return "axis", a
        if block_size < 0:
            raise RangeError("block_size", f"must be positive for a {name} of more than one value (onnx.reference: "
                             "'block_size must be a positive integer.')", block_size)
        if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)) or not -v.ndim <= axis < v.ndim:
            raise AxisError("axis", f"must be in [{-v.ndim}, {v.ndim - 1}] for a rank-{v.ndim} scale", axis)
        a = int(axis) % v.ndim
        repeated = list(v.shape)
        repeated[a] *= block_size
        # numpy's take of x's length from the repeated axis checks no index when the result is empty
        # (another axis of length 0): onnx.reference then accepts a short (even empty) blocked axis
        empty = any(s == 0 for i, s in enumerate(v.shape) if i != a)
        if v.ndim != ndim or (repeated[a] < x_shape[a] and not empty) or any(
                s != d for i, (s, d) in enumerate(zip(v.shape, x_shape)) if i != a):
            raise ShapeError(name, f"does not expand to x's shape {x_shape} with block_size {block_size} on axis {a}",
                             v.shape)
        return "block", a

    g, a = check(scale, scale_name)
    if zp is not None and not zp_used:
        check(zp, zp_name, used=False)
    elif zp is not None:
        gz, az = check(zp, zp_name)
        if g == "tensor" and gz != "tensor":   # one scale broadcasts over the zero points (numpy)
            g, a = gz, az
        elif gz != "tensor" and (gz != g or az != a or zp.shape != scale.shape):
            raise ShapeError(zp_name, f"does not broadcast like {scale_name} {scale.shape}", zp.shape)
    return g, a, _effective_block(block_size, x_shape[a]) if g == "block" else 0


#: onnx.reference 1.23's DequantizeLinear does not read these inputs' zero point (neither its type nor
#: its shape): for float8 it only requires that the values, cast to uint8, are all 0 (an empty zero
#: point fails there: the min of an empty array); for float4e2m1 it does not look at it at all
_REFERENCE_IGNORES_ZERO_POINT = {"float8e4m3fn": True, "float8e4m3fnuz": True, "float8e5m2": True,
                                 "float8e5m2fnuz": True, "float4e2m1": False}


def _reference_float_zero_point(zp: np.ndarray, x_type: QType) -> None:
    """Refuse the float8 zero point onnx.reference refuses (``x_zero_point.astype(np.uint8)`` must hold
    only zeros, and at least one value); the result does not depend on it."""
    if not _REFERENCE_IGNORES_ZERO_POINT[x_type.name]:
        return
    with np.errstate(invalid="ignore", over="ignore"):
        u = zp.astype(np.uint8)       # the same conversion, on the same machine (0.5 and -0.0 read as 0)
    if u.size == 0:
        raise ShapeError("x_zero_point", f"must not be empty for {x_type.name} input (onnx.reference fails on "
                         "the minimum of an empty array)", zp.shape)
    if u.min() != 0 or u.max() != 0:
        raise InvalidArgumentError("x_zero_point", f"must read as 0 when converted to uint8, for {x_type.name} "
                                   "input (onnx.reference: 'x_zero_point is not null but should be zero for float8 "
                                   "types')", zp if zp.size <= 8 else "non-zero values")


# ---------------------------------------------------------------------------------------------
def plan_quantize(x: np.ndarray, y_scale: Any, y_zero_point: Any = None, *, axis: Any = 1, block_size: Any = 0,
                  output_dtype: Any = None, saturate: Any = True, precision: Any = None, opset: int | None = None,
                  compat: str = "spec", ort_version: Any = None) -> QuantizePlan:
    compat = _compat(compat)
    ort = _ort(compat, ort_version)
    version = _version(opset, compat, ort, "q")
    row = opsets.row(version)
    block_size = _attribute_int(block_size, "block_size")
    saturate = as_bool(saturate, "saturate")
    output_dtype = None if _unset(output_dtype) else output_dtype
    precision = None if _unset(precision) else precision
    _check_attr("q", "axis", axis, 1, version)
    _check_attr("q", "saturate", saturate, True, version)
    _check_attr("q", "block_size", block_size, 0, version)
    _check_attr("q", "output_dtype", output_dtype, None, version)
    _check_attr("q", "precision", precision, None, version)

    x = as_array(x, "x", "float")
    x_type = qtype(x.dtype, "x")
    _allowed("x", x_type, row.q_x, version, "x", "q")

    out = qtype(output_dtype, "output_dtype") if output_dtype is not None else None
    if out is not None:
        _allowed("outputs", out, row.q_out, version, "output_dtype", "q")
    zp = None
    if y_zero_point is not None:
        if out is None and not isinstance(y_zero_point, (np.ndarray, np.generic)):
            out = qtype("uint8")  # a Python zero point with no output_dtype: ONNX's default type
        zp = (_scalar_to(y_zero_point, "y_zero_point", out) if out is not None
              else native(as_array(y_zero_point, "y_zero_point")))
        zp_type = qtype(zp.dtype, "y_zero_point")
        if out is not None and output_dtype is not None and zp_type != out:
            raise DTypeError("output_dtype", f"must equal the type of y_zero_point ({zp_type.name}) when both are given",
                             out.name)
        out = zp_type
        _allowed("a zero point", out, row.q_out, version, "y_zero_point", "q")
    if out is None:
        out = qtype("uint8")

    scale = _scalar_to(y_scale, "y_scale", "float")
    s_type = qtype(scale.dtype, "y_scale")
    _allowed("a scale", s_type, row.q_scale, version, "y_scale", "q")
    if row.q_scale_is_x_type and s_type != x_type:
        raise DTypeError("y_scale", f"must have x's type ({x_type.name}) in QuantizeLinear-{version} (x and y_scale "
                         "share one type parameter before opset 23)", s_type.name)

    p = None
    if precision is not None:
        p = qtype(precision, "precision")
        _allowed("precision", p, row.precision, version, "precision", "q")

    if compat == "onnxruntime":
        if x_type.name not in ort.q_x:
            _ort_refuse(ort, "x", f"QuantizeLinear from {x_type.name}", x_type.name)
        if s_type.name not in ort.q_x:
            _ort_refuse(ort, "y_scale", f"QuantizeLinear with a {s_type.name} scale", s_type.name)
        if s_type != x_type and not ort.mixed_types:
            _ort_refuse(ort, "y_scale", "QuantizeLinear with x and y_scale of different types "
                        "(microsoft/onnxruntime#32719)", s_type.name)
        if out.name not in ort.q_out:
            _ort_refuse(ort, "output_dtype", f"QuantizeLinear to {out.name}", out.name)
        if (p is not None and ort.precision_since is not None and version >= ort.precision_since
                and p.name not in ort.precisions):
            raise RuntimeUnsupportedError("precision", f"onnxruntime {ort.release} accepts precision "
                                          + " or ".join(ort.precisions) + " only (it refuses the session)", p.name)

    x_shape = tuple(int(d) for d in x.shape)
    # onnx.reference reshapes a float8 output's zero point, then computes without it
    zp_used = not (compat == "reference" and out.is_float and out.bits == 8)
    g, a, b = resolve_granularity(x_shape, scale, zp, axis, block_size, compat, version, "y_scale", "y_zero_point", zp_used)
    if not zp_used:
        zp = None
    if compat == "onnxruntime" and ort.empty_block_crash and g == "block" and x_shape[a] == 0:
        raise RuntimeUnsupportedError("x", f"onnxruntime {ort.release} crashes the process (SIGFPE, an integer division by "
                                      f"zero) on a blocked QuantizeLinear whose blocked axis {a} is empty", x_shape)
    if compat == "onnxruntime" and ort.empty_block_crash and g == "block" and 0 in x_shape[a + 1:]:
        raise RuntimeUnsupportedError("x", f"onnxruntime {ort.release} crashes the process (SIGSEGV) on a blocked "
                                      f"QuantizeLinear with an empty axis after the blocked axis {a}", x_shape)
    scale = _broadcast_scale(scale, zp, compat)
    return QuantizePlan(compat=compat, version=version, shape=x_shape, granularity=g, axis=a, block_size=b,
                        scale=scale, zero_point=zp, ort=ort, x_type=x_type, out=out, precision=p, saturate=saturate)


def plan_dequantize(x: np.ndarray, x_scale: Any, x_zero_point: Any = None, *, axis: Any = 1, block_size: Any = 0,
                    output_dtype: Any = None, opset: int | None = None, compat: str = "spec",
                    ort_version: Any = None) -> DequantizePlan:
    compat = _compat(compat)
    ort = _ort(compat, ort_version)
    version = _version(opset, compat, ort, "dq")
    row = opsets.row(version)
    block_size = _attribute_int(block_size, "block_size")
    output_dtype = None if _unset(output_dtype) else output_dtype
    _check_attr("dq", "axis", axis, 1, version)
    _check_attr("dq", "block_size", block_size, 0, version)
    _check_attr("dq", "output_dtype", output_dtype, None, version)

    if not isinstance(x, (np.ndarray, np.generic)):
        raise DTypeError("x", "must be a numpy array of its quantized type (a Python list carries no type)",
                         type(x).__name__)
    x = np.asarray(x)
    x_type = qtype(x.dtype, "x")
    _allowed("x", x_type, row.dq_x, version, "x", "dq")

    zp = None
    if x_zero_point is not None and compat == "reference" and x_type.name in _REFERENCE_IGNORES_ZERO_POINT:
        _reference_float_zero_point(_scalar_to(x_zero_point, "x_zero_point", x_type), x_type)
    elif x_zero_point is not None:
        zp = _scalar_to(x_zero_point, "x_zero_point", x_type)
        z_type = qtype(zp.dtype, "x_zero_point")
        if z_type != x_type:
            raise DTypeError("x_zero_point", f"must have x's type ({x_type.name})", z_type.name)
        nonzero = bool(np.any(zp.astype(np.float32) != 0))
        if compat == "spec" and nonzero and x_type.name == "int32":
            raise InvalidArgumentError("x_zero_point", "must be 0 for int32 input (int32 has no zero point)",
                                       zp if zp.size <= 8 else "non-zero values")
        if nonzero and x_type.is_float and x_type.bits == 8:
            raise InvalidArgumentError("x_zero_point", f"must be 0 for {x_type.name} input (float8 has no zero point)",
                                       zp if zp.size <= 8 else "non-zero values")
        if (compat == "onnxruntime" and x_type.is_float and x_type.bits == 8
                and np.any(np.ascontiguousarray(zp).view(np.uint8) != 0)):
            # onnxruntime checks the zero point's bytes: -0.0 (0x80) is refused at run time
            raise RuntimeUnsupportedError("x_zero_point", f"onnxruntime {ort.release} refuses a {x_type.name} zero point "
                                          "other than +0.0 (it checks the bytes, so -0.0 fails)",
                                          zp if zp.size <= 8 else "non-zero bytes")

    scale = _scalar_to(x_scale, "x_scale", "float")
    s_type = qtype(scale.dtype, "x_scale")
    _allowed("a scale", s_type, row.dq_scale, version, "x_scale", "dq")

    if output_dtype is not None:
        out = qtype(output_dtype, "output_dtype")
        _allowed("outputs", out, row.dq_out, version, "output_dtype", "dq")
    else:
        out = s_type
        if compat != "reference" and out.name not in row.dq_out:
            raise DTypeError("output_dtype", f"is required with a {s_type.name} scale: the output takes the scale's "
                             "type, which DequantizeLinear cannot output (" + ", ".join(row.dq_out) + ")", None)

    if compat == "onnxruntime":
        if x_type.name not in ort.dq_x:
            _ort_refuse(ort, "x", f"DequantizeLinear from {x_type.name}", x_type.name)
        if s_type.name not in ort.dq_scale:
            _ort_refuse(ort, "x_scale", f"DequantizeLinear with a {s_type.name} scale", s_type.name)
        if out.name not in ort.dq_scale:
            _ort_refuse(ort, "output_dtype", f"DequantizeLinear to {out.name}", out.name)

    x_shape = tuple(int(d) for d in x.shape)
    g, a, b = resolve_granularity(x_shape, scale, zp, axis, block_size, compat, version, "x_scale", "x_zero_point")
    scale = _broadcast_scale(scale, zp, compat)
    return DequantizePlan(compat=compat, version=version, shape=x_shape, granularity=g, axis=a, block_size=b,
                          scale=scale, zero_point=zp, ort=ort, x_type=x_type, out=out)
