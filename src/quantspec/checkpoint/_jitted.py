"""numba kernels of the checkpoint converter: one slab of rows, from the source's raw bytes to the
stored codes, scales and zero points, in one pass (imported only through
:func:`quantspec._fastpath.jit.load`).

Each kernel reads the slab as the source stores it (float32, float16 or bfloat16 bytes, ``kind`` 0, 1
or 2), widens a row at a time into a small float32 buffer (exact), checks it is finite, chooses the
row's or each block's parameters, computes the codes, packs them (sub-byte types in ONNX
``raw_data`` order, the slab starting on a byte boundary) and adds the row's quantization error to
``stats``: ``[sum (x - dq)^2, sum x^2, max |x - dq|, first row holding NaN or inf (-1: none)]``,
where ``dq`` is DequantizeLinear of the stored code.  Kernels are serial and release the GIL: the
converter runs one per worker thread, each on its own slab.

Each kernel is called by the rule object it implements (:mod:`quantspec.checkpoint.rules`: a
``ParamRule.fast`` or ``CodesRule.fast_tensor``, which also chooses the mode constants below), and
its arithmetic is that rule's numpy path (``compute`` / ``reference``, composed by
:mod:`quantspec.checkpoint.reference`, built on :mod:`quantspec.onnx` and :mod:`quantspec.litert`);
tests require equal bytes.  A rule without a kernel needs nothing here.

What keeps them fast (every loop is meant to vectorise; none uses fast-math):

- indices are unsigned (numba's wraparound of a negative index would turn loads into gathers), and
  integer work is done in 32 bits (:func:`quantspec._fastpath.nbprim.uand` and friends: numba widens
  int32 arithmetic to 64 bits, half the vector width);
- a slab is larger than the caches: the error pass, the one pass that does not read the source,
  prefetches the next row (:func:`_next_row`), so that its widening does not wait for memory;
- a block's range (blocks of 32, MX and blocked int4) is one vector load and LLVM's vector min / max
  reductions (:func:`quantspec._fastpath.nbprim.minmax_keys32`), and a whole block's codes a loop of known
  length: a short loop of unknown length runs mostly in its vector prologue and epilogue;
- the float8 / float4 codes loops of the schemes' formats (e2m1, e4m3fn, e5m2) are compiled for that
  format (global constants), with immediate shifts and masks.
"""

from __future__ import annotations

import numpy as np

from numba import njit

from ..dtypes import qtype
from ..onnx.fast import float_format

from .._fastpath.nbprim import (widen_row, f32_bits, f32_from_bits, inline, kernel, narrow_code, round_bf16, round_f16,
                            amax_bits32, minmax_keys16, minmax_keys32, prefetch, round_half_away, uadd, uand, uor, ushl, ushr, usub, uxor)

__all__ = ["minmax", "channel", "tensor", "nbits", "mx", "CH_ORT_SYM", "CH_ORT_ASYM", "CH_LITERT", "CH_FP8",
           "T_INT8", "T_FP8", "S_FLOAT32", "S_BFLOAT16", "S_FLOAT16", "S_FLOAT32_CT"]

# per-channel rules (kernel ``channel``) and per-tensor codes (kernel ``tensor``)
CH_ORT_SYM, CH_ORT_ASYM, CH_LITERT, CH_FP8 = 0, 1, 2, 3
T_INT8, T_FP8 = 0, 1
# how a scale is stored (``sround``): float32 as computed (quantspec's layout), or as compressed-tensors
# keeps it: rounded to bfloat16 / float16, or float32, a zero scale replaced by the type's epsilon
S_FLOAT32, S_BFLOAT16, S_FLOAT16, S_FLOAT32_CT = 0, 1, 2, 3

# the narrow-float formats of the schemes (saturating, as ONNX QuantizeLinear; what encode passes as
# ``fmt``), as global constants: a codes loop given one of these instead of the ``fmt`` argument is
# compiled for that format, its shifts and masks immediate (see :func:`_dispatch_fmt`)
_E2M1, _E2M3, _E3M2, _E4M3, _E5M2 = (float_format(qtype(t), True, "spec") for t in
                                     ("float4e2m1", "float6e2m3", "float6e3m2", "float8e4m3fn", "float8e5m2"))

