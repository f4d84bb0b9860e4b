"""int8 activations: LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION
(``K/activations.cc``, ``K/l2norm.cc``, ``KI/reference/softmax.h``, ``KI/reference/integer_ops/
log_softmax.h``, ``KI/reference/integer_ops/l2normalization.h``).

**LOGISTIC / TANH** look the input byte up in a 256-entry table built in float32 at prepare
(``LUTPopulateInt8``; BUILTIN_REF uses it too — the gemmlowp fixed-point versions are TFLM's)::

    d = f32(s_in) * f32(v - z_in)                     for v in -128..127
    t = 1.0f / (1.0f + expf(-d))    or    tanhf(d)
    LUT[v] = clamp(int32(TfLiteRound(t * f32(1 / s_out)) + z_out), -128, 127)

``expf`` / ``tanhf`` are the C library's (glibc on Linux, called through ctypes: the interpreter
calls the same functions); without a C library numpy's float32 functions are used.

**SOFTMAX** (REF, fixed point; beta from the options)::

    (M, ls) = QuantizeMultiplierGreaterThanOne(min(beta * s_in * 2^26, 2^31 - 1))
    diff_min = -CalculateInputRadius(5, ls)
    per row:  d = x - max(row);  e_d = exp_on_negative_values(F5(SRDHM(d << ls, M)))  where d >= diff_min
              sum = sum(Rescale<12>(e_d))  (wrapping int32);  (R, n) = GetReciprocal(sum, 12)
              out = clamp(RoundingDivideByPOT(SRDHM(R, e_d), n + 23) - 128), -128 where d < diff_min

**LOG_SOFTMAX** (REF): as SOFTMAX with beta 1 for the sum, then ``log_x_for_x_greater_than_or_equal_to_1``
and the reverse scaling (``PreprocessLogSoftmaxScalingExp``); output ``(16/256, 127)``.

**L2_NORMALIZATION**: ``acc = sum((x - z)^2)`` per row (wrapping int32),
``(M, s) = GetInvSqrtQuantizedMultiplierExp(acc, -1)``, ``out = clamp(MBQM(x - z, M, s + 7))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InvalidArgumentError, RangeError, UnsupportedError
from .. import fixedpoint as fp
from ..fixedpoint import INT32_MIN, mbqm, rdbpot, srdhm, wrap_int32
from . import _common as c
from .base import Kernel, register

__all__ = ["Logistic", "Tanh", "Softmax", "LogSoftmax", "L2Normalization", "lut_int8", "expf"]

_INT8 = np.dtype(np.int8)


# -------------------------------------------------------------------------------------------------
# the C library's float32 functions
# -------------------------------------------------------------------------------------------------

_EXPF = c.libm_function("expf")
_TANHF = c.libm_function("tanhf")


def expf(x: np.ndarray) -> np.ndarray:
    if _EXPF is None:  # pragma: no cover
        return np.exp(x.astype(np.float32))
    return np.array([_EXPF(float(v)) for v in x], np.float32)


def _tanhf(x: np.ndarray) -> np.ndarray:
    if _TANHF is None:  # pragma: no cover
        return np.tanh(x.astype(np.float32))
    return np.array([_TANHF(float(v)) for v in x], np.float32)


def _sigmoid(d: np.ndarray) -> np.ndarray:
    one = np.float32(1)
    return one / (one + expf(-d))


def lut_int8(input_scale: float, input_zero_point: int, output_scale: float, output_zero_point: int,
             transform) -> np.ndarray:
    """``LUTPopulateInt8``: the 256 int8 outputs for inputs -128..127, in float32; indexed by the
    input byte (``lut[x.view(uint8)]``)."""
    v = np.arange(-128, 128, dtype=np.int64)
    d = np.float32(input_scale) * (v - input_zero_point).astype(np.float32)
    t = transform(d.astype(np.float32)).astype(np.float32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        inverse = np.float32(1) / np.float32(output_scale)
        from ..._semantics.rounding import half_away_from_zero
        rescaled = half_away_from_zero(t * inverse) + np.float32(output_zero_point)
    # the compiled LUT loop saturates values beyond the int32 range (measured: a huge positive value
    # gives 127), so the clamp is taken in float
    table = np.clip(rescaled, -128, 127).astype(np.int8)
    lut = np.empty(256, np.int8)
    lut[v.astype(np.int8).view(np.uint8)] = table
    return lut


# -------------------------------------------------------------------------------------------------
# LOGISTIC, TANH
# -------------------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class LutParams:
    shape: tuple[int, ...]
    lut: np.ndarray                 # indexed by the input's unsigned view (256 or 65536 entries)
    dtype: np.dtype = _INT8


class LutKernel(Kernel):
    transform = staticmethod(_sigmoid)
    #: int16: the table's integer bits and the input left shifts that count as power-of-two scales
    pot_shifts: tuple[int, ...] = (0,)

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        o = outputs[0]
        c.require_type(self.name, [("input", x)], ("int8", "int16"))
        c.require_same_type(x, o, "output", self.name)
        s_in, z_in = c.activation(self.name, "input", x)
        s_out, z_out = c.activation(self.name, "output", o)
        if x.dtype.name == "int16":
            return self._prepare16(x, s_in, z_in, s_out, z_out)
        c.enforce(self.name, inputs, outputs)
        lut = lut_int8(s_in, z_in, s_out, z_out, self.transform)
        lut.setflags(write=False)
        return LutParams(tuple(x.shape), lut)

    def _prepare16(self, x, s_in, z_in, s_out, z_out) -> LutParams:
        """The 16-bit kernels (``reference_integer_ops::Logistic`` / ``Tanh``): zero points 0, an
        output scale of 2^-15, the input brought to the sigmoid table's scale by a multiplier and a
        shift (none for power-of-two input scales)."""
        from ..fixedpoint16 import logistic16, tanh16

        op = self.name
        if (z_in, z_out) != (0, 0):
            raise c.limit("int16-zero-point", InvalidArgumentError(
                f"{op} zero points", "must be 0 for int16 (LiteRT rejects the model at prepare)", (z_in, z_out)))
        pot, log2 = c.checked_log2(s_in)
        shift = 12 + log2
        multiplier = 0
        if not (pot and shift in self.pot_shifts):
            real = float(np.float64(s_in) * 4096.0 * 3.0)
            shift = 0
            while real <= 32767.0 / 2.0 and shift <= 30:
                shift += 1
                real *= 2.0
            if not real < 2.0 ** 31:
                raise UnsupportedError(f"{op} input scale", "is too large for LiteRT's int16 multiplier (its "
                                       "conversion to int32 is undefined)", float(s_in))
            multiplier = int(real)
        ok, out_log2 = c.checked_log2(s_out)
        if not ok or out_log2 != -15 or (op == "LOGISTIC" and np.float32(s_out) != np.float32(1 / 32768)):
            raise c.limit("int16-output-scale", InvalidArgumentError(
                f"{op} output scale", "must be 1/32768 for int16 (LiteRT rejects the model at prepare)",
                float(s_out)))
        codes = np.arange(1 << 16, dtype=np.int64)
        codes = np.where(codes >= 1 << 15, codes - (1 << 16), codes)
        fn = logistic16 if op == "LOGISTIC" else tanh16
        lut = fn(codes, multiplier, shift).astype(np.int16)
        lut.setflags(write=False)
        return LutParams(tuple(x.shape), lut, np.dtype(np.int16))

    def compute(self, p: LutParams, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.dtype)])
        return [p.lut[x.view(np.uint8 if p.dtype == _INT8 else np.uint16)]]


@register
class Logistic(LutKernel):
    """LOGISTIC: the float32 sigmoid table; LiteRT requires the output scale 1/256 exactly."""

    name = "LOGISTIC"
    transform = staticmethod(_sigmoid)
    pot_shifts = (0,)


@register
class Tanh(LutKernel):
    """TANH: the float32 tanh table (LiteRT checks no output parameters)."""

    name = "TANH"
    transform = staticmethod(_tanhf)
    pot_shifts = (0, 1)


# -------------------------------------------------------------------------------------------------
# SOFTMAX, LOG_SOFTMAX
# -------------------------------------------------------------------------------------------------

SCALED_DIFF_INTEGER_BITS = 5
ACCUMULATION_INTEGER_BITS = 12


def _input_beta_multiplier(op: str, beta: float, input_scale: np.float32) -> tuple[int, int]:
    """``PreprocessSoftmaxScaling`` (double-rounding build): ``QuantizeMultiplierGreaterThanOne`` of
    ``min(beta * s_in * 2^26, 2^31 - 1)``."""
    real = min(np.float64(beta) * np.float64(input_scale) * float(1 << (31 - SCALED_DIFF_INTEGER_BITS)),
               float((1 << 31) - 1))
    try:
        return fp.quantize_multiplier_greater_than_one(real)
    except RangeError:
        raise c.limit("softmax-input-multiplier", UnsupportedError(
            f"{op} input", "beta * input scale * 2^26 <= 1 makes LiteRT abort (QuantizeMultiplierGreaterThanOne "
            "CHECK)", float(real))) from None


@dataclass(frozen=True)
class SoftmaxParams:
    shape: tuple[int, ...]
    multiplier: int
    left_shift: int
    diff_min: int
    # per difference d = x - max(row) in [-255, 0] (index d + 255): exp(d) in Q0.31 and its Rescale<12>
    exps: np.ndarray = field(compare=False, repr=False, default=None)
    terms: np.ndarray = field(compare=False, repr=False, default=None)


#: every difference x - max(row) of int8 data, the index of the prepared tables (d + 255)
_DIFFS = np.arange(-255, 1, dtype=np.int64)


def _rows(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, x.shape[-1]).astype(np.int64)


def _differences(x: np.ndarray, diff_min: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row of the last axis: ``d = x - max(row)`` (int64), and where ``d >= diff_min`` (the
    terms that count; the others give -128)."""
    rows = _rows(x)
    d = rows - rows.max(axis=1, keepdims=True)
    return d, d >= diff_min


