"""numba kernels of compressed-tensors' weight arithmetic: the fast path of
:func:`quantspec.checkpoint.encode.encode_preset` (imported only through
:func:`quantspec._fastpath.jit.load`).

The readable statement of the arithmetic is :mod:`quantspec.checkpoint.ctarith` (and
:func:`quantspec.checkpoint.presets.encode_weight`, which applies it per preset); these kernels compute
the same parameters, codes and stored bytes, and the same error statistics as
``encode_preset``'s numpy path; tests require equal bytes and bits on adversarial corpora
(``tests/test_checkpoint_presets_fast.py``).

Each kernel takes one slab of rows as the source stores it (raw bytes of the weight's type ``T``:
bfloat16, float16 or float32, one kernel per type), widens a row at a time into float32 (exact), stops
at the first row that holds NaN or an infinity (its index in ``stats[3]``, nothing else meaningful),
and otherwise computes, per row (per band of rows for 2-D blocks):

- the parameters of each group, exactly as ctarith: every step a float32 operation whose result is
  rounded to ``T`` (ties to even) wherever ctarith calls ``rnd`` (:func:`_rnd`: bfloat16 and float16
  by bit arithmetic, subnormals and overflow to infinity included), a zero scale replaced by the
  epsilon of its stored type;
- the codes of the stored parameters and their stored form (packed b-bit integers, int8 bytes,
  float8 e4m3 bytes, float4 e2m1 nibbles);
- compressed-tensors' decompression ``dq`` of those codes, and the row's quantization error:
  ``stats`` = [sum (x - dq)^2, sum x^2, max |x - dq|, -1], the sums in the statistics' fixed order
  (:func:`_err`; ``encode._ordered_sum`` is its numpy statement), the largest error on float32
  differences, NaN as soon as one difference is NaN (as numpy's ``max``).

The stored scales are written as bytes of their stored type (``T``'s bits, float8 e4m3 codes or MX
uint8 exponents).  Kernels are serial and release the GIL: the converter runs one per worker thread,
each on its own slab.

There is one kernel per family and weight type (``ints_bf16``, ``fp8_f16``, ...; :data:`INTS`,
:data:`FP8`, :data:`FP4` by ``encode._KIND``), each its family's body with the type a constant, so that
a conversion compiles only the kernels of the types it meets.  The loops whose body depends on the
type (the codes) are inlined into each kernel by numba (``inline``), where the type is a constant:
they compile to straight-line vector code.  Everything else is ``shared`` (compiled once, inlined by
LLVM): numba's own inlining copies its code at every level, which for whole bodies made compiling
slow.  Groups of the presets' sizes (16, 32, 128) are loops of known length.  No fast-math (see
:mod:`quantspec._fastpath.jit`): ``x / s`` stays a division wherever the divisor is not a power of
two, and no multiply-add is fused.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .._fastpath.nbprim import (amax_bits32, widen_row, f32_bits, f32_from_bits, inline, kernel, minmax_keys16, narrow_code,
                                round_f16, shared, uadd, uand, uor, ushl, ushr, usub, uxor)

__all__ = ["ints_bf16", "ints_f16", "ints_f32", "fp8_bf16", "fp8_f16", "fp8_f32", "fp4_bf16", "fp4_f16", "fp4_f32",
           "INTS", "FP8", "FP4", "KIND_FLOAT32", "KIND_FLOAT16", "KIND_BFLOAT16"]

#: the weight's type: the index of its kernel in :data:`INTS`, :data:`FP8` and :data:`FP4` (``encode._KIND``)
KIND_FLOAT32, KIND_FLOAT16, KIND_BFLOAT16 = 0, 1, 2

_U0, _U1, _U2, _U3, _U4, _U7, _U8, _U16, _U32 = (np.uint64(k) for k in (0, 1, 2, 3, 4, 7, 8, 16, 32))
STATS_LANES = 64
_L = np.uint64(STATS_LANES)
_FP8_MAX = np.float32(448.0)
_FP4_MAX = np.float32(6.0)


# -- the weight's type -----------------------------------------------------------------------------------
@shared
def _rnd(v, kind):
    """ctarith's ``rnd``: the float32 ``v`` rounded to the weight's type (ties to even), as float32.
    bfloat16: the float32 bits rounded at bit 16 (a carry into the exponent is the right rounding up,
    and past the largest finite value gives infinity), as
    :func:`quantspec._fastpath.nbprim.round_bf16` less its test for NaN: the only NaNs here are those
    arithmetic makes (quiet, no payload), which the bit arithmetic keeps; float16:
    :func:`quantspec._fastpath.nbprim.round_f16` (subnormals and overflow included)."""
    if kind == 2:
        u = f32_bits(v)
        return f32_from_bits(uand(uadd(uadd(u, 0x7FFF), uand(ushr(u, 16), 1)), 0xFFFF0000))
    if kind == 1:
        return round_f16(v)
    return v


@shared
def _eps(kind):
    """The epsilon of the weight's type (what a zero scale becomes): 2^-7, 2^-10, 2^-23."""
    if kind == 2:
        return np.float32(0.0078125)
    if kind == 1:
        return np.float32(0.0009765625)
    return np.float32(1.1920928955078125e-07)


