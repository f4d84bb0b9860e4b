"""CONV_2D and DEPTHWISE_CONV_2D, int8 (``tflite/kernels/conv.cc``,
``tflite/kernels/depthwise_conv.cc``, ``tflite/kernels/internal/reference/integer_ops/{conv,depthwise_conv}.h``,
``tflite/kernels/kernel_util.cc`` ``PopulateConvolutionQuantizationParams``).

Layouts are NHWC; the CONV_2D filter is ``[O, KH, KW, I/groups]``, the DEPTHWISE_CONV_2D filter
``[1, KH, KW, I·M]`` (output channel ``oc = ic·M + m``).  Per output pixel and channel::

    acc = Σ_{taps inside the image} w · (x - z_in)  + bias[oc]             (int32, wrapping)
    y   = clamp(MultiplyByQuantizedMultiplier(acc, M[oc], e[oc]) + z_out)    (double rounding)

with ``(M[oc], e[oc]) = QuantizeMultiplier(double(s_in) · double(s_w[oc]) / double(s_out))`` (the
double of the float32 scales; a per-tensor filter scale is broadcast to every channel).  Taps
outside the image are skipped, which is the same as padding with ``z_in``.  SAME padding puts
``total // 2`` before and the odd pixel after (``tflite/kernels/padding.h``).  The clamp is the
fused activation's (TANH and SIGN_BIT clamp nothing).  Grouped CONV_2D (``I % filter_I == 0``)
is supported as LiteRT's reference kernel supports it.

**CONV_2D computation.**  The windows are a strided view of the input padded with ``z_in``
(:func:`~quantspec.litert._gemm.patches`), copied block by block into a float32 im2col matrix
(at most :data:`~quantspec.litert._gemm.IM2COL_BUDGET` bytes at a time) and multiplied by the
filter matrix with :func:`~quantspec.litert._gemm.matmul_exact` — one float32 BLAS GEMM per 1024
columns of ``K = KH·KW·I/groups``, exact (the argument is in :mod:`quantspec.litert._gemm`).  The
raw products ``Σ w·x`` are corrected to ``Σ w·(x - z_in)`` with the precomputed filter sums
``z_in · Σ w`` in int64, then wrapped to int32 exactly as the C++ int32 accumulator wraps.

**DEPTHWISE_CONV_2D computation.**  No reduction over channels, so no GEMM: one vectorised int32
multiply-add per filter tap (``KH·KW`` passes over the output), with numpy's int32 arithmetic
wrapping as the C++ accumulator does.

Where the other LiteRT paths differ (measured): the optimized kernels go through ruy,
whose x86 requantization rounds the final shift half *up* (not away from zero) — 5 of 2880 CONV
outputs differ by one; XNNPACK requantizes in float32 with ties to even — 6 CONV, 7 DEPTHWISE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from .. import _gemm, fast, fixedpoint
from .._gemm import F32_EXACT, matmul_exact, patches, wrap_int32
from ._common import (constants, count, enforce, int8_filter, fused_range, legacy, limit,
                      option, require_quantized, require_rank, require_type, value, window_geometry)
from .base import Kernel, TensorSpec, register

INT16_MAX = (1 << 15) - 1


@dataclass(frozen=True, eq=False)
class ConvPrepared:
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    filter_hw: tuple[int, int]
    stride: tuple[int, int]
    dilation: tuple[int, int]
    pad: tuple[int, int]
    groups: int                     # CONV_2D groups; DEPTHWISE: the depth multiplier
    input_zero_point: int
    output_zero_point: int
    multiplier: np.ndarray          # int32 (O,)
    shift: np.ndarray               # int32 (O,)
    act_min: int
    act_max: int
    filter: np.ndarray | None       # CONV: float32 (G, K, O/G) ; DEPTHWISE: int32 (KH, KW, I, M)
    filter_sums: np.ndarray | None  # CONV: int64 (O,) Σ w over each filter
    filter_bound: int
    bias: np.ndarray | None         # int32 (O,)
    has_bias: bool
    consts: tuple = ()
    wide: bool = False              # int16 activations: int64 accumulator (or int32 with an int32 bias)
    bias_int32: bool = False        # int16 CONV_2D with quantized_bias_type INT32: int32 accumulator


def _operands(op: str, inputs, outputs) -> tuple[TensorSpec, TensorSpec, TensorSpec]:
    """Input, filter and output of CONV_2D / DEPTHWISE_CONV_2D: the tensor counts, the op table's
    rules and the 4-D input and filter."""
    x, w = count(op, inputs, outputs, (2, 3), names=("input", "filter"))
    enforce(op, inputs, outputs)
    w = int8_filter(w, op)
    require_rank(x, 4, "input.shape", op)
    require_rank(w, 4, "filter.shape", op)
    return x, w, outputs[0]


def _types(op: str, x: TensorSpec, w: TensorSpec, out: TensorSpec) -> bool:
    """int8 input and output (or int16: the 16x8 kernels, True), an int8 filter (the hybrid float path
    is not implemented).  int16 activations need zero points 0 (LiteRT Prepare)."""
    require_type(op, [("input.dtype", x)], ("int8", "int16"), error=DTypeError)
    if out.dtype != x.dtype:
        raise DTypeError("output.dtype", f"must be the input's type for {op}", out.dtype.name)
    require_type(op, [("filter.dtype", w)], ("int8",), error=DTypeError)
    wide = x.dtype.name == "int16"
    if wide:
        for name, t in (("input", x), ("output", out)):
            if legacy(t)[1] != 0:
                raise limit("int16-zero-point", InvalidArgumentError(
                    f"{name}.zero_point", f"must be 0 for int16 {op} (LiteRT Prepare)", legacy(t)[1]))
    return wide


def _conv_quantization(op: str, x: TensorSpec, w: TensorSpec, out: TensorSpec, channels: int, options):
    """PopulateConvolutionQuantizationParams: per-channel multipliers and the activation clamp."""
    require_quantized(x, "input", op)
    require_quantized(w, "filter", op)
    n_scales = len(w.params)
    if n_scales not in (1, channels):
        raise ShapeError("filter.scale", f"must have 1 or {channels} (output channels) entries for {op}", n_scales)
    if w.params.per_axis:
        qd = w.params.quantized_dimension
        if qd >= len(w.shape) or w.shape[qd] != channels:
            raise ShapeError("filter.quantized_dimension", f"must index a dimension of size {channels} (the output "
                             f"channels) for a per-channel {op} filter", qd, detail=f"filter shape {tuple(w.shape)}")
    s_in, z_in = legacy(x)
    s_out, z_out = legacy(out)
    s_w = np.broadcast_to(w.params.scale, (channels,)).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        eff = np.float64(s_in) * s_w / np.float64(s_out)
    if not np.all(np.isfinite(eff)):
        raise InvalidArgumentError("output.scale", f"gives a non-finite effective scale s_in*s_w/s_out for {op}",
                                   float(s_out))
    mult, shift = fixedpoint.quantize_multiplier(eff)
    if shift.size and (int(shift.max()) > 30):
        raise limit("multiplier-shift", UnsupportedError(
            "output.scale", f"{op}: an effective scale s_in*s_w/s_out >= 2^30 makes LiteRT's "
            "MultiplyByQuantizedMultiplier shift past int32 (undefined behaviour)", float(s_out)))
    act_min, act_max = fused_range(op, options, out)
    return z_in, z_out, np.asarray(mult, np.int32), np.asarray(shift, np.int32), act_min, act_max


def _bias(op: str, b: TensorSpec | None, channels: int, *, check_rank: bool, dtype: str = "int32"):
    if b is None:
        return None
    if b.dtype.name != dtype:
        raise limit("int16-bias-type" if dtype == "int64" else "dtype", DTypeError(
            "bias.dtype", f"must be {dtype} for {op} with these activations", b.dtype.name))
    zb = legacy(b)[1]
    if zb != 0:
        raise InvalidArgumentError("bias.zero_point", f"must be 0 for {op} (LiteRT Prepare)", zb)
    if check_rank and len(b.shape) != 1:
        raise ShapeError("bias.shape", f"must be 1-D for {op}", tuple(b.shape))
    if int(np.prod(b.shape, dtype=np.int64)) != channels:
        raise limit("conv-bias", ShapeError("bias.shape", f"must have one element per output channel ({channels}) "
                                            f"for {op}", tuple(b.shape)))
    return None if b.data is None else np.asarray(b.data).astype(np.dtype(dtype), copy=False).reshape(channels)


def _spatial_options(op: str, options, limit: int | None):
    sh, sw = option(options, "stride_h", 0, kind=int), option(options, "stride_w", 0, kind=int)
    dh, dw = option(options, "dilation_h_factor", 1, kind=int), option(options, "dilation_w_factor", 1, kind=int)
    for name, v in (("stride_h", sh), ("stride_w", sw), ("dilation_h_factor", dh), ("dilation_w_factor", dw)):
        if v <= 0:
            raise InvalidArgumentError(f"options[{name!r}]", f"must be positive for {op}", v)
        if limit is not None and v > limit:
            raise InvalidArgumentError(f"options[{name!r}]", f"must be at most {limit} for {op}", v)
    return (sh, sw), (dh, dw)


#: elements requantized per block: the int64 temporaries of the fixed-point arithmetic stay in cache
_REQUANT_BLOCK = 1 << 16


def _requantize(acc32: np.ndarray, p: ConvPrepared) -> np.ndarray:
    """``clamp(MultiplyByQuantizedMultiplier(acc, M[oc], e[oc]) + z_out)`` as int8 (int16 for the
    16x8 kernels), block by block; an int64 accumulator takes the int64 overload (one rounding).
    (The fast path, :mod:`quantspec.litert.fast`, computes the int8 case fused with the bias addition.)"""
    o = acc32.shape[-1]
    flat = acc32.reshape(-1, o)
    out = np.empty(flat.shape, np.int16 if p.wide else np.int8)
    rows = max(1, _REQUANT_BLOCK // max(o, 1))
    int64_acc = p.wide and not p.bias_int32
    for r0 in range(0, flat.shape[0], rows):
        if int64_acc:
            y = fixedpoint.mbqm_int64(flat[r0:r0 + rows].astype(np.int64), p.multiplier.astype(np.int64),
                                       p.shift.astype(np.int64))
        else:
            y = fixedpoint.multiply_by_quantized_multiplier(flat[r0:r0 + rows], p.multiplier, p.shift)
        y = wrap_int32(y.astype(np.int64) + p.output_zero_point)
        out[r0:r0 + rows] = np.clip(y, p.act_min, p.act_max)
    return out.reshape(acc32.shape)


# ---------------------------------------------------------------------------------------------
# CONV_2D

@register
class Conv2D(Kernel):
    name = "CONV_2D"

    def prepare(self, inputs, outputs, options) -> ConvPrepared:
        op = self.name
        x, w, out = _operands(op, inputs, outputs)
        n, h, wd, c = (int(s) for s in x.shape)
        o, kh, kw, fc = (int(s) for s in w.shape)
        for name, v in (("input height", h), ("input width", wd), ("input channels", c)):
            if v <= 0:
                raise ShapeError("input.shape", f"{name} must be positive for {op}", tuple(x.shape))
        if min(o, kh, kw, fc) <= 0:
            raise ShapeError("filter.shape", f"dimensions must be positive for {op}", tuple(w.shape))
        if c % fc:
            raise ShapeError("filter.shape", f"filter input channels ({fc}) must divide the input's ({c}) for {op}",
                             tuple(w.shape))
        groups = c // fc
        if o % groups:
            raise ShapeError("filter.shape", f"output channels ({o}) must be a multiple of the groups ({groups}) "
                             f"for {op}",
                             tuple(w.shape))
        wide = _types(op, x, w, out)
        require_quantized(w, "filter", op)
        if np.any(w.params.zero_point != 0):
            raise InvalidArgumentError("filter.zero_point", f"must be 0 for {op} (LiteRT Prepare)",
                                       w.params.zero_point)
        stride, dilation = _spatial_options(op, options, None)
        b = inputs[2] if len(inputs) == 3 else None
        if b is None:
            raise limit("conv-bias", InvalidArgumentError("bias", f"is required by LiteRT's {op} (Prepare: has_bias)",
                                                          None))
        bias_type = conv16_bias_type(op, b, options) if wide else "int32"
        bias = _bias(op, b, o, check_rank=False, dtype=bias_type)
        padding = option(options, "padding", "SAME", allowed=("SAME", "VALID"))
        (oh, ow), pad = window_geometry(op, padding, (h, wd), (kh, kw), stride, dilation)
        z_in, z_out, mult, shift, act_min, act_max = _conv_quantization(op, x, w, out, o, options)
        filt = sums = None
        bound = 128
        if w.data is not None:
            filt, sums, bound = conv_filter(np.asarray(w.data), groups)
        return ConvPrepared(
            input_shape=(n, h, wd, c), output_shape=(n, oh, ow, o), filter_hw=(kh, kw), stride=stride,
            dilation=dilation, pad=pad, groups=groups, input_zero_point=z_in, output_zero_point=z_out,
            multiplier=mult, shift=shift, act_min=act_min, act_max=act_max, filter=filt, filter_sums=sums,
            filter_bound=bound, bias=bias, has_bias=True, consts=constants(inputs), wide=wide,
            bias_int32=wide and bias_type == "int32")

    def compute(self, p: ConvPrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0).reshape(p.input_shape)
        if p.filter is not None:
            filt, sums, bound = p.filter, p.filter_sums, p.filter_bound
        else:
            filt, sums, bound = conv_filter(value(arrays, p.consts, 1, "filter"), p.groups)
        bias_dtype = np.int64 if p.wide and not p.bias_int32 else np.int32
        bias = p.bias if p.bias is not None else value(arrays, p.consts, 2, "bias").astype(bias_dtype).reshape(-1)
        acc = conv_accumulate(x, p, filt, sums, bound)
        if p.wide:
            if p.bias_int32:                        # int32 accumulator: the sum and the bias wrap
                return [_requantize(wrap_int32(wrap_int32(acc) + bias), p)]
            return [_requantize(acc + bias, p)]
        fused = fast.requantize_multiplier(acc, p.multiplier, p.shift, p.output_zero_point, p.act_min, p.act_max,
                                           bias=bias)
        if fused is not None:
            return [fused]
        acc += bias
        return [_requantize(wrap_int32(acc), p)]


def conv16_bias_type(op: str, b: TensorSpec, options) -> str:
    """The bias type of a 16x8 CONV_2D: ``quantized_bias_type`` when the model sets it (the bias must
    have it), else LiteRT's int64 path."""
    wanted = option(options, "quantized_bias_type", "FLOAT32")
    if b.dtype.name not in ("int32", "int64"):
        raise limit("int16-bias-type", DTypeError("bias.dtype", f"must be int32 or int64 for int16 {op} (LiteRT "
                                                  "Prepare)", b.dtype.name))
    if wanted == "FLOAT32":                  # not set: LiteRT's kernel reads the bias as int64
        if b.dtype.name != "int64":
            raise limit("int16-bias-read-as-int64", UnsupportedError(
                "bias.dtype", f"int16 {op} without quantized_bias_type reads its bias as int64: LiteRT reads an int32 "
                "bias past its end (undefined behaviour)", b.dtype.name))
        return "int64"
    if wanted not in ("INT32", "INT64"):
        raise limit("int16-bias-type", InvalidArgumentError("options['quantized_bias_type']", f"must be INT32 or "
                                                            f"INT64 for int16 {op} (LiteRT Prepare)", wanted))
    if b.dtype.name != wanted.lower():
        raise limit("int16-bias-type", DTypeError("bias.dtype", f"must be the quantized_bias_type ({wanted}) for int16 "
                                                  f"{op} (LiteRT Prepare)", b.dtype.name))
    return wanted.lower()


