"""Checks and helpers shared by the kernel families of this package (not a kernel family itself).

What every int8 kernel's prepare step does the same way: count its tensors, insist on the types it
has a path for, read a tensor's (scale, zero point) the way LiteRT does, enforce the op table's
rules (:func:`quantspec.litert.optable.enforce`), work out broadcast shapes and read options with
the schema's defaults.  And what every compute step does: check the arrays it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import DTypeError, InvalidArgumentError, RangeError, ShapeError, UnsupportedError
from .. import optable
from ..fixedpoint import INT32_MAX, INT32_MIN, _rdbpot, _srdhm, wrap_int32
from .base import TensorSpec

__all__ = ["count", "require_types", "activation", "enforce", "broadcast_shape", "option", "check_arrays",
           "rdbpot_signed_exponent", "MAX_BROADCAST_RANK"]

#: BroadcastBinaryOpSimple (reference/broadcast_loop.h) aborts above this rank when shapes differ
MAX_BROADCAST_RANK = 8


def count(op: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec], n_in: int | tuple[int, int],
          n_out: int = 1) -> None:
    """LiteRT's ``NumInputs`` / ``NumOutputs`` checks."""
    lo, hi = (n_in, n_in) if isinstance(n_in, int) else n_in
    if not lo <= len(inputs) <= hi:
        want = f"{lo}" if lo == hi else f"{lo} to {hi}"
        raise InvalidArgumentError(f"{op} inputs", f"must be {want} tensors", len(inputs))
    for i in range(lo):
        if inputs[i] is None:
            raise InvalidArgumentError(f"{op} input {i}", "is required", None)
    if len(outputs) != n_out:
        raise InvalidArgumentError(f"{op} outputs", f"must be {n_out} tensor(s)", len(outputs))


def require_types(op: str, specs: Sequence[tuple[str, TensorSpec | None]], allowed: tuple[str, ...]) -> None:
    """Each named tensor's type must be one of ``allowed`` (quantspec type names)."""
    for name, t in specs:
        if t is not None and t.dtype.name not in allowed:
            raise UnsupportedError(f"{op} {name}", "quantspec implements this LiteRT kernel for "
                                   + " / ".join(allowed) + " only", t.dtype.name)


def activation(op: str, name: str, t: TensorSpec) -> tuple[np.float32, int]:
    """The (scale, zero point) LiteRT's int8 kernels read from an activation tensor.

    LiteRT reads the legacy pair ``TfLiteTensor.params``, which is (0, 0) for a tensor with several
    scales; what its kernels then compute is not meaningful (meaningless multipliers, or an abort),
    so quantspec refuses such tensors, and tensors without quantization parameters."""
    if t.params is None:
        raise InvalidArgumentError(f"{op} {name}", "needs quantization parameters (scale and zero point)", None)
    if t.params.per_axis:
        raise UnsupportedError(f"{op} {name}", "must be quantized per-tensor: LiteRT's kernels read a tensor with "
                               "several scales as scale 0, zero point 0", len(t.params))
    scale = np.float32(t.params.scale[0])
    if not (np.isfinite(scale) and scale > 0):
        raise RangeError(f"{op} {name} scale", "must be finite and > 0 (LiteRT does not check it and computes "
                         "meaningless multipliers or aborts)", float(scale))
    return scale, int(t.params.zero_point[0])


def enforce(op: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec]) -> None:
    """Raise where LiteRT itself rejects the model (the op table's REJECTS/ABORTS rules)."""
    optable.enforce(op, inputs, outputs, skip=("dtype",))


