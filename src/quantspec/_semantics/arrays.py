"""Turning user arguments into numpy arrays, with errors that name the argument.

:func:`from_foreign` takes arrays of other libraries (torch, JAX, ...) the ecosystem's way — the
DLPack protocol (``__dlpack__``), else ``__array__`` — as numpy arrays over the same memory, where
the data is on the CPU; numpy's own ``from_dlpack`` does not know bfloat16 or the float8 types, so
those are read from the DLPack description directly (:func:`_dlpack_view`).
"""

from __future__ import annotations

import math
import ctypes
from typing import Any

import numpy as np

from ..dtypes import QType, qtype
from ..errors import DTypeError, InvalidArgumentError, TooLargeError

__all__ = ["as_array", "is_python_scalar", "as_int", "as_bool", "native", "check_fits", "memory_limit", "distinct",
           "from_foreign"]


def native(a: np.ndarray, argument: str = "x") -> np.ndarray:
    """The array in native byte order (a big-endian float32 is still float32): the kernels read the
    bytes in this machine's order."""
    if a.dtype.isnative:
        return a
    check_fits(a.shape, a.dtype.itemsize, argument, "its copy in this machine's byte order")
    return a.astype(a.dtype.newbyteorder("="))


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


_MEMORY_LIMIT: list[int] = []


def memory_limit() -> int:
    """The most bytes one array may take here: physical memory plus swap (the kernel refuses, or
    cannot back, more than that), or the container's memory limit (cgroup v2 ``memory.max``) when
    smaller; read once."""
    if not _MEMORY_LIMIT:
        import os

        limit = 0
        try:
            limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            with open("/proc/meminfo") as f:
                for line in f:
                    if line.startswith("SwapTotal:"):
                        limit += int(line.split()[1]) * 1024
        except (ValueError, OSError, AttributeError):
            pass
        try:
            with open("/sys/fs/cgroup/memory.max") as f:
                text = f.read().strip()
            if text.isdigit() and 0 < int(text) < (limit or 1 << 62):
                limit = int(text)
        except OSError:
            pass
        _MEMORY_LIMIT.append(limit if limit > 0 else 1 << 62)
    return _MEMORY_LIMIT[0]


def human_bytes(n: int) -> str:
    for unit, size in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} bytes"


def check_fits(shape: Any, itemsize: int, argument: str = "x", what: str = "the result") -> None:
    """Refuse, before anything is allocated, an array of ``shape`` and ``itemsize`` (``what``: the
    result, or a copy of the argument) larger than this machine's memory: a
    :class:`~quantspec.errors.TooLargeError` naming ``argument``, the elements and the bytes.  A
    broadcast view can declare far more elements than any memory holds."""
    n = math.prod(shape)
    if n * itemsize <= (_MEMORY_LIMIT[0] if _MEMORY_LIMIT else memory_limit()):   # the common case, cheap
        return
    n = int(n)
    nbytes = n * int(itemsize)
    if nbytes > memory_limit():
        raise TooLargeError(argument, f"is too large: {what} would hold {n} elements, {nbytes} bytes "
                            f"({human_bytes(nbytes)}), more than this machine's memory ({human_bytes(memory_limit())})",
                            tuple(int(d) for d in shape))


def distinct(a: np.ndarray) -> np.ndarray:
    """``a`` without the repeats of a broadcast view: each axis of stride 0 cut to length 1.  The same
    values (each as often or less), so a min, max or finiteness scan over it is the scan over ``a``,
    without walking the elements a broadcast view only pretends to hold."""
    if a.size <= 1 or 0 not in a.strides:
        return a
    return a[tuple(slice(0, 1) if st == 0 else slice(None) for st in a.strides)]


# -- arrays of other libraries ----------------------------------------------------------------------
_PLAIN = (np.ndarray, np.generic, int, float, bool, complex, str, bytes, list, tuple, type(None))


def from_foreign(value: Any) -> Any:
    """``value`` as a numpy array sharing its memory when it is another library's array on the CPU
    (an object with ``__dlpack__`` or ``__array__``: a torch tensor, bfloat16 included, a JAX array,
    ...); anything else unchanged (numpy arrays, scalars and lists are taken as they are elsewhere).
    Where neither protocol gives an array (a GPU tensor, a torch tensor that requires grad), the
    object is returned unchanged and the caller's checks refuse it with their usual error."""
    if isinstance(value, _PLAIN):
        return value
    kind = type(value)
    if getattr(kind, "__dlpack__", None) is not None:
        try:
            return np.from_dlpack(value)
        except Exception:
            view = _dlpack_view(value)
            if view is not None:
                return view
    if getattr(kind, "__array__", None) is not None:
        try:
            return np.asarray(value)
        except Exception:
            pass
    return value


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_KDL_CPU = 1
#: DLPack type codes numpy's from_dlpack refuses, and their ml_dtypes types (DLPack 1.1 numbering)
_DL_TYPES = {(4, 16): "bfloat16", (7, 8): "float8_e3m4", (8, 8): "float8_e4m3", (9, 8): "float8_e4m3b11fnuz",
             (10, 8): "float8_e4m3fn", (11, 8): "float8_e4m3fnuz", (12, 8): "float8_e5m2", (13, 8): "float8_e5m2fnuz",
             (14, 8): "float8_e8m0fnu"}


class _Owner:
    """Keeps the DLPack capsule (and with it the producer's tensor) alive as long as the array."""

    def __init__(self, capsule, interface: dict):
        self._capsule = capsule
        self.__array_interface__ = interface


def _dlpack_view(value: Any) -> np.ndarray | None:
    """A numpy array over the memory a legacy DLPack capsule describes, for the dtypes of
    :data:`_DL_TYPES` on the CPU; None for anything else.  The capsule is not consumed: it stays
    alive with the array, and its own destructor releases the producer's tensor afterwards."""
    import ml_dtypes

    try:
        capsule = value.__dlpack__()
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        pointer = get(capsule, b"dltensor")
    except Exception:
        return None
    t = _DLTensor.from_address(pointer)          # DLManagedTensor starts with its DLTensor
    name = _DL_TYPES.get((t.dtype.code, t.dtype.bits))
    if t.device.device_type != _KDL_CPU or t.dtype.lanes != 1 or name is None or not hasattr(ml_dtypes, name):
        return None
    itemsize = t.dtype.bits // 8
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = None if not t.strides else tuple(int(t.strides[i]) * itemsize for i in range(t.ndim))
    data = (t.data or 0) + int(t.byte_offset)
    interface = {"version": 3, "shape": shape, "typestr": f"<u{itemsize}", "data": (data, False), "strides": strides}
    return np.asarray(_Owner(capsule, interface)).view(getattr(ml_dtypes, name))
