"""Run plans: what :class:`~quantspec.litert.Interpreter` runs for an operator of a model on the fast
path, the same bytes as its reference kernel's ``compute`` with less work per call.

A reference kernel's ``compute`` is written to be read: it checks its arrays, broadcasts, converts
and requantizes with whole-array numpy operations, each making a temporary.  Inside a model that is
most of the cost: a converter-made mobile model's tensors are small (a few thousand values, often
fewer), so a kernel's dozen numpy calls cost more than its arithmetic, and LiteRT's reference
kernels, plain C++ loops, spend microseconds per operator.  A plan is made once per operator when
the interpreter first runs its graph on the fast path, from the operator's prepared record and its
tensors' shapes, and keeps everything that depends on those alone:

- **CONV_2D, FULLY_CONNECTED, BATCH_MATMUL**: the windows copied to a float32 matrix in one numba
  pass (:func:`~._jitted_plans.im2col`, no temporaries), one float32 BLAS GEMM per exact chunk of
  the depth (:mod:`._gemm`: why a float32 GEMM of integers is exact), and one numba pass for
  everything after it (:func:`~._jitted_plans.epilogue`: zero-point correction, bias, the int32 wrap,
  the requantization, the clamp).  int16 activations (the 16x8 kernels) split each value into its
  high byte and its low byte, two int8-sized operands whose float32 GEMMs are exact in chunks of
  about 500 (their int16 product with an int8 weight is not exact in float32 beyond a depth of 4),
  and recombine them in the epilogue (``256 * high + low``).
- **DEPTHWISE_CONV_2D**: the fused numba kernel of :mod:`.fast` (int8) or the exact accumulation
  and the epilogue (int16), every argument prepared.
- **ADD, SUB, MUL** (int8): a 65536-entry table of the operator's result for every pair of input
  codes, made by the reference kernel itself on every pair, and one gather over the broadcast
  inputs (:func:`~._jitted_plans.gather2`); **SQUARED_DIFFERENCE, PRELU** gather from the table their
  kernel already made.  The tables of unary operators (HARD_SWISH, LOGISTIC, GELU, RSQRT, ...) are
  gathered without the per-call checks.
- **MEAN, SUM** over adjacent axes, **SOFTMAX** (int8): one numba pass each.
- **RESHAPE, SQUEEZE**: a view (the interpreter never writes into an array it has handed on).
- **GATHER** (no batch dimensions): one numba pass that checks the positions and copies;
  **TRANSPOSE** (constant permutation): the copy of the permuted view; **CONCATENATION**: numpy's
  concatenation.
- **PAD, PADV2** (constant paddings and pad value): a copy of the pad-filled output made once, the
  input written into it; **RESIZE_BILINEAR** (int8, constant size): one numba pass.

On the interpreter's fast loop, tables in a row become one where the tensor between them is read by
nothing else (and not every tensor is kept): a unary table after a pair or unary table is their
composed table (:func:`fold`; where the second marks codes LiteRT fails on, as RSQRT does, the
composition carries the marks and an input that reaches one runs both plans, so the second raises),
and a pair table whose input is a pair table's output is one pass over the three inputs
(:func:`chain`).  Each is the same bytes by construction: the second table indexed by the first's
entries.

A plan is used only for the shapes and types it was made for (an operator whose input a run finds
with another shape takes its kernel), and only on the fast path: ``QUANTSPEC_FAST=0`` runs every
kernel's reference ``compute``.  Where a plan cannot reproduce a case — a non-constant filter,
grouped convolution, a table the reference kernel refuses to compute (an input pair on which LiteRT
has undefined behaviour), a row whose reciprocal LiteRT aborts on — it returns or defers to the
reference kernel, which computes or raises as before.  ``tests/test_litert_plans.py`` proves plan
and kernel equal on every kind of operator; the model tests compare both with LiteRT.

Scratch matrices (im2col, the GEMM's result) are kept by the plan between runs; a plan entered by a
second thread while the first is inside it takes fresh ones.  Outputs are always fresh arrays.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Callable, Sequence

import numpy as np

from .._fastpath import jit
from ._gemm import F32_EXACT, f32_chunk

__all__ = ["make", "Plan"]


def _k():
    return jit.load("quantspec.litert._jitted_plans")


def _own(a, dtype=None) -> np.ndarray:
    """A fresh, writable, contiguous copy: every array a plan hands a kernel has the same flags, so
    that each kernel compiles one signature per combination of types (numba's array type includes
    whether it is writable)."""
    return np.array(a, dtype=dtype, order="C", copy=True)


def _bind(name: str, args: tuple):
    """The compiled entry point of the plan kernel ``name`` for exactly the types of ``args``
    (:func:`quantspec._fastpath.fast._entry`: no type checks at each call), for a plan whose later calls
    pass arguments of the same numba types: its own arrays, and the operator's inputs as flat
    (``reshape(-1)``: C-contiguous) arrays of one-byte codes, whose type can differ only by the
    writeable flag, which compiled code that reads them does not depend on."""
    from .._fastpath.fast import _entry

    return _entry(getattr(_k(), name), args)


class Plan:
    """The interface the interpreter calls: ``compute(unused, arrays) -> outputs``, like a kernel
    whose prepared record is the plan itself.  ``entry``: the compiled entry point of its numba kernel
    once bound (:func:`_bind`), for plans whose inputs are one-byte codes."""

    __slots__ = ("kernel", "prepared", "entry")

    def __init__(self, kernel, prepared):
        self.kernel, self.prepared = kernel, prepared
        self.entry = None

    def reference(self, arrays):
        """The reference kernel's compute (cases the plan defers)."""
        return self.kernel.compute(self.prepared, arrays)

    def compute(self, unused, arrays):  # pragma: no cover - abstract
        raise NotImplementedError


class _Scratch:
    """Buffers kept between runs, for one thread at a time (another thread gets fresh ones)."""

    __slots__ = ("lock", "shapes", "buffers")

    def __init__(self, shapes: Sequence[tuple[tuple[int, ...], Any]]):
        self.lock = threading.Lock()
        self.shapes = tuple(shapes)
        self.buffers = None

    def take(self):
        if self.lock.acquire(False):
            if self.buffers is None:
                self.buffers = tuple(np.empty(s, d) for s, d in self.shapes)
            return self.buffers, True
        return tuple(np.empty(s, d) for s, d in self.shapes), False

    def give(self, owned: bool) -> None:
        if owned:
            self.lock.release()


# ---------------------------------------------------------------------------------------------
# GEMM-based operators: CONV_2D, FULLY_CONNECTED, BATCH_MATMUL
# ---------------------------------------------------------------------------------------------

def _chunks(depth: int, a_bound: int, b_bound: int) -> list[tuple[int, int]] | None:
    """The depth cut into pieces whose float32 GEMMs are exact (None: a piece would be too short)."""
    kc = f32_chunk(a_bound, b_bound)
    if kc >= depth:
        return [(0, depth)]
    if kc < 64 or depth * a_bound * b_bound > (1 << 53):
        return None
    return [(k0, min(depth, k0 + kc)) for k0 in range(0, depth, kc)]


