"""ADD, SUB and MUL as the XNNPACK delegate computes them (``qs8-vadd`` / ``qs8-vaddc`` with integer
multipliers, ``qs8-vmul`` / ``qs8-vmulc`` with float32 requantization; ``xnn_init_qs8_add_minmax_scalar_params``,
``xnn_init_qs8_mul_minmax_scalar_params``).

**ADD / SUB** (SUB is ADD with the second input's scale negated)::

    ra = f32(s_a / s_out),  rb = ±f32(s_b / s_out)
    shift = 20 - floor(log2(max(|ra|, |rb|)))                     (in [12, 30])
    ma = lrintf(ra · 2^shift),  mb = lrintf(rb · 2^shift)          (ties to even)
    acc = 2^(shift-1) - ma·za - mb·zb + ma·a + mb·b               (int32)
    out = clamp((acc >> shift) + z_out)                            (arithmetic shift: ties up)

**MUL**: ``out = clamp(rint(f32((a - za)·(b - zb)) · f32(f32(s_a · s_b) / s_out)) + z_out)``.

A fused activation becomes a separate clamp with :func:`._fp32.activation_bounds`.  Broadcasting
gives the same per-element arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import _common as c
from .. import elementwise as ref
from ._fp32 import activation_bounds, to_float32

__all__ = ["Add", "Sub", "Mul", "add_parameters"]

_INT8 = np.dtype(np.int8)


def add_parameters(s_a, s_b, s_out, sign_b: int = 1) -> tuple[int, int, int]:
    """``(a_multiplier, b_multiplier, shift)`` of XNNPACK's qs8 ADD (``sign_b = -1``: SUB)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ra = np.float32(np.float32(s_a) / np.float32(s_out))
        rb = np.float32(np.float32(np.float32(s_b) * np.float32(sign_b)) / np.float32(s_out))
    top = max(abs(ra), abs(rb))
    exponent = int((np.array(top, np.float32).view(np.uint32) >> 23) & 0xFF) - 127
    shift = 20 - exponent
    ma = int(np.rint(np.float32(abs(ra) * np.float32(2.0 ** shift))))
    mb = int(np.rint(np.float32(abs(rb) * np.float32(2.0 ** shift))))
    return (-ma if ra < 0 else ma), (-mb if rb < 0 else mb), shift


@dataclass(frozen=True)
class XnnAdd:
    base: ref.AddSubParams
    a_multiplier: int
    b_multiplier: int
    shift: int
    qmin: int
    qmax: int


class _AddSub(ref.AddSubKernel):
    sign = 1

    def prepare(self, inputs, outputs, options) -> XnnAdd:
        p = super().prepare(inputs, outputs, options)
        (s1, _), (s2, _), (so, zo) = (c.activation(self.name, n, t) for n, t in
                                      (("input 0", inputs[0]), ("input 1", inputs[1]), ("output", outputs[0])))
        ma, mb, shift = add_parameters(s1, s2, so, self.sign)
        qmin, qmax = activation_bounds(c.option(options, "fused_activation_function", "NONE"), so, zo)
        return XnnAdd(p, ma, mb, shift, qmin, qmax)

    def compute(self, q: XnnAdd, arrays):
        p = q.base
        x, y = c.check_arrays(p.op, arrays, [(0, p.shapes[0], _INT8), (1, p.shapes[1], _INT8)])
        (za, zb) = p.offsets
        bias = (1 << (q.shift - 1)) - q.a_multiplier * za - q.b_multiplier * zb
        acc = bias + q.a_multiplier * x.astype(np.int64) + q.b_multiplier * y.astype(np.int64)
        out = np.clip((acc >> q.shift) + p.output_zero_point, -128, 127)
        return [np.clip(out, q.qmin, q.qmax).astype(np.int8).reshape(p.output_shape)]


class Add(_AddSub):
    name = "ADD"


class Sub(_AddSub):
    name = "SUB"
    sign = -1


@dataclass(frozen=True)
class XnnMul:
    base: ref.MulParams
    scale: np.float32
    qmin: int
    qmax: int


class Mul(ref.Mul):
    """MUL on XNNPACK: float32 requantization of the int32 product."""

    def prepare(self, inputs, outputs, options) -> XnnMul:
        p = super().prepare(inputs, outputs, options)
        (s1, _), (s2, _), (so, zo) = (c.activation(self.name, n, t) for n, t in
                                      (("input 0", inputs[0]), ("input 1", inputs[1]), ("output", outputs[0])))
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            scale = np.float32(np.float32(s1 * s2) / so)
        qmin, qmax = activation_bounds(c.option(options, "fused_activation_function", "NONE"), so, zo)
        return XnnMul(p, scale, qmin, qmax)

    def compute(self, q: XnnMul, arrays):
        p = q.base
        x, y = c.check_arrays(self.name, arrays, [(0, p.shapes[0], _INT8), (1, p.shapes[1], _INT8)])
        prod = (x.astype(np.int64) - p.offsets[0]) * (y.astype(np.int64) - p.offsets[1])
        with np.errstate(over="ignore", invalid="ignore"):
            v = to_float32(prod) * q.scale
        out = np.clip(np.rint(v).astype(np.int64) + p.output_zero_point, -128, 127)
        return [np.clip(out, q.qmin, q.qmax).astype(np.int8).reshape(p.output_shape)]
