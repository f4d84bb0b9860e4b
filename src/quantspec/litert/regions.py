"""Fused regions: a run of the interpreter's fast-path operators executed as one compiled call.

On the fast path each operator is a run plan (:mod:`.plans`) that makes one numba call; on a model
of small tensors (a transformer encoder of a few hundred values per tensor) the call itself — the
Python around it, the arguments' unboxing, the fresh output array — costs more than the arithmetic.
A region replaces a run of consecutive program entries whose plans all work on one-byte codes
(pair and unary tables and their folds and chains, MEAN / SUM, small int8 FULLY_CONNECTED,
RESHAPE / SQUEEZE, TRANSPOSE, int8 BATCH_MATMUL, int8 SOFTMAX, CONCATENATION, PAD / PADV2, int8
RESIZE_BILINEAR; and the optimized and XNNPACK kernel modes' plans of :mod:`.modeplans` for GEMMs of
few rows, SOFTMAX, MEAN / SUM, lane-dependent pair tables and XNNPACK's RESIZE_BILINEAR) on tensors of at most :data:`MAX_TENSOR` bytes with one entry: its input tensors
are copied into a byte arena that holds every tensor of the region at its own offset, one compiled
loop (:func:`~._jitted_regions.region`) runs the steps — each step the plan's own kernel with the
plan's own arguments, on slices of the arena — and the tensors read after the region (or that the
model outputs) are copied out as fresh arrays.  A RESHAPE is free: its output is its input's
bytes.  TRANSPOSE, CONCATENATION, PAD and BATCH_MATMUL, whose plans call numpy, get kernels of
their own that compute the same bytes (strided block copies; :mod:`._jitted_regions`).

A region is made only where intermediate tensors need not be kept (not with
``preserve_all_tensors``), from program entries whose outputs a run has already checked.  Where a
step meets a case its plan defers to the reference kernel (an input code on which LiteRT fails, a
SOFTMAX row LiteRT aborts on), the region raises :class:`Deopt` and the interpreter runs that call
on its operator-by-operator loop, where the operator's kernel raises as before.  The arena is
kept between runs for one thread at a time; another thread gets a fresh copy.

Where a region is the whole program over one input and one output (a small model such as the
bundled ``mixed.tflite``), :class:`Direct` is its call from ``Interpreter.run``: the kernel copies
the caller's array into the arena and the output into a fresh array itself, so one inference is
one compiled call and a few checks in Python.
``tests/test_litert_regions.py`` proves region and plans equal; the model tests compare both with
LiteRT.
"""

from __future__ import annotations

import math
import threading
from typing import Any, Sequence

import numpy as np

from .._fastpath import jit
from . import plans as P

__all__ = ["Deopt", "RegionPlan", "Direct", "direct", "fuse", "MIN_STEPS", "MAX_ARENA", "MAX_TENSOR"]

#: a region holds at least this many program entries (one alone gains nothing)
MIN_STEPS = 2
#: bytes of arena at most per region (a longer run of entries is cut into several regions)
MAX_ARENA = 1 << 22
#: an operator joins a region only where each tensor it reads or writes holds at most this many
#: bytes: a larger one may be copied into the arena and out again, which costs about as much as the
#: call a region saves (without this bound, EfficientNetB0 on 64x64 images measured a few percent
#: slower with regions, within the noise of a busy machine)
MAX_TENSOR = 1 << 14
_ALIGN = 16
#: the kernel's ``x`` and ``y`` where the caller copies the region's tensors in and out itself
_NONE = np.zeros(0, np.int8)


class Deopt(Exception):
    """A region's step met a case its plan leaves to the reference kernel: the interpreter runs the
    graph operator by operator for this call."""


def _k():
    return jit.load("quantspec.litert._jitted_regions")


def _size(shape) -> int:
    return int(math.prod(shape))


# ---------------------------------------------------------------------------------------------
# what each plan reads, and whether it can be a step
# ---------------------------------------------------------------------------------------------

def _dtype(specs, i) -> np.dtype | None:
    s = specs[i] if i >= 0 else None
    return None if s is None else np.dtype(s.dtype.dtype)


