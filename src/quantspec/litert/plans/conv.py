"""Plans of CONV_2D (im2col, GEMM, epilogue) and DEPTHWISE_CONV_2D (int8 fused kernel, int16 epilogue)."""

from __future__ import annotations

import math

import numpy as np

from ..._fastpath import jit
from .base import Plan, Requant, Scratch, exact_chunks, exact_gemm, jitted, own

__all__ = ["ConvPlan", "DepthwisePlan", "WideDepthwisePlan", "conv_plan", "depthwise_plan"]


class ConvPlan(Plan):
    """CONV_2D (groups 1, constant filter and bias): im2col, GEMM, epilogue."""

    __slots__ = ("geometry", "pad", "split", "rows", "depth", "channels", "weights", "chunks", "requant",
                 "scratch", "shape", "direct")

    def __init__(self, kernel, p, chunks, requant, split):
        super().__init__(kernel, p)
        n, h, w, c = p.input_shape
        _, oh, ow, o = p.output_shape
        kh, kw = p.filter_hw
        self.geometry = np.array([h, w, c, kh, kw, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        self.pad = np.float32(p.input_zero_point)
        self.split = split
        self.rows = n * oh * ow
        self.depth = kh * kw * c
        self.channels = o
        self.weights = p.filter[0]
        self.chunks = chunks
        self.requant = requant
        self.shape = p.output_shape
        # a 1x1 convolution with stride 1 reads the input as it is: the matrix is the input converted
        self.direct = (kh, kw) == (1, 1) and tuple(p.stride) == (1, 1) and tuple(p.pad) == (0, 0) and not split
        m = self.rows * (2 if split else 1)
        shapes = [((m, self.depth), np.float32), ((m, o), np.float32)]
        if len(chunks) > 1:
            shapes.append(((m, o), np.float64))
        self.scratch = Scratch(shapes)

    def compute(self, unused, arrays):
        x = arrays[0]
        bufs, owned = self.scratch.take()
        try:
            a = bufs[0]
            if self.direct:
                np.copyto(a, x.reshape(a.shape))
            else:
                jitted().im2col(x.reshape(-1), self.geometry, self.pad, self.split, a.reshape(-1))
            g = exact_gemm(a, self.weights, self.chunks, bufs[1], bufs[2] if len(bufs) > 2 else None)
            out = self.requant.run(g, self.split, self.rows, self.channels)
        finally:
            self.scratch.give(owned)
        return [out.reshape(self.shape)]


def conv_plan(kernel, p, ins, outs):
    from .. import _jitted_plans as K

    if p.filter is None or p.groups != 1 or p.bias is None and p.has_bias:
        return None
    o = p.output_shape[3]
    if p.wide and p.input_zero_point != 0:
        return None
    split = p.wide
    chunks = exact_chunks(p.filter.shape[1], 255 if split else max(128, abs(p.input_zero_point)), p.filter_bound)
    if chunks is None:
        return None
    bias = np.zeros(o, np.int64) if p.bias is None else p.bias.astype(np.int64)
    corr = bias - np.int64(p.input_zero_point) * p.filter_sums
    kind = K.MBQM64 if p.wide and not p.bias_int32 else K.MBQM32
    if p.wide and p.bias_int32:
        # int32 accumulator: the C++ sum and the bias each wrap; the epilogue wraps their exact sum
        pass
    requant = Requant(o, corr, kind, p.output_zero_point, p.act_min, p.act_max, np.int16 if p.wide else np.int8,
                       multiplier=p.multiplier, shift=p.shift)
    return ConvPlan(kernel, p, chunks, requant, split)


class DepthwisePlan(Plan):
    """int8: the fused kernel of :mod:`quantspec.litert.fast` with its arguments prepared."""

    __slots__ = ("filt", "bias", "mult", "shift", "geometry", "record", "zx", "shape", "work")

    def __init__(self, kernel, p, bias):
        from ..fast import Requantize

        super().__init__(kernel, p)
        n, oh, ow, oc = p.output_shape
        _, h, w, c = p.input_shape
        kh, kw = p.filter_hw
        self.filt = own(p.filter, np.int32).reshape(-1)
        self.bias = bias
        self.mult = own(np.broadcast_to(np.asarray(p.multiplier, np.int64), (oc,)))
        self.shift = own(np.broadcast_to(np.asarray(p.shift, np.int64), (oc,)))
        self.geometry = np.array([h, w, c, kh, kw, oc // c, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        self.record = Requantize(int(p.output_zero_point), int(p.act_min), int(p.act_max))
        self.zx = int(p.input_zero_point)
        self.shape = p.output_shape
        self.work = n * oh

    def compute(self, unused, arrays):
        from ..._fastpath import runner as core

        out = np.empty(self.shape, np.int8)
        k = jit.load("quantspec.litert._jitted")
        core.launch(k.depthwise, (arrays[0].reshape(-1), self.filt, self.bias, self.mult, self.shift, self.geometry,
                                  self.record, self.zx, out.reshape(-1)), self.work, out.size)
        return [out]


class WideDepthwisePlan(Plan):
    """int16 (the 16x8 kernel): the exact int64 accumulators, then the epilogue."""

    __slots__ = ("filt", "bias", "geometry", "requant", "shape", "scratch", "rows", "channels")

    def __init__(self, kernel, p, bias, requant):
        super().__init__(kernel, p)
        n, oh, ow, oc = p.output_shape
        _, h, w, c = p.input_shape
        kh, kw = p.filter_hw
        self.filt = own(p.filter, np.int64).reshape(-1)
        self.bias = bias
        self.geometry = np.array([h, w, c, kh, kw, oc // c, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        self.requant = requant
        self.shape = p.output_shape
        self.rows, self.channels = n * oh * ow, oc
        self.scratch = Scratch([((n * oh * ow, oc), np.int64)])

    def compute(self, unused, arrays):
        bufs, owned = self.scratch.take()
        try:
            acc = bufs[0]
            jitted().depthwise_acc(arrays[0].reshape(-1), self.filt, self.bias, self.geometry, np.int64(0),
                               acc.reshape(-1))
            out = self.requant.run(acc, False, self.rows, self.channels)
        finally:
            self.scratch.give(owned)
        return [out.reshape(self.shape)]


def depthwise_plan(kernel, p, ins, outs):
    from .. import _jitted_plans as K

    if p.filter is None or (p.has_bias and p.bias is None) or math.prod(p.output_shape) == 0:
        return None
    oc = p.output_shape[3]
    bias = np.zeros(oc, np.int64) if p.bias is None else own(p.bias, np.int64).reshape(oc)
    if not p.wide:
        return DepthwisePlan(kernel, p, bias)
    if p.input_zero_point != 0:
        return None
    requant = Requant(oc, 0, K.MBQM64, p.output_zero_point, p.act_min, p.act_max, np.int16,
                       multiplier=p.multiplier, shift=p.shift)
    return WideDepthwisePlan(kernel, p, bias, requant)
