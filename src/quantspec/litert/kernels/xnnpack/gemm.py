"""CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED as the XNNPACK delegate computes them (qs8 with
per-channel ``qc8w`` or per-tensor weights; the ``qs8-*gemm``, ``qs8-igemm`` and ``qs8-dwconv``
``minmax_fp32`` microkernels).

The int32 accumulators are the reference kernels' — XNNPACK folds the input zero point into the
packed bias and pads with the zero point, which gives the same integers modulo 2^32.  The
requantization is :func:`._fp32.requantize_fp32` with, per output channel,
``scale[c] = f32(f32(s_in · s_w[c]) / s_out)`` (float32, left to right,
``init_requantization_scale_qx8_qc8w``), and the fused activation's bounds are
:func:`._fp32.activation_bounds`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._gemm import wrap_int32
from .. import _common as c
from .. import conv as ref_conv
from .. import fully_connected as ref_fc
from ..optimized.gemm import depthwise_accumulate
from ._fp32 import activation_bounds, requantize_fp32

__all__ = ["Conv2D", "DepthwiseConv2D", "FullyConnected", "requantization_scales"]


def requantization_scales(input_scale, filter_scales, output_scale, channels: int) -> np.ndarray:
    """XNNPACK's per-channel float32 requantization scales."""
    s_w = np.broadcast_to(np.asarray(filter_scales, np.float32), (channels,))
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return ((np.float32(input_scale) * s_w).astype(np.float32) / np.float32(output_scale)).astype(np.float32)


@dataclass(frozen=True, eq=False)
class XnnGemm:
    base: object                    # the reference kernel's prepared record
    scale: np.ndarray               # float32 (channels,)
    qmin: int
    qmax: int


def _prepare(kernel_cls, self, inputs, outputs, options, channels_of):
    p = kernel_cls.prepare(self, inputs, outputs, options)
    x, w, out = inputs[0], inputs[1], outputs[0]
    s_in, _ = c.legacy(x)
    s_out, z_out = c.legacy(out)
    scale = requantization_scales(s_in, w.params.scale, s_out, channels_of(p))
    fused = c.option(options, "fused_activation_function", "NONE")
    qmin, qmax = activation_bounds(fused, s_out, z_out)
    return XnnGemm(p, scale, qmin, qmax)


class Conv2D(ref_conv.Conv2D):
    """CONV_2D on XNNPACK: float32 requantization."""

    def prepare(self, inputs, outputs, options) -> XnnGemm:
        return _prepare(ref_conv.Conv2D, self, inputs, outputs, options, lambda p: p.output_shape[3])

    def compute(self, q: XnnGemm, arrays) -> list[np.ndarray]:
        p = q.base
        x = c.value(arrays, p.consts, 0).reshape(p.input_shape)
        if p.filter is not None:
            filt, sums, bound = p.filter, p.filter_sums, p.filter_bound
        else:
            filt, sums, bound = ref_conv.conv_filter(c.value(arrays, p.consts, 1, "filter"), p.groups)
        bias = p.bias if p.bias is not None else c.value(arrays, p.consts, 2, "bias").astype(np.int32).reshape(-1)
        acc = wrap_int32(ref_conv.conv_accumulate(x, p, filt, sums, bound) + bias)
        return [requantize_fp32(acc, q.scale, p.output_zero_point, q.qmin, q.qmax)]


class DepthwiseConv2D(ref_conv.DepthwiseConv2D):
    """DEPTHWISE_CONV_2D on XNNPACK: float32 requantization."""

    def prepare(self, inputs, outputs, options) -> XnnGemm:
        return _prepare(ref_conv.DepthwiseConv2D, self, inputs, outputs, options, lambda p: p.output_shape[3])

    def compute(self, q: XnnGemm, arrays) -> list[np.ndarray]:
        p = q.base
        x = c.value(arrays, p.consts, 0).reshape(p.input_shape)
        filt = p.filter if p.filter is not None else ref_conv.dw_filter(c.value(arrays, p.consts, 1, "filter"),
                                                                         p.input_shape[3])
        bias = None
        if p.has_bias:
            bias = p.bias if p.bias is not None else c.value(arrays, p.consts, 2, "bias").astype(np.int32).reshape(-1)
        acc = depthwise_accumulate(x, p, filt, bias)
        return [requantize_fp32(acc, q.scale, p.output_zero_point, q.qmin, q.qmax)]


class FullyConnected(ref_fc.FullyConnected):
    """FULLY_CONNECTED on XNNPACK: float32 requantization."""

    def prepare(self, inputs, outputs, options) -> XnnGemm:
        return _prepare(ref_fc.FullyConnected, self, inputs, outputs, options, lambda p: max(p.units, 1))

    def compute(self, q: XnnGemm, arrays) -> list[np.ndarray]:
        p = q.base
        if p.depth == 0 or int(np.prod(p.output_shape, dtype=np.int64)) == 0:
            return [np.zeros(p.output_shape, np.int8)]
        x = c.value(arrays, p.consts, 0).reshape(-1)[: p.rows * p.depth].reshape(p.rows, p.depth)
        acc = ref_fc.accumulate(p, x, None if p.weights is not None else c.value(arrays, p.consts, 1, "filter"))
        if p.has_bias:
            bias = p.bias if p.bias is not None else c.value(arrays, p.consts, 2, "bias").astype(np.int32).reshape(p.units)
            acc += bias
        y = requantize_fp32(wrap_int32(acc), q.scale, p.output_zero_point, q.qmin, q.qmax)
        return [y.reshape(p.output_shape)]