def broadcast_shape(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The output shape of a binary op (``CalculateShapeForBroadcast``); equal shapes go element-wise."""
    if tuple(a) == tuple(b):
        return tuple(a)
    try:
        shape = np.broadcast_shapes(tuple(a), tuple(b))
    except ValueError:
        raise ShapeError(f"{op} inputs", "shapes do not broadcast", (tuple(a), tuple(b))) from None
    if len(shape) > MAX_BROADCAST_RANK:
        raise UnsupportedError(f"{op} inputs", f"broadcasting above rank {MAX_BROADCAST_RANK} aborts LiteRT "
                               "(BroadcastBinaryOpSimple)", len(shape))
    return shape


_MISSING = object()


def option(options: Mapping[str, Any], key: str, default: Any, allowed: tuple | None = None,
           kind: type | None = None) -> Any:
    """``options[key]`` with the schema default; checked against ``allowed`` values or a ``kind``."""
    value = options.get(key, _MISSING) if options is not None else _MISSING
    if value is _MISSING or value is None:
        return default
    if allowed is not None and value not in allowed:
        raise InvalidArgumentError(key, "must be one of " + ", ".join(map(repr, allowed)), value)
    if kind is bool:
        if not isinstance(value, (bool, np.bool_)) and value not in (0, 1):
            raise InvalidArgumentError(key, "must be a bool", value)
        return bool(value)
    if kind is float:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise InvalidArgumentError(key, "must be a number", value)
        return float(np.float32(value))
    return value


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


def rdbpot_signed_exponent(y: np.ndarray, shift: int, op: str) -> np.ndarray:
    """``RoundingDivideByPOT(y, -shift)`` as LiteRT calls it from ``MultiplyByQuantizedMultiplier
    SmallerThanOneExp`` with a multiplier > 1 (``shift > 0``, SUB's output and the comparisons).

    A negative exponent is undefined behaviour in C++; in the compiled interpreter the vectorised
    loops give ``-1`` for ``y < 0`` and ``+1`` otherwise, the scalar loops give
    ``(y >> (32 - shift)) + (y >= 0)`` (x86 masks the shift count).  The two agree, on ``+-1``,
    exactly when ``|y| < 2^(32 - shift)``; quantspec returns that value and raises where they
    differ (which path LiteRT takes depends on the array length and alignment)."""
    if shift <= 0:
        return _rdbpot(y, -shift)
    limit = 1 << (32 - shift)
    if np.any((y >= limit) | (y < -limit)):
        raise UnsupportedError(op, "LiteRT requantizes these values with RoundingDivideByPOT of a negative "
                               "exponent (undefined behaviour); its result depends on the compiler's "
                               "vectorisation and cannot be reproduced", f"multiplier shift {shift}")
    return np.where(y < 0, -1, 1).astype(np.int64)


def requantize_smaller_than_one(x: np.ndarray, multiplier: int, shift: int, op: str) -> np.ndarray:
    """``MultiplyByQuantizedMultiplierSmallerThanOneExp`` (double rounding), also for the ``shift > 0``
    misuse of :func:`rdbpot_signed_exponent`."""
    return rdbpot_signed_exponent(_srdhm(x, multiplier), shift, op)


#: fused activations of the schema that CalculateActivationRangeQuantized treats as "no clamp"
UNCLAMPED_ACTIVATIONS = ("TANH", "SIGN_BIT")


def fused_range(options: Mapping[str, Any], output: TensorSpec) -> tuple[int, int]:
    """The int8 clamp of the ``fused_activation_function`` option (default NONE).

    RELU, RELU6 and RELU_N1_TO_1 clamp (:func:`.base.activation_range`); TANH and SIGN_BIT are
    accepted by ADD / SUB / MUL in LiteRT and, for int8, clamp nothing (measured: identical to
    NONE), so quantspec computes them the same way."""
    from .base import FUSED_ACTIVATIONS, activation_range
    from ...dtypes import qtype
    fused = option(options, "fused_activation_function", "NONE", tuple(FUSED_ACTIVATIONS) + UNCLAMPED_ACTIVATIONS)
    if fused in UNCLAMPED_ACTIVATIONS:
        return -128, 127
    return activation_range(fused, output.params, qtype("int8"))


def clamp_to(x: np.ndarray, lo: int, hi: int, dtype) -> np.ndarray:
    return np.clip(x, lo, hi).astype(dtype)


__all__ += ["requantize_smaller_than_one", "clamp_to", "fused_range", "wrap_int32", "INT32_MIN", "INT32_MAX"]
