"""The generic element-wise kernel of the fast path (numba; see :mod:`quantspec._fastpath.runner`).

:data:`plain` computes ``y[i] = op(x[i], params of i)`` over a flat array, in work items of about
``lay.chunk`` elements (part of a long run, or a group of short ones) that the calling thread — and,
for large arrays, quantspec's helper threads (:mod:`quantspec._fastpath.pool`) — claim a few at a time.
The work items of one claim are one contiguous range of x and y; inside it, every run of elements
that share one parameter entry (or every row, for row layouts) is a plain ``for`` loop over
contiguous memory that LLVM vectorises.  :data:`streamed` is the same for large outputs: the
64-byte-aligned middle of each run is computed a buffer at a time and written with streaming stores
(:func:`quantspec._fastpath.nbprim.stream_line`), fenced once per claim.

The element function is found at compile time from the classes of the two ``op`` records
(:func:`register`; each spec's kernel module registers its own), so every compiled kernel contains
one operation and no per-element branch on a mode.

Compilation time.  numba types every function a kernel calls, and optimises the machine code of
each callee again inside every caller; a kernel built of a dozen nested helpers took about 2 s to
compile.  Here a thread's part of a call is one function (:func:`_share`), made for the operation,
the layout's class and whether the output is streamed, out of building blocks that numba copies
into it (``inline="always"``); the element operation itself is compiled once and always inlined by
LLVM (``forceinline``, :func:`_called`): about a third of that time.  The same compiled kernel runs
serial calls and every thread of a parallel one.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from .runner import ROWS_TOGETHER_FROM, STREAM_BUFFER, LongRowLayout, SegLayout
from .nbprim import (HARDWARE_FTZ, LINE, MXCSR_FTZ_DAZ, claim, data_address, finished, kernel, mxcsr_get,
                     mxcsr_set, stream_fence, stream_line)

__all__ = ["plain", "streamed", "register", "KERNEL_SOURCES"]

#: every module whose element functions the compiled kernels inline (jit.py keys the on-disk cache
#: by their contents): this one, nbprim.py and these
KERNEL_SOURCES = ("fast.py", "../onnx/_jitted.py", "../onnx/fast.py", "../tf/_jitted.py",
                  "../tf/fast.py", "../litert/_jitted.py", "../litert/fast.py")

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
    _OPS[key] = _called(op)
    if flush_to_zero:
        _FTZ.add(key)


def _called(op):
    """``op`` as a function of its own, compiled once per signature, which LLVM always inlines
    (``forceinline``): each place a loop calls it costs numba a call to type, not a copy of the
    operation to type again."""

    def call(v, prm, e0, e1):
        return op(v, prm, e0, e1)

    return njit(forceinline=True, **_JIT)(call)


def _is(record, cls) -> bool:
    return isinstance(record, types.BaseNamedTuple) and record.instance_class is cls


def _take(prm, i):
    """Entry ``i`` of each parameter array, as a tuple."""


@overload(_take, jit_options={**_JIT, "forceinline": True})
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
    if n == 5:
        return lambda prm, i: (prm[0][i], prm[1][i], prm[2][i], prm[3][i], prm[4][i])
    if n == 6:
        return lambda prm, i: (prm[0][i], prm[1][i], prm[2][i], prm[3][i], prm[4][i], prm[5][i])


def _inline(func):
    return njit(inline="always", **_JIT)(func)


# -- where the work is ---------------------------------------------------------------------------
# Ranges are indices into the whole arrays, not slices: a slice is a new array object whose
# reference count numba maintains with atomic operations, which on short runs costs more than the
# run (and makes the threads contend for one cache line).  Indices are unsigned so that numba emits
# no negative-index wraparound, which would stop vectorisation.
@_inline
def _seg_work(w, lay):
    """The contiguous element range [a, b) of work item ``w`` of a SegLayout: part of one run, or
    whole runs."""
    if lay.nsub > 1:
        u = w // lay.nsub
        c0 = (w - u * lay.nsub) * lay.chunk
        o = u // lay.nb
        k = u - o * lay.nb
        start = (o * lay.D + k * lay.B) * lay.I
        return start + c0, start + min(c0 + lay.chunk, min(lay.B, lay.D - k * lay.B) * lay.I)
    u0 = w * lay.group
    u1 = min(u0 + lay.group, lay.units) - 1
    o0 = u0 // lay.nb
    k0 = u0 - o0 * lay.nb
    o1 = u1 // lay.nb
    k1 = u1 - o1 * lay.nb
    return (o0 * lay.D + k0 * lay.B) * lay.I, (o1 * lay.D + k1 * lay.B) * lay.I + min(lay.B, lay.D - k1 * lay.B) * lay.I


@_inline
def _row_work(w, lay):
    """:func:`_seg_work` for a RowLayout (units are rows of ``lay.L``)."""
    if lay.nsub > 1:
        u = w // lay.nsub
        c0 = (w - u * lay.nsub) * lay.chunk
        return u * lay.L + c0, u * lay.L + min(c0 + lay.chunk, lay.L)
    u0 = w * lay.group
    return u0 * lay.L, min(u0 + lay.group, lay.units) * lay.L


def _line_elements(y) -> int:
    return LINE * 8 // y.dtype.bitwidth


def _block_elements(y) -> int:
    return max(STREAM_BUFFER, LINE) * 8 // y.dtype.bitwidth


# -- the loops, made for one element operation ------------------------------------------------------
_MADE: dict[tuple, object] = {}


def _made(kind: str, op, *constants):
    """The building block ``kind`` for ``op`` (made once per operation and constants)."""
    key = (kind, op, *constants)
    block = _MADE.get(key)
    if block is None:
        block = _MADE[key] = _MAKERS[kind](op, *constants)
    return block


def _make_runs(op, n, full, streamed):
    """SegLayout: the elements [a, b), run by run (each run's parameter entry taken once), into ``y``
    with ordinary stores, or (``streamed``) each run's 64-byte-aligned middle computed ``full``
    elements at a time into ``buf[off:]`` (STREAM_BUFFER bytes, which stay in L1) and streamed out
    at once, so that the loads of the input and the streamed stores interleave; ``n``: elements of
    y in a line."""

    @_inline
    def plain(x, y, i, end, pv, e0, e1, buf, off):
        for j in range(end - i):
            y[i + j] = op(x[i + j], pv, e0, e1)

    @_inline
    def streamed_run(x, y, i, end, pv, e0, e1, buf, off):
        size = np.uint64(LINE // n)
        base = data_address(y)
        off = np.uint64(off)
        while i < end:
            lead = ((np.uint64(LINE) - (base + i * size) % np.uint64(LINE)) % np.uint64(LINE)) // size
            if lead == 0 and end - i >= np.uint64(full):
                # a whole buffer: a loop of constant length, then streamed a line at a time
                for j in range(np.uint64(full)):
                    buf[off + j] = op(x[i + j], pv, e0, e1)
                for c in range(np.uint64(0), np.uint64(full), np.uint64(n)):
                    stream_line(y, i + c, buf, off + c)
                i += np.uint64(full)
                continue
            # the head up to the first line boundary, or what is left after the last whole buffer:
            # its whole lines streamed, the rest stored
            m = min(end - i, lead) if lead else end - i
            for j in range(m):
                buf[off + j] = op(x[i + j], pv, e0, e1)
            lines = np.uint64(0) if lead else m // np.uint64(n) * np.uint64(n)
            for c in range(np.uint64(0), lines, np.uint64(n)):
                stream_line(y, i + c, buf, off + c)
            for j in range(lines, m):
                y[i + j] = buf[off + j]
            i += m

    run = streamed_run if streamed else plain

    @_inline
    def runs(x, y, a, b, prm, lay, e0, e1, buf, off):
        # the runs follow one another in memory: for each o, ``whole`` runs of ``span`` elements
        # (the blocks of B along D), then one of ``tail`` when B does not divide D; the parameter
        # entry steps by one a run, back to 0 at each new o when the parameters do not differ
        # along O.  (One loop, one copy of the element loop, few live values: a run of 32 elements
        # costs what its loop's set-up does)
        per_o = lay.D * lay.I
        o = a // per_o
        k = np.uint64(((a - o * per_o) // lay.I) // lay.B)
        whole = np.uint64(lay.D // lay.B)
        span = np.uint64(lay.B * lay.I)
        tail = np.uint64((lay.D - lay.D // lay.B * lay.B) * lay.I)
        nb = np.uint64(lay.nb)
        start = np.uint64((o * lay.D) * lay.I) + k * span       # of run (o, k)
        p = np.uint64(o * lay.nb) * np.uint64(lay.Op) + k
        pos, stop = np.uint64(a), np.uint64(b)
        while pos < stop:
            length = span if k < whole else tail
            end = min(start + length, stop)
            run(x, y, pos, end, _take(prm, p), e0, e1, buf, off)
            pos = end
            start += length
            k += np.uint64(1)
            p += np.uint64(1)
            if k == nb:
                k = np.uint64(0)
                p *= np.uint64(lay.Op)

    return runs


def _make_rows(op, per_element, long_rows):
    """RowLayout: ``dst[d0 + j] = op(x[a + j])`` for the elements [a, b), each with its own
    parameters.  Long rows (LongRowLayout) whose parameters outgrow L1 beside the streaming data
    are taken four at once where they share a parameter row, each parameter entry loaded once for
    the four (ROWS_TOGETHER_FROM; ``per_element``: bytes of parameters an element); shorter rows'
    kernels do without that branch."""

    @_inline
    def row(x, dst, pos, end, first, prow, d0, a, prm, lay, e0, e1):
        """Elements [pos, end) of the row that starts at ``first``."""
        p = np.uint64(prow * lay.L + pos - first)
        xa, ya = np.uint64(pos), np.uint64(d0 + pos - a)
        for j in range(np.uint64(end - pos)):
            dst[ya + j] = op(x[xa + j], _take(prm, p + j), e0, e1)

    if not long_rows:
        @_inline
        def rows(x, dst, a, b, d0, prm, lay, e0, e1):
            L = lay.L
            r = a // L
            pos = a
            while pos < b:
                first = r * L
                end = min(first + L, b)
                row(x, dst, pos, end, first, (r // lay.D) * lay.Op * lay.nb + (r % lay.D) // lay.B, d0, a, prm,
                    lay, e0, e1)
                pos = end
                r += 1

        return rows

    @_inline
    def long(x, dst, a, b, d0, prm, lay, e0, e1):
        L = lay.L
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
            row(x, dst, pos, end, first, prow, d0, a, prm, lay, e0, e1)
            pos = end
            r += 1

    return long




# -- a thread's part of a call ------------------------------------------------------------------------
def _share(x, y, prm, lay, e0, e1, claims, step):
    """The work items this thread claims, ``step`` at a time, from ``claims`` (quantspec._fastpath.pool),
    with ordinary stores; the number of work items finished when none are left to claim.  Runs the
    element operation with FTZ/DAZ set where it was registered so."""


def _share_streamed(x, y, prm, lay, e0, e1, claims, step):
    """:func:`_share` writing the output with streaming stores (y must be aligned to its element
    size), through a stream buffer of STREAM_BUFFER bytes; fences its streamed stores before it
    counts them finished."""


def _flush(key) -> bool:
    return key in _FTZ and HARDWARE_FTZ       # a constant of the closures: the other branch goes


@overload(_share, jit_options=_JIT)
def _ov_share(x, y, prm, lay, e0, e1, claims, step):
    key = (_key(e0), _key(e1))
    op, flush = _OPS[key], _flush(key)
    if _is(lay, SegLayout):
        runs = _made("runs", op, _line_elements(y), _block_elements(y), False)

        def seg(x, y, prm, lay, e0, e1, claims, step):
            if flush:
                mode = mxcsr_get()
                mxcsr_set(mode | MXCSR_FTZ_DAZ)
            while True:
                w0 = claim(claims, step)
                if w0 >= lay.work:
                    break
                w1 = min(w0 + step, lay.work)
                a, _ = _seg_work(w0, lay)
                _, b = _seg_work(w1 - 1, lay)
                runs(x, y, a, b, prm, lay, e0, e1, y, 0)
                finished(claims, w1 - w0)
            if flush:
                mxcsr_set(mode)
            return finished(claims, 0)

        return seg
    rows = _made("rows", op, sum(p.dtype.bitwidth // 8 for p in prm.types), _is(lay, LongRowLayout))

    def row(x, y, prm, lay, e0, e1, claims, step):
        if flush:
            mode = mxcsr_get()
            mxcsr_set(mode | MXCSR_FTZ_DAZ)
        while True:
            w0 = claim(claims, step)
            if w0 >= lay.work:
                break
            w1 = min(w0 + step, lay.work)
            a, _ = _row_work(w0, lay)
            _, b = _row_work(w1 - 1, lay)
            rows(x, y, a, b, a, prm, lay, e0, e1)
            finished(claims, w1 - w0)
        if flush:
            mxcsr_set(mode)
        return finished(claims, 0)

    return row


@overload(_share_streamed, jit_options=_JIT)
def _ov_share_streamed(x, y, prm, lay, e0, e1, claims, step):
    key = (_key(e0), _key(e1))
    op, flush = _OPS[key], _flush(key)
    n, full = _line_elements(y), _block_elements(y)
    if _is(lay, SegLayout):
        runs = _made("runs", op, n, full, True)

        def seg(x, y, prm, lay, e0, e1, claims, step):
            if flush:
                mode = mxcsr_get()
                mxcsr_set(mode | MXCSR_FTZ_DAZ)
            buf = np.empty(full, y.dtype)
            while True:
                w0 = claim(claims, step)
                if w0 >= lay.work:
                    break
                w1 = min(w0 + step, lay.work)
                a, _ = _seg_work(w0, lay)
                _, b = _seg_work(w1 - 1, lay)
                runs(x, y, a, b, prm, lay, e0, e1, buf, 0)
                stream_fence()
                finished(claims, w1 - w0)
            if flush:
                mxcsr_set(mode)
            return finished(claims, 0)

        return seg
    rows = _made("rows", op, sum(p.dtype.bitwidth // 8 for p in prm.types), _is(lay, LongRowLayout))

    def row(x, y, prm, lay, e0, e1, claims, step):
        if flush:
            mode = mxcsr_get()
            mxcsr_set(mode | MXCSR_FTZ_DAZ)
        buf = np.empty(full, y.dtype)
        base = data_address(y)
        while True:
            w0 = claim(claims, step)
            if w0 >= lay.work:
                break
            w1 = min(w0 + step, lay.work)
            a, _ = _row_work(w0, lay)
            _, b = _row_work(w1 - 1, lay)
            # a buffer of whole lines at a time (the head up to the first line boundary, and the
            # tail, through the buffer too, stored)
            pos = a
            while pos < b:
                lead = ((LINE - np.int64((base + np.uint64(pos * y.itemsize)) % np.uint64(LINE))) % LINE) // y.itemsize
                m = min(b - pos, lead if lead else full)
                rows(x, buf, pos, pos + m, 0, prm, lay, e0, e1)
                whole = 0 if lead else m // n * n
                for c in range(0, whole, n):
                    stream_line(y, pos + c, buf, c)
                for j in range(whole, m):
                    y[pos + j] = buf[j]
                pos += m
            stream_fence()
            finished(claims, w1 - w0)
        if flush:
            mxcsr_set(mode)
        return finished(claims, 0)

    return row


# -- the kernels -------------------------------------------------------------------------------------
def _plain(x, y, prm, lay, e0, e1, claims, step):
    """y = op(x) over the work items this thread claims (:func:`_share`): called by the calling thread
    alone (serial: ``step`` = all the work items), or by it and the pool's helpers at once
    (quantspec._fastpath.pool).

    ``prm``: a tuple of parameter arrays; ``lay``: SegLayout (runs that share one parameter entry:
    per-tensor, per-axis, blocked along the last axis) or RowLayout (rows whose parameters change
    along the row); ``(e0, e1)``: the operation (:func:`register`); ``claims``: the work counter."""
    return _share(x, y, prm, lay, e0, e1, claims, step)


def _streamed(x, y, prm, lay, e0, e1, claims, step):
    """:func:`_plain` with streaming stores (:func:`_share_streamed`)."""
    return _share_streamed(x, y, prm, lay, e0, e1, claims, step)


plain = kernel(_plain)
streamed = kernel(_streamed)


def _fill(x, y, a, b, d0, prm, lay, e0, e1):
    """``y[d0 + j] = op(x[a + j])`` for the elements [a, b), ordinary stores (SegLayout: d0 == a); a
    range anywhere (tests call it on ranges the kernels never hand out)."""


@overload(_fill, jit_options=_JIT)
def _ov_fill(x, y, a, b, d0, prm, lay, e0, e1):
    op = _OPS[(_key(e0), _key(e1))]
    if _is(lay, SegLayout):
        runs = _made("runs", op, _line_elements(y), _block_elements(y), False)
        return lambda x, y, a, b, d0, prm, lay, e0, e1: runs(x, y, a, b, prm, lay, e0, e1, y, 0)
    rows = _made("rows", op, sum(p.dtype.bitwidth // 8 for p in prm.types), _is(lay, LongRowLayout))
    return lambda x, y, a, b, d0, prm, lay, e0, e1: rows(x, y, a, b, d0, prm, lay, e0, e1)


_MAKERS = {"runs": _make_runs, "rows": _make_rows}
