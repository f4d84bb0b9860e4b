"""numba kernels of ONNX QuantizeLinear / DequantizeLinear (the fast path; see :mod:`.fast`).

Imported only through :func:`quantspec._core.jit.load`, on the first call that needs it.

Each kernel walks x in one of two layouts (:func:`quantspec.onnx.fast._layout`):

- ``seg``: runs of contiguous elements sharing one scale and zero point (per-tensor: one run;
  per-axis: one run per channel slice; blocked along the last axis: one run per block);
- ``row``: rows whose scale changes along the row (blocked along another axis; per-axis with short
  runs, against the scale repeated along the run).

The unit of parallel work is a chunk of about :data:`CHUNK` elements (part of a long run, or a group
of short ones); each worker runs a plain inner loop over contiguous memory that LLVM vectorises.
Which operation the inner loop performs is chosen at compile time by the *class* of the record
arguments (``quot``, ``cfg``, ``dec``, ``enc``; :mod:`.fast` defines them), so each compiled kernel
contains one operation only and no per-element branch on the mode.  Every kernel exists twice: a
parallel one (``prange`` on numba's thread pool) and a serial twin for small arrays, which would
otherwise pay more for waking the pool than for the work.
"""

from __future__ import annotations

import types as pytypes

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from .._core.nbprim import bf16_code, f16_code, f32_bits, iadd, iand, isub, ixor, narrow_code, round_to, uand, uor, ushr
from .fast import (CHUNK, Q32, QP, DecInt, DecLut, EncBF16, EncF16, EncF32, Float, FloatZp, IntMlas,
                   IntPlain)

__all__ = ["q_seg", "q_row", "q_ort_edges", "dq_seg", "dq_row"]

_I32_MIN = -2147483648
_TWO31 = 2147483648.0


def _twin(py_func):
    """``parallel -> dispatcher``: the function compiled with ``parallel=True`` and a serial twin.

    The twin is a copy of the function under another name, so that numba's on-disk cache (keyed by
    the function's qualified name) keeps the two apart."""
    par = njit(parallel=True, fastmath=False, cache=True, nogil=True)(py_func)
    copy = pytypes.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_serial",
                                py_func.__defaults__, py_func.__closure__)
    copy.__qualname__ = py_func.__qualname__ + "_serial"
    copy.__doc__ = py_func.__doc__
    ser = njit(fastmath=False, cache=True, nogil=True)(copy)

    def pick(parallel: bool):
        return par if parallel else ser

    pick.parallel, pick.serial = par, ser
    return pick


def _is(record, cls) -> bool:
    return isinstance(record, types.BaseNamedTuple) and record.instance_class is cls


# -- the element operations, chosen by the record classes ---------------------------------------
def _quotient(v, s, quot):
    """x / s in the division precision."""


@overload(_quotient, inline="always")
def _ov_quotient(v, s, quot):
    if _is(quot, Q32):
        return lambda v, s, quot: v / s
    if _is(quot, QP):
        return lambda v, s, quot: round_to(round_to(v, quot.p) / s, quot.p)


def _grid64(v, cfg):
    """float64 ``v`` rounded exactly (ties to even) to the grid of a float4/float6 format, returned as
    float32 (exact: the grid value has at most 4 significant bits); magnitudes are first limited to
    2**10, far beyond every such format's range, so that the result still overflows."""


@overload(_grid64, inline="always")
def _ov_grid64(v, cfg):
    def impl(v, cfg):
        a = min(abs(v), 1024.0)
        e = np.int64(cfg.emin)
        # exponent of a (a >= 2**emin); below that the subnormal quantum applies
        while e < 10 and a >= 2.0 ** (e + 1):
            e += 1
        quantum = 2.0 ** (e - cfg.mant)
        r = np.float32(np.rint(a / quantum) * quantum)
        return np.float32(np.copysign(np.float64(r), v))

    return impl


def _q_elem(v, s, zi, zf, quot, cfg):
    """One QuantizeLinear element: float32 ``v`` -> the output code."""


