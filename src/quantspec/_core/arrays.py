"""Turning user arguments into numpy arrays, with errors that name the argument."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import QType, qtype
from ..errors import DTypeError, InvalidArgumentError

__all__ = ["as_array", "is_python_scalar", "as_int", "as_bool", "native"]


def native(a: np.ndarray) -> np.ndarray:
    """The array in native byte order (a big-endian float32 is still float32): the kernels read the
    bytes in this machine's order."""
    return a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("="))


def is_python_scalar(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def as_array(value: Any, argument: str, default: QType | str | None = None) -> np.ndarray:
    """``value`` as a numpy array.

    numpy arrays and numpy scalars keep their dtype.  Python scalars and (nested) lists take the
    ``default`` type when one is given (the spec's default type for that argument), else numpy's.
    Object, string and complex data are refused with a :class:`DTypeError`.
    """
    if isinstance(value, np.ndarray):
        a = value
    elif isinstance(value, np.generic):
        a = np.asarray(value)
    else:
        if value is None:
            raise InvalidArgumentError(argument, "is required", value)
        if isinstance(value, bool):
            raise DTypeError(argument, "must be numeric, not a bool", value)
        try:
            if default is not None:
                t = qtype(default)
                probe = np.asarray(value)
                if probe.dtype.kind not in "biuf":
                    raise DTypeError(argument, "must be numeric", value)
                if t.kind == "int" and probe.dtype.kind == "f":
                    if not np.all(np.isfinite(probe)) or np.any(probe != np.trunc(probe)):
                        raise DTypeError(argument, f"must hold integers (it becomes {t.name})", value)
                if t.kind == "int" and probe.size and (probe.min() < t.qmin or probe.max() > t.qmax):
                    raise InvalidArgumentError(argument, f"must lie in [{t.qmin}, {t.qmax}] for {t.name}", value)
                a = probe.astype(t.dtype)
            else:
                a = np.asarray(value)
        except (DTypeError, InvalidArgumentError):
            raise
        except Exception:
            raise DTypeError(argument, "must be a numeric array or scalar", value) from None
    if a.dtype.kind in "OUScMm":
        raise DTypeError(argument, "must be a numeric array", str(a.dtype))
    if a.dtype.kind == "V":
        # ml_dtypes types have kind 'V'; accept exactly those quantspec knows
        qtype(a.dtype, argument)
    return a


def as_int(value: Any, argument: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise InvalidArgumentError(argument, "must be an integer", value)
    return int(value)


def as_bool(value: Any, argument: str) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
        return bool(value)
    raise InvalidArgumentError(argument, "must be a bool (or 0/1)", value)