_U0, _U1, _U2, _U3, _U4, _U6, _U7, _U8, _U16, _U32, _U64 = (np.uint64(k) for k in (0, 1, 2, 3, 4, 6, 7, 8, 16, 32, 64))
_TINY32 = 1.1754943508222875e-38       # float32's smallest normal (numpy.finfo(float32).tiny)
_FLT_MAX = np.float32(3.4028234663852886e38)


@inline
def _next_row(src, kind, r, cols):
    """(array, byte offset, bytes per element) of row ``r + 1`` of the slab, for :func:`_err`'s
    prefetches."""
    isz = np.uint64(4 if kind == 0 else 2)
    return src, (np.uint64(r) + _U1) * isz * np.uint64(cols), isz


@inline
def _put(codes, e, code, bits):
    """Store ``code`` as element ``e`` of a packed little-endian bit stream (``codes`` zeroed), or a
    byte of its own for 8-bit codes."""
    if bits == 8:
        codes[e] = np.uint8(code)
    elif bits == 4:
        codes[e >> _U1] |= np.uint8(uand(code, 0xF) << (_U4 * (e & _U1)))
    else:                                            # 6 bits: four codes in three bytes
        pos = e * _U6
        k = pos >> _U3
        sh = pos & _U7
        c = uand(code, 0x3F)
        codes[k] |= np.uint8(uand(ushl(c, sh), 0xFF))
        if sh > 2:
            codes[k + _U1] |= np.uint8(ushr(c, _U8 - sh))


@inline
def _pack(cbuf, codes, base, n, bits):
    """Codes ``cbuf[:n]`` (one a byte, at most ``bits`` significant bits) stored as elements
    ``base + j`` of ``codes`` (zeroed where it is packed): whole bytes at a time when the row starts
    on a byte boundary, else code by code."""
    if bits == 8:
        for j in range(n):
            codes[base + j] = cbuf[j]
        return
    j = _U0
    if bits == 4 and (base & _U1) == 0:
        k0 = base >> _U1
        for k in range(n >> _U1):
            codes[k0 + k] = cbuf[_U2 * k] | (cbuf[_U2 * k + _U1] << 4)
        j = n & ~_U1
    elif bits == 6 and (base & _U3) == 0:
        k0 = (base >> _U2) * _U3
        for k in range(n >> _U2):
            c0, c1 = np.uint32(cbuf[_U4 * k]), np.uint32(cbuf[_U4 * k + _U1])
            c2, c3 = np.uint32(cbuf[_U4 * k + _U2]), np.uint32(cbuf[_U4 * k + _U3])
            codes[k0 + _U3 * k] = np.uint8(uand(uor(c0, ushl(c1, 6)), 0xFF))
            codes[k0 + _U3 * k + _U1] = np.uint8(uand(uor(ushr(c1, 2), ushl(c2, 4)), 0xFF))
            codes[k0 + _U3 * k + _U2] = np.uint8(uand(uor(ushr(c2, 4), ushl(c3, 2)), 0xFF))
        j = n & ~_U3
    while j < n:
        _put(codes, base + j, np.uint32(cbuf[j]), bits)
        j += _U1


@inline
def _key(v):
    """A uint32 whose order is the order of the float32 ``v`` (finite; -0 sorts below +0): the bits
    of a positive value with the sign bit set, those of a negative one inverted (32-bit operations
    throughout, so that a loop of them vectorises at full width)."""
    u = f32_bits(v)
    return uxor(u, uor(usub(0, ushr(u, 31)), 0x80000000))


