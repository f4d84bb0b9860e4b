"""numba element functions of ONNX QuantizeLinear / DequantizeLinear (the fast path; see :mod:`.fast`).

Imported only through :func:`quantspec._fastpath.jit.load`, on the first call that needs it.  Each
operation is a small function inlined into the generic kernel :data:`quantspec._fastpath.fastmap.plain`;
the classes of the two ``op`` records select it (:func:`quantspec._fastpath.fastmap.register`):
``(Q32, output rule)`` for QuantizeLinear (a float16 / bfloat16 quotient is a pass of its own,
``(QF16 or QBF16, Quotient)``), ``(value table, decoding)`` for DequantizeLinear.  The element's parameters are ``(scale, integer zero point)`` for integer codes,
``(scale, float zero point)`` for float4/float6 outputs and float codes, ``(scale,)`` otherwise.
"""

from __future__ import annotations

import numpy as np

from .._fastpath import fastmap
from .._fastpath.nbprim import (claim, f32_bits, finished, iadd, iand, inline, isub, ixor, kernel, narrow_code,
                            round_bf16, round_f16, uand, uor, ushr)
from .fast import Q32, QBF16, QF16, DecInt, DecLut, Float, FloatZp, IntMlas, IntMlasByte, IntPlain, Quotient

__all__ = ["q_ort_edges"]

#: files besides this one and nbprim.py whose content q_ort_edges depends on (jit.py)
KERNEL_SOURCES = ("fast.py",)

_I32_MIN = -2147483648
_TWO31 = 2147483648.0


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
def _mlas(q, prm, cfg):
    """Integer output, clamped in float: clip(rint(q) + zp) with NaN -> qmin (spec; onnxruntime MLAS)."""
    zi = prm[1]
    lo = np.float32(isub(cfg.qmin, zi))
    hi = np.float32(isub(cfg.qmax, zi))
    q = q if q > lo else lo                 # NaN -> lo (one x86 maxps)
    q = hi if q > hi else q
    return iand(iadd(np.int32(np.rint(q)), zi), cfg.mask)


@inline
def _mlas_byte(q, prm, cfg):
    """_mlas for 8- and 16-bit codes, whose store keeps the low bits (no mask)."""
    zi = prm[1]
    lo = np.float32(isub(cfg.qmin, zi))
    hi = np.float32(isub(cfg.qmax, zi))
    q = q if q > lo else lo
    q = hi if q > hi else q
    return iadd(np.int32(np.rint(q)), zi)


@inline
def _plain(q, prm, cfg):
    """Integer output as onnxruntime's plain loop: the x86 int32 conversion, an int32 wrap, a clip."""
    zi = prm[1]
    r = np.rint(q)
    # x86 cvttss2si: NaN, ±inf and values outside the int32 range become INT32_MIN
    inside = np.int64((r >= -_TWO31) & (r < _TWO31))
    i = np.int64(min(max(r, -_TWO31), _TWO31 - 128.0))     # a defined conversion for every lane
    i = _I32_MIN + (i - _I32_MIN) * inside
    i = np.int64(np.int32(i + zi))             # int32 wrap
    i = min(max(i, cfg.qmin), cfg.qmax)
    return np.int32(i) & np.int32(cfg.mask)


@inline
def _narrow(q, prm, cfg):
    """A float8/float6/float4 output (nbprim.narrow_code), with onnxruntime's window rule."""
    code = narrow_code(q, cfg.mant, cfg.emin, cfg.bias, cfg.maxmag, cfg.overmag, cfg.nanbits,
                       cfg.nansigned != 0, cfg.fnuz != 0, cfg.signpos)
    a = abs(q)
    window = (a >= np.float32(cfg.wlo)) & (a < np.float32(cfg.whi))
    return uor(uand(ushr(f32_bits(q), 24), 0x80), cfg.wcode) if window else code


@inline
def _narrow_zp(q, prm, cfg):
    """float4/float6 with a zero point: q + zp in float64, NaN -> +max, rounded exactly to the grid
    (magnitudes first limited to 2**10, far beyond every such format, so they still overflow)."""
    t = np.float64(q) + prm[1]
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
def _dq_int(u, prm, lut, dec):
    """DequantizeLinear of an integer code: sign-extend, subtract the zero point, times the scale."""
    v = isub(ixor(iand(u, dec.mask), dec.half), dec.half)
    return np.float32(isub(v, prm[1])) * prm[0]   # x - zp: exact, except int32, where it wraps like onnxruntime


@inline
def _dq_lut(u, prm, lut, dec):
    """DequantizeLinear of a float code: its value (table), minus the zero point, times the scale.
    A NaN code keeps its own NaN when the scale is NaN too (x86 keeps the first operand's, as
    onnxruntime's ``x * scale`` does; LLVM may swap the operands of a product, so it is selected)."""
    d = lut[np.int64(u) & dec.mask] - prm[1]
    return d if d != d else d * prm[0]


def _compose(div, out):
    @inline
    def q(v, prm, quot, cfg):
        return out(div(v, prm[0]), prm, cfg)

    return q


_OUTS = {IntMlas: _mlas, IntMlasByte: _mlas_byte, IntPlain: _plain, Float: _narrow, FloatZp: _narrow_zp}
for _o, _out in _OUTS.items():
    fastmap.register((Q32, _o), _compose(_div32, _out))
# float16 / bfloat16 quotients are computed by a pass of their own (fast.quantize)
fastmap.register((QF16, Quotient), inline(lambda v, prm, quot, cfg: _div16(v, prm[0])))
fastmap.register((QBF16, Quotient), inline(lambda v, prm, quot, cfg: _divbf16(v, prm[0])))
fastmap.register((None, DecInt), _dq_int)      # the value table is an array: no record class
fastmap.register((None, DecLut), _dq_lut)


def _q_ort_edges(x, y, s, zi, full, dl, bl, cfg, claims, step):
    """onnxruntime 4-bit: recompute the odd-aligned head and tail element of every slice (rows of
    ``dl`` elements cut into slices of ``bl``) with the plain loop (reference.ort_plain_mask), for the
    slices this thread claims (quantspec._fastpath.runner.launch)."""
    n = x.size
    per_row = (dl + bl - 1) // bl
    work = (n // dl) * per_row
    while True:
        j0 = claim(claims, step)
        if j0 >= work:
            break
        j1 = min(j0 + step, work)
        for j in range(j0, j1):
            r = j // per_row
            start = r * dl + (j - r * per_row) * bl
            end = min(start + bl, r * dl + dl)
            if start % 2 == 1:
                _q_fix(x, y, s, zi, full, start, cfg)
            if end % 2 == 1:
                _q_fix(x, y, s, zi, full, end - 1, cfg)
        finished(claims, j1 - j0)
    return finished(claims, 0)


q_ort_edges = kernel(_q_ort_edges)


@inline
def _q_fix(x, y, s, zi, full, p, cfg):
    """Recompute element ``p`` with the parameters the compact layout ``full`` gives it."""
    o = p // (full.D * full.I)
    d = (p // full.I) % full.D
    k = o * full.Op * full.nb + d // full.B
    y[p] = _plain(x[p] / s[k], (s[k], zi[k]), cfg)

