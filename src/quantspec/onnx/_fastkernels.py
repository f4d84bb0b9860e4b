"""numba kernels of ONNX QuantizeLinear / DequantizeLinear (the fast path; see :mod:`.fast`).

Imported only through :func:`quantspec._core.jit.load`, on the first call that needs it.

Each kernel walks x in one of two layouts (:func:`quantspec.onnx.fast._layout`):

- ``seg``: runs of contiguous elements sharing one scale and zero point (per-tensor: one run;
  per-axis: one run per channel slice; blocked along the last axis: one run per block);
- ``row``: rows whose scale changes along the row (blocked along another axis; per-axis with short
  runs, against the scale repeated along the run).

The unit of parallel work is a chunk of about ``fast.CHUNK`` elements (part of a long run, or a group
of short ones); each worker runs a plain inner loop over contiguous memory that LLVM vectorises.
Which operation the inner loop performs is chosen at compile time by the *class* of the record
arguments (``quot``, ``cfg``, ``dec``, ``lay``; :mod:`.fast` defines them), so each compiled kernel
contains one operation only and no per-element branch on the mode.  Every kernel exists twice: a
parallel one (``prange`` on numba's thread pool) and a serial twin for small arrays, which would
otherwise pay more for waking the pool than for the work.
"""

from __future__ import annotations

import numpy as np
from numba import prange, types
from numba.extending import overload

from .._core.nbprim import (LINE, data_address, f32_bits, function, iadd, iand, inline, isub, ixor, kernel,
                            narrow_code, round_bf16, round_f16, stream_fence, stream_line, twin, uand, uor, ushr)
from .fast import Q32, QBF16, QF16, DecInt, DecLut, Float, FloatZp, IntMlas, IntPlain, SegLayout

__all__ = ["map_", "q_ort_edges", "STREAM_BLOCK"]

#: files besides this one and nbprim.py whose content the compiled kernels depend on (jit.py)
KERNEL_SOURCES = ("fast.py",)

#: bytes a parallel worker computes into its buffer before streaming them out
STREAM_BLOCK = 1024

_JIT = {"fastmath": False, "error_model": "numpy"}
_I32_MIN = -2147483648
_TWO31 = 2147483648.0


def _is(record, cls) -> bool:
    return isinstance(record, types.BaseNamedTuple) and record.instance_class is cls


# -- the element operations ----------------------------------------------------------------------
# Each is a small function inlined into the loop; _op() picks the one for the argument types at
# compile time.  (Kept flat on purpose: numba inlines by copying IR, and the typing time of nested
# inlined functions grows with their depth.)
@inline
def _div32(v, s):
    return v / s


@inline
def _div16(v, s):
    return round_f16(round_f16(v) / s)


@inline
def _divbf16(v, s):
    return round_bf16(round_bf16(v) / s)


@inline
def _mlas(q, zi, zf, cfg):
    """Integer output, clamped in float: clip(rint(q) + zp) with NaN -> qmin (spec; onnxruntime MLAS)."""
    lo = np.float32(isub(cfg.qmin, zi))
    hi = np.float32(isub(cfg.qmax, zi))
    q = lo if not (q >= lo) else q          # NaN -> lo
    q = hi if q > hi else q
    return iand(iadd(np.int32(np.rint(q)), zi), cfg.mask)


@inline
def _plain(q, zi, zf, cfg):
    """Integer output as onnxruntime's plain loop: the x86 int32 conversion, an int32 wrap, a clip."""
    r = np.rint(q)
    # x86 cvttss2si: NaN, ±inf and values outside the int32 range become INT32_MIN
    inside = np.int64((r >= -_TWO31) & (r < _TWO31))
    i = np.int64(min(max(r, -_TWO31), _TWO31 - 128.0))     # a defined conversion for every lane
    i = _I32_MIN + (i - _I32_MIN) * inside
    i = np.int64(np.int32(i + zi))             # int32 wrap
    i = min(max(i, cfg.qmin), cfg.qmax)
    return np.int32(i) & np.int32(cfg.mask)


@inline
def _narrow(q, zi, zf, cfg):
    """A float8/float6/float4 output (nbprim.narrow_code), with onnxruntime's window rule."""
    code = narrow_code(q, cfg.mant, cfg.emin, cfg.bias, cfg.maxmag, cfg.overmag, cfg.nanbits,
                       cfg.nansigned != 0, cfg.fnuz != 0, cfg.signpos)
    a = abs(q)
    window = (a >= np.float32(cfg.wlo)) & (a < np.float32(cfg.whi))
    return uor(uand(ushr(f32_bits(q), 24), 0x80), cfg.wcode) if window else code


