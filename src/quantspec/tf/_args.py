"""Turning user arguments into the exact types TensorFlow's kernels see, with quantspec errors.

Rules (docs/tensorflow.md, "Arguments"):

- an input tensor ``x`` must already have the kernel's type when it is a numpy array (float32 for
  QuantizeV2 and FakeQuant; float32 or float64 for QuantizeAndDequantize); Python numbers and
  lists are converted, as ``tf.convert_to_tensor`` converts them;
- a range argument (``min_range``, ``input_min``, ...) given as a Python number or list, or as a
  numpy float64 scalar (0-d), is converted to the kernel's type (rounding, as TensorFlow does); a
  numpy array or scalar of another real type is converted only when the conversion is exact,
  otherwise it is refused rather than silently rounded;
- string attributes are matched case-insensitively against TensorFlow's spellings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .._semantics.arrays import as_bool, native
from .._semantics.granularity import normalize_axis
from ..errors import (DTypeError, InvalidArgumentError, RangeError, RuntimeUnsupportedError, ShapeError,
                      UnsupportedError)
from ..versions import note_reproducing

__all__ = ["native", "tensor", "param", "number", "choice", "kernel_of", "flag", "integer", "axis_of",
           "require_kernel", "require_per_axis_mode", "check_out", "NUMBER"]

NUMBER = (int, float, np.integer, np.floating)


def _python(value: Any) -> bool:
    """Python data (np.float64 subclasses float but is numpy data, and is not Python data here)."""
    return (isinstance(value, (int, float, list, tuple)) and not isinstance(value, (bool, np.generic)))


def _float64_scalar(value: Any) -> bool:
    """A numpy float64 scalar (or 0-d array): what ``np.percentile`` or ``x.astype(float).min()`` give.
    TensorFlow converts it to a float32 argument as it converts a Python float (rounding to nearest),
    so quantspec treats it as one."""
    return (isinstance(value, (np.floating, np.ndarray)) and value.ndim == 0 and value.dtype.kind == "f"
            and value.dtype.itemsize == 8)


def tensor(x: Any, argument: str, allowed: Sequence[np.dtype], op: str) -> np.ndarray:
    """An input tensor of one of the ``allowed`` float types (the first is the default for Python
    data)."""
    if isinstance(x, (np.ndarray, np.generic)):
        a = native(np.asarray(x))
        if a.dtype not in allowed:
            names = " or ".join(str(d) for d in allowed)
            raise DTypeError(argument, f"must be {names}: {op} has no CPU kernel for other input types", str(a.dtype))
        return a
    if x is None:
        raise InvalidArgumentError(argument, "is required", x)
    if not _python(x):
        raise DTypeError(argument, "must be a numpy array, a number or a list of numbers", type(x).__name__)
    try:
        a = np.asarray(x, dtype=np.float64)
    except OverflowError:
        raise _too_large(argument, x) from None
    except (TypeError, ValueError):
        raise DTypeError(argument, "must hold numbers only", x) from None
    with np.errstate(over="ignore"):
        out = a.astype(allowed[0])
    if len(allowed) > 1:
        # a type-polymorphic op (QuantizeAndDequantize): TensorFlow infers the type from the Python data
        # and refuses a value beyond it; a float32-only op converts it to +-inf
        beyond = np.isfinite(a) & ~np.isfinite(out)
        if np.any(beyond):
            raise RangeError(argument, f"must hold values within the {np.dtype(allowed[0])} range (TensorFlow "
                             "refuses to convert such a Python value)", float(a[beyond].flat[0]))
    return out


def _too_large(argument: str, value: Any) -> RangeError:
    """A Python integer beyond the double range (``float(2**1030)`` raises OverflowError; TensorFlow refuses
    it too: "Can't convert Python sequence with out-of-range integer to Tensor", or the OverflowError
    itself for a float attribute)."""
    return RangeError(argument, "must be within the range of a double (about 1.8e308): TensorFlow refuses a "
                      "Python integer it cannot convert to float", value)


def number(value: Any, argument: str) -> np.float32:
    """A float attribute (``ensure_minimum_range``): ``float(value)`` rounded to float32 as TensorFlow stores
    the attribute (beyond the float32 range: +-inf)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, NUMBER):
        raise InvalidArgumentError(argument, "must be a number", value)
    try:
        v = float(value)
    except OverflowError:
        raise _too_large(argument, value) from None
    with np.errstate(over="ignore"):
        return np.float32(v)


