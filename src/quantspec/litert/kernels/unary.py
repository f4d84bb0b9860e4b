"""Element-wise unary kernels whose output depends on the input code alone: HARD_SWISH, GELU, RSQRT,
RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, LEAKY_RELU, EXP, LOG and ABS, in int8 and (where LiteRT has
it) int16.

Every one of them maps each input code to one output code, so prepare computes the whole map — 256
entries for int8, 65536 for int16 — with LiteRT's per-element arithmetic vectorised over all the
codes, and compute is one gather (``table[x.view(uint)]``).  The arithmetic, per op (``K/`` =
``tflite/kernels/``):

- **HARD_SWISH** (``K/activations.cc`` HardSwishPrepare, ``reference_ops::HardSwish``): int16
  gemmlowp fixed point (:mod:`..fixedpoint16`): the input on a "hires" scale ``s_in / 128``, a
  rounding doubling high-mul by the output multiplier, a "reluish" value rescaled from [-3, 3] to
  [0, 1] with saturation, a truncating doubling high-mul, a rounding right shift.  The multipliers
  are computed in float32 and reduced to 16 bits.  LiteRT rejects an output multiplier >= 1
  (``s_in / 128 >= s_out`` or so); int8 only.
- **GELU** (``K/activations.cc`` GeluPrepare): the float32 table of ``0.5 x erfc(-x / sqrt 2)`` (or
  the tanh approximation) — ``LUTPopulateInt8`` for int8, the interpolated 513-entry
  ``LUTPopulateInt16`` for int16.
- **RSQRT** (``K/elementwise.cc``): int8 in fixed point (``GetInvSqrtQuantizedMultiplierExp`` of
  ``x - z_in``, then two ``MultiplyByQuantizedMultiplier``), the largest code for ``x == z_in``;
  int16 the interpolated table of ``1 / sqrt(x)``.  An input below the zero point fails at Eval
  ("Rsqrt is only defined for positive values"), and quantspec raises there too.
- **RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1** (``K/activations.cc`` QuantizedReluX,
  ``reference_ops::ReluX``): ``clamp(z_out + MBQM(x - z_in, M, e))``, ``M, e`` from ``s_in / s_out``
  in float32, the clamp at the bounds quantized with ``roundf`` in float32.
- **LEAKY_RELU** (``K/activations.cc`` LeakyReluPrepare, ``reference_ops::QuantizeLeakyRelu``):
  ``z_out + MBQM(x - z_in, identity)`` for ``x >= z_in``, else ``MBQM(x - z_in, alpha)``; the
  multipliers ``s_in / s_out`` and ``s_in * alpha / s_out`` computed in float32.

- **EXP** (``K/exp.cc``, one kernel in every resolver): the float32 table of the C library's
  ``expf`` (``LUTPopulate``: 256 entries for int8, the interpolated 513 for int16).  No parameter is
  checked (int16 may have zero points).
- **LOG** (``K/elementwise.cc`` LogLUTPrepare): the same tables of ``logf(x)``, where ``x <= 0``
  maps to the output's lowest value ``f32((min - z_out) * s_out)``.
- **ABS** (``K/elementwise.cc`` AbsEvalQuantized): ``|x - z_in|``, plus ``z_out`` when the scales
  are equal, else ``MultiplyByQuantizedMultiplier(|x - z_in|, s_in / s_out) + z_out`` (the ratio in
  float32), clamped.

int16 kernels require zero points 0 (LiteRT rejects others at Prepare), EXP's excepted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InvalidArgumentError, UnsupportedError
from .. import fixedpoint as fp
from .. import fixedpoint16 as f16
from ..fixedpoint import INT32_MAX, INT32_MIN, mbqm, wrap_int32
from . import _common as c
from .activations import expf, lut_int8
from .base import Kernel, register

__all__ = ["CodeTable", "HardSwish", "Gelu", "Rsqrt", "Relu", "Relu6", "ReluN1To1", "Relu0To1", "LeakyRelu",
           "code_table"]

_UNSIGNED = {"int8": np.uint8, "int16": np.uint16}


def _codes(dtype: str) -> np.ndarray:
    """Every code of ``dtype`` in the order of its unsigned view (the table's index order)."""
    u = np.arange(1 << (8 if dtype == "int8" else 16), dtype=np.int64)
    bits = 8 if dtype == "int8" else 16
    return np.where(u >= 1 << (bits - 1), u - (1 << bits), u)


@dataclass(frozen=True, eq=False)
class CodeTable:
    """A prepared code-to-code map: ``table[x.view(unsigned)]``; ``invalid`` marks codes on which
    LiteRT fails at Eval (None: none)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    table: np.ndarray
    invalid: np.ndarray | None = None
    invalid_message: str = ""


def code_table(dtype_name: str, shape, values: np.ndarray, invalid: np.ndarray | None = None,
               message: str = "") -> CodeTable:
    dtype = np.dtype(dtype_name)
    table = np.asarray(values).astype(dtype)
    table.setflags(write=False)
    return CodeTable(tuple(shape), dtype, table, invalid, message)


class _Unary(Kernel):
    """The common prepare/compute: one input, one output of the same type (``types``)."""

    types: tuple[str, ...] = ("int8", "int16")
    #: whether LiteRT requires int16 zero points 0
    int16_zero_points: bool = True

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        o = outputs[0]
        c.require_type(self.name, [("input", x)], self.types)
        c.require_same_type(x, o, "output", self.name)
        s_in, z_in = c.activation(self.name, "input", x)
        s_out, z_out = c.activation(self.name, "output", o)
        if x.dtype.name == "int16" and self.int16_zero_points and (z_in != 0 or z_out != 0):
            raise c.limit("int16-zero-point", InvalidArgumentError(
                f"{self.name} zero points", "must be 0 for int16 (LiteRT rejects others at prepare)", (z_in, z_out)))
        c.enforce(self.name, inputs, outputs)
        codes = _codes(x.dtype.name)
        result = self.codes(codes, x.dtype.name, (s_in, z_in), (s_out, z_out), options or {})
        if isinstance(result, tuple):
            values, invalid, message = result
        else:
            values, invalid, message = result, None, ""
        return code_table(x.dtype.name, x.shape, values, invalid, message)

    def codes(self, v: np.ndarray, dtype: str, inp, out, options):  # pragma: no cover - abstract
        raise NotImplementedError

    def compute(self, p: CodeTable, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.dtype)])
        index = x.view(_UNSIGNED[p.dtype.name])
        if p.invalid is not None and x.size and np.any(p.invalid[index]):
            raise c.limit("rsqrt-negative", InvalidArgumentError(f"{self.name} input", p.invalid_message, int(
                x.reshape(-1)[np.argmax(p.invalid[index].reshape(-1))])))
        return [p.table[index]]


def _clamp(v: np.ndarray, dtype: str) -> np.ndarray:
    lo, hi = (-128, 127) if dtype == "int8" else (f16.INT16_MIN, f16.INT16_MAX)
    return np.clip(v, lo, hi)


# -------------------------------------------------------------------------------------------------
# HARD_SWISH
# -------------------------------------------------------------------------------------------------

@register
class HardSwish(_Unary):
    """HARD_SWISH ``x * relu6(x + 3) / 6`` in int16 gemmlowp fixed point (int8 only in LiteRT)."""

    name = "HARD_SWISH"
    types = ("int8",)

    def codes(self, v, dtype, inp, out, options):
        (s_in, z_in), (s_out, z_out) = inp, out
        f = np.float32
        with np.errstate(all="ignore"):
            hires_scale = f(f(1.0) / f(128.0)) * f(s_in)
            reluish_scale = f(3.0) / f(32768.0)
            out_mult = float(hires_scale / f(s_out))
            reluish_mult = float(hires_scale / reluish_scale)
        if not (np.isfinite(out_mult) and np.isfinite(reluish_mult)):
            raise UnsupportedError("HARD_SWISH scales", "give a non-finite multiplier", (float(s_in), float(s_out)))
        m_out, e_out = fp.quantize_multiplier(out_mult)
        m_rel, e_rel = fp.quantize_multiplier(reluish_mult)
        if e_out > 0:
            raise c.limit("hard-swish-output-multiplier", InvalidArgumentError(
                "HARD_SWISH output scale", "input scale / 128 / output scale must be < 1 (LiteRT rejects the model at "
                "prepare: output multiplier exponent > 0)", float(s_out)))
        if e_rel > 31:
            raise c.limit("multiplier-shift", UnsupportedError(
                "HARD_SWISH input scale", "a left shift of 31 or more is undefined behaviour in LiteRT's "
                "SaturatingLeftShift", float(s_in)))
        m_out16 = f16.downscale_multiplier16(m_out)
        m_rel16 = f16.downscale_multiplier16(m_rel)
        x = f16.wrap16(v - z_in)
        hires = f16.wrap16(x * 128)
        preshift = f16.srdhm16(hires, m_out16)
        reluish = hires
        if e_rel > 0:
            reluish = f16.saturating_left_shift16(reluish, e_rel - 1)
        reluish = f16.srdhm16(reluish, m_rel16)
        if e_rel > 0:
            reluish = f16.saturating_left_shift16(reluish, 1)
        if e_rel < 0:
            reluish = f16.rdbpot16(reluish, -e_rel)
        reluish = f16.wrap16((reluish + (1 << 15)) >> 1)
        pre_out = f16.sdhm16(reluish, preshift)
        y = f16.rdbpot16(pre_out, -e_out)
        y = f16.wrap16(y + z_out)
        return _clamp(y, dtype)


# -------------------------------------------------------------------------------------------------
# GELU
# -------------------------------------------------------------------------------------------------

_ERFCF = c.libm_function("erfcf")
_TANHF = c.libm_function("tanhf")
_SQRT2_OVER_PI = np.float32(1.1283791670955126 * 0.7071067811865476)     # M_2_SQRTPI * M_SQRT1_2, as float


def _map_f32(fn, x: np.ndarray, fallback) -> np.ndarray:
    if fn is None:  # pragma: no cover - no C math library
        return fallback(x).astype(np.float32)
    return np.array([fn(float(v)) for v in np.asarray(x, np.float32).reshape(-1)], np.float32).reshape(np.shape(x))


def _erfc_fallback(x):  # pragma: no cover - no C math library
    from math import erfc
    return np.vectorize(erfc)(x.astype(np.float64))


def gelu_exact(x: np.ndarray) -> np.ndarray:
    """``GeluTransform``: ``0.5f * x * erfcf(x * f32(-M_SQRT1_2))``, float32 throughout."""
    x = np.asarray(x, np.float32)
    with np.errstate(all="ignore"):
        e = _map_f32(_ERFCF, (x * np.float32(-0.7071067811865476)).astype(np.float32), _erfc_fallback)
        return ((np.float32(0.5) * x).astype(np.float32) * e).astype(np.float32)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """``GeluTransformApproximate``: ``0.5f * x * (1 + tanhf(sqrt(2/pi) * (x + 0.044715f * x^3)))``."""
    f = np.float32
    x = np.asarray(x, f)
    with np.errstate(all="ignore"):
        cube = (((f(0.044715) * x).astype(f) * x).astype(f) * x).astype(f)
        inner = (_SQRT2_OVER_PI * (x + cube).astype(f)).astype(f)
        t = _map_f32(_TANHF, inner, np.tanh)
        return ((f(0.5) * x).astype(f) * (f(1) + t).astype(f)).astype(f)


@register
class Gelu(_Unary):
    """GELU through LiteRT's float32 lookup tables (``approximate``: the tanh form)."""

    name = "GELU"

    def codes(self, v, dtype, inp, out, options):
        approximate = c.option(options, "approximate", False, kind=bool)
        transform = gelu_tanh if approximate else gelu_exact
        (s_in, z_in), (s_out, z_out) = inp, out
        if dtype == "int8":
            lut = lut_int8(s_in, z_in, s_out, z_out, transform)     # indexed by the unsigned view
            return lut.astype(np.int64)
        lut = f16.lut_int16(s_in, z_in, s_out, z_out, transform)
        return f16.lut_lookup16(v, lut)


# -------------------------------------------------------------------------------------------------
# RSQRT
# -------------------------------------------------------------------------------------------------

_RSQRT_NEGATIVE = "Rsqrt is only defined for positive values: an input below the zero point fails LiteRT's Eval"


@register
class Rsqrt(_Unary):
    """RSQRT: fixed point in int8, an interpolated float32 table in int16."""

    name = "RSQRT"

    def codes(self, v, dtype, inp, out, options):
        (s_in, z_in), (s_out, z_out) = inp, out
        invalid = v < z_in
        if dtype == "int16":
            inv_scale_max = np.float32(f16.INT16_MAX) * np.float32(s_out)

            def transform(x):
                x = np.asarray(x, np.float32)
                with np.errstate(all="ignore"):
                    r = (np.float32(1) / np.sqrt(x)).astype(np.float32)
                return np.where(x <= 0, inv_scale_max, r).astype(np.float32)

            lut = f16.lut_int16(s_in, z_in, s_out, z_out, transform)
            return f16.lut_lookup16(v, lut), invalid, _RSQRT_NEGATIVE
        with np.errstate(all="ignore"):
            real = 1.0 / float(np.float32(np.sqrt(np.float32(s_in))) * np.float32(s_out))
        if not np.isfinite(real):
            raise UnsupportedError("RSQRT scales", "give a non-finite multiplier 1 / (sqrt(s_in) * s_out)",
                                   (float(s_in), float(s_out)))
        m, e = fp.quantize_multiplier(real)
        value = np.maximum(v - z_in, 1)                  # the codes below the zero point fail at Eval
        inv_m, inv_s = fp.get_inv_sqrt_quantized_multiplier_exp(value, -1)
        shift1 = inv_s + 20
        shift2 = e - 20
        if np.any(shift1 > 30) or np.any(shift1 < -31) or shift2 > 30 or shift2 < -31:
            raise c.limit("multiplier-shift", UnsupportedError(
                "RSQRT scales", "need a MultiplyByQuantizedMultiplier shift outside [-31, 30] (undefined behaviour in "
                "LiteRT)", (float(s_in), float(s_out))))
        data = mbqm(np.ones_like(value), inv_m, shift1)
        y = wrap_int32(mbqm(data, m, shift2) + z_out)
        y = np.where(v == z_in, 127, np.clip(y, -128, 127))
        return y, invalid, _RSQRT_NEGATIVE


# -------------------------------------------------------------------------------------------------
# RELU family, LEAKY_RELU
# -------------------------------------------------------------------------------------------------

def _multiplier(op: str, real: float, what: str) -> tuple[int, int]:
    if not np.isfinite(real):
        raise UnsupportedError(f"{op} scales", f"give a non-finite {what}", real)
    m, e = fp.quantize_multiplier(real)
    if e > 30:
        raise c.limit("multiplier-shift", UnsupportedError(
            f"{op} scales", f"a {what} >= 2^30 needs a left shift of 31 or more, undefined in LiteRT's C++", real))
    return m, e


def _quantized_bound(bound: float, s_out, z_out: int) -> int:
    """``z_out + static_cast<int32>(roundf(bound / s_out))``: the quotient and ``roundf`` in float32
    (half away from zero), an out-of-range conversion giving INT32_MIN (x86), the sum in int32."""
    from ..._semantics.rounding import half_away_from_zero

    with np.errstate(all="ignore"):
        r = float(half_away_from_zero(np.float32(np.float32(bound) / np.float32(s_out))))
    qi = int(r) if np.isfinite(r) and INT32_MIN <= r <= INT32_MAX else INT32_MIN
    return int(wrap_int32(np.int64(z_out) + qi))


def _ratio(a, b) -> float:
    """``a / b`` of two float scales, in float32 as the C++ divides them, widened to double."""
    with np.errstate(all="ignore"):
        return float(np.float32(a) / np.float32(b))


class _ReluX(_Unary):
    bounds: tuple[float, float | None] = (0.0, None)

    def codes(self, v, dtype, inp, out, options):
        (s_in, z_in), (s_out, z_out) = inp, out
        m, e = _multiplier(self.name, _ratio(s_in, s_out), "multiplier s_in / s_out")
        lo_t, hi_t = (-128, 127) if dtype == "int8" else (f16.INT16_MIN, f16.INT16_MAX)
        low, high = self.bounds
        act_min = max(lo_t, _quantized_bound(low, s_out, z_out))
        act_max = hi_t if high is None else min(hi_t, _quantized_bound(high, s_out, z_out))
        y = wrap_int32(z_out + mbqm(wrap_int32(v - z_in), m, e))
        y = np.minimum(np.maximum(y, act_min), act_max)
        return f16.wrap16(y) if dtype == "int16" else ((y + 128) & 0xFF) - 128


@register
class Relu(_ReluX):
    """RELU: requantize to the output's parameters and clamp below at the real value 0."""

    name = "RELU"
    bounds = (0.0, None)


@register
class Relu6(_ReluX):
    """RELU6: requantize and clamp to the real interval [0, 6]."""

    name = "RELU6"
    bounds = (0.0, 6.0)


@register
class ReluN1To1(_ReluX):
    """RELU_N1_TO_1: requantize and clamp to [-1, 1] (int8 only in LiteRT)."""

    name = "RELU_N1_TO_1"
    types = ("int8",)
    bounds = (-1.0, 1.0)


@register
class Relu0To1(_ReluX):
    """RELU_0_TO_1: requantize and clamp to [0, 1] (int8 only in LiteRT)."""

    name = "RELU_0_TO_1"
    types = ("int8",)
    bounds = (0.0, 1.0)


@register
class LeakyRelu(_Unary):
    """LEAKY_RELU: the identity and the alpha branch, each a MultiplyByQuantizedMultiplier."""

    name = "LEAKY_RELU"

    def codes(self, v, dtype, inp, out, options):
        (s_in, z_in), (s_out, z_out) = inp, out
        alpha = c.option(options, "alpha", 0.0, kind=float)
        with np.errstate(all="ignore"):
            alpha_real = _ratio(np.float32(s_in) * np.float32(alpha), s_out)
        m_id, e_id = _multiplier(self.name, _ratio(s_in, s_out), "multiplier s_in / s_out")
        m_a, e_a = _multiplier(self.name, alpha_real, "alpha multiplier s_in * alpha / s_out")
        x = wrap_int32(v - z_in)
        identity = mbqm(x, m_id, e_id)
        scaled = mbqm(x, abs(m_a), e_a)
        branch = -scaled if m_a < 0 else scaled
        y = wrap_int32(z_out + np.where(x >= 0, identity, branch))
        return _clamp(y, dtype)


# -------------------------------------------------------------------------------------------------
# EXP, LOG, ABS
# -------------------------------------------------------------------------------------------------

_LOGF = c.libm_function("logf")


def _logf(x: np.ndarray) -> np.ndarray:
    if _LOGF is None:  # pragma: no cover
        with np.errstate(all="ignore"):
            return np.log(np.asarray(x, np.float32))
    return np.array([_LOGF(float(v)) for v in np.asarray(x).reshape(-1)], np.float32).reshape(np.shape(x))


def _table(v, dtype: str, inp, out, transform) -> np.ndarray:
    """``LUTPopulate`` of ``transform`` (float32): the int8 table, or the interpolated int16 one,
    read for every code."""
    (s_in, z_in), (s_out, z_out) = inp, out
    if dtype == "int8":
        return lut_int8(s_in, z_in, s_out, z_out, transform)[v.astype(np.int8).view(np.uint8)]
    return f16.lut_lookup16(v, f16.lut_int16(s_in, z_in, s_out, z_out, transform))


def _expf(x) -> np.ndarray:
    return expf(np.asarray(x, np.float32).reshape(-1)).reshape(np.shape(x))


@register
class Exp(_Unary):
    """EXP: the float32 table of expf."""

    name = "EXP"
    int16_zero_points = False

    def codes(self, v, dtype, inp, out, options):
        # where expf overflows, LiteRT's int16 table gets NaN entries (lut_int16 gives them x86's 0)
        return _table(v, dtype, inp, out, _expf)


@register
class Log(_Unary):
    """LOG: the float32 table of logf, the lowest output value for inputs <= 0."""

    name = "LOG"

    def codes(self, v, dtype, inp, out, options):
        lo = -128 if dtype == "int8" else f16.INT16_MIN
        lowest = np.float32(np.float32(lo - int(out[1])) * np.float32(out[0]))

        def transform(x):
            x = np.asarray(x, np.float32)
            return np.where(x <= 0, lowest, _logf(np.where(x > 0, x, np.float32(1)))).astype(np.float32)

        return _table(v, dtype, inp, out, transform)


@register
class Abs(_Unary):
    """ABS: |x - z_in|, rescaled where the scales differ."""

    name = "ABS"

    def codes(self, v, dtype, inp, out, options):
        (s_in, z_in), (s_out, z_out) = inp, out
        value = np.abs(v - z_in)
        if np.float32(s_in) == np.float32(s_out):
            return _clamp(value + z_out, dtype)
        m, e = _multiplier(self.name, _ratio(s_in, s_out), "multiplier s_in / s_out")
        return _clamp(wrap_int32(mbqm(value, m, e) + z_out), dtype)
