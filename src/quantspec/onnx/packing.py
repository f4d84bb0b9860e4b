"""ONNX TensorProto ``raw_data`` layout of quantized tensors (ONNX ``TensorProto`` packing).

:func:`pack` gives the bytes ``onnx.numpy_helper.from_array(array).raw_data`` holds: the 4-, 2- and
6-bit types bit-packed LSB first, flat over the whole tensor (:mod:`quantspec._semantics.packing`); every
other type its little-endian element bytes (float8 and bfloat16 as their bit patterns).
:func:`unpack` is the inverse.
"""

from __future__ import annotations

from typing import Any

import math

import numpy as np

from .._semantics.arrays import check_fits, native
from .._semantics.packing import pack_codes, packed_size, unpack_codes
from ..dtypes import qtype
from ..errors import DTypeError, InvalidArgumentError, ShapeError

__all__ = ["pack", "unpack"]


def pack(array: Any) -> bytes:
    """``array`` in ONNX raw_data layout."""
    if not isinstance(array, (np.ndarray, np.generic)):
        raise DTypeError("array", "must be a numpy array of a quantized type (a list carries no type)",
                         type(array).__name__)
    a = np.asarray(array)
    a = native(a)
    t = qtype(a.dtype, "array")
    check_fits(a.shape, a.dtype.itemsize, "array", "its bytes")
    if t.is_packed:
        return pack_codes(np.ascontiguousarray(a).view(np.uint8), t.bits)
    return np.ascontiguousarray(a).view(t.storage).astype(t.storage.newbyteorder("<"), copy=False).tobytes()


def unpack(data: bytes | bytearray | memoryview, dtype: Any, shape: Any) -> np.ndarray:
    """The array of type ``dtype`` and ``shape`` whose raw_data is ``data``."""
    t = qtype(dtype, "dtype")
    try:
        dims = tuple(shape if isinstance(shape, (tuple, list)) else tuple(shape))
    except TypeError:
        raise ShapeError("shape", "must be a sequence of non-negative integers", shape) from None
    if any(isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)) or d < 0 for d in dims):
        raise ShapeError("shape", "must be a sequence of non-negative integers", shape)
    shape = tuple(int(d) for d in dims)
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DTypeError("data", "must be bytes", type(data).__name__)
    n = math.prod(shape)                      # Python integers: no int64 overflow
    want = packed_size(n, t.bits) if t.is_packed else n * t.dtype.itemsize
    if len(data) != want:
        raise InvalidArgumentError("data", f"must hold {want} bytes for {n} {t.name} elements", f"{len(data)} bytes")
    if t.is_packed:
        codes = unpack_codes(bytes(data), t.bits, n)
        if t.kind == "int" and t.signed:  # sign-extend the b-bit codes
            half = 1 << (t.bits - 1)
            vals = codes.astype(np.int16)
            vals = np.where(vals >= half, vals - (1 << t.bits), vals).astype(np.int8)
            return vals.astype(t.dtype).reshape(shape)
        if t.kind == "int":
            return codes.astype(t.dtype).reshape(shape)
        return codes.view(t.dtype).reshape(shape).copy()
    return np.frombuffer(bytes(data), dtype=t.storage.newbyteorder("<")).astype(t.storage).view(t.dtype).reshape(shape)
