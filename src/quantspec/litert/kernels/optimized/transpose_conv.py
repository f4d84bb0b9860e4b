"""TRANSPOSE_CONV as LiteRT's optimized kernel computes it (``optimized_integer_ops::TransposeConvV2``:
a GEMM, ``Col2im``, ``BiasAdd``, then ``optimized_ops::Quantize`` per output channel).

The int32 accumulators are the reference kernel's (the same integer sums; int32 wrapping).  The
requantization differs: ``Quantize`` handles the output channels in blocks of 8 with NEON lanes —
:func:`._lanes.mbqm_half_up` (the final shift rounds ties *up*) — and the last ``channels mod 8``
channels with the reference ``MultiplyByQuantizedMultiplier`` (ties away from zero).  int8, and
16x8 with an int32 bias (``quantized_bias_type`` INT32); a 16x8 model with an int64 bias runs the
reference kernel in LiteRT's optimized resolver too.

The operator's validation and parameters are the reference kernel's (``REGISTRY["TRANSPOSE_CONV"]``:
its prepared record carries the geometry, the filter, the bias and the multipliers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...fixedpoint import wrap_int32
from .. import REGISTRY
from .. import _common as c
from ..base import Kernel
from ..transpose_conv import scatter_taps
from ._lanes import mbqm_half_up, mbqm_reference

__all__ = ["TransposeConv", "transpose_conv_accumulators"]


def transpose_conv_accumulators(p: Any, x: np.ndarray) -> np.ndarray:
    """The reference kernel's accumulators ``Σ (x - z_in) · w`` scattered to the output positions,
    plus the bias, as int64 holding int32 values (wrapped), shape ``[N, OH, OW, O]``.  ``p`` is the
    reference kernel's prepared record (``input_shape``, ``output_shape``, ``stride``, ``pad``,
    ``input_zero_point``, ``filter`` as float32 ``[KH, KW, I, O]``, ``bias``)."""
    acc = scatter_taps(p, x, 1 << 15 if x.dtype == np.int16 else 256)
    acc = wrap_int32(acc).astype(np.int64)
    if p.bias is not None:
        acc = wrap_int32(acc + np.asarray(p.bias, np.int64)).astype(np.int64)
    return acc


@dataclass(frozen=True, eq=False)
class TransposeConvOptimized:
    base: Any                       # the reference kernel's prepared record
    vector: bool                    # the optimized GEMM path (else LiteRT runs the reference kernel)


class TransposeConv(Kernel):
    """TRANSPOSE_CONV, optimized (see the module docstring)."""

    name = "TRANSPOSE_CONV"
    #: the activation types this kernel models (the optimized mode runs others on the reference kernel)
    activations = ("int8", "int16")
    activation_input = 2

    def prepare(self, inputs, outputs, options) -> TransposeConvOptimized:
        p = REGISTRY[self.name].prepare(inputs, outputs, options)
        wide = bool(getattr(p, "wide", False))
        return TransposeConvOptimized(p, not wide or bool(getattr(p, "bias_int32", False)))

    def compute(self, q: TransposeConvOptimized, arrays):
        p = REGISTRY[self.name].resolve(q.base, arrays)       # a run-time output shape: prepared now
        if not q.vector:
            return REGISTRY[self.name].compute(p, arrays)
        x = c.value(arrays, (), 2, "input")
        if x.dtype != p.dtype or tuple(x.shape) != tuple(p.input_shape):
            return REGISTRY[self.name].compute(p, arrays)          # the reference kernel's error
        acc = transpose_conv_accumulators(p, x)
        oc = acc.shape[-1]
        lanes = np.arange(oc) < (oc // 8) * 8
        mult = np.asarray(p.multiplier, np.int64).reshape(-1)
        shift = np.asarray(p.shift, np.int64).reshape(-1)
        mult, shift = np.broadcast_to(mult, (oc,)), np.broadcast_to(shift, (oc,))
        y = np.where(lanes, mbqm_half_up(acc, mult, shift), mbqm_reference(acc, mult, shift))
        y = wrap_int32(y + p.output_zero_point)
        return [np.clip(y, *p.bounds).astype(p.dtype)]