@shared
def _f16_bits(v):
    """The float16 bits of the float32 ``v``, a float16 value (or ±inf, or NaN: kept quiet)."""
    u = f32_bits(v)
    sign = ushr(uand(u, 0x80000000), 16)
    a = uand(u, 0x7FFFFFFF)
    if a >= 0x7F800000:
        h = np.uint32(0x7C00) if a == 0x7F800000 else uor(0x7E00, uand(ushr(a, 13), 0x3FF))
    elif a >= 0x38800000:                            # normal: exponent rebiased, mantissa's top 10 bits
        h = ushr(usub(a, 0x38000000), 13)
    else:                                            # subnormal: a multiple of 2^-24
        h = np.uint32(f32_from_bits(a) * np.float32(16777216.0))
    return uor(h, sign)


@shared
def _put_wt(out16, out32, i, v, kind):
    """Store the float32 ``v`` (a value of the weight's type) as element ``i`` of an array of that
    type (``out16``: its 16-bit view, ``out32``: its 32-bit view)."""
    if kind == 2:
        out16[i] = np.uint16(ushr(f32_bits(v), 16))
    elif kind == 1:
        out16[i] = np.uint16(_f16_bits(v))
    else:
        out32[i] = v


# -- ranges -------------------------------------------------------------------------------------------------
@shared
def _amax(buf, j0, count):
    """max |x| of the ``count`` (finite) elements from ``j0`` (0 for none): ctarith's ``max(|lo|, |hi|)``
    with ``lo`` and ``hi`` the range widened to hold 0, as the largest magnitude bit pattern (integer:
    a loop that vectorises; ``count`` a constant where the group size is known, a loop of known
    length, without the vector loop's prologue and epilogue)."""
    m = np.uint32(0)
    for i in range(count):
        a = uand(f32_bits(buf[j0 + np.uint64(i)]), 0x7FFFFFFF)
        m = a if a > m else m
    return f32_from_bits(m)


@shared
def _amax32(buf, j0):
    """:func:`_amax` of the 32 elements from ``j0``: one vector load and reduction
    (:func:`quantspec._fastpath.nbprim.amax_bits32`; a loop over a row's groups of 32 does not
    vectorise its short inner loop well)."""
    return f32_from_bits(amax_bits32(buf, j0))


@shared
def _amax16(buf, j0):
    """:func:`_amax` of the 16 elements from ``j0``: their order keys' min and max in one vector load
    and reduction (:func:`quantspec._fastpath.nbprim.minmax_keys16`), the larger magnitude of the two."""
    lo, hi = minmax_keys16(buf, j0)
    a = uand(uxor(lo, uor(usub(ushr(lo, 31), 1), 0x80000000)), 0x7FFFFFFF)
    b = uand(uxor(hi, uor(usub(ushr(hi, 31), 1), 0x80000000)), 0x7FFFFFFF)
    return f32_from_bits(a if a > b else b)


@shared
def _range0(buf, j0, count):
    """(lo, hi) = (min(min(x), 0), max(max(x), 0)) of the ``count`` (finite) elements from ``j0``, through
    uint32 keys in the order of the values (the bits of a positive value with the sign bit set, those
    of a negative one inverted), whose min / max loop vectorises where a float one does not (without
    fast-math); the sign of a zero result is not kept: nothing the asymmetric parameters compute
    depends on it."""
    lo = np.uint32(0x80000000)                       # the key of +0
    hi = np.uint32(0x80000000)
    for i in range(count):
        u = f32_bits(buf[j0 + np.uint64(i)])
        k = uxor(u, uor(usub(0, ushr(u, 31)), 0x80000000))
        lo = k if k < lo else lo
        hi = k if k > hi else hi
    return f32_from_bits(uxor(lo, uor(usub(ushr(lo, 31), 1), 0x80000000))), \
        f32_from_bits(uxor(hi, uor(usub(ushr(hi, 31), 1), 0x80000000)))


# -- float8 e4m3 and float4 e2m1 ---------------------------------------------------------------------------
@shared
def _e4m3(v):
    """The float8 e4m3fn code of the float32 ``v`` (ties to even, saturating at ±448; -0 kept), as
    ml_dtypes converts it."""
    return narrow_code(v, 3, -6, 7, 0x7E, 0x7E, 0x7F, True, False, 7)


