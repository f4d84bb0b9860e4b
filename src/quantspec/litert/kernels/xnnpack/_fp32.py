"""XNNPACK's float32 requantization and quantization of bounds (``src/xnnpack/requantization.h``
``xnn_qs8_requantize_fp32``, ``xnn_qs8_quantize``; the ``*_minmax_fp32_*`` microkernels).

XNNPACK requantizes an int32 accumulator in float32, whatever the instruction set: the accumulator
converted to float32 (rounded to nearest-even beyond 2^24), multiplied by a float32 scale, clamped
to ``[qmin - zp, qmax - zp]``, rounded to the nearest integer with ties to *even* (``cvtps2dq``,
``lrintf`` or the magic-bias trick, which all give the same integers), and shifted by the zero
point.  The reference kernels instead multiply by a 31-bit fixed-point multiplier and round ties
away from zero, twice; that is where most differences come from.
"""

from __future__ import annotations

import numpy as np

__all__ = ["requantize_fp32", "quantize_bound", "activation_bounds", "to_float32"]

F32 = np.float32


def to_float32(acc: np.ndarray) -> np.ndarray:
    """int32 -> float32 as ``cvtdq2ps`` converts it (round to nearest even)."""
    return np.asarray(acc, np.int64).astype(np.float64).astype(np.float32)


def requantize_fp32(acc: np.ndarray, scale, zero_point: int, qmin: int, qmax: int) -> np.ndarray:
    """``clamp(rint(f32(acc) · scale) + zero_point, qmin, qmax)`` as int8; ``scale`` float32, one per
    channel on the last axis or one for all.  (:func:`quantspec.litert.modefast.requantize_fp32`
    computes the same when the fast path is on.)"""
    from ... import modefast

    fast = modefast.requantize_fp32(acc, scale, zero_point, qmin, qmax)
    if fast is not None:
        return fast
    with np.errstate(over="ignore", invalid="ignore"):
        v = to_float32(acc) * np.asarray(scale, np.float32)
        v = np.minimum(np.maximum(v, F32(qmin - zero_point)), F32(qmax - zero_point))
    return (np.rint(v).astype(np.int64) + zero_point).astype(np.int8)


def quantize_bound(value: float, scale: np.float32, zero_point: int) -> int:
    """``xnn_qs8_quantize``: ``lrintf(clamp(f32(value / scale) + zp, -128, 127))`` (float32, ties to
    even) — how XNNPACK turns a fused activation's real bounds into int8 ones."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        v = F32(F32(value) / F32(scale)) + F32(zero_point)
        v = min(max(F32(v), F32(-128.0)), F32(127.0))
    return int(np.rint(F32(v)))


#: fused activation -> the real interval the delegate passes to XNNPACK (TANH / SIGN_BIT: declined)
ACTIVATION_RANGES = {
    "NONE": (-np.inf, np.inf),
    "RELU": (0.0, np.inf),
    "RELU_N1_TO_1": (-1.0, 1.0),
    "RELU6": (0.0, 6.0),
}


def activation_bounds(fused: str, scale: np.float32, zero_point: int) -> tuple[int, int]:
    """The int8 clamp of a fused activation as XNNPACK computes it."""
    lo, hi = ACTIVATION_RANGES[fused]
    return quantize_bound(lo, scale, zero_point), quantize_bound(hi, scale, zero_point)
