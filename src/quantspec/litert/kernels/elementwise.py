"""Binary element-wise int8 kernels: ADD, SUB, MUL, DIV, MAXIMUM, MINIMUM.

All broadcast their inputs (numpy rules, up to rank 8 as LiteRT's ``BroadcastBinaryOpSimple``) and
the arithmetic ones take a fused activation.  Reference kernels: ``K/add.cc`` + ``reference_integer_ops
::AddFunc``, ``K/sub.cc`` + ``reference_ops::SubElementwise``, ``K/mul.cc`` + ``reference_integer_ops::
MulElementwise``, ``K/maximum_minimum.cc``.

ADD / SUB bring both inputs to a common scale ``2 * max(s1, s2)`` with 20 bits of headroom::

    twice = double(2.0f * max(s1, s2))                           # the product in float32
    r1 = s1 / twice,  r2 = s2 / twice,  ro = twice / double(f32(2^20) * f32(so))
    a = MBQM<1((x - z1) << 20, r1),  b = MBQM<1((y - z2) << 20, r2)
    out = clamp(MBQM<1(a +- b, ro) + zo)                         # MBQM<1: SmallerThanOneExp

MUL: ``real = f32(f32(s1) * f32(s2) / f32(so))`` (all float32), ``out = clamp(MBQM((x - z1) * (y - z2),
real) + zo)``.

DIV (``K/div.cc``, ``reference_ops::DivElementwise``; int8, the same in every resolver): with
``M, e`` from ``QuantizeMultiplier(s1 / (s2 * so))`` (float32 arithmetic), per element::

    a = x - z1,  b = y - z2   (both negated where b < 0; b == 0 fails at Eval)
    inv, r = GetReciprocal(b, 31)            (Q0.31 reciprocal, exponent r)
    h = CountLeadingSignBits(a)
    out = clamp(zo + MBQM<1(SRDHM(a << h, inv), M, e - r - h))

The rounding shift ``h + r - e`` often exceeds 31 for small dividends (undefined behaviour in C++);
the interpreter (x86-64) then shifts by it modulo 32 and adds one to every non-negative value
(gemmlowp's mask ``(1 << n) - 1`` narrowed to int32 is -1), which quantspec reproduces for shifts up
to 63 (measured: 1,416 such values, 0 differing, in every resolver); a negative shift or one above
63 is refused.

MAXIMUM / MINIMUM select raw int8 (or int16) values; LiteRT does not check that the
inputs share the output's scale (a mismatch is computed silently, as here).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InvalidArgumentError, RangeError, UnsupportedError
from .. import fast
from .. import fixedpoint as fp
from ..fixedpoint import mbqm, rdbpot, srdhm, wrap_int32
from . import _common as c
from .base import Kernel, register

__all__ = ["Add", "Sub", "Mul", "Maximum", "Minimum"]

_INT8 = np.dtype(np.int8)


@dataclass(frozen=True)
class AddSubParams:
    op: str
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    output_shape: tuple[int, ...]
    offsets: tuple[int, int]           # the input zero points
    multipliers: tuple[int, int, int]  # input1, input2, output
    shifts: tuple[int, int, int]
    output_zero_point: int
    act_min: int
    act_max: int
    left_shift: int = 20
    dtype: np.dtype = _INT8
    pot_shifts: tuple[int, int] | None = None    # int16 with power-of-two scales: the input shifts


def _add_sub_prepare(op: str, inputs, outputs, options) -> AddSubParams:
    x, y, o, ((s1, z1), (s2, z2), (so, zo)) = c.binary_operands(op, inputs, outputs, output_type="same",
                                                                types=("int8", "int16"))
    lo, hi = c.fused_range(op, options, o)
    shape = c.broadcast_shape(op, x.shape, y.shape)
    wide = x.dtype.name == "int16"
    left_shift = 20
    if wide:
        if (z1, z2, zo) != (0, 0, 0):
            raise c.limit("int16-zero-point", InvalidArgumentError(
                f"{op} zero points", "must be 0 for int16 (LiteRT rejects the model at prepare)", (z1, z2, zo)))
        left_shift = 15
        if c.option(options, "pot_scale_int16", True, kind=bool):
            logs = [c.checked_log2(s) for s in (s1, s2, so)]
            if all(ok for ok, _ in logs):
                return _pot_prepare(op, x, y, o, shape, [v for _, v in logs], lo, hi)

    twice = np.float64(np.float32(2) * max(s1, s2))
    r1 = np.float64(s1) / twice
    r2 = np.float64(s2) / twice
    ro = twice / np.float64(np.float32(1 << left_shift) * so)
    m1, e1 = fp.quantize_multiplier_smaller_than_one_exp(r1)
    m2, e2 = fp.quantize_multiplier_smaller_than_one_exp(r2)
    if op == "ADD" or ro < 1.0:
        try:
            mo, eo = fp.quantize_multiplier_smaller_than_one_exp(ro)
        except RangeError:
            raise c.limit("add-output-multiplier", UnsupportedError(
                f"{op} output", "an output multiplier 2*max(s1, s2) / (2^20 * s_out) >= 1 (an output scale this "
                "small) makes LiteRT abort (TFLITE_CHECK)", float(so))) from None
    else:
        try:
            mo, eo = fp.quantize_multiplier_greater_than_one(ro)
        except RangeError:
            raise c.limit("sub-output-multiplier", UnsupportedError(
                f"{op} output", "an output multiplier of exactly 1.0 makes LiteRT abort (TFLITE_CHECK)",
                float(so))) from None
    return AddSubParams(op, (tuple(x.shape), tuple(y.shape)), shape, (z1, z2), (m1, m2, mo), (e1, e2, eo), zo, lo, hi,
                        left_shift, np.dtype(x.dtype.name))


def _pot_prepare(op, x, y, o, shape, logs, lo, hi) -> AddSubParams:
    """int16 ADD / SUB with power-of-two scales (``pot_scale_int16``): one input is shifted right to
    the other's scale, the two added (subtracted) with int16 saturation."""
    l1, l2, lo_ = logs
    sh1, sh2 = l1 - lo_, l2 - lo_
    if not ((sh1 == 0 or sh2 == 0) and sh1 <= 0 and sh2 <= 0):
        raise c.limit("int16-pot-scales", InvalidArgumentError(
            f"{op} scales", "with power-of-two int16 scales, one input needs the output's scale and the other one "
            "no larger (LiteRT rejects the model at prepare)", (l1, l2, lo_)))
    if op == "ADD" and tuple(x.shape) != tuple(y.shape) and \
            int(np.prod(x.shape, dtype=np.int64)) != int(np.prod(y.shape, dtype=np.int64)):
        raise c.limit("int16-pot-broadcast", UnsupportedError(
            f"{op} inputs", "the power-of-two int16 ADD kernel does not broadcast: LiteRT aborts (TFLITE_CHECK in "
            "MatchingElementsSize, at Eval)", (tuple(x.shape), tuple(y.shape))))
    return AddSubParams(op, (tuple(x.shape), tuple(y.shape)), shape, (0, 0), (0, 0, 0), (0, 0, 0), 0, lo, hi, 15,
                        np.dtype(np.int16), (sh1, sh2))


