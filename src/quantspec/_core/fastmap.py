"""The generic element-wise kernel of the fast path (numba; see :mod:`quantspec._core.fast`).

:func:`map_` computes ``y[i] = op(x[i], params of i)`` over a flat array, in parallel work items of
about ``lay.chunk`` elements (part of a long run, or a group of short ones).  Each work item is a
contiguous range of x and y; inside it, every run of elements that share one parameter entry (or
every row, for row layouts) is a plain ``for`` loop over contiguous memory that LLVM vectorises.
For large outputs the 64-byte-aligned middle of each work item is computed a buffer at a time and
written with streaming stores (:func:`quantspec._core.nbprim.stream_line`); each worker fences its
streamed stores once, at the end of its share of the work items.  A per-tensor operation (one run)
is streamed without work items: each worker takes one piece of whole output lines (:func:`_share`).

The element function is found at compile time from the classes of the two ``op`` records
(:func:`register`; each spec's kernel module registers its own), so every compiled kernel contains
one operation and no per-element branch on a mode.  Every kernel exists twice: parallel (numba's
thread pool) and a serial twin for small arrays (:func:`quantspec._core.nbprim.twin`).
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, prange, types
from numba.extending import overload

from .fast import ROWS_TOGETHER_FROM, STREAM_BUFFER, SegLayout
from .nbprim import (HARDWARE_FTZ, LINE, MXCSR_FTZ_DAZ, data_address, inline, mxcsr_get, mxcsr_set,
                     stream_fence, stream_line, twin)

__all__ = ["map_", "register", "threads", "KERNEL_SOURCES"]

#: every module whose element functions the compiled kernels inline (jit.py keys the on-disk cache
#: by their contents): this one, nbprim.py and these
KERNEL_SOURCES = ("fast.py", "../onnx/_fastkernels.py", "../onnx/fast.py", "../tf/_fastkernels.py",
                  "../tf/fast.py", "../litert/_fastkernels.py", "../litert/fast.py")

_JIT = {"fastmath": False, "error_model": "numpy"}
_OPS: dict[tuple, object] = {}
_FTZ: set[tuple] = set()


def _key(record):
    return record.instance_class if isinstance(record, types.BaseNamedTuple) else None


def register(key: tuple, op, flush_to_zero: bool = False) -> None:
    """Make ``op(v, prm, e0, e1)`` the element function for ``op`` records of classes ``key``
    (``(class of e0, class of e1)``; None for a record that is not a namedtuple).  ``prm`` is the
    tuple of the element's parameter values.  ``flush_to_zero``: run the element function with the
    x86 FTZ and DAZ modes on (``nbprim.HARDWARE_FTZ``; the function itself must flush where that is
    not available)."""
    _OPS[key] = op
    if flush_to_zero:
        _FTZ.add(key)


def _is(record, cls) -> bool:
    return isinstance(record, types.BaseNamedTuple) and record.instance_class is cls


def _take(prm, i):
    """Entry ``i`` of each parameter array, as a tuple."""


@overload(_take, inline="always", jit_options=_JIT)
def _ov_take(prm, i):
    n = len(prm)
    if n == 1:
        return lambda prm, i: (prm[0][i],)
    if n == 2:
        return lambda prm, i: (prm[0][i], prm[1][i])
    if n == 3:
        return lambda prm, i: (prm[0][i], prm[1][i], prm[2][i])
    if n == 4:
        return lambda prm, i: (prm[0][i], prm[1][i], prm[2][i], prm[3][i])


# -- the loops ----------------------------------------------------------------------------------
# Ranges are passed as indices into the whole arrays, not as slices: a slice is a new array object
# whose reference count numba maintains with atomic operations, which on short runs costs more than
# the run (and makes the threads contend for one cache line).  Indices are unsigned so that numba
# emits no negative-index wraparound, which would stop vectorisation.
def _unit(u, lay):
    """(first element, length) of unit ``u``: a run (SegLayout) or a row (RowLayout)."""


@overload(_unit, inline="always", jit_options=_JIT)
def _ov_unit(u, lay):
    if _is(lay, SegLayout):
        def run(u, lay):
            o = u // lay.nb
            k = u - o * lay.nb
            return (o * lay.D + k * lay.B) * lay.I, min(lay.B, lay.D - k * lay.B) * lay.I

        return run
    return lambda u, lay: (u * lay.L, lay.L)


@inline
def _work(w, lay):
    """The contiguous element range [a, b) of work item ``w``: part of one unit, or whole units."""
    if lay.nsub > 1:
        u = w // lay.nsub
        c0 = (w - u * lay.nsub) * lay.chunk
        start, length = _unit(u, lay)
        return start + c0, start + min(c0 + lay.chunk, length)
    u0 = w * lay.group
    u1 = min(u0 + lay.group, lay.units)
    first, _ = _unit(u0, lay)
    last, length = _unit(u1 - 1, lay)
    return first, last + length


@inline
def _run_of(a, lay):
    """(o, k) of the SegLayout run that holds element ``a``: its outer index and block."""
    per_o = lay.D * lay.I
    o = a // per_o
    return o, ((a - o * per_o) // lay.I) // lay.B


def _runs(x, dst, a, b, d0, prm, lay, e0, e1, buf):
    """SegLayout: the elements [a, b), run by run (each run's parameter entry taken once), each run by
    :func:`_one_run`: into ``dst[d0 + j]`` with ordinary stores, or (a stream buffer given) streamed."""


@overload(_runs, jit_options=_JIT)     # a call: one per work item
def _ov_runs(x, dst, a, b, d0, prm, lay, e0, e1, buf):
    key = (_key(e0), _key(e1))
    flush = key in _FTZ and HARDWARE_FTZ       # a constant of the closure: the other branch goes

    def runs(x, dst, a, b, d0, prm, lay, e0, e1, buf):
        if flush:
            mode = mxcsr_get()
            mxcsr_set(mode | MXCSR_FTZ_DAZ)
        # the runs follow one another in memory: for each o, ``full`` runs of ``span`` elements (the
        # blocks of B along D), then one of ``tail`` when B does not divide D; the parameter entry
        # steps by one a run, back to 0 at each new o when the parameters do not differ along O.
        # (One loop, one call of the inlined element loop, few live values: a run of 32 elements
        # costs what its loop's set-up does)
        o, k = _run_of(a, lay)
        full = np.uint64(lay.D // lay.B)
        span = np.uint64(lay.B * lay.I)
        tail = np.uint64((lay.D - lay.D // lay.B * lay.B) * lay.I)
        nb = np.uint64(lay.nb)
        k = np.uint64(k)
        start = np.uint64((o * lay.D) * lay.I) + k * span       # of run (o, k)
        p = np.uint64(o * lay.nb) * np.uint64(lay.Op) + k
        pos, stop, shift = np.uint64(a), np.uint64(b), np.uint64(d0 - a)    # dst index = x index + shift
        while pos < stop:
            length = span if k < full else tail
            end = min(start + length, stop)
            _one_run(x, dst, pos, end, shift + pos, _take(prm, p), e0, e1, buf)
            pos = end
            start += length
            k += np.uint64(1)
            p += np.uint64(1)
            if k == nb:
                k = np.uint64(0)
                p *= np.uint64(lay.Op)
        if flush:
            mxcsr_set(mode)

    return runs


def _one_run(x, dst, pos, end, d, pv, e0, e1, buf):
    """One run [pos, end) that shares the parameter values ``pv``: ``dst[d + j] = op(x[pos + j])``, or
    (a stream buffer given; then d == pos) streamed by :func:`_run`.  Chosen by the type of ``buf``."""


@overload(_one_run, inline="always", jit_options=_JIT)
def _ov_one_run(x, dst, pos, end, d, pv, e0, e1, buf):
    if not isinstance(buf, types.NoneType):
        return lambda x, dst, pos, end, d, pv, e0, e1, buf: _run(x, dst, np.uint64(pos), np.uint64(end), pv, e0, e1,
                                                                 buf)
    op = _OPS[(_key(e0), _key(e1))]

    def plain(x, dst, pos, end, d, pv, e0, e1, buf):
        xa, ya = np.uint64(pos), np.uint64(d)
        for j in range(np.uint64(end - pos)):
            dst[ya + j] = op(x[xa + j], pv, e0, e1)

    return plain


def _fill(x, dst, a, b, d0, prm, lay, e0, e1):
    """dst[d0 + j] = op(x[a + j]) for the elements [a, b), each with its own parameters; the inner
    ``for`` loops are what LLVM vectorises."""


@overload(_fill, jit_options=_JIT)     # a call: one per work item
def _ov_fill(x, dst, a, b, d0, prm, lay, e0, e1):
    key = (_key(e0), _key(e1))
    op = _OPS[key]
    flush = key in _FTZ and HARDWARE_FTZ       # a constant of the closures below: the other branch goes
    if _is(lay, SegLayout):
        return lambda x, dst, a, b, d0, prm, lay, e0, e1: _runs(x, dst, a, b, d0, prm, lay, e0, e1, None)

    # a row's parameters take this many bytes per element (a compile-time constant)
    per_element = sum(t.dtype.bitwidth // 8 for t in prm.types)

    def rows(x, dst, a, b, d0, prm, lay, e0, e1):
        if flush:
            mode = mxcsr_get()
            mxcsr_set(mode | MXCSR_FTZ_DAZ)
        L = lay.L
        # rows whose parameters outgrow L1 beside the streaming data: four rows that share them at
        # once, each parameter entry loaded once for the four (ROWS_TOGETHER_FROM)
        together = L * per_element >= ROWS_TOGETHER_FROM
        r = a // L
        pos = a
        while pos < b:
            first = r * L
            prow = (r // lay.D) * lay.Op * lay.nb + (r % lay.D) // lay.B
            if (together and pos == first and first + 4 * L <= b and r // lay.D == (r + 3) // lay.D
                    and (r % lay.D) // lay.B == ((r + 3) % lay.D) // lay.B):
                p = np.uint64(prow * L)
                n = np.uint64(L)
                xa, ya = np.uint64(pos), np.uint64(d0 + pos - a)
                for j in range(n):
                    pv = _take(prm, p + j)
                    dst[ya + j] = op(x[xa + j], pv, e0, e1)
                    dst[ya + n + j] = op(x[xa + n + j], pv, e0, e1)
                    dst[ya + 2 * n + j] = op(x[xa + 2 * n + j], pv, e0, e1)
                    dst[ya + 3 * n + j] = op(x[xa + 3 * n + j], pv, e0, e1)
                pos += 4 * L
                r += 4
                continue
            end = min(first + L, b)
            p = np.uint64(prow * L + pos - first)
            xa, ya = np.uint64(pos), np.uint64(d0 + pos - a)
            for j in range(np.uint64(end - pos)):
                dst[ya + j] = op(x[xa + j], _take(prm, p + j), e0, e1)
            pos = end
            r += 1
        if flush:
            mxcsr_set(mode)

    return rows


def _emit(x, y, a, b, prm, lay, e0, e1, buf):
    """Elements [a, b) of the output: stored directly, or (a stream buffer given, for large outputs)
    the 64-byte-aligned middle computed a buffer at a time and streamed out (nbprim.stream_line).
    Chosen at compile time by the type of ``buf``."""


@overload(_emit, inline="always", jit_options=_JIT)
def _ov_emit(x, y, a, b, prm, lay, e0, e1, buf):
    if isinstance(buf, types.NoneType):
        return lambda x, y, a, b, prm, lay, e0, e1, buf: _fill(x, y, a, b, a, prm, lay, e0, e1)
    return lambda x, y, a, b, prm, lay, e0, e1, buf: _stream(x, y, a, b, prm, lay, e0, e1, buf)


def _line(y):
    """Elements of ``y`` in one cache line, as a compile-time constant."""


@overload(_line, inline="always", jit_options=_JIT)
def _ov_line(y):
    n = LINE // y.dtype.bitwidth * 8
    return lambda y: n


def _stream(x, y, a, b, prm, lay, e0, e1, buf):
    """Elements [a, b) with streaming stores for every whole, aligned cache line of the output."""


@overload(_stream, jit_options=_JIT)     # a call: one per work item
def _ov_stream(x, y, a, b, prm, lay, e0, e1, buf):
    if _is(lay, SegLayout):
        # each run that shares one parameter entry, streamed (_run)
        return lambda x, y, a, b, prm, lay, e0, e1, buf: _runs(x, y, a, b, a, prm, lay, e0, e1, buf)

    def rows(x, y, a, b, prm, lay, e0, e1, buf):
        # rows whose parameters change along the row: a buffer of lines at a time
        step = buf.size
        size = y.itemsize
        addr = data_address(y) + np.uint64(a * size)
        head = b - a
        if b - a >= 2 * step:
            head = ((LINE - addr % LINE) % LINE) // size
        pos = a + head
        _fill(x, y, a, pos, a, prm, lay, e0, e1)
        while pos + step <= b:
            _fill(x, buf, pos, pos + step, 0, prm, lay, e0, e1)
            for c in range(0, step, LINE // size):
                stream_line(y, pos + c, buf, c)
            pos += step
        _fill(x, y, pos, b, pos, prm, lay, e0, e1)

    return rows


def _block(y):
    """Elements of ``y`` in one stream buffer (STREAM_BUFFER bytes), as a compile-time constant."""


@overload(_block, inline="always", jit_options=_JIT)
def _ov_block(y):
    n = max(STREAM_BUFFER, LINE) * 8 // y.dtype.bitwidth
    return lambda y: n


def _buffer(y, stream):
    """The per-worker stream buffer: None when ``stream`` is None."""


@overload(_buffer, inline="always", jit_options=_JIT)
def _ov_buffer(y, stream):
    if isinstance(stream, types.NoneType):
        return lambda y, stream: None
    return lambda y, stream: np.empty(_block(y), y.dtype)


@inline
def _items(x, y, prm, lay, e0, e1, buf, t, parts):
    """Worker ``t``'s share of the work items, one after the other."""
    for w in range(lay.work * t // parts, lay.work * (t + 1) // parts):
        a, b = _work(w, lay)
        _emit(x, y, a, b, prm, lay, e0, e1, buf)


def _share(x, y, prm, lay, e0, e1, buf, t, parts):
    """Worker ``t`` of ``parts``: its share of the work items, or, for one run streamed (per-tensor),
    its share of the whole lines of y in one piece (:func:`_flat`)."""


@overload(_share, inline="always", jit_options=_JIT)
def _ov_share(x, y, prm, lay, e0, e1, buf, t, parts):
    if not (_is(lay, SegLayout) and isinstance(buf, types.Array)):
        return lambda x, y, prm, lay, e0, e1, buf, t, parts: _items(x, y, prm, lay, e0, e1, buf, t, parts)

    def share(x, y, prm, lay, e0, e1, buf, t, parts):
        if lay.units != 1:
            _items(x, y, prm, lay, e0, e1, buf, t, parts)
            return
        # worker t: from line boundary t to line boundary t + 1 of y's whole lines (the first worker
        # from element 0, the last to the end)
        n = np.uint64(lay.D * lay.I)            # one run: O = nb = 1
        per = np.uint64(_line(y))
        lead = min(n, np.uint64(((LINE - data_address(y) % LINE) % LINE) // y.itemsize))
        lines = (n - lead) // per
        a = np.uint64(0) if t == 0 else lead + lines * np.uint64(t) // np.uint64(parts) * per
        b = n if t == parts - 1 else lead + lines * np.uint64(t + 1) // np.uint64(parts) * per
        _flat(x, y, a, b, prm, e0, e1, buf)

    return share


def _run(x, y, i, stop, pv, e0, e1, buf):
    """Elements [i, stop) that share the parameter values ``pv``, streamed: a head up to the first
    line boundary of y, whole stream buffers (computed into ``buf``, STREAM_BUFFER bytes, which stays
    in L1, and streamed out at once, so that reads and streamed writes interleave; a loop of constant
    length), the whole lines left, then a tail."""


@overload(_run, inline="always", jit_options=_JIT)
def _ov_run(x, y, i, stop, pv, e0, e1, buf):
    op = _OPS[(_key(e0), _key(e1))]

    def run(x, y, i, stop, pv, e0, e1, buf):
        n = np.uint64(_line(y))
        full = np.uint64(_block(y))
        size = np.uint64(LINE) // n
        head = min(stop - i, np.uint64(((LINE - (data_address(y) + i * size) % LINE) % LINE) // size))
        for j in range(head):
            y[i + j] = op(x[i + j], pv, e0, e1)
        i += head
        while i + full <= stop:
            for j in range(full):
                buf[j] = op(x[i + j], pv, e0, e1)
            for c in range(np.uint64(0), full, n):
                stream_line(y, i + c, buf, c)
            i += full
        m = (stop - i) // n * n
        for j in range(m):
            buf[j] = op(x[i + j], pv, e0, e1)
        for c in range(np.uint64(0), m, n):
            stream_line(y, i + c, buf, c)
        i += m
        for j in range(stop - i):
            y[i + j] = op(x[i + j], pv, e0, e1)

    return run


def _flat(x, y, a, b, prm, e0, e1, buf):
    """Elements [a, b) of a per-tensor operation (parameter entry 0), streamed (:func:`_run`)."""


@overload(_flat, jit_options=_JIT)     # a call: one per worker
def _ov_flat(x, y, a, b, prm, e0, e1, buf):
    key = (_key(e0), _key(e1))
    flush = key in _FTZ and HARDWARE_FTZ

    def flat(x, y, a, b, prm, e0, e1, buf):
        if flush:
            mode = mxcsr_get()
            mxcsr_set(mode | MXCSR_FTZ_DAZ)
        _run(x, y, np.uint64(a), np.uint64(b), _take(prm, 0), e0, e1, buf)
        if flush:
            mxcsr_set(mode)

    return flat


def _fence(stream):
    """After a worker's last streamed store (nbprim.stream_fence); nothing when not streaming."""


@overload(_fence, inline="always", jit_options=_JIT)
def _ov_fence(stream):
    if isinstance(stream, types.NoneType):
        return lambda stream: None
    return lambda stream: stream_fence()


def _map(x, y, prm, lay, e0, e1, stream, parts):
    """y = op(x) over the whole array in work items of about ``lay.chunk`` elements, split into
    ``parts`` contiguous shares, one per worker (numba's own split of a ``prange`` is the same
    static one; here each worker also allocates its stream buffer once and fences its streamed
    stores once, at the end of its share).

    ``prm``: a tuple of parameter arrays; ``lay``: SegLayout (runs that share one parameter entry:
    per-tensor, per-axis, blocked along the last axis) or RowLayout (rows whose parameters change
    along the row); ``(e0, e1)``: the operation (:func:`register`); ``stream``: None, or an (empty)
    array of y's type: write the output with streaming stores."""
    for t in prange(parts):
        buf = _buffer(y, stream)
        _share(x, y, prm, lay, e0, e1, buf, t, parts)
        _fence(stream)


def threads() -> int:
    """The workers of the parallel kernels (numba's thread count)."""
    return get_num_threads()


map_ = twin(_map)
