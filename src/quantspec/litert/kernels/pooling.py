"""AVERAGE_POOL_2D and MAX_POOL_2D, int8 and int16 (the same arithmetic on int16 codes; ``tflite/kernels/pooling.cc``,
``tflite/kernels/internal/reference/integer_ops/pooling.h``).

Both work on raw int8 codes; input and output parameters are meant to be equal (LiteRT only
DCHECKs it, so release builds do not enforce it, and neither does quantspec).  Per output pixel,
over the ``n`` taps of the window that lie inside the image (SAME padding never adds taps)::

    AVERAGE:  acc = Σ q;   y = clamp(acc > 0 ? (acc + n/2) / n : (acc - n/2) / n)   (C division)
    MAX:      y = clamp(max(-128, max q))

The clamp is the fused activation's (TANH and SIGN_BIT clamp nothing).  A window with no tap in
the image makes LiteRT's average kernel fail at Eval; quantspec refuses it in prepare.

Computation: the window taps are a strided view of the input padded with 0 (average) or -128
(max); the sum or maximum runs over the tap axes, and the tap counts ``n`` are a separable
product of row and column counts computed in prepare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import DTypeError, InvalidArgumentError
from .._gemm import patches
from ._common import (constants, count, enforce, fused_range, limit, option, out_size, pad_before, require_rank,
                      require_same_type, require_type, value)
from .base import Kernel, register


@dataclass(frozen=True, eq=False)
class PoolPrepared:
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    filter_hw: tuple[int, int]
    stride: tuple[int, int]
    pad: tuple[int, int]
    counts: np.ndarray | None       # int64 (OH, OW) taps inside the image (average only)
    act_min: int
    act_max: int
    consts: tuple = ()
    dtype: np.dtype = np.dtype(np.int8)


def _prepare(op: str, inputs, outputs, options, average: bool) -> PoolPrepared:
    (x,) = count(op, inputs, outputs, 1, names=("input",))
    enforce(op, inputs, outputs)
    out = outputs[0]
    require_rank(x, 4, "input.shape", op)
    require_same_type(x, out, "output.dtype", op)
    require_type(op, [("input.dtype", x)], ("int8", "int16"), error=DTypeError)
    sh = option(options, "stride_h", 0, kind=int)
    sw = option(options, "stride_w", 0, kind=int)
    if sh <= 0 or sw <= 0:
        raise InvalidArgumentError("options['stride_h'/'stride_w']", f"must be positive for {op}", (sh, sw))
    fh = option(options, "filter_height", 0, kind=int)
    fw = option(options, "filter_width", 0, kind=int)
    padding = option(options, "padding", "SAME", allowed=("SAME", "VALID"))
    n, h, w, c = (int(s) for s in x.shape)
    # ComputePaddingHeightWidth (unchecked): a failed size check leaves the size 0 and the padding 0
    ow = out_size(padding, w, fw, sw, 1)
    oh = out_size(padding, h, fh, sh, 1) if ow is not None else None
    ow, oh = ow or 0, oh or 0
    ph = pad_before(sh, 1, h, fh, oh) if oh and ow else 0
    pw = pad_before(sw, 1, w, fw, ow) if oh and ow else 0
    act_min, act_max = fused_range(op, options, out)
    counts = None
    if average and oh and ow and n and c:
        rows = _tap_counts(oh, sh, ph, fh, h)
        cols = _tap_counts(ow, sw, pw, fw, w)
        counts = np.outer(rows, cols)
        if (counts == 0).any():
            raise limit("pool-empty-window", InvalidArgumentError(
                "options", f"{op}: some windows have no tap inside the image (the reference kernel fails on them)",
                dict(options or {})))
    return PoolPrepared(input_shape=(n, h, w, c), output_shape=(n, oh, ow, c), filter_hw=(fh, fw),
                        stride=(sh, sw), pad=(ph, pw), counts=counts, act_min=act_min, act_max=act_max,
                        consts=constants(inputs), dtype=np.dtype(x.dtype.name))


def _tap_counts(out: int, stride: int, pad: int, filt: int, image: int) -> np.ndarray:
    """Per output position, the number of filter taps inside the image along one axis."""
    origin = np.arange(out, dtype=np.int64) * stride - pad
    start = np.maximum(0, -origin)
    end = np.minimum(filt, image - origin)
    return np.maximum(end - start, 0)


def _windows(p: PoolPrepared, x: np.ndarray, fill) -> np.ndarray:
    """The window taps, (N, OH, OW, KH, KW, C), taps outside the image reading ``fill``."""
    return patches(x, p.filter_hw, p.stride, (1, 1), p.pad, p.output_shape[1:3], fill)


class _Pool2D(Kernel):
    """Both pooling kernels: prepare, an empty output, the input, the clamp; :meth:`pool` is the rest."""

    average: bool

    def prepare(self, inputs, outputs, options) -> PoolPrepared:
        return _prepare(self.name, inputs, outputs, options, average=self.average)

    def compute(self, p: PoolPrepared, arrays) -> list[np.ndarray]:
        if 0 in p.output_shape:
            return [np.zeros(p.output_shape, p.dtype)]
        x = value(arrays, p.consts, 0).reshape(p.input_shape)
        return [np.clip(self.pool(p, x), p.act_min, p.act_max).astype(p.dtype)]

    @staticmethod
    def pool(p: PoolPrepared, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


@register
class AveragePool2D(_Pool2D):
    name = "AVERAGE_POOL_2D"
    average = True

    @staticmethod
    def pool(p: PoolPrepared, x: np.ndarray) -> np.ndarray:
        acc = _windows(p, x.astype(np.int32), 0).sum(axis=(3, 4), dtype=np.int64)   # (N, OH, OW, C)
        n = p.counts[None, :, :, None]
        half = n // 2
        num = np.where(acc > 0, acc + half, acc - half)
        return np.sign(num) * (np.abs(num) // n)                                    # C division truncates


@register
class MaxPool2D(_Pool2D):
    name = "MAX_POOL_2D"
    average = False

    @staticmethod
    def pool(p: PoolPrepared, x: np.ndarray) -> np.ndarray:
        return _windows(p, x.astype(p.dtype, copy=False), np.iinfo(p.dtype).min).max(axis=(3, 4))