@inline
def _block_minmax(buf, j0, j1):
    """:func:`_minmax` of one block: its whole 32- and 16-element pieces by vector reductions
    (:func:`quantspec._fastpath.nbprim.minmax_keys32`), any rest a loop."""
    lo = np.uint32(0xFFFFFFFF)
    hi = np.uint32(0)
    j = j0
    while j + _U32 <= j1:
        a, b = minmax_keys32(buf, j)
        lo = a if a < lo else lo
        hi = b if b > hi else hi
        j += _U32
    if j + _U16 <= j1:
        a, b = minmax_keys16(buf, j)
        lo = a if a < lo else lo
        hi = b if b > hi else hi
        j += _U16
    while j < j1:
        k = _key(buf[j])
        lo = k if k < lo else lo
        hi = k if k > hi else hi
        j += _U1
    return f32_from_bits(_key_inv(lo)), f32_from_bits(_key_inv(hi))


@inline
def _key_inv(k):
    """The float32 bits of the key ``k`` (:func:`_key`)."""
    return uxor(k, uor(usub(ushr(k, 31), 1), 0x80000000))


@inline
def _minmax(buf, j0, j1):
    """(min, max) of ``buf[j0:j1]`` (finite values), through integer keys, which vectorise: where the
    result is a zero, its sign may differ from an in-order scan's (:func:`_scan`)."""
    lo = np.uint32(0xFFFFFFFF)
    hi = np.uint32(0)
    for j in range(j0, j1):
        k = _key(buf[j])
        lo = k if k < lo else lo
        hi = k if k > hi else hi
    return f32_from_bits(_key_inv(lo)), f32_from_bits(_key_inv(hi))


@inline
def _scan(buf, j0, j1):
    """(min, max) of ``buf[j0:j1]`` scanned in order, as ``std::min`` / ``std::max`` do (a tie keeps
    the value seen first: the sign of a zero result is the first zero's)."""
    mn = _FLT_MAX
    mx = -_FLT_MAX
    for j in range(j0, j1):
        v = buf[j]
        mn = v if v < mn else mn
        mx = v if v > mx else mx
    return mn, mx


@inline
def _amax(buf, j0, j1):
    """max |buf[j0:j1]| (finite values), as the largest magnitude bit pattern (integer, vectorised)."""
    m = np.uint32(0)
    for j in range(j0, j1):
        a = uand(f32_bits(buf[j]), 0x7FFFFFFF)
        m = a if a > m else m
    return f32_from_bits(m)


STATS_LANES = 64


_L = np.uint64(STATS_LANES)


@njit(error_model="numpy", nogil=True, boundscheck=False)
def _err(buf, dq, n, acc, lanes, nxt):
    """Add the error of the dequantized values ``dq[:n]`` against ``buf[:n]`` to ``acc`` =
    (sum (x-dq)^2, sum x^2, max |x-dq|), in one fixed order, so that every path, every machine and
    every backend writes the same statistics: squares in float64 (``d = f64(x) - f64(dq)``), element
    ``j`` added to lane ``j % 64`` (each lane from +0, in element order), the lanes combined
    pairwise (lane ``k`` = lane ``2k`` + lane ``2k+1``, 64 -> 32 -> ... -> 1) and the row's sum added
    to ``acc``; the largest error on float32 differences ``|x - dq|``.  The lanes are updated
    element-wise, 64 at a time, which vectorises without reassociating any sum (``lanes``: scratch,
    float64 [128] (the error's lanes then those of x^2) and uint32 [64] (the largest error's bits,
    lane by lane); ``encode._ordered_sum`` is the numpy
    statement of the same order).  Indices are unsigned: numba then emits no negative-index
    wraparound, which would turn the loads into gathers.

    ``nxt`` = (source array, byte offset, bytes per element) of the slab's next row (:func:`_next_row`):
    each group of 64 elements asks for the same columns of that row to be brought into the cache,
    so that the next row's first pass does not wait for memory (a slab is larger than the cache).
    The requests are spread over this pass, the one pass that does not read the source."""
    src, pf, isz = nxt
    lanes, ml = lanes
    L = _L
    for k in range(_U0, L + L):
        lanes[k] = 0.0
    for k in range(_U0, L):
        ml[k] = 0
    n = np.uint64(n)
    g = n // L
    for t in range(_U0, g):
        o = t * L
        for i in range(_U0, isz):
            prefetch(src, pf + o * isz + i * _U64)
        for k in range(_U0, L):
            x = buf[o + k]
            y = dq[o + k]
            v = np.float64(x)
            d = v - np.float64(y)
            lanes[k] += d * d
            lanes[L + k] += v * v
            a = uand(f32_bits(x - y), 0x7FFFFFFF)
            ml[k] = a if a > ml[k] else ml[k]
    o = g * L
    for k in range(_U0, n - o):
        x = buf[o + k]
        y = dq[o + k]
        v = np.float64(x)
        d = v - np.float64(y)
        lanes[k] += d * d
        lanes[L + k] += v * v
        a = uand(f32_bits(x - y), 0x7FFFFFFF)
        ml[k] = a if a > ml[k] else ml[k]
    m = np.uint32(0)
    for k in range(_U0, L):
        m = ml[k] if ml[k] > m else m
    w = L
    while w > _U1:
        w //= _U2
        for k in range(_U0, w):
            lanes[k] = lanes[_U2 * k] + lanes[_U2 * k + _U1]
            lanes[L + k] = lanes[L + _U2 * k] + lanes[L + _U2 * k + _U1]
    return acc[0] + lanes[0], acc[1] + lanes[L], max(acc[2], np.float64(f32_from_bits(m)))


