"""Data movement of the bytes themselves: STRIDED_SLICE, SPLIT, SPLIT_V, PACK, UNPACK
(``K/strided_slice.cc`` with ``KI/strided_slice_logic.h`` and ``KI/reference/strided_slice.h``,
``K/split.cc``, ``K/split_v.cc``, ``K/pack.cc``, ``K/unpack.cc``; ``K/`` = ``tflite/kernels/``,
``KI/`` = ``K/internal/``).

No arithmetic: the output codes are input codes, whatever the type (int8, int16, int32, float...).
What matters is which elements go where, and what LiteRT checks:

- **STRIDED_SLICE**: ``begin``, ``end``, ``strides`` (1-D int32, constant or run-time) with the
  masks ``begin_mask``, ``end_mask``, ``ellipsis_mask``, ``new_axis_mask``, ``shrink_axis_mask`` and
  ``offset`` (``end`` counted from ``begin``).  The effective axes are built as LiteRT builds them
  (an ellipsis expands to the axes the indices do not name, a new axis is a dimension of 1), then
  per axis: a negative index counts from the end, the index is clamped to ``[0, size]`` (``[-1,
  size - 1]`` for a negative stride), a mask puts it at the first / last element, a shrunk axis
  takes one element and disappears.  Zero strides fail Prepare.
- **SPLIT** (``axis`` tensor, then the input) into ``num_splits`` equal parts; **SPLIT_V** by
  ``size_splits`` (int32 or int64, one -1 allowed).
- **PACK** stacks its inputs along a new ``axis``; **UNPACK** unstacks along ``axis``.  Both require
  equal (scale, zero point) on every input and output (LiteRT Prepare).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from . import _common as c
from .base import Kernel, register

__all__ = ["StridedSlice", "Split", "SplitV", "Pack", "Unpack"]

_TYPES = ("int8", "uint8", "int16", "int32", "int64", "float", "bool")


def _index_values(op: str, name: str, t, arrays, k: int, dtypes=("int32",)) -> np.ndarray:
    if t.dtype.name not in dtypes:
        raise DTypeError(f"{op} {name}", "must be " + " or ".join(dtypes) + " (LiteRT rejects the model at prepare)",
                         t.dtype.name)
    return np.asarray(c.value(arrays, (), k, name) if arrays is not None else t.data).reshape(-1).astype(np.int64)


# -------------------------------------------------------------------------------------------------
# STRIDED_SLICE
# -------------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class StridedSliceParams:
    shape: tuple[int, ...]
    dtype: np.dtype
    masks: tuple[int, int, int, int, int]       # begin, end, ellipsis, new_axis, shrink
    offset: bool
    index_shapes: tuple[tuple[int, ...], ...]
    plan: tuple | None                          # (effective shape, slices, output shape) when known


def _bit(mask: int, i: int) -> bool:
    return bool(mask & (1 << i))


def _plan(shape: tuple[int, ...], begin: np.ndarray, end: np.ndarray, strides: np.ndarray, masks, offset: bool):
    """LiteRT's BuildStridedSliceParams, StartForAxis / EndForAxis and the output shape: (the input
    shape with the new axes, one Python slice or index per axis, the output shape)."""
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask = masks
    count = len(begin)
    rank = len(shape)
    num_add = sum(1 for i in range(count) if not _bit(ellipsis_mask, i) and _bit(new_axis_mask, i))
    dims = rank + num_add
    eff_ellipsis = eff_new = 0
    ellipsis_start, expanded = dims, 0
    i = 0
    while i < dims:
        if _bit(ellipsis_mask, i):
            ellipsis_start = i
            stop = max(i + 1, min(i + 1 + num_add + rank - count, dims))
            expanded = stop - ellipsis_start - 1
            while i < stop:
                eff_ellipsis |= 1 << i
                i += 1
            continue
        if _bit(new_axis_mask, i - expanded):
            eff_new |= 1 << i
        i += 1
    starts, stops, steps = [0] * dims, [0] * dims, [1] * dims
    b_mask = e_mask = s_mask = 0
    eff_shape = [0] * dims
    added_ellipsis = added_axes = 0
    for i in range(dims):
        if _bit(eff_ellipsis, i):
            added_ellipsis = max(0, i - ellipsis_start)
            b_mask |= 1 << i
            e_mask |= 1 << i
            eff_shape[i] = shape[i - added_axes]
        elif _bit(eff_new, i):
            starts[i], stops[i], steps[i] = 0, 1, 1
            eff_shape[i] = 1
            added_axes += 1
        elif i >= count + expanded:
            b_mask |= 1 << i
            e_mask |= 1 << i
            eff_shape[i] = shape[i - added_axes]
        else:
            o = i - added_ellipsis
            starts[i], stops[i], steps[i] = int(begin[o]), int(end[o]), int(strides[o])
            if _bit(begin_mask, o):
                b_mask |= 1 << i
            if _bit(end_mask, o):
                e_mask |= 1 << i
            if _bit(shrink_mask, o):
                s_mask |= 1 << i
            eff_shape[i] = shape[i - added_axes]
    slices, out_shape = [], []
    for i in range(dims):
        size, step = eff_shape[i], steps[i]
        if step == 0:
            raise c.limit("op-shape", InvalidArgumentError("STRIDED_SLICE strides", "must be non-zero (LiteRT "
                                                           "rejects the model at prepare)", 0))
        if step == -(1 << 31):
            raise c.limit("op-shape", InvalidArgumentError("STRIDED_SLICE strides", "INT32_MIN is not supported "
                                                           "(LiteRT rejects the model at prepare)", step))
        start = starts[i] + size if starts[i] < 0 else starts[i]
        start = min(max(start, 0), size) if step > 0 else min(max(start, -1), size - 1)
        if _bit(b_mask, i):
            start = 0 if step > 0 else size - 1
        if _bit(s_mask, i):
            stop = start if start >= size else start + 1
        else:
            stop = stops[i] + (start if offset else 0)
            stop = stop + size if stop < 0 else stop
            stop = min(max(stop, 0), size) if step > 0 else min(max(stop, -1), size - 1)
            if _bit(e_mask, i):
                stop = size if step > 0 else -1
        length = stop - start
        if (length < 0) != (step < 0):
            n = 0
        elif step < 0:
            n = (length + 1) // step + 1           # both negative: C's truncation is Python's floor here
        else:
            n = 0 if length == 0 else (length - 1) // step + 1
        if _bit(s_mask, i):
            if not 0 <= start < size or step < 0:
                raise c.limit("strided-slice-unwritten", UnsupportedError(
                    "STRIDED_SLICE begin", "a shrunk axis that starts outside the dimension or runs backwards: "
                    "LiteRT writes nothing there and leaves the output uninitialised (undefined behaviour)", (starts[i], step, size)))
            slices.append(slice(start, start + 1))
        else:
            if offset:
                # LiteRT sizes the output from the raw end (ResizeOutputTensor), copies the clamped range
                raw = int(end[i]) if i < len(end) and dims == len(end) else None
                declared = None if raw is None or (raw < 0) != (step < 0) else (
                    (raw + 1) // step + 1 if step < 0 else (0 if raw == 0 else (raw - 1) // step + 1))
                if declared != n:
                    raise c.limit("strided-slice-unwritten", UnsupportedError(
                        "STRIDED_SLICE end", "with offset, LiteRT sizes the output from the end as given but copies "
                        "the clamped range: part of the output stays uninitialised (undefined behaviour)", (int(end[i]) if i < len(end)
                                                                                        else None, n)))
            out_shape.append(n)
            slices.append(slice(start, start + n * step if start + n * step >= 0 else None, step) if n else
                          slice(0, 0))
    return tuple(eff_shape), tuple(slices), tuple(out_shape), s_mask


@register
class StridedSlice(Kernel):
    """STRIDED_SLICE with LiteRT's masks and clamping."""

    name = "STRIDED_SLICE"

    def prepare(self, inputs, outputs, options):
        op = self.name
        x, b, e, s = c.count(op, inputs, outputs, 4, names=("input", "begin", "end", "strides"))
        c.require_type(op, [("input", x)], _TYPES)
        c.require_same_type(x, outputs[0], "output", op)
        for name, t in (("begin", b), ("end", e), ("strides", s)):
            if len(t.shape) != 1:
                raise c.limit("op-shape", ShapeError(f"{op} {name}", "must be 1-D (LiteRT rejects the model at "
                                                     "prepare)", tuple(t.shape)))
            if t.dtype.name != "int32":
                raise c.limit("dtype", DTypeError(f"{op} {name}", "must be int32 (LiteRT rejects the model at "
                                                  "prepare)", t.dtype.name))
        if b.shape != e.shape:
            raise c.limit("op-shape", ShapeError(f"{op} begin / end", "must have as many elements (LiteRT rejects the "
                                                 "model at prepare)", (tuple(b.shape), tuple(e.shape))))
        if b.shape[0] > 31:
            raise c.limit("op-shape", ShapeError(f"{op} begin", "holds more than 31 indices (LiteRT rejects the model "
                                                 "at prepare)", b.shape[0]))
        masks = tuple(c.option(options, k, 0, kind=int) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                                                  "new_axis_mask", "shrink_axis_mask"))
        offset = c.option(options, "offset", False, kind=bool)
        plan = None
        if b.data is not None and e.data is not None and s.data is not None:
            plan = _plan(tuple(x.shape), np.asarray(b.data).reshape(-1), np.asarray(e.data).reshape(-1),
                         np.asarray(s.data).reshape(-1), masks, offset)
        return StridedSliceParams(tuple(x.shape), np.dtype(x.dtype.dtype), masks, offset,
                                  (tuple(b.shape), tuple(e.shape), tuple(s.shape)), plan)

    def compute(self, p: StridedSliceParams, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.dtype)])
        plan = p.plan
        if plan is None:
            vals = [np.asarray(c.value(arrays, (), k, n)).reshape(-1) for k, n in ((1, "begin"), (2, "end"),
                                                                                 (3, "strides"))]
            plan = _plan(p.shape, *vals, p.masks, p.offset)
        eff_shape, slices, out_shape, _ = plan
        return [np.ascontiguousarray(x.reshape(eff_shape)[slices]).reshape(out_shape)]


