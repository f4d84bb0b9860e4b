"""The fast path of the optimized and XNNPACK kernel modes' requantizations and depthwise
accumulation (numba kernels in :mod:`._jitted_modes`).  Each function returns None where the fast
path is off (numba missing, ``QUANTSPEC_FAST=0``), and the caller then takes its numpy path, the
readable reference of the same bytes."""

from __future__ import annotations

import numpy as np

from .._fastpath import runner as core
from .._fastpath import jit

__all__ = ["requantize_channels", "requantize_fp32", "depthwise_accumulate"]


def _jitted():
    return jit.load("quantspec.litert._jitted_modes")


def requantize_channels(acc: np.ndarray, multiplier, shift, zero_point: int, lo: int, hi: int,
                        vector: int) -> np.ndarray | None:
    """int8 ``clamp(requantize(acc) + zp)``, the channel on the last axis; channels below ``vector``
    with the optimized kernels' half-up final rounding, the others with the reference rounding."""
    if not jit.enabled():
        return None
    c = acc.shape[-1]
    a = np.ascontiguousarray(acc.reshape(-1, c))
    out = np.empty(a.shape, np.int8)
    if out.size:
        m = np.ascontiguousarray(np.broadcast_to(np.asarray(multiplier, np.int64), (c,)))
        s = np.ascontiguousarray(np.broadcast_to(np.asarray(shift, np.int64), (c,)))
        core.launch(_jitted().requantize_channels, (a, m, s, int(zero_point), int(lo), int(hi), int(vector), out),
                    a.shape[0], out.size)
    return out.reshape(acc.shape)


def requantize_fp32(acc: np.ndarray, scale, zero_point: int, lo: int, hi: int) -> np.ndarray | None:
    """XNNPACK's ``clamp(rint(f32(acc) · scale[c]) + zp)`` as int8, the channel on the last axis."""
    if not jit.enabled():
        return None
    c = acc.shape[-1]
    a = np.ascontiguousarray(acc.reshape(-1, c))
    out = np.empty(a.shape, np.int8)
    if out.size:
        sc = np.ascontiguousarray(np.broadcast_to(np.asarray(scale, np.float32), (c,)))
        core.launch(_jitted().requantize_fp32, (a, sc, int(zero_point), int(lo), int(hi), out), a.shape[0], out.size)
    return out.reshape(acc.shape)


def depthwise_accumulate(x: np.ndarray, filt: np.ndarray, bias: np.ndarray | None, p) -> np.ndarray | None:
    """DEPTHWISE_CONV_2D's int32 accumulators (``ConvPrepared`` ``p``; ``filt`` int32 (KH, KW, I, M))."""
    if not jit.enabled():
        return None
    n, oh, ow, oc = p.output_shape
    out = np.empty((n, oh, ow, oc), np.int32)
    if out.size:
        b = np.zeros(oc, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(oc)
        _, h, w, c = p.input_shape
        kh, kw = p.filter_hw
        g = np.array([h, w, c, kh, kw, oc // c, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        core.launch(_jitted().depthwise_accumulate, (
            core.flat(x, np.int8), core.flat(np.asarray(filt, np.int32)), b, g, int(p.input_zero_point),
            out.reshape(-1)), n * oh, out.size)
    return out
