"""The one table of types quantspec knows.

Every type that a quantization spec names — the quantized types, the high-precision types they
come from, the scale types — is one :class:`QType` row of :data:`TABLE`.  Each row carries the
numbers every spec uses for it (ONNX ``TensorProto.DataType``, LiteRT ``TensorType``, TensorFlow's
quantized type name), its numpy / ml_dtypes dtype, its range and its packing.  Kernels, checkers,
the CLI and the docs read these rows; no range or type number is written anywhere else.

Arrays of sub-byte and 8/6/4-bit float types are *unpacked* numpy arrays of the ml_dtypes type
(one element per byte), the representation ``onnx.numpy_helper.to_array`` returns; the packed
raw layouts live in :mod:`quantspec._semantics.packing`.

:func:`qtype` resolves anything a user may pass (a name in ONNX or numpy spelling, an ONNX type
number, a numpy or ml_dtypes dtype or class, a TensorFlow quantized type name) to its row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from .errors import DTypeError

__all__ = ["QType", "TABLE", "qtype", "by_onnx", "by_tflite", "names"]


@dataclass(frozen=True)
class QType:
    """One type, with everything the specs say about it."""

    name: str                       # canonical name (ONNX spelling, lower case)
    dtype: np.dtype                 # numpy / ml_dtypes dtype of an unpacked array
    bits: int                       # significant bits per element
    kind: str                       # "int", "float" or "bool"
    signed: bool
    onnx: int | None = None         # onnx.TensorProto.DataType number
    tflite: int | None = None       # LiteRT schema TensorType number
    tf: str | None = None           # TensorFlow quantized type name (qint8, ...)
    aliases: tuple[str, ...] = ()   # other spellings accepted by qtype()
    has_inf: bool = False           # float types: has an infinity encoding
    has_nan: bool = False           # float types: has a NaN encoding
    has_negative_zero: bool = False # float types: -0.0 is a distinct encoding
    pack: tuple[int, int] = (1, 0)  # (elements, bytes) per packed group; (1, 0) = not packed

    # -- derived ------------------------------------------------------------------------------
    @property
    def is_int(self) -> bool:
        return self.kind == "int"

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_packed(self) -> bool:
        """Sub-byte types that ONNX stores several to a byte (4-, 2- and 6-bit types)."""
        return self.pack[1] != 0

    @property
    def qmin(self) -> int | float:
        """Smallest value: the integer minimum, or the most negative finite float."""
        if self.kind == "int":
            return -(1 << (self.bits - 1)) if self.signed else 0
        if self.kind == "bool":
            return 0
        return float(-ml_dtypes.finfo(self.dtype).max) if self.signed else float(ml_dtypes.finfo(self.dtype).tiny)

    @property
    def qmax(self) -> int | float:
        """Largest value: the integer maximum, or the largest finite float."""
        if self.kind == "int":
            return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1
        if self.kind == "bool":
            return 1
        return float(ml_dtypes.finfo(self.dtype).max)

    @property
    def storage(self) -> np.dtype:
        """The plain numpy integer dtype of the same width holding the bit pattern
        (int8 for int4 / int2, uint8 for uint4 / uint2 and 8/6/4-bit floats)."""
        if self.kind == "int" and self.bits < 8:
            return np.dtype(np.int8 if self.signed else np.uint8)
        if self.kind == "float" and self.bits <= 8:
            return np.dtype(np.uint8)
        if self.name == "bfloat16":
            return np.dtype(np.uint16)
        return self.dtype

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.name

    def __repr__(self) -> str:
        return f"QType({self.name})"


def _row(name, dtype, bits, kind, signed, **kw) -> QType:
    return QType(name=name, dtype=np.dtype(dtype), bits=bits, kind=kind, signed=signed, **kw)


#: Every type, in ONNX TensorProto order.  Aliases: numpy spellings and common short forms.
TABLE: tuple[QType, ...] = (
    _row("float", np.float32, 32, "float", True, onnx=1, tflite=0, aliases=("float32", "f32", "fp32"),
         has_inf=True, has_nan=True, has_negative_zero=True),
    _row("uint8", np.uint8, 8, "int", False, onnx=2, tflite=3, tf="quint8", aliases=("u8",)),
    _row("int8", np.int8, 8, "int", True, onnx=3, tflite=9, tf="qint8", aliases=("i8",)),
    _row("uint16", np.uint16, 16, "int", False, onnx=4, tflite=16, tf="quint16", aliases=("u16",)),
    _row("int16", np.int16, 16, "int", True, onnx=5, tflite=7, tf="qint16", aliases=("i16",)),
    _row("int32", np.int32, 32, "int", True, onnx=6, tflite=2, tf="qint32", aliases=("i32",)),
    _row("int64", np.int64, 64, "int", True, onnx=7, tflite=4, aliases=("i64",)),
    _row("bool", np.bool_, 1, "bool", False, onnx=9, tflite=6),
    _row("float16", np.float16, 16, "float", True, onnx=10, tflite=1, aliases=("half", "f16", "fp16"),
         has_inf=True, has_nan=True, has_negative_zero=True),
    _row("double", np.float64, 64, "float", True, onnx=11, tflite=10, aliases=("float64", "f64", "fp64"),
         has_inf=True, has_nan=True, has_negative_zero=True),
    _row("bfloat16", ml_dtypes.bfloat16, 16, "float", True, onnx=16, tflite=18, aliases=("bf16",),
         has_inf=True, has_nan=True, has_negative_zero=True),
    _row("float8e4m3fn", ml_dtypes.float8_e4m3fn, 8, "float", True, onnx=17, tflite=21,
         aliases=("float8_e4m3fn", "e4m3fn"), has_nan=True, has_negative_zero=True),
    _row("float8e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 8, "float", True, onnx=18,
         aliases=("float8_e4m3fnuz", "e4m3fnuz"), has_nan=True),
    _row("float8e5m2", ml_dtypes.float8_e5m2, 8, "float", True, onnx=19, tflite=22,
         aliases=("float8_e5m2", "e5m2"), has_inf=True, has_nan=True, has_negative_zero=True),
    _row("float8e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 8, "float", True, onnx=20,
         aliases=("float8_e5m2fnuz", "e5m2fnuz"), has_nan=True),
    _row("uint4", ml_dtypes.uint4, 4, "int", False, onnx=21, tflite=20, aliases=("u4",), pack=(2, 1)),
    _row("int4", ml_dtypes.int4, 4, "int", True, onnx=22, tflite=17, aliases=("i4",), pack=(2, 1)),
    _row("float4e2m1", ml_dtypes.float4_e2m1fn, 4, "float", True, onnx=23,
         aliases=("float4_e2m1fn", "float4e2m1fn", "e2m1"), has_negative_zero=True, pack=(2, 1)),
    # e8m0 is unsigned (exponent only): 2^-127 .. 2^127 and NaN.
    _row("float8e8m0", ml_dtypes.float8_e8m0fnu, 8, "float", False, onnx=24,
         aliases=("float8_e8m0fnu", "e8m0"), has_nan=True),
    _row("uint2", ml_dtypes.uint2, 2, "int", False, onnx=25, aliases=("u2",), pack=(4, 1)),
    _row("int2", ml_dtypes.int2, 2, "int", True, onnx=26, tflite=19, aliases=("i2",), pack=(4, 1)),
    _row("float6e2m3", ml_dtypes.float6_e2m3fn, 6, "float", True, onnx=27,
         aliases=("float6_e2m3fn", "float6e2m3fn", "e2m3"), has_negative_zero=True, pack=(4, 3)),
    _row("float6e3m2", ml_dtypes.float6_e3m2fn, 6, "float", True, onnx=28,
         aliases=("float6_e3m2fn", "float6e3m2fn", "e3m2"), has_negative_zero=True, pack=(4, 3)),
)

_BY_NAME: dict[str, QType] = {}
_BY_DTYPE: dict[np.dtype, QType] = {}
_BY_ONNX: dict[int, QType] = {}
_BY_TFLITE: dict[int, QType] = {}
for _t in TABLE:
    for _n in (_t.name, *_t.aliases, *((_t.tf,) if _t.tf else ())):
        assert _n not in _BY_NAME, _n
        _BY_NAME[_n] = _t
    _BY_DTYPE[_t.dtype] = _t
    if _t.onnx is not None:
        _BY_ONNX[_t.onnx] = _t
    if _t.tflite is not None:
        _BY_TFLITE[_t.tflite] = _t
del _t, _n


def names() -> list[str]:
    """Canonical names of every known type."""
    return [t.name for t in TABLE]


def by_onnx(number: int) -> QType:
    try:
        return _BY_ONNX[int(number)]
    except (KeyError, TypeError, ValueError):
        raise DTypeError("type", "is not an ONNX TensorProto data type quantspec knows", number,
                         detail=f"known: {sorted(_BY_ONNX)}") from None


def by_tflite(number: int) -> QType:
    try:
        return _BY_TFLITE[int(number)]
    except (KeyError, TypeError, ValueError):
        raise DTypeError("type", "is not a LiteRT TensorType quantspec knows", number) from None


def qtype(value: Any, argument: str = "dtype") -> QType:
    """Resolve a type given in any accepted form to its :class:`QType` row.

    Accepted: a QType; a name (``"int4"``, ``"float8e4m3fn"``, ``"float8_e4m3fn"``, ``"float"``,
    ``"float32"``, ``"qint8"``, ...; case-insensitive); an ONNX ``TensorProto`` number; a numpy or
    ml_dtypes dtype, dtype class or array-protocol string.  ``argument`` names the caller's
    argument in the error raised for anything else.
    """
    if isinstance(value, QType):
        return value
    if isinstance(value, (bool, np.bool_)):
        raise DTypeError(argument, "must be a type name, an ONNX type number or a dtype", value)
    if isinstance(value, (int, np.integer)):
        if int(value) in _BY_ONNX:
            return _BY_ONNX[int(value)]
        raise DTypeError(argument, "is not an ONNX TensorProto data type number quantspec knows", value,
                         detail=f"known numbers: {sorted(_BY_ONNX)}")
    if isinstance(value, str):
        key = value.strip().lower()
        if key.startswith("tensorproto."):
            key = key[len("tensorproto."):]
        if key in _BY_NAME:
            return _BY_NAME[key]
        raise DTypeError(argument, "is not a type name quantspec knows", value,
                         detail="known names: " + ", ".join(names()))
    try:
        dt = np.dtype(value)
    except Exception:
        raise DTypeError(argument, "must be a type name, an ONNX type number or a dtype", value) from None
    if dt in _BY_DTYPE:
        return _BY_DTYPE[dt]
    raise DTypeError(argument, "is a dtype no quantization spec uses", str(dt))