@inline
def _stored(s, sround):
    """The scale ``s`` as stored (``sround``): unchanged (S_FLOAT32), or as compressed-tensors keeps
    it: rounded to bfloat16 / float16 (ties to even) or kept as float32, and a zero scale (a
    block of zeros, or a scale that rounds to zero) replaced by the type's epsilon (2^-7, 2^-10,
    2^-23), compressed-tensors' rule.  Codes are then computed from the stored scale."""
    if sround == 0:
        return s
    if sround == 1:
        r = round_bf16(s)
        eps = np.float32(0.0078125)
    elif sround == 2:
        r = round_f16(s)
        eps = np.float32(0.0009765625)
    else:
        r = s
        eps = np.float32(1.1920928955078125e-07)
    return eps if r == 0 else r


@inline
def _q_int(v, s, lo, hi):
    """ONNX QuantizeLinear to an integer type, less the zero point (finite ``v``): rint(v / s) with
    the quotient first clamped in float to [lo, hi] (the type's bounds less the zero point), which
    for integer bounds is clip(rint(v / s) + zp) - zp."""
    q = v / s
    q = q if q > lo else lo
    q = hi if q > hi else q
    return np.int32(np.rint(q))


@inline
def _value(code, fmt):
    """The float32 value of a finite narrow-float code (the format of ``fmt``; no NaN, no infinity:
    codes of saturating quantization), by its bits (vectorises, where a table lookup does not)."""
    c = np.uint32(code)
    sign = ushl(ushr(c, fmt.signpos), 31)
    mag = uand(c, usub(ushl(1, fmt.signpos), 1))
    e = ushr(mag, fmt.mant)
    m = uand(mag, usub(ushl(1, fmt.mant), 1))
    normal = uor(ushl(e + (127 - fmt.bias), 23), ushl(m, 23 - fmt.mant))
    tiny = f32_bits(np.float32(m) * f32_from_bits(ushl(127 + fmt.emin - fmt.mant, 23)))
    return f32_from_bits(uor(normal if e != 0 else tiny, sign))


@inline
def _narrow(q, fmt):
    return narrow_code(q, fmt.mant, fmt.emin, fmt.bias, fmt.maxmag, fmt.overmag, fmt.nanbits, fmt.nansigned != 0,
                       fmt.fnuz != 0, fmt.signpos)


@inline
def _fmt_kind(fmt):
    """Which of the constant formats ``fmt`` is (1: _E2M1, 2: _E4M3, 3: _E5M2; 0: another): a codes
    loop then takes the constant, compiled for that format."""
    return 1 if fmt == _E2M1 else (2 if fmt == _E4M3 else (3 if fmt == _E5M2 else 0))


