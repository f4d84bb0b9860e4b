"""Checks and helpers shared by the kernel families of this package (not a kernel family itself).

What every int8 kernel's prepare step does the same way, one function per job:

- count its tensors and name the required ones (:func:`count`, LiteRT's ``NumInputs`` /
  ``NumOutputs``);
- read an option with the schema's default, checked for its type or its allowed values
  (:func:`option`);
- insist on the types it has a path for (:func:`require_type`, and :func:`require_same_type`,
  :func:`require_rank`, :func:`require_quantized`);
- read a tensor's ``(scale, zero point)`` the way LiteRT does (:func:`activation` or
  :func:`legacy`, see below);
- enforce the op table's rules (:func:`enforce`, :func:`quantspec.litert.optable.enforce`) —
  the spec rules live in the table, not in the kernels;
- the fused activation's clamp (:func:`fused_range`, over :func:`.base.activation_range`);
- broadcast shapes, window geometry (``tflite/kernels/padding.h``) and constant inputs;
- the C library's float32 functions (:func:`libm_function`) and ``CheckedLog2``
  (:func:`checked_log2`, the power-of-two test of int16 scales).

And what every compute step does: check the arrays it is given (:func:`check_arrays`) or fetch an
input that may be constant (:func:`value`).

**Reading a tensor's (scale, zero point): activation() or legacy().**  LiteRT's kernels read the
legacy per-tensor pair ``TfLiteTensor::params``, which is ``(0, 0)`` for a tensor with several
scales or none (``GetLegacyQuantization``, tflite/core/subgraph.cc).  The two readers differ on
purpose:

- :func:`activation` — for kernels that *compute* with the pair (elementwise arithmetic,
  comparisons, QUANTIZE, activations, reductions).  With ``(0, 0)`` LiteRT computes meaningless
  multipliers or aborts, so quantspec refuses a per-axis or unquantized tensor, and a scale that is
  not finite and > 0.
- :func:`legacy` — where LiteRT's *decision* on the model depends on the ``(0, 0)`` reading and
  quantspec reproduces it: the same-parameter checks of the data-movement kernels, the pad value,
  bias zero points, and the convolution / FULLY_CONNECTED scales (whose effective scale is checked
  afterwards).  It never raises.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..._semantics.rounding import half_away_from_zero
from ...errors import DTypeError, InvalidArgumentError, RangeError, ShapeError, UnsupportedError
from .. import optable
from ..fixedpoint import rdbpot, srdhm
from .base import FUSED_ACTIVATIONS, TensorSpec, activation_range

__all__ = ["count", "option", "require_type", "require_same_type", "require_quantized", "require_rank",
           "activation", "legacy", "same_legacy_params", "binary_operands", "enforce", "fused_range",
           "fused_activation_name", "UNCLAMPED_ACTIVATIONS", "broadcast_shape", "MAX_BROADCAST_RANK",
           "check_arrays", "rdbpot_signed_exponent", "requantize_smaller_than_one", "out_size", "pad_before",
           "window_geometry", "constants", "value", "limit", "libm_function", "checked_log2"]

#: BroadcastBinaryOpSimple (reference/broadcast_loop.h) aborts above this rank when shapes differ
MAX_BROADCAST_RANK = 8


# -- LiteRT's limits -------------------------------------------------------------------------------

def limit(rule: str, error):
    """``error`` tagged with the id of the LiteRT limit it reports (:data:`..optable.LIMITS`, or a
    rule of the op table): the checker turns a kernel's tagged refusal into that rule's violation."""
    if rule not in optable.LIMITS and rule not in optable.RULES:  # pragma: no cover - a kernel bug
        raise RuntimeError(f"unknown LiteRT limit {rule!r}")
    error.limit = rule
    return error


# -- tensor counts --------------------------------------------------------------------------------

def count(op: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec], n_in: int | tuple[int, ...],
          n_out: int = 1, names: Sequence[str] = ()) -> tuple[TensorSpec, ...]:
    """LiteRT's ``NumInputs`` / ``NumOutputs`` checks: ``n_in`` is the number of inputs, or a tuple
    of the numbers accepted.  The first ``min(n_in)`` inputs are required (not None); ``names`` names
    them in that order (``"input 0"``, ``"input 1"``... by default).  Returns the named inputs."""
    counts = (n_in,) if isinstance(n_in, int) else tuple(n_in)
    if len(inputs) not in counts:
        raise InvalidArgumentError("inputs", f"{op} takes " + " or ".join(map(str, counts)) + " inputs",
                                   len(inputs))
    if len(outputs) != n_out:
        raise InvalidArgumentError("outputs", f"{op} takes {n_out} outputs", len(outputs))
    for i in range(min(counts)):
        if inputs[i] is None:
            raise InvalidArgumentError(names[i] if i < len(names) else f"input {i}", f"is required by {op}", None)
    return tuple(inputs[:len(names)])


# -- options --------------------------------------------------------------------------------------

_MISSING = object()


def option(options: Mapping[str, Any] | None, key: str, default: Any, *, allowed: tuple | None = None,
           kind: type | None = None) -> Any:
    """``options[key]``, or the schema default when the key is missing or None; a given value must be
    one of ``allowed`` or of the ``kind`` bool (a bool, or the integer 0 or 1), int (an integer, not a
    bool) or float (a number, not a bool; returned as the float32 value the schema stores)."""
    value = options.get(key, _MISSING) if options is not None else _MISSING
    if value is _MISSING or value is None:
        return default
    argument = f"options[{key!r}]"
    if allowed is not None and value not in allowed:
        raise InvalidArgumentError(argument, "must be one of " + ", ".join(map(repr, allowed)), value)
    if kind is bool:
        if not (isinstance(value, (bool, np.bool_))
                or isinstance(value, (int, np.integer)) and value in (0, 1)):
            raise InvalidArgumentError(argument, "must be a bool", value)
        return bool(value)
    if kind is int:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise InvalidArgumentError(argument, "must be an integer", value)
        return int(value)
    if kind is float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidArgumentError(argument, "must be a number", value)
        return float(np.float32(value))
    return value


# -- types, ranks, parameters ---------------------------------------------------------------------

def require_type(op: str, named: Sequence[tuple[str, TensorSpec | None]], allowed: Sequence[str], *,
                 error: type[InvalidArgumentError] | type[DTypeError] = UnsupportedError) -> None:
    """Each named tensor's type (a quantspec type name) must be one of ``allowed``: the types
    quantspec implements the kernel for.  ``error``: the class raised (the convolution, pooling,
    FULLY_CONNECTED and resize kernels raise :class:`DTypeError`)."""
    for argument, t in named:
        if t is not None and t.dtype.name not in allowed:
            raise error(argument, f"quantspec implements LiteRT's {op} for " + " / ".join(allowed) + " only",
                        t.dtype.name)


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


def activation(op: str, name: str, t: TensorSpec) -> tuple[np.float32, int]:
    """The (scale, zero point) of a tensor a kernel computes with; refuses a per-axis or unquantized
    tensor and a scale that is not finite and > 0 (module docstring: when to use :func:`legacy`)."""
    if t.params is None:
        raise limit("granularity", InvalidArgumentError(f"{op} {name}", "needs quantization parameters (scale and "
                                                        "zero point)", None))
    if t.params.per_axis:
        raise limit("granularity", UnsupportedError(f"{op} {name}", "must be quantized per-tensor: LiteRT's kernels "
                                                    "read a tensor with several scales as scale 0, zero point 0",
                                                    len(t.params)))
    scale = np.float32(t.params.scale[0])
    if not (np.isfinite(scale) and scale > 0):
        raise limit("scale", RangeError(f"{op} {name} scale", "must be finite and > 0 (LiteRT does not check it and "
                                        "computes meaningless multipliers or aborts)", float(scale)))
    return scale, int(t.params.zero_point[0])


def legacy(spec: TensorSpec | None) -> tuple[np.float32, int]:
    """The per-tensor ``(scale, zero_point)`` exactly as LiteRT's kernels read it: the single pair of
    a per-tensor tensor, ``(0.0, 0)`` for a per-axis, unquantized or absent one (module docstring:
    when to use :func:`activation`)."""
    if spec is None or spec.params is None or spec.params.per_axis:
        return np.float32(0.0), 0
    return np.float32(spec.params.scale[0]), int(spec.params.zero_point[0])


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


def binary_operands(op: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec], *,
                    output_type: str | None = "int8", quantized: bool = True, types: tuple[str, ...] = ("int8",)):
    """The start every binary int8 kernel's prepare shares (ADD, SUB, MUL, MAXIMUM, MINIMUM and the
    comparisons): two inputs of one of ``types`` (int8, and int16 for the kernels with a 16-bit path),
    the same for both, and one ``output_type`` output (``"same"``: the inputs' type; None: any, the op
    sets its type, as LiteRT's comparisons make theirs bool); where ``quantized``, the
    :func:`activation` parameters of the inputs and of a quantized output; then the op table's rules.

    Returns ``(x, y, output, params)``, ``params`` the list of ``(scale, zero point)`` read."""
    x, y = count(op, inputs, outputs, 2, names=("input 0", "input 1"))
    o = outputs[0]
    require_type(op, [("input 0", x)], types)
    require_same_type(x, y, "input 1", op)
    if output_type == "same":
        output_type = x.dtype.name
        require_same_type(x, o, "output", op)
    if output_type is not None:
        require_type(op, [("output", o)], (output_type,))
    params = []
    if quantized:
        named = [("input 0", x), ("input 1", y)] + ([("output", o)] if output_type in ("int8", "int16") else [])
        params = [activation(op, name, t) for name, t in named]
    enforce(op, inputs, outputs)
    return x, y, o, params


# -- the op table ---------------------------------------------------------------------------------

def _memory_bytes() -> int:
    """This machine's memory as every quantspec size check counts it (``quantspec._semantics.arrays.memory_limit``:
    physical memory and swap, or the container's limit)."""
    from ..._semantics.arrays import memory_limit

    return memory_limit()


def fits_memory(op: str, argument: str, shape: Sequence[int], itemsize: int, value: Any) -> None:
    """A size, paddings or shape read from the model that makes an output larger than this machine's
    memory (a damaged or hostile model: LiteRT fails to allocate it) is a :class:`ShapeError`
    before anything is allocated (the kernels' index tables grow with it too)."""
    elements = 1
    for d in shape:
        elements *= max(int(d), 0)
    if elements * itemsize > _memory_bytes():
        raise ShapeError(argument, f"makes the output of {op} {tuple(int(d) for d in shape)} larger than this "
                         "machine's memory (LiteRT fails to allocate it)", value)


def int8_filter(w: TensorSpec, op: str) -> TensorSpec:
    """An int4 filter as LiteRT runs it (optable.TYPE_VERDICTS): a constant unpacked to its int8
    values; any other filter is returned as it is (the kernel checks its type)."""
    if w.dtype.name != "int4":
        return w
    if w.data is None:
        raise UnsupportedError("filter", f"an int4 filter of {op} must be a constant (LiteRT unpacks it when it "
                               "prepares the op)", w.name or "filter")
    from dataclasses import replace

    from ...dtypes import qtype

    return replace(w, dtype=qtype("int8"), data=np.asarray(w.data).astype(np.int8))


def enforce(op: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec]) -> None:
    """Raise where LiteRT itself rejects the model (the op table's REJECTS/ABORTS rules, for an op the
    table has).  Types are left to the kernel's own checks, which name the types its path supports."""
    if op in optable.OP_TABLE:
        optable.enforce(op, list(inputs), list(outputs), skip=("dtype",))