@inline
def _narrow_zp(q, zi, zf, cfg):
    """float4/float6 with a zero point: q + zp in float64, NaN -> +max, rounded exactly to the grid
    (magnitudes first limited to 2**10, far beyond every such format, so they still overflow)."""
    t = np.float64(q) + zf
    if t != t:
        return np.uint32(cfg.maxmag)
    a = min(abs(t), 1024.0)
    e = np.int64(cfg.emin)
    while e < 10 and a >= 2.0 ** (e + 1):     # the binade of a; below 2**emin the subnormal quantum
        e += 1
    quantum = 2.0 ** (e - cfg.mant)
    r = np.float32(np.copysign(np.rint(a / quantum) * quantum, t))   # exact: at most 4 significant bits
    return narrow_code(r, cfg.mant, cfg.emin, cfg.bias, cfg.maxmag, cfg.overmag, cfg.nanbits,
                       cfg.nansigned != 0, cfg.fnuz != 0, cfg.signpos)


@inline
def _dq_int(u, s, zi, zf, lut, dec):
    """DequantizeLinear of an integer code: sign-extend, subtract the zero point, times the scale."""
    v = isub(ixor(iand(u, dec.mask), dec.half), dec.half)
    return np.float32(isub(v, zi)) * s       # x - zp: exact, except int32, where it wraps like onnxruntime


@inline
def _dq_lut(u, s, zi, zf, lut, dec):
    """DequantizeLinear of a float code: its value (table), minus the zero point, times the scale."""
    return (lut[np.int64(u) & dec.mask] - zf) * s


def _compose(div, out):
    @inline
    def q(v, s, zi, zf, quot, cfg):
        return out(div(v, s), zi, zf, cfg)

    return q


_DIVS = {Q32: _div32, QF16: _div16, QBF16: _divbf16}
_OUTS = {IntMlas: _mlas, IntPlain: _plain, Float: _narrow, FloatZp: _narrow_zp}
_Q_OPS = {(d, o): _compose(_DIVS[d], _OUTS[o]) for d in _DIVS for o in _OUTS}
_DQ_OPS = {DecInt: _dq_int, DecLut: _dq_lut}


def _op(e0, e1):
    """The element function for the operation ``(e0, e1)``: ``(quot, cfg)`` for QuantizeLinear,
    ``(lut, dec)`` for DequantizeLinear; called as ``op(v, scale, int zp, float zp, e0, e1)``."""
    kind = e1.instance_class
    if kind in _DQ_OPS:
        return _DQ_OPS[kind]
    return _Q_OPS[(e0.instance_class, kind)]


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


def _fill(x, dst, a, b, d0, s, zi, zf, lay, e0, e1):
    """dst[d0 + j] = op(x[a + j]) for the elements [a, b), each with its own parameters; the inner
    ``for`` loops are what LLVM vectorises."""