@inline
def _fp8_codes(buf, n, s, codes, base, dq, fmt):
    """Codes of ``buf[:n] / s`` in the narrow-float format ``fmt`` (stored at ``codes[base:]``) and
    their values times ``s`` (``dq``)."""
    for j in range(n):
        code = _narrow(buf[j] / s, fmt)
        codes[base + j] = np.uint8(code)
        dq[j] = _value(code, fmt) * s


@inline
def _stats(stats, acc):
    stats[0], stats[1], stats[2] = acc


@inline
def _bf16_row_minmax(s, base, n):
    """(min, max, bad) of the bfloat16 row ``s[base:base + n]`` (bits) without widening it: 16-bit
    keys in the order of the values (the bits of a positive value with bit 15 set, those of a
    negative one inverted: the order of their float32 keys, :func:`_key`), in 32-bit operations, and
    ``bad`` with bit 15 set when an exponent field is all ones (NaN or infinity)."""
    lo = np.uint32(0xFFFF)
    hi = np.uint32(0)
    bad = np.uint32(0)
    for j in range(n):
        u = np.uint32(s[base + j])
        bad = uor(bad, uadd(uand(u, 0x7F80), 0x0080))
        k = uxor(u, uor(uand(usub(0, ushr(u, 15)), 0x7FFF), 0x8000))
        lo = k if k < lo else lo
        hi = k if k > hi else hi
    return f32_from_bits(ushl(_key16_inv(lo), 16)), f32_from_bits(ushl(_key16_inv(hi), 16)), ushr(bad, 15)


@inline
def _key16_inv(k):
    """The bfloat16 bits of the 16-bit key ``k`` (:func:`_bf16_row_minmax`)."""
    return uxor(k, uor(uand(usub(ushr(k, 15), 1), 0x7FFF), 0x8000))


@kernel
def minmax(src, kind, rows, cols, out, buf):
    """out = [min, max, first row holding NaN or inf (-1: none)] of the slab (bfloat16 rows straight
    from their bits, the others widened a row at a time)."""
    mn = _FLT_MAX
    mx = -_FLT_MAX
    n = np.uint64(cols)
    s = src.view(np.uint16)
    for r in range(rows):
        if kind == 2:
            a, b, bad = _bf16_row_minmax(s, np.uint64(r) * n, n)
            if bad & 1:
                out[2] = r
                return
        else:
            if widen_row(src, kind, r, cols, buf):
                out[2] = r
                return
            a, b = _minmax(buf, _U0, n)
        mn = a if a < mn else mn
        mx = b if b > mx else mx
    out[0] = mn
    out[1] = mx
    out[2] = -1


