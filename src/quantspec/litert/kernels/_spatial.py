"""Helpers shared by the convolution, pooling, resize and data-movement kernels.

- option reading with the schema defaults (a missing key is the schema's default);
- the per-tensor ("legacy") quantization parameters LiteRT's kernels read;
- window geometry: output size and padding exactly as ``tflite/kernels/padding.h``;
- small checks that raise quantspec errors naming the argument, the rule and the value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from .base import FUSED_ACTIVATIONS, TensorSpec, activation_range

#: ActivationFunctionType values a quantized kernel's CalculateActivationRangeQuantized does not
#: clamp for (its final ``else`` branch): CONV_2D, DEPTHWISE_CONV_2D and the pooling kernels accept
#: them and apply no clamp; FULLY_CONNECTED refuses them in Prepare.
UNCLAMPED_ACTIVATIONS = ("TANH", "SIGN_BIT")


def option(options: Mapping[str, Any] | None, key: str, default: Any) -> Any:
    """``options[key]``, or the schema default when the key is missing or None."""
    if options is None:
        return default
    value = options.get(key, default)
    return default if value is None else value


def int_option(options: Mapping[str, Any] | None, key: str, default: int) -> int:
    value = option(options, key, default)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(f"options[{key!r}]", "must be an integer", value)
    return int(value)


def bool_option(options: Mapping[str, Any] | None, key: str, default: bool = False) -> bool:
    value = option(options, key, default)
    if not isinstance(value, (bool, np.bool_, int, np.integer)):
        raise InvalidArgumentError(f"options[{key!r}]", "must be a boolean", value)
    return bool(value)


def padding_option(options: Mapping[str, Any] | None) -> str:
    value = option(options, "padding", "SAME")
    if value not in ("SAME", "VALID"):
        raise InvalidArgumentError("options['padding']", "must be 'SAME' or 'VALID'", value)
    return value


def fused_activation(options: Mapping[str, Any] | None, output: TensorSpec, *, clamp_all: bool,
                     op: str) -> tuple[int, int]:
    """The integer clamp of the fused activation on ``output`` (CalculateActivationRangeQuantized).

    ``clamp_all=False`` (CONV_2D, DEPTHWISE_CONV_2D, pooling): TANH and SIGN_BIT fall through
    LiteRT's range function unclamped, as in the interpreter."""
    fused = option(options, "fused_activation_function", "NONE")
    if not clamp_all and fused in UNCLAMPED_ACTIVATIONS:
        return int(output.dtype.qmin), int(output.dtype.qmax)
    if fused not in FUSED_ACTIVATIONS:
        raise UnsupportedError("options['fused_activation_function']",
                               f"{op} (int8) supports " + ", ".join(FUSED_ACTIVATIONS), fused)
    if output.params is None:
        raise InvalidArgumentError("output", f"needs quantization parameters for int8 {op}", None)
    # activation_range raises where LiteRT's Quantize() fails (a bound / scale outside int32: a zero
    # or tiny output scale); the pooling kernels ignore that failure and read uninitialised bounds,
    # which quantspec refuses all the same
    return activation_range(fused, output.params, output.dtype)


def legacy(spec: TensorSpec | None) -> tuple[np.float32, int]:
    """The per-tensor ``(scale, zero_point)`` LiteRT's kernels read (``TfLiteTensor::params``):
    the single pair of a per-tensor tensor, ``(0.0, 0)`` for a per-axis or unquantized one
    (``GetLegacyQuantization``, tflite/core/subgraph.cc)."""
    if spec is None or spec.params is None or spec.params.per_axis:
        return np.float32(0.0), 0
    return np.float32(spec.params.scale[0]), int(spec.params.zero_point[0])


def need(specs: Sequence[TensorSpec | None], count: int | tuple[int, ...], op: str,
         what: str = "inputs") -> None:
    counts = (count,) if isinstance(count, int) else count
    if len(specs) not in counts:
        raise InvalidArgumentError(what, f"{op} takes " + " or ".join(map(str, counts)) + f" {what}",
                                   len(specs))


def present(spec: TensorSpec | None, argument: str, op: str) -> TensorSpec:
    if spec is None:
        raise InvalidArgumentError(argument, f"is required by {op}", None)
    return spec


def require_type(spec: TensorSpec, allowed: Sequence[str], argument: str, op: str) -> None:
    if spec.dtype.name not in allowed:
        raise DTypeError(argument, f"{op} supports " + ", ".join(allowed) + " here", spec.dtype.name)


