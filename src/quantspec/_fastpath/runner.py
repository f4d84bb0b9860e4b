"""The fast path's plumbing shared by every spec (no numba here; the kernels are in :mod:`.fastmap`).

An element-wise operation of any spec — ONNX QuantizeLinear, TensorFlow QuantizeV2, LiteRT
QUANTIZE, their dequantize twins — is one generic kernel, :data:`quantspec._fastpath.fastmap.plain`
(or ``streamed``), applied to

- ``x`` and ``y``: flat contiguous arrays;
- ``params``: a tuple of flat parameter arrays (one entry per scale "unit": 1 for per-tensor, one per
  channel for per-axis, one per block for blocked), all walked alike;
- a :class:`SegLayout` or :class:`RowLayout` record that says which parameter entry each element
  takes (:func:`layout`);
- ``op``: a pair of records whose classes select the element function (registered by the spec's
  kernel module with :func:`quantspec._fastpath.fastmap.register`) and whose fields are its constants.

:func:`run` picks the calling thread alone or quantspec's thread pool (:mod:`.pool`) and whether to
stream the output (§ thresholds below); :func:`launch` does the same for the other kernels;
:func:`flat_params` puts parameters in the shape the layout expects.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
from collections import namedtuple

import numpy as np

from . import jit, pool

__all__ = ["SegLayout", "RowLayout", "LongRowLayout", "layout", "flat_params", "run", "flat", "zeros", "parallel", "serial_below", "CHUNK",
           "SERIAL_BELOW", "SERIAL_BELOW_PASSIVE", "CLAIMS_PER_THREAD", "launch", "fast_from", "reference_below",
           "set_thresholds", "restore_thresholds", "FORKED_AFTER_POOL", "STREAM_FROM", "STREAM_BLOCK", "STREAM_BUFFER",
           "ROWS_TOGETHER_FROM", "ROWS_GROUPED_FROM", "together"]

#: elements per unit of parallel work
CHUNK = 1 << 15
#: arrays smaller than this run on the calling thread alone.  A parallel call wakes the pool's
#: helpers (quantspec._fastpath.pool), which takes 15-100 us on the 2-core machine of docs/performance.md
#: and costs the caller a few microseconds (the caller does not wait for them: it starts at once);
#: below this the caller is done before a helper would have joined (float32 -> int8 runs at about
#: 13 Gelem/s on one thread, in cache)
SERIAL_BELOW = 1 << 19
#: kept for code that set it: the pool's helpers always sleep when idle, so OpenMP's wait policy no
#: longer changes where parallel calls start
SERIAL_BELOW_PASSIVE = SERIAL_BELOW
#: a parallel call's work items are claimed about this many times per thread (a few at a time: the
#: threads share out the work as they come, the last claims are small enough that no thread waits
#: long for another)
CLAIMS_PER_THREAD = 16


def parallel(n: int) -> bool:
    """Whether ``n`` elements run on the pool's threads (SERIAL_BELOW, a :func:`serial_below` block of
    this thread; never in a process forked after numba's OpenMP pool had started,
    :data:`FORKED_AFTER_POOL`, for kernels that still use it)."""
    return not (n < SERIAL_BELOW or FORKED_AFTER_POOL or n < getattr(_LOCAL, "serial_below", 0))


_LOCAL = threading.local()


def fast_from() -> int:
    """The fewest elements this thread's calls take the fast kernels for (:func:`reference_below`)."""
    return getattr(_LOCAL, "fast_from", 0)


@contextlib.contextmanager
def reference_below(n: int):
    """Within the block, this thread's operations on fewer than ``n`` elements take the numpy
    reference path (the same bytes) where their spec's code asks (:func:`fast_from`): the LiteRT
    interpreter's, whose smallest tensors (a model's input of a few thousand values, its output of
    ten) would each compile a kernel (about a second, once) to save microseconds."""
    before = fast_from()
    _LOCAL.fast_from = max(before, n)
    try:
        yield
    finally:
        _LOCAL.fast_from = before


def set_thresholds(serial: int, reference: int) -> tuple[int, int]:
    """:func:`serial_below` and :func:`reference_below` at once, without a ``with`` statement (for
    the LiteRT interpreter's run, a few microseconds in all): returns the calling thread's previous
    thresholds, for :func:`restore_thresholds`."""
    local = _LOCAL
    before = (getattr(local, "serial_below", 0), getattr(local, "fast_from", 0))
    local.serial_below = max(before[0], serial)
    local.fast_from = max(before[1], reference)
    return before


def restore_thresholds(before: tuple[int, int]) -> None:
    """Undo :func:`set_thresholds`."""
    _LOCAL.serial_below, _LOCAL.fast_from = before


