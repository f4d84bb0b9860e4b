"""Scalar building blocks of the fused kernels, compiled by numba (imported only by kernel modules).

Each function is exact — integer bit manipulation, or float operations whose result is exactly
representable — and written so that LLVM can vectorise the loops that inline it.  No fast-math:
see :mod:`quantspec._fastpath.jit`.

- :func:`f32_bits` / :func:`f32_from_bits`: reinterpret a float32 as its uint32 bit pattern and back.
- :func:`narrow_code`: round a float32 to a narrow float format (the float8 types, float6, float4),
  ties to even, and encode it; what happens on overflow and to NaN is given by its arguments (the
  ONNX kernels take them from ``quantspec.onnx.fast.float_format``).  The same rounding as
  :func:`quantspec._semantics.narrowfloat.round_to_grid`, done on the bit pattern.
- :func:`round_f16` / :func:`round_bf16`: a float32 rounded to float16 / bfloat16 precision,
  returned as float32.
- :func:`ftz`, :func:`round_half_away`, :func:`cvtt_int32`, :func:`cvtt_int64_low32`: flush-to-zero,
  ``std::round`` and the x86 truncating conversions.
"""

from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from . import jit

jit.install_cache_locator()

# Every kernel is compiled with IEEE semantics and nothing else: no fast-math (see jit.py), and
# numpy's error model, under which x / 0 is ±inf or NaN (numba's default "python" model raises
# ZeroDivisionError, and its per-element check also stops the loop from being vectorised).
_OPTIONS = dict(fastmath=False, error_model="numpy")


def inline(func):
    """A building block, inlined into the kernels that call it."""
    return njit(inline="always", **_OPTIONS)(func)


def shared(func):
    """A building block that many kernels or operations call: compiled once per signature (numba types
    it once, not once per place it is used, as it does what :func:`inline` gives it) and always
    inlined by LLVM (``forceinline``), so that the loops that call it still vectorise."""
    return njit(forceinline=True, **_OPTIONS)(func)


def function(func):
    """A function called (not inlined at numba level) by kernels."""
    return njit(**_OPTIONS)(func)


def kernel(func=None):
    """A kernel: compiled on first use for each signature, and cached on disk (where no cache
    directory can be written, compiled in memory: :func:`quantspec._fastpath.jit.uncached`).  Never
    ``parallel=True``: no kernel starts numba's threading layer (OpenMP, TBB or workqueue), whose idle
    threads spin and which a forked child cannot use; a kernel that runs on several threads claims
    its work items (:func:`claim`) on quantspec's pool (:func:`quantspec._fastpath.runner.launch`)."""
    def wrap(f):
        try:
            dispatcher = njit(cache=True, nogil=True, **_OPTIONS)(f)
        except RuntimeError:                # numba: "cannot cache function ...: no locator available"
            jit.uncached(f.__code__.co_filename)
            dispatcher = njit(cache=False, nogil=True, **_OPTIONS)(f)
        jit.lock_cache_saves(dispatcher)
        jit.mark_kernel(dispatcher)
        return dispatcher

    return wrap(func) if func is not None else wrap

__all__ = ["inline", "shared", "function", "kernel", "f32_bits", "f32_from_bits", "narrow_code", "round_f16",
           "round_bf16", "ftz", "HARDWARE_FTZ", "MXCSR_FTZ_DAZ", "mxcsr_get", "mxcsr_set", "round_half_away", "cvtt_int32", "cvtt_int64_low32", "uadd", "usub", "uand", "uor", "ushl", "ushr", "uxor", "prefetch", "minmax_keys16", "minmax_keys32", "amax_bits32", "iadd", "isub", "iand", "ixor",
           "claim", "finished", "widen_row"]



@intrinsic
def f32_bits(typingctx, x):
    """The uint32 bit pattern of a float32."""
    if x != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.uint32(types.float32), codegen


def _i32(builder, value, ty):
    """An integer of any width as an LLVM i32 (truncated, or extended by its signedness)."""
    if ty.bitwidth > 32:
        return builder.trunc(value, ir.IntType(32))
    if ty.bitwidth < 32:
        return (builder.sext if ty.signed else builder.zext)(value, ir.IntType(32))
    return value