@overload(_fill, jit_options=_JIT)     # a call: one per work item
def _ov_fill(x, dst, a, b, d0, s, zi, zf, lay, e0, e1):
    op = _op(e0, e1)
    if _is(lay, SegLayout):
        def runs(x, dst, a, b, d0, s, zi, zf, lay, e0, e1):
            per_o = lay.D * lay.I
            o = a // per_o
            k = ((a - o * per_o) // lay.I) // lay.B
            pos = a
            while pos < b:
                start = (o * lay.D + k * lay.B) * lay.I
                end = min(start + min(lay.B, lay.D - k * lay.B) * lay.I, b)
                p = o * lay.nb + k if lay.Op else k
                sv, ziv, zfv = s[p], zi[p], zf[p]
                xa, ya = np.uint64(pos), np.uint64(d0 + pos - a)
                for j in range(np.uint64(end - pos)):
                    dst[ya + j] = op(x[xa + j], sv, ziv, zfv, e0, e1)
                pos = end
                k += 1
                if k == lay.nb:
                    k = 0
                    o += 1

        return runs

    def rows(x, dst, a, b, d0, s, zi, zf, lay, e0, e1):
        r = a // lay.L
        pos = a
        while pos < b:
            first = r * lay.L
            end = min(first + lay.L, b)
            p = np.uint64(((r // lay.D) * lay.Op * lay.nb + (r % lay.D) // lay.B) * lay.L + pos - first)
            xa, ya = np.uint64(pos), np.uint64(d0 + pos - a)
            for j in range(np.uint64(end - pos)):
                dst[ya + j] = op(x[xa + j], s[p + j], zi[p + j], zf[p + j], e0, e1)
            pos = end
            r += 1

    return rows


def _emit(x, y, a, b, s, zi, zf, lay, e0, e1, buf):
    """Elements [a, b) of the output: stored directly, or (a stream buffer given, for large outputs)
    the 64-byte-aligned middle computed a buffer at a time and streamed out (nbprim.stream_line).
    Chosen at compile time by the type of ``buf``."""


@overload(_emit, inline="always", jit_options=_JIT)
def _ov_emit(x, y, a, b, s, zi, zf, lay, e0, e1, buf):
    if isinstance(buf, types.NoneType):
        return lambda x, y, a, b, s, zi, zf, lay, e0, e1, buf: _fill(x, y, a, b, a, s, zi, zf, lay, e0, e1)
    return lambda x, y, a, b, s, zi, zf, lay, e0, e1, buf: _stream(x, y, a, b, s, zi, zf, lay, e0, e1, buf)


@function
def _stream(x, y, a, b, s, zi, zf, lay, e0, e1, buf):
    step = buf.size
    size = y.itemsize
    addr = data_address(y) + np.uint64(a * size)
    head = b - a
    if addr % size == 0 and b - a >= 2 * step:
        head = ((LINE - addr % LINE) % LINE) // size
    pos = a + head
    _fill(x, y, a, pos, a, s, zi, zf, lay, e0, e1)
    while pos + step <= b:
        _fill(x, buf, pos, pos + step, 0, s, zi, zf, lay, e0, e1)
        for c in range(0, step, LINE // size):
            stream_line(y, pos + c, buf, c)
        pos += step
    _fill(x, y, pos, b, pos, s, zi, zf, lay, e0, e1)
    stream_fence()


def _buffer(y, stream):
    """The per-worker stream buffer: None when ``stream`` is None."""


@overload(_buffer, inline="always", jit_options=_JIT)
def _ov_buffer(y, stream):
    if isinstance(stream, types.NoneType):
        return lambda y, stream: None
    return lambda y, stream: np.empty(STREAM_BLOCK // y.itemsize, y.dtype)


def _map(x, y, s, zi, zf, lay, e0, e1, stream):
    """y = op(x) over the whole array, one work item of about ``lay.chunk`` elements per task.

    ``lay``: SegLayout (runs that share one parameter: per-tensor, per-axis, blocked along the last
    axis) or RowLayout (rows whose parameters change along the row); ``(e0, e1)``: the
    operation, ``(quot, cfg)`` or ``(lut, dec)`` (see :func:`_op`); ``stream``: None, or
    an empty array of y's type to stream large outputs."""
    for w in prange(lay.work):
        a, b = _work(w, lay)
        _emit(x, y, a, b, s, zi, zf, lay, e0, e1, _buffer(y, stream))


@kernel(parallel=True)
def q_ort_edges(x, y, s, zi, full, dl, bl, cfg):
    """onnxruntime 4-bit: recompute the odd-aligned head and tail element of every slice (rows of
    ``dl`` elements cut into slices of ``bl``) with the plain loop (kernels._ort_plain_mask)."""
    n = x.size
    per_row = (dl + bl - 1) // bl
    for j in prange((n // dl) * per_row):
        r = j // per_row
        start = r * dl + (j - r * per_row) * bl
        end = min(start + bl, r * dl + dl)
        if start % 2 == 1:
            _q_fix(x, y, s, zi, full, start, cfg)
        if end % 2 == 1:
            _q_fix(x, y, s, zi, full, end - 1, cfg)


@inline
def _q_fix(x, y, s, zi, full, p, cfg):
    """Recompute element ``p`` with the parameters the compact layout ``full`` gives it."""
    o = p // (full.D * full.I)
    d = (p // full.I) % full.D
    k = o * full.Op * full.nb + d // full.B
    y[p] = _plain(x[p] / s[k], zi[k], 0.0, cfg)


map_ = twin(_map)