@kernel
def channel(src, kind, rows, cols, mode, fmt, maxv, codes, scale, zp, stats, buf, dq, sround):
    """Per-channel (axis 0) parameters and codes, a row at a time:

    - CH_ORT_SYM: onnxruntime.quantization int8 symmetric; CH_ORT_ASYM: uint8 asymmetric (codes:
      QuantizeLinear of the stored parameters);
    - CH_LITERT: the TFLite converter's per-channel int8 weights;
    - CH_FP8: amax scaling to the float8 type of ``fmt``, whose largest finite value is ``maxv``
      (codes: QuantizeLinear, saturating).

    ``sround``: the scale's stored type (:func:`_stored`); codes are those of the stored scale.
    """
    acc = (0.0, 0.0, 0.0)
    lanes = (np.empty(2 * STATS_LANES), np.empty(STATS_LANES, np.uint32))
    fk = _fmt_kind(fmt)
    n = np.uint64(cols)
    for r in range(rows):
        if widen_row(src, kind, r, cols, buf):
            stats[3] = r
            return
        mn, mx = _minmax(buf, _U0, n)
        base = np.uint64(r) * n
        if mode == CH_LITERT:
            m = abs(max(np.float64(mx), -np.float64(mn)))
            if not (2.0 * m > 1.0e-6):
                m = 5.0e-7
            s = _stored((np.float32(m) - np.float32(-m)) / np.float32(254.0), sround)
            inv = np.float32(1.0 / np.float64(s))
            scale[r] = s
            for j in range(n):
                c = round_half_away(np.float32(buf[j] * inv))
                c = min(max(c, np.float32(-127.0)), np.float32(127.0))
                codes[base + j] = np.uint8(uand(np.int32(c), 0xFF))
                dq[j] = c * s
        elif mode == CH_FP8:
            a = max(abs(mn), abs(mx))
            s = a / maxv
            if a == 0 or s == 0:
                s = np.float32(1.0)
            s = _stored(s, sround)
            scale[r] = s
            if fk == 2:
                _fp8_codes(buf, n, s, codes, base, dq, _E4M3)
            elif fk == 3:
                _fp8_codes(buf, n, s, codes, base, dq, _E5M2)
            else:
                _fp8_codes(buf, n, s, codes, base, dq, fmt)
        else:
            rmin = mn if mn < 0 else np.float32(0.0)
            rmax = mx if mx > 0 else np.float32(0.0)
            z = 0
            if mode == CH_ORT_SYM:
                a = max(abs(rmin), abs(rmax))
                s64 = (np.float64(a) - np.float64(-a)) / 254.0
                s = np.float32(1.0) if s64 < _TINY32 else np.float32(s64)
                lo, hi = -128, 127
            else:
                s64 = (np.float64(rmax) - np.float64(rmin)) / 255.0
                if s64 < _TINY32:
                    s = np.float32(1.0)
                else:
                    z = np.int32(np.rint(0.0 - np.float64(rmin) / s64))
                    s = np.float32(s64)
                lo, hi = 0, 255
                zp[r] = np.uint8(z)
            s = _stored(s, sround)
            scale[r] = s
            flo = np.float32(lo - z)
            fhi = np.float32(hi - z)
            for j in range(n):
                c = _q_int(buf[j], s, flo, fhi)
                codes[base + j] = np.uint8(uand(uadd(c, z), 0xFF))
                dq[j] = np.float32(c) * s
        acc = _err(buf, dq, n, acc, lanes, _next_row(src, kind, r, cols))
    _stats(stats, acc)


@kernel
def tensor(src, kind, rows, cols, mode, s, fmt, codes, stats, buf, dq):
    """Codes of a per-tensor scale ``s`` (zero point 0): T_INT8 (QuantizeLinear int8) or T_FP8
    (QuantizeLinear to the float8 type of ``fmt``, saturating)."""
    acc = (0.0, 0.0, 0.0)
    lanes = (np.empty(2 * STATS_LANES), np.empty(STATS_LANES, np.uint32))
    fk = _fmt_kind(fmt)
    n = np.uint64(cols)
    for r in range(rows):
        if widen_row(src, kind, r, cols, buf):
            stats[3] = r
            return
        base = np.uint64(r) * n
        if mode == T_INT8:
            for j in range(n):
                c = _q_int(buf[j], s, np.float32(-128.0), np.float32(127.0))
                codes[base + j] = np.uint8(uand(c, 0xFF))
                dq[j] = np.float32(c) * s
        else:
            if fk == 2:
                _fp8_codes(buf, n, s, codes, base, dq, _E4M3)
            elif fk == 3:
                _fp8_codes(buf, n, s, codes, base, dq, _E5M2)
            else:
                _fp8_codes(buf, n, s, codes, base, dq, fmt)
        acc = _err(buf, dq, n, acc, lanes, _next_row(src, kind, r, cols))
    _stats(stats, acc)


@inline
def _nb_code(x, inv, zf, s, flo, fhi):
    """(code, dequantized value) of ``x`` in a block of scale ``s`` (``inv`` = 1 / s) and zero point
    ``zf``, as MLAS does: clamp(cvttss2si(roundf(q)) + z, lo, hi), in float: q is clamped to
    [-64, 64] first (the bounds less any zero point lie inside), and a q that cvttss2si turns into
    INT32_MIN (NaN, |q| >= 2^31) gives lo, as INT32_MIN + z clamps to lo."""
    q = np.float32(x * inv)
    rq = round_half_away(min(max(q, np.float32(-64.0)), np.float32(64.0)))
    f = min(max(rq + zf, flo), fhi)
    f = f if abs(q) < np.float32(2147483648.0) else flo
    return np.uint8(uand(np.int32(f), 0xF)), (f - zf) * s