def _gemm(a: np.ndarray, w: np.ndarray, chunks, g32: np.ndarray, g64: np.ndarray | None) -> np.ndarray:
    """``a @ w`` exactly: one float32 GEMM per chunk of the depth, summed in float64 (exact: every
    chunk's result is an integer of at most 2^24, their sum far below 2^53)."""
    if len(chunks) == 1:
        np.matmul(a, w, out=g32)
        return g32
    for j, (k0, k1) in enumerate(chunks):
        np.matmul(a[:, k0:k1], w[k0:k1], out=g32)
        if j == 0:
            np.copyto(g64, g32)
        else:
            np.add(g64, g32, out=g64)
    return g64


class _Requant:
    """The per-channel arrays and constants of an epilogue."""

    __slots__ = ("corr", "mult", "shift", "eff", "kind", "zo", "lo", "hi", "dtype", "entry")

    def __init__(self, channels, corr, kind, zo, lo, hi, dtype, multiplier=None, shift=None, eff=None):
        from . import _jitted_plans as K

        self.corr = _own(np.broadcast_to(np.asarray(corr, np.int64), (channels,)))
        m = np.broadcast_to(np.asarray(0 if multiplier is None else multiplier, np.int64), (channels,))
        s = np.broadcast_to(np.asarray(0 if shift is None else shift, np.int64), (channels,))
        if kind == K.MBQM64:                          # the int64 overload's reduced multiplier, total shift
            m = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
            s = 15 - s
        self.mult = _own(m)
        self.shift = _own(s)
        self.eff = _own(np.broadcast_to(np.asarray(0.0 if eff is None else eff, np.float64),
                                                        (channels,)))
        self.kind, self.zo, self.lo, self.hi, self.dtype = int(kind), int(zo), int(lo), int(hi), np.dtype(dtype)
        self.entry = None

    def run(self, g: np.ndarray, split: bool, rows: int, channels: int) -> np.ndarray:
        """The epilogue over ``g``, an accumulator the plan made itself (its type, contiguity and
        alignment the same on every call: the entry point is bound once)."""
        out = np.empty((rows, channels), self.dtype)
        args = (g.reshape(-1), split, self.corr, self.mult, self.shift, self.eff, self.kind, self.zo, self.lo,
                self.hi, out.reshape(-1))
        entry = self.entry
        if entry is None:
            entry = self.entry = _bind("epilogue", args)
        entry(*args)
        return out