@contextlib.contextmanager
def serial_below(n: int):
    """Within the block, this thread's calls below ``n`` elements run on the serial kernels (the
    LiteRT interpreter's: a parallel call is worth its thread wake-up and its final wait for every
    worker only on large tensors, and on a busy machine that wait is long)."""
    before = getattr(_LOCAL, "serial_below", 0)
    _LOCAL.serial_below = max(before, n)
    try:
        yield
    finally:
        _LOCAL.serial_below = before


#: True in a process made by ``fork()`` (multiprocessing's default start method on Linux) from a
#: process whose numba thread pool had already started.  GNU OpenMP, numba's pool here, cannot run
#: in such a child: numba stops the child with SIGTERM at its first parallel kernel ("fork() called
#: from a process already using GNU OpenMP"), and a ``multiprocessing.Pool`` then waits forever.
#: The serial kernels use no thread pool, so such a child computes the same bytes on its calling
#: thread (the spawn and forkserver start methods give each worker its own pool).
FORKED_AFTER_POOL = False


def _after_fork_in_child() -> None:
    global FORKED_AFTER_POOL
    omp = sys.modules.get("numba.np.ufunc.parallel")
    if omp is not None and getattr(omp, "_is_initialized", False):
        FORKED_AFTER_POOL = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


#: outputs of at least this many bytes (more than the last-level cache keeps alongside the input) are
#: written with streaming (non-temporal) stores, which skip the read-for-ownership of every output
#: line: 1 of the 6 bytes an element of float32 -> int8 moves, 4 of the 9 of int8 -> float32
#: (docs/performance.md)
STREAM_FROM = 1 << 24
#: bytes a worker computes into a buffer (in L1) before streaming them out: small, so that the loads
#: of the input and the streamed stores interleave.  A compile-time constant of the kernels (the
#: buffer's size), read once when they are first loaded: changing it means recompiling them (and
#: the on-disk cache does not key on it), so nothing may patch it at run time
STREAM_BUFFER = 1 << 10
#: runs (SegLayout) shorter than this many bytes of output are not streamed: their whole lines would
#: be few.  Read on every call (tests lower it to stream short runs too)
STREAM_BLOCK = STREAM_BUFFER

#: rows (RowLayout) that take at least this many bytes of parameters are computed four at a time,
#: each parameter entry loaded once for the four: a row at a time, such parameters no longer stay in
#: L1 beside the data streaming through, and per-axis quantization along a last axis of 8192 ran at
#: half the rate of the same data along axis 0 (docs/performance.md).  A compile-time constant of
#: the kernels, like STREAM_BUFFER.  Such rows are grouped four (or a multiple of four) to a work
#: item (:func:`layout`) and written with ordinary stores (:func:`run`)
ROWS_TOGETHER_FROM = 24 << 10
#: ... the grouping applies from rows of this many elements (layout() does not know the parameters'
#: types), when there are enough rows for every worker
ROWS_GROUPED_FROM = 1024

# x is seen as (O, D, I) with blocks of B along D (nb of them; per-axis: B = 1, per-tensor: all 1),
# walked as runs that share one parameter entry (SegLayout) or as rows of L elements whose parameters
# change along the row (RowLayout).  ``Op``: the parameters differ along O (blocked).  ``units``: the
# runs or rows; ``work`` work items, each ``nsub`` parts (of ``chunk`` elements) of one unit, or
# ``group`` whole units.
_FIELDS = "O D I B nb Op L units work nsub group chunk"
SegLayout = namedtuple("SegLayout", _FIELDS)
RowLayout = namedtuple("RowLayout", _FIELDS)


class LongRowLayout(RowLayout):
    """A RowLayout of rows of at least ROWS_GROUPED_FROM elements: the only rows the kernels may
    compute four at a time (:func:`together`), a branch compiled into their kernels alone (the
    kernels of shorter rows, such as a convolution's requantization per channel, compile faster
    without it)."""

    __slots__ = ()


def _rows(*fields) -> RowLayout:
    return (LongRowLayout if fields[6] >= ROWS_GROUPED_FROM else RowLayout)(*fields)


def _size(shape) -> int:
    return int(math.prod(shape))


