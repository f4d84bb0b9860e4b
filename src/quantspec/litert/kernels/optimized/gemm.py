"""CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED as LiteRT's optimized int8 kernels compute them
(``BUILTIN_WITHOUT_DEFAULT_DELEGATES``; ``tflite/kernels/conv.cc``, ``depthwise_conv.cc``,
``fully_connected.cc`` with ``kGenericOptimized``).

The int32 accumulators are the reference kernels' (exact integer sums, wrapping as int32; the same
code computes them).  What differs is the requantization:

- **CONV_2D** (``optimized_integer_ops::ConvPerChannel``: im2col + ruy GEMM) and **FULLY_CONNECTED**
  (``optimized_integer_ops::FullyConnected[PerChannel]``: ruy GEMM, or for one input row the custom
  GEMV, which rounds the same way) requantize every output with :func:`._lanes.mbqm_half_up`.  A
  grouped CONV_2D (``groups != 1``) runs the reference kernel, as LiteRT falls back to it.
- FULLY_CONNECTED's multipliers are ``QuantizeMultiplier`` of the effective scale instead of the
  reference kernel's double-precision float requantization.  With one filter scale (per-tensor,
  or a per-axis filter with a single channel) the scale is ``double(float(s_in · s_w)) / s_out``
  — the product in float32 (``GetQuantizedConvolutionMultipler``); with several,
  ``double(s_in) · double(s_w[c]) / double(s_out)``.
- **DEPTHWISE_CONV_2D** (``DepthwiseConvGeneral``, then ``optimized_ops::Quantize``): the output
  channels are requantized 8 at a time by vector code (:func:`._lanes.mbqm_half_up`); the last
  ``channels mod 8`` channels by scalar code with the reference ``MultiplyByQuantizedMultiplier``.
  So with fewer than 8 output channels the kernel is bit-identical to the reference one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....errors import UnsupportedError
from ... import fixedpoint, modefast
from ..._gemm import wrap_int32
from .. import conv as ref_conv
from .. import fully_connected as ref_fc
from .._common import value
from ._lanes import mbqm_half_up, mbqm_reference

__all__ = ["Conv2D", "DepthwiseConv2D", "FullyConnected", "requantize_half_up", "depthwise_accumulate"]


def requantize_half_up(acc32: np.ndarray, multiplier, shift, zero_point: int, lo: int, hi: int,
                       vector: int | None = None) -> np.ndarray:
    """``clamp(mbqm_half_up(acc, M[c], e[c]) + z_out)`` as int8, the channel ``c`` on the last axis;
    the zero point added with int32 wrap-around, as the C++ does.  With ``vector``, only the
    channels below it round half-up and the others as the reference (the depthwise ``Quantize``).
    (:func:`quantspec.litert.modefast.requantize_channels` computes the same when the fast path is
    on.)"""
    c = acc32.shape[-1]
    vector = c if vector is None else vector
    fast = modefast.requantize_channels(acc32, multiplier, shift, zero_point, lo, hi, vector)
    if fast is not None:
        return fast
    m = np.broadcast_to(np.asarray(multiplier, np.int64), (c,))
    e = np.broadcast_to(np.asarray(shift, np.int64), (c,))
    y = np.empty(acc32.shape, np.int64)
    if vector:
        y[..., :vector] = mbqm_half_up(acc32[..., :vector], m[:vector], e[:vector])
    if vector < c:
        y[..., vector:] = mbqm_reference(acc32[..., vector:], m[vector:], e[vector:])
    return np.clip(wrap_int32(y + zero_point), lo, hi).astype(np.int8)


@dataclass(frozen=True, eq=False)
class ConvOptimized:
    base: ref_conv.ConvPrepared
    reference: bool                 # LiteRT falls back to the reference kernel (grouped convolution)


class Conv2D(ref_conv.Conv2D):
    """CONV_2D, optimized: the reference accumulators, requantized by ruy's rounding."""

    def prepare(self, inputs, outputs, options) -> ConvOptimized:
        p = super().prepare(inputs, outputs, options)
        return ConvOptimized(p, reference=p.groups != 1)

    def compute(self, q: ConvOptimized, arrays) -> list[np.ndarray]:
        p = q.base
        if q.reference:
            return super().compute(p, arrays)
        x = value(arrays, p.consts, 0).reshape(p.input_shape)
        if p.filter is not None:
            filt, sums, bound = p.filter, p.filter_sums, p.filter_bound
        else:
            filt, sums, bound = ref_conv.conv_filter(value(arrays, p.consts, 1, "filter"), p.groups)
        bias = p.bias if p.bias is not None else value(arrays, p.consts, 2, "bias").astype(np.int32).reshape(-1)
        acc = ref_conv.conv_accumulate(x, p, filt, sums, bound) + bias
        return [requantize_half_up(wrap_int32(acc), p.multiplier, p.shift, p.output_zero_point, p.act_min,
                                   p.act_max)]