# -- fused activation -----------------------------------------------------------------------------

#: fused activations of the schema that CalculateActivationRangeQuantized does not clamp for (its
#: final ``else`` branch): ADD, SUB, MUL, CONV_2D, DEPTHWISE_CONV_2D and the pooling kernels accept
#: them and, for int8, clamp nothing (measured: identical to NONE); FULLY_CONNECTED refuses them in
#: Prepare.
UNCLAMPED_ACTIVATIONS = ("TANH", "SIGN_BIT")


def fused_activation_name(op: str, options: Mapping[str, Any] | None, *, unclamped: bool = True) -> str:
    """The ``fused_activation_function`` option (default NONE), refused unless the kernel accepts it:
    the clamping ones of :data:`.base.FUSED_ACTIVATIONS`, and :data:`UNCLAMPED_ACTIVATIONS` where
    ``unclamped``."""
    fused = option(options, "fused_activation_function", "NONE")
    accepted = tuple(FUSED_ACTIVATIONS) + (UNCLAMPED_ACTIVATIONS if unclamped else ())
    if fused not in accepted:
        raise UnsupportedError("options['fused_activation_function']", f"{op} (int8) supports " + ", ".join(accepted),
                               fused)
    return fused


def fused_range(op: str, options: Mapping[str, Any] | None, output: TensorSpec, *,
                unclamped: bool = True) -> tuple[int, int]:
    """The integer clamp of the fused activation on ``output`` (CalculateActivationRangeQuantized,
    :func:`.base.activation_range`); the output type's whole range for TANH and SIGN_BIT."""
    fused = fused_activation_name(op, options, unclamped=unclamped)
    if fused in UNCLAMPED_ACTIVATIONS:
        return int(output.dtype.qmin), int(output.dtype.qmax)
    if output.params is None:
        raise InvalidArgumentError("output", f"needs quantization parameters for int8 {op}", None)
    # activation_range raises where LiteRT's Quantize() fails (a bound / scale outside int32: a zero
    # or tiny output scale); the pooling kernels ignore that failure and read uninitialised bounds,
    # which quantspec refuses all the same
    return activation_range(fused, output.params, output.dtype)