@overload(_q_elem, inline="always")
def _ov_q_elem(v, s, zi, zf, quot, cfg):
    if _is(cfg, IntMlas):
        def mlas(v, s, zi, zf, quot, cfg):
            q = _quotient(v, s, quot)
            lo = np.float32(isub(cfg.qmin, zi))
            hi = np.float32(isub(cfg.qmax, zi))
            q = lo if not (q >= lo) else q          # NaN -> lo
            q = hi if q > hi else q
            return iand(iadd(np.int32(np.rint(q)), zi), cfg.mask)

        return mlas
    if _is(cfg, IntPlain):
        def plain(v, s, zi, zf, quot, cfg):
            r = np.rint(_quotient(v, s, quot))
            # x86 cvttss2si: NaN, ±inf and values outside the int32 range become INT32_MIN
            inside = np.int64((r >= -_TWO31) & (r < _TWO31))
            i = np.int64(min(max(r, -_TWO31), _TWO31 - 128.0))     # a defined conversion for every lane
            i = _I32_MIN + (i - _I32_MIN) * inside
            i = np.int64(np.int32(i + zi))             # int32 wrap
            i = min(max(i, cfg.qmin), cfg.qmax)
            return np.int32(i) & np.int32(cfg.mask)

        return plain
    if _is(cfg, Float):
        def narrow(v, s, zi, zf, quot, cfg):
            q = _quotient(v, s, quot)
            code = narrow_code(q, cfg.mant, cfg.emin, cfg.bias, cfg.maxmag, cfg.overmag, cfg.nanbits,
                               cfg.nansigned != 0, cfg.fnuz != 0, cfg.signpos)
            a = abs(q)
            window = (a >= cfg.wlo) & (a < cfg.whi)
            return uor(uand(ushr(f32_bits(q), 24), 0x80), cfg.wcode) if window else code

        return narrow
    if _is(cfg, FloatZp):
        def narrow_zp(v, s, zi, zf, quot, cfg):
            t = np.float64(_quotient(v, s, quot)) + zf
            if t != t:                                   # NaN -> +max (float4 / float6)
                return np.uint32(cfg.maxmag)
            return narrow_code(_grid64(t, cfg), cfg.mant, cfg.emin, cfg.bias, cfg.maxmag, cfg.overmag,
                               cfg.nanbits, cfg.nansigned != 0, cfg.fnuz != 0, cfg.signpos)

        return narrow_zp


def _dq_elem(u, s, zi, zf, lut, dec, enc):
    """One DequantizeLinear element: the input code ``u`` -> the stored output value."""


@njit(inline="always")
def _decode_int(u, zi, zf, lut, dec):
    v = isub(ixor(iand(u, dec.mask), dec.half), dec.half)     # sign-extend the code
    return np.float32(isub(v, zi))         # x - zp: exact, except int32, where it wraps like onnxruntime


@njit(inline="always")
def _decode_lut(u, zi, zf, lut, dec):
    return lut[np.int64(u) & dec.mask] - zf


@overload(_dq_elem, inline="always")
def _ov_dq_elem(u, s, zi, zf, lut, dec, enc):
    decode = _decode_int if _is(dec, DecInt) else _decode_lut
    if _is(enc, EncF32):
        return lambda u, s, zi, zf, lut, dec, enc: decode(u, zi, zf, lut, dec) * s
    if _is(enc, EncF16):
        return lambda u, s, zi, zf, lut, dec, enc: f16_code(decode(u, zi, zf, lut, dec) * s)
    if _is(enc, EncBF16):
        return lambda u, s, zi, zf, lut, dec, enc: bf16_code(decode(u, zi, zf, lut, dec) * s)


# -- the loops ----------------------------------------------------------------------------------
@njit(inline="always")
def _span(w, lay, units):
    """Work item ``w``: units [u0, u1) and, within each, elements [c0, c1)."""
    if lay.nsub > 1:
        u = w // lay.nsub
        c0 = (w - u * lay.nsub) * CHUNK
        return u, u + 1, c0, c0 + CHUNK
    u0 = w * lay.group
    return u0, min(u0 + lay.group, units), 0, lay.L


@njit(inline="always")
def _q_run(xs, ys, s, zi, zf, quot, cfg):
    for i in range(xs.size):
        ys[i] = _q_elem(xs[i], s, zi, zf, quot, cfg)


@njit(inline="always")
def _q_run_v(xs, ys, ss, zis, zfs, quot, cfg):
    for i in range(xs.size):
        ys[i] = _q_elem(xs[i], ss[i], zis[i], zfs[i], quot, cfg)