#: output channels the depthwise ``Quantize`` vector loop handles at a time
DEPTHWISE_BLOCK = 8


class DepthwiseConv2D(ref_conv.DepthwiseConv2D):
    """DEPTHWISE_CONV_2D, optimized: blocks of 8 output channels requantized half-up, the rest as
    the reference kernel."""

    def compute(self, p, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0).reshape(p.input_shape)
        filt = p.filter if p.filter is not None else ref_conv.dw_filter(value(arrays, p.consts, 1, "filter"),
                                                                         p.input_shape[3])
        bias = None
        if p.has_bias:
            bias = p.bias if p.bias is not None else value(arrays, p.consts, 2, "bias").astype(np.int32).reshape(-1)
        acc = depthwise_accumulate(x, p, filt, bias)
        vector = (acc.shape[-1] // DEPTHWISE_BLOCK) * DEPTHWISE_BLOCK
        return [requantize_half_up(acc, p.multiplier, p.shift, p.output_zero_point, p.act_min, p.act_max, vector)]


def depthwise_accumulate(x, p, filt, bias) -> np.ndarray:
    """The reference kernel's int32 accumulators (numba when the fast path is on)."""
    fast = modefast.depthwise_accumulate(x, filt, bias, p)
    return fast if fast is not None else ref_conv.depthwise_accumulate(x, p, filt, bias)


@dataclass(frozen=True, eq=False)
class FullyConnectedOptimized:
    base: ref_fc.FullyConnectedPrepared
    multiplier: np.ndarray          # int32 (units,) or (1,)
    shift: np.ndarray


class FullyConnected(ref_fc.FullyConnected):
    """FULLY_CONNECTED, optimized: integer multipliers (a float32 product for one filter scale), ruy's
    rounding."""

    def prepare(self, inputs, outputs, options) -> FullyConnectedOptimized:
        p = super().prepare(inputs, outputs, options)
        if p.depth == 0:
            return FullyConnectedOptimized(p, np.zeros(1, np.int32), np.zeros(1, np.int32))
        x, w, out = inputs[0], inputs[1], outputs[0]
        s_in, _ = ref_fc.legacy(x)
        s_out, _ = ref_fc.legacy(out)
        scales = np.asarray(w.params.scale, np.float32)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if scales.size > 1:
                eff = np.float64(s_in) * scales.astype(np.float64) / np.float64(s_out)
            else:
                eff = np.array([np.float64(np.float32(s_in) * scales[0]) / np.float64(s_out)])
        if not np.all(np.isfinite(eff)):
            raise UnsupportedError("output.scale", "gives a non-finite effective scale s_in*s_w/s_out for the "
                                   "optimized FULLY_CONNECTED", float(s_out))
        mult, shift = fixedpoint.quantize_multiplier(eff)
        shift = np.asarray(shift, np.int32)
        if shift.size and int(shift.max()) > 30:
            raise UnsupportedError("output.scale", "FULLY_CONNECTED: an effective scale s_in*s_w/s_out >= 2^30 "
                                   "makes the optimized kernel's left shift leave int32 (undefined behaviour)",
                                   float(s_out))
        return FullyConnectedOptimized(p, np.asarray(mult, np.int32), shift)

    def compute(self, q: FullyConnectedOptimized, arrays) -> list[np.ndarray]:
        p = q.base
        if p.depth == 0 or int(np.prod(p.output_shape, dtype=np.int64)) == 0:
            return [np.zeros(p.output_shape, np.int8)]
        x = value(arrays, p.consts, 0).reshape(-1)[: p.rows * p.depth].reshape(p.rows, p.depth)
        acc = ref_fc.accumulate(p, x, None if p.weights is not None else value(arrays, p.consts, 1, "filter"))
        if p.has_bias:
            bias = p.bias
            if bias is None:
                bias = value(arrays, p.consts, 2, "bias").astype(np.int32).reshape(p.units)
            acc += bias
        y = requantize_half_up(wrap_int32(acc), q.multiplier, q.shift, p.output_zero_point, p.act_min, p.act_max)
        return [y.reshape(p.output_shape)]