@kernel
def nbits(src, kind, rows, cols, block, sym, codes, scale, zp, stats, buf, dq, cbuf, pmn, pmx, ps, pinv, pz, sround):
    """onnxruntime's MatMulNBitsQuantizer, 4 bits, QDQ format (MLAS ``BlockwiseQDQQuantizer``), for a
    weight ``[out, in]`` with blocks along ``in``: per block the scale (and zero point), and codes
    ``clamp(int(roundf(x * (1 / scale))) + zp)``; codes and zero points packed two a byte.  A row at a
    time: the blocks' ranges, then their parameters (``pmn`` ... ``pz``: one entry per block, a loop
    that vectorises across blocks), then the codes.  ``sround``: the scale's stored type
    (:func:`_stored`; the zero point is the tool's, from the unrounded scale)."""
    acc = (0.0, 0.0, 0.0)
    lanes = (np.empty(2 * STATS_LANES), np.empty(STATS_LANES, np.uint32))
    n = np.uint64(cols)
    B = np.uint64(block)
    nb = (n + B - _U1) // B
    flo = np.float32(-8.0 if sym else 0.0)
    fhi = np.float32(7.0 if sym else 15.0)
    f0 = np.float32(0.0)
    for r in range(rows):
        if widen_row(src, kind, r, cols, buf):
            stats[3] = r
            return
        base = np.uint64(r) * n
        full = n // B if B == _U32 else _U0     # whole blocks of 32: one vector reduction each
        for b in range(full):
            lo, hi = minmax_keys32(buf, b * _U32)
            pmn[b] = f32_from_bits(_key_inv(lo))
            pmx[b] = f32_from_bits(_key_inv(hi))
        for b in range(full, nb):
            j0 = b * B
            j1 = min(j0 + B, n)
            pmn[b], pmx[b] = _block_minmax(buf, j0, j1)
        for b in range(nb):
            if pmn[b] == 0 and pmx[b] == 0:      # all zeros: the signs of the zeros MLAS's scan keeps
                j0 = b * B
                pmn[b], pmx[b] = _scan(buf, j0, min(j0 + B, n))
        if sym:
            for b in range(nb):
                mn, mx = pmn[b], pmx[b]
                m = mx if abs(mx) > abs(mn) else mn
                s = _stored(-m / np.float32(8.0), sround)
                ps[b] = s
                pinv[b] = np.float32(1.0) / s if s != 0 else f0
                pz[b] = 0
        else:
            for b in range(nb):
                mn = f0 if f0 < pmn[b] else pmn[b]
                mx = f0 if pmx[b] < f0 else pmx[b]
                s = (mx - mn) / np.float32(15.0)
                zf = f0 - mn / s if s != 0 else mn
                z = np.int32(round_half_away(zf))
                pz[b] = 0 if zf < 0 else (15 if zf > 15 else z)
                s = _stored(s, sround)
                ps[b] = s
                pinv[b] = np.float32(1.0) / s if s != 0 else f0
        for b in range(nb):
            j0 = b * B
            j1 = min(j0 + B, n)
            inv, zf, s = pinv[b], np.float32(pz[b]), ps[b]
            if j1 - j0 == _U32:                  # a whole block of 32: a loop of known length
                for i in range(_U32):
                    j = j0 + i
                    c, y = _nb_code(buf[j], inv, zf, s, flo, fhi)
                    cbuf[j] = c
                    dq[j] = y
            else:
                for j in range(j0, j1):
                    c, y = _nb_code(buf[j], inv, zf, s, flo, fhi)
                    cbuf[j] = c
                    dq[j] = y
        o = np.uint64(r) * nb
        for b in range(nb):
            scale[o + b] = ps[b]
        if not sym:
            for b in range(nb):
                _put(zp, o + b, pz[b], 4)
        _pack(cbuf, codes, base, n, 4)
        acc = _err(buf, dq, n, acc, lanes, _next_row(src, kind, r, cols))
    _stats(stats, acc)