# -------------------------------------------------------------------------------------------------
# SPLIT, SPLIT_V
# -------------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class SplitParams:
    shape: tuple[int, ...]
    dtype: np.dtype
    axis: int
    sizes: tuple[int, ...]
    index: int                     # the input holding the data


def _axis(op: str, a: int, rank: int) -> int:
    v = a + rank if a < 0 else a
    if not 0 <= v < rank:
        raise c.limit("op-shape", InvalidArgumentError(f"{op} axis", f"must lie in [{-rank}, {rank - 1}] (LiteRT "
                                                       "rejects the model at prepare)", a))
    return v


def _constant_scalar(op: str, name: str, t) -> int:
    if t.dtype.name != "int32":
        raise c.limit("dtype", DTypeError(f"{op} {name}", "must be int32", t.dtype.name))
    if t.data is None:
        raise UnsupportedError(f"{op} {name}", "must be a constant for quantspec (LiteRT reads it at run time)", None)
    return int(np.asarray(t.data).reshape(-1)[0])


@register
class Split(Kernel):
    """SPLIT into ``num_splits`` equal parts along the axis (input 0: the axis)."""

    name = "SPLIT"

    def prepare(self, inputs, outputs, options):
        op = self.name
        a, x = c.count(op, inputs, outputs, 2, n_out=len(outputs), names=("axis", "input"))
        n = c.option(options, "num_splits", 0, kind=int)
        if n != len(outputs) or n == 0:
            raise c.limit("op-shape", InvalidArgumentError(f"{op} num_splits", "must be the number of outputs, not 0 "
                                                           "(LiteRT rejects the model at prepare)", n))
        c.require_type(op, [("input", x)], ("float", "uint8", "int8", "int16", "int32", "int64"))
        axis = _axis(op, _constant_scalar(op, "axis", a), len(x.shape))
        if x.shape[axis] % n:
            raise c.limit("op-shape", ShapeError(f"{op} input", "is not an even split (LiteRT rejects the model at "
                                                 "prepare)", (x.shape[axis], n)))
        return SplitParams(tuple(x.shape), np.dtype(x.dtype.dtype), axis, (x.shape[axis] // n,) * n, 1)

    def compute(self, p: SplitParams, arrays):
        x = c.check_arrays(self.name, arrays, [(p.index, p.shape, p.dtype)])[0]
        edges = np.cumsum(p.sizes)[:-1]
        return [np.ascontiguousarray(part) for part in np.split(x, edges, axis=p.axis)]


@register
class SplitV(Kernel):
    """SPLIT_V by ``size_splits`` (input 1, int32 or int64; one -1 takes the rest), along the axis (input 2)."""

    name = "SPLIT_V"

    def prepare(self, inputs, outputs, options):
        op = self.name
        x, sizes_t, a = c.count(op, inputs, outputs, 3, n_out=len(outputs), names=("input", "size_splits", "axis"))
        n = c.option(options, "num_splits", 0, kind=int)
        if n != len(outputs):
            raise c.limit("op-shape", InvalidArgumentError(f"{op} num_splits", "must be the number of outputs (LiteRT "
                                                           "rejects the model at prepare)", n))
        c.require_type(op, [("input", x)], ("float", "uint8", "int8", "int16", "int32", "int64"))
        if sizes_t.dtype.name not in ("int32", "int64"):
            raise c.limit("dtype", DTypeError(f"{op} size_splits", "must be int32 or int64", sizes_t.dtype.name))
        if len(sizes_t.shape) != 1 or sizes_t.shape[0] != len(outputs):
            raise c.limit("op-shape", ShapeError(f"{op} size_splits", "must be 1-D with one size per output (LiteRT "
                                                 "rejects the model at prepare)", tuple(sizes_t.shape)))
        if sizes_t.data is None:
            raise UnsupportedError(f"{op} size_splits", "must be a constant for quantspec", None)
        sizes = [int(v) for v in np.asarray(sizes_t.data).reshape(-1)]
        axis = _axis(op, _constant_scalar(op, "axis", a), len(x.shape))
        dim = x.shape[axis]
        if sizes.count(-1) > 1:
            raise c.limit("op-shape", InvalidArgumentError(f"{op} size_splits", "holds more than one -1 (LiteRT "
                                                           "rejects the model)", sizes))
        total = sum(v for v in sizes if v != -1)
        if -1 in sizes:
            if total > dim:
                raise c.limit("op-shape", InvalidArgumentError(f"{op} size_splits", "sum beyond the dimension (LiteRT "
                                                               "rejects the model)", sizes))
            sizes[sizes.index(-1)] = dim - total
        elif total != dim:
            raise c.limit("op-shape", InvalidArgumentError(f"{op} size_splits", "must sum to the dimension (LiteRT "
                                                           "rejects the model)", sizes))
        if any(v < 0 for v in sizes):
            raise c.limit("op-shape", InvalidArgumentError(f"{op} size_splits", "must not be negative", sizes))
        return SplitParams(tuple(x.shape), np.dtype(x.dtype.dtype), axis, tuple(sizes), 0)

    def compute(self, p: SplitParams, arrays):
        return Split.compute(self, p, arrays)


# -------------------------------------------------------------------------------------------------
# PACK, UNPACK
# -------------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class PackParams:
    shapes: tuple[tuple[int, ...], ...]
    dtype: np.dtype
    axis: int


def _same_params(op: str, a, b, what: str) -> None:
    sa, za = c.legacy(a)
    sb, zb = c.legacy(b)
    if sa != sb or za != zb:
        raise c.limit("same-scale", InvalidArgumentError(f"{op} {what}", "must have the output's scale and zero point "
                                                         "(LiteRT rejects the model at prepare)",
                                                         ((float(sa), za), (float(sb), zb))))


@register
class Pack(Kernel):
    """PACK: stack the inputs along a new ``axis``."""

    name = "PACK"

    def prepare(self, inputs, outputs, options):
        op = self.name
        n = c.option(options, "values_count", 0, kind=int)
        if len(inputs) != n or len(outputs) != 1 or n == 0 or any(t is None for t in inputs):
            raise c.limit("op-shape", InvalidArgumentError(f"{op} inputs", "must be values_count tensors (LiteRT "
                                                           "rejects the model at prepare)", (len(inputs), n)))
        x0 = inputs[0]
        rank = len(x0.shape) + 1
        axis = c.option(options, "axis", 0, kind=int)
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            raise c.limit("op-shape", InvalidArgumentError(f"{op} axis", "outside the output's rank (LiteRT rejects "
                                                           "the model at prepare)", axis))
        c.require_type(op, [("input 0", x0)], ("float", "uint8", "int8", "int16", "int32", "int64"))
        for k, t in enumerate(inputs[1:], 1):
            c.require_same_type(x0, t, f"input {k}", op)
            if tuple(t.shape) != tuple(x0.shape):
                raise c.limit("op-shape", ShapeError(f"{op} input {k}", "must have input 0's shape (LiteRT rejects the "
                                                     "model at prepare)", tuple(t.shape)))
        c.require_same_type(x0, outputs[0], "output", op)
        for k, t in enumerate(inputs):
            _same_params(op, t, outputs[0], f"input {k}")
        return PackParams(tuple(tuple(t.shape) for t in inputs), np.dtype(x0.dtype.dtype), axis)

    def compute(self, p: PackParams, arrays):
        xs = c.check_arrays(self.name, arrays, [(k, s, p.dtype) for k, s in enumerate(p.shapes)])
        return [np.stack(xs, axis=p.axis)]


@register
class Unpack(Kernel):
    """UNPACK: the slices along ``axis``, each one output."""

    name = "UNPACK"

    def prepare(self, inputs, outputs, options):
        op = self.name
        (x,) = c.count(op, inputs, outputs, 1, n_out=len(outputs), names=("input",))
        num = c.option(options, "num", 0, kind=int)
        if int(np.prod(x.shape, dtype=np.int64)) == 0:
            raise c.limit("op-shape", ShapeError(f"{op} input", "must not be empty (LiteRT rejects the model at "
                                                 "prepare)", tuple(x.shape)))
        axis = _axis(op, c.option(options, "axis", 0, kind=int), len(x.shape))
        if num != len(outputs) or num != x.shape[axis]:
            raise c.limit("op-shape", InvalidArgumentError(f"{op} num", "must be the size of the axis and the number "
                                                           "of outputs (LiteRT rejects the model at prepare)", num))
        c.require_type(op, [("input", x)], ("float", "uint8", "int8", "int16", "int32", "bool"))
        for k, o in enumerate(outputs):
            c.require_same_type(x, o, f"output {k}", op)
            _same_params(op, x, o, f"output {k}")
        return PackParams((tuple(x.shape),), np.dtype(x.dtype.dtype), axis)

    def compute(self, p: PackParams, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shapes[0], p.dtype)])
        return [np.array(np.take(x, k, axis=p.axis), copy=True) for k in range(x.shape[p.axis])]
