"""Run plans of the optimized and XNNPACK kernel modes: what the interpreter runs on the fast path
for an operator whose kernel is one of :mod:`quantspec.litert.kernels.optimized` or
:mod:`quantspec.litert.kernels.xnnpack` (the reference kernels' plans are :mod:`quantspec.litert.plans`).

A mode kernel computes the reference kernel's integers and then requantizes or rounds its own way;
its plan is the reference plan's machinery with that step replaced, the same bytes as the kernel's
``compute`` (``tests/test_litert_modeplans.py`` proves each plan equal to its kernel; the model tests
compare both with LiteRT):

- **CONV_2D, FULLY_CONNECTED** (int8): the exact float32 GEMM of :mod:`.plans` (im2col, chunks of the
  depth) and its epilogue with the optimized kernels' half-up final rounding (``HALFUP32``) or
  XNNPACK's float32 requantization (``FP32``); a GEMM of at most :data:`ROWS_GEMM` rows (a 1x1
  convolution of a small image, a FULLY_CONNECTED), or a FULLY_CONNECTED of at most
  :data:`~quantspec.litert.plans.SMALL_FC` multiply-adds, in one numba pass over the int8 weights
  (:func:`~quantspec.litert._jitted_plans.gemm_rows`).

Fused regions (:mod:`.regions`) take the table plans and the mode plans of few rows, softmax and
reductions as steps, so that a model of small tensors (a transformer encoder) runs as few compiled
calls in every mode.
- **DEPTHWISE_CONV_2D** (int8): one numba pass, accumulation and requantization
  (:func:`~quantspec.litert._jitted_modes.depthwise_mode`): the optimized kernel's blocks of 8
  channels half-up and its remaining channels as the reference, or XNNPACK's float32 rounding.
- **ADD, SUB, MUL** (int8): tables of every pair of codes, made by the mode's own kernel on every
  pair.  XNNPACK's arithmetic is the same at every position: one table.  The optimized ADD and MUL
  compute an element with vector lanes or with the reference scalar code depending on where it falls
  in the kernel's calls (:func:`~quantspec.litert.kernels.optimized.elementwise.broadcast_lanes`):
  one table per kind of lane, and per output element the kind (one table where all are the same).
- **LOGISTIC, TANH** (the mode's code-to-code table), XNNPACK's int8 **QUANTIZE** (a table of the
  256 codes made by its kernel): a table gather.
- **SOFTMAX** (optimized, int8): one numba pass over the rows with the kernel's float32 table.
- **RESIZE_BILINEAR** (XNNPACK, int8, constant size): one numba pass with the kernel's Q11
  positions and weights.
- **MEAN**: the optimized kernel's 4-D spatial mean (thread-dependent lanes fixed when the plan is
  made) in one numba pass; its other MEANs are the reference kernel's plan.  XNNPACK's MEAN and SUM
  over adjacent axes: one numba pass with its float32 conversion.

An operator whose case a plan does not cover keeps its kernel (``make`` returns None).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from .._fastpath import jit
from .plans.base import Plan, Requant, bind, exact_chunks, own

__all__ = ["make", "self_pair", "few_rows", "ROWS_GEMM", "RowsGemmPlan", "ModeDepthwisePlan", "LanePairPlan", "SpatialMeanPlan",
           "ReduceFp32Plan", "SoftmaxTablePlan", "QuantizeLanesPlan", "LaneTablesPlan", "XnnQuantizePlan",
           "XnnResizePlan"]

_INT8 = np.dtype(np.int8)


def _modes():
    return jit.load("quantspec.litert._jitted_modes")


def _int8(*specs) -> bool:
    return all(s is not None and s.dtype.name == "int8" for s in specs)


# -- GEMMs -----------------------------------------------------------------------------------------

def _requant(kind, channels, corr, zo, lo, hi, multiplier=None, shift=None, scale=None) -> Requant:
    eff = None if scale is None else np.asarray(scale, np.float32).astype(np.float64)
    return Requant(channels, corr, kind, zo, lo, hi, np.int8, multiplier=multiplier, shift=shift, eff=eff)


def _conv(kernel, q, base, ins, outs, kind, scale=None, lo=None, hi=None):
    from .plans.conv import conv_plan

    if base.wide or not _int8(ins[0], outs[0]):
        return None
    plan = conv_plan(kernel, base, ins, outs)
    if plan is None:
        return None
    o = base.output_shape[3]
    requant = _requant(kind, o, plan.requant.corr, base.output_zero_point,
                       base.act_min if lo is None else lo, base.act_max if hi is None else hi,
                       multiplier=base.multiplier, shift=base.shift, scale=scale)
    if plan.direct and plan.rows <= ROWS_GEMM:
        w8 = _int8_weights(plan.weights)
        if w8 is not None:
            return RowsGemmPlan(kernel, q, w8, requant, plan.rows, base.output_shape)
    plan.requant = requant
    plan.prepared = q
    return plan


#: a GEMM of at most this many rows (a 1x1 convolution of a 2x2 image, a FULLY_CONNECTED of a few
#: rows) runs as one numba pass of int32 dot products over the int8 weights (:class:`RowsGemmPlan`):
#: the float32 GEMM of so few rows reads four bytes per weight and is bound by that (measured: about
#: twice as fast at 4 rows, slower from 16)
ROWS_GEMM = 4


class RowsGemmPlan(Plan):
    """An int8 GEMM of few rows and its requantization in one numba pass over int8 weights
    (:func:`~quantspec.litert._jitted_plans.gemm_rows`)."""

    __slots__ = ("w", "outer", "corr", "mult", "shift", "eff", "kind", "zo", "lo", "hi", "size", "shape")

    def __init__(self, kernel, q, w8, requant, rows, shape):
        super().__init__(kernel, q)
        units = requant.corr.size
        depth = w8.shape[0]
        # fewer input than output channels: sums along the output channels (measured 20-50 % faster
        # there; one dot product per output where the depth is the longer)
        self.outer = depth < units
        self.w = own(w8 if self.outer else w8.T).reshape(-1)
        self.corr = requant.corr
        self.mult, self.shift, self.eff, self.kind = requant.mult, requant.shift, requant.eff, requant.kind
        self.zo, self.lo, self.hi = requant.zo, requant.lo, requant.hi
        self.size = rows * requant.corr.size
        self.shape = tuple(shape)

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        args = (arrays[0].reshape(-1), self.w, self.outer, self.corr, self.mult, self.shift, self.eff, self.kind,
                self.zo, self.lo, self.hi, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = bind("gemm_rows", args)
        entry(*args)
        return [out.reshape(self.shape)]


def _int8_weights(w) -> np.ndarray | None:
    """The float32 (depth, units) matrix of integer weights as int8 (depth, units); None where one
    does not fit."""
    w8 = np.asarray(w).astype(np.int8)
    if not np.array_equal(w8.astype(np.float32), w):
        return None
    return w8


def _fully_connected(kernel, q, p, ins, outs, kind, multiplier=None, shift=None, scale=None, lo=None, hi=None):
    from .plans.fully_connected import SMALL_FC, FullyConnectedPlan

    if p.wide or not _int8(ins[0], outs[0]):
        return None
    if p.weights is None or p.depth == 0 or p.filter_zero_point != 0 or (p.has_bias and p.bias is None):
        return None
    if math.prod(p.output_shape) == 0 or p.rows == 0:
        return None
    chunks = exact_chunks(p.depth, max(128, abs(p.input_zero_point)), p.weight_bound)
    if chunks is None:
        return None
    bias = np.zeros(p.units, np.int64) if p.bias is None else p.bias.astype(np.int64)
    corr = bias - np.int64(p.input_zero_point) * p.weight_sums
    requant = _requant(kind, p.units, corr, p.output_zero_point, p.act_min if lo is None else lo,
                       p.act_max if hi is None else hi, multiplier=multiplier, shift=shift, scale=scale)
    if p.rows <= ROWS_GEMM or p.rows * p.depth * p.units <= SMALL_FC:
        w8 = _int8_weights(p.weights)
        if w8 is not None:
            return RowsGemmPlan(kernel, q, w8, requant, p.rows, p.output_shape)
    plan = FullyConnectedPlan(kernel, p, chunks, requant, False)
    plan.prepared = q
    return plan


# -- DEPTHWISE_CONV_2D -----------------------------------------------------------------------------

class ModeDepthwisePlan(Plan):
    """int8 DEPTHWISE_CONV_2D: accumulation and the mode's requantization in one numba pass."""

    __slots__ = ("filt", "bias", "mult", "shift", "scale", "vec", "geometry", "kind", "zx", "zo", "lo", "hi",
                 "shape", "work")

    def __init__(self, kernel, q, p, kind, vector=0, scale=None, lo=None, hi=None):
        super().__init__(kernel, q)
        n, oh, ow, oc = p.output_shape
        _, h, w, c = p.input_shape
        kh, kw = p.filter_hw
        self.filt = own(p.filter, np.int32).reshape(-1)
        self.bias = np.zeros(oc, np.int64) if p.bias is None else own(p.bias, np.int64).reshape(oc)
        self.mult = own(np.broadcast_to(np.asarray(p.multiplier, np.int64), (oc,)))
        self.shift = own(np.broadcast_to(np.asarray(p.shift, np.int64), (oc,)))
        self.scale = own(np.broadcast_to(np.asarray(0.0 if scale is None else scale, np.float32), (oc,)))
        self.vec = own(np.arange(oc) < vector, np.int8)
        self.geometry = np.array([h, w, c, kh, kw, oc // c, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        self.kind = int(kind)
        self.zx, self.zo = int(p.input_zero_point), int(p.output_zero_point)
        self.lo = int(p.act_min if lo is None else lo)
        self.hi = int(p.act_max if hi is None else hi)
        self.shape = tuple(p.output_shape)
        self.work = n * oh

    def compute(self, unused, arrays):
        from .._fastpath import runner as core

        out = np.empty(self.shape, np.int8)
        core.launch(_modes().depthwise_mode, (arrays[0].reshape(-1), self.filt, self.bias, self.mult, self.shift,
                                              self.scale, self.vec, self.geometry, self.kind, self.zx, self.zo,
                                              self.lo, self.hi, out.reshape(-1)), self.work, out.size)
        return [out]


def _depthwise(kernel, q, p, ins, outs, kind, **kw):
    if p.wide or not _int8(ins[0], outs[0]) or p.filter is None or (p.has_bias and p.bias is None) \
            or math.prod(p.output_shape) == 0:
        return None
    return ModeDepthwisePlan(kernel, q, p, kind, **kw)


# -- ADD, SUB, MUL ---------------------------------------------------------------------------------

class LanePairPlan(Plan):
    """Several tables by pair of int8 codes, the table of each output element chosen by its lane kind."""

    __slots__ = ("tables", "lanes", "dims", "xs", "ys", "shape", "size")

    def __init__(self, kernel, q, tables, lanes, walk, shape):
        super().__init__(kernel, q)
        self.tables, self.lanes = tables, lanes
        self.dims, self.xs, self.ys = walk
        self.shape = tuple(shape)
        self.size = math.prod(shape)

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        args = (arrays[0].reshape(-1).view(np.uint8), arrays[1].reshape(-1).view(np.uint8), self.tables, self.lanes,
                self.dims, self.xs, self.ys, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = bind("gather2_lanes", args)
        entry(*args)
        return [out.reshape(self.shape)]


def _flat_prepared(kernel, ins, outs, options):
    """``kernel`` prepared for two inputs and an output of 65536 elements (every pair of codes)."""
    flat = (1 << 16,)
    return kernel.prepare([replace(ins[0], shape=flat, data=None), replace(ins[1], shape=flat, data=None)],
                          [replace(outs[0], shape=flat, data=None)], options)


def _frozen(table) -> np.ndarray:
    t = np.ascontiguousarray(table, np.int8).reshape(-1)
    t.setflags(write=False)
    return t


def _optimized_binary(name, kernel, q, ins, outs, options):
    from .kernels import REGISTRY
    from .kernels.optimized.elementwise import ELEMENTWISE, REFERENCE, SCALAR_BROADCAST, OptimizedBinary
    from .plans.elementwise import PairTablePlan, _broadcast_walk, _pair_table_of, _pairs

    p = q.base
    if getattr(p, "dtype", _INT8) != _INT8 or getattr(p, "pot_shifts", None) is not None:
        return None
    shape = tuple(p.output_shape)
    walk = _broadcast_walk(tuple(ins[0].shape), tuple(ins[1].shape), shape)
    if walk is None or math.prod(shape) == 0:
        return None
    kinds = sorted(set(np.unique(q.lanes).tolist()))
    x, y = _pairs()
    tables = {}
    with jit.reference_only():
        for kind in kinds:
            if kind == REFERENCE:
                t = _pair_table_of(REGISTRY[name], ins, outs, options)
                if t is None:
                    return None
            elif name == "MUL" or kind == ELEMENTWISE:
                f = _flat_prepared(kernel, ins, outs, options)
                (t,) = kernel.compute(OptimizedBinary(f.base, np.full(1 << 16, kind, np.int8)), [x, y])
            elif kind == SCALAR_BROADCAST:
                f = _flat_prepared(kernel, ins, outs, options)
                t = kernel._lanes(f.base, x, y, SCALAR_BROADCAST).astype(np.int8)
            else:
                return None
            tables[kind] = _frozen(t)
    if len(kinds) == 1:
        plan = PairTablePlan(kernel, q, tables[kinds[0]], walk, shape)
        return plan
    stack = np.zeros((max(kinds) + 1) << 16, np.int8)
    for kind, t in tables.items():
        stack[kind << 16:(kind + 1) << 16] = t
    stack.setflags(write=False)
    return LanePairPlan(kernel, q, stack, own(q.lanes, np.int8), walk, shape)


def _xnnpack_binary(name, kernel, q, ins, outs, options):
    from .plans.elementwise import PairTablePlan, _broadcast_walk, _pair_table_of

    p = q.base
    shape = tuple(p.output_shape)
    walk = _broadcast_walk(tuple(ins[0].shape), tuple(ins[1].shape), shape)
    if math.prod(shape) == 0:
        return None
    table = _pair_table_of(kernel, ins, outs, options)
    if table is None:
        return None
    return PairTablePlan(kernel, q, table, walk, shape)


# -- tables of one input -----------------------------------------------------------------------------

def _lut(kernel, q, ins, outs):
    from .plans.unary import unary_plan

    return unary_plan(kernel, q, ins, outs)


def _xnnpack_requantize(kernel, q, ins, outs):
    from .plans.unary import UnaryTablePlan

    codes = np.arange(256, dtype=np.int64)
    x = ((codes ^ 0x80) - 0x80).astype(np.int8)        # indexed by the uint8 view
    with jit.reference_only():
        (t,) = kernel.compute(replace(q, shape=(256,)), [x])
    return UnaryTablePlan(kernel, q, _frozen(t), np.uint8, None)


# -- MEAN, SUM --------------------------------------------------------------------------------------

class SpatialMeanPlan(Plan):
    """The optimized MEAN over the spatial axes of an int8 (N, H, W, C) tensor, one numba pass."""

    __slots__ = ("n", "hw", "depth", "mult", "shift", "vec", "bias", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.n * self.depth, np.int8)
        args = (arrays[0].reshape(-1), self.n, self.hw, self.depth, self.mult, self.shift, self.vec, self.bias, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = jit_entry("mean_spatial", args)
        entry(*args)
        return [out.reshape(self.shape)]


def jit_entry(name: str, args: tuple):
    """The compiled entry point of the mode kernel ``name`` for exactly the types of ``args``."""
    from .._fastpath.runner import dispatcher_entry

    return dispatcher_entry(getattr(_modes(), name), args)


def _optimized_mean(kernel, q, ins, outs):
    from .kernels.optimized._lanes import block_mask
    from .kernels.optimized.reduce import thread_ranges
    from .plans.reduce import mean_plan

    p = q.base
    if p.axes is None:
        return None
    if not (len(p.shape) == 4 and p.keep_dims and len(p.axes) == 2 and set(p.axes) == {1, 2}
            and 0 not in p.shape):
        plan = mean_plan(kernel, p, ins, outs)       # the reference kernel's MEAN
        if plan is not None:
            plan.prepared = q
        return plan
    if not _int8(ins[0], outs[0]):
        return None
    n, h, w, depth = p.shape
    vec = np.zeros(depth, bool)
    for start, end in thread_ranges(depth, q.threads):
        vec[start:end] = block_mask(end - start, 16)
    plan = SpatialMeanPlan(kernel, q)
    plan.n, plan.hw, plan.depth = int(n), int(h * w), int(depth)
    plan.mult, plan.shift, plan.bias = np.int64(q.multiplier), np.int64(q.shift), np.int64(q.bias)
    plan.vec = own(vec, np.int8)
    plan.shape = (n, 1, 1, depth)
    return plan


class ReduceFp32Plan(Plan):
    """XNNPACK's MEAN / SUM over adjacent axes of int8, one numba pass."""

    __slots__ = ("outer", "red", "inner", "scale", "zp", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.outer * self.inner, np.int8)
        args = (arrays[0].reshape(-1), self.outer, self.red, self.inner, self.scale, self.zp, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = jit_entry("reduce_fp32", args)
        entry(*args)
        return [out.reshape(self.shape)]


def _xnnpack_reduce(kernel, q, ins, outs):
    p = q.base
    if p.axes is None or not p.axes or not _int8(ins[0], outs[0]) or math.prod(p.shape) == 0:
        return None
    axes = sorted(set(p.axes))
    if axes != list(range(axes[0], axes[-1] + 1)):
        return None
    shape = p.shape
    n = math.prod(shape[a] for a in axes)
    if n == 0:
        return None
    from .kernels.xnnpack.reduce import conversion

    scale, zp = conversion(q, n)
    plan = ReduceFp32Plan(kernel, q)
    plan.outer = math.prod(shape[:axes[0]])
    plan.red = n
    plan.inner = math.prod(shape[axes[-1] + 1:])
    plan.scale, plan.zp = np.float32(scale), np.float32(zp)
    plan.shape = tuple(1 if i in axes else d for i, d in enumerate(shape)) if p.keep_dims else \
        tuple(d for i, d in enumerate(shape) if i not in axes)
    return plan


# -- QUANTIZE ---------------------------------------------------------------------------------------

class QuantizeLanesPlan(Plan):
    """The optimized per-tensor float32 QUANTIZE: its blocks of 8 values in one numba pass, the tail
    (``size mod 8`` values) as the kernel computes it."""

    __slots__ = ("n", "inverse", "scale", "zp", "lo", "hi", "dtype", "shape")

    def compute(self, unused, arrays):
        from .params import affine_quantize

        x = arrays[0].reshape(-1)
        out = np.empty(x.size, self.dtype)
        args = (x, self.n, self.inverse, self.zp, self.lo, self.hi, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = jit_entry("quantize_lanes", args)
        entry(*args)
        if self.n < x.size:
            out[self.n:] = affine_quantize(x[self.n:].astype(np.float64), self.scale, int(self.zp), int(self.lo),
                                           int(self.hi))
        return [out.reshape(self.shape)]


def _optimized_float_quantize(kernel, q, ins, outs):
    if q.params is None or q.params.per_axis or ins[0] is None or ins[0].dtype.name != "float" \
            or np.dtype(q.out_dtype) not in (np.dtype(np.int8), np.dtype(np.int16)):
        return None
    info = np.iinfo(q.out_dtype)
    plan = QuantizeLanesPlan(kernel, q)
    size = math.prod(q.shape)
    plan.n = (size // 8) * 8
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        plan.inverse = np.float32(1.0 / np.float64(q.params.scale[0]))
    plan.scale = np.float64(q.params.scale[0])
    plan.zp = np.int64(q.params.zero_point[0])
    plan.lo, plan.hi = np.int64(info.min), np.int64(info.max)
    plan.dtype, plan.shape = np.dtype(q.out_dtype), tuple(q.shape)
    return plan


class LaneTablesPlan(Plan):
    """A requantization of one-byte codes whose first ``n`` values (full vector blocks) take one table
    and the rest another (the optimized int8 QUANTIZE)."""

    __slots__ = ("vector", "tail", "n", "shape")

    def compute(self, unused, arrays):
        x = arrays[0].reshape(-1).view(np.uint8)
        out = np.take(self.vector, x)
        if self.n < x.size:
            out[self.n:] = np.take(self.tail, x[self.n:])
        return [out.reshape(self.shape)]


def _optimized_requantize(kernel, q, ins, outs):
    one = (np.dtype(np.int8), np.dtype(np.uint8))
    if q.xor or q.in_dtype not in one or q.out_dtype not in one:
        return None
    codes = np.arange(256, dtype=np.int64)
    x = (((codes ^ 0x80) - 0x80) if q.in_dtype == np.int8 else codes).astype(q.in_dtype)   # by the uint8 view
    # the 256 codes in one call fill 16 full blocks: every code on the vector lanes; 8 codes in a call
    # are all in the scalar tail
    with jit.reference_only():
        (vector,) = kernel.compute(replace(q, shape=(256,)), [x])
        tail = np.concatenate([kernel.compute(replace(q, shape=(8,)), [x[k:k + 8]])[0] for k in range(0, 256, 8)])
    size = math.prod(q.shape)
    if size % 16 == 0:                      # every value on the vector lanes: one code table
        from .plans.unary import UnaryTablePlan

        return UnaryTablePlan(kernel, q, _frozen_as(vector, q.out_dtype), np.uint8, None)
    plan = LaneTablesPlan(kernel, q)
    plan.vector, plan.tail = _frozen_as(vector, q.out_dtype), _frozen_as(tail, q.out_dtype)
    plan.n = (size // 16) * 16
    plan.shape = tuple(q.shape)
    return plan


def _frozen_as(table, dtype) -> np.ndarray:
    t = np.ascontiguousarray(table, dtype).reshape(-1)
    t.setflags(write=False)
    return t


class XnnQuantizePlan(Plan):
    """XNNPACK's float32 -> int8 QUANTIZE, one numba pass."""

    __slots__ = ("inverse", "zp", "shape")

    def compute(self, unused, arrays):
        x = arrays[0].reshape(-1)
        out = np.empty(x.size, np.int8)
        args = (x, self.inverse, self.zp, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = jit_entry("quantize_xnn", args)
        entry(*args)
        return [out.reshape(self.shape)]


def _xnnpack_float_quantize(kernel, q, ins, outs):
    if ins[0] is None or ins[0].dtype.name != "float" or not _int8(outs[0]):
        return None
    plan = XnnQuantizePlan(kernel, q)
    plan.inverse, plan.zp, plan.shape = np.float32(q.inverse_scale), np.int64(q.zero_point), tuple(q.shape)
    return plan


# -- RESIZE_BILINEAR ---------------------------------------------------------------------------------

class XnnResizePlan(Plan):
    """XNNPACK's int8 RESIZE_BILINEAR (constant size), one numba pass."""

    __slots__ = ("dims", "y0", "y1", "ay", "x0", "x1", "ax", "size", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        args = (arrays[0].reshape(-1), self.dims, self.y0, self.y1, self.ay, self.x0, self.x1, self.ax, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = jit_entry("resize_q11", args)
        entry(*args)
        return [out.reshape(self.shape)]


def _xnnpack_resize(kernel, q, ins, outs):
    p = q.base
    if q.plan is None or not _int8(ins[0], outs[0]) or len(p.input_shape) != 4:
        return None
    oh, ow, (y0, y1, ay), (x0, x1, ax) = q.plan
    n, h, w, c = p.input_shape
    if 0 in (n, h, w, c, oh, ow):
        return None
    plan = XnnResizePlan(kernel, q)
    plan.dims = np.array([n, h, w, c], np.int64)
    plan.y0, plan.y1, plan.ay = own(y0, np.int64), own(y1, np.int64), own(ay, np.int64)
    plan.x0, plan.x1, plan.ax = own(x0, np.int64), own(x1, np.int64), own(ax, np.int64)
    plan.shape = (n, oh, ow, c)
    plan.size = n * oh * ow * c
    return plan


# -- SOFTMAX ---------------------------------------------------------------------------------------

class SoftmaxTablePlan(Plan):
    """The optimized int8 SOFTMAX (float32 table of ``expf``), one numba pass over the rows."""

    __slots__ = ("cols", "table", "so", "zo", "shape")

    def __init__(self, kernel, q):
        super().__init__(kernel, q)
        self.shape = tuple(q.shape)
        self.cols = int(self.shape[-1])
        self.table = own(q.table, np.float32)
        self.so, self.zo = np.float32(q.output_scale), np.int64(q.output_zero_point)

    def compute(self, unused, arrays):
        x = arrays[0]
        out = np.empty(self.shape, np.int8)
        args = (x.reshape(-1), self.cols, self.table, self.so, self.zo, out.reshape(-1))
        entry = self.entry
        if entry is None:
            entry = self.entry = jit_entry("softmax_table", args)
        entry(*args)
        return [out]


def _optimized_softmax(kernel, q, ins, outs):
    if not _int8(ins[0], outs[0]) or not q.shape or math.prod(q.shape) == 0:
        return None
    return SoftmaxTablePlan(kernel, q)


# -- choosing ----------------------------------------------------------------------------------------

def make(name: str, kernel, prepared, inputs, outputs, options) -> Plan | None:
    """The plan of an operator run by a mode kernel, or None where the kernel runs as it is."""
    from ..errors import QuantSpecError
    from .kernels import optimized as O
    from .kernels.optimized import gemm as og
    from .kernels.xnnpack import binary as xb, gemm as xg, reduce as xr, resize as xz, unary as xu
    from . import _jitted_plans as K

    if any(t is not None and t.data is None and any(d < 0 for d in t.shape) for t in (*inputs, *outputs)):
        return None
    t = type(kernel)
    try:
        if t is og.Conv2D and isinstance(prepared, og.ConvOptimized) and not prepared.reference:
            return _conv(kernel, prepared, prepared.base, inputs, outputs, K.HALFUP32)
        if t is xg.Conv2D and isinstance(prepared, xg.XnnGemm):
            return _conv(kernel, prepared, prepared.base, inputs, outputs, K.FP32, scale=prepared.scale,
                         lo=prepared.qmin, hi=prepared.qmax)
        if t is og.DepthwiseConv2D:
            from .kernels.conv import ConvPrepared

            if not isinstance(prepared, ConvPrepared):
                return None
            oc = prepared.output_shape[3]
            return _depthwise(kernel, prepared, prepared, inputs, outputs, 0,
                              vector=(oc // og.DEPTHWISE_BLOCK) * og.DEPTHWISE_BLOCK)
        if t is xg.DepthwiseConv2D and isinstance(prepared, xg.XnnGemm):
            return _depthwise(kernel, prepared, prepared.base, inputs, outputs, 1, scale=prepared.scale,
                              lo=prepared.qmin, hi=prepared.qmax)
        if t is og.FullyConnected and isinstance(prepared, og.FullyConnectedOptimized):
            p = prepared.base
            units = max(p.units, 1)
            return _fully_connected(kernel, prepared, p, inputs, outputs, K.HALFUP32,
                                    multiplier=np.broadcast_to(prepared.multiplier, (units,)),
                                    shift=np.broadcast_to(prepared.shift, (units,)))
        if t is xg.FullyConnected and isinstance(prepared, xg.XnnGemm):
            return _fully_connected(kernel, prepared, prepared.base, inputs, outputs, K.FP32, scale=prepared.scale,
                                    lo=prepared.qmin, hi=prepared.qmax)
        if t in (type(O.OPS["ADD"]), type(O.OPS["MUL"])):
            from .kernels.optimized.elementwise import OptimizedBinary

            if isinstance(prepared, OptimizedBinary) and _int8(*inputs[:2], outputs[0]):
                return _optimized_binary(name, kernel, prepared, inputs, outputs, options)
            return None
        if t in (xb.Add, xb.Sub, xb.Mul) and isinstance(prepared, (xb.XnnAdd, xb.XnnMul)):
            if _int8(*inputs[:2], outputs[0]):
                return _xnnpack_binary(name, kernel, prepared, inputs, outputs, options)
            return None
        if t in (type(O.OPS["LOGISTIC"]), type(O.OPS["TANH"]), xu.Logistic, xu.Tanh):
            from .kernels.activations import LutParams

            if isinstance(prepared, LutParams):
                return _lut(kernel, prepared, inputs, outputs)
            return None
        if t is xu.Quantize and isinstance(prepared, xu.XnnRequantize) and _int8(inputs[0], outputs[0]):
            return _xnnpack_requantize(kernel, prepared, inputs, outputs)
        if t is xu.Quantize and isinstance(prepared, xu.XnnQuantizeFloat):
            return _xnnpack_float_quantize(kernel, prepared, inputs, outputs)
        if t is type(O.OPS["QUANTIZE"]):
            from .kernels.quantize import FloatQuantizeParams, RequantizeParams

            if isinstance(prepared, FloatQuantizeParams):
                return _optimized_float_quantize(kernel, prepared, inputs, outputs)
            if isinstance(prepared, RequantizeParams):
                return _optimized_requantize(kernel, prepared, inputs, outputs)
            return None
        if t is type(O.OPS["MEAN"]):
            from .kernels.optimized.reduce import MeanOptimized

            if isinstance(prepared, MeanOptimized):
                return _optimized_mean(kernel, prepared, inputs, outputs)
            return None
        if t is type(O.OPS["SOFTMAX"]):
            from .kernels.optimized.activations import SoftmaxOptimized

            if isinstance(prepared, SoftmaxOptimized):
                return _optimized_softmax(kernel, prepared, inputs, outputs)
            return None
        if t is xz.ResizeBilinear and isinstance(prepared, xz.XnnResize):
            return _xnnpack_resize(kernel, prepared, inputs, outputs)
        if t in (xr.Mean, xr.Sum) and isinstance(prepared, xr.XnnReduce):
            return _xnnpack_reduce(kernel, prepared, inputs, outputs)
    except QuantSpecError:
        return None
    return None


def self_pair(first: Plan, second: Plan, tpos: int) -> Plan | None:
    """One unary table for the pair table ``second`` whose input ``tpos`` is the output of the unary
    table ``first`` and whose other input is ``first``'s own input (``x * LOGISTIC(x)``, a swish; in
    any kernel mode): entry ``x`` is ``second``'s entry for the pair ``(x, first[x])`` (or
    ``(first[x], x)``), the same bytes by construction.  None where they do not compose (a table with
    invalid codes, a lane-dependent pair plan, a broadcast)."""
    from .plans.elementwise import PairTablePlan
    from .plans.folding import byte_table
    from .plans.unary import UnaryTablePlan

    if not byte_table(first) or first.table.dtype != _INT8 or type(second) is not PairTablePlan \
            or second.dims is None or second.table.dtype != _INT8:
        return None
    if not np.array_equal(second.xs, second.ys):      # the two inputs walked alike: no broadcast
        return None
    x = np.arange(256, dtype=np.int64)                  # the codes' unsigned view
    t = first.table.view(np.uint8).astype(np.int64)
    index = (x << 8) | t if tpos == 1 else (t << 8) | x
    table = np.ascontiguousarray(second.table[index])
    table.setflags(write=False)
    return UnaryTablePlan(second.kernel, second.prepared, table, np.uint8, None)


def few_rows(plan: Plan) -> Plan:
    """A reference plan's int8 1x1 CONV_2D of at most :data:`ROWS_GEMM` output pixels (a squeeze-and-
    excitation layer, the last layers of a CNN on a small image) as a :class:`RowsGemmPlan` with the
    plan's own requantization (its epilogue's kind, per-channel constants and zero-point correction):
    the same bytes, int8 weights read once, and a step the fused regions take.  Any other plan is
    returned as it is."""
    from . import _jitted_plans as K
    from .plans.conv import ConvPlan

    if type(plan) is not ConvPlan:
        return plan
    ok = plan.direct and not plan.split
    rq = plan.requant
    if not ok or plan.rows > ROWS_GEMM or rq.dtype != _INT8 or rq.kind != K.MBQM32:
        return plan
    w8 = _int8_weights(plan.weights)
    if w8 is None:
        return plan
    return RowsGemmPlan(plan.kernel, plan.prepared, w8, rq, plan.rows, plan.shape)
