"""Scalar building blocks of the fused kernels, compiled by numba (imported only by kernel modules).

Each function is exact — integer bit manipulation, or float operations whose result is exactly
representable — and written so that LLVM can vectorise the loops that inline it.  No fast-math:
see :mod:`quantspec._core.jit`.

- :func:`f32_bits` / :func:`f32_from_bits`: reinterpret a float32 as its uint32 bit pattern and back.
- :func:`narrow_code`: round a float32 to a narrow float format (float16, the float8 types, float6,
  float4), ties to even, and encode it; what happens on overflow and to NaN is given by the format
  record (:class:`quantspec._core.fastfmt.Fmt`).  The same rounding as
  :func:`quantspec._core.narrowfloat.round_to_grid`, done on the bit pattern.
- :func:`bf16_code`: float32 -> bfloat16, ties to even, as ml_dtypes does it.
- :func:`f16_value`: float16 bit pattern -> float32 (exact).
- :func:`round_to`: a float32 rounded to float16 or bfloat16 precision, returned as float32.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["f32_bits", "f32_from_bits", "narrow_code", "bf16_code", "f16_code", "f16_value", "round_to",
           "P_F32", "P_F16", "P_BF16", "uadd", "usub", "uand", "uor", "ushl", "ushr", "iadd", "isub", "iand", "ixor"]

P_F32, P_F16, P_BF16 = 0, 1, 2


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
iadd = _binop32("add", types.int32)
isub = _binop32("sub", types.int32)
iand = _binop32("and_", types.int32)
ixor = _binop32("xor", types.int32)


@njit(inline="always")
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
    mag = np.uint32(overmag) if mag > maxmag else mag
    signed = ushl(ushr(u, 31), signpos)
    code = np.uint32(0) if (fnuz & (mag == 0)) else uor(signed, mag)
    nan = uor(nanbits, signed) if nansigned else np.uint32(nanbits)
    return nan if a > 0x7F800000 else code


@njit(inline="always")
def bf16_code(v):
    """float32 -> bfloat16 bits, ties to even; NaN keeps its sign and becomes quiet (ml_dtypes)."""
    u = f32_bits(v)
    rounded = ushr(uadd(uadd(u, 0x7FFF), uand(ushr(u, 16), 1)), 16)
    nan = uor(ushr(u, 16), 0x40)
    return nan if uand(u, 0x7FFFFFFF) > 0x7F800000 else rounded


@njit(inline="always")
def f16_code(v):
    """float32 -> float16 bits, ties to even, overflow to infinity; NaN as numpy encodes it."""
    u = f32_bits(v)
    payload = ushr(uand(u, 0x7FFFFF), 13)
    nan = uor(uand(ushr(u, 16), 0x8000), uadd(0x7C00, payload if payload != 0 else np.uint32(1)))
    code = narrow_code(v, 10, -14, 15, 0x7C00, 0x7C00, 0x7E00, True, False, 15)
    return nan if uand(u, 0x7FFFFFFF) > 0x7F800000 else code


@njit(inline="always")
def f16_value(h):
    """float16 bits (any unsigned integer) -> float32, exactly."""
    sign = ushl(uand(h, 0x8000), 16)
    e = uand(ushr(h, 10), 0x1F)
    m = uand(h, 0x3FF)
    normal = uor(uor(sign, ushl(uadd(e, 112), 23)), ushl(m, 13))
    special = uor(uor(sign, 0x7F800000), ushl(m, 13))
    sub = f32_from_bits(uor(sign, f32_bits(np.float32(m) * np.float32(2.0 ** -24))))
    bits = special if e == 31 else normal
    return sub if e == 0 else f32_from_bits(bits)


@njit(inline="always")
def round_to(v, p):
    """float32 ``v`` rounded to precision ``p`` (P_F32: unchanged; P_F16; P_BF16), as float32."""
    if p == P_F16:
        return f16_value(f16_code(v))
    if p == P_BF16:
        return f32_from_bits(ushl(bf16_code(v), 16))
    return v
