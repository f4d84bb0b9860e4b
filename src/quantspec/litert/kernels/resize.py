"""RESIZE_BILINEAR, int8 and int16 (``tflite/kernels/resize_bilinear.cc``,
``tflite/kernels/internal/reference/resize_bilinear.h`` ``ResizeBilinearInteger``).

REF and the optimized kernel both use the integer kernel for int8 and int16; it works on raw codes (input
and output parameters are meant to be equal and are not checked).  In Q10 fixed point, per axis
(shown for rows; columns alike)::

    scale = ((1<<10)·in + out/2) / out                      align_corners and out > 1:
                                                            ((1<<10)·(in-1) + (out-1)/2) / (out-1)
    sv    = y·scale  (+ scale/2 - 512 with half_pixel_centers)
    y0    = max(sv / 1024, 0);   y1 = min((sv + 1023) / 1024, in - 1)          (C division)
    wy0   = 1024 - (sv - 1024·y0);   wy1 = sv - 1024·y0

    o = Σ q[y_i, x_j] · wy_i · wx_j   (int64);   y = (o + sign(o)·2^19) / 2^20   (C division)

(The single-rounding build uses ``(o + 2^19) >> 20``; the shipped interpreter is double-rounding.)
For extreme up-scaling (``out² ≳ 2048·in``) the rounded Q10 scale can push ``y0`` past the last
row, where the reference kernel reads outside the input; quantspec refuses those sizes instead of
inventing the bytes.

The size tensor (int32, ``[2]``) may be constant (output size known in prepare, and
``align_corners`` together with ``half_pixel_centers`` is refused as LiteRT refuses it) or a
run-time input (LiteRT then skips that check and the kernel runs with both flags).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import DTypeError, InvalidArgumentError, ShapeError
from ._common import (constants, count, enforce, fits_memory, option, require_rank, require_same_type, require_type,
                      value)
from .base import Kernel, register

OP = "RESIZE_BILINEAR"


@dataclass(frozen=True, eq=False)
class ResizePrepared:
    input_shape: tuple[int, ...]
    align_corners: bool
    half_pixel_centers: bool
    plan: tuple | None              # (out_h, out_w, rows, cols) when the size is constant
    consts: tuple = ()


def _axis_plan(in_size: int, out_size: int, align: bool, half: bool, argument: str):
    """(i0, i1, w0, w1) per output position along one axis, exactly as ResizeBilinearInteger."""
    scale = ((1 << 10) * in_size + out_size // 2) // out_size
    if align and out_size > 1:
        scale = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    pos = np.arange(out_size, dtype=np.int64)
    sv = pos * scale + ((scale // 2 - (1 << 9)) if half else 0)
    lo = np.maximum(_cdiv(sv, 1 << 10), 0)
    hi = np.minimum(_cdiv(sv + (1 << 10) - 1, 1 << 10), in_size - 1)
    if lo.size and int(lo.max()) > in_size - 1:
        raise ShapeError(argument, f"{OP}: resizing {in_size} to {out_size} makes the reference kernel read past "
                         "the input (its rounded Q10 scale overshoots; undefined behaviour in LiteRT)", out_size)
    frac = sv - (lo << 10)
    return lo, hi, (1 << 10) - frac, frac


def _cdiv(a: np.ndarray, d: int) -> np.ndarray:
    """C integer division (truncation toward zero) of an int64 array by a positive int."""
    return np.sign(a) * (np.abs(a) // d)


def _plan(input_shape, size, align, half):
    size = np.asarray(size).reshape(-1)
    oh, ow = int(size[0]), int(size[1])
    if oh <= 0 or ow <= 0:
        raise InvalidArgumentError("size", f"must be positive for {OP}", (oh, ow))
    fits_memory(OP, "size", (input_shape[0], oh, ow, input_shape[3]), 8, (oh, ow))   # int64 intermediates
    return (oh, ow, _axis_plan(input_shape[1], oh, align, half, "size[0]"),
            _axis_plan(input_shape[2], ow, align, half, "size[1]"))


@register
class ResizeBilinear(Kernel):
    name = OP

    def prepare(self, inputs, outputs, options) -> ResizePrepared:
        x, size = count(OP, inputs, outputs, 2, names=("input", "size"))
        enforce(OP, inputs, outputs)
        require_rank(x, 4, "input.shape", OP)
        if len(size.shape) != 1 or size.shape[0] != 2:
            raise ShapeError("size.shape", f"must be [2] for {OP}", tuple(size.shape))
        if size.dtype.name != "int32":
            raise DTypeError("size.dtype", f"must be int32 for {OP}", size.dtype.name)
        require_same_type(x, outputs[0], "output.dtype", OP)
        require_type(OP, [("input.dtype", x)], ("int8", "int16"), error=DTypeError)
        align = option(options, "align_corners", False, kind=bool)
        half = option(options, "half_pixel_centers", False, kind=bool)
        plan = None
        if size.data is not None:
            if align and half:
                raise InvalidArgumentError("options", f"{OP}: if half_pixel_centers is True, align_corners "
                                           "must be False (LiteRT Prepare)", {"align_corners": True,
                                                                              "half_pixel_centers": True})
            plan = _plan(x.shape, size.data, align, half)
        return ResizePrepared(input_shape=tuple(int(s) for s in x.shape), align_corners=align,
                              half_pixel_centers=half, plan=plan, consts=constants(inputs))

    def compute(self, p: ResizePrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0)
        plan = p.plan or _plan(x.shape, value(arrays, p.consts, 1, "size"), p.align_corners, p.half_pixel_centers)
        oh, ow, (y0, y1, wy0, wy1), (x0, x1, wx0, wx1) = plan
        xi = x.astype(np.int64)
        top = xi[:, y0] * wy0[None, :, None, None] + xi[:, y1] * wy1[None, :, None, None]   # (N, OH, W, C)
        o = top[:, :, x0] * wx0[None, None, :, None] + top[:, :, x1] * wx1[None, None, :, None]
        rounded = o + np.where(o > 0, 1 << 19, -(1 << 19))
        return [_cdiv(rounded, 1 << 20).astype(x.dtype)]
