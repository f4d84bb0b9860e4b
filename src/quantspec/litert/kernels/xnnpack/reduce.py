"""MEAN and SUM as the XNNPACK delegate computes them (``xnn_define_static_reduce_v2`` on qs8: the
``qs8-rsum`` / ``qs8-rdsum`` sums, then an int32 -> qs8 conversion in float32;
``src/operators/reduce-nd.c``).

With ``S`` the int32 sum of the raw values and ``n`` the number of reduced elements::

    scale = f32(s_in / s_out)              MEAN: scale = f32(scale · f32(1 / n))
    zp'   = f32(z_out - f32(f32(n · z_in) · scale))
    out   = clamp(nearbyint(f32(f32(S) · scale) + zp'), -128, 127)        (ties to even)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...fixedpoint import wrap_int32
from .. import _common as c
from .. import reduce as ref
from ._fp32 import to_float32

__all__ = ["Mean", "Sum", "conversion"]

_INT8 = np.dtype(np.int8)


@dataclass(frozen=True)
class XnnReduce:
    base: ref.ReduceParams
    scale: np.float32               # s_in / s_out
    input_zero_point: int
    output_zero_point: int
    mean: bool


def conversion(q: XnnReduce, n: int) -> tuple[np.float32, np.float32]:
    """The float32 ``(scale, zp')`` of the int32 -> qs8 conversion of a sum of ``n`` elements (see the
    module docstring)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scale = q.scale
        if q.mean:
            scale = np.float32(scale * np.float32(np.float32(1) / np.float32(n)))
        zp = np.float32(np.float32(q.output_zero_point)
                        - np.float32(np.float32(np.float32(n) * np.float32(q.input_zero_point)) * scale))
    return scale, zp


class _Reduce:
    mean = True

    def prepare(self, inputs, outputs, options) -> XnnReduce:
        options = {k: v for k, v in dict(options or {}).items() if not k.startswith("quantspec_")}
        p = super().prepare(inputs, outputs, options)
        s_in, z_in = c.activation(self.name, "input", inputs[0])
        s_out, z_out = c.activation(self.name, "output", outputs[0])
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            scale = np.float32(s_in / s_out)
        return XnnReduce(p, scale, z_in, z_out, self.mean)

    def compute(self, q: XnnReduce, arrays):
        p = q.base
        x, axes, out_shape, n = ref.reduction(p, arrays, _INT8)
        if x.size == 0 or n == 0:
            return [np.zeros(out_shape, np.int8)]
        total = wrap_int32(x.astype(np.int64).sum(axis=axes) if axes else x.astype(np.int64))
        scale, zp = conversion(q, n)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            v = np.float32(1) * (to_float32(total) * scale).astype(np.float32) + zp
            v = np.where(np.isnan(v), np.float32(0), v)
        out = np.clip(np.rint(v.astype(np.float32)), -128, 127).astype(np.int8)
        return [np.asarray(out).reshape(out_shape)]


class Mean(_Reduce, ref.Mean):
    mean = True


class Sum(_Reduce, ref.Sum):
    mean = False