def _sum_of_exps(terms: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """``sum(Rescale<12>(e_d))`` per row over the terms inside, in the wrapping int32 accumulator
    (``terms``: the rescaled exponentials)."""
    return wrap_int32(np.where(inside, terms, 0).sum(axis=1))


def _exp_tables(diff_q5: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``exp_on_negative_values`` of the scaled differences, and its ``Rescale<12>``: computed once
    per kernel for the 256 differences of int8 data (a lookup table, as LiteRT's optimized kernels
    build), then gathered per element: the same values as computing them on the data."""
    exps = fp.exp_on_negative_values(diff_q5, SCALED_DIFF_INTEGER_BITS)
    return exps, fp.rescale(exps, 0, ACCUMULATION_INTEGER_BITS)


def softmax_prepare(kernel, inputs, outputs, types=("int8",)):
    op = kernel.name
    (x,) = c.count(op, inputs, outputs, 1, names=("input",))
    o = outputs[0]
    c.require_type(op, [("input", x)], types)
    c.require_same_type(x, o, "output", op)
    if len(x.shape) < 1:
        raise InvalidArgumentError(f"{op} input", "must have at least one dimension (LiteRT rejects a scalar)", x.shape)
    s_in, _ = c.activation(op, "input", x)
    c.activation(op, "output", o)
    if x.dtype.name == "int8":
        c.enforce(op, inputs, outputs)
    return x, s_in


@dataclass(frozen=True, eq=False)
class Softmax16Params:
    shape: tuple[int, ...]
    exps: np.ndarray            # exp LUT value per difference x - max(row) in [-65535, 0] (index d + 65535)
    reciprocal_lut: np.ndarray  # the 513-entry 1 / (1 + x) table


def _softmax16_prepare(x, o, s_in, beta) -> Softmax16Params:
    """The int16 SOFTMAX (``reference_ops::SoftmaxInt16``): two interpolated tables made in double,
    ``exp`` on [-10, 0] and ``1 / (1 + x)`` on [0, 1]; the input difference rescaled so that
    [-65535, 0] is [-10, 0]."""
    from .. import fixedpoint16 as f16

    s_out, z_out = c.legacy(o)
    z_in = c.legacy(x)[1]
    if z_out != 0 or z_in != 0:
        raise c.limit("int16-zero-point", InvalidArgumentError(
            "SOFTMAX zero points", "must be 0 for int16 (LiteRT rejects the model at prepare)", (z_in, z_out)))
    tol = np.float32(0.001) * np.float32(1) / np.float32(32768)
    if not abs(np.float32(s_out) - np.float32(1) / np.float32(32768)) <= tol:
        raise c.limit("int16-output-scale", InvalidArgumentError(
            "SOFTMAX output scale", "must be 1/32768 (+-0.001/32768) for int16 (LiteRT rejects the model at prepare)",
            float(s_out)))
    span = float(32767 - (-32768))
    exp_lut = f16.lut_int16(10.0 / span, 32767, 2.0 / span, 0, np.exp, precision=np.float64)
    recip_lut = f16.lut_int16(1.0 / span, -32768, 2.0 / span, 0, lambda v: 1.0 / (1.0 + v), precision=np.float64)
    with np.errstate(all="ignore"):
        real = float(np.float64(np.float32(s_in) * np.float32(beta)) / (10.0 / 65535.0))
    if not np.isfinite(real):
        raise UnsupportedError("SOFTMAX input", "input scale * beta gives a non-finite multiplier", real)
    m, e = fp.quantize_multiplier(real)
    if e > 30:
        raise c.limit("multiplier-shift", UnsupportedError(
            "SOFTMAX input", "input scale * beta is too large: LiteRT's MultiplyByQuantizedMultiplier shift leaves "
            "int32 (undefined behaviour)", real))
    diffs = np.arange(-65535, 1, dtype=np.int64)
    scaled = wrap_int32(mbqm(diffs, m, e) + 32767)
    exps = f16.lut_lookup16(np.clip(scaled, -32768, 32767), exp_lut)
    exps.setflags(write=False)
    return Softmax16Params(tuple(x.shape), exps, recip_lut)


def _softmax16(p: Softmax16Params, x: np.ndarray) -> np.ndarray:
    from .. import fixedpoint16 as f16

    rows = _rows(x)
    d = rows - rows.max(axis=1, keepdims=True)
    e = p.exps[d + 65535]
    total = e.sum(axis=1)
    if np.any(total >= 1 << 31):
        raise UnsupportedError("SOFTMAX", "a row's sum of exponentials leaves int32 (65538 or more values near the "
                               "row maximum): undefined behaviour in LiteRT", x.shape[-1])
    headroom = fp.clz(total)
    shifted = ((total << (headroom - 1)) + (1 << 13)) >> 14
    sym = np.clip(shifted - ((1 << 15) + (1 << 16)), -32768, 32767)
    recip = f16.lut_lookup16(sym, p.reciprocal_lut)
    right = (31 - headroom)[:, None]
    out = (e * recip[:, None] + (np.int64(1) << (right - 1))) >> right
    return np.clip(out, 0, 32767).astype(np.int16).reshape(x.shape)


@register
class Softmax(Kernel):
    """SOFTMAX over the last axis, the fixed-point reference kernel; beta from the options."""

    name = "SOFTMAX"

    def prepare(self, inputs, outputs, options):
        x, s_in = softmax_prepare(self, inputs, outputs, ("int8", "int16"))
        beta = c.option(options, "beta", 0.0, kind=float)
        if x.dtype.name == "int16":
            return _softmax16_prepare(x, outputs[0], s_in, beta)
        m, ls = _input_beta_multiplier(self.name, beta, s_in)
        diff_min = -fp.calculate_input_radius(SCALED_DIFF_INTEGER_BITS, ls)
        scaled = srdhm(wrap_int32(_DIFFS << ls), m)                              # MBQM GreaterThanOne
        return SoftmaxParams(tuple(x.shape), m, ls, diff_min, *_exp_tables(scaled))

    def compute(self, p: SoftmaxParams | Softmax16Params, arrays):
        if isinstance(p, Softmax16Params):
            (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, np.dtype(np.int16))])
            return [x.copy() if x.size == 0 else _softmax16(p, x)]
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, _INT8)])
        if x.size == 0:
            return [x.copy()]
        d, inside = _differences(x, p.diff_min)
        exps = p.exps[d + 255]
        total = _sum_of_exps(p.terms[d + 255], inside)
        reciprocal, bits_over_unit = fp.get_reciprocal(total, ACCUMULATION_INTEGER_BITS)
        exponent = bits_over_unit + 31 - 8
        if np.any((exponent < 0) | (exponent > 31)):
            raise c.limit("softmax-sum", UnsupportedError(
                "SOFTMAX", "a row's sum of exponentials reaches 512 (512 or more values near the row maximum): "
                "GetReciprocal's exponent leaves [0, 31] and LiteRT aborts (TFLITE_CHECK)", x.shape[-1]))
        out = rdbpot(srdhm(reciprocal[:, None], exps), exponent[:, None]) - 128
        out = np.where(inside, np.clip(out, -128, 127), -128)
        return [out.astype(np.int8).reshape(x.shape)]


@dataclass(frozen=True)
class LogSoftmaxParams:
    shape: tuple[int, ...]
    multiplier: int
    left_shift: int
    reverse_multiplier: int
    reverse_right_shift: int
    diff_min: int
    # per difference d in [-255, 0] (index d + 255): the scaled difference in Q5.26 and Rescale<12>(exp)
    diffs_q5: np.ndarray = field(compare=False, repr=False, default=None)
    terms: np.ndarray = field(compare=False, repr=False, default=None)


@register
class LogSoftmax(Kernel):
    """LOG_SOFTMAX over the last axis, the fixed-point reference kernel (beta 1)."""

    name = "LOG_SOFTMAX"

    def prepare(self, inputs, outputs, options):
        x, s_in = softmax_prepare(self, inputs, outputs)
        m, ls = _input_beta_multiplier(self.name, 1.0, s_in)
        real_reverse = float(1 << (31 - ls)) / float(m)
        try:
            rm, rls = fp.quantize_multiplier_smaller_than_one_exp(real_reverse)
        except RangeError:
            raise c.limit("log-softmax-reverse-multiplier", UnsupportedError(
                "LOG_SOFTMAX input", "the reverse scaling multiplier rounds to 1.0: LiteRT aborts "
                "(QuantizeMultiplierSmallerThanOneExp CHECK)", float(s_in))) from None
        diff_min = -fp.calculate_input_radius(SCALED_DIFF_INTEGER_BITS, ls)
        diffs_q5 = mbqm(_DIFFS, m, ls)
        return LogSoftmaxParams(tuple(x.shape), m, ls, rm, -rls, diff_min, diffs_q5, _exp_tables(diffs_q5)[1])

    def compute(self, p: LogSoftmaxParams, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, _INT8)])
        if x.size == 0:
            return [x.copy()]
        d, inside = _differences(x, p.diff_min)
        diff_q5 = p.diffs_q5[d + 255]
        total = _sum_of_exps(p.terms[d + 255], inside)
        log_sum = fp.log_x_for_x_greater_than_or_equal_to_1(total, ACCUMULATION_INTEGER_BITS, SCALED_DIFF_INTEGER_BITS)
        shifted = wrap_int32(log_sum + INT32_MIN)
        adjusted = np.maximum(p.diff_min - 1, mbqm(shifted, p.reverse_multiplier, -p.reverse_right_shift))
        out = rdbpot(wrap_int32(diff_q5 - log_sum[:, None]), 31 - SCALED_DIFF_INTEGER_BITS - 4) + 127
        out = np.where(d > adjusted[:, None], np.clip(out, -128, 127), -128)
        return [out.astype(np.int8).reshape(x.shape)]


# -------------------------------------------------------------------------------------------------
# L2_NORMALIZATION
# -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class L2Params:
    shape: tuple[int, ...]
    zero_point: int


@register
class L2Normalization(Kernel):
    """L2_NORMALIZATION over the last axis (always the reference kernel in LiteRT); output
    parameters must be (1/128, 0) and the fused activation NONE."""

    name = "L2_NORMALIZATION"

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        o = outputs[0]
        c.require_type(self.name, [("input", x), ("output", o)], ("int8",))
        if len(x.shape) < 1:
            raise InvalidArgumentError("L2_NORMALIZATION input", "must have at least one dimension", x.shape)
        _, z = c.activation(self.name, "input", x)
        c.activation(self.name, "output", o)
        c.enforce(self.name, inputs, outputs)
        fused = c.option(options, "fused_activation_function", "NONE")
        if fused != "NONE":
            raise c.limit("l2norm-activation", InvalidArgumentError(
                "fused_activation_function", "must be NONE for L2_NORMALIZATION (LiteRT rejects others at prepare)",
                fused))
        return L2Params(tuple(x.shape), z)

    def compute(self, p: L2Params, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, _INT8)])
        if x.size == 0:
            return [x.copy()]
        v = _rows(x) - p.zero_point
        acc = wrap_int32((v * v).sum(axis=1))
        m, s = fp.get_inv_sqrt_quantized_multiplier_exp(acc, -1)
        out = mbqm(v, m[:, None], (s + 7)[:, None])
        return [np.clip(out, -128, 127).astype(np.int8).reshape(x.shape)]