@shared
def _e4m3_round(q):
    """(code, value) of the float32 ``q`` in [-448, 448] rounded to float8 e4m3fn, ties to even (as
    :func:`_e4m3`, with the value besides): from 2^-6 up (normal), the float32 mantissa rounded to 3
    bits (a carry into the exponent is the right rounding up; 448 stays 448); below, a multiple of
    2^-9, ``rint(|q| * 2^9)``, whose 8 is 2^-6 and its code.  The sign kept, -0 included."""
    u = f32_bits(q)
    a = uand(u, 0x7FFFFFFF)
    r = uand(uadd(uadd(a, 0x7FFFF), uand(ushr(a, 20), 1)), 0xFFF00000)
    k = np.rint(f32_from_bits(a) * np.float32(512.0))
    normal = a >= 0x3C800000                         # 2^-6
    mag = usub(ushr(r, 20), 960) if normal else np.uint32(np.int32(k))       # 960: (127 - 7) << 3
    v = f32_from_bits(r) if normal else k * np.float32(0.001953125)
    sign = uand(u, 0x80000000)
    return uor(mag, ushr(sign, 24)), f32_from_bits(uor(f32_bits(v), sign))


@shared
def _e4m3_value(code):
    """The float32 value of a finite float8 e4m3fn code."""
    c = np.uint32(code)
    sign = ushl(ushr(c, 7), 31)
    e = uand(ushr(c, 3), 0xF)
    m = uand(c, 7)
    normal = uor(ushl(uadd(e, 120), 23), ushl(m, 20))
    tiny = f32_bits(np.float32(m) * np.float32(0.001953125))       # m * 2^-9
    return f32_from_bits(uor(normal if e != 0 else tiny, sign))


@shared
def _fp4(q):
    """(code, value) of the float32 ``q`` in compressed-tensors' float4 e2m1 (ctarith ``_cast_fp4``
    then ``pack_fp4``): ``q`` clipped to ±6 and rounded to the nearest of 0, 0.5, 1, 1.5, 2, 3, 4, 6,
    ties to even (ctarith's thresholds: up to 0.25 gives 0, from 0.75 1, up to 1.25 1, from 1.75 2, up
    to 2.5 2, from 3.5 4, up to 5 4).  The grid's step is 0.5 below 2, 1 below 4, 2 above: ``|q|``
    times the inverse step (a power of two: exact) rounded half to even is the index in that range,
    and gives the code (index, +2, +4) and the value (index times the step).  The code's sign bit (3)
    and the value's sign are set for a negative ``q``: ±0 give +0, a negative value that rounds to 0
    gives -0 (its ``sign(q) * round(|q|)``)."""
    m = abs(q)
    m = m if m < _FP4_MAX else _FP4_MAX
    lt2 = m < np.float32(2.0)
    lt4 = m < np.float32(4.0)
    f = np.float32(2.0) if lt2 else (np.float32(1.0) if lt4 else np.float32(0.5))
    step = np.float32(0.5) if lt2 else (np.float32(1.0) if lt4 else np.float32(2.0))
    r = np.rint(m * f)
    code = uadd(np.uint32(np.int32(r)), 0 if lt2 else (2 if lt4 else 4))
    v = r * step
    neg = q < np.float32(0.0)
    return uor(code, ushl(np.uint32(neg), 3)), (-v if neg else v)


# -- packing -------------------------------------------------------------------------------------------------
@shared
def _squeeze(v, bits):
    """The eight ``bits``-bit values in the bytes of the uint64 ``v`` (byte ``k``: value ``k``) as one
    little-endian bit string of ``8 * bits`` bits (value ``k`` at bit ``k * bits``): pairs of bytes,
    then pairs of 16-bit units, then the two halves, each step one shift and mask in every lane."""
    b = np.uint64(bits)
    m8 = np.uint64(0x00FF00FF00FF00FF)
    m16 = np.uint64(0x0000FFFF0000FFFF)
    t = (v & m8) | (((v >> _U8) & m8) << b)
    t = (t & m16) | (((t >> _U16) & m16) << (b + b))
    return (t & np.uint64(0xFFFFFFFF)) | ((t >> _U32) << (_U4 * b))


@intrinsic
def _store_le64(typingctx, arr, index, value):
    """Store the uint64 ``value`` as the 8 bytes ``arr[index:index + 8]`` of the uint8 array ``arr``
    (little-endian machines; any alignment).  The caller keeps the 8 bytes inside the array."""
    if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1
            and isinstance(index, types.Integer) and value == types.uint64):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], ptr, align=1)
        return context.get_dummy_value()

    return types.void(arr, index, value), codegen