@intrinsic
def f32_from_bits(typingctx, u):
    """The float32 whose bit pattern is the low 32 bits of the integer ``u``."""
    if not isinstance(u, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(_i32(builder, args[0], u), ir.FloatType())

    return types.float32(u), codegen


@intrinsic
def prefetch(typingctx, arr, index):
    """A hint to bring the cache line holding element ``index`` of the contiguous 1-D array ``arr``
    into the cache (x86 ``prefetcht0``; no effect on results, and none at all on an address outside
    the array: a prefetch never faults).  For loops whose next input is not yet in the cache."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(arr)(context, builder, args[0])
        ptr = builder.gep(ary.data, [args[1]])
        i8p = ir.IntType(8).as_pointer()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, ir.IntType(32),
                                            ir.IntType(32), ir.IntType(32)]), "llvm.prefetch.p0i8")
        i32 = ir.IntType(32)
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.none(arr, index), codegen


def _block_reduce(width: int, mode: str):
    """An intrinsic ``f(arr, j)`` over the ``width`` float32 elements ``arr[j:j + width]`` of a
    contiguous 1-D array (the caller checks the bounds): ``mode`` "minmax" gives the (min, max) of
    their order keys (the uint32 ``bits ^ ((0 - (bits >> 31)) | 0x80000000)``: the order of the values,
    -0 below +0), "amax" the largest magnitude bit pattern (``bits & 0x7FFFFFFF``).  One vector load
    and LLVM's vector reductions: a short block's reduction without the prologue and epilogue of a
    vectorised loop."""
    def typer(typingctx, arr, j):
        if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.float32
                and isinstance(j, types.Integer)):
            return None
        i32 = ir.IntType(32)
        vty = ir.VectorType(i32, width)

        def splat(c):
            return ir.Constant(vty, [i32(c)] * width)

        def reduce(builder, name, v):
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [vty]),
                                                f"llvm.vector.reduce.{name}.v{width}i32")
            return builder.call(fn, [v])

        def codegen(context, builder, signature, args):
            ary = context.make_array(arr)(context, builder, args[0])
            ptr = builder.bitcast(builder.gep(ary.data, [args[1]]), vty.as_pointer())
            bits = builder.load(ptr, align=4)
            if mode == "amax":
                return reduce(builder, "umax", builder.and_(bits, splat(0x7FFFFFFF)))
            mask = builder.or_(builder.sub(splat(0), builder.lshr(bits, splat(31))), splat(0x80000000))
            key = builder.xor(bits, mask)
            return context.make_tuple(builder, signature.return_type,
                                      [reduce(builder, "umin", key), reduce(builder, "umax", key)])

        ret = types.uint32 if mode == "amax" else types.UniTuple(types.uint32, 2)
        return ret(arr, j), codegen

    typer.__name__ = f"{mode}{width}"
    return intrinsic(typer)


#: order keys' (min, max) / largest magnitude bits of 16 or 32 float32 (:func:`_block_reduce`)
minmax_keys16 = _block_reduce(16, "minmax")
minmax_keys32 = _block_reduce(32, "minmax")
amax_bits32 = _block_reduce(32, "amax")


# 32-bit integer arithmetic.  numba types every operation on integers narrower than 64 bits as a
# 64-bit operation, and LLVM does not always narrow it back, which halves the vector width.  These
# take integers of any width, work on their low 32 bits (two's complement, wrapping) and return
# uint32 (u*) or int32 (i*).
def _binop32(op: str, result):
    def typer(typingctx, a, b):
        if not (isinstance(a, types.Integer) and isinstance(b, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            return getattr(builder, op)(_i32(builder, args[0], a), _i32(builder, args[1], b))

        return result(a, b), codegen

    typer.__name__ = f"{op}32"
    return intrinsic(typer)


uadd = _binop32("add", types.uint32)
usub = _binop32("sub", types.uint32)
uand = _binop32("and_", types.uint32)
uor = _binop32("or_", types.uint32)
ushl = _binop32("shl", types.uint32)
ushr = _binop32("lshr", types.uint32)
uxor = _binop32("xor", types.uint32)
iadd = _binop32("add", types.int32)
isub = _binop32("sub", types.int32)
iand = _binop32("and_", types.int32)
ixor = _binop32("xor", types.int32)


@inline
def narrow_code(v, mant, emin, bias, maxmag, overmag, nanbits, nansigned, fnuz, signpos):
    """The code of float32 ``v`` rounded (ties to even) to a narrow float with ``mant`` mantissa
    bits, smallest normal exponent ``emin`` and exponent bias ``bias``; the sign bit is bit
    ``signpos``.

    ``maxmag``: the magnitude code of the largest finite value; a rounded magnitude above it
    becomes ``overmag`` (``maxmag`` to saturate, else the infinity or NaN code).  NaN becomes
    ``nanbits``, with the sign of ``v`` when ``nansigned``.  ``fnuz``: the format has no -0 (a zero
    result is +0).  Returned as uint32.
    """
    u = f32_bits(v)
    a = uand(u, 0x7FFFFFFF)
    shift = usub(23, mant)
    # normal target: round the f32 exponent+mantissa field at bit `shift`, ties to even; a carry
    # into the exponent is the correct rounding up to the next binade
    r = ushr(uadd(uadd(a, usub(ushl(1, usub(shift, 1)), 1)), uand(ushr(a, shift), 1)), shift)
    normal = usub(r, ushl(127 - bias, mant))
    # subnormal target: |v| / 2**(emin - mant) is exact (a power-of-two scaling up), then rint
    # (the clamp only keeps the conversion defined in the lanes that take the normal branch)
    scaled = min(f32_from_bits(a) * f32_from_bits(ushl(127 + mant - emin, 23)), np.float32(1 << 24))
    sub = np.uint32(np.int32(np.rint(scaled)))
    mag = normal if a >= ushl(127 + emin, 23) else sub
    mag = np.uint32(overmag) if mag > np.uint32(maxmag) else mag
    signed = ushl(ushr(u, 31), signpos)
    code = np.uint32(0) if (fnuz & (mag == 0)) else uor(signed, mag)
    nan = uor(nanbits, signed) if nansigned else np.uint32(nanbits)
    return nan if a > 0x7F800000 else code


@inline
def round_f16(v):
    """float32 ``v`` rounded to float16 precision and range (ties to even), as float32: what
    converting to float16 and back gives, NaN kept as it is."""
    u = f32_bits(v)
    a = uand(u, 0x7FFFFFFF)
    # float16 normal range: round the f32 mantissa at bit 13 (a carry into the exponent is right)
    normal = f32_from_bits(uand(uadd(uadd(u, 0xFFF), uand(ushr(u, 13), 1)), 0xFFFFE000))
    # float16 subnormals (|v| < 2**-14) are multiples of 2**-24: adding 0.75 rounds |v| there
    # exactly (ties to even); the sign is put back so that -0 stays -0
    sub = f32_from_bits(uor(f32_bits((f32_from_bits(a) + np.float32(0.75)) - np.float32(0.75)), uand(u, 0x80000000)))
    r = normal if a >= 0x38800000 else sub
    r = f32_from_bits(uor(uand(u, 0x80000000), 0x7F800000)) if abs(r) > np.float32(65504.0) else r   # ±inf
    return v if a > 0x7F800000 else r


@inline
def round_bf16(v):
    """float32 ``v`` rounded to bfloat16 precision (ties to even), as float32; NaN kept."""
    u = f32_bits(v)
    r = f32_from_bits(uand(uadd(uadd(u, 0x7FFF), uand(ushr(u, 16), 1)), 0xFFFF0000))
    return v if uand(u, 0x7FFFFFFF) > 0x7F800000 else r


# -- rounding and conversions, as C/C++ on x86 does them -----------------------------------------
_TWO31 = 2147483648.0
_TWO63 = 9223372036854775808.0


@inline
def ftz(v):
    """float32 flush-to-zero: a subnormal becomes a zero of the same sign (x86 FTZ/DAZ)."""
    u = f32_bits(v)
    return f32_from_bits(uand(u, 0x80000000)) if uand(u, 0x7FFFFFFF) < 0x00800000 else v


@inline
def round_half_away(v):
    """Round to the nearest integer, ties away from zero (``std::round``); inf, NaN and -0 kept.
    ``v - trunc(v)`` is exact, so there is no double rounding."""
    t = np.trunc(v)
    up = abs(v - t) >= np.float32(0.5)
    return t + np.copysign(np.float32(1.0), v) if up else t


@inline
def cvtt_int32(v):
    """x86 ``cvttss2si``: truncation to int32; NaN, ±inf and values outside [-2^31, 2^31) give
    INT32_MIN.  (Computed without an out-of-range conversion, which LLVM leaves undefined.)"""
    inside = (v >= -_TWO31) & (v < _TWO31)
    i = np.int32(min(max(v, np.float32(-_TWO31)), np.float32(2147483520.0)))
    return i if inside else np.int32(-2147483648)


@inline
def cvtt_int64_low32(v):
    """The low 32 bits of x86 ``cvttss2si`` to int64 (NaN and values outside [-2^63, 2^63) give
    INT64_MIN, whose low half is 0): C++ ``static_cast<int32_t>(static_cast<int64_t>(v))``."""
    inside = (v >= -_TWO63) & (v < _TWO63)
    i = np.int64(min(max(v, np.float32(-_TWO63)), np.float32(9.2233715e18)))
    return np.int32(i) if inside else np.int32(0)


# -- the x86 flush-to-zero mode (TensorFlow's kernels run with FTZ and DAZ set) ---------------------
_X86 = platform.machine().lower() in ("x86_64", "amd64")
#: FTZ and DAZ can be switched on in hardware (x86 MXCSR); elsewhere kernels flush with :func:`ftz`
HARDWARE_FTZ = _X86
MXCSR_FTZ_DAZ = 0x8040


def _mxcsr_pointer(context, builder):
    slot = cgutils.alloca_once(builder, ir.IntType(32))
    return slot, builder.bitcast(slot, ir.IntType(8).as_pointer())


@intrinsic
def mxcsr_get(typingctx):
    """The calling thread's x86 MXCSR register."""

    def codegen(context, builder, signature, args):
        slot, ptr = _mxcsr_pointer(context, builder)
        fn = builder.module.declare_intrinsic("llvm.x86.sse.stmxcsr",
                                              fnty=ir.FunctionType(ir.VoidType(), [ptr.type]))
        builder.call(fn, [ptr])
        return builder.zext(builder.load(slot), ir.IntType(64))

    return types.int64(), codegen


@intrinsic
def mxcsr_set(typingctx, value):
    """Set the calling thread's x86 MXCSR register (a call LLVM does not move memory accesses across,
    so the loops between two calls run in the mode they set)."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        slot, ptr = _mxcsr_pointer(context, builder)
        builder.store(_i32(builder, args[0], value), slot)
        fn = builder.module.declare_intrinsic("llvm.x86.sse.ldmxcsr",
                                              fnty=ir.FunctionType(ir.VoidType(), [ptr.type]))
        builder.call(fn, [ptr])
        return context.get_dummy_value()

    return types.void(value), codegen


# -- non-temporal stores ------------------------------------------------------------------------
# A large output is written once and not read back soon: storing it with non-temporal (streaming)
# stores skips the read-for-ownership of each destination cache line, which is a third of the
# memory traffic of float32 -> int8 and almost half of int8 -> float32.  LLVM only emits them for
# aligned vector stores, which its loop vectoriser does not produce from a scalar loop, so a kernel
# computes a block into a small buffer and copies it out a cache line at a time with
# :func:`stream_line`; :func:`stream_fence` orders the streamed stores before the kernel returns.
LINE = 64


@intrinsic
def data_address(typingctx, arr):
    """The address of ``arr``'s first element, as uint64."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.ptrtoint(ary.data, ir.IntType(64))

    return types.uint64(arr), codegen


@intrinsic
def stream_line(typingctx, dst, index, src, start):
    """Copy the 64 bytes at ``src[start:]`` to ``dst[index:]`` with one non-temporal store.

    ``dst[index]`` must be 64-byte aligned (the caller guarantees it), and both arrays contiguous
    with 64 bytes available."""
    if not (isinstance(dst, types.Array) and isinstance(src, types.Array) and isinstance(index, types.Integer)
            and isinstance(start, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        dty, _, sty, _ = signature.args
        d = context.make_array(dty)(context, builder, args[0])
        s = context.make_array(sty)(context, builder, args[2])
        line = ir.VectorType(ir.IntType(8), LINE)
        source = builder.bitcast(builder.gep(s.data, [args[3]]), line.as_pointer())
        target = builder.bitcast(builder.gep(d.data, [args[1]]), line.as_pointer())
        store = builder.store(builder.load(source, align=1), target, align=LINE)
        store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)]))
        return context.get_dummy_value()

    return types.void(dst, index, src, start), codegen