def param(value: Any, argument: str, dtype: np.dtype) -> np.ndarray:
    """A range argument in the kernel's type ``dtype`` (float32 or float64)."""
    dtype = np.dtype(dtype)
    if value is None:
        raise InvalidArgumentError(argument, "is required", value)
    if isinstance(value, (bool, np.bool_)):
        raise DTypeError(argument, "must be a number, not a bool", value)
    if _python(value) or _float64_scalar(value):
        try:
            a = np.asarray(value, dtype=np.float64)
        except OverflowError:
            raise _too_large(argument, value) from None
        except (TypeError, ValueError):
            raise DTypeError(argument, "must hold numbers only", value) from None
        with np.errstate(over="ignore"):
            return a.astype(dtype)
    if not isinstance(value, (np.ndarray, np.generic)):
        raise DTypeError(argument, "must be a number, a list of numbers or a numpy array", type(value).__name__)
    a = np.asarray(value)
    if a.dtype == dtype:
        return a
    if a.dtype.kind not in "iuf":
        raise DTypeError(argument, f"must be a real number array ({dtype})", str(a.dtype))
    with np.errstate(over="ignore", invalid="ignore"):
        b = a.astype(dtype)
        back = b.astype(a.dtype) if a.dtype.kind == "f" else None
    exact = (np.array_equal(back, a, equal_nan=True) if back is not None
             else np.array_equal(b.astype(np.float64), a.astype(np.float64)))
    if not exact:
        raise DTypeError(argument, f"must be {dtype}; this {a.dtype} value cannot be converted exactly "
                         f"(pass {dtype} or a Python number)", a if a.size <= 8 else str(a.dtype))
    return b


def choice(value: Any, argument: str, options: Sequence[str]) -> str:
    """One of TensorFlow's string attribute values (case-insensitive)."""
    if isinstance(value, str) and value.strip().upper() in options:
        return value.strip().upper()
    raise InvalidArgumentError(argument, "must be one of " + ", ".join(repr(o) for o in options), value)


def kernel_of(value: Any) -> str:
    """``kernel=``: "eigen" or "onednn" (spec.KERNELS)."""
    from .spec import KERNELS

    if isinstance(value, str) and value.strip().lower() in KERNELS:
        note_reproducing("tensorflow-cpu")
        return value.strip().lower()
    raise InvalidArgumentError("kernel", "must be one of " + ", ".join(repr(k) for k in KERNELS), value)


def flag(value: Any, argument: str) -> bool:
    return as_bool(value, argument)


def integer(value: Any, argument: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(argument, "must be an integer", value)
    return int(value)


def axis_of(axis: Any, ndim: int) -> int | None:
    """``None`` (per-tensor) or the axis normalised to [0, ndim), negative counting from the end
    as ``tf.quantization.quantize`` does."""
    if axis is None:
        return None
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise InvalidArgumentError("axis", "must be None (per-tensor) or an integer", axis)
    return normalize_axis(int(axis), ndim)


def require_kernel(kernel: str, op: str, mode: str, T: str) -> None:
    """Refuse a call that TensorFlow rewrites to a oneDNN op without a kernel for ``T``
    (``spec.route(...).kernel == "missing"``)."""
    if kernel == "missing":
        mkl = {"QuantizeV2": "_MklQuantizeV2", "Dequantize": "_MklDequantize"}[op]
        raise RuntimeUnsupportedError("T", f"TensorFlow with oneDNN rewrites {op} {mode} to {mkl}, which has no {T} "
                                      "kernel (NotFoundError); use kernel='eigen'", T)


def require_per_axis_mode(op: str, mode: str, axis, channels: int) -> None:
    """MIN_FIRST has no per-axis kernel; an axis of length 1 takes the per-tensor path and works."""
    from .spec import PER_AXIS_MODES

    if mode not in PER_AXIS_MODES and axis is not None and channels != 1:
        raise UnsupportedError("mode", f"has no per-axis kernel in {mode}: use axis=None, or an axis of length 1 "
                               f"(axis {axis} has {channels}) (TensorFlow: 'MIN_FIRST mode is not implemented for "
                               f"{op.replace('V2', '')} with axis != -1')", mode)


def check_out(out: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype) -> None:
    """``out=``: a writeable array of exactly the result's shape and dtype."""
    if out is None:
        return
    if not isinstance(out, np.ndarray):
        raise DTypeError("out", "must be a numpy array", type(out).__name__)
    if out.dtype != dtype:
        raise DTypeError("out", f"must have the result's dtype {np.dtype(dtype)}", str(out.dtype))
    if out.shape != tuple(shape):
        raise ShapeError("out", f"must have the result's shape {tuple(shape)}", out.shape)
    if not out.flags.writeable:
        raise InvalidArgumentError("out", "must be writeable", "read-only array")