def _q_seg(x, y, s, zi, zf, lay, quot, cfg):
    """QuantizeLinear over runs that share one parameter."""
    for w in prange(lay.work):
        u0, u1, c0, c1 = _span(w, lay, lay.O * lay.nb)
        for seg in range(u0, u1):
            o = seg // lay.nb
            k = seg - o * lay.nb
            start = (o * lay.D + k * lay.B) * lay.I
            a = start + c0
            b = start + min(c1, min(lay.B, lay.D - k * lay.B) * lay.I)
            if a < b:
                p = seg if lay.Op else k
                _q_run(x[a:b], y[a:b], s[p], zi[p], zf[p], quot, cfg)


def _q_row(x, y, s, zi, zf, lay, quot, cfg):
    """QuantizeLinear over rows whose parameters change along the row."""
    for w in prange(lay.work):
        r0, r1, c0, c1 = _span(w, lay, lay.O * lay.D)
        for r in range(r0, r1):
            a = r * lay.L + c0
            b = r * lay.L + min(c1, lay.L)
            if a < b:
                p = ((r // lay.D) * lay.Op * lay.nb + (r % lay.D) // lay.B) * lay.L + c0
                m = b - a
                _q_run_v(x[a:b], y[a:b], s[p:p + m], zi[p:p + m], zf[p:p + m], quot, cfg)


@njit(parallel=True, fastmath=False, cache=True, nogil=True)
def q_ort_edges(x, y, s, zi, full, dl, bl, cfg):
    """onnxruntime 4-bit: recompute the odd-aligned head and tail element of every slice (rows of
    ``dl`` elements cut into slices of ``bl``) with the plain loop (kernels._ort_plain_mask)."""
    n = x.size
    per_row = (dl + bl - 1) // bl
    q32 = Q32(0)
    for j in prange((n // dl) * per_row):
        r = j // per_row
        start = r * dl + (j - r * per_row) * bl
        end = min(start + bl, r * dl + dl)
        if start % 2 == 1:
            _q_fix(x, y, s, zi, full, start, q32, cfg)
        if end % 2 == 1:
            _q_fix(x, y, s, zi, full, end - 1, q32, cfg)


@njit(inline="always")
def _q_fix(x, y, s, zi, full, p, quot, cfg):
    """Recompute element ``p`` with the parameters the compact layout ``full`` gives it."""
    o = p // (full.D * full.I)
    d = (p // full.I) % full.D
    k = o * full.Op * full.nb + d // full.B
    y[p] = _q_elem(x[p], s[k], zi[k], 0.0, quot, cfg)


@njit(inline="always")
def _dq_run(xs, ys, s, zi, zf, lut, dec, enc):
    for i in range(xs.size):
        ys[i] = _dq_elem(xs[i], s, zi, zf, lut, dec, enc)


@njit(inline="always")
def _dq_run_v(xs, ys, ss, zis, zfs, lut, dec, enc):
    for i in range(xs.size):
        ys[i] = _dq_elem(xs[i], ss[i], zis[i], zfs[i], lut, dec, enc)


def _dq_seg(x, y, s, zi, zf, lut, lay, dec, enc):
    """DequantizeLinear over runs that share one parameter."""
    for w in prange(lay.work):
        u0, u1, c0, c1 = _span(w, lay, lay.O * lay.nb)
        for seg in range(u0, u1):
            o = seg // lay.nb
            k = seg - o * lay.nb
            start = (o * lay.D + k * lay.B) * lay.I
            a = start + c0
            b = start + min(c1, min(lay.B, lay.D - k * lay.B) * lay.I)
            if a < b:
                p = seg if lay.Op else k
                _dq_run(x[a:b], y[a:b], s[p], zi[p], zf[p], lut, dec, enc)


def _dq_row(x, y, s, zi, zf, lut, lay, dec, enc):
    """DequantizeLinear over rows whose parameters change along the row."""
    for w in prange(lay.work):
        r0, r1, c0, c1 = _span(w, lay, lay.O * lay.D)
        for r in range(r0, r1):
            a = r * lay.L + c0
            b = r * lay.L + min(c1, lay.L)
            if a < b:
                p = ((r // lay.D) * lay.Op * lay.nb + (r % lay.D) // lay.B) * lay.L + c0
                m = b - a
                _dq_run_v(x[a:b], y[a:b], s[p:p + m], zi[p:p + m], zf[p:p + m], lut, dec, enc)


q_seg = _twin(_q_seg)
q_row = _twin(_q_row)
dq_seg = _twin(_dq_seg)
dq_row = _twin(_dq_row)