def _pot_compute(p: AddSubParams, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    from ..fixedpoint16 import rdbpot16

    sh1, sh2 = p.pot_shifts
    if p.op == "ADD" and x.shape != y.shape:         # same size, another shape: the flat elements pair up
        a, b = x.reshape(-1).astype(np.int64), y.reshape(-1).astype(np.int64)
    else:
        a, b = np.broadcast_arrays(x.astype(np.int64), y.astype(np.int64))
    if sh1 == 0:
        b = rdbpot16(b, -sh2)
    else:
        a = rdbpot16(a, -sh1)
    r = a + b if p.op == "ADD" else a - b
    r = np.clip(r, -(1 << 15), (1 << 15) - 1)
    return np.clip(r, p.act_min, p.act_max).astype(np.int16).reshape(p.output_shape)


def add_sub_compute(p: AddSubParams, arrays) -> list[np.ndarray]:
    x, y = c.check_arrays(p.op, arrays, [(0, p.shapes[0], p.dtype), (1, p.shapes[1], p.dtype)])
    if p.pot_shifts is not None:
        return [_pot_compute(p, x, y)]
    result = fast.add_sub(p, x, y) if p.dtype == _INT8 else None   # the same arithmetic, fused (litert.fast)
    if result is not None:
        return [result]
    m1, m2, mo = p.multipliers
    e1, e2, eo = p.shifts
    a = rdbpot(srdhm(wrap_int32((x.astype(np.int64) - p.offsets[0]) << p.left_shift), m1), -e1)
    b = rdbpot(srdhm(wrap_int32((y.astype(np.int64) - p.offsets[1]) << p.left_shift), m2), -e2)
    raw = wrap_int32(a + b if p.op == "ADD" else a - b)
    out = wrap_int32(c.requantize_smaller_than_one(raw, mo, eo, p.op) + p.output_zero_point)
    return [np.clip(out, p.act_min, p.act_max).astype(p.dtype).reshape(p.output_shape)]


class AddSubKernel(Kernel):
    def prepare(self, inputs, outputs, options):
        return _add_sub_prepare(self.name, inputs, outputs, options)

    def compute(self, prepared, inputs):
        return add_sub_compute(prepared, inputs)


@register
class Add(AddSubKernel):
    """ADD: int8 + int8 -> int8 with broadcasting and a fused activation."""

    name = "ADD"


@register
class Sub(AddSubKernel):
    """SUB: int8 - int8 -> int8 with broadcasting and a fused activation.  LiteRT rejects zero points
    outside [-128, 127]; an output multiplier above 1 goes through undefined behaviour in LiteRT
    (see :func:`._common.rdbpot_signed_exponent`)."""

    name = "SUB"


@dataclass(frozen=True)
class MulParams:
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    output_shape: tuple[int, ...]
    offsets: tuple[int, int]
    multiplier: int
    shift: int
    output_zero_point: int
    act_min: int
    act_max: int
    dtype: np.dtype = _INT8


@register
class Mul(Kernel):
    """MUL: int8 * int8 -> int8 with broadcasting and a fused activation; the real multiplier
    ``s1 * s2 / so`` is computed in float32."""

    name = "MUL"

    def prepare(self, inputs, outputs, options):
        x, y, o, ((s1, z1), (s2, z2), (so, zo)) = c.binary_operands(self.name, inputs, outputs, output_type="same",
                                                                    types=("int8", "int16"))
        lo, hi = c.fused_range(self.name, options, o)
        shape = c.broadcast_shape(self.name, x.shape, y.shape)
        if x.dtype.name == "int16" and (z1, z2, zo) != (0, 0, 0):
            raise c.limit("int16-zero-point", InvalidArgumentError("MUL zero points", "must be 0 for int16 (LiteRT "
                                                                   "fails at eval)", (z1, z2, zo)))
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            real = np.float64(s1 * s2 / so)                      # float32 arithmetic throughout
        if not np.isfinite(real):
            raise UnsupportedError("MUL output", "gives a non-finite multiplier s1 * s2 / s_out in float32", float(so))
        m, e = fp.quantize_multiplier(float(real))
        if e > 30:
            raise c.limit("multiplier-shift", UnsupportedError(
                "MUL output", "a multiplier s1 * s2 / s_out >= 2^30 needs a left shift of 31 or more, undefined in "
                "LiteRT's C++", float(real)))
        return MulParams((tuple(x.shape), tuple(y.shape)), shape, (z1, z2), m, e, zo, lo, hi, np.dtype(x.dtype.name))

    def compute(self, p: MulParams, arrays):
        x, y = c.check_arrays(self.name, arrays, [(0, p.shapes[0], p.dtype), (1, p.shapes[1], p.dtype)])
        result = fast.mul(p, x, y) if p.dtype == _INT8 else None   # the same arithmetic, fused (litert.fast)
        if result is not None:
            return [result]
        prod = wrap_int32((x.astype(np.int64) - p.offsets[0]) * (y.astype(np.int64) - p.offsets[1]))
        out = wrap_int32(mbqm(prod, p.multiplier, p.shift) + p.output_zero_point)
        return [np.clip(out, p.act_min, p.act_max).astype(p.dtype).reshape(p.output_shape)]


@dataclass(frozen=True)
class DivParams:
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    output_shape: tuple[int, ...]
    offsets: tuple[int, int]
    multiplier: int
    shift: int
    output_zero_point: int
    act_min: int
    act_max: int


def _leading_sign_bits(a: np.ndarray) -> np.ndarray:
    """``CountLeadingSignBits`` of int32 values: the redundant sign bits (31 for 0 and -1)."""
    return fp.clz(np.where(a >= 0, a, ~a)) - 1


@register
class Div(Kernel):
    """DIV: int8 / int8 -> int8 with broadcasting and a fused activation, in fixed point (a Q0.31
    reciprocal of the divisor)."""

    name = "DIV"

    def prepare(self, inputs, outputs, options):
        x, y, o, ((s1, z1), (s2, z2), (so, zo)) = c.binary_operands(self.name, inputs, outputs)
        lo, hi = c.fused_range(self.name, options, o)
        shape = c.broadcast_shape(self.name, x.shape, y.shape)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            real = np.float64(s1 / (s2 * so))                    # float32 arithmetic throughout
        if not np.isfinite(real) or real <= 0:
            raise UnsupportedError("DIV output", "gives a non-finite multiplier s1 / (s2 * s_out) in float32",
                                   float(real))
        m, e = fp.quantize_multiplier(float(real))
        return DivParams((tuple(x.shape), tuple(y.shape)), shape, (z1, z2), m, e, zo, lo, hi)

    def compute(self, p: DivParams, arrays):
        x, y = c.check_arrays(self.name, arrays, [(0, p.shapes[0], _INT8), (1, p.shapes[1], _INT8)])
        if np.any(y.astype(np.int64) == p.offsets[1]):
            raise InvalidArgumentError(f"{self.name} input 1", "must not hold its zero point (a zero divisor: "
                                       "LiteRT's Eval fails)", p.offsets[1])
        a = np.broadcast_to(x.astype(np.int64) - p.offsets[0], p.output_shape)
        b = np.broadcast_to(y.astype(np.int64) - p.offsets[1], p.output_shape)
        a, b = np.where(b < 0, -a, a), np.abs(b)
        inv, recip_shift = fp.get_reciprocal(b, 31)
        h = _leading_sign_bits(a)
        quotient = srdhm(a << h, np.asarray(inv, np.int64))
        exponent = np.asarray(h + np.asarray(recip_shift, np.int64) - p.shift, np.int64)   # of the rounding shift
        if np.any((exponent < 0) | (exponent > 63)):
            bad = np.flatnonzero(((exponent < 0) | (exponent > 63)).reshape(-1))[0]
            raise UnsupportedError(f"{self.name} input", "gives a final rounding shift outside [0, 63] (undefined "
                                   "behaviour in LiteRT's C++)", int(exponent.reshape(-1)[bad]))
        high = srdhm(quotient, np.int64(p.multiplier))
        # RoundingDivideByPOT past 31 (undefined in C++): x86 shifts by the exponent mod 32, and the
        # mask (1 << exponent) - 1 narrowed to int32 is -1, so one is added to every value >= 0
        # (measured on ai-edge-litert 2.3.0, the same in every resolver)
        wide = exponent > 31
        shifted = np.where(wide, (high >> (exponent & 31)) + (high >= 0), rdbpot(high, np.minimum(exponent, 31)))
        out = wrap_int32(shifted + p.output_zero_point)
        return [np.clip(out, p.act_min, p.act_max).astype(np.int8).reshape(p.output_shape)]


@dataclass(frozen=True)
class SelectParams:
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    output_shape: tuple[int, ...]
    dtype: np.dtype


class _MaxMin(Kernel):
    pick = staticmethod(np.maximum)

    def prepare(self, inputs, outputs, options):
        x, y, _, _ = c.binary_operands(self.name, inputs, outputs, output_type="same", quantized=False,
                                       types=("int8", "int16"))           # parameters play no part
        return SelectParams((tuple(x.shape), tuple(y.shape)), c.broadcast_shape(self.name, x.shape, y.shape),
                            np.dtype(x.dtype.name))

    def compute(self, p: SelectParams, arrays):
        x, y = c.check_arrays(self.name, arrays, [(0, p.shapes[0], p.dtype), (1, p.shapes[1], p.dtype)])
        return [self.pick(x, y).astype(p.dtype).reshape(p.output_shape)]


@register
class Maximum(_MaxMin):
    """MAXIMUM: the larger raw int8 / int16 value (inputs are meant to share the output's parameters)."""

    name = "MAXIMUM"
    pick = staticmethod(np.maximum)


@register
class Minimum(_MaxMin):
    """MINIMUM: the smaller raw int8 / int16 value (inputs are meant to share the output's parameters)."""

    name = "MINIMUM"
    pick = staticmethod(np.minimum)
