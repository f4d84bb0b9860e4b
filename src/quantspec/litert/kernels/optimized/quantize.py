"""QUANTIZE (requantization) and DEQUANTIZE as LiteRT's optimized kernels compute them
(``optimized_ops::Requantize``, ``optimized_ops::Dequantize``).

- **QUANTIZE** int8/uint8 -> int8/uint8: blocks of 16 elements requantize with
  :func:`._lanes.mbqm_half_up` (``MultiplyByQuantizedMultiplier4Rows``), the tail (``size mod 16``
  elements) with the reference ``MultiplyByQuantizedMultiplier``.  A requantization to or from
  int16 is the reference kernel (``optimized_ops::Requantize``'s generic case).
- **QUANTIZE** float32 -> int8 or int16, per tensor (``optimized_ops::AffineQuantize``): blocks of 8 elements
  compute ``rint(x · f32(1 / double(scale)))`` — a multiplication by the reciprocal, ties to *even*
  (``vcvtnq_s32_f32``; NaN and values beyond int32 become INT32_MIN) — then add the zero point
  (int32, wrapping) and clamp; the tail (``size mod 8`` elements) divides in *double* precision
  (``val / double(scale)``) and rounds ties away from zero — so a value that is a tie in float32
  is not always one there.  Per-axis QUANTIZE is the reference kernel.
- **DEQUANTIZE** int8 -> float32, per tensor: blocks of 8 elements compute
  ``f32(q) · f32(scale) + f32(-z · double(scale))`` in float32 — a product and a sum, each rounded
  — the tail ``f32(double(scale) · (q - z))`` as the reference kernel.  Per-axis DEQUANTIZE is the
  reference kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...fixedpoint import wrap_int32
from .. import _common as c
from ...params import affine_quantize
from .. import quantize as ref
from ._lanes import block_mask, mbqm_half_up, mbqm_reference

__all__ = ["Quantize", "Dequantize"]


_BYTES = (np.dtype(np.int8), np.dtype(np.uint8))


class Quantize(ref.Quantize):
    """QUANTIZE, optimized: the requantization's vector blocks round ties up; float32 blocks of 8
    multiply by the reciprocal scale."""

    #: the activation types this kernel models (the optimized mode runs others on the reference kernel)
    activations = ("int8", "int16")

    def compute(self, p, arrays):
        if isinstance(p, ref.FloatQuantizeParams):
            return [self._float(p, arrays)]
        if p.xor or p.in_dtype not in _BYTES or p.out_dtype not in _BYTES:
            return super().compute(p, arrays)
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.in_dtype)])
        v = x.reshape(-1).astype(np.int64) - p.input_zero_point
        lanes = block_mask(v.size, 16)
        y = np.where(lanes, mbqm_half_up(v, p.multiplier, p.shift), mbqm_reference(v, p.multiplier, p.shift))
        info = np.iinfo(p.out_dtype)
        out = np.clip(wrap_int32(y + p.output_zero_point), info.min, info.max).astype(p.out_dtype)
        return [out.reshape(p.shape)]


    def _float(self, p: ref.FloatQuantizeParams, arrays) -> np.ndarray:
        if p.params is None or p.params.per_axis:
            return super().compute(p, arrays)[0]
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, np.dtype(np.float32))])
        zp = int(p.params.zero_point[0])
        info = np.iinfo(p.out_dtype)
        tail = affine_quantize(x.reshape(-1).astype(np.float64), np.float64(p.params.scale[0]), zp, info.min, info.max)
        out = tail.astype(p.out_dtype).reshape(p.shape)
        flat = out.reshape(-1)
        lanes = block_mask(flat.size, 8)
        if not lanes.any():
            return out
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            inverse = np.float32(1.0 / np.float64(p.params.scale[0]))
            v = (x.reshape(-1)[lanes] * inverse).astype(np.float32)
            r = np.rint(v)
            inside = (r >= -2.0 ** 31) & (r < 2.0 ** 31)
            q = np.where(inside, r, -(2.0 ** 31)).astype(np.int64)
        q = wrap_int32(q + zp)
        flat[lanes] = np.clip(q, info.min, info.max)
        return out


@dataclass(frozen=True)
class DequantizeOptimized:
    base: ref.DequantizeParams
    vector: bool                   # per-tensor int8 (uint8, int16): the 8-lane float path


class Dequantize(ref.Dequantize):
    """DEQUANTIZE, optimized: per-tensor blocks of 8 in float32."""

    def prepare(self, inputs, outputs, options) -> DequantizeOptimized:
        p = super().prepare(inputs, outputs, options)
        return DequantizeOptimized(p, not p.params.per_axis)

    def compute(self, q: DequantizeOptimized, arrays):
        p = q.base
        out = super().compute(p, arrays)[0]
        if not q.vector or out.size < 8:
            return [out]
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.dtype)])
        scale = np.float64(p.params.scale[0])
        zp = int(p.params.zero_point[0])
        flat = out.reshape(-1)
        lanes = block_mask(flat.size, 8)
        with np.errstate(over="ignore", invalid="ignore"):
            shifted = np.float32(-zp * scale)
            v = x.reshape(-1)[lanes].astype(np.float32) * np.float32(scale) + shifted
        flat[lanes] = v.astype(np.float32)
        return [out]
