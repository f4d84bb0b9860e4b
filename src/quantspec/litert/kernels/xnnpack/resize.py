"""RESIZE_BILINEAR as the XNNPACK delegate computes it (``xnn_define_static_resize_bilinear_2d`` on
qs8: ``xnn_indirection_init_resize_bilinear2d_hwc_q11`` and the ``s8-ibilinear`` microkernels).

The source positions and weights are computed in float32 and rounded to 11-bit fractions; the
interpolation is integer::

    scale = f32(in / out)       (align_corners and out > 1: f32((in - 1) / (out - 1)))
    legacy / align_corners:  p = min(f32(o · scale), in - 1)
    half_pixel_centers:      p = clamp(f32(o · scale) + f32(0.5·scale - 0.5), 0, in - 1)
    i0 = int(p),  i1 = min(i0 + 1, in - 1),  a = lrintf(f32(p - i0) · 2048)      (ties to even)
    t = tl·2048 + (tr - tl)·ax,  b = bl·2048 + (br - bl)·ax
    out = (t·2048 + (b - t)·ay + 2^21) >> 22                                        (ties up)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import resize as ref
from .._common import value

__all__ = ["ResizeBilinear", "axis_plan"]


def axis_plan(in_size: int, out_size: int, align: bool, half: bool):
    """(i0, i1, alpha) per output position along one axis, as XNNPACK's Q11 indirection."""
    adj = 1 if (align and out_size != 1) else 0
    f = np.float32
    scale = f(f(in_size - adj) / f(out_size - adj))
    o = np.arange(out_size, dtype=np.float32)
    top = f(in_size - 1)
    if half and not align:
        offset = f(f(f(0.5) * scale) - f(0.5))
        p = (o * scale).astype(np.float32) + offset
        p = np.minimum(np.maximum(p.astype(np.float32), f(0)), top)
    else:
        p = np.minimum((o * scale).astype(np.float32), top)
    i0 = p.astype(np.int64)
    i1 = np.minimum(i0 + 1, in_size - 1)
    alpha = np.rint(((p - i0.astype(np.float32)).astype(np.float32) * f(2048)).astype(np.float32)).astype(np.int64)
    return i0, i1, alpha


@dataclass(frozen=True, eq=False)
class XnnResize:
    base: ref.ResizePrepared
    plan: tuple | None


class ResizeBilinear(ref.ResizeBilinear):
    """RESIZE_BILINEAR on XNNPACK: float32 positions, Q11 weights."""

    def prepare(self, inputs, outputs, options) -> XnnResize:
        p = super().prepare(inputs, outputs, options)
        plan = None
        if p.plan is not None:
            plan = self._plan(p, p.plan[0], p.plan[1])
        return XnnResize(p, plan)

    @staticmethod
    def _plan(p, oh, ow):
        _, h, w, _ = p.input_shape
        return (oh, ow, axis_plan(h, oh, p.align_corners, p.half_pixel_centers),
                axis_plan(w, ow, p.align_corners, p.half_pixel_centers))

    def compute(self, q: XnnResize, arrays) -> list[np.ndarray]:
        p = q.base
        x = value(arrays, p.consts, 0)
        plan = q.plan
        if plan is None:
            size = np.asarray(value(arrays, p.consts, 1, "size")).reshape(-1)
            plan = self._plan(p, int(size[0]), int(size[1]))
        oh, ow, (y0, y1, ay), (x0, x1, ax) = plan
        xi = x.astype(np.int64)
        axb = ax[None, None, :, None]
        top_l, top_r = xi[:, y0][:, :, x0], xi[:, y0][:, :, x1]
        bot_l, bot_r = xi[:, y1][:, :, x0], xi[:, y1][:, :, x1]
        t = (top_l << 11) + (top_r - top_l) * axb
        b = (bot_l << 11) + (bot_r - bot_l) * axb
        acc = (t << 11) + (b - t) * ay[None, :, None, None]
        return [((acc + (1 << 21)) >> 22).astype(np.int8)]
