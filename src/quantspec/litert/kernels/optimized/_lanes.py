"""The integer arithmetic of LiteRT's optimized int8 kernels on x86-64, lane by lane (numpy, int64
arrays holding int32 values).

The shipped interpreter (ai-edge-litert 2.3.0, x86-64) builds its optimized kernels with the NEON
code paths translated to SSE4.1 (``NEON_2_SSE``), and its GEMMs with ruy.  Both requantize with
the *half-up* variant of gemmlowp's double rounding: ``SaturatingRoundingDoublingHighMul`` (the
NEON ``vqrdmulh``; ties up, as in the reference kernels), then a rounding right shift that rounds
ties *up* (``vrshl`` / ruy's ``rounding_right_shift``) instead of away from zero
(``RoundingDivideByPOT``).  The two differ only where the value before the final shift is negative
and exactly halfway, so on a small fraction of outputs, by one.

Vector loops process fixed-width blocks and leave the tail of each call to scalar code that uses
the reference formulas; :func:`block_mask` says which elements of a call fall in full blocks.
"""

from __future__ import annotations

import numpy as np

from ...fixedpoint import mbqm, srdhm, wrap_int32

__all__ = ["rounding_shift_half_up", "mbqm_half_up", "mbqm_reference", "block_mask", "wrap_int16",
           "saturate", "shift_left_wrapping"]


def rounding_shift_half_up(x: np.ndarray, shift) -> np.ndarray:
    """``(x + 2^(n-1)) >> n`` for ``n > 0`` (``x`` itself for ``n = 0``): NEON ``vrshl`` by ``-n``,
    ruy's ``rounding_right_shift``; computed in int64, so without the int32 overflow of the sum
    (both implementations give that same value)."""
    x = np.asarray(x, np.int64)
    n = np.asarray(shift, np.int64)
    nudge = np.where(n > 0, np.left_shift(np.int64(1), np.maximum(n - 1, 0)), 0)
    return (x + nudge) >> n


def shift_left_wrapping(x: np.ndarray, shift) -> np.ndarray:
    """``x << n`` in int32 (wrapping), ``n >= 0`` (``vshlq_s32`` with a non-negative count)."""
    return wrap_int32(np.asarray(x, np.int64) << np.asarray(shift, np.int64)).astype(np.int64)


def mbqm_half_up(acc: np.ndarray, multiplier, shift) -> np.ndarray:
    """The optimized kernels' ``MultiplyByQuantizedMultiplier``: ``x << max(e, 0)`` (int32, wrapping),
    ``SaturatingRoundingDoublingHighMul`` by ``M``, then a right shift by ``max(-e, 0)`` rounding
    ties up.  ruy (CONV_2D, FULLY_CONNECTED), ``MultiplyByQuantizedMultiplier4Rows`` (QUANTIZE,
    MEAN) and the depthwise ``Quantize`` all compute this."""
    e = np.asarray(shift, np.int64)
    left = np.maximum(e, 0)
    right = np.maximum(-e, 0)
    v = srdhm(shift_left_wrapping(acc, left), np.asarray(multiplier, np.int64))
    return rounding_shift_half_up(v, right)


def mbqm_reference(acc: np.ndarray, multiplier, shift) -> np.ndarray:
    """The scalar tails' ``MultiplyByQuantizedMultiplier`` (the reference kernels' double rounding)."""
    return mbqm(np.asarray(acc, np.int64), np.asarray(multiplier, np.int64), np.asarray(shift, np.int64))


def block_mask(size: int, width: int) -> np.ndarray:
    """Which of ``size`` consecutive elements a vector loop of ``width`` lanes handles (the full
    blocks from the start); the rest go to the scalar tail."""
    return np.arange(size) < (size // width) * width


def wrap_int16(x: np.ndarray) -> np.ndarray:
    """int16 wrap-around (``vmovn_s32`` narrowing, ``vaddq_s16``)."""
    x = np.asarray(x, np.int64)
    return ((x + (1 << 15)) & 0xFFFF) - (1 << 15)


def saturate(x: np.ndarray, bits: int) -> np.ndarray:
    """Saturating narrowing to a signed ``bits``-bit integer (``vqmovn``)."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(np.asarray(x, np.int64), lo, hi)