def _work(units: int, length: int) -> tuple[int, int, int, int, int]:
    """(units, work items, parts per unit, units per work item, chunk) for ``units`` runs of
    ``length``: work items of about CHUNK elements."""
    if units == 0 or length == 0:
        return units, 0, 1, 1, CHUNK
    if length >= CHUNK:
        nsub = -(-length // CHUNK)
        return units, units * nsub, nsub, 1, CHUNK
    group = max(1, CHUNK // length)
    return units, -(-units // group), 1, group, CHUNK


def _row_work(units: int, length: int) -> tuple[int, int, int, int, int]:
    """:func:`_work` for rows: long rows (ROWS_GROUPED_FROM) whole, four or a multiple of four to a
    work item, when that leaves at least 8 work items."""
    if length >= ROWS_GROUPED_FROM and units >= 32:
        group = 4 * max(1, CHUNK // (4 * length))
        return units, -(-units // group), 1, group, CHUNK
    return _work(units, length)


def layout(shape: tuple[int, ...], granularity: str, axis: int | None = None, block_size: int = 0,
           rows: bool = True) -> SegLayout | RowLayout:
    """How the kernel walks an array of ``shape`` quantized per ``granularity`` ("tensor", "axis" or
    "block", along the normalised ``axis``).  ``rows=False``: always the SegLayout form, whose
    (O, D, I, B, nb, Op) give the compact parameter entry of any element."""
    n = _size(shape)
    if granularity == "tensor":
        O, D, I, B, nb, Op = 1, 1, n, 1, 1, 0
    else:
        O, D, I = _size(shape[:axis]), shape[axis], _size(shape[axis + 1:])
        if granularity == "axis":
            B, nb, Op = 1, D, 0
        else:
            B, nb, Op = block_size, -(-D // block_size), 1
    if rows and granularity == "block" and I > 1:
        # blocked along a non-last axis: rows (o, d) of I elements, parameter row (o, d // B)
        return _rows(O, D, I, B, nb, Op, I, *_row_work(O * D, I))
    if rows and granularity == "axis" and I < 16:
        # per-axis with short runs: rows of D*I elements against the parameters repeated I times
        return _rows(O, 1, D * I, 1, 1, 0, D * I, *_row_work(O, D * I))
    return SegLayout(O, D, I, B, nb, Op, B * I, *_work(O * nb, B * I))


def flat_params(shape: tuple[int, ...], granularity: str, axis: int | None, lay, *params) -> tuple:
    """The compact parameter arrays as the layout reads them: flat and contiguous; for per-axis
    "row" layouts each entry repeated once per element of the run it covers."""
    flat_ = tuple(np.ascontiguousarray(p).reshape(-1) for p in params)
    if isinstance(lay, RowLayout) and granularity == "axis":
        return tuple(np.repeat(p, _size(shape[axis + 1:])) for p in flat_)
    return flat_


_ZEROS: dict[np.dtype, np.ndarray] = {}


def zeros(shape, dtype) -> np.ndarray:
    """A read-only array of zeros (an absent zero point), from a cache grown to the largest size asked
    for: a fresh ``np.zeros`` is lazily mapped memory whose every page faults when the kernel first
    reads it, which for a blocked scale of millions of entries costs as much as the kernel."""
    dtype = np.dtype(dtype)
    n = _size(shape)
    cached = _ZEROS.get(dtype)
    if cached is None or cached.size < n:
        cached = np.full(max(n, 1024), 0, dtype)     # written, so its pages are real
        cached.flags.writeable = False
        _ZEROS[dtype] = cached
    return cached[:n].reshape(shape)


def flat(x: np.ndarray, dtype=None) -> np.ndarray:
    """``x`` as a flat contiguous array (a view when it already is one), reinterpreted as ``dtype``."""
    if type(x) is np.ndarray and x.ndim == 1 and x.flags.c_contiguous:
        f = x
    else:
        f = np.ascontiguousarray(x).reshape(-1)
    return f if dtype is None or f.dtype == dtype else f.view(dtype)


def _jitted():
    return jit.load("quantspec._fastpath.fastmap")


def destination(out: np.ndarray, source: np.ndarray) -> tuple[np.ndarray, bool]:
    """Where a kernel writes the result meant for ``out``, and whether the caller must then copy it
    into ``out`` (``np.copyto``): ``out`` itself, as a plain ndarray (a subclass such as np.matrix
    reshapes differently; a memmap stays mapped), when it is C-contiguous and shares no memory with
    ``source`` (the kernels read and write in parallel, in their own order: an output over its
    input would be overwritten before it is read); else a fresh array.  Two distinct arrays that
    each own their memory (``base`` None) cannot overlap: that common case skips the bounds test."""
    view = out if type(out) is np.ndarray else np.asarray(out)
    if view.flags.c_contiguous and (
            (view.base is None and getattr(source, "base", 0) is None and view is not source)
            or not np.may_share_memory(view, source)):
        return view, False
    return np.empty(out.shape, out.dtype), True


def together(lay, params: tuple) -> bool:
    """Whether the kernels compute rows of this RowLayout four at a time (ROWS_TOGETHER_FROM): rows
    with that many bytes of parameters, in work items of whole rows, four or more of them."""
    return (lay.L * sum(p.itemsize for p in params) >= ROWS_TOGETHER_FROM and lay.nsub == 1
            and lay.group >= 4)


def run(x: np.ndarray, y: np.ndarray, params: tuple, lay, op: tuple, n: int | None = None,
        memo: dict | None = None) -> None:
    """``y = op(x)`` elementwise (flat arrays): on the pool's threads from SERIAL_BELOW elements
    (:func:`parallel`, quantspec._fastpath.pool), streaming the output from STREAM_FROM bytes (when ``y``
    is aligned to its element size).

    ``memo``: a dict owned by the caller's prepared state, for calls that repeat with the same
    ``params``, ``lay`` and ``op`` objects (a cached plan): it keeps the compiled kernel's entry point
    for the types of ``x`` and ``y`` (:func:`dispatcher_entry`), which skips numba's dispatch (typing the
    records on every call: about 2 us of a small call's 10)."""
    n = x.size if n is None else n
    if n == 0:
        return
    work = lay.work
    if n < SERIAL_BELOW and memo is not None:
        # the common small call: the plain kernel on this thread, its entry point remembered for
        # these argument types (x and y are flat: their types differ only by dtype and flags)
        entry = memo.get((False, x.dtype, x.flags.num & TYPE_FLAGS, y.dtype, y.flags.num & TYPE_FLAGS))
        if entry is not None:
            entry(x, y, params, lay, op[0], op[1], np.zeros(2, np.int64), work)
            return
    parts = min(pool.threads(), work) if parallel(n) else 1
    # SegLayout runs are streamed run by run: only runs of whole lines gain (blocked runs of 32 bytes
    # would all be written by the scalar head and tail)
    # rows computed four at a time (ROWS_TOGETHER_FROM) are not streamed: the stream buffer holds
    # part of one row, and streaming took them a row at a time again (slower, for quantize and
    # dequantize alike, measured)
    stream = (parts > 1 and y.nbytes >= STREAM_FROM and y.flags.aligned
              and (not together(lay, params) if isinstance(lay, RowLayout) else lay.L * y.itemsize >= STREAM_BLOCK))
    claims = np.zeros(2, np.int64)
    step = max(1, work // (parts * CLAIMS_PER_THREAD)) if parts > 1 else work
    args = (x, y, params, lay, op[0], op[1], claims, step)
    if memo is None:
        kernels = _jitted()
        entry = kernels.streamed if stream else kernels.plain
    else:
        # everything numba's type of the arguments depends on that can change from call to call: the
        # arrays' dtype and flags (contiguity, writeable, aligned; both are flat), and the kernel
        key = (stream, x.dtype, x.flags.num & TYPE_FLAGS, y.dtype, y.flags.num & TYPE_FLAGS)
        entry = memo.get(key)
        if entry is None:
            kernels = _jitted()
            entry = memo[key] = dispatcher_entry(kernels.streamed if stream else kernels.plain, args)
    if parts > 1:
        pool.run(entry, args, claims, work, parts)
    else:
        entry(*args)


#: the array flags numba's type of an array depends on (C / F contiguous, aligned, writeable): an
#: entry point's key keeps only these (a view and the array it views share one entry point)
TYPE_FLAGS = 0x1 | 0x2 | 0x100 | 0x400


def launch(kernel, args: tuple, work: int, n: int) -> None:
    """Run ``kernel(*args, claims, step)``, a kernel that claims ``work`` work items from ``claims``
    ``step`` at a time and returns the number finished (quantspec._fastpath.pool), over ``n`` elements in
    all: on the pool's threads from SERIAL_BELOW elements (:func:`parallel`), else on this one."""
    if work <= 0:
        return
    parts = min(pool.threads(), work) if parallel(n) else 1
    claims = np.zeros(2, np.int64)
    step = max(1, work // (parts * CLAIMS_PER_THREAD)) if parts > 1 else work
    if parts > 1:
        pool.run(kernel, (*args, claims, step), claims, work, parts)
    else:
        kernel(*args, claims, step)


def dispatcher_entry(dispatcher, args: tuple):
    """The compiled entry point of ``dispatcher`` for exactly the types of ``args`` (compiling or
    loading it first), or the dispatcher itself where numba would convert an argument or its
    internals are not as expected.  The entry point unboxes the arguments without checking their
    types, so :func:`run` keys it by everything those types depend on."""
    try:
        sig = tuple(dispatcher.typeof_pyval(a) for a in args)
        dispatcher.compile(sig)
        return dispatcher.overloads[sig].entry_point
    except Exception:        # numba's internals differ from the version this was written for
        return dispatcher