@intrinsic
def stream_fence(typingctx):
    """Make this thread's streamed stores globally visible before anything that follows (streamed
    stores are weakly ordered).  x86: ``sfence``, the fence the vendors specify for non-temporal
    stores (LLVM lowers a ``fence seq_cst`` to a locked ``or``, which is not documented to order them
    on every processor); elsewhere a sequentially consistent fence."""

    def codegen(context, builder, signature, args):
        if _X86:
            sfence = builder.module.declare_intrinsic("llvm.x86.sse.sfence", fnty=ir.FunctionType(ir.VoidType(), []))
            builder.call(sfence, [])
        else:
            builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


# -- work shared between threads ------------------------------------------------------------------
# A parallel call's work items are claimed a few at a time from a counter that every participating
# thread increments atomically (quantspec._fastpath.pool): the calling thread starts at once and does
# all the work if no other thread comes, and waits only for work another thread has claimed.
# ``claims`` is an int64 array: [next unclaimed work item, work items finished].
def _claims_pointer(context, builder, signature, args, index):
    ary = context.make_array(signature.args[0])(context, builder, args[0])
    return builder.gep(ary.data, [ir.Constant(ir.IntType(64), index)])


@intrinsic
def claim(typingctx, claims, count):
    """Atomically add ``count`` to ``claims[0]``; the value it had (the first work item claimed)."""
    if not (isinstance(claims, types.Array) and claims.dtype == types.int64 and isinstance(count, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        n = context.cast(builder, args[1], signature.args[1], types.int64)
        return builder.atomic_rmw("add", _claims_pointer(context, builder, signature, args, 0), n, "seq_cst")

    return types.int64(claims, count), codegen


@intrinsic
def finished(typingctx, claims, count):
    """Atomically add ``count`` to ``claims[1]`` (work items done; after the stores of that work, which
    a streaming kernel fences first), and return the new total."""
    if not (isinstance(claims, types.Array) and claims.dtype == types.int64 and isinstance(count, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        n = context.cast(builder, args[1], signature.args[1], types.int64)
        old = builder.atomic_rmw("add", _claims_pointer(context, builder, signature, args, 1), n, "seq_cst")
        return builder.add(old, n)

    return types.int64(claims, count), codegen


@shared
def widen_row(src, kind, r, n, buf):
    """Row ``r`` (``n`` elements) of a slab of raw bytes ``src`` (``kind`` 0, 1, 2: float32, float16,
    bfloat16) widened to float32 into ``buf``, exactly; 1 when the row holds a NaN or an infinity,
    else 0.  (An exponent field of all ones is found in 32-bit integers, which vectorise at full
    width: ``(bits & 0x7F800000) + 0x00800000`` has bit 31 set exactly then.)"""
    bad = np.uint32(0)
    n = np.uint64(n)
    base = np.uint64(r) * n
    if kind == 2:                                    # bfloat16: the high half of a float32
        s = src.view(np.uint16)
        for j in range(n):
            u = ushl(s[base + j], 16)
            bad = uor(bad, uadd(uand(u, 0x7F800000), 0x00800000))
            buf[j] = f32_from_bits(u)
    elif kind == 1:                                  # float16: rebiased, subnormals scaled exactly
        s = src.view(np.uint16)
        for j in range(n):
            h = np.uint32(s[base + j])
            sign = ushl(uand(h, 0x8000), 16)
            e = uand(ushr(h, 10), 0x1F)
            m = uand(h, 0x3FF)
            normal = uor(ushl(uadd(e, 112), 23), ushl(m, 13))
            special = uor(0x7F800000, ushl(m, 13))
            tiny = f32_bits(np.float32(m) * np.float32(5.960464477539063e-08))
            bad = uor(bad, ushl(uadd(e, 1), 26))     # e == 31: bit 31 set (e + 1 == 32)
            buf[j] = f32_from_bits(uor(sign, special if e == 31 else (tiny if e == 0 else normal)))
    else:
        f = src.view(np.float32)
        for j in range(n):
            v = f[base + j]
            bad = uor(bad, uadd(uand(f32_bits(v), 0x7F800000), 0x00800000))
            buf[j] = v
    return ushr(bad, 31)