def conv_filter(w: np.ndarray, groups: int):
    """(float32 (G, K, O/G) filter matrices — contiguous, the layout BLAS runs fastest on — int64 (O,)
    filter sums, max |w|)."""
    w = np.asarray(w).astype(np.int8, copy=False)
    o = w.shape[0]
    w2 = w.reshape(o, -1)
    sums = w2.astype(np.int64).sum(axis=1)
    bound = max(int(np.abs(w2.astype(np.int64)).max(initial=0)), 1)
    mats = w2.reshape(groups, o // groups, -1).transpose(0, 2, 1).astype(np.float32)
    return np.ascontiguousarray(mats), sums, bound


def conv_accumulate(x: np.ndarray, p: ConvPrepared, filt: np.ndarray, sums: np.ndarray, bound: int) -> np.ndarray:
    """``Σ_taps w · (x - z_in)`` for every output pixel and channel, exactly, as int64 (N, OH, OW, O)."""
    n, oh, ow, o = p.output_shape
    kh, kw = p.filter_hw
    c = p.input_shape[3]
    g = p.groups
    cg = c // g
    k = kh * kw * cg
    zx = p.input_zero_point
    acc = np.empty((n, oh, ow, o), np.int64)
    if acc.size == 0:
        return acc
    dtype = np.float32 if abs(zx) <= F32_EXACT else np.float64
    xf = x.astype(dtype)
    view = patches(xf, (kh, kw), p.stride, p.dilation, p.pad, (oh, ow), dtype(zx))   # (N, OH, OW, KH, KW, C)
    a_bound = max(1 << 15 if x.dtype == np.int16 else 128, abs(zx))
    wt = filt                                                                        # (G, K, O/G)
    rows_budget = max(1, _gemm.IM2COL_BUDGET // (max(k * g, 1) * np.dtype(dtype).itemsize))
    pix = oh * ow

    def run(block: np.ndarray, rows: int) -> np.ndarray:
        """block: a (…, KH, KW, C) view with ``rows`` output pixels -> int64 (rows, O)."""
        if g == 1:
            if block.flags.c_contiguous:        # a 1x1, stride-1 convolution: the windows are the input
                return matmul_exact(block.reshape(rows, k), wt[0], a_bound, bound)
            a = np.empty((rows, kh, kw, c), dtype)
            a.reshape(block.shape)[...] = block
            return matmul_exact(a.reshape(rows, k), wt[0], a_bound, bound)
        a = np.empty((g, rows, kh, kw, cg), dtype)
        split = block.reshape(*block.shape[:-1], g, cg)
        a.reshape(g, *block.shape[:-1], cg)[...] = np.moveaxis(split, -2, 0)
        r = matmul_exact(a.reshape(g, rows, k), wt, a_bound, bound)                  # (G, rows, O/G)
        return r.transpose(1, 0, 2).reshape(rows, o)

    if pix <= rows_budget:
        per = max(1, rows_budget // pix)
        for n0 in range(0, n, per):
            n1 = min(n, n0 + per)
            acc[n0:n1] = run(view[n0:n1], (n1 - n0) * pix).reshape(n1 - n0, oh, ow, o)
    else:
        per = max(1, rows_budget // ow)
        for b in range(n):
            for y0 in range(0, oh, per):
                y1 = min(oh, y0 + per)
                acc[b, y0:y1] = run(view[b, y0:y1], (y1 - y0) * ow).reshape(y1 - y0, ow, o)
    if zx:
        acc -= zx * sums
    return acc


# ---------------------------------------------------------------------------------------------
# DEPTHWISE_CONV_2D

@register
class DepthwiseConv2D(Kernel):
    name = "DEPTHWISE_CONV_2D"

    def prepare(self, inputs, outputs, options) -> ConvPrepared:
        op = self.name
        x, w, out = _operands(op, inputs, outputs)
        stride, dilation = _spatial_options(op, options, INT16_MAX)
        n, h, wd, c = (int(s) for s in x.shape)
        one, kh, kw, oc = (int(s) for s in w.shape)
        if min(h, wd, c) <= 0:
            raise ShapeError("input.shape", f"height, width and channels must be positive for {op}", tuple(x.shape))
        if min(kh, kw, oc) <= 0:
            raise ShapeError("filter.shape", f"dimensions 1-3 must be positive for {op}", tuple(w.shape))
        wide = _types(op, x, w, out)
        if one != 1:
            raise ShapeError("filter.shape", f"must be [1, KH, KW, channels] for {op}", tuple(w.shape))
        if oc % c:
            raise ShapeError("filter.shape", f"output channels ({oc}) must be a multiple of the input channels ({c}) "
                             f"for {op}", tuple(w.shape))
        b = inputs[2] if len(inputs) == 3 else None
        if len(inputs) == 3 and b is None:
            raise limit("conv-bias", InvalidArgumentError(
                "bias", f"{op} with three inputs needs the bias tensor (LiteRT Prepare: an absent optional bias is "
                "refused; give two inputs instead)", None))
        bias = _bias(op, b, oc, check_rank=True, dtype="int64" if wide else "int32")
        padding = option(options, "padding", "SAME", allowed=("SAME", "VALID"))
        (oh, ow), pad = window_geometry(op, padding, (h, wd), (kh, kw), stride, dilation)
        z_in, z_out, mult, shift, act_min, act_max = _conv_quantization(op, x, w, out, oc, options)
        filt = None
        if w.data is not None:
            filt = dw_filter(np.asarray(w.data), c)
        return ConvPrepared(
            input_shape=(n, h, wd, c), output_shape=(n, oh, ow, oc), filter_hw=(kh, kw), stride=stride,
            dilation=dilation, pad=pad, groups=oc // c, input_zero_point=z_in, output_zero_point=z_out,
            multiplier=mult, shift=shift, act_min=act_min, act_max=act_max, filter=filt, filter_sums=None,
            filter_bound=128, bias=bias, has_bias=b is not None, consts=constants(inputs), wide=wide)

    def compute(self, p: ConvPrepared, arrays) -> list[np.ndarray]:
        x = value(arrays, p.consts, 0).reshape(p.input_shape)
        filt = p.filter if p.filter is not None else dw_filter(value(arrays, p.consts, 1, "filter"),
                                                                p.input_shape[3])
        bias = None
        acc_type = np.int64 if p.wide else np.int32      # the 16x8 kernel accumulates in int64
        if p.has_bias:
            bias = p.bias if p.bias is not None else value(arrays, p.consts, 2, "bias").astype(acc_type).reshape(-1)
        fused = None if p.wide else fast.depthwise(x, filt, bias, p)
        if fused is not None:
            return [fused]
        n, oh, ow, oc = p.output_shape
        kh, kw = p.filter_hw
        c, m = p.input_shape[3], p.groups
        acc = np.zeros((n, oh, ow, c, m), acc_type)
        if acc.size:
            # x - z_in as C++ computes it (int32, wrapping), padded with 0 = the skipped taps
            xc = (x.astype(np.int64) - p.input_zero_point).astype(acc_type)
            view = patches(xc, (kh, kw), p.stride, p.dilation, p.pad, (oh, ow), 0)
            with np.errstate(over="ignore"):
                for ky in range(kh):
                    for kx in range(kw):
                        acc += view[:, :, :, ky, kx, :, None] * filt[ky, kx]
        acc = acc.reshape(n, oh, ow, oc)
        if bias is not None:
            acc += bias
        return [_requantize(acc, p)]


def dw_filter(w: np.ndarray, channels: int) -> np.ndarray:
    """int32 (KH, KW, I, M) from the [1, KH, KW, I*M] filter."""
    w = np.asarray(w).astype(np.int8, copy=False)
    _, kh, kw, oc = w.shape
    return w.reshape(kh, kw, channels, oc // channels).astype(np.int32)


def depthwise_accumulate(x: np.ndarray, p: ConvPrepared, filt: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """DEPTHWISE_CONV_2D's int32 accumulators (N, OH, OW, I·M): ``Σ_taps w · (x - z_in) + bias``,
    wrapping as the C++ int32 accumulator does, one vectorised multiply-add per filter tap."""
    n, oh, ow, oc = p.output_shape
    kh, kw = p.filter_hw
    c, m = p.input_shape[3], p.groups
    acc = np.zeros((n, oh, ow, c, m), np.int32)
    if acc.size:
        # x - z_in as C++ computes it (int32, wrapping), padded with 0 = the skipped taps
        xc = (x.astype(np.int64) - p.input_zero_point).astype(np.int32)
        view = patches(xc, (kh, kw), p.stride, p.dilation, p.pad, (oh, ow), 0)
        with np.errstate(over="ignore"):
            for ky in range(kh):
                for kx in range(kw):
                    acc += view[:, :, :, ky, kx, :, None] * filt[ky, kx]
    acc = acc.reshape(n, oh, ow, oc)
    if bias is not None:
        with np.errstate(over="ignore"):
            acc += bias
    return acc