@shared
def _pack_row(cb, n, bits, out8, out16, out32, out64, ob):
    """compressed-tensors' ``pack_to_int32`` of one row of ``n`` codes, ``n`` a multiple of 32 (whole
    int32 words; every group preset's row): ``cb[:n]`` (each code plus ``2^(bits-1)``: ``bits``
    significant bits, one a byte) as a little-endian bit string, stored as the ``n * bits / 8`` bytes
    from byte ``ob`` (a multiple of ``4 * bits``) of the output (``out8``, and its 16/32/64-bit views;
    8 bytes to spare after the last row).  Eight codes at a time (:func:`_squeeze`), which make
    ``bits`` whole bytes: for 2, 4 and 8 bits a store of 2, 4 or 8 bytes (a loop that vectorises), else
    an 8-byte store at each eight's first byte, whose bytes past the eight the next eight's store (or
    the next row's) overwrites."""
    c64 = cb.view(np.uint64)
    chunks = n >> _U3
    if bits == 4:
        o = ob >> _U2
        for i in range(chunks):
            out32[o + i] = np.uint32(_squeeze(c64[i], 4))
    elif bits == 2:
        o = ob >> _U1
        for i in range(chunks):
            out16[o + i] = np.uint16(_squeeze(c64[i], 2))
    elif bits == 8:
        o = ob >> _U3
        for i in range(chunks):
            out64[o + i] = c64[i]
    else:
        b = np.uint64(bits)
        for i in range(chunks):
            _store_le64(out8, ob + i * b, _squeeze(c64[i], bits))


@shared
def _pack_nibbles(cb, n, out32, ob):
    """Float4 codes ``cb[:n]`` (``n`` a multiple of 16; ``cb`` 8-byte aligned) two a byte from byte ``ob``
    (a multiple of 4) of the output (``out32``: its 32-bit view): code ``2k`` in the low nibble of byte
    ``k``, ``2k + 1`` in the high one (ctarith ``pack_fp4``), eight codes at a time (:func:`_squeeze`)."""
    c64 = cb.view(np.uint64)
    o = ob >> _U2
    for i in range(n >> _U3):
        out32[o + i] = np.uint32(_squeeze(c64[i], 4))


# -- the error statistics --------------------------------------------------------------------------------------
@shared
def _err(buf, dq, n, lanes, ml):
    """The error of one row's dequantized values ``dq[:n]`` against ``buf[:n]``: (sum (x-dq)^2, sum
    x^2, bits of max |x - dq|), the sums in the statistics' fixed order: squares in float64 (``d =
    f64(x) - f64(dq)``), element ``j`` added to lane ``j % 64`` (each lane from +0, in element order),
    the lanes combined pairwise (lane ``k`` = lane ``2k`` + lane ``2k+1``, 64 -> 32 -> ... -> 1); the
    largest error as the largest bit pattern of the float32 ``|x - dq|``, so that a NaN (whose bits
    are above every number's) wins, as in numpy's ``max``.  The lanes are updated element-wise, 64 at
    a time, which vectorises without reassociating any sum (``lanes``: float64 [128] scratch, the
    error's lanes then those of x^2; ``ml``: uint32 [64], the largest error's bits lane by lane)."""
    L = _L
    for k in range(L + L):
        lanes[k] = 0.0
    for k in range(L):
        ml[k] = 0
    g = n // L
    for t in range(g):
        o = t * L
        for k in range(L):
            x = buf[o + k]
            y = dq[o + k]
            v = np.float64(x)
            d = v - np.float64(y)
            lanes[k] += d * d
            lanes[L + k] += v * v
            a = uand(f32_bits(x - y), 0x7FFFFFFF)
            ml[k] = a if a > ml[k] else ml[k]
    o = g * L
    for k in range(n - o):
        x = buf[o + k]
        y = dq[o + k]
        v = np.float64(x)
        d = v - np.float64(y)
        lanes[k] += d * d
        lanes[L + k] += v * v
        a = uand(f32_bits(x - y), 0x7FFFFFFF)
        ml[k] = a if a > ml[k] else ml[k]
    m = np.uint32(0)
    for k in range(L):
        m = ml[k] if ml[k] > m else m
    w = L
    while w > _U1:
        w //= _U2
        for k in range(w):
            lanes[k] = lanes[_U2 * k] + lanes[_U2 * k + _U1]
            lanes[L + k] = lanes[L + _U2 * k] + lanes[L + _U2 * k + _U1]
    return lanes[0], lanes[L], m


@shared
def _stats(stats, s0, s1, mbits):
    stats[0] = s0
    stats[1] = s1
    stats[2] = np.float64(f32_from_bits(mbits))


