"""Reductions: MEAN, SUM (int8), the quantized REDUCE_PROD (int8 / int16) and ARG_MAX
(``K/reduce.cc``, ``KI/reference/reduce.h`` ``QuantizedMeanOrSum`` / ``QuantizedReduceProd``,
``KI/reference/arg_min_max.h``).

The axis input is an int32 tensor (constant or not); negative axes count from the end and repeats
are ignored.  With ``S`` the int32 (wrapping) sum of the raw values over the reduced axes and ``n``
the number of reduced elements::

    (M, e) = QuantizeMultiplier(double(s_in) / double(s_out))
    MEAN:  sh = min(floor(log2 n), 32, 31 + e);  M' = (int64(M) << sh) / n;  e' = e - sh
           out = clamp(MBQM(int32(S - z_in * n), M', e') + z_out, -128, 127)
    SUM:   out = clamp(MBQM(int32(S - z_in * n), M, e) + z_out, -128, 127)

**SUM has two semantics.**  BUILTIN_REF's int8 SUM (``reduce.cc`` ``QuantizedMeanOrSum<int8_t,
kReference>``) hands the int8 data to the reference kernel as ``uint8_t``: every value is read as
``v & 0xFF`` (-1 counts as 255), the result is clamped to [0, 255] and its byte read back as int8.
That is a bug, and quantspec computes the correct integer result by default
(``quantspec_sum_semantics="correct"``, the formula above).  ``quantspec_sum_semantics="reference"``
in the options reproduces BUILTIN_REF's bytes exactly.  (The optimized kernel computes SUM in
float, another result again.)

**REDUCE_PROD** on quantized int8 / int16 (``QuantizedReduceProd``; the operator's float / int32 /
int64 kernel is in :mod:`.shape_arithmetic`).  With ``n`` = input size / output size (the number
of elements each output multiplies)::

    (M, e) = QuantizeMultiplier(double(s_in) / pow(double(s_out), 1.0 / n))
    acc = x_0 - z_in;  then for each next element x_k (row-major order of the reduced axes):
        acc = MultiplyByQuantizedMultiplier(int64(acc) * (x_k - z_in), M, e)      (int64 form, wraps)
    out = clamp(MultiplyByQuantizedMultiplier(int64(acc), M, e) + z_out)

(the int64 ``MultiplyByQuantizedMultiplier`` rounds the multiplier to 16 bits and rounds half up
once: :func:`..fixedpoint.multiply_by_quantized_multiplier_int64`).  int16 needs zero points 0
(LiteRT rejects others at prepare).  The optimized kernel computes the same, except that a
reduction over no axis of size > 1 (no axes, or only axes of size 1) copies the input bytes
unchanged, without the requantization (:func:`quantized_prod`).

**REDUCE_MAX / REDUCE_MIN** on int8 / int16 (``EvalGeneric``: Keras ``GlobalMaxPooling``): the
largest / smallest raw code over the axes, no arithmetic; LiteRT requires the input's scale and
zero point to equal the output's (it fails at eval otherwise), and fills the output of an empty
input with the type's lowest / highest value.  Every resolver computes the same.

ARG_MAX: the index of the largest value along the axis, the first one on ties; int32 or int64 by
the ``output_type`` option.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import AxisError, DTypeError, InvalidArgumentError, UnsupportedError
from .. import fixedpoint as fp
from ..fixedpoint import mbqm, wrap_int32
from . import _common as c
from .base import Kernel, register

__all__ = ["Mean", "Sum", "ArgMax", "ReduceMax", "ReduceMin", "SUM_SEMANTICS", "prepare_quantized_prod",
           "quantized_prod", "ProdParams"]

_INT8 = np.dtype(np.int8)
#: the clamp of each output type (np.iinfo is slow to call per run)
_BOUNDS = {np.dtype(np.int8).char: (-128, 127), np.dtype(np.int16).char: (-(1 << 15), (1 << 15) - 1)}
#: the values of the ``quantspec_sum_semantics`` option of SUM
SUM_SEMANTICS = ("correct", "reference")


def resolve_axes(op: str, axes: np.ndarray, rank: int) -> tuple[int, ...]:
    """``ResolveAxis``: negative axes count from the end, repeats are dropped (order kept); a rank-0
    input ignores the axes (``ResolveAxisForShape``)."""
    out: list[int] = []
    if rank == 0:
        return ()
    for a in np.asarray(axes).reshape(-1).tolist():
        v = a + rank if a < 0 else a
        if not 0 <= v < rank:
            raise AxisError(f"{op} axis", f"must be in [{-rank}, {rank - 1}] (LiteRT: 'Invalid axis index')", a)
        if v not in out:
            out.append(v)
    return tuple(out)


def _reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep_dims: bool) -> tuple[int, ...]:
    if keep_dims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@dataclass(frozen=True)
class ReduceParams:
    op: str
    shape: tuple[int, ...]
    axis_shape: tuple[int, ...]
    axes: tuple[int, ...] | None      # None: the axis tensor is a run-time input
    keep_dims: bool
    input_zero_point: int
    output_zero_point: int
    multiplier: int
    shift: int
    reference_sum: bool = False
    dtype: np.dtype = _INT8


class _MeanOrSum(Kernel):
    def prepare(self, inputs, outputs, options):
        op = self.name
        x, axis = c.count(op, inputs, outputs, 2, names=("input", "axis"))
        o = outputs[0]
        c.require_type(op, [("input", x)], ("int8", "int16") if op == "MEAN" else ("int8",))
        c.require_same_type(x, o, "output", op)
        if axis.dtype.name != "int32":
            raise DTypeError(f"{op} axis", "must be int32 (LiteRT rejects other types at prepare)", axis.dtype.name)
        s_in, z_in = c.activation(op, "input", x)
        s_out, z_out = c.activation(op, "output", o)
        c.enforce(op, inputs, outputs)
        if x.dtype.name == "int16" and (z_in, z_out) != (0, 0):
            raise c.limit("int16-zero-point", InvalidArgumentError(
                f"{op} zero points", "must be 0 for int16 (LiteRT rejects the model at prepare)", (z_in, z_out)))
        keep_dims = c.option(options, "keep_dims", False, kind=bool)
        reference = False
        if op == "SUM":
            reference = c.option(options, "quantspec_sum_semantics", "correct", allowed=SUM_SEMANTICS) == "reference"
        elif "quantspec_sum_semantics" in (options or {}):
            raise InvalidArgumentError("quantspec_sum_semantics", "applies to SUM only", op)
        axes = None if axis.data is None else resolve_axes(op, axis.data, len(x.shape))
        m, e = fp.quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
        if e > 30:
            raise c.limit("multiplier-shift", UnsupportedError(
                f"{op} output", "a scale ratio s_in / s_out >= 2^30 needs a left shift of 31 or more, undefined in "
                "LiteRT's C++", float(s_in / s_out)))
        return ReduceParams(op, tuple(x.shape), tuple(axis.shape), axes, keep_dims, z_in, z_out, m, e, reference,
                            np.dtype(x.dtype.name))

    def compute(self, p: ReduceParams, arrays):
        x, axes, out_shape, n = reduction(p, arrays, p.dtype)
        if x.size == 0 or n == 0:
            return [np.zeros(out_shape, p.dtype)]
        lo, hi = (0, 255) if p.reference_sum else _BOUNDS[p.dtype.char]
        values = x.view(np.uint8) if p.reference_sum else x
        total = wrap_int32(values.sum(axis=axes, dtype=np.int64) if axes else values.astype(np.int64))  # int32 acc.
        shifted = wrap_int32(total - p.input_zero_point * n)
        m, e = p.multiplier, p.shift
        if p.op == "MEAN":
            sh = min(n.bit_length() - 1, 32, 31 + e)
            m = (m << sh) // n
            e = e - sh
        out = np.clip(wrap_int32(mbqm(shifted, m, e) + p.output_zero_point), lo, hi)
        out = out.astype(np.uint8).view(np.int8) if p.reference_sum else out.astype(p.dtype)
        return [np.asarray(out).reshape(out_shape)]


def reduction(p: ReduceParams, arrays, dtype: np.dtype):
    """The checked input (of type ``dtype``), the axes reduced (the prepared ones, or the axis input's),
    the output's shape and the number of elements each output reduces."""
    (x,) = c.check_arrays(p.op, arrays, [(0, p.shape, dtype)])
    axes = p.axes
    if axes is None:
        (a,) = c.check_arrays(p.op, arrays, [(1, p.axis_shape, np.dtype(np.int32))])
        axes = resolve_axes(p.op, a, x.ndim)
    out_shape = _reduced_shape(x.shape, axes, p.keep_dims)
    return x, axes, out_shape, int(np.prod([x.shape[i] for i in axes], dtype=np.int64))


@register
class Mean(_MeanOrSum):
    """MEAN over the given axes (keep_dims option), the integer reference path."""

    name = "MEAN"


@register
class Sum(_MeanOrSum):
    """SUM over the given axes.  Default: the correct integer sum; with
    ``quantspec_sum_semantics="reference"``, BUILTIN_REF's bytes (int8 read as uint8)."""

    name = "SUM"


@dataclass(frozen=True)
class ProdParams:
    op: str
    shape: tuple[int, ...]
    axis_shape: tuple[int, ...]
    axes: tuple[int, ...] | None      # None: the axis tensor is a run-time input
    keep_dims: bool
    input_zero_point: int
    output_zero_point: int
    input_scale: float
    output_scale: float
    dtype: np.dtype
    multiplier: tuple[int, int] | None    # (M, e) where the axes are constant (LiteRT: at prepare)
    constant: np.ndarray | None = None    # a constant input (with a constant axis and <= 8 outputs)


#: LiteRT computes a REDUCE_PROD of constant input and axis with at most this many outputs at prepare
#: (with the optimized kernel, whatever the resolver)
_MAX_CONSTANT_OUTPUTS = 8


def _prod_multiplier(op: str, s_in: float, s_out: float, n_in: int, n_out: int) -> tuple[int, int]:
    """``GetQuantProdScaling``: ``s_in / pow(s_out, 1 / n)`` in double, n = n_in / n_out (int)."""
    import math

    if n_in == 0 or n_out == 0:
        return 0, 0                      # LiteRT keeps its zero-initialised multiplier
    n = n_in // n_out
    m, e = fp.quantize_multiplier(float(s_in) / math.pow(float(s_out), 1.0 / n))
    if e > 14:
        raise c.limit("multiplier-shift", UnsupportedError(
            f"{op} output", "a per-step scale s_in / s_out^(1/n) >= 2^14 needs a shift of 15 or more in the int64 "
            "MultiplyByQuantizedMultiplier (undefined behaviour in LiteRT's C++)", float(s_in) / math.pow(float(s_out), 1.0 / n)))
    return int(m), int(e)


def prepare_quantized_prod(op: str, x, axis, o, options) -> ProdParams:
    """Prepare of REDUCE_PROD on a quantized int8 / int16 input (``PrepareProd``)."""
    c.require_same_type(x, o, "output", op)
    s_in, z_in = c.activation(op, "input", x)
    s_out, z_out = c.activation(op, "output", o)
    if x.dtype.name == "int16" and (z_in, z_out) != (0, 0):
        raise c.limit("int16-zero-point", InvalidArgumentError(
            f"{op} zero points", "must be 0 for int16 (LiteRT rejects the model at prepare)", (z_in, z_out)))
    keep_dims = c.option(options, "keep_dims", False, kind=bool)
    axes = None if axis.data is None else resolve_axes(op, axis.data, len(x.shape))
    multiplier = None
    constant = None
    if axes is not None:
        out_shape = _reduced_shape(tuple(x.shape), axes, keep_dims)
        n_in = int(np.prod(x.shape, dtype=np.int64))
        n_out = int(np.prod(out_shape, dtype=np.int64))
        multiplier = _prod_multiplier(op, s_in, s_out, n_in, n_out)
        if x.data is not None and n_out <= _MAX_CONSTANT_OUTPUTS:
            constant = np.asarray(x.data)
    return ProdParams(op, tuple(x.shape), tuple(axis.shape), axes, keep_dims, z_in, z_out, float(s_in),
                      float(s_out), np.dtype(x.dtype.name), multiplier, constant)


def quantized_prod(p: ProdParams, arrays, optimized: bool = False) -> list[np.ndarray]:
    """Compute of the quantized REDUCE_PROD: the reference kernel, or (``optimized``) the optimized
    one, which copies the input where no axis of size > 1 is reduced."""
    if p.constant is not None:              # folded at prepare by the optimized kernel
        arrays = [p.constant, *arrays[1:]]
        optimized = True
    x, axes, out_shape, n = reduction(p, arrays, p.dtype)
    if x.size == 0:
        if int(np.prod(out_shape, dtype=np.int64)) == 0:
            return [np.zeros(out_shape, p.dtype)]
        raise UnsupportedError(f"{p.op} input", "is empty while the output is not: LiteRT leaves the output "
                               "unwritten (its bytes are whatever the memory held)", x.shape)
    if optimized and all(x.shape[a] == 1 for a in axes):
        return [np.ascontiguousarray(x).reshape(out_shape)]
    if p.multiplier is not None:
        m, e = p.multiplier
    else:
        m, e = _prod_multiplier(p.op, p.input_scale, p.output_scale, x.size, int(np.prod(out_shape, dtype=np.int64)))
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.transpose(x, kept + sorted(axes)).reshape(-1, n).astype(np.int64) - p.input_zero_point
    acc = rows[:, 0]
    for k in range(1, n):
        acc = fp.mbqm_int64(acc * rows[:, k], m, e)
    lo, hi = _BOUNDS[p.dtype.char]
    out = np.clip(fp.mbqm_int64(acc, m, e) + p.output_zero_point, lo, hi).astype(p.dtype)
    return [out.reshape(out_shape)]


@dataclass(frozen=True)
class ExtremeParams:
    op: str
    shape: tuple[int, ...]
    axis_shape: tuple[int, ...]
    axes: tuple[int, ...] | None      # None: the axis tensor is a run-time input
    keep_dims: bool
    dtype: np.dtype


class _Extreme(Kernel):
    """REDUCE_MAX / REDUCE_MIN on int8 / int16: a selection of raw codes."""

    def prepare(self, inputs, outputs, options):
        op = self.name
        x, axis = c.count(op, inputs, outputs, 2, names=("input", "axis"))
        o = outputs[0]
        c.require_type(op, [("input", x)], ("int8", "int16"))
        c.require_same_type(x, o, "output", op)
        if axis.dtype.name != "int32":
            raise DTypeError(f"{op} axis", "must be int32 (LiteRT rejects other types at prepare)", axis.dtype.name)
        if (x.params is None) != (o.params is None):
            raise c.limit("same-scale", InvalidArgumentError(
                f"{op} output", "must be quantized exactly when the input is (LiteRT compares the scales at eval)",
                None if o.params is None else "quantized"))
        if x.params is not None:
            s_in, z_in = c.activation(op, "input", x)
            s_out, z_out = c.activation(op, "output", o)
            if s_in != s_out:
                raise c.limit("same-scale", InvalidArgumentError(
                    f"{op} output scale", "must equal the input's (LiteRT fails at eval)", float(s_out)))
            if z_in != z_out:
                raise c.limit("same-zero-point", InvalidArgumentError(
                    f"{op} output zero point", "must equal the input's (LiteRT fails at eval)", z_out))
        keep_dims = c.option(options, "keep_dims", False, kind=bool)
        axes = None if axis.data is None else resolve_axes(op, axis.data, len(x.shape))
        return ExtremeParams(op, tuple(x.shape), tuple(axis.shape), axes, keep_dims, np.dtype(x.dtype.name))

    def compute(self, p: ExtremeParams, arrays):
        x, axes, out_shape, n = reduction(p, arrays, p.dtype)
        info = np.iinfo(p.dtype)
        if x.size == 0:
            fill = info.min if self.name == "REDUCE_MAX" else info.max
            return [np.full(out_shape, fill, p.dtype)]
        f = np.max if self.name == "REDUCE_MAX" else np.min
        out = f(x, axis=axes) if axes else x.copy()
        return [np.asarray(out, p.dtype).reshape(out_shape)]


@register
class ReduceMax(_Extreme):
    """REDUCE_MAX over the given axes (keep_dims option), int8 / int16."""

    name = "REDUCE_MAX"


@register
class ReduceMin(_Extreme):
    """REDUCE_MIN over the given axes (keep_dims option), int8 / int16."""

    name = "REDUCE_MIN"


@dataclass(frozen=True)
class ArgMaxParams:
    shape: tuple[int, ...]
    dtype: np.dtype
    axis_shape: tuple[int, ...]
    axis_dtype: np.dtype
    axis: int | None
    output_dtype: np.dtype


@register
class ArgMax(Kernel):
    """ARG_MAX along one axis (a constant or run-time int32/int64 tensor of one element); the first
    index wins ties; int32 or int64 output by the ``output_type`` option."""

    name = "ARG_MAX"

    def prepare(self, inputs, outputs, options):
        x, axis = c.count(self.name, inputs, outputs, 2, names=("input", "axis"))
        c.require_type(self.name, [("input", x)], ("int8", "uint8", "int32", "bool"))
        if axis.dtype.name not in ("int32", "int64"):
            raise DTypeError(f"{self.name} axis", "must be int32 or int64 (LiteRT rejects others)", axis.dtype.name)
        if int(np.prod(axis.shape, dtype=np.int64)) != 1:
            raise InvalidArgumentError(f"{self.name} axis", "must hold exactly one element", axis.shape)
        if len(x.shape) < 1:
            raise InvalidArgumentError(f"{self.name} input", "must have at least one dimension", x.shape)
        out_type = c.option(options, "output_type", None)
        if out_type not in ("INT32", "INT64"):
            raise InvalidArgumentError("output_type", "must be 'INT32' or 'INT64' (LiteRT rejects others at "
                                       "prepare)", out_type)
        a = None
        if axis.data is not None:
            a = self._axis(int(np.asarray(axis.data).reshape(-1)[0]), x.shape)
        return ArgMaxParams(tuple(x.shape), x.dtype.dtype, tuple(axis.shape), axis.dtype.dtype, a,
                            np.dtype(np.int32 if out_type == "INT32" else np.int64))

    def _axis(self, a: int, shape: tuple[int, ...]) -> int:
        rank = len(shape)
        v = a + rank if a < 0 else a
        if not 0 <= v < rank:
            raise AxisError(f"{self.name} axis", f"must be in [{-rank}, {rank - 1}]", a)
        if shape[v] == 0:
            raise InvalidArgumentError(f"{self.name} axis", "cannot reduce an empty dimension (LiteRT rejects it)",
                                       v)
        return v

    def compute(self, p: ArgMaxParams, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.dtype)])
        a = p.axis
        if a is None:
            (t,) = c.check_arrays(self.name, arrays, [(1, p.axis_shape, p.axis_dtype)])
            a = self._axis(int(t.reshape(-1)[0]), x.shape)
        return [np.argmax(x, axis=a).astype(p.output_dtype)]
