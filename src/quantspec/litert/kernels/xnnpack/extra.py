"""LEAKY_RELU, BATCH_MATMUL and TRANSPOSE_CONV as the XNNPACK delegate computes them on int8
(``qs8-vlrelu``; the ``qs8`` batch matrix multiply and ``qs8_qc8w`` deconvolution with the
``minmax_fp32`` GEMM microkernels).

- **LEAKY_RELU**: Q8 multipliers ``m+ = lrintf(256 · f32(s_in / s_out))`` and
  ``m- = lrintf(256 · f32(f32(s_in / s_out) · alpha))``; ``out = clamp(((x - z_in) · m + 128) >> 8
  + z_out)`` with ``m = m+`` for ``x >= z_in`` (the scalar ``qs8-vlrelu`` and the AVX2 one, which
  computes the same through ``_mm256_mulhrs_epi16``).
- **BATCH_MATMUL** (right operand per-tensor with zero point 0): the exact integer products
  ``Σ (a - z_a) · b`` requantized with :func:`._fp32.requantize_fp32`, ``scale = f32(f32(s_a · s_b) / s_out)``,
  over the full int8 range (BATCH_MATMUL has no fused activation).
- **TRANSPOSE_CONV**: the reference kernel's accumulators plus the bias, requantized per output
  channel with ``scale[c] = f32(f32(s_in · s_w[c]) / s_out)``, clamped to the fused activation's
  bounds as XNNPACK quantizes them (:func:`._fp32.activation_bounds`).

Validation is the reference kernels' (``REGISTRY[name].prepare``); the delegate's own checks are in
:mod:`.delegate`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..._gemm import matmul_exact
from ...fixedpoint import wrap_int32
from .. import REGISTRY, pooling
from .. import _common as c
from ..base import Kernel
from ._fp32 import activation_bounds, requantize_fp32

__all__ = ["LeakyRelu", "BatchMatMul", "TransposeConv", "leaky_relu_multipliers"]

F32 = np.float32


def leaky_relu_multipliers(input_scale, output_scale, alpha) -> tuple[int, int]:
    """``xnn_init_qs8_lrelu_scalar_params``: ``(lrintf(256 · positive_scale), lrintf(256 · negative_scale))``."""
    with np.errstate(all="ignore"):
        positive = F32(F32(input_scale) / F32(output_scale))
        negative = F32(positive * F32(alpha))
        return int(np.rint(F32(F32(256) * positive))), int(np.rint(F32(F32(256) * negative)))


@dataclass(frozen=True)
class XnnLeakyRelu:
    shape: tuple[int, ...]
    input_zero_point: int
    output_zero_point: int
    positive: int
    negative: int


class LeakyRelu(Kernel):
    """LEAKY_RELU on XNNPACK (int8)."""

    name = "LEAKY_RELU"

    def prepare(self, inputs, outputs, options) -> XnnLeakyRelu:
        REGISTRY[self.name].prepare(inputs, outputs, options)
        s_in, z_in = c.activation(self.name, "input", inputs[0])
        s_out, z_out = c.activation(self.name, "output", outputs[0])
        pos, neg = leaky_relu_multipliers(s_in, s_out, c.option(options, "alpha", 0.0, kind=float))
        return XnnLeakyRelu(tuple(inputs[0].shape), z_in, z_out, pos, neg)

    def compute(self, p: XnnLeakyRelu, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, np.dtype(np.int8))])
        v = x.astype(np.int64) - p.input_zero_point
        acc = v * np.where(v >= 0, p.positive, p.negative) + 128
        return [np.clip((acc >> 8) + p.output_zero_point, -128, 127).astype(np.int8)]


@dataclass(frozen=True, eq=False)
class XnnBatchMatMul:
    base: Any                       # the reference kernel's prepared record
    adj: tuple[bool, bool]
    zero_point: int                 # the left operand's
    output_zero_point: int
    scale: np.float32
    consts: tuple[np.ndarray | None, np.ndarray | None]


class BatchMatMul(Kernel):
    """BATCH_MATMUL on XNNPACK (int8, right operand with zero point 0)."""

    name = "BATCH_MATMUL"

    def prepare(self, inputs, outputs, options) -> XnnBatchMatMul:
        p = REGISTRY[self.name].prepare(inputs, outputs, options)
        a, b, o = inputs[0], inputs[1], outputs[0]
        s_a, z_a = c.activation(self.name, "input 0", a)
        s_b = F32(b.params.scale[0])
        s_out, z_out = c.activation(self.name, "output", o)
        with np.errstate(all="ignore"):
            scale = F32(F32(F32(s_a) * s_b) / F32(s_out))
        adj = (bool(options.get("adj_x") or False), bool(options.get("adj_y") or False))
        consts = tuple(None if t.data is None else np.asarray(t.data) for t in (a, b))
        return XnnBatchMatMul(p, adj, z_a, z_out, scale, consts)

    def compute(self, q: XnnBatchMatMul, arrays):
        a = c.value(arrays, q.consts, 0).astype(np.float32) - F32(q.zero_point)
        b = c.value(arrays, q.consts, 1).astype(np.float32)
        if q.adj[0]:
            a = np.swapaxes(a, -1, -2)
        if q.adj[1]:
            b = np.swapaxes(b, -1, -2)
        acc = wrap_int32(matmul_exact(a, b, 256, 128)).astype(np.int64)
        y = requantize_fp32(acc, q.scale, q.output_zero_point, -128, 127)
        return [y.reshape(q.base.output_shape)]


@dataclass(frozen=True, eq=False)
class XnnTransposeConv:
    base: Any
    scale: np.ndarray               # float32, per output channel
    qmin: int
    qmax: int


class TransposeConv(Kernel):
    """TRANSPOSE_CONV on XNNPACK (int8)."""

    name = "TRANSPOSE_CONV"

    def prepare(self, inputs, outputs, options) -> XnnTransposeConv:
        from .gemm import requantization_scales

        p = REGISTRY[self.name].prepare(inputs, outputs, options)
        w, x, o = inputs[1], inputs[2], outputs[0]
        s_in, _ = c.activation(self.name, "input", x)
        s_out, z_out = c.activation(self.name, "output", o)
        oc = int(w.shape[0])
        scale = requantization_scales(s_in, w.params.scale, s_out, oc)
        qmin, qmax = activation_bounds(c.option(options, "fused_activation_function", "NONE"), s_out, z_out)
        return XnnTransposeConv(p, scale, qmin, qmax)

    def compute(self, q: XnnTransposeConv, arrays):
        from ..optimized.transpose_conv import transpose_conv_accumulators

        p = q.base
        x = c.value(arrays, (), 2, "input")
        if x.dtype != p.dtype or tuple(x.shape) != tuple(p.input_shape):
            return REGISTRY[self.name].compute(p, arrays)          # the reference kernel's error
        acc = transpose_conv_accumulators(p, x)
        return [requantize_fp32(acc, q.scale, p.output_zero_point, q.qmin, q.qmax)]


class MaxPool2D(pooling.MaxPool2D):
    """MAX_POOL_2D as XNNPACK sizes it: with VALID padding, an output length ``doz(in, filter) /
    stride + 1`` per axis (XNNPACK's ``xnn_compute_convolution_output_dimension``; ``doz`` is the
    difference or zero), so a window longer than the input gives one output over the whole input,
    where LiteRT's own kernel gives none.  Elsewhere the reference kernel's sizes and bytes."""

    def prepare(self, inputs, outputs, options) -> pooling.PoolPrepared:
        p = super().prepare(inputs, outputs, options)
        if options.get("padding") != "VALID":
            return p
        n, h, w, c = p.input_shape
        (fh, fw), (sh, sw) = p.filter_hw, p.stride
        if fh <= h and fw <= w:
            return p
        oh, ow = max(h - fh, 0) // sh + 1, max(w - fw, 0) // sw + 1
        # a window past the input's end reads only the input: the filter cut to the input's length
        # along such an axis gives the same taps
        return replace(p, output_shape=(n, oh, ow, c), filter_hw=(min(fh, h), min(fw, w)), pad=(0, 0))