# -- integer groups -------------------------------------------------------------------------------------------
@inline
def _int_codes(buf, dq, cb, j0, count, s, zf, qmin, qmax, off, kind, asym):
    """Codes of the ``count`` elements from ``j0`` for the scale ``s`` and zero point ``zf``: ``c =
    rint(clip(T(x / s)))`` (``asym``, a constant: ``rint(clip(T(T(x / s) + zf)))``), NaN giving 0,
    stored in ``cb`` as the byte of ``c + off``; ``dq = T((c - zf) * s)``.  (A zero ``c`` may be -0
    here where ctarith's is +0, through int8: ``dq`` is then -0, which no statistic tells from +0.)"""
    for i in range(count):
        j = j0 + np.uint64(i)
        q = _rnd(buf[j] / s, kind)
        if asym:
            q = _rnd(q + zf, kind)
        q = qmin if q < qmin else q
        q = qmax if q > qmax else q
        c = np.float32(0.0) if q != q else np.rint(q)
        dq[j] = _rnd((c - zf) * s, kind)
        cb[j] = np.uint8(uand(np.int32(c) + off, 0xFF))


@inline
def _int_group(buf, dq, cb, j0, count, sym, half, rng, qmin, qmax, eps, off, kind):
    """One integer group (``count`` elements from ``j0``): its parameters as ctarith ``params`` computes
    them, then its codes (:func:`_int_codes`); returns (scale, zero point as a float)."""
    if sym:
        s = _rnd(_amax(buf, j0, count) / half, kind)
        s = eps if s == 0 else s
        _int_codes(buf, dq, cb, j0, count, s, np.float32(0.0), qmin, qmax, off, kind, False)
        return s, np.float32(0.0)
    lo, hi = _range0(buf, j0, count)
    s = _rnd(_rnd(hi - lo, kind) / rng, kind)
    z = _rnd(qmin - _rnd(lo / s, kind), kind)          # from the scale before its epsilon
    z = qmin if z < qmin else z
    z = qmax if z > qmax else z
    zf = np.float32(0.0) if z != z else np.rint(z)
    s = eps if s == 0 else s
    _int_codes(buf, dq, cb, j0, count, s, zf, qmin, qmax, off, kind, True)
    return s, zf


@inline
def _ints(src, kind, rows, cols, bits, group, sym, packed, codes, scale, zp, stats):
    """:func:`ints_bf16` and its siblings, for the weight type ``kind`` (a constant)."""
    n = np.uint64(cols)
    G = np.uint64(group)
    ng = n // G
    half_b = np.int32(1 << (bits - 1))                 # 2^(b-1): -qmin, and what a stored code adds
    qmin = -np.float32(half_b)
    qmax = np.float32(half_b) - np.float32(1.0)
    half = _rnd((qmax - qmin) / np.float32(2.0), kind)     # (2^b - 1) / 2: exact in every type
    rng = _rnd(qmax - qmin, kind)
    eps = _eps(kind)
    off = half_b if packed else np.int32(0)
    B = np.uint64(bits)
    row_bytes = n * B // _U8                         # packed: n is a multiple of 32
    buf = np.empty(cols, np.float32)
    dq = np.empty(cols, np.float32)
    cb = np.zeros((n + _U7) & ~_U7, np.uint8)
    lanes = np.empty(2 * STATS_LANES)
    ml = np.empty(STATS_LANES, np.uint32)
    out16, out32, out64 = codes.view(np.uint16), codes.view(np.uint32), codes.view(np.uint64)
    s16, s32 = scale.view(np.uint16), scale.view(np.float32)
    zp32 = zp.view(np.uint32)
    s0 = 0.0
    s1 = 0.0
    mbits = np.uint32(0)
    for r in range(rows):
        if widen_row(src, kind, r, n, buf):
            stats[3] = r
            return
        base = np.uint64(r) * n
        for g in range(ng):
            if G == np.uint64(128):                  # every group preset's size: loops of known length
                s, zf = _int_group(buf, dq, cb, g * G, 128, sym, half, rng, qmin, qmax, eps, off, kind)
            else:
                s, zf = _int_group(buf, dq, cb, g * G, G, sym, half, rng, qmin, qmax, eps, off, kind)
            _put_wt(s16, s32, np.uint64(r) * ng + g, s, kind)
            if not sym:
                # the zero point plus 2^(b-1), packed along the rows: bit r * bits of column g's string
                pos = np.uint64(r) * B
                w = (pos >> np.uint64(5)) * ng + g
                sh = pos & np.uint64(31)
                u = np.uint64(np.int32(zf) + half_b)
                zp32[w] |= np.uint32((u << sh) & np.uint64(0xFFFFFFFF))
                if sh + B > _U32:
                    zp32[w + ng] |= np.uint32(u >> (_U32 - sh))
        if packed:
            _pack_row(cb, n, bits, codes, out16, out32, out64, np.uint64(r) * row_bytes)
        else:
            for j in range(n):
                codes[base + j] = cb[j]
        e0, e1, m = _err(buf, dq, n, lanes, ml)
        s0 += e0
        s1 += e1
        mbits = m if m > mbits else mbits
    _stats(stats, s0, s1, mbits)