def require_same_type(a: TensorSpec, b: TensorSpec, argument: str, op: str) -> None:
    if a.dtype != b.dtype:
        raise DTypeError(argument, f"must have the input's type for {op} ({a.dtype.name})", b.dtype.name)


def require_quantized(spec: TensorSpec, argument: str, op: str) -> None:
    if spec.params is None:
        raise InvalidArgumentError(argument, f"must carry quantization parameters for int8 {op}", None)


def require_rank(spec: TensorSpec, ranks: int | tuple[int, ...], argument: str, op: str) -> None:
    ranks = (ranks,) if isinstance(ranks, int) else ranks
    if len(spec.shape) not in ranks:
        raise ShapeError(argument, "must have rank " + " or ".join(map(str, ranks)) + f" for {op}",
                         tuple(spec.shape))


def same_legacy_params(a: TensorSpec, b: TensorSpec, argument: str, op: str, *, of: str = "the output's") -> None:
    """LiteRT's ``TF_LITE_ENSURE_EQ`` on the per-tensor scale (float equality) and zero point."""
    sa, za = legacy(a)
    sb, zb = legacy(b)
    if sa != sb:
        raise InvalidArgumentError(f"{argument}.scale", f"must equal {of} scale for int8 {op} (LiteRT Prepare)",
                                   float(sa), detail=f"expected {float(sb)!r}")
    if za != zb:
        raise InvalidArgumentError(f"{argument}.zero_point", f"must equal {of} zero point for int8 {op} "
                                   "(LiteRT Prepare)", za, detail=f"expected {zb}")


# -- window geometry (tflite/kernels/padding.h) ---------------------------------------------------

def out_size(padding: str, image: int, filt: int, stride: int, dilation: int) -> int | None:
    """``ComputeOutSizeChecked``: the output length, or None where LiteRT's check fails."""
    if image < 0 or filt <= 0 or stride <= 0 or dilation <= 0:
        return None
    effective = (filt - 1) * dilation + 1
    if padding == "SAME":
        size = (image + stride - 1) // stride
    else:
        num = image + stride - effective
        size = -(-num // stride) if num < 0 else num // stride    # C division truncates
    return size if size >= 0 else None


def pad_before(stride: int, dilation: int, image: int, filt: int, out: int) -> int:
    """``ComputePaddingWithOffset``: padding before the first pixel (the odd one goes after)."""
    effective = (filt - 1) * dilation + 1
    total = max((out - 1) * stride + effective - image, 0)
    return total // 2


def window_geometry(op: str, padding: str, image_hw: tuple[int, int], filter_hw: tuple[int, int],
                    stride: tuple[int, int], dilation: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """``ComputePaddingHeightWidthChecked``: ((out_h, out_w), (pad_h, pad_w)); raises where LiteRT's
    Prepare fails."""
    outs, pads = [], []
    for axis, (i, f, s, d) in zip(("height", "width"), zip(image_hw, filter_hw, stride, dilation)):
        o = out_size(padding, i, f, s, d)
        if o is None:
            raise ShapeError(f"{axis}", f"{op}: no valid output size for input {i}, filter {f}, stride {s}, "
                             f"dilation {d} with {padding} padding", (i, f, s, d))
        outs.append(o)
        pads.append(pad_before(s, d, i, f, o))
    return (outs[0], outs[1]), (pads[0], pads[1])


# -- constant inputs ------------------------------------------------------------------------------

def constants(specs: Sequence[TensorSpec | None]) -> tuple[np.ndarray | None, ...]:
    """Each input's constant data (None for run-time inputs), kept by prepare so that compute can
    run whether or not the caller passes constant inputs again."""
    return tuple(None if s is None or s.data is None else np.asarray(s.data) for s in specs)


def value(arrays: Sequence[np.ndarray | None], consts: Sequence[np.ndarray | None], i: int,
          argument: str = "input") -> np.ndarray:
    """Input ``i`` for compute: the array passed, else the constant prepare recorded."""
    a = arrays[i] if i < len(arrays) else None
    if a is None:
        a = consts[i] if i < len(consts) else None
    if a is None:
        raise InvalidArgumentError(argument, "is a run-time input and no array was given for it", None)
    return np.asarray(a)


def table_checks(op: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec]) -> None:
    """Raise for the op table's restrictions that LiteRT enforces (:func:`quantspec.litert.optable.enforce`):
    the spec rules live in the table, not in the kernels.  Types are left to the kernel's own
    checks, which name the types its kernel path supports."""
    from ..optable import OP_TABLE, enforce

    if op in OP_TABLE:
        enforce(op, list(inputs), list(outputs), skip=("dtype",))