class ConvPlan(Plan):
    """CONV_2D (groups 1, constant filter and bias): im2col, GEMM, epilogue."""

    __slots__ = ("geometry", "pad", "split", "rows", "depth", "channels", "weights", "chunks", "requant",
                 "scratch", "shape", "direct")

    def __init__(self, kernel, p, chunks, requant, split):
        super().__init__(kernel, p)
        n, h, w, c = p.input_shape
        _, oh, ow, o = p.output_shape
        kh, kw = p.filter_hw
        self.geometry = np.array([h, w, c, kh, kw, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        self.pad = np.float32(p.input_zero_point)
        self.split = split
        self.rows = n * oh * ow
        self.depth = kh * kw * c
        self.channels = o
        self.weights = p.filter[0]
        self.chunks = chunks
        self.requant = requant
        self.shape = p.output_shape
        # a 1x1 convolution with stride 1 reads the input as it is: the matrix is the input converted
        self.direct = (kh, kw) == (1, 1) and tuple(p.stride) == (1, 1) and tuple(p.pad) == (0, 0) and not split
        m = self.rows * (2 if split else 1)
        shapes = [((m, self.depth), np.float32), ((m, o), np.float32)]
        if len(chunks) > 1:
            shapes.append(((m, o), np.float64))
        self.scratch = _Scratch(shapes)

    def compute(self, unused, arrays):
        x = arrays[0]
        bufs, owned = self.scratch.take()
        try:
            a = bufs[0]
            if self.direct:
                np.copyto(a, x.reshape(a.shape))
            else:
                _k().im2col(x.reshape(-1), self.geometry, self.pad, self.split, a.reshape(-1))
            g = _gemm(a, self.weights, self.chunks, bufs[1], bufs[2] if len(bufs) > 2 else None)
            out = self.requant.run(g, self.split, self.rows, self.channels)
        finally:
            self.scratch.give(owned)
        return [out.reshape(self.shape)]


def _conv_plan(kernel, p, ins, outs):
    from . import _jitted_plans as K

    if p.filter is None or p.groups != 1 or p.bias is None and p.has_bias:
        return None
    o = p.output_shape[3]
    if p.wide and p.input_zero_point != 0:
        return None
    split = p.wide
    chunks = _chunks(p.filter.shape[1], 255 if split else max(128, abs(p.input_zero_point)), p.filter_bound)
    if chunks is None:
        return None
    bias = np.zeros(o, np.int64) if p.bias is None else p.bias.astype(np.int64)
    corr = bias - np.int64(p.input_zero_point) * p.filter_sums
    kind = K.MBQM64 if p.wide and not p.bias_int32 else K.MBQM32
    if p.wide and p.bias_int32:
        # int32 accumulator: the C++ sum and the bias each wrap; the epilogue wraps their exact sum
        pass
    requant = _Requant(o, corr, kind, p.output_zero_point, p.act_min, p.act_max, np.int16 if p.wide else np.int8,
                       multiplier=p.multiplier, shift=p.shift)
    return ConvPlan(kernel, p, chunks, requant, split)


class FullyConnectedPlan(Plan):
    """FULLY_CONNECTED (constant weights, symmetric filter): the rows converted, GEMM, epilogue."""

    __slots__ = ("rows", "depth", "units", "weights", "chunks", "requant", "scratch", "shape", "split")

    def __init__(self, kernel, p, chunks, requant, split):
        super().__init__(kernel, p)
        self.rows, self.depth, self.units = p.rows, p.depth, p.units
        self.weights = p.weights
        self.chunks = chunks
        self.requant = requant
        self.shape = p.output_shape
        self.split = split
        m = p.rows * (2 if split else 1)
        shapes = [((m, p.depth), np.float32), ((m, p.units), np.float32)]
        if len(chunks) > 1:
            shapes.append(((m, p.units), np.float64))
        self.scratch = _Scratch(shapes)

    def compute(self, unused, arrays):
        x = arrays[0].reshape(-1)[: self.rows * self.depth].reshape(self.rows, self.depth)
        bufs, owned = self.scratch.take()
        try:
            a = bufs[0]
            if self.split:
                xi = x.astype(np.int32)
                np.right_shift(xi, 8, out=xi)
                np.copyto(a[: self.rows], xi)
                np.bitwise_and(x, 255, out=xi)
                np.copyto(a[self.rows:], xi)
            else:
                np.copyto(a, x)
            g = _gemm(a, self.weights, self.chunks, bufs[1], bufs[2] if len(bufs) > 2 else None)
            out = self.requant.run(g, self.split, self.rows, self.units)
        finally:
            self.scratch.give(owned)
        return [out.reshape(self.shape)]


#: an int8 FULLY_CONNECTED of at most this many multiply-adds runs as one numba pass
#: (:class:`SmallFullyConnectedPlan`); a larger one, the float32 GEMM
SMALL_FC = 1 << 16


class SmallFullyConnectedPlan(Plan):
    """int8 FULLY_CONNECTED of a small layer (a transformer's 16 x 32 x 32): the exact integer sums and
    the requantization in one numba call (:func:`~._jitted_plans.fc8`), where the float32 conversion,
    the BLAS call and the epilogue cost more than the arithmetic."""

    __slots__ = ("w", "corr", "eff", "zo", "lo", "hi", "size", "shape", "scratch")

    def __init__(self, kernel, p, corr):
        super().__init__(kernel, p)
        self.w = _own(p.weights, np.float32).reshape(-1)          # (depth, units)
        self.scratch = _Scratch([((p.units,), np.float32)])
        self.corr = _own(np.broadcast_to(np.asarray(corr, np.int64), (p.units,)))
        self.eff = _own(np.broadcast_to(np.asarray(p.effective_scale, np.float64), (p.units,)))
        self.zo, self.lo, self.hi = int(p.output_zero_point), int(p.act_min), int(p.act_max)
        self.size = p.rows * p.units
        self.shape = tuple(p.output_shape)

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        bufs, owned = self.scratch.take()
        try:
            args = (arrays[0].reshape(-1), self.w, self.corr, self.eff, self.zo, self.lo, self.hi, bufs[0], out)
            entry = self.entry
            if entry is None:
                entry = self.entry = _bind("fc8", args)
            entry(*args)
        finally:
            self.scratch.give(owned)
        return [out.reshape(self.shape)]


def _fc_plan(kernel, p, ins, outs):
    from . import _jitted_plans as K

    if p.weights is None or p.depth == 0 or p.filter_zero_point != 0 or (p.has_bias and p.bias is None):
        return None
    if math.prod(p.output_shape) == 0 or p.rows == 0:
        return None
    if p.wide and p.input_zero_point != 0:
        return None
    split = p.wide
    chunks = _chunks(p.depth, 255 if split else max(128, abs(p.input_zero_point)), p.weight_bound)
    if chunks is None:
        return None
    bias = np.zeros(p.units, np.int64) if p.bias is None else p.bias.astype(np.int64)
    corr = bias - np.int64(p.input_zero_point) * p.weight_sums
    if not split and len(chunks) == 1 and p.rows * p.depth * p.units <= SMALL_FC and ins[0].dtype.name == "int8":
        return SmallFullyConnectedPlan(kernel, p, corr)
    int32_acc = p.bias_int32 or not p.wide
    kind = K.DOUBLE32 if int32_acc else K.DOUBLE64
    requant = _Requant(p.units, corr, kind, p.output_zero_point, p.act_min, p.act_max,
                       np.int16 if p.wide else np.int8, eff=p.effective_scale)
    return FullyConnectedPlan(kernel, p, chunks, requant, split)


class BatchMatMulPlan(Plan):
    """BATCH_MATMUL (quantized int8 output): both operands offset by their zero points in float32,
    one batched GEMM (exact: depth within one chunk), the epilogue."""

    __slots__ = ("zl", "zr", "requant", "cols", "rows", "scratch")

    def __init__(self, kernel, p, requant):
        super().__init__(kernel, p)
        self.zl, self.zr = np.float32(p.zero_points[0]), np.float32(p.zero_points[1])
        self.requant = requant
        self.cols = p.output_shape[-1]
        self.rows = math.prod(p.output_shape) // self.cols
        # the operands offset in float32 and the product, kept between runs
        self.scratch = _Scratch([(tuple(p.shapes[0]), np.float32), (tuple(p.shapes[1]), np.float32),
                                 (tuple(p.output_shape), np.float32)])

    def compute(self, unused, arrays):
        p = self.prepared
        bufs, owned = self.scratch.take()
        try:
            a, b, g = bufs
            np.subtract(arrays[0], self.zl, out=a)          # exact: integers of at most 2^8 in float32
            np.subtract(arrays[1], self.zr, out=b)
            if p.adj_x:
                a = np.swapaxes(a, -1, -2)
            if p.adj_y:
                b = np.swapaxes(b, -1, -2)
            np.matmul(a, b, out=g)
            out = self.requant.run(g, False, self.rows, self.cols)
        finally:
            self.scratch.give(owned)
        return [out.reshape(p.output_shape)]


def _batch_matmul_plan(kernel, p, ins, outs):
    from . import _jitted_plans as K

    if p.wide or not p.quantized_output or math.prod(p.output_shape) == 0:
        return None
    depth = p.shapes[0][-2] if p.adj_x else p.shapes[0][-1]
    bounds = [max(abs(-128 - z), abs(127 - z)) for z in p.zero_points[:2]]
    if depth * bounds[0] * bounds[1] > F32_EXACT:
        return None
    cols = p.output_shape[-1]
    requant = _Requant(cols, 0, K.MBQM32, p.zero_points[2], p.bounds[0], p.bounds[1], p.output_dtype,
                       multiplier=p.multiplier, shift=p.shift)
    return BatchMatMulPlan(kernel, p, requant)


# ---------------------------------------------------------------------------------------------
# DEPTHWISE_CONV_2D
# ---------------------------------------------------------------------------------------------

class DepthwisePlan(Plan):
    """int8: the fused kernel of :mod:`.fast` with its arguments prepared."""

    __slots__ = ("filt", "bias", "mult", "shift", "geometry", "record", "zx", "shape", "work")

    def __init__(self, kernel, p, bias):
        from .fast import Requantize

        super().__init__(kernel, p)
        n, oh, ow, oc = p.output_shape
        _, h, w, c = p.input_shape
        kh, kw = p.filter_hw
        self.filt = _own(p.filter, np.int32).reshape(-1)
        self.bias = bias
        self.mult = _own(np.broadcast_to(np.asarray(p.multiplier, np.int64), (oc,)))
        self.shift = _own(np.broadcast_to(np.asarray(p.shift, np.int64), (oc,)))
        self.geometry = np.array([h, w, c, kh, kw, oc // c, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        self.record = Requantize(int(p.output_zero_point), int(p.act_min), int(p.act_max))
        self.zx = int(p.input_zero_point)
        self.shape = p.output_shape
        self.work = n * oh

    def compute(self, unused, arrays):
        from .._fastpath import fast as core

        out = np.empty(self.shape, np.int8)
        k = jit.load("quantspec.litert._jitted")
        core.launch(k.depthwise, (arrays[0].reshape(-1), self.filt, self.bias, self.mult, self.shift, self.geometry,
                                  self.record, self.zx, out.reshape(-1)), self.work, out.size)
        return [out]


class WideDepthwisePlan(Plan):
    """int16 (the 16x8 kernel): the exact int64 accumulators, then the epilogue."""

    __slots__ = ("filt", "bias", "geometry", "requant", "shape", "scratch", "rows", "channels")

    def __init__(self, kernel, p, bias, requant):
        super().__init__(kernel, p)
        n, oh, ow, oc = p.output_shape
        _, h, w, c = p.input_shape
        kh, kw = p.filter_hw
        self.filt = _own(p.filter, np.int64).reshape(-1)
        self.bias = bias
        self.geometry = np.array([h, w, c, kh, kw, oc // c, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        self.requant = requant
        self.shape = p.output_shape
        self.rows, self.channels = n * oh * ow, oc
        self.scratch = _Scratch([((n * oh * ow, oc), np.int64)])

    def compute(self, unused, arrays):
        bufs, owned = self.scratch.take()
        try:
            acc = bufs[0]
            _k().depthwise_acc(arrays[0].reshape(-1), self.filt, self.bias, self.geometry, np.int64(0),
                               acc.reshape(-1))
            out = self.requant.run(acc, False, self.rows, self.channels)
        finally:
            self.scratch.give(owned)
        return [out.reshape(self.shape)]


def _depthwise_plan(kernel, p, ins, outs):
    from . import _jitted_plans as K

    if p.filter is None or (p.has_bias and p.bias is None) or math.prod(p.output_shape) == 0:
        return None
    oc = p.output_shape[3]
    bias = np.zeros(oc, np.int64) if p.bias is None else _own(p.bias, np.int64).reshape(oc)
    if not p.wide:
        return DepthwisePlan(kernel, p, bias)
    if p.input_zero_point != 0:
        return None
    requant = _Requant(oc, 0, K.MBQM64, p.output_zero_point, p.act_min, p.act_max, np.int16,
                       multiplier=p.multiplier, shift=p.shift)
    return WideDepthwisePlan(kernel, p, bias, requant)


# ---------------------------------------------------------------------------------------------
# tables: unary operators, binary operators over int8 pairs
# ---------------------------------------------------------------------------------------------

class UnaryTablePlan(Plan):
    """A prepared code-to-code table, gathered with the input's unsigned view as the index."""

    __slots__ = ("table", "unsigned", "invalid")

    def __init__(self, kernel, p, table, unsigned, invalid):
        super().__init__(kernel, p)
        self.table, self.unsigned, self.invalid = table, np.dtype(unsigned), invalid

    def compute(self, unused, arrays):
        x = arrays[0]
        if self.unsigned.itemsize != 1:
            if self.invalid is None:
                return [np.take(self.table, x.view(self.unsigned))]
            out = np.empty(x.shape, self.table.dtype)
            if _k().lut(x.reshape(-1).view(self.unsigned), self.table, self.invalid, out.reshape(-1)):
                return self.reference(arrays)               # raises as LiteRT fails
            return [out]
        # one-byte codes: the kernel through its entry point (no invalid codes: an empty mask)
        out = np.empty(x.shape, self.table.dtype)
        args = (x.reshape(-1).view(np.uint8), self.table, _NONE_INVALID if self.invalid is None else self.invalid,
                out.reshape(-1))
        entry = self.entry
        if entry is None:
            entry = self.entry = _bind("lut", args)
        if entry(*args):
            return self.reference(arrays)                   # raises as LiteRT fails
        return [out]


#: the ``invalid`` mask of a table without invalid codes
_NONE_INVALID = np.zeros(0, np.bool_)


def _unary_plan(kernel, p, ins, outs):
    table = getattr(p, "table", None)
    if table is None:
        table = getattr(p, "lut", None)
    if not isinstance(table, np.ndarray) or table.ndim != 1 or table.size not in (256, 65536):
        return None
    x = ins[0]
    if x is None or x.dtype.name not in ("int8", "int16") or (table.size == 256) != (x.dtype.name == "int8"):
        return None
    return UnaryTablePlan(kernel, p, table, np.uint8 if table.size == 256 else np.uint16,
                          getattr(p, "invalid", None))


def _broadcast_walk(x_shape, y_shape, out_shape):
    """(dims, x strides, y strides) of the output walked as at most four dimensions, the inputs'
    element strides 0 along their broadcast dimensions; None beyond four."""
    rank = len(out_shape)
    xs = (1,) * (rank - len(x_shape)) + tuple(x_shape)
    ys = (1,) * (rank - len(y_shape)) + tuple(y_shape)

    def strides(shape):
        st, acc = [], 1
        for d in reversed(shape):
            st.append(acc)
            acc *= d
        return list(reversed(st))

    sx, sy = strides(xs), strides(ys)
    dims = []
    for i, d in enumerate(out_shape):
        if d == 1:
            continue
        dims.append([d, sx[i] if xs[i] != 1 else 0, sy[i] if ys[i] != 1 else 0])
    merged: list[list[int]] = []
    for d, a, b in dims:
        if merged:
            pd, pa, pb = merged[-1]
            if pa == a * d and pb == b * d:         # the previous dimension continues this one
                merged[-1] = [pd * d, a, b]
                continue
        merged.append([d, a, b])
    if len(merged) > 4:
        return None
    merged = [[1, 0, 0]] * (4 - len(merged)) + merged
    return (np.array([m[0] for m in merged], np.int64), np.array([m[1] for m in merged], np.int64),
            np.array([m[2] for m in merged], np.int64))


class PairTablePlan(Plan):
    """A 65536-entry table by pair of int8 codes, gathered over the broadcast inputs."""

    __slots__ = ("table", "dims", "xs", "ys", "shape", "size")

    def __init__(self, kernel, p, table, walk, shape):
        super().__init__(kernel, p)
        self.table = table
        self.dims, self.xs, self.ys = walk if walk is not None else (None, None, None)
        self.shape = tuple(shape)
        self.size = math.prod(shape)

    def compute(self, unused, arrays):
        if self.dims is None:               # more than four dimensions that do not merge: numpy's broadcast
            x, y = np.broadcast_arrays(arrays[0].view(np.uint8), arrays[1].view(np.uint8))
            return [np.take(self.table, (x.astype(np.intp) << 8) | y).reshape(self.shape)]
        out = np.empty(self.size, np.int8)
        args = (arrays[0].reshape(-1).view(np.uint8), arrays[1].reshape(-1).view(np.uint8), self.table, self.dims,
                self.xs, self.ys, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = _bind("gather2", args)
        entry(*args)
        return [out.reshape(self.shape)]


#: every pair of int8 codes, in the order of the index (x_u8 << 8) | y_u8
def _pairs():
    codes = np.arange(1 << 16, dtype=np.int64)
    x = (((codes >> 8) ^ 0x80) - 0x80).astype(np.int8)
    y = (((codes & 0xFF) ^ 0x80) - 0x80).astype(np.int8)
    return x, y


def _pair_table_of(kernel, ins, outs, options) -> np.ndarray | None:
    """The int8 result of ``kernel`` for every pair of codes (x, y): the kernel prepared for two
    inputs of 65536 elements with the operator's quantization and options and run on every pair;
    None where the reference kernel refuses some pair (LiteRT's undefined behaviour: the operator
    keeps its kernel, which raises where the data reaches it)."""
    from dataclasses import replace

    from ..errors import QuantSpecError

    x, y = _pairs()
    flat = (1 << 16,)
    try:
        with jit.reference_only():          # the numpy reference arithmetic (and no kernel to compile)
            p = kernel.prepare([replace(ins[0], shape=flat, data=None), replace(ins[1], shape=flat, data=None)],
                               [replace(outs[0], shape=flat, data=None)], options)
            (table,) = kernel.compute(p, [x, y])
    except QuantSpecError:
        return None
    table = np.ascontiguousarray(table, np.int8).reshape(-1)
    table.setflags(write=False)
    return table


class BinaryPlan(Plan):
    """int16 ADD / SUB / MUL: one pass over the broadcast inputs."""

    __slots__ = ("dims", "xs", "ys", "mul", "q", "shape", "size", "dtype")

    def __init__(self, kernel, p, walk, mul, q):
        super().__init__(kernel, p)
        self.dims, self.xs, self.ys = walk
        self.mul, self.q = mul, np.array(q, np.int64)
        self.shape = tuple(p.output_shape)
        self.size = math.prod(self.shape)
        self.dtype = p.dtype

    def compute(self, unused, arrays):
        out = np.empty(self.size, self.dtype)
        _k().binary(arrays[0].reshape(-1), arrays[1].reshape(-1), self.dims, self.xs, self.ys, self.mul, self.q, out)
        return [out.reshape(self.shape)]


def _binary16_plan(name, kernel, p, ins, outs):
    from .kernels.elementwise import AddSubParams, MulParams

    walk = _broadcast_walk(tuple(ins[0].shape), tuple(ins[1].shape), tuple(p.output_shape))
    if walk is None or math.prod(p.output_shape) == 0:
        return None
    if isinstance(p, MulParams):
        q = (*p.offsets, 0, p.multiplier, p.shift, 0, 0, 0, 0, 0, p.output_zero_point, p.act_min, p.act_max)
        return BinaryPlan(kernel, p, walk, True, q)
    if isinstance(p, AddSubParams) and p.pot_shifts is None and p.shifts[2] <= 0:
        (m1, m2, mo), (e1, e2, eo) = p.multipliers, p.shifts
        q = (*p.offsets, p.left_shift, m1, e1, m2, e2, mo, eo, 1 if p.op == "ADD" else -1, p.output_zero_point,
             p.act_min, p.act_max)
        return BinaryPlan(kernel, p, walk, False, q)
    return None


def _binary_plan(name, kernel, p, ins, outs, options):
    x, y = ins[0], ins[1]
    if x is None or y is None:
        return None
    if name in ("ADD", "SUB", "MUL") and x.dtype.name == "int16" and y.dtype.name == "int16" \
            and outs[0].dtype.name == "int16":
        return _binary16_plan(name, kernel, p, ins, outs)
    if outs[0].dtype.name != "int8" or x.dtype.name != "int8" or y.dtype.name != "int8":
        return None
    table = getattr(p, "table", None)
    if table is None:
        if getattr(p, "pot_shifts", None) is not None:
            return None
        table = _pair_table_of(kernel, ins, outs, options)
        if table is None:
            return None
    shape = tuple(p.shapes[0] if name == "PRELU" else p.output_shape)    # the kernel's, not the stored one
    return PairTablePlan(kernel, p, table, _broadcast_walk(tuple(x.shape), tuple(y.shape), shape), shape)


def _code_table_of(kernel, ins, outs, options) -> np.ndarray | None:
    """The output of ``kernel`` (an element-wise operator of one integer input) for every input code,
    in the order of the codes' unsigned view: the kernel prepared for one input holding every code
    and run on it (None where it refuses some code)."""
    from dataclasses import replace

    from ..errors import QuantSpecError

    dtype = np.dtype(ins[0].dtype.dtype)
    unsigned = np.dtype(f"u{dtype.itemsize}")
    codes = np.arange(1 << (8 * dtype.itemsize), dtype=np.int64).astype(unsigned).view(dtype)
    flat = (codes.size,)
    try:
        with jit.reference_only():
            p = kernel.prepare([replace(ins[0], shape=flat, data=None)], [replace(outs[0], shape=flat, data=None)],
                               options)
            (table,) = kernel.compute(p, [codes])
    except QuantSpecError:
        return None
    table = np.ascontiguousarray(table).reshape(-1)
    table.setflags(write=False)
    return table


def _quantize_plan(kernel, p, ins, outs, options):
    from .kernels.quantize import FloatQuantizeParams, RequantizeParams

    if isinstance(p, RequantizeParams):
        if np.dtype(p.in_dtype).itemsize > 2 or math.prod(p.shape) == 0:
            return None
        table = _code_table_of(kernel, ins, outs, options)
        if table is None:
            return None
        return UnaryTablePlan(kernel, p, table, np.dtype(f"u{np.dtype(p.in_dtype).itemsize}"), None)
    if isinstance(p, FloatQuantizeParams) and p.params is not None and p.out_dtype == np.int8 and math.prod(p.shape):
        return FloatQuantizePlan(kernel, p)
    return None


class FloatQuantizePlan(Plan):
    """QUANTIZE float32 -> int8: the fast element-wise kernel of :mod:`.fast`, whatever the size."""

    __slots__ = ("state",)

    def __init__(self, kernel, p):
        from . import fast

        super().__init__(kernel, p)
        self.state = fast.quantize_prepared(p.shape, p.params)

    def compute(self, unused, arrays):
        from . import fast

        out = np.empty(self.prepared.shape, np.int8)
        fast._jitted()
        fast._apply(arrays[0], out, self.state)
        return [out]


def _dequantize_plan(kernel, p, ins, outs, options):
    if p.params.per_axis or np.dtype(p.dtype).itemsize > 2 or math.prod(p.shape) == 0:
        return None
    table = _code_table_of(kernel, ins, outs, options)
    if table is None:
        return None
    return UnaryTablePlan(kernel, p, table, np.dtype(f"u{np.dtype(p.dtype).itemsize}"), None)


class PoolPlan(Plan):
    """AVERAGE_POOL_2D / MAX_POOL_2D: one pass."""

    __slots__ = ("geometry", "counts", "average", "lo", "hi")

    def __init__(self, kernel, p, average):
        super().__init__(kernel, p)
        n, h, w, c = p.input_shape
        _, oh, ow, _ = p.output_shape
        kh, kw = p.filter_hw
        tmin = int(np.iinfo(p.dtype).min)
        self.geometry = np.array([n, h, w, c, kh, kw, oh, ow, *p.stride, *p.pad, tmin], np.int64)
        self.counts = _own(p.counts, np.int64).reshape(-1) if average else np.ones(1, np.int64)
        self.average = average
        self.lo, self.hi = np.int64(p.act_min), np.int64(p.act_max)

    def compute(self, unused, arrays):
        p = self.prepared
        out = np.empty(p.output_shape, p.dtype)
        _k().pool(arrays[0].reshape(-1), self.geometry, self.counts, self.average, self.lo, self.hi, out.reshape(-1))
        return [out]


def _pool_plan(kernel, p, ins, outs):
    if 0 in p.output_shape:
        return None
    average = kernel.name == "AVERAGE_POOL_2D"
    if average and p.counts is None:
        return None
    return PoolPlan(kernel, p, average)


# ---------------------------------------------------------------------------------------------
# reductions, SOFTMAX, reshapes
# ---------------------------------------------------------------------------------------------

class MeanPlan(Plan):
    """MEAN / SUM over adjacent constant axes: one pass."""

    __slots__ = ("outer", "red", "inner", "n", "zin", "m", "e", "zo", "lo", "hi", "uread", "dtype", "shape")

    def compute(self, unused, arrays):
        x = arrays[0].reshape(-1)
        if self.uread:
            x = x.view(np.uint8)
        out = np.empty(self.outer * self.inner, self.dtype)
        args = (x, self.outer, self.red, self.inner, self.n, self.zin, self.m, self.e, self.zo, self.lo, self.hi, out)
        if x.itemsize != 1:
            _k().mean(*args)
        else:
            entry = self.entry
            if entry is None:
                entry = self.entry = _bind("mean", args)
            entry(*args)
        return [out.reshape(self.shape)]


def _mean_plan(kernel, p, ins, outs):
    if p.axes is None or not p.axes or math.prod(p.shape) == 0:
        return None
    axes = sorted(p.axes)
    if axes != list(range(axes[0], axes[-1] + 1)):
        return None
    shape = p.shape
    n = math.prod(shape[a] for a in axes)
    if n == 0:
        return None
    plan = MeanPlan(kernel, p)
    plan.outer = math.prod(shape[:axes[0]])
    plan.red = n
    plan.inner = math.prod(shape[axes[-1] + 1:])
    plan.n = np.int64(n)
    m, e = p.multiplier, p.shift
    if p.op == "MEAN":
        sh = min(n.bit_length() - 1, 32, 31 + e)
        m = (m << sh) // n
        e = e - sh
    plan.m, plan.e = np.int64(m), np.int64(e)
    plan.zin, plan.zo = np.int64(p.input_zero_point), np.int64(p.output_zero_point)
    plan.uread = bool(p.reference_sum)
    if p.reference_sum:
        plan.lo, plan.hi = np.int64(0), np.int64(255)
    else:
        info = np.iinfo(p.dtype)
        plan.lo, plan.hi = np.int64(info.min), np.int64(info.max)
    plan.dtype = p.dtype
    plan.shape = tuple(1 if i in p.axes else d for i, d in enumerate(shape)) if p.keep_dims else \
        tuple(d for i, d in enumerate(shape) if i not in p.axes)
    return plan


class SoftmaxPlan(Plan):
    """int8 SOFTMAX: one pass per row (the reference kernel where a row makes LiteRT abort)."""

    __slots__ = ("rows", "cols", "diff_min", "shape")

    def compute(self, unused, arrays):
        x = arrays[0]
        out = np.empty(self.shape, np.int8)
        p = self.prepared
        args = (x.reshape(-1), self.rows, self.cols, p.exps, p.terms, self.diff_min, out.reshape(-1))
        entry = self.entry
        if entry is None:
            entry = self.entry = _bind("softmax8", args)
        if entry(*args):
            return self.reference(arrays)
        return [out]


def _softmax_plan(kernel, p, ins, outs):
    if getattr(p, "terms", None) is None or not p.shape or math.prod(p.shape) == 0:
        return None
    plan = SoftmaxPlan(kernel, p)
    plan.cols = p.shape[-1]
    plan.rows = math.prod(p.shape) // plan.cols
    plan.diff_min = np.int64(p.diff_min)
    plan.shape = tuple(p.shape)
    return plan


class ReshapePlan(Plan):
    """RESHAPE / SQUEEZE: a view of the input with the output's shape."""

    __slots__ = ("shape",)

    def compute(self, unused, arrays):
        return [arrays[0].reshape(self.shape)]


def _reshape_plan(kernel, p, ins, outs):
    if getattr(p, "output_shape", None) is None:
        return None
    plan = ReshapePlan(kernel, p)
    plan.shape = tuple(p.output_shape)
    return plan


class PadPlan(Plan):
    """PAD / PADV2 with constant paddings and pad value: a copy of the output filled with the pad
    value, the input written into its inner block."""

    __slots__ = ("filled", "inner")

    def compute(self, unused, arrays):
        out = self.filled.copy()
        out[self.inner] = arrays[0]
        return [out]


def _pad_plan(kernel, p, ins, outs):
    x = ins[0]
    if p.paddings is None or p.pad_value is None or x is None or len(x.shape) != p.paddings.shape[0]:
        return None
    shape = tuple(int(d) + int(a) + int(b) for d, (a, b) in zip(x.shape, p.paddings))
    if math.prod(shape) > (1 << 22):
        return None                 # a large output: the kernel (no copy of it kept)
    plan = PadPlan(kernel, p)
    plan.filled = np.full(shape, p.pad_value, np.dtype(x.dtype.dtype))
    plan.filled.setflags(write=False)
    plan.inner = tuple(slice(int(a), int(a) + int(d)) for d, (a, _) in zip(x.shape, p.paddings))
    return plan


class ResizeBilinearPlan(Plan):
    """int8 RESIZE_BILINEAR with a constant size: one pass (:func:`~._jitted_plans.resize8`) over the
    rows, columns and weights the kernel prepared."""

    __slots__ = ("dims", "axes", "size", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        (y0, y1, wy0, wy1), (x0, x1, wx0, wx1) = self.axes
        args = (arrays[0].reshape(-1), self.dims, y0, y1, wy0, wy1, x0, x1, wx0, wx1, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = _bind("resize8", args)
        entry(*args)
        return [out.reshape(self.shape)]


def _resize_plan(kernel, p, ins, outs):
    if p.plan is None or ins[0] is None or ins[0].dtype.name != "int8":
        return None
    oh, ow, ya, xa = p.plan
    n, h, w, c = p.input_shape
    if n * oh * ow * c == 0:
        return None
    plan = ResizeBilinearPlan(kernel, p)
    plan.dims = np.array([n, h, w, c], np.int64)
    plan.axes = tuple(tuple(_own(a, np.int64) for a in axis) for axis in (ya, xa))
    plan.size = n * oh * ow * c
    plan.shape = (n, oh, ow, c)
    return plan


class GatherPlan(Plan):
    """GATHER without batch dimensions: one pass that checks the positions and copies the slices."""

    __slots__ = ("geometry", "dtype", "size", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.size, self.dtype)
        x = arrays[0]
        if x is None:
            x = self.prepared.consts[0]
        pos = arrays[1] if arrays[1] is not None else self.prepared.consts[1]
        outer, size, inner = self.geometry
        if _k().gather(np.asarray(x).reshape(-1), np.asarray(pos).reshape(-1), outer, size, inner, out):
            return self.reference(arrays)               # a position out of range: the kernel raises
        return [out.reshape(self.shape)]


def _gather_plan(kernel, p, ins, outs):
    x, pos = ins[0], ins[1]
    if p.batch_dims != 0 or x is None or pos is None or pos.dtype.name not in ("int16", "int32", "int64"):
        return None
    xs, ps = tuple(x.shape), tuple(pos.shape)
    axis = p.axis
    shape = (*xs[:axis], *ps, *xs[axis + 1:])
    if math.prod(shape) == 0 or xs[axis] == 0:
        return None
    plan = GatherPlan(kernel, p)
    plan.geometry = (math.prod(xs[:axis]), xs[axis], math.prod(xs[axis + 1:]))
    plan.dtype = np.dtype(x.dtype.dtype)
    plan.size = math.prod(shape)
    plan.shape = shape
    return plan


class ConcatPlan(Plan):
    """CONCATENATION (every input with the output's parameters: the kernel copies): numpy's
    concatenation of the inputs, without the kernel's per-input lookups."""

    __slots__ = ("axis",)

    def compute(self, unused, arrays):
        if any(a is None for a in arrays):
            return self.reference(arrays)               # an input the kernel takes from its constants
        return [np.concatenate(arrays, axis=self.axis)]


def _concat_plan(kernel, p, ins, outs):
    if p.scalar_constants or any(t is None or t.dtype is None for t in ins) or len(ins) != p.count:
        return None
    plan = ConcatPlan(kernel, p)
    plan.axis = int(p.axis)
    return plan


class TransposePlan(Plan):
    """TRANSPOSE with a constant permutation: numpy's copy of the permuted view."""

    __slots__ = ("perm",)

    def compute(self, unused, arrays):
        return [np.ascontiguousarray(arrays[0].transpose(self.perm))]


def _transpose_plan(kernel, p, ins, outs):
    if p.perm is None or ins[0] is None or len(p.perm) != len(ins[0].shape):
        return None
    plan = TransposePlan(kernel, p)
    plan.perm = tuple(int(a) for a in p.perm)
    return plan


_BUILDERS: dict[str, Callable] = {
    "GATHER": _gather_plan,
    "TRANSPOSE": _transpose_plan,
    "CONCATENATION": _concat_plan,
    "PAD": _pad_plan,
    "PADV2": _pad_plan,
    "RESIZE_BILINEAR": _resize_plan,
    "CONV_2D": _conv_plan,
    "FULLY_CONNECTED": _fc_plan,
    "BATCH_MATMUL": _batch_matmul_plan,
    "DEPTHWISE_CONV_2D": _depthwise_plan,
    "MEAN": _mean_plan,
    "SUM": _mean_plan,
    "SOFTMAX": _softmax_plan,
    "RESHAPE": _reshape_plan,
    "SQUEEZE": _reshape_plan,
    "AVERAGE_POOL_2D": _pool_plan,
    "MAX_POOL_2D": _pool_plan,
}
#: builders that also read the operator's options
_BUILDERS_OPTIONS: dict[str, Callable] = {
    "QUANTIZE": _quantize_plan,
    "DEQUANTIZE": _dequantize_plan,
}
#: operators whose prepared record is a code-to-code table (kernels/unary.py, kernels/activations.py)
UNARY_TABLES = frozenset({"HARD_SWISH", "GELU", "RSQRT", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1",
                          "LEAKY_RELU", "LOGISTIC", "TANH"})
#: binary int8 operators computed from a table of every pair of codes
PAIR_TABLES = frozenset({"ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "PRELU"})


def _byte_table(plan, invalid_ok: bool = False) -> bool:
    """A table plan indexed by one-byte codes that never defers to its kernel (or, ``invalid_ok``,
    defers only where its input holds a code its ``invalid`` marks)."""
    return type(plan) is UnaryTablePlan and (invalid_ok or plan.invalid is None) \
        and plan.unsigned.itemsize == 1 and plan.table.size == 256


class FoldedPairPlan(PairTablePlan):
    """A pair table followed by a unary table with invalid codes (RSQRT of a layer norm): the composed
    table, and the composed marks checked first; where an input pair reaches a marked code, the two
    plans run one after the other, and the second raises as its kernel does."""

    __slots__ = ("bad", "first", "second")

    def compute(self, unused, arrays):
        if self.dims is not None:
            out = np.empty(self.size, np.int8)
            args = (arrays[0].reshape(-1).view(np.uint8), arrays[1].reshape(-1).view(np.uint8), self.table,
                    self.bad, self.dims, self.xs, self.ys, out)
            entry = self.entry
            if entry is None:
                entry = self.entry = _bind("gather2_checked", args)
            if not entry(*args):
                return [out.reshape(self.shape)]
        return self.second.compute(None, self.first.compute(None, arrays))


class FoldedUnaryPlan(UnaryTablePlan):
    """A unary table followed by one with invalid codes, composed; as :class:`FoldedPairPlan` where an
    input reaches a marked code."""

    __slots__ = ("first", "second")

    def reference(self, arrays):
        return self.second.compute(None, self.first.compute(None, arrays))


def _walk_n(shapes, out_shape):
    """(dims, [strides per input]) of the output walked as at most four dimensions, each input's
    element strides 0 along its broadcast dimensions; None beyond four."""
    rank = len(out_shape)
    full = [(1,) * (rank - len(s)) + tuple(s) for s in shapes]

    def strides(shape):
        st, acc = [], 1
        for d in reversed(shape):
            st.append(acc)
            acc *= d
        return list(reversed(st))

    st = [strides(s) for s in full]
    dims = []
    for i, d in enumerate(out_shape):
        if d == 1:
            continue
        dims.append([d] + [st[j][i] if full[j][i] != 1 else 0 for j in range(len(shapes))])
    merged: list[list[int]] = []
    for row in dims:
        if merged and all(merged[-1][j + 1] == row[j + 1] * row[0] for j in range(len(shapes))):
            merged[-1] = [merged[-1][0] * row[0]] + row[1:]
            continue
        merged.append(row)
    if len(merged) > 4:
        return None
    merged = [[1] + [0] * len(shapes)] * (4 - len(merged)) + merged
    return (np.array([m[0] for m in merged], np.int64),
            [np.array([m[j + 1] for m in merged], np.int64) for j in range(len(shapes))])


class PairChainPlan(Plan):
    """Two pair tables in a row, the first's output read only by the second: one pass over the three
    inputs (:func:`~._jitted_plans.gather3`), the intermediate code never stored."""

    __slots__ = ("first", "second", "tpos", "dims", "xs", "ys", "zs", "size", "shape")

    def compute(self, unused, arrays):
        out = np.empty(self.size, np.int8)
        args = (arrays[0].reshape(-1).view(np.uint8), arrays[1].reshape(-1).view(np.uint8),
                arrays[2].reshape(-1).view(np.uint8), self.first, self.second, self.tpos, self.dims, self.xs,
                self.ys, self.zs, out)
        entry = self.entry
        if entry is None:
            entry = self.entry = _bind("gather3", args)
        entry(*args)
        return [out.reshape(self.shape)]


def chain(first: Plan, second: Plan, tpos: int, shapes) -> Plan | None:
    """One plan for the pair table ``second`` whose input ``tpos`` (0 or 1) is the output of the pair
    table ``first`` (the same bytes: the second table indexed by the first's entry, element by
    element); ``shapes``: the shapes of the first's two inputs and of the second's other input.  None
    where they do not chain (a table that is not a plain pair table, an intermediate the second
    broadcasts, more than four dimensions)."""
    if type(first) is not PairTablePlan or type(second) is not PairTablePlan or first.dims is None \
            or second.dims is None or tuple(first.shape) != tuple(second.shape):
        return None
    walk = _walk_n(shapes, tuple(second.shape))
    if walk is None:
        return None
    plan = PairChainPlan(second.kernel, second.prepared)
    plan.first, plan.second, plan.tpos = first.table, second.table, int(tpos)
    plan.dims, (plan.xs, plan.ys, plan.zs) = walk
    plan.size, plan.shape = second.size, tuple(second.shape)
    return plan


def fold(first: Plan, second: Plan) -> Plan | None:
    """One plan for ``second`` applied to the output of ``first``, where both are tables: a unary
    table (``second``, indexed by one-byte codes) after a pair table or after another unary table of
    one-byte codes is the table of the composition, ``second.table[first.table]``, entry by entry
    (the same bytes by construction).  Where ``second`` marks codes on which LiteRT fails (RSQRT of a
    negative value), the composition carries the marks of the entries that reach them, and an input
    that reaches one runs both plans (the second raises).  None where they do not compose.  The
    interpreter folds an operator into the one before it only where nothing else reads the tensor
    between them."""
    if not _byte_table(second, invalid_ok=True):
        return None
    marks = second.invalid
    if type(first) is PairTablePlan and second.table.dtype == np.int8:
        index = first.table.view(np.uint8)
        table = np.ascontiguousarray(second.table[index])
        table.setflags(write=False)
        walk = None if first.dims is None else (first.dims, first.xs, first.ys)
        if marks is None:
            return PairTablePlan(first.kernel, first.prepared, table, walk, first.shape)
        plan = FoldedPairPlan(first.kernel, first.prepared, table, walk, first.shape)
        plan.bad = np.ascontiguousarray(np.asarray(marks, np.bool_)[index])
        plan.first, plan.second = first, second
        return plan
    if _byte_table(first) and first.table.dtype.itemsize == 1:
        index = first.table.view(np.uint8)
        table = np.ascontiguousarray(second.table[index])
        table.setflags(write=False)
        if marks is None:
            return UnaryTablePlan(first.kernel, first.prepared, table, np.uint8, None)
        plan = FoldedUnaryPlan(first.kernel, first.prepared, table, np.uint8,
                               np.ascontiguousarray(np.asarray(marks)[index]))
        plan.first, plan.second = first, second
        return plan
    return None


def make(name: str, kernel, prepared, inputs, outputs, options) -> Plan | None:
    """The plan of one operator (its builtin ``name``, reference ``kernel``, ``prepared`` record, input
    and output specs and options), or None where its kernel runs as it is."""
    from ..errors import QuantSpecError
    from .kernels.plain import TypeDispatch, _Tagged

    if isinstance(kernel, TypeDispatch):        # one entry, two kernels: the quantized one has plans
        if not isinstance(prepared, _Tagged) or prepared.plain:
            return None
        kernel, prepared = kernel.quantized, prepared.prepared
    if any(t is not None and t.data is None and any(d < 0 for d in t.shape) for t in (*inputs, *outputs)):
        return None
    expected = _RECORDS.get(name)
    if expected is None or not isinstance(prepared, _record_types(expected)):
        return None
    try:
        if name in _BUILDERS:
            return _BUILDERS[name](kernel, prepared, inputs, outputs)
        if name in _BUILDERS_OPTIONS:
            return _BUILDERS_OPTIONS[name](kernel, prepared, inputs, outputs, options)
        if name in UNARY_TABLES:
            return _unary_plan(kernel, prepared, inputs, outputs)
        if name in PAIR_TABLES:
            return _binary_plan(name, kernel, prepared, inputs, outputs, options)
    except QuantSpecError:
        return None
    return None


#: per operator, the prepared records its plan reads ("module:Class" in quantspec.litert.kernels)
_RECORDS = {
    "CONV_2D": ("conv:ConvPrepared",), "DEPTHWISE_CONV_2D": ("conv:ConvPrepared",),
    "FULLY_CONNECTED": ("fully_connected:FullyConnectedPrepared",),
    "BATCH_MATMUL": ("batch_matmul:BatchMatMulParams",),
    "MEAN": ("reduce:ReduceParams",), "SUM": ("reduce:ReduceParams",),
    "SOFTMAX": ("activations:SoftmaxParams",),
    "RESHAPE": ("movement:ReshapePrepared",), "SQUEEZE": ("movement:SqueezePrepared",),
    "ADD": ("elementwise:AddSubParams",), "SUB": ("elementwise:AddSubParams",), "MUL": ("elementwise:MulParams",),
    "SQUARED_DIFFERENCE": ("binary:PairTableParams",), "PRELU": ("binary:PreluParams",),
    "AVERAGE_POOL_2D": ("pooling:PoolPrepared",), "MAX_POOL_2D": ("pooling:PoolPrepared",),
    "QUANTIZE": ("quantize:RequantizeParams", "quantize:FloatQuantizeParams"),
    "DEQUANTIZE": ("quantize:DequantizeParams",),
    "PAD": ("movement:PadPrepared",), "PADV2": ("movement:PadPrepared",),
    "GATHER": ("movement:GatherPrepared",), "TRANSPOSE": ("movement:TransposePrepared",),
    "CONCATENATION": ("movement:ConcatPrepared",),
    "RESIZE_BILINEAR": ("resize:ResizePrepared",),
    **{name: ("unary:CodeTable", "activations:LutParams") for name in UNARY_TABLES},
}


def _record_types(names: tuple[str, ...]) -> tuple[type, ...]:
    import importlib

    out = []
    for name in names:
        module, cls = name.split(":")
        out.append(getattr(importlib.import_module(f"quantspec.litert.kernels.{module}"), cls))
    return tuple(out)


#: plans that call no BLAS (numba kernels and numpy copies): a model whose program holds only these
#: (and data movement) runs without the interpreter's BLAS thread setting
NO_BLAS = (PairTablePlan, PairChainPlan, UnaryTablePlan, BinaryPlan, MeanPlan, SoftmaxPlan, ReshapePlan, PadPlan, ResizeBilinearPlan,
           GatherPlan, TransposePlan, ConcatPlan, PoolPlan, SmallFullyConnectedPlan, FloatQuantizePlan, DepthwisePlan,
           WideDepthwisePlan)
