"""SOFTMAX and LOG_SOFTMAX as LiteRT's optimized int8 kernels compute them: in float32, from a
256-entry table of ``expf`` (``optimized_ops::PopulateSoftmaxLookupTable``, ``Softmax``,
``LogSoftmax``; the uint16-table variant is aarch64-only).  The reference kernels' fixed-point
arithmetic is not used, and neither is their abort on ``beta · s_in · 2^26 <= 1``.

With ``table[255 - v] = expf(f32(-s_in · beta) · v)`` (v = 0..255) and, per row of the last axis,
``e_j = table[255 - max + x_j]`` and ``sum`` their float32 sum in order::

    SOFTMAX:      out_j = clamp(int32(roundf(e_j · f32(1 / (sum · s_out)))) + z_out)   (an int32 sum: it wraps)
    LOG_SOFTMAX:  p = f32((f32(s_in · max) + logf(sum)) / s_out)
                  out_j = clamp(int32(rintf(f32(f32(s_in / s_out) · x_j) - p) + z_out))   (ties to even)

``expf`` and ``logf`` are the C library's (called through ctypes, as the reference LOGISTIC and
TANH tables).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass, replace

import numpy as np

from ...._semantics.rounding import half_away_from_zero
from .. import _common as c
from .. import activations as ref

__all__ = ["Softmax", "LogSoftmax", "Logistic", "Tanh", "exp_table"]

_INT8 = np.dtype(np.int8)
INT32_MIN = -(1 << 31)


def _libm_logf():
    try:
        path = ctypes.util.find_library("m")
        f = getattr(ctypes.CDLL(path), "logf") if path else None
    except (OSError, AttributeError):  # pragma: no cover - platform without a C math library
        return None
    if f is not None:
        f.argtypes = [ctypes.c_float]
        f.restype = ctypes.c_float
    return f


_LOGF = _libm_logf()


def _logf(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.float32)
    if _LOGF is None:  # pragma: no cover
        return np.log(x)
    return np.array([_LOGF(float(v)) for v in x.reshape(-1)], np.float32).reshape(x.shape)


def exp_table(input_scale: np.float32, beta: float) -> np.ndarray:
    """``PopulateSoftmaxLookupTable``: float32 ``table[255 - v] = expf(f32(-s_in · beta) · v)``."""
    v = np.arange(256, dtype=np.float32)
    table = np.empty(256, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):     # s_in · beta may overflow to -inf, then 0 · inf: NaN
        scale = np.float32(-np.float32(input_scale) * np.float32(beta))
        table[255 - np.arange(256)] = ref.expf(np.float32(scale * v))
    return table


def _sequential_sum(e: np.ndarray) -> np.ndarray:
    """The float32 sum of each row in order (the C++ loop; numpy's sum is pairwise)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.cumsum(e, axis=1, dtype=np.float32)[:, -1] if e.shape[1] else np.zeros(e.shape[0], np.float32)


def _rows(x: np.ndarray, table: np.ndarray):
    rows = x.reshape(-1, x.shape[-1]).astype(np.int64)
    top = rows.max(axis=1, keepdims=True)
    return rows, top, table[255 - top + rows]


def _to_int32(v: np.ndarray) -> np.ndarray:
    """float32 -> int32 as x86 converts (out of range and NaN: INT32_MIN)."""
    with np.errstate(invalid="ignore"):
        inside = (v >= np.float32(-2.0 ** 31)) & (v < np.float32(2.0 ** 31))
        return np.where(inside, v, INT32_MIN).astype(np.int64)


def _wrap_int32(v: np.ndarray) -> np.ndarray:
    """int64 values reduced to int32 as two's complement addition wraps."""
    return (v + (1 << 31)) % (1 << 32) - (1 << 31)


@dataclass(frozen=True, eq=False)
class SoftmaxOptimized:
    shape: tuple[int, ...]
    table: np.ndarray
    output_scale: np.float32
    output_zero_point: int


class Softmax(ref.Softmax):
    """SOFTMAX, optimized (float32 table)."""

    def prepare(self, inputs, outputs, options) -> SoftmaxOptimized:
        x, s_in = ref.softmax_prepare(self, inputs, outputs)
        beta = c.option(options, "beta", 0.0, kind=float)
        s_out, z_out = c.activation(self.name, "output", outputs[0])
        return SoftmaxOptimized(tuple(x.shape), exp_table(s_in, beta), s_out, z_out)

    def compute(self, p: SoftmaxOptimized, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, _INT8)])
        if x.size == 0:
            return [x.copy()]
        _, _, e = _rows(x, p.table)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            inv = np.float32(1) / (_sequential_sum(e) * p.output_scale)
            prob = (e * inv[:, None]).astype(np.float32)
        # QuantizeSoftmaxOutput: int32(round(prob)) + zero_point in int32, which wraps on x86 (NaN,
        # from beta = inf or an infinite sum, converts to INT32_MIN: plus a negative zero point it
        # wraps to a large positive value, clamped to 127)
        q = _wrap_int32(_to_int32(half_away_from_zero(prob)) + p.output_zero_point)
        return [np.clip(q, -128, 127).astype(np.int8).reshape(x.shape)]