@kernel
def ints_bf16(src, rows, cols, bits, group, sym, packed, codes, scale, zp, stats):
    """Integer ``bits``-bit codes (2 to 8) of a bfloat16 slab's groups of ``group`` columns (per
    channel: ``group`` = ``cols``), as ctarith ``params`` / ``codes`` compute them: symmetric ``s =
    T(amax / T((2^b - 1) / 2))``; asymmetric ``s = T(T(hi - lo) / T(2^b - 1))`` and zero point
    ``rint(clip(T(qmin - T(lo / s))))`` (NaN: 0; computed before a zero scale becomes ``T``'s
    epsilon); codes ``rint(clip(T(T(x / s) + z)))`` and ``dq = T((code - z) * s)``.

    Outputs (byte arrays, each a whole number of 8-byte words, 8 bytes to spare): ``codes``: ``packed``
    (``cols`` a multiple of 32), each row's codes plus ``2^(b-1)`` packed densely into int32 words
    (ctarith ``pack_ints``), else int8 codes;
    ``scale``: the scales in ``T`` (``[rows, cols / group]``); ``zp`` (asymmetric; zeroed by the caller):
    the zero points plus ``2^(b-1)`` packed along the rows (``pack_ints(..., axis=0)``).  ``stats``:
    see the module's docstring.  :func:`ints_f16` and :func:`ints_f32`: the same for float16 and
    float32 slabs."""
    _ints(src, 2, rows, cols, bits, group, sym, packed, codes, scale, zp, stats)


@kernel
def ints_f16(src, rows, cols, bits, group, sym, packed, codes, scale, zp, stats):
    """:func:`ints_bf16` of a float16 slab."""
    _ints(src, 1, rows, cols, bits, group, sym, packed, codes, scale, zp, stats)


@kernel
def ints_f32(src, rows, cols, bits, group, sym, packed, codes, scale, zp, stats):
    """:func:`ints_bf16` of a float32 slab."""
    _ints(src, 0, rows, cols, bits, group, sym, packed, codes, scale, zp, stats)


# -- float8 per channel and in 2-D blocks --------------------------------------------------------------------
@inline
def _fp8_codes(buf, dq, codes, base, j0, count, s, kind):
    """Float8 e4m3fn codes of the ``count`` elements from ``j0`` for the scale ``s``: ``e4m3(clip(T(x /
    s), ±448))``, stored at ``codes[base + j]``; ``dq = T(value * s)``."""
    for i in range(count):
        j = j0 + np.uint64(i)
        q = _rnd(buf[j] / s, kind)
        q = -_FP8_MAX if q < -_FP8_MAX else q
        q = _FP8_MAX if q > _FP8_MAX else q
        code, v = _e4m3_round(q)
        codes[base + j] = np.uint8(code)
        dq[j] = _rnd(v * s, kind)


