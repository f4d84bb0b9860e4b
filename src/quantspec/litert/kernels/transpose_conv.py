"""TRANSPOSE_CONV, int8 and 16x8 (``tflite/kernels/transpose_conv.cc``,
``tflite/kernels/internal/reference/integer_ops/transpose_conv.h``).

Inputs: the output shape (1-D int32, 4 values), the filter ``[O, KH, KW, I]`` (int8, symmetric, per
output channel or per tensor), the input ``[N, H, W, I]`` and an optional bias.  The reference kernel
scatters every input pixel through the filter into an accumulator of the output's shape::

    acc[n, iy*s_h - pad_h + ky, ix*s_w - pad_w + kx, oc] += (x[n, iy, ix, ic] - z_in) * w[oc, ky, kx, ic]
    y = clamp(MultiplyByQuantizedMultiplier(acc + bias[oc], M[oc], e[oc]) + z_out)

The padding is that of a CONV_2D from the output back to the input (the input's height and width
must be what that convolution gives, or LiteRT rejects the model), the multipliers those of
CONV_2D (``PopulateConvolutionQuantizationParams``).  int8 accumulates in int32 (wrapping), the
16x8 kernel in int64 (int32 with ``quantized_bias_type`` INT32), requantizing with the int64
``MultiplyByQuantizedMultiplier``.

The fused activation clamps as for CONV_2D (``CalculateActivationRangeQuantized``).

The output shape may be a run-time tensor (a Keras ``Conv2DTranspose`` with a dynamic batch: the
converter computes it with SHAPE / STRIDED_SLICE / PACK); LiteRT then checks and sizes everything
at Eval, and quantspec prepares the operator when it runs, for the shape it is given
(:class:`DeferredTransposeConv`, one prepared record per shape).

Computation: one exact GEMM per filter tap (``KH * KW`` products of the input pixels by the tap's
``[I, O]`` matrix, :func:`.._gemm.matmul_exact`), each added at its strided output positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ...errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from .. import fixedpoint
from .._gemm import matmul_exact, wrap_int32
from . import _common as c
from .base import Kernel, register
from .conv import conv16_bias_type

__all__ = ["TransposeConv", "DeferredTransposeConv"]


def scatter_taps(p, x: np.ndarray, bound: int) -> np.ndarray:
    """The exact sums ``Σ (x - z_in) · w`` of every input pixel scattered through the filter to its
    output positions, int64 (not wrapped, no bias), shape ``[N, OH, OW, O]``: one exact GEMM per tap
    (``bound``: the bound of ``|x - z_in|`` for :func:`.._gemm.matmul_exact`).  ``p``: a
    :class:`TransposeConvParams` (``input_shape``, ``output_shape``, ``stride``, ``pad``,
    ``input_zero_point``, ``filter`` as float32 ``[KH, KW, I, O]``)."""
    n, h, w, ci = p.input_shape
    _, oh, ow, oc = p.output_shape
    kh, kw = p.filter.shape[:2]
    sh, sw = p.stride
    ph, pw = p.pad
    a = (x.astype(np.float32) - np.float32(p.input_zero_point)).reshape(n * h * w, ci)
    acc = np.zeros((n, oh, ow, oc), np.int64)
    iy, ix = np.arange(h), np.arange(w)
    for ky in range(kh):
        oy = iy * sh - ph + ky
        ry = (oy >= 0) & (oy < oh)
        if not ry.any():
            continue
        for kx in range(kw):
            ox = ix * sw - pw + kx
            rx = (ox >= 0) & (ox < ow)
            if not rx.any():
                continue
            part = matmul_exact(a, p.filter[ky, kx], bound, 128).reshape(n, h, w, oc)
            acc[:, oy[ry][:, None], ox[rx][None, :], :] += part[:, ry][:, :, rx]
    return acc


@dataclass(frozen=True, eq=False)
class TransposeConvParams:
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    stride: tuple[int, int]
    pad: tuple[int, int]
    input_zero_point: int
    output_zero_point: int
    multiplier: np.ndarray
    shift: np.ndarray
    filter: np.ndarray              # float32 (KH, KW, I, O)
    bias: np.ndarray | None
    bounds: tuple[int, int]
    dtype: np.dtype
    wide: bool
    bias_int32: bool


@dataclass(eq=False)
class DeferredTransposeConv:
    """TRANSPOSE_CONV with a run-time output shape: the operator's tensors and options, prepared at
    compute for the shape given (``cache``: the prepared records by output shape and input shape)."""

    inputs: list
    outputs: list
    options: dict
    wide: bool
    bias_int32: bool
    cache: dict[tuple, Any] = field(default_factory=dict)


@register
class TransposeConv(Kernel):
    """TRANSPOSE_CONV (the reference kernel's scatter, as exact per-tap GEMMs)."""

    name = "TRANSPOSE_CONV"

    def prepare(self, inputs, outputs, options):
        op = self.name
        if len(inputs) not in (3, 4) or len(outputs) != 1:
            raise c.limit("op-shape", InvalidArgumentError("inputs", f"{op} takes 3 or 4 inputs and one output",
                                                           (len(inputs), len(outputs))))
        shape_t, w, x = inputs[:3]
        b = inputs[3] if len(inputs) == 4 else None
        o = outputs[0]
        if shape_t is None or w is None or x is None:
            raise InvalidArgumentError("inputs", f"{op} needs the output shape, the filter and the input", None)
        c.require_type(op, [("input", x)], ("int8", "int16"), error=DTypeError)
        c.require_type(op, [("filter", w)], ("int8",), error=DTypeError)
        c.require_same_type(x, o, "output", op)
        wide = x.dtype.name == "int16"
        if len(shape_t.shape) != 1 or len(x.shape) != 4 or len(w.shape) != 4:
            raise c.limit("op-shape", ShapeError(f"{op} shapes", "the output shape is 1-D, the input and the filter "
                                                 "4-D (LiteRT rejects the model at prepare)",
                                                 (tuple(shape_t.shape), tuple(x.shape), tuple(w.shape))))
        if shape_t.data is None:
            if shape_t.dtype.name != "int32":
                raise DTypeError(f"{op} output shape", "must be int32 (LiteRT rejects the model)", shape_t.dtype.name)
            bias = inputs[3] if len(inputs) == 4 else None
            if wide:
                bias_int32 = (conv16_bias_type(op, bias, options) if bias is not None else
                              "int32" if c.option(options, "quantized_bias_type", "FLOAT32") == "INT32" else
                              "int64") == "int32"
            else:
                bias_int32 = True
            return DeferredTransposeConv(list(inputs), list(outputs), dict(options or {}), wide, bias_int32)
        out_shape = tuple(int(v) for v in np.asarray(shape_t.data).reshape(-1))
        sh, sw = c.option(options, "stride_h", 0, kind=int), c.option(options, "stride_w", 0, kind=int)
        if not (0 < sh <= 32767 and 0 < sw <= 32767):
            raise c.limit("op-shape", InvalidArgumentError(f"{op} strides", "must lie in [1, 32767] (LiteRT rejects "
                                                           "the model at prepare)", (sh, sw)))
        n, h, wd, ci = (int(v) for v in x.shape)
        oc, kh, kw, fi = (int(v) for v in w.shape)
        if min(h, wd, ci, oc, kh, kw) <= 0 or fi != ci:
            raise c.limit("op-shape", ShapeError(f"{op} filter", "must be [O, KH, KW, input channels] with positive "
                                                 "sizes (LiteRT rejects the model at prepare)", tuple(w.shape)))
        if len(out_shape) != 4 or out_shape[0] != n or out_shape[3] != oc or min(out_shape[1:3]) <= 0:
            raise c.limit("op-shape", ShapeError(f"{op} output shape", "must be [N, H, W, O] for this input and filter "
                                                 "(LiteRT rejects the model)", out_shape))
        padding = c.option(options, "padding", "SAME", allowed=("SAME", "VALID"))
        try:
            (ch, cw), pad = c.window_geometry(op, padding, out_shape[1:3], (kh, kw), (sh, sw), (1, 1))
        except Exception:
            raise c.limit("op-shape", ShapeError(f"{op} output shape", "gives no valid convolution back to the "
                                                 "input (LiteRT rejects the model)", out_shape)) from None
        if (ch, cw) != (h, wd):
            raise c.limit("op-shape", ShapeError(f"{op} input", "must have the height and width a convolution of the "
                                                 "output shape gives (LiteRT rejects the model)", (h, wd),
                                                 detail=f"expected {(ch, cw)}"))
        if w.params is None or x.params is None or o.params is None:
            raise InvalidArgumentError(f"{op} tensors", "need quantization parameters", None)
        if len(w.params) not in (1, oc):
            raise c.limit("weight-axis", ShapeError(f"{op} filter scale", f"must have 1 or {oc} entries (LiteRT "
                                                    "rejects the model at prepare)", len(w.params)))
        s_in, z_in = c.legacy(x)
        s_out, z_out = c.legacy(o)
        if wide and (z_in, z_out) != (0, 0):
            raise c.limit("int16-zero-point", InvalidArgumentError(f"{op} zero points", "must be 0 for int16 (LiteRT "
                                                                   "rejects the model at prepare)", (z_in, z_out)))
        bias_type = "int32"
        if b is not None:
            if wide:
                bias_type = conv16_bias_type(op, b, options)
            elif b.dtype.name != "int32":
                raise c.limit("dtype", DTypeError(f"{op} bias", "must be int32 for int8 (LiteRT rejects the model at "
                                                  "prepare)", b.dtype.name))
            if c.legacy(b)[1] != 0:
                raise c.limit("bias-zero-point", InvalidArgumentError(f"{op} bias zero point", "must be 0 (LiteRT "
                                                                      "rejects the model at prepare)", c.legacy(b)[1]))
            if int(np.prod(b.shape, dtype=np.int64)) != oc:
                raise c.limit("conv-bias", ShapeError(f"{op} bias", f"must have {oc} elements", tuple(b.shape)))
        elif wide:
            bias_type = "int32" if c.option(options, "quantized_bias_type", "FLOAT32") == "INT32" else "int64"
        s_w = np.broadcast_to(w.params.scale, (oc,)).astype(np.float64)
        with np.errstate(all="ignore"):
            eff = np.float64(s_in) * s_w / np.float64(s_out)
        if not np.all(np.isfinite(eff)):
            raise InvalidArgumentError(f"{op} output scale", "gives a non-finite effective scale", float(s_out))
        mult, shift = fixedpoint.quantize_multiplier(eff)
        if shift.size and int(shift.max()) > (7 if wide and bias_type == "int64" else 30):
            raise c.limit("multiplier-shift", UnsupportedError(f"{op} output scale", "an effective scale this large "
                                                               "needs a shift LiteRT's MultiplyByQuantizedMultiplier "
                                                               "does not define", float(s_out)))
        if w.data is None:
            raise UnsupportedError(f"{op} filter", "must be a constant for quantspec", None)
        filt = np.ascontiguousarray(np.asarray(w.data).astype(np.float32).transpose(1, 2, 3, 0))   # KH, KW, I, O
        bias = None if b is None or b.data is None else np.asarray(b.data).astype(np.int64).reshape(oc)
        if b is not None and b.data is None:
            raise UnsupportedError(f"{op} bias", "must be a constant for quantspec", None)
        bounds = c.fused_range(op, options, o)
        return TransposeConvParams((n, h, wd, ci), out_shape, (sh, sw), pad, z_in, z_out,
                                   np.asarray(mult, np.int64), np.asarray(shift, np.int64), filt, bias,
                                   bounds, np.dtype(x.dtype.name), wide,
                                   bias_type == "int32")

    def resolve(self, p: TransposeConvParams | DeferredTransposeConv, arrays) -> TransposeConvParams:
        """The prepared record for this run: ``p`` itself, or, for a run-time output shape, the
        operator prepared for the shape and the input given."""
        if not isinstance(p, DeferredTransposeConv):
            return p
        shape = np.asarray(c.value(arrays, (), 0, "output shape"))
        x = c.value(arrays, (), 2, "input")
        key = (tuple(int(v) for v in shape.reshape(-1)), tuple(x.shape))
        prepared = p.cache.get(key)
        if prepared is None:
            inputs = list(p.inputs)
            inputs[0] = replace(inputs[0], data=shape.astype(np.int32))
            inputs[2] = replace(inputs[2], shape=tuple(x.shape))
            outputs = [replace(p.outputs[0], shape=key[0] if len(key[0]) == 4 else p.outputs[0].shape)]
            prepared = self.prepare(inputs, outputs, p.options)
            p.cache[key] = prepared
        return prepared

    def compute(self, p: TransposeConvParams | DeferredTransposeConv, arrays):
        p = self.resolve(p, arrays)
        x = c.value(arrays, (), 2, "input")
        if x.dtype != p.dtype or tuple(x.shape) != p.input_shape:
            raise ShapeError(f"{self.name} input", f"must have the prepared shape {p.input_shape} and type {p.dtype}",
                             (tuple(x.shape), str(x.dtype)))
        acc = scatter_taps(p, x, 1 << 15 if p.wide else 256)
        if not p.wide or p.bias_int32:
            acc = wrap_int32(acc).astype(np.int64)
            if p.bias is not None:
                acc = wrap_int32(acc + p.bias).astype(np.int64)
            y = fixedpoint.mbqm(acc, p.multiplier, p.shift)
        else:
            if p.bias is not None:
                acc = acc + p.bias
            y = fixedpoint.mbqm_int64(acc, p.multiplier, p.shift)
        y = wrap_int32(y + p.output_zero_point)
        return [np.clip(y, *p.bounds).astype(p.dtype)]