@dataclass(frozen=True, eq=False)
class LogSoftmaxOptimized:
    shape: tuple[int, ...]
    table: np.ndarray
    input_scale: np.float32
    output_scale: np.float32
    output_zero_point: int


class LogSoftmax(ref.LogSoftmax):
    """LOG_SOFTMAX, optimized (float32 table, ``std::rint``)."""

    def prepare(self, inputs, outputs, options) -> LogSoftmaxOptimized:
        x, s_in = ref.softmax_prepare(self, inputs, outputs)
        s_out, z_out = c.activation(self.name, "output", outputs[0])
        return LogSoftmaxOptimized(tuple(x.shape), exp_table(s_in, 1.0), s_in, s_out, z_out)

    def compute(self, p: LogSoftmaxOptimized, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, _INT8)])
        if x.size == 0:
            return [x.copy()]
        rows, top, e = _rows(x, p.table)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            log_sum = _logf(_sequential_sum(e))
            scale = np.float32(p.input_scale / p.output_scale)
            pre = ((p.input_scale * top[:, 0].astype(np.float32) + log_sum) / p.output_scale).astype(np.float32)
            log_prob = (np.float32(scale * rows.astype(np.float32)) - pre[:, None]).astype(np.float32)
            q = np.rint(log_prob) + np.float32(p.output_zero_point)
        return [np.clip(_to_int32(q.astype(np.float32)), -128, 127).astype(np.int8).reshape(x.shape)]


# -------------------------------------------------------------------------------------------------
# LOGISTIC, TANH on int16
# -------------------------------------------------------------------------------------------------

class _Int16FixedPoint:
    """int16 LOGISTIC / TANH with a power-of-two input scale (the reference kernel's "no multiplier"
    case: input scale 2^-12, for TANH also 2^-11): LiteRT's optimized kernel computes gemmlowp's
    16-bit fixed-point function (:mod:`._gemmlowp16`) on the input as ``FixedPoint<int16, 3>``
    (doubled with saturation for 2^-11), where the reference kernel interpolates its sigmoid table.
    Other scales, and int8, are the reference kernel."""

    #: the activation types this kernel models (the optimized mode runs others on the reference kernel)
    activations = ("int8", "int16")

    def prepare(self, inputs, outputs, options):
        p = super().prepare(inputs, outputs, options)
        if getattr(p, "dtype", _INT8) != np.dtype(np.int16):
            return p
        from ._gemmlowp16 import logistic_q3, saturating_double, tanh_q3

        s_in, _ = c.activation(self.name, "input", inputs[0])
        pot, log2 = c.checked_log2(s_in)
        shift = 12 + log2
        if not (pot and shift in getattr(self, "pot_shifts", (0,))):
            return p
        codes = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)
        x = saturating_double(codes) if shift == 1 else codes
        values = (logistic_q3 if self.name == "LOGISTIC" else tanh_q3)(x).astype(np.int16)
        lut = np.concatenate([values[1 << 15:], values[:1 << 15]])       # indexed by the uint16 view
        lut.setflags(write=False)
        return replace(p, lut=lut)


class Logistic(_Int16FixedPoint, ref.Logistic):
    """LOGISTIC, optimized (int16 with a power-of-two input scale: gemmlowp's fixed point)."""


class Tanh(_Int16FixedPoint, ref.Tanh):
    """TANH, optimized (int16 with a power-of-two input scale: gemmlowp's fixed point)."""