# -- shapes ---------------------------------------------------------------------------------------

def broadcast_shape(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The output shape of a binary op (``CalculateShapeForBroadcast``); equal shapes go element-wise."""
    if tuple(a) == tuple(b):
        return tuple(a)
    try:
        shape = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        raise ShapeError(f"{op} inputs", "shapes do not broadcast", (tuple(a), tuple(b))) from None
    if len(shape) > MAX_BROADCAST_RANK:
        raise limit("broadcast-rank", UnsupportedError(f"{op} inputs", f"broadcasting above rank {MAX_BROADCAST_RANK} aborts LiteRT "
                               "(BroadcastBinaryOpSimple)", len(shape)))
    return shape


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


# -- compute-side inputs --------------------------------------------------------------------------

def check_arrays(op: str, arrays: Sequence[np.ndarray | None],
                 specs: Sequence[tuple[int, tuple[int, ...], np.dtype]]) -> list[np.ndarray]:
    """The run-time arrays a compute step needs, checked against the shapes and dtypes it was
    prepared for: ``specs`` lists ``(input index, shape, dtype)``."""
    out = []
    for index, shape, dtype in specs:
        if index >= len(arrays) or arrays[index] is None:
            raise InvalidArgumentError(f"{op} input {index}", "is missing", None)
        a = np.asarray(arrays[index])
        if a.dtype != dtype:
            raise DTypeError(f"{op} input {index}", f"must have dtype {dtype}", str(a.dtype))
        if tuple(a.shape) != tuple(shape):
            raise ShapeError(f"{op} input {index}", f"must have the prepared shape {tuple(shape)}", a.shape)
        out.append(a)
    return out


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


# -- requantization with LiteRT's undefined behaviour ---------------------------------------------

def rdbpot_signed_exponent(y: np.ndarray, shift: int, op: str) -> np.ndarray:
    """``RoundingDivideByPOT(y, -shift)`` as LiteRT calls it from ``MultiplyByQuantizedMultiplier
    SmallerThanOneExp`` with a multiplier > 1 (``shift > 0``, SUB's output and the comparisons).

    A negative exponent is undefined behaviour in C++; in the compiled interpreter the vectorised
    loops give ``-1`` for ``y < 0`` and ``+1`` otherwise, the scalar loops give
    ``(y >> (32 - shift)) + (y >= 0)`` (x86 masks the shift count).  The two agree, on ``+-1``,
    exactly when ``|y| < 2^(32 - shift)``; quantspec returns that value and raises where they
    differ (which path LiteRT takes depends on the array length and alignment)."""
    if shift <= 0:
        return rdbpot(y, -shift)
    bound = 1 << (32 - shift)
    if np.any((y >= bound) | (y < -bound)):
        rule = "sub-output-multiplier-above-one" if op == "SUB" else "comparison-large-scale"
        raise limit(rule, UnsupportedError(
            op, "LiteRT requantizes these values with RoundingDivideByPOT of a negative exponent (undefined "
            "behaviour); its result depends on the compiler's vectorisation and cannot be reproduced",
            f"multiplier shift {shift}"))
    return np.where(y < 0, -1, 1).astype(np.int64)


def requantize_smaller_than_one(x: np.ndarray, multiplier: int, shift: int, op: str) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierSmallerThanOneExp`` (double rounding), also for the ``shift > 0``
    misuse of :func:`rdbpot_signed_exponent`."""
    return rdbpot_signed_exponent(srdhm(x, multiplier), shift, op)


# -- the C library's float32 functions --------------------------------------------------------------

def libm_function(name: str):
    """The C library's float32 function ``name`` (``expf``, ``logf``, ...) called through ctypes, as the
    interpreter calls it; None where there is no C math library."""
    try:
        path = ctypes.util.find_library("m")
        lib = ctypes.CDLL(path) if path else None
        f = getattr(lib, name) if lib is not None else None
    except (OSError, AttributeError):  # pragma: no cover - platform without a C math library
        return None
    if f is None:  # pragma: no cover
        return None
    f.argtypes = [ctypes.c_float]
    f.restype = ctypes.c_float
    return f


_LOGF = libm_function("logf") or (lambda v: float(np.log(np.float32(v))))


def checked_log2(x) -> tuple[bool, int]:
    """``CheckedLog2`` (quantization_util.cc): ``log2(x) = logf(x) * (1 / logf(2))`` in float32, rounded
    half away from zero; (true when within 1e-3 of that integer, the integer)."""
    f = np.float32
    with np.errstate(all="ignore"):
        lg = f(f(_LOGF(float(f(x)))) * (f(1.0) / f(_LOGF(2.0))))
        rounded = f(half_away_from_zero(lg))
        frac = f(lg - rounded)
    if not np.isfinite(rounded) or abs(rounded) > 2 ** 31:
        return False, 0
    return bool(abs(frac) < f(1e-3)), int(rounded)