def _reads(plan, op_inputs: Sequence[int], out: int, specs) -> list[int] | None:
    """The tensors whose data the step reads (in the order its kernel takes them), or None where
    ``plan`` cannot be a step of a region."""
    if out < 0 or _dtype(specs, out) is None or _dtype(specs, out).itemsize != 1:
        return None
    ins = list(op_inputs)

    def byte(i, signed=None):
        d = _dtype(specs, i)
        if d is None or d.itemsize != 1:
            return False
        return signed is None or d == (np.int8 if signed else np.uint8)

    t = type(plan)
    n_out = _size(specs[out].shape)
    if t in (P.PairTablePlan, P.FoldedPairPlan):
        ok = plan.dims is not None and plan.size == n_out and plan.table.dtype == np.int8 and plan.table.size == 1 << 16 \
            and len(ins) == 2 and byte(ins[0]) and byte(ins[1])
        if ok and t is P.FoldedPairPlan:
            ok = np.asarray(plan.bad).size == 1 << 16
        return ins[:2] if ok else None
    if t is P.PairChainPlan:
        ok = len(ins) == 3 and plan.size == n_out and all(byte(i) for i in ins) and plan.first.dtype == np.int8 \
            and plan.second.dtype == np.int8 and plan.first.size == plan.second.size == 1 << 16
        return ins if ok else None
    if t in (P.UnaryTablePlan, P.FoldedUnaryPlan):
        ok = P.byte_table(plan, invalid_ok=True) and plan.table.dtype.itemsize == 1 and byte(ins[0]) \
            and _size(specs[ins[0]].shape) == n_out \
            and (plan.invalid is None or np.asarray(plan.invalid).size == 256)
        return ins[:1] if ok else None
    if t is P.MeanPlan:
        ok = np.dtype(plan.dtype).itemsize == 1 and (byte(ins[0]) if plan.uread else byte(ins[0], True)) \
            and plan.outer * plan.inner == n_out and plan.outer * plan.red * plan.inner == _size(specs[ins[0]].shape)
        return ins[:1] if ok else None
    if t is P.SmallFullyConnectedPlan:
        ok = byte(ins[0], True) and plan.size == n_out and _size(specs[ins[0]].shape) >= plan.prepared.rows * \
            plan.prepared.depth
        return ins[:1] if ok else None
    if t is P.ReshapePlan:
        return ins[:1] if byte(ins[0]) and _size(specs[ins[0]].shape) == _size(plan.shape) else None
    if t is P.TransposePlan:
        ok = byte(ins[0]) and _size(specs[ins[0]].shape) == n_out \
            and _walk_permuted(specs[ins[0]].shape, plan.perm) is not None
        return ins[:1] if ok else None
    if t is P.BatchMatMulPlan:
        p = plan.prepared
        ok = len(ins) >= 2 and byte(ins[0], True) and byte(ins[1], True) \
            and np.dtype(p.output_dtype).itemsize == 1 and _bmm_geometry(p) is not None \
            and _size(p.output_shape) == n_out \
            and tuple(specs[ins[0]].shape) == tuple(p.shapes[0]) and tuple(specs[ins[1]].shape) == tuple(p.shapes[1])
        return ins[:2] if ok else None
    if t is P.ConcatPlan:
        ok = all(byte(i) for i in ins) and _concat_walks(plan, [specs[i].shape for i in ins],
                                                          specs[out].shape) is not None
        return ins if ok else None
    if t is P.PadPlan:
        ok = byte(ins[0]) and plan.filled.dtype.itemsize == 1 and _pad_walk(plan, specs[ins[0]].shape) is not None \
            and tuple(plan.filled.shape) == tuple(specs[out].shape)
        return ins[:1] if ok else None
    if t is P.ResizeBilinearPlan:
        return ins[:1] if byte(ins[0], True) and plan.size == _size(specs[out].shape) else None
    mode = _mode_reads(plan, ins, n_out, specs, byte)
    if mode is not False:
        return mode
    if t is P.SoftmaxPlan:
        p = plan.prepared
        ok = byte(ins[0], True) and isinstance(p.exps, np.ndarray) and isinstance(p.terms, np.ndarray) \
            and p.exps.dtype == np.int64 and p.terms.dtype == np.int64 and p.exps.size == p.terms.size \
            and plan.rows * plan.cols == n_out == _size(specs[ins[0]].shape)
        return ins[:1] if ok else None
    return None