@inline
def _fp8(src, kind, rows, cols, bh, bw, codes, scale, stats):
    """:func:`fp8_bf16` and its siblings, for the weight type ``kind`` (a constant)."""
    n = np.uint64(cols)
    BH = np.uint64(bh)
    BW = np.uint64(bw)
    pc = (n + BW - _U1) // BW
    full = n // BW                                   # blocks of the whole width
    half = _rnd(np.float32(448.0), kind)
    eps = _eps(kind)
    buf = np.empty(cols, np.float32)
    dq = np.empty(cols, np.float32)
    pa = np.empty(pc, np.float32)
    lanes = np.empty(2 * STATS_LANES)
    ml = np.empty(STATS_LANES, np.uint32)
    s16, s32 = scale.view(np.uint16), scale.view(np.float32)
    s0 = 0.0
    s1 = 0.0
    mbits = np.uint32(0)
    R = np.uint64(rows)
    r0 = _U0
    while r0 < R:
        r1 = min(r0 + BH, R)
        for b in range(pc):
            pa[b] = 0
        for r in range(r0, r1):                      # the band's ranges (a zero-padded block: the same)
            if widen_row(src, kind, r, n, buf):
                stats[3] = r
                return
            for b in range(pc):
                if BW == np.uint64(128) and b < full:
                    a = _amax(buf, b * BW, 128)
                else:
                    a = _amax(buf, b * BW, min(BW, n - b * BW))
                pa[b] = a if a > pa[b] else pa[b]
        for b in range(pc):
            s = _rnd(pa[b] / half, kind)
            s = eps if s == 0 else s
            pa[b] = s
            _put_wt(s16, s32, (r0 // BH) * pc + b, s, kind)
        for r in range(r0, r1):
            if r1 - r0 > _U1:                        # a band's rows widened again (one row is in buf)
                widen_row(src, kind, r, n, buf)
            base = np.uint64(r) * n
            for b in range(pc):
                if BW == np.uint64(128) and b < full:
                    _fp8_codes(buf, dq, codes, base, b * BW, 128, pa[b], kind)
                else:
                    _fp8_codes(buf, dq, codes, base, b * BW, min(BW, n - b * BW), pa[b], kind)
            e0, e1, m = _err(buf, dq, n, lanes, ml)
            s0 += e0
            s1 += e1
            mbits = m if m > mbits else mbits
        r0 = r1
    _stats(stats, s0, s1, mbits)


@kernel
def fp8_bf16(src, rows, cols, bh, bw, codes, scale, stats):
    """Float8 e4m3fn codes of a bfloat16 slab's blocks of ``bh`` rows and ``bw`` columns (per channel: 1
    and ``cols``; FP8_BLOCK: 128 and 128, the last blocks partial, as if zero-padded), as ctarith
    computes them: ``s = T(amax / T(448))`` (0: ``T``'s epsilon), codes ``e4m3(clip(T(x / s), ±448))``
    (ties to even) and ``dq = T(value * s)``.  A band of ``bh`` rows at a time: its blocks' ranges, then
    its rows' codes.  Outputs: ``codes`` one byte an element; ``scale`` the scales in ``T``,
    ``[ceil(rows / bh), ceil(cols / bw)]``; ``stats``: see the module's docstring.  :func:`fp8_f16` and
    :func:`fp8_f32`: the same for float16 and float32 slabs."""
    _fp8(src, 2, rows, cols, bh, bw, codes, scale, stats)


@kernel
def fp8_f16(src, rows, cols, bh, bw, codes, scale, stats):
    """:func:`fp8_bf16` of a float16 slab."""
    _fp8(src, 1, rows, cols, bh, bw, codes, scale, stats)


@kernel
def fp8_f32(src, rows, cols, bh, bw, codes, scale, stats):
    """:func:`fp8_bf16` of a float32 slab."""
    _fp8(src, 0, rows, cols, bh, bw, codes, scale, stats)


# -- float4: NVFP4 and MXFP4 -------------------------------------------------------------------------------------
@shared
def _mx_scale(a, kind):
    """(scale value, stored uint8 exponent) of an MX group of absolute maximum ``a`` (a value of
    ``T``), as ctarith ``params`` / ``mx_stored``: ``a`` rounded to a power of two on ``T``'s bits
    (adding a quarter of the mantissa's range carries a mantissa of 0.75 or more into the exponent,
    which is then kept alone: 0 stays 0, a carry out of the largest exponent gives infinity), the
    exponent ``e = clip(127 + log2(that) - 2, 0, 255)`` (0 for 0, 255 for infinity), the value
    ``T(2^(e - 127))`` (float16 rounds 2^-25 and below to 0 and overflows from 2^16), a zero value
    replaced by 1; stored: ``127 + log2(value)``, 127 for 1 and for infinity.  Selects, no branches:
    a loop over a row's groups vectorises."""
    if kind == 1:
        fe = np.int32(ushr(uand(uadd(_f16_bits(a), 0x100), 0xFC00), 10))      # 0, 1..30, 31 (inf)
        e = fe + 110                                 # 127 + (fe - 15) - 2
        top = 31
    else:
        # bfloat16 is the high half of a float32: its carry (2^5) and mask are float32's, shifted
        fe = np.int32(ushr(uand(uadd(f32_bits(a), 0x200000), 0xFF800000), 23))  # 0, 1..254, 255 (inf)
        e = fe - 2
        top = 255
    e = np.int32(0) if (fe == 0) | (e < 0) else e
    e = np.int32(255) if fe == top else e
    bits = ushl(e, 23) if e > 0 else np.uint32(0x00400000)             # 2^(e-127); 2^-127 subnormal
    stored = np.uint32(e)
    if kind == 1:                                    # float16: 2^-25 and below round to 0, 2^16 is inf
        flush = e - 127 < -24
        bits = np.uint32(0x3F800000) if flush else bits
        stored = np.uint32(127) if flush else stored
        bits = np.uint32(0x7F800000) if e - 127 > 15 else bits
    stored = np.uint32(127) if bits == 0x7F800000 else stored
    return f32_from_bits(bits), np.uint8(stored)


@inline
def _fp4_group(buf, dq, cb, j0, size, mx, inv, s, kind):
    """Codes (``cb``, one a byte) and ``dq = T(value * s)`` of one float4 group: the ``size`` (a
    constant: 16 or 32) elements from ``j0``, of scale ``s``: MX ``q = T(x * inv)`` (``inv = 1 / s``,
    exact for a power of two: the same rounding as ``T(x / s)``), NVFP4 ``q = x / s`` in float32."""
    for i in range(size):
        j = j0 + np.uint64(i)
        if mx:
            q = _rnd(buf[j] * inv, kind)
        else:
            q = buf[j] / s
        code, v = _fp4(q)
        cb[j] = np.uint8(code)
        dq[j] = _rnd(v * s, kind)


@inline
def _fp4_rows(src, kind, rows, cols, mx, gscale, codes, scale, stats):
    """:func:`fp4_bf16` and its siblings, for the weight type ``kind`` (a constant).  A row at a time:
    the groups' ranges, then their scales (a loop over the groups, which vectorises: ``pa``, ``ps``,
    ``pi``), then the codes a group at a time (a loop of known length)."""
    n = np.uint64(cols)
    G = np.uint64(32 if mx else 16)
    ng = n // G
    six = _rnd(_FP4_MAX, kind)
    g = np.float32(gscale)
    zero8 = np.float32(0.125)                        # float8 e4m3's epsilon (a zero scale)
    zcode = _e4m3(zero8)
    buf = np.empty(cols, np.float32)
    dq = np.empty(cols, np.float32)
    cb = np.empty(cols, np.uint8)
    out32 = codes.view(np.uint32)
    pa = np.empty(ng, np.float32)
    ps = np.empty(ng, np.float32)
    pi = np.empty(ng, np.float32)
    lanes = np.empty(2 * STATS_LANES)
    ml = np.empty(STATS_LANES, np.uint32)
    s0 = 0.0
    s1 = 0.0
    mbits = np.uint32(0)
    for r in range(rows):
        if widen_row(src, kind, r, n, buf):
            stats[3] = r
            return
        o = np.uint64(r) * ng
        if mx:
            for gi in range(ng):
                pa[gi] = _amax32(buf, gi * G)
            for gi in range(ng):
                v, stored = _mx_scale(pa[gi], kind)
                scale[o + gi] = stored
                ps[gi] = v
                pi[gi] = np.float32(1.0) / v
            for gi in range(ng):
                _fp4_group(buf, dq, cb, gi * G, 32, True, pi[gi], ps[gi], kind)
        else:
            for gi in range(ng):
                pa[gi] = _amax16(buf, gi * G)
            for gi in range(ng):
                gs = g * _rnd(pa[gi] / six, kind)
                gs = _FP8_MAX if gs > _FP8_MAX else gs
                code = _e4m3(gs)
                s8 = _e4m3_value(code)
                zero = s8 == 0
                scale[o + gi] = np.uint8(zcode if zero else code)
                ps[gi] = (zero8 if zero else s8) / g
            for gi in range(ng):
                _fp4_group(buf, dq, cb, gi * G, 16, False, np.float32(0.0), ps[gi], kind)
        _pack_nibbles(cb, n, out32, np.uint64(r) * (n >> _U1))
        e0, e1, m = _err(buf, dq, n, lanes, ml)
        s0 += e0
        s1 += e1
        mbits = m if m > mbits else mbits
    _stats(stats, s0, s1, mbits)


@kernel
def fp4_bf16(src, rows, cols, mx, gscale, codes, scale, stats):
    """Float4 e2m1 codes of a bfloat16 slab, packed two a byte (``codes``, ``[rows, cols / 2]``), and
    their group scales (``scale``, one byte a group), as ctarith computes them:

    - NVFP4 (``mx`` False; groups of 16, the global scale ``gscale``, finite and positive): ``scale =
      e4m3(min(g * T(amax / T(6)), 448))`` (0: 0.125), stored as its float8 code; codes of ``x / (scale
      / g)`` in float32; ``dq = T(value * (scale / g))``;
    - MX (groups of 32): the uint8 exponent of :func:`_mx_scale`; codes of ``T(x / 2^k)``; ``dq =
      T(value * 2^k)``.

    ``stats``: see the module's docstring.  :func:`fp4_f16` and :func:`fp4_f32`: the same for float16
    and float32 slabs."""
    _fp4_rows(src, 2, rows, cols, mx, gscale, codes, scale, stats)


@kernel
def fp4_f16(src, rows, cols, mx, gscale, codes, scale, stats):
    """:func:`fp4_bf16` of a float16 slab."""
    _fp4_rows(src, 1, rows, cols, mx, gscale, codes, scale, stats)


@kernel
def fp4_f32(src, rows, cols, mx, gscale, codes, scale, stats):
    """:func:`fp4_bf16` of a float32 slab."""
    _fp4_rows(src, 0, rows, cols, mx, gscale, codes, scale, stats)


#: the kernels by the weight's ``kind`` (0 float32, 1 float16, 2 bfloat16)
INTS = (ints_f32, ints_f16, ints_bf16)
FP8 = (fp8_f32, fp8_f16, fp8_bf16)
FP4 = (fp4_f32, fp4_f16, fp4_bf16)