@inline
def _mx_codes(buf, j0, j1, inv, s, cbuf, dq, fmt):
    """Codes ``buf[j0:j1] * inv`` in the narrow-float format ``fmt`` and their values times ``s``
    (a whole block of 32: a loop of known length)."""
    if j1 - j0 == _U32:
        for i in range(_U32):
            j = j0 + i
            code = _narrow(buf[j] * inv, fmt)
            cbuf[j] = np.uint8(code)
            dq[j] = _value(code, fmt) * s
    else:
        for j in range(j0, j1):
            code = _narrow(buf[j] * inv, fmt)
            cbuf[j] = np.uint8(code)
            dq[j] = _value(code, fmt) * s


@kernel
def mx(src, kind, rows, cols, emax, shift, is_int, fmt, bits, codes, scale, stats, buf, dq, cbuf, pe):
    """The OCP MX rule, blocks of 32 along axis 1: per block the shared exponent
    ``floor(log2(amax)) - emax`` (clamped to [-127, 127]; all zeros: -127) stored as float8e8m0
    (plus ``shift``, clamped too), and codes QuantizeLinear(x, 2^e) to the element type (saturating
    floats; for ``is_int``, int8).  ``x / 2^e`` is computed as ``x * 2^-e``: both are the exact
    quotient rounded once, since ``2^-e`` is a float32 for every e in [-127, 127].  A row at a
    time: the blocks' exponents (``pe``), then the codes."""
    acc = (0.0, 0.0, 0.0)
    lanes = (np.empty(2 * STATS_LANES), np.empty(STATS_LANES, np.uint32))
    n = np.uint64(cols)
    B = np.uint64(32)
    nb = (n + B - _U1) // B
    fk = _fmt_kind(fmt)
    for r in range(rows):
        if widen_row(src, kind, r, cols, buf):
            stats[3] = r
            return
        base = np.uint64(r) * n
        o = np.uint64(r) * nb
        full = n // B
        for b in range(full):
            pe[b] = np.int32(ushr(amax_bits32(buf, b * B), 23))
        if full < nb:
            pe[full] = np.int32(ushr(f32_bits(_amax(buf, full * B, n)), 23))
        for b in range(nb):
            ebits = pe[b]
            e = ebits - 127 - emax if ebits > 0 else -127
            e = max(max(e, -127) + shift, -127)
            pe[b] = e
            scale[o + b] = np.uint8(e + 127)
        for b in range(nb):
            j0 = b * B
            j1 = min(j0 + B, n)
            e = pe[b]
            s = f32_from_bits(ushl(e + 127, 23)) if e >= -126 else f32_from_bits(0x00400000)
            inv = f32_from_bits(ushl(127 - e, 23)) if e <= 126 else f32_from_bits(0x00400000)
            if is_int:
                for j in range(j0, j1):
                    q = buf[j] * inv
                    q = q if q > np.float32(-128.0) else np.float32(-128.0)
                    q = np.float32(127.0) if q > np.float32(127.0) else q
                    c = np.int32(np.rint(q))
                    cbuf[j] = np.uint8(uand(c, 0xFF))
                    dq[j] = np.float32(c) * s
            elif fk == 1:
                _mx_codes(buf, j0, j1, inv, s, cbuf, dq, _E2M1)
            elif fk == 2:
                _mx_codes(buf, j0, j1, inv, s, cbuf, dq, _E4M3)
            else:
                _mx_codes(buf, j0, j1, inv, s, cbuf, dq, fmt)
        _pack(cbuf, codes, base, n, bits)
        acc = _err(buf, dq, n, acc, lanes, _next_row(src, kind, r, cols))
    _stats(stats, acc)