def _mode_reads(plan, ins, n_out, specs, byte):
    """:func:`_reads` of the kernel modes' plans (:mod:`.modeplans`); False for another plan."""
    from . import modeplans as M

    t = type(plan)
    if t is M.RowsGemmPlan:
        ok = byte(ins[0], True) and plan.size == n_out and _size(specs[ins[0]].shape) >= plan.w.size // plan.corr.size \
            * (plan.size // plan.corr.size)
        return ins[:1] if ok else None
    if t is M.SoftmaxTablePlan:
        ok = byte(ins[0], True) and _size(plan.shape) == n_out == _size(specs[ins[0]].shape)
        return ins[:1] if ok else None
    if t is M.ReduceFp32Plan:
        ok = byte(ins[0], True) and plan.outer * plan.inner == n_out \
            and plan.outer * plan.red * plan.inner == _size(specs[ins[0]].shape)
        return ins[:1] if ok else None
    if t is M.SpatialMeanPlan:
        ok = byte(ins[0], True) and plan.n * plan.depth == n_out and plan.n * plan.hw * plan.depth == \
            _size(specs[ins[0]].shape)
        return ins[:1] if ok else None
    if t is M.XnnResizePlan:
        ok = byte(ins[0], True) and plan.size == n_out and int(np.prod(plan.dims)) == _size(specs[ins[0]].shape)
        return ins[:1] if ok else None
    if t is M.LanePairPlan:
        ok = plan.size == n_out and len(ins) == 2 and byte(ins[0]) and byte(ins[1]) and plan.lanes.size == n_out
        return ins[:2] if ok else None
    return False


def _strides(shape) -> list[int]:
    st, acc = [0] * len(shape), 1
    for a in range(len(shape) - 1, -1, -1):
        st[a] = acc
        acc *= shape[a]
    return st


def _four(rows):
    """(dims, strides) of a walk given as [size, stride] per dimension, outermost first: dimensions
    of size 1 dropped, a dimension merged into the one before it where their strides continue; None
    beyond four dimensions."""
    merged: list[list[int]] = []
    for d, s in rows:
        if d == 1:
            continue
        if merged and merged[-1][1] == s * d:
            merged[-1] = [merged[-1][0] * d, s]
            continue
        merged.append([d, s])
    if len(merged) > 4:
        return None
    merged = [[1, 0]] * (4 - len(merged)) + merged
    return [m[0] for m in merged], [m[1] for m in merged]


def _walk_permuted(shape, perm):
    """(dims, strides) of a transposition's output walked as four dimensions, each with its element
    stride in the input; None beyond four."""
    shape = tuple(int(d) for d in shape)
    if len(perm) != len(shape):
        return None
    st = _strides(shape)
    return _four([[shape[a], st[a]] for a in perm])


def _walk_into(shape, out_shape, start):
    """(dims, strides, base) that write a tensor of ``shape``, in order, into one of ``out_shape``
    from the position ``start`` (per dimension) on; None beyond four dimensions."""
    shape, out_shape = tuple(int(d) for d in shape), tuple(int(d) for d in out_shape)
    if len(shape) != len(out_shape) or len(start) != len(shape):
        return None
    st = _strides(out_shape)
    walk = _four([[d, s] for d, s in zip(shape, st)])
    return None if walk is None else (*walk, sum(int(a) * s for a, s in zip(start, st)))


def _concat_walks(plan, shapes, out_shape):
    """Per input of a CONCATENATION, its walk into the output (None where one does not fit)."""
    walks, at = [], 0
    for shape in shapes:
        start = [0] * len(shape)
        if not len(shape):
            return None
        start[plan.axis] = at
        walk = _walk_into(shape, out_shape, start)
        if walk is None:
            return None
        walks.append(walk)
        at += int(shape[plan.axis])
    return walks if at == int(out_shape[plan.axis]) else None


def _pad_walk(plan, shape):
    return _walk_into(shape, plan.filled.shape, [sl.start for sl in plan.inner])


def _bmm_geometry(p):
    """(rows, cols, depth, a's row and depth strides, b's depth and column strides, then per batch
    of the output the offsets of its matrices in a and b), as numpy's matmul broadcasts them; None
    where the shapes do not fit that reading."""
    a, b, out = (tuple(int(d) for d in s) for s in (*p.shapes, p.output_shape))
    if len(a) < 2 or len(b) < 2 or len(out) < 2:
        return None
    rows, depth = (a[-1], a[-2]) if p.adj_x else (a[-2], a[-1])
    depth_b, cols = (b[-1], b[-2]) if p.adj_y else (b[-2], b[-1])
    if depth != depth_b or out[-2:] != (rows, cols):
        return None
    sam, sak = (1, a[-1]) if p.adj_x else (a[-1], 1)
    sbk, sbn = (1, b[-1]) if p.adj_y else (b[-1], 1)
    batch = out[:-2]
    nb = _size(batch)
    idx = np.indices(batch).reshape(len(batch), -1) if batch else np.zeros((0, 1), np.int64)

    def offsets(shape):
        lead = shape[:-2]
        if len(lead) > len(batch):
            return None
        lead = (1,) * (len(batch) - len(lead)) + lead
        mat = shape[-2] * shape[-1]
        off = np.zeros(nb, np.int64)
        stride = mat
        for d in range(len(batch) - 1, -1, -1):
            if lead[d] != 1:
                if lead[d] != batch[d]:
                    return None
                off += idx[d] * stride
            stride *= lead[d]
        return off

    oa, ob = offsets(a), offsets(b)
    if oa is None or ob is None or nb * rows * cols != _size(out):
        return None
    pairs = np.stack([oa, ob], axis=1).reshape(-1)
    return [rows, cols, depth, sam, sak, sbk, sbn, *(int(v) for v in pairs)]


# ---------------------------------------------------------------------------------------------
# the region: its code and constant arrays
# ---------------------------------------------------------------------------------------------

class _Pools:
    """The region's constant arrays, appended to while steps are lowered."""

    def __init__(self):
        self.ip: list[int] = []
        self.t8: list[np.ndarray] = []
        self.tn = 0
        self.tb: list[np.ndarray] = []
        self.bn = 0
        self.f32: list[np.ndarray] = []
        self.fn = 0
        self.f64: list[np.ndarray] = []
        self.dn = 0
        self._tables: dict[int, tuple[int, int]] = {}
        self._keep: list = []

    def ints(self, values) -> int:
        at = len(self.ip)
        self.ip.extend(int(v) for v in values)
        return at

    def table(self, a) -> tuple[int, int]:
        key = id(a)
        hit = self._tables.get(key)
        if hit is not None:
            return hit
        b = np.ascontiguousarray(a).reshape(-1).view(np.int8)
        at = self.tn
        self.t8.append(b)
        self.tn += b.size
        self._tables[key] = (at, b.size)
        self._keep.append(a)                # id() stays unique while a lives
        return at, b.size

    def flags(self, a) -> tuple[int, int]:
        if a is None:
            return 0, 0
        b = np.asarray(a).reshape(-1).astype(np.bool_)
        at = self.bn
        self.tb.append(b)
        self.bn += b.size
        return at, b.size

    def floats(self, a) -> tuple[int, int]:
        b = np.asarray(a, np.float32).reshape(-1)
        at = self.fn
        self.f32.append(b)
        self.fn += b.size
        return at, b.size

    def doubles(self, a) -> int:
        b = np.asarray(a, np.float64).reshape(-1)
        at = self.dn
        self.f64.append(b)
        self.dn += b.size
        return at

    def buffer(self) -> tuple[np.ndarray, list[int]]:
        """The constant arrays side by side in one byte buffer (each at a multiple of 8 bytes), and
        the header row of the code that places them: (offset, length) of each."""
        def cat(parts, dtype):
            out = np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)
            return np.ascontiguousarray(out)

        arrays = (np.array(self.ip, np.int64), cat(self.t8, np.int8), cat(self.tb, np.bool_), cat(self.f32, np.float32),
                  cat(self.f64, np.float64))
        header, at = [], 0
        for a in arrays:
            header += [at, a.size]
            at += -(-a.nbytes // 8) * 8
        buf = np.zeros(max(at, 8), np.uint8)
        for a, off in zip(arrays, header[::2]):
            buf[off:off + a.nbytes] = a.view(np.uint8)
        return buf, header


def _row(kind, out, ins, p=0, t=(0, 0), m=(0, 0), f=(0, 0)):
    """One step's row of the code: kind, output (offset, size), three inputs (offset, size), then the
    offsets of its parameters."""
    cells = [kind, *out]
    for j in range(3):
        cells.extend(ins[j] if j < len(ins) else (0, 0))
    cells.extend([p, *t, *m, *f])
    return cells


def _lower(plan, reads, out, where, pools: _Pools, specs):
    """The code rows of one operator's steps (``where``: tensor -> (offset, size) in the arena; a
    constant a step needs besides the operator's tensors, such as PAD's filled output, under
    ``(id(plan), "fill")``)."""
    K = _k()
    o = where[out]
    ins = [where[i] for i in reads]
    t = type(plan)
    if t is P.ReshapePlan:
        return []                       # its output is its input's bytes
    if t is P.ConcatPlan:
        walks = _concat_walks(plan, [specs[i].shape for i in reads], specs[out].shape)
        return [_row(K.SCATTER, o, [x], pools.ints([*dims, *strides, base])) for x, (dims, strides, base)
                in zip(ins, walks)]
    if t is P.PadPlan:
        n = plan.filled.size
        whole = pools.ints([1, 1, 1, n, 0, 0, 0, 1, 0])
        dims, strides, base = _pad_walk(plan, specs[reads[0]].shape)
        return [_row(K.SCATTER, o, [where[(id(plan), "fill")]], whole),
                _row(K.SCATTER, o, ins, pools.ints([*dims, *strides, base]))]
    if t is P.ResizeBilinearPlan:
        (y0, y1, wy0, wy1), (x0, x1, wx0, wx1) = plan.axes
        p = pools.ints([*plan.dims, y0.size, x0.size, *y0, *y1, *wy0, *wy1, *x0, *x1, *wx0, *wx1])
        return [_row(K.RESIZE, o, ins, p)]
    return [_lower_one(plan, o, ins, pools, specs, reads)]


def _lower_one(plan, o, ins, pools: _Pools, specs, reads):
    """The code row of an operator of one step."""
    K = _k()
    t = type(plan)
    if t in (P.PairTablePlan, P.FoldedPairPlan):
        p = pools.ints([*plan.dims, *plan.xs, *plan.ys])
        if t is P.FoldedPairPlan:
            return _row(K.PAIR_CHECKED, o, ins, p, pools.table(plan.table), pools.flags(plan.bad))
        return _row(K.PAIR, o, ins, p, pools.table(plan.table))
    if t is P.PairChainPlan:
        p = pools.ints([*plan.dims, *plan.xs, *plan.ys, *plan.zs, plan.tpos])
        a = pools.table(plan.first)
        b = pools.table(plan.second)
        if b[0] != a[0] + a[1]:          # the two tables side by side (a table used twice is stored once)
            a = pools.table(np.array(plan.first))
            b = pools.table(np.array(plan.second))
        return _row(K.CHAIN, o, ins, p, (a[0], a[1] + b[1]))
    if t in (P.UnaryTablePlan, P.FoldedUnaryPlan):
        return _row(K.LUT, o, ins, 0, pools.table(plan.table), pools.flags(plan.invalid))
    if t is P.MeanPlan:
        p = pools.ints([plan.outer, plan.red, plan.inner, plan.n, plan.zin, plan.m, plan.e, plan.zo, plan.lo,
                        plan.hi, 1 if plan.uread else 0])
        return _row(K.MEAN, o, ins, p)
    if t is P.SmallFullyConnectedPlan:
        units = plan.corr.size
        p = pools.ints([plan.zo, plan.lo, plan.hi, units, *plan.corr])
        d = pools.doubles(plan.eff)
        return _row(K.FC, o, ins, p, m=(d, units), f=pools.floats(plan.w))
    if t is P.TransposePlan:
        dims, strides = _walk_permuted(specs[reads[0]].shape, plan.perm)
        return _row(K.PERMUTE, o, ins, pools.ints([*dims, *strides]))
    if t is P.BatchMatMulPlan:
        pr = plan.prepared
        g = _bmm_geometry(pr)
        rq = plan.requant
        cols = g[1]
        p = pools.ints([int(plan.zl), int(plan.zr), rq.zo, rq.lo, rq.hi, cols, len(g), *g, *rq.mult, *rq.shift])
        return _row(K.BMM, o, ins, p)
    from . import modeplans as M

    if t is M.RowsGemmPlan:
        p = pools.ints([plan.zo, plan.lo, plan.hi, plan.kind, plan.corr.size, *plan.corr, *plan.mult, *plan.shift,
                        1 if plan.outer else 0])
        return _row(K.GEMM_ROWS, o, ins, p, pools.table(plan.w), m=(pools.doubles(plan.eff), plan.corr.size))
    if t is M.SoftmaxTablePlan:
        return _row(K.SOFTMAX_F32, o, ins, pools.ints([plan.cols, plan.zo]),
                    f=pools.floats(np.concatenate([plan.table, [plan.so]]).astype(np.float32)))
    if t is M.ReduceFp32Plan:
        return _row(K.REDUCE_F32, o, ins, pools.ints([plan.outer, plan.red, plan.inner]),
                    f=pools.floats(np.array([plan.scale, plan.zp], np.float32)))
    if t is M.SpatialMeanPlan:
        return _row(K.MEAN_SPATIAL, o, ins, pools.ints([plan.n, plan.hw, plan.depth, plan.mult, plan.shift, plan.bias]),
                    pools.table(plan.vec))
    if t is M.XnnResizePlan:
        p = pools.ints([*plan.dims, plan.y0.size, plan.x0.size, *plan.y0, *plan.y1, *plan.ay, *plan.x0, *plan.x1,
                        *plan.ax])
        return _row(K.RESIZE_Q11, o, ins, p)
    if t is M.LanePairPlan:
        p = pools.ints([*plan.dims, *plan.xs, *plan.ys])
        return _row(K.PAIR_LANES, o, ins, p, pools.table(plan.tables), m=pools.table(plan.lanes))
    if t is P.SoftmaxPlan:
        pr = plan.prepared
        p = pools.ints([plan.rows, plan.cols, plan.diff_min, pr.exps.size, *pr.exps.reshape(-1),
                        *pr.terms.reshape(-1)])
        return _row(K.SOFTMAX, o, ins, p)
    raise AssertionError(t)  # pragma: no cover - _reads admitted it


class RegionPlan:
    """One program entry for a run of plans: ``compute(unused, arrays)`` takes the arrays of the
    tensors the region reads from outside (``ext``: their offset, size, shape and numpy type in the
    arena) and returns fresh arrays of the tensors it hands on (``outs``, the same); ``code`` and
    ``consts`` (one byte buffer) are its kernel's steps and constant arrays."""

    __slots__ = ("code", "consts", "blank", "arena", "lock", "ext", "outs", "entry", "plans", "ops", "args",
                 "ins", "outv")

    def __init__(self, code, consts, blank, ext, outs, plans, ops):
        self.code, self.consts, self.blank = code, consts, blank
        self.ext, self.outs = tuple(ext), tuple(outs)
        self.lock = threading.Lock()
        self.entry = None
        self.plans, self.ops = plans, ops
        # the arena kept between runs, its argument tuple and its views (made once: a small region's
        # call costs little more than these)
        self.arena = blank.copy()
        self.args, self.ins, self.outv = self._views(self.arena)

    @property
    def steps(self) -> int:
        """The number of steps the region's kernel runs (its code's rows after the header)."""
        return len(self.code) - 1

    def _views(self, a8):
        args = (self.code, a8, self.consts, _NONE, _NONE)
        ins = tuple(a8[off:off + n].view(dtype).reshape(shape) for off, n, shape, dtype in self.ext)
        outv = tuple(a8[off:off + n].view(dtype).reshape(shape) for off, n, shape, dtype in self.outs)
        return args, ins, outv

    def compute(self, unused, arrays):
        lock = self.lock
        if not lock.acquire(False):
            return self._run(self._views(self.blank.copy()), arrays)      # another thread holds the arena
        try:
            entry = self.entry
            if entry is None:
                return self._run((self.args, self.ins, self.outv), arrays)
            for dst, x in zip(self.ins, arrays):
                np.copyto(dst, x)           # the model's shape and type (the program's tensors have them)
            if entry(*self.args):
                raise Deopt
            return [v.copy() for v in self.outv]
        finally:
            lock.release()

    def _run(self, views, arrays):
        args, ins, outv = views
        for dst, x in zip(ins, arrays):
            np.copyto(dst, x)               # the model's shape and type (the program's tensors have them)
        entry = self.entry
        if entry is None:
            from .._fastpath.runner import dispatcher_entry

            entry = self.entry = dispatcher_entry(_k().region, args)
        if entry(*args):
            raise Deopt
        return [v.copy() for v in outv]


class Direct:
    """A region that is a whole program over one input and one output of one-byte codes, as
    :meth:`~quantspec.litert.interpreter.Interpreter.run` calls it with the caller's array: the
    kernel copies the input's bytes (``x.ravel()``, a view of a C-contiguous array, else a
    contiguous copy) into the arena and the output's into a fresh array; no Python copy, no view
    made per call.  Two arenas take turns (the region's own and a copy), each with the record of
    its input and output views that :meth:`get_tensor` reads, so a run never writes the arena the
    previous run's record points to.  The region's lock guards both; a thread that finds it held
    takes the region's fresh-arena path (:meth:`RegionPlan.compute`).

    ``dtype`` / ``shape`` and ``odtype`` / ``oshape``: the input's and the output's numpy type and
    shape; ``xcast`` / ``ycast``: whether the input's / output's type is uint8, whose bytes the
    kernel takes as int8 (one compiled signature)."""

    __slots__ = ("entry", "code", "consts", "arenas", "lasts", "flip", "lock", "dtype", "shape", "odtype", "oshape",
                 "xcast", "ycast")

    def __init__(self, region: RegionPlan, entry, input_id: int, output_id: int):
        (off, n, shape, dtype), = region.ext
        (yoff, yn, oshape, odtype), = region.outs
        self.entry = entry
        self.code, self.consts, self.lock = region.code, region.consts, region.lock
        self.dtype, self.shape, self.odtype, self.oshape = np.dtype(dtype), tuple(shape), np.dtype(odtype), tuple(oshape)
        self.xcast, self.ycast = self.dtype != np.int8, self.odtype != np.int8
        self.arenas = (region.arena, region.blank.copy())
        self.lasts = tuple({input_id: a[off:off + n].view(dtype).reshape(shape),
                            output_id: a[yoff:yoff + yn].view(odtype).reshape(oshape)} for a in self.arenas)
        self.flip = 0


def direct(region: RegionPlan, input_id: int, output_id: int) -> Direct | None:
    """The direct call of ``region`` (one input, one output), its kernel compiled (or loaded); None
    where numba's internals are not as :func:`quantspec._fastpath.runner.dispatcher_entry` expects (the dispatcher
    would compile the kernel again for each new argument type, a read-only input's among them)."""
    if len(region.ext) != 1 or len(region.outs) != 1:
        return None
    from .._fastpath.runner import dispatcher_entry

    dispatcher = _k().region
    entry = region.entry
    if entry is None:
        entry = region.entry = dispatcher_entry(dispatcher, region.args)
    if entry is dispatcher:
        return None
    return Direct(region, entry, input_id, output_id)


def _region(entries, kernels, reads, specs, template, needed_after) -> RegionPlan:
    """The region of the program entries ``entries`` (their plans ``kernels``, data inputs ``reads``);
    ``needed_after``: the tensors read after it or output by the model."""
    where: dict[int, tuple[int, int]] = {}
    size = 0

    def place(i):
        nonlocal size
        n = _size(specs[i].shape)
        where[i] = (size, n)
        size += -(-max(n, 1) // _ALIGN) * _ALIGN

    ext: list[int] = []
    consts: list[int] = []
    fill: dict = {}
    for entry, plan, rd in zip(entries, kernels, reads):
        for i in rd:
            if i not in where:
                if template[i] is not None:
                    consts.append(i)
                else:
                    ext.append(i)
                place(i)
        out = entry[3]
        if type(plan) is P.ReshapePlan:
            where[out] = (where[rd[0]][0], _size(specs[out].shape))
        else:
            place(out)
        if type(plan) is P.PadPlan:             # the pad-filled output, copied first
            fill[(id(plan), "fill")] = plan.filled
            where[(id(plan), "fill")] = (size, plan.filled.size)
            size += -(-max(plan.filled.size, 1) // _ALIGN) * _ALIGN
    blank = np.zeros(max(size, 1), np.int8)
    for i in consts:
        off, n = where[i]
        blank[off:off + n] = np.ascontiguousarray(template[i]).reshape(-1).view(np.int8)
    for key, a in fill.items():
        off, n = where[key]
        blank[off:off + n] = np.ascontiguousarray(a).reshape(-1).view(np.int8)
    pools = _Pools()
    rows = [row for entry, plan, rd in zip(entries, kernels, reads)
            for row in _lower(plan, rd, entry[3], where, pools, specs)]
    consts, header = pools.buffer()
    produced = {entry[3] for entry in entries}
    outs = [(i, *where[i], tuple(specs[i].shape), _dtype(specs, i)) for i in sorted(produced & needed_after)]
    # the arena offsets of the first input and the first output (a direct call copies them itself)
    header += [where[ext[0]][0] if ext else 0, outs[0][1] if outs else 0]
    code = np.array([header + [0] * (16 - len(header)), *rows], np.int64).reshape(len(rows) + 1, 16)
    return RegionPlan(code, consts, blank, [(*where[i], tuple(specs[i].shape), _dtype(specs, i)) for i in ext],
                      [(off, n, shape, dtype) for _, off, n, shape, dtype in outs], list(kernels),
                      (ext, [o[0] for o in outs]))


def fuse(program: list, kernels: list, where: list, specs, template, model_outputs) -> tuple[list, list, list]:
    """The program with each run of at least :data:`MIN_STEPS` consecutive entries that can be steps
    made one region entry; returns (program, kernels, where) as :meth:`_Graph._make_program` keeps
    them (``where``: per entry, the operator it runs; a region's is its first operator's)."""
    n = len(program)
    reads: list[list[int] | None] = []
    for entry, plan in zip(program, kernels):
        compute, prepared, op_inputs, out, checks, release = entry
        ok = checks is None and prepared is None and getattr(compute, "__self__", None) is plan
        rd = _reads(plan, op_inputs, out, specs) if ok else None
        if rd is not None and any(_size(specs[i].shape) > MAX_TENSOR for i in (*rd, out)):
            rd = None
        reads.append(rd)
    # the runs, cut where the arena would grow past MAX_ARENA
    runs: list[tuple[int, int]] = []
    start, used = None, 0
    for j in range(n + 1):
        if j < n and reads[j] is not None:
            grow = sum(_size(specs[i].shape) + _ALIGN for i in (*reads[j], program[j][3]))
            if start is not None and used + grow > MAX_ARENA:
                runs.append((start, j))
                start, used = None, 0
            if start is None:
                start = j
            used += grow
            continue
        if start is not None:
            runs.append((start, j))
            start, used = None, 0
    runs = [(a, b) for a, b in runs if b - a >= MIN_STEPS]
    if not runs:
        return program, kernels, where
    later_reads: list[set[int]] = [set() for _ in range(n + 1)]
    acc: set[int] = set(model_outputs)
    for j in range(n - 1, -1, -1):
        later_reads[j + 1] = set(acc)
        acc.update(i for i in program[j][2] if i >= 0)
    new_program, new_kernels, new_where = [], [], []
    j = 0
    for a, b in runs:
        new_program.extend(program[j:a])
        new_kernels.extend(kernels[j:a])
        new_where.extend(where[j:a])
        region = _region(program[a:b], kernels[a:b], reads[a:b], specs, template, later_reads[b])
        ext, outs = region.ops
        release = tuple(sorted({i for entry in program[a:b] for i in entry[5]}))
        if len(outs) == 1:
            entry = (region.compute, None, tuple(ext), outs[0], None, release)
        else:
            entry = (region.compute, None, tuple(ext), -1,
                     tuple((i, tuple(specs[i].shape), _dtype(specs, i)) for i in outs), release)
        new_program.append(entry)
        new_kernels.append(region)
        new_where.append(where[a])
        j = b
    new_program.extend(program[j:])
    new_kernels.extend(kernels[j:])
    new_where.extend(where[j:])
    return new_program, new_kernels, new_where
