"""Which int8 operators LiteRT's XNNPACK delegate takes (``tflite/delegates/xnnpack/xnnpack_delegate.cc``,
the ``Visit*Node`` checks, and the tensor checks of XNNPACK itself).

:func:`declines` returns None for an operator the delegate takes, else the reason it declines it;
LiteRT then runs that operator with its optimized builtin kernel, and so does quantspec.  Only the
checks that can fail for a model the reference kernels accept are modelled; they are, per operator:

- every int8 activation tensor: per-tensor quantization (one scale, quantized dimension 0);
- CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED: a constant int8 filter (per-tensor, or per-channel
  along the output-channel dimension) with zero point 0 (a per-channel FULLY_CONNECTED filter or a
  per-tensor DEPTHWISE_CONV_2D filter is taken whatever its zero point), a constant int32 bias (required by the
  convolutions), a fused activation other than TANH / SIGN_BIT; DEPTHWISE_CONV_2D's
  ``depth_multiplier`` option must divide the output channels and match them (the delegate uses
  the option; LiteRT's own kernel the shapes);
- ADD / SUB: ``f32(s_in / s_out)`` in [1/1024, 256) for both inputs; MUL:
  ``f32(f32(s_a · s_b) / s_out)`` in [1/65536, 256); ranks up to 6;
- QUANTIZE: float32 -> int8, or int8 -> int8 with ``f32(s_in / s_out)`` in [1/256, 128];
- MEAN / SUM: a constant, non-empty int32 axis tensor of at most 6 axes;
- RESIZE_BILINEAR: a rank-4 input and a constant size tensor of two positive values;
- MAX_POOL_2D: strides at most the filter size, and no 1x1 filter with a stride above 1;
- LEAKY_RELU: a normal, non-zero alpha; ``f32(s_in / s_out)`` in [1/256, 128] and that ratio times
  alpha in [-127.99609375, 128] with magnitude at least 1/256;
- BATCH_MATMUL: both operands per-tensor int8 (a per-channel right operand is another XNNPACK
  type), the right operand's zero point 0, ranks 2 to 6;
- TRANSPOSE_CONV: a constant int32 [4] output shape, a constant int8 filter (per-tensor or
  per-channel along dimension 0, zero point 0), an optional constant int32 bias, rank-4 input and
  output, a fused activation other than TANH / SIGN_BIT; with VALID padding a filter no larger than
  the output, with SAME padding strides no larger than the filter;
- AVERAGE_POOL_2D, SOFTMAX, L2_NORMALIZATION, LOG_SOFTMAX, MAXIMUM, MINIMUM, the comparisons,
  ARG_MAX, GATHER and the other operators without a table entry: not taken for int8.

Data-movement operators the delegate takes (CONCATENATION, PAD, RESHAPE, TRANSPOSE, SLICE,
SPACE_TO_DEPTH, ...) give the reference kernels' bytes either way.

Some models pass these checks and then make XNNPACK fail when the delegate builds its runtime;
LiteRT's ``allocate_tensors`` then raises ("failed to create XNNPACK runtime") instead of falling
back.  :func:`fails` says why for such an operator: an int8 activation whose scale is not positive,
finite and normal or whose zero point is outside [-128, 127]; a MAX_POOL_2D, TRANSPOSE, PAD, SLICE,
SPACE_TO_DEPTH, RESIZE_BILINEAR or CONCATENATION whose input and output quantization differ; a
CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED filter with a zero point that is not 0 (those it
takes), a per-channel bias with a zero point that is not 0, a CONV_2D / DEPTHWISE_CONV_2D bias with
another number of scales than the filter; or a CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED /
TRANSPOSE_CONV requantization scale ``f32(f32(s_in · s_w) / s_out)`` of 256 or more.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..base import TensorSpec

__all__ = ["declines", "fails", "RULES", "MAX_DIMS"]

#: XNN_MAX_TENSOR_DIMS
MAX_DIMS = 6


def _qint8(t: TensorSpec | None, what: str) -> str | None:
    """An int8 tensor XNNPACK accepts as qint8 (per-tensor, valid scale and zero point)."""
    if t is None:
        return f"{what} is missing"
    if t.dtype.name != "int8":
        return f"{what} is {t.dtype.name}, not int8"
    p = t.params
    if p is None:
        return f"{what} is not quantized"
    if len(p.scale) != 1 or p.quantized_dimension != 0:
        return f"{what} is not quantized per tensor"
    return None


def _scale_zp(scale: float, zp: int, what: str) -> str | None:
    s = np.float32(scale)
    if not (np.isfinite(s) and s > 0 and abs(s) >= np.finfo(np.float32).tiny):
        return f"{what} has a scale that is not positive, finite and normal"
    if not -128 <= zp <= 127:
        return f"{what} has a zero point outside [-128, 127]"
    return None


def _rank(t: TensorSpec, what: str, lo: int = 0, hi: int = MAX_DIMS) -> str | None:
    if not lo <= len(t.shape) <= hi:
        return f"{what} has rank {len(t.shape)}, outside [{lo}, {hi}]"
    return None


def _first(*reasons: str | None) -> str | None:
    for r in reasons:
        if r:
            return r
    return None


def _activation(options: Mapping[str, Any]) -> str | None:
    fused = options.get("fused_activation_function") or "NONE"
    if fused not in ("NONE", "RELU", "RELU6", "RELU_N1_TO_1"):
        return f"fused activation {fused} is not supported"
    return None


def _filter(w: TensorSpec | None, axis: int, zero_point: str = "") -> str | None:
    """The delegate's filter check; ``zero_point`` ("per-channel" or "per-tensor") names the
    filters it takes whatever their zero point (XNNPACK then refuses a non-zero one: see
    :func:`fails`), the others it declines with a non-zero zero point."""
    if w is None:
        return "the filter is missing"
    if w.dtype.name != "int8":
        return f"the filter is {w.dtype.name}, not int8"
    if w.data is None:
        return "the filter is not a constant"
    p = w.params
    if p is None:
        return "the filter is not quantized"
    if len(p.scale) > 1 and p.quantized_dimension != axis:
        return f"the filter is quantized along dimension {p.quantized_dimension}, not {axis}"
    if len(p.scale) > 1 and (axis >= len(w.shape) or w.shape[axis] != len(p.scale)):
        return "the filter's scales do not match its channels"
    taken = zero_point == ("per-channel" if len(p.scale) > 1 else "per-tensor")
    if np.any(np.asarray(p.zero_point) != 0) and not taken:
        return "the filter's zero point is not 0"
    for s in np.asarray(p.scale, np.float32):
        r = _scale_zp(float(s), 0, "the filter")
        if r:
            return r
    return None


def _bias(b: TensorSpec | None, required: bool) -> str | None:
    if b is None:
        return "the bias is missing" if required else None
    if b.dtype.name != "int32":
        return f"the bias is {b.dtype.name}, not int32"
    if b.data is None:
        return "the bias is not a constant"
    return None


def _requantization(x: TensorSpec, w: TensorSpec, out: TensorSpec) -> str | None:
    from .gemm import requantization_scales

    scales = requantization_scales(x.params.scale[0], w.params.scale, out.params.scale[0], len(w.params.scale))
    if not np.all(scales < np.float32(256)):
        return "a requantization scale s_in * s_w / s_out is 256 or more"
    return None


def _conv(inputs, outputs, options) -> str | None:
    x, w, b = (list(inputs) + [None, None, None])[:3]
    out = outputs[0]
    return _first(_qint8(x, "the input"), _qint8(out, "the output"), _filter(w, 0), _bias(b, True),
                  _activation(options), _rank(x, "the input", 4, 4))


def _depthwise(inputs, outputs, options) -> str | None:
    x, w, b = (list(inputs) + [None, None, None])[:3]
    out = outputs[0]
    r = _first(_qint8(x, "the input"), _qint8(out, "the output"), _filter(w, 3, "per-tensor"), _bias(b, True),
               _activation(options), _rank(x, "the input", 4, 4))
    if r:
        return r
    m = options.get("depth_multiplier") or 0
    oc = int(w.shape[3])
    if m <= 0 or oc % m or oc // m != int(x.shape[3]):
        return "the depth_multiplier option does not match the channels"
    return None


def _fully_connected(inputs, outputs, options) -> str | None:
    x, w = inputs[0], inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    out = outputs[0]
    if (options.get("weights_format") or "DEFAULT") != "DEFAULT":
        return "non-default weights format"
    return _first(_qint8(x, "the input"), _qint8(out, "the output"), _filter(w, 0, "per-channel"), _bias(b, False),
                  _activation(options))


def _ratio_in(a: float, b: float, lo: float, hi: float) -> bool:
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        r = np.float32(np.float32(a) / np.float32(b))
    return bool(np.float32(lo) <= r < np.float32(hi))


def _add_sub(inputs, outputs, options) -> str | None:
    x, y, out = inputs[0], inputs[1], outputs[0]
    r = _first(_qint8(x, "input 0"), _qint8(y, "input 1"), _qint8(out, "the output"), _activation(options),
               _rank(x, "input 0"), _rank(y, "input 1"))
    if r:
        return r
    so = out.params.scale[0]
    if not (_ratio_in(x.params.scale[0], so, 1 / 1024, 256) and _ratio_in(y.params.scale[0], so, 1 / 1024, 256)):
        return "an input-to-output scale ratio is outside [1/1024, 256)"
    return None


def _mul(inputs, outputs, options) -> str | None:
    x, y, out = inputs[0], inputs[1], outputs[0]
    r = _first(_qint8(x, "input 0"), _qint8(y, "input 1"), _qint8(out, "the output"), _activation(options),
               _rank(x, "input 0"), _rank(y, "input 1"))
    if r:
        return r
    with np.errstate(over="ignore"):
        product = np.float32(np.float32(x.params.scale[0]) * np.float32(y.params.scale[0]))
    if not _ratio_in(product, out.params.scale[0], 1 / 65536, 256):
        return "the input-product-to-output scale ratio is outside [1/65536, 256)"
    return None


def _quantize(inputs, outputs, options) -> str | None:
    x, out = inputs[0], outputs[0]
    r = _first(_qint8(out, "the output"), _rank(x, "the input"))
    if r:
        return r
    if x.dtype.name == "float":
        return None
    r = _qint8(x, "the input")
    if r:
        return r
    if not _ratio_in(x.params.scale[0], out.params.scale[0], 1 / 256, np.nextafter(np.float32(128), np.inf)):
        return "the input-to-output scale ratio is outside [1/256, 128]"
    return None


def _dequantize(inputs, outputs, options) -> str | None:
    if outputs[0].dtype.name != "float":
        return "the output is not float32"
    return _first(_qint8(inputs[0], "the input"), _rank(inputs[0], "the input"))


def _unary(inputs, outputs, options) -> str | None:
    return _first(_qint8(inputs[0], "the input"), _qint8(outputs[0], "the output"), _rank(inputs[0], "the input"))


def _reduce(inputs, outputs, options) -> str | None:
    x, axis = inputs[0], inputs[1]
    r = _first(_qint8(x, "the input"), _qint8(outputs[0], "the output"))
    if r:
        return r
    if axis is None or axis.dtype.name != "int32":
        return "the axis tensor is not int32"
    if axis.data is None:
        return "the axis tensor is not a constant"
    n = int(np.asarray(axis.data).size)
    if n <= 0:
        return "no reduction axes"
    if n == 1 and int(np.asarray(axis.data).reshape(-1)[0]) == 0 and len(x.shape) == 0:
        return "a scalar input"
    if n > MAX_DIMS:
        return "more than 6 reduction axes"
    return None


def _resize(inputs, outputs, options) -> str | None:
    x, size = inputs[0], inputs[1]
    r = _first(_qint8(x, "the input"), _qint8(outputs[0], "the output"), _rank(x, "the input", 4, 4))
    if r:
        return r
    if size is None or size.dtype.name != "int32" or tuple(size.shape) != (2,):
        return "the size tensor is not an int32 [2]"
    if size.data is None:
        return "the size tensor is not a constant"
    if np.any(np.asarray(size.data) <= 0):
        return "a non-positive output size"
    return None


def _max_pool(inputs, outputs, options) -> str | None:
    r = _first(_qint8(inputs[0], "the input"), _qint8(outputs[0], "the output"), _activation(options))
    if r:
        return r
    sh, sw = options.get("stride_h") or 0, options.get("stride_w") or 0
    fh, fw = options.get("filter_height") or 0, options.get("filter_width") or 0
    if min(sh, sw, fh, fw) <= 0 or sh > fh or sw > fw or (fh == 1 and fw == 1 and max(sh, sw) > 1):
        return "unsupported pooling strides / filter"
    return None


def _data_movement(inputs, outputs, options) -> str | None:
    return _first(_qint8(inputs[0], "the input"), _qint8(outputs[0], "the output"))


def _leaky_relu(inputs, outputs, options) -> str | None:
    x, out = inputs[0], outputs[0]
    r = _first(_qint8(x, "the input"), _qint8(out, "the output"), _rank(x, "the input"))
    if r:
        return r
    alpha = np.float32(options.get("alpha") or 0.0)
    if not (np.isfinite(alpha) and abs(alpha) >= np.finfo(np.float32).tiny):
        return "alpha is zero or not a normal float"
    s_in, s_out = np.float32(x.params.scale[0]), np.float32(out.params.scale[0])
    tiny = np.finfo(np.float32).tiny
    if not all(np.isfinite(s) and abs(s) >= tiny for s in (s_in, s_out)):
        return None                 # the delegate skips the ratio checks (XNNPACK then fails: see fails)
    with np.errstate(all="ignore"):
        positive = np.float32(s_in / s_out)
        negative = np.float32(positive * alpha)
    if positive < np.float32(1 / 256) or positive > np.float32(128):
        return "the input-to-output scale ratio is outside [1/256, 128]"
    if negative < np.float32(-127.99609375) or negative > np.float32(128) or abs(negative) < np.float32(1 / 256):
        return "the negative input-to-output scale (ratio x alpha) is outside XNNPACK's range"
    return None


def _batch_matmul(inputs, outputs, options) -> str | None:
    a, b, out = inputs[0], inputs[1], outputs[0]
    r = _first(_qint8(a, "input 0"), _qint8(b, "input 1"), _qint8(out, "the output"))
    if r:
        return r
    if int(b.params.zero_point[0]) != 0:
        return "the right operand's zero point is not 0"
    if len(a.shape) < 2 or len(b.shape) < 2:
        return "an operand of rank below 2"
    return _first(_rank(a, "input 0"), _rank(b, "input 1"))


def _transpose_conv(inputs, outputs, options) -> str | None:
    shape_t, w, x = (list(inputs) + [None, None, None])[:3]
    b = inputs[3] if len(inputs) > 3 else None
    out = outputs[0]
    r = _first(_qint8(x, "the input"), _qint8(out, "the output"), _filter(w, 0), _bias(b, False),
               _activation(options), _rank(x, "the input", 4, 4), _rank(out, "the output", 4, 4))
    if r:
        return r
    if shape_t is None or shape_t.dtype.name != "int32" or shape_t.data is None or tuple(shape_t.shape) != (4,):
        return "the output shape is not a constant int32 [4]"
    oh, ow = (int(v) for v in np.asarray(shape_t.data).reshape(-1)[1:3])
    kh, kw = int(w.shape[1]), int(w.shape[2])
    sh, sw = options.get("stride_h") or 0, options.get("stride_w") or 0
    if (options.get("padding") or "SAME") == "VALID":
        if kh > oh or kw > ow:
            return "with VALID padding, an output smaller than the filter"
    elif kh < sh or kw < sw:
        return "with SAME padding, strides larger than the filter"
    return None


def _neg(inputs, outputs, options) -> str | None:
    """NEG: the delegate takes it on float32 (xnn_define_negate; measured: it computes ``0 - x``, so
    -0.0 and +0.0 both give +0.0), never on integer types."""
    x, out = inputs[0], outputs[0]
    if x is None or x.dtype.name != "float" or out.dtype.name != "float":
        return "the XNNPACK delegate takes NEG on float32 only"
    return _rank(x, "the input")


#: operator -> the delegate's check (None: the operator is never delegated in int8)
RULES: dict[str, Callable[..., str | None]] = {
    "CONV_2D": _conv,
    "DEPTHWISE_CONV_2D": _depthwise,
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _add_sub,
    "SUB": _add_sub,
    "MUL": _mul,
    "QUANTIZE": _quantize,
    "DEQUANTIZE": _dequantize,
    "LOGISTIC": _unary,
    "TANH": _unary,
    "MEAN": _reduce,
    "SUM": _reduce,
    "RESIZE_BILINEAR": _resize,
    "MAX_POOL_2D": _max_pool,
    "CONCATENATION": _data_movement,
    "PAD": _data_movement,
    "RESHAPE": _data_movement,
    "TRANSPOSE": _data_movement,
    "SLICE": _data_movement,
    "SPACE_TO_DEPTH": _data_movement,
    "LEAKY_RELU": _leaky_relu,
    "BATCH_MATMUL": _batch_matmul,
    "TRANSPOSE_CONV": _transpose_conv,
    "NEG": _neg,
}


def declines(name: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec],
             options: Mapping[str, Any]) -> str | None:
    """None if the XNNPACK delegate takes the operator, else why it does not."""
    rule = RULES.get(name)
    if rule is None:
        return f"the XNNPACK delegate does not take int8 {name}"
    try:
        return rule(list(inputs), list(outputs), dict(options or {}))
    except (AttributeError, IndexError, TypeError, ValueError):
        return f"{name}: a tensor the delegate checks is missing or malformed"


def fails(name: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec]) -> str | None:
    """For an operator the delegate takes: why XNNPACK then fails to build its runtime, or None."""
    for role, group in (("input", inputs), ("output", outputs)):
        for k, t in enumerate(group):
            if t is None or t.dtype.name != "int8" or t.params is None or len(t.params.scale) != 1:
                continue
            if name in _GEMMS and role == "input" and k == _GEMMS[name]:
                continue
            r = _scale_zp(float(t.params.scale[0]), int(t.params.zero_point[0]), f"{role} {k}")
            if r:
                return r
    if name in SAME_QUANTIZATION:
        ins = [t for t in (inputs if name == "CONCATENATION" else inputs[:1]) if t is not None]
        out = outputs[0]
        for t in ins:
            if (t.params is not None and out.params is not None
                    and (np.float32(t.params.scale[0]) != np.float32(out.params.scale[0])
                         or int(t.params.zero_point[0]) != int(out.params.zero_point[0]))):
                return "the input and the output have different quantization parameters"
    if name in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        return _first(_gemm_parameters(name, inputs), _requantization(inputs[0], inputs[1], outputs[0]))
    if name == "TRANSPOSE_CONV":
        return _requantization(inputs[2], inputs[1], outputs[0])
    return None


def _gemm_parameters(name: str, inputs: Sequence[TensorSpec | None]) -> str | None:
    """The filter and bias parameters XNNPACK refuses when the delegate defines its tensors: a
    filter zero point that is not 0 (the delegate passes it only where it takes such a filter:
    per-channel FULLY_CONNECTED, per-tensor DEPTHWISE_CONV_2D), a per-channel bias with a zero point
    that is not 0, and (convolutions) a bias with another number of scales than the filter."""
    w = inputs[1]
    b = inputs[2] if len(inputs) > 2 else None
    if np.any(np.asarray(w.params.zero_point) != 0):
        return "the filter's zero point is not 0"
    if b is None or b.params is None:
        return None
    if len(b.params.scale) > 1 and np.any(np.asarray(b.params.zero_point) != 0):
        return "a per-channel bias has a zero point that is not 0"
    if name != "FULLY_CONNECTED" and len(b.params.scale) != len(w.params.scale):
        return "the bias has another number of scales than the filter"
    return None


#: the operators XNNPACK gives one quantization to the input and the output of (it refuses them
#: when the model's differ)
SAME_QUANTIZATION = ("MAX_POOL_2D", "TRANSPOSE", "PAD", "SLICE", "SPACE_TO_DEPTH", "RESIZE_BILINEAR", "CONCATENATION")

#: the operators whose filter (input index) XNNPACK quantizes per channel
_GEMMS = {"CONV_2D": 1, "DEPTHWISE_CONV_2D": 1, "FULLY_CONNECTED": 1, "TRANSPOSE_CONV": 1}
