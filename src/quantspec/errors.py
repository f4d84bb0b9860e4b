"""The exceptions quantspec raises.

Every error raised on purpose by quantspec is a :class:`QuantSpecError` and also a built-in
``ValueError`` or ``TypeError``, so callers that already catch those keep working.  The message
names the argument, the rule it breaks and the value it got::

    quantspec.errors.AxisError: axis: must be in [-2, 1] for a rank-2 input (got 2)

Use :func:`fail` (or the class constructors with the same three parts) to build one; the
three parts stay available as attributes ``argument``, ``rule`` and ``value``.
"""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = [
    "QuantSpecError",
    "InvalidArgumentError",
    "ShapeError",
    "AxisError",
    "RangeError",
    "DTypeError",
    "UnsupportedError",
    "OpsetError",
    "RuntimeUnsupportedError",
    "ModelError",
    "TensorFileError",
    "TooLargeError",
    "fail",
]


def _show(value: Any) -> str:
    """A short, readable rendering of an offending value."""
    try:
        import numpy as np

        if isinstance(value, np.ndarray):
            if value.size <= 8:
                return f"array({value.tolist()!r}, dtype={value.dtype}, shape={value.shape})"
            return f"array of dtype {value.dtype} and shape {value.shape}"
        if isinstance(value, np.dtype):
            return str(value)
    except Exception:  # pragma: no cover - numpy is always there
        pass
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


class QuantSpecError(Exception):
    """Base class of every error quantspec raises on purpose."""

    def __init__(self, argument: str, rule: str | None = None, value: Any = ..., *, detail: str = ""):
        if rule is None:  # plain-message form, kept for convenience
            message = argument
            argument, rule = "", argument
        else:
            message = f"{argument}: {rule}"
            if value is not ...:
                message += f" (got {_show(value)})"
        if detail:
            message += f". {detail}"
        super().__init__(message)
        self.argument = argument
        self.rule = rule
        self.value = None if value is ... else value


class InvalidArgumentError(QuantSpecError, ValueError):
    """An argument breaks a rule of the spec (a value, a combination of attributes)."""


class ShapeError(InvalidArgumentError):
    """Shapes that do not fit together (scale vs input, zero point vs scale, blocks...)."""


class AxisError(InvalidArgumentError):
    """An axis outside the input's rank."""


class RangeError(InvalidArgumentError):
    """A value outside its allowed range (block_size, num_bits, min > max...)."""


class DTypeError(QuantSpecError, TypeError):
    """A type the spec does not allow here, or a type name nobody knows."""


class UnsupportedError(InvalidArgumentError):
    """A valid request that the chosen version, mode or runtime does not support."""


class OpsetError(UnsupportedError):
    """An attribute or type that the requested ONNX opset did not have."""


class RuntimeUnsupportedError(UnsupportedError):
    """The runtime being reproduced (``compat=``/``kernel=``) has no kernel for this request."""


class ModelError(InvalidArgumentError):
    """A model file that is malformed, truncated, not a model, or breaks the format's rules."""


class TensorFileError(InvalidArgumentError):
    """A tensor file (.npy/.npz/.safetensors) that cannot be read or written as asked."""


class TooLargeError(RangeError, MemoryError):
    """A result (or a copy of an input) too large for this machine's memory, found before anything is
    allocated: the message names the argument, the number of elements and the bytes.  Also a
    ``MemoryError``, so code that catches numpy's keeps working."""


def fail(cls: type[QuantSpecError], argument: str, rule: str, value: Any = ..., *, detail: str = "") -> NoReturn:
    """Raise ``cls(argument, rule, value)``; a one-liner for validation code."""
    raise cls(argument, rule, value, detail=detail)
