"""FULLY_CONNECTED, int8 (``tflite/kernels/fully_connected.cc``,
``tflite/kernels/internal/reference/integer_ops/fully_connected.h``).

The reference kernel, per output row ``b`` and unit ``o``::

    acc[b, o] = Σ_i (w[o, i] - zw) · (x[b, i] - zx) + bias[o]          (int32, wrapping)
    eff[o]    = double(s_in) · double(s_w[o]) / double(s_out)
    y[b, o]   = clamp(int32(round(double(acc) · eff[o])) + z_out)          (round: half away from 0)

``zw`` is the filter's per-tensor zero point (kept for backward compatibility; per-channel
filters are symmetric and their zero points are ignored).  Since LiteRT commit 9213607
(2025-04-14) REF requantizes in double-precision float like this, for per-tensor and per-channel
filters alike; the optimized kernels (ruy) and TFLM use the integer
``MultiplyByQuantizedMultiplier`` instead, and the per-tensor optimized multiplier is
``double(float(s_in·s_w)) / s_out`` (a float32 product).  A double that does not fit int32
becomes ``INT32_MIN`` (x86 ``cvttsd2si``), before the zero point is added with int32 wrap-around.

The accumulation is one exact float32 BLAS GEMM per 1024 columns of K (:mod:`.._gemm`), with the
zero points corrected in int64 from precomputed weight sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._semantics.rounding import half_away_from_zero
from ...errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from .._gemm import matmul_exact, wrap_int32
from ._common import (constants, count, enforce, int8_filter, fused_activation_name, fused_range, legacy, limit, option,
                      require_quantized, require_type, value)
from .base import Kernel, register
from .conv import conv16_bias_type

OP = "FULLY_CONNECTED"
INT32_MIN = -(1 << 31)


@dataclass(frozen=True, eq=False)
class FullyConnectedPrepared:
    output_shape: tuple[int, ...]
    rows: int                       # batches: rows of the flattened input that are used
    depth: int                      # K, the accumulation depth (filter.shape[1])
    units: int                      # N, output channels (filter.shape[0])
    input_zero_point: int
    filter_zero_point: int          # per-tensor filter zero point; 0 for per-channel filters
    output_zero_point: int
    effective_scale: np.ndarray     # float64, (units,) or (1,): double(s_in)*double(s_w)/double(s_out)
    act_min: int
    act_max: int
    weights: np.ndarray | None      # float32 (depth, units), contiguous, when the filter is constant
    weight_sums: np.ndarray | None  # int64 (units,) Σ_i w[o, i] when the filter is constant
    weight_bound: int               # max |w| (128 when the filter is not constant)
    bias: np.ndarray | None         # int32 (units,) when the bias is constant
    has_bias: bool
    consts: tuple = ()
    wide: bool = False              # int16 activations (the 16x8 kernel): int64 accumulator ...
    bias_int32: bool = False        # ... or int32 with quantized_bias_type INT32


@register
class FullyConnected(Kernel):
    name = OP

    def prepare(self, inputs, outputs, options) -> FullyConnectedPrepared:
        x, w = count(OP, inputs, outputs, (2, 3), names=("input", "filter"))
        enforce(OP, inputs, outputs)
        w = int8_filter(w, OP)
        b = inputs[2] if len(inputs) == 3 else None
        out = outputs[0]
        require_type(OP, [("filter.dtype", w)], ("int8",), error=DTypeError)
        require_type(OP, [("input.dtype", x), ("output.dtype", out)], ("int8", "int16"), error=DTypeError)
        if out.dtype != x.dtype:
            raise DTypeError("output.dtype", f"must be the input's type for {OP}", out.dtype.name)
        wide = x.dtype.name == "int16"
        bias_type = "int32"
        if wide:
            for name, t in (("input", x), ("output", out)):
                if legacy(t)[1] != 0:
                    raise limit("int16-zero-point", InvalidArgumentError(
                        f"{name}.zero_point", f"must be 0 for int16 {OP} (LiteRT Prepare)", legacy(t)[1]))
            if b is not None:
                bias_type = conv16_bias_type(OP, b, options)
            elif option(options, "quantized_bias_type", "FLOAT32") not in ("FLOAT32", "INT32", "INT64"):
                raise limit("int16-bias-type", InvalidArgumentError(
                    "options['quantized_bias_type']", f"must be INT32 or INT64 for int16 {OP} (LiteRT Prepare)",
                    option(options, "quantized_bias_type", "FLOAT32")))
            else:
                bias_type = "int32" if option(options, "quantized_bias_type", "FLOAT32") == "INT32" else "int64"
        elif b is not None and b.dtype.name != "int32":
            raise DTypeError("bias.dtype", f"int8 {OP} needs an int32 bias (the reference kernel reads it as int32)",
                             b.dtype.name)
        if option(options, "weights_format", "DEFAULT") != "DEFAULT":
            raise UnsupportedError("options['weights_format']", f"int8 {OP} supports only DEFAULT",
                                   option(options, "weights_format", "DEFAULT"))
        # Prepare: only clipping activations for non-hybrid kernels (fully_connected.cc Prepare)
        fused_activation_name(OP, options, unclamped=False)
        keep = option(options, "keep_num_dims", False, kind=bool)
        if len(w.shape) != 2:
            raise ShapeError("filter.shape", f"must be 2-D for {OP}", tuple(w.shape))
        units, depth = int(w.shape[0]), int(w.shape[1])
        if any(d < 0 for d in x.shape):
            raise ShapeError("input.shape", "must not have negative dimensions", tuple(x.shape))
        size = int(np.prod(x.shape, dtype=np.int64))
        if depth == 0:  # LiteRT sizes the output and fills it with zeros
            shape = (*x.shape[:-1], units) if keep else (int(np.prod(x.shape[:-1], dtype=np.int64)), units)
            return self._empty(shape, units, wide)
        rows = size // depth
        if b is not None and int(np.prod(b.shape, dtype=np.int64)) != units:
            raise ShapeError("bias.shape", f"must have filter.shape[0] = {units} elements", tuple(b.shape))
        require_quantized(x, "input", OP)
        require_quantized(w, "filter", OP)
        s_in, z_in = legacy(x)
        s_out, z_out = legacy(out)
        if w.params.per_axis:
            if w.params.quantized_dimension != 0:
                raise InvalidArgumentError("filter.quantized_dimension",
                                           f"must be 0 (output channels) for a per-channel {OP} filter",
                                           w.params.quantized_dimension)
            if len(w.params) != units:
                raise ShapeError("filter.scale", f"must have one scale per output channel ({units})", len(w.params))
            s_w = w.params.scale
            z_w = 0
        else:
            s_w = w.params.scale[:1]
            z_w = int(w.params.zero_point[0])
            # GetQuantizedConvolutionMultipler (kernel_util.cc): the bias scale must be close to s_in*s_w
            if b is not None:
                s_b, _ = legacy(b)
                product = np.float64(s_in) * np.float64(s_w[0])
                if not abs(product - np.float64(s_b)) / np.float64(s_out) <= 0.02:
                    raise InvalidArgumentError(
                        "bias.scale", f"must be within 0.02 output steps of input.scale*filter.scale for a "
                        f"per-tensor {OP} (|s_in*s_w - s_b| / s_out <= 0.02, LiteRT Prepare)", float(s_b),
                        detail=f"s_in*s_w = {float(product)!r}, s_out = {float(s_out)!r}")
            if not np.float32(s_in) * np.float32(s_w[0]) >= 0:
                raise InvalidArgumentError("filter.scale", f"input.scale*filter.scale must be >= 0 for {OP}",
                                           float(s_w[0]))
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            eff = (np.float64(s_in) * s_w.astype(np.float64)) / np.float64(s_out)
        act_min, act_max = fused_range(OP, options, out, unclamped=False)
        if keep:
            if x.shape[-1] != depth:
                raise ShapeError("input.shape", f"must end in filter.shape[1] = {depth} with keep_num_dims",
                                 tuple(x.shape))
            shape = (*x.shape[:-1], units)
        else:
            shape = (rows, units)
        weights = sums = None
        bound = 128
        if w.data is not None:
            wd = np.asarray(w.data).astype(np.int8, copy=False).reshape(units, depth)
            weights = np.ascontiguousarray(wd.T.astype(np.float32))
            sums = wd.astype(np.int64).sum(axis=1)
            bound = max(int(np.abs(wd.astype(np.int64)).max(initial=0)), 1)
        bias_dtype = np.dtype(bias_type)
        bias = None
        if b is not None and b.data is not None:
            bias = np.asarray(b.data).astype(bias_dtype, copy=False).reshape(units)
        return FullyConnectedPrepared(
            output_shape=tuple(int(s) for s in shape), rows=rows, depth=depth, units=units,
            input_zero_point=z_in, filter_zero_point=z_w, output_zero_point=z_out, effective_scale=eff,
            act_min=act_min, act_max=act_max, weights=weights, weight_sums=sums, weight_bound=bound,
            bias=bias, has_bias=b is not None, consts=constants(inputs), wide=wide,
            bias_int32=bias_type == "int32")

    @staticmethod
    def _empty(shape, units, wide=False) -> FullyConnectedPrepared:
        return FullyConnectedPrepared(
            output_shape=tuple(int(s) for s in shape), rows=0, depth=0, units=units, input_zero_point=0,
            filter_zero_point=0, output_zero_point=0, effective_scale=np.zeros(1), act_min=0, act_max=0,
            weights=None, weight_sums=None, weight_bound=1, bias=None, has_bias=False, wide=wide)

    def compute(self, p: FullyConnectedPrepared, arrays) -> list[np.ndarray]:
        out_dtype = np.int16 if p.wide else np.int8
        if p.depth == 0 or int(np.prod(p.output_shape, dtype=np.int64)) == 0:
            return [np.zeros(p.output_shape, out_dtype)]
        x = value(arrays, p.consts, 0).reshape(-1)[: p.rows * p.depth].reshape(p.rows, p.depth)
        acc = accumulate(p, x, None if p.weights is not None else value(arrays, p.consts, 1, "filter"))
        int32_acc = p.bias_int32 or not p.wide      # the C++ accumulator: int32 (wraps) or int64
        if int32_acc:
            acc = wrap_int32(acc)
        if p.has_bias:
            bias = p.bias
            if bias is None:
                bias = value(arrays, p.consts, 2, "bias").astype(np.int32 if p.bias_int32 else np.int64)
                bias = bias.reshape(p.units)
            acc = acc + bias
        if int32_acc:
            acc = wrap_int32(acc)
        if p.wide:
            return [_requantize_double_wide(acc, p).reshape(p.output_shape)]
        return [requantize_double(acc, p.effective_scale, p.output_zero_point, p.act_min,
                                  p.act_max).reshape(p.output_shape)]


def accumulate(p: FullyConnectedPrepared, x: np.ndarray, w_runtime: np.ndarray | None) -> np.ndarray:
    """``Σ_i (w[o,i] - zw)(x[b,i] - zx)`` exactly, as int64 ``(rows, units)``."""
    if w_runtime is not None:
        wd = np.asarray(w_runtime).astype(np.int8, copy=False).reshape(p.units, p.depth)
        weights = np.ascontiguousarray(wd.T.astype(np.float32))
        sums = wd.astype(np.int64).sum(axis=1)
        bound = max(int(np.abs(wd.astype(np.int64)).max(initial=0)), 1)
    else:
        weights, sums, bound = p.weights, p.weight_sums, p.weight_bound
    acc = matmul_exact(x.astype(np.float32), weights, 1 << 15 if x.dtype == np.int16 else 128, bound)
    zx, zw = p.input_zero_point, p.filter_zero_point
    if zx:
        acc -= zx * sums
    if zw:
        acc -= zw * x.astype(np.int64).sum(axis=1, keepdims=True)
        acc += p.depth * zx * zw
    return acc


def requantize_double(acc: np.ndarray, effective_scale: np.ndarray, zero_point: int, act_min: int,
                      act_max: int) -> np.ndarray:
    """REF FULLY_CONNECTED requantization: ``static_cast<int32_t>(round(double(acc) * eff))``, then
    ``+ zero_point`` (int32 wrap) and the activation clamp, as int8.  A rounded value outside int32
    becomes INT32_MIN, as x86 ``cvttsd2si`` makes it.  (:func:`quantspec.litert.fast.requantize_double`
    computes the same when the fast path is on.)"""
    from .. import fast

    result = fast.requantize_double(acc, effective_scale, zero_point, act_min, act_max)
    if result is not None:
        return result
    with np.errstate(over="ignore", invalid="ignore"):
        v = half_away_from_zero(acc.astype(np.float64) * effective_scale)
        inside = (v >= -2.0 ** 31) & (v < 2.0 ** 31)
    q = np.where(inside, v, INT32_MIN).astype(np.int64)
    q = wrap_int32(q + zero_point)
    return np.clip(q, act_min, act_max).astype(np.int8)


def _requantize_double_wide(acc: np.ndarray, p: FullyConnectedPrepared) -> np.ndarray:
    """The 16x8 REF requantization: the same double arithmetic as :func:`requantize_double` on the
    (int64 or int32) accumulator, clamped to the int16 activation range."""
    with np.errstate(over="ignore", invalid="ignore"):
        v = half_away_from_zero(acc.astype(np.float64) * p.effective_scale)
        inside = (v >= -2.0 ** 31) & (v < 2.0 ** 31)
    q = np.where(inside, v, INT32_MIN).astype(np.int64)
    q = wrap_int32(q + p.output_zero_point)
    return np.clip(q, p.act_min, p.act_max).astype(np.int16)
