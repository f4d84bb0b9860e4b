"""ONNX QuantizeLinear / DequantizeLinear as records: one frozen dataclass per operator, holding its
opset, attributes, scale and zero point.

Calling a record runs :func:`quantspec.onnx.quantize_linear` / :func:`~quantspec.onnx.dequantize_linear`
on an array.  Scales are stored as the values of their ONNX type (``scale_dtype``: float, float16 or
bfloat16), zero points as integers (float types: floats), one per slice of ``axis`` for per-axis
records (a tuple); the record is checked against the operator's rules when it is made.  Blocked
quantization is not a record (use the functions).  The records are the inputs of
:func:`quantspec.equivalent` and :func:`quantspec.translate` (interface: :mod:`quantspec._semantics.oprecord`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._semantics.arrays import as_bool
from .._semantics.oprecord import QuantizerRecord, flat_input
from ..dtypes import qtype
from ..errors import DTypeError, InvalidArgumentError, ShapeError
from .functions import dequantize_linear, quantize_linear
from .plan import COMPAT_MODES, ort_support

__all__ = ["QuantizeLinearOp", "DequantizeLinearOp"]


def _set(obj, **values) -> None:
    for k, v in values.items():
        object.__setattr__(obj, k, v)


def _type_name(value: Any, argument: str) -> str:
    return qtype(value, argument).name


def _values(value: Any, argument: str, dtype: np.dtype, kind: str) -> Any:
    """A scalar or a 1-D sequence as the exact values of ``dtype`` (a Python float / int, or a tuple)."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise DTypeError(argument, "must be a number, not a bool", value)
    try:
        a = np.asarray(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(argument, "must be a number or a 1-D sequence of numbers", value) from None
    if a.dtype.kind not in "fiu" and a.dtype != dtype:
        raise DTypeError(argument, "must hold real numbers", value)
    if a.ndim > 1 or a.size == 0:
        raise ShapeError(argument, "must be a scalar or a non-empty 1-D sequence", value)
    if kind == "int":
        if a.dtype.kind == "f" and not np.all(np.isfinite(a) & (a == np.trunc(a))):
            raise InvalidArgumentError(argument, "must hold integers", value)
        info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
        ints = [int(v) for v in np.atleast_1d(a).tolist()]
        lo, hi = (int(qtype(dtype).qmin), int(qtype(dtype).qmax)) if info is None else (info.min, info.max)
        for v in ints:
            if not lo <= v <= hi:
                raise InvalidArgumentError(argument, f"must lie in [{lo}, {hi}] for {qtype(dtype).name}", v)
        return ints[0] if a.ndim == 0 else tuple(ints)
    with np.errstate(over="ignore"):
        typed = np.atleast_1d(a).astype(dtype).astype(np.float64)
    floats = [float(v) for v in typed.tolist()]
    return floats[0] if a.ndim == 0 else tuple(floats)


def _array(values, dtype) -> np.ndarray:
    return np.asarray(values, np.float64 if np.dtype(dtype).kind == "f" or dtype == qtype("bfloat16").dtype
                      else np.int64).astype(dtype)


def _common(op, argument_scale: str, argument_zp: str, code: Any):
    """Normalise the fields shared by both records; returns (scale array, zero point array or None)."""
    if not isinstance(op.compat, str) or op.compat not in COMPAT_MODES:
        raise InvalidArgumentError("compat", "must be one of " + ", ".join(map(repr, COMPAT_MODES)), op.compat)
    if op.ort_version is not None and op.compat != "onnxruntime":
        raise InvalidArgumentError("ort_version", f"is only meaningful with compat=\"onnxruntime\" (got compat="
                                   f"{op.compat!r})", op.ort_version)
    if op.ort_version is not None:           # a reproduced release (its full version), or InvalidArgumentError
        _set(op, ort_version=ort_support(op.ort_version).version)
    if op.opset is not None and (isinstance(op.opset, bool) or not isinstance(op.opset, (int, np.integer))):
        raise InvalidArgumentError("opset", "must be None (the newest) or an integer", op.opset)
    if isinstance(op.axis, (bool, np.bool_)) or not isinstance(op.axis, (int, np.integer)):
        raise InvalidArgumentError("axis", "must be an integer", op.axis)
    sdt = qtype(op.scale_dtype).dtype
    # an integer scale type (int32 x before opset 23): the values must be integers of that type, not
    # truncated to them (0.05 would become a zero scale)
    scale = _values(op.scale, argument_scale, sdt, "int" if sdt.kind in "iu" else "float")
    ct = qtype(code)
    zp = _values(op.zero_point, argument_zp, ct.dtype, "int" if ct.is_int else "float")
    if isinstance(scale, tuple) and zp is not None and not isinstance(zp, tuple):
        zp = (zp,) * len(scale)
    if isinstance(zp, tuple) and not isinstance(scale, tuple):
        raise ShapeError(argument_zp, f"must be a single value like {argument_scale}", op.zero_point)
    if isinstance(scale, tuple) and isinstance(zp, tuple) and len(zp) != len(scale):
        raise ShapeError(argument_zp, f"must have one value per scale ({len(scale)})", op.zero_point)
    _set(op, scale=scale, zero_point=zp, axis=int(op.axis), opset=None if op.opset is None else int(op.opset))
    s = _array(scale, qtype(op.scale_dtype).dtype)
    z = None if zp is None else _array(zp, ct.dtype)
    return s, z


@dataclass(frozen=True)
class QuantizeLinearOp(QuantizerRecord):
    """ONNX ``QuantizeLinear``: ``y = saturate(x / scale + zero_point)``.

    ``scale``: one value (per-tensor) or one per slice of ``axis`` (per-axis); ``scale_dtype`` its
    ONNX type (None: ``x_dtype``'s, as opsets before 23 require).  ``zero_point``: None (absent) or
    values of the output type.  ``output_dtype``: the output type (None: ONNX's default, uint8).
    ``x_dtype``: the type of the input (float, float16, bfloat16).  ``precision``, ``saturate``,
    ``opset`` (None: the newest), ``compat`` and ``ort_version`` (compat="onnxruntime": the release
    reproduced, None: as :func:`quantspec.onnx.quantize_linear` chooses it) as that function takes them."""

    scale: float | tuple[float, ...]
    zero_point: int | float | tuple | None = None
    output_dtype: str | None = None
    axis: int = 1
    saturate: bool = True
    precision: str | None = None
    opset: int | None = None
    x_dtype: str = "float"
    scale_dtype: str | None = None
    compat: str = "spec"
    ort_version: str | None = None

    spec: ClassVar[str] = "onnx"
    op: ClassVar[str] = "QuantizeLinear"
    kind: ClassVar[str] = "quantize"

    def __post_init__(self):
        x_dtype = _type_name(self.x_dtype, "x_dtype")
        out = _type_name(self.output_dtype, "output_dtype") if self.output_dtype is not None else "uint8"
        _set(self, x_dtype=x_dtype, output_dtype=out,
             scale_dtype=_type_name(self.scale_dtype, "scale_dtype") if self.scale_dtype is not None else x_dtype,
             precision=None if self.precision is None else _type_name(self.precision, "precision"),
             saturate=as_bool(self.saturate, "saturate"))
        s, z = _common(self, "scale", "zero_point", out)
        _set(self, _s=s, _z=z)
        self(np.zeros(s.size if s.ndim else 1, qtype(x_dtype).dtype).reshape(self._probe_shape()))  # the op's checks

    def _probe_shape(self) -> tuple[int, ...]:
        if self._s.ndim == 0:
            return (1,)
        n = self._s.size
        a = self.axis
        return ((n,) + (1,) * (-a - 1)) if a < 0 else ((1,) * a + (n,))

    def _kwargs(self) -> dict:
        kw: dict[str, Any] = dict(axis=self.axis, saturate=self.saturate, precision=self.precision, opset=self.opset,
                                  compat=self.compat, ort_version=self.ort_version)
        if self._z is None and self.output_dtype != "uint8":
            kw["output_dtype"] = self.output_dtype
        return kw

    def __call__(self, x, *, out: np.ndarray | None = None) -> np.ndarray:
        """The codes of ``x`` (:func:`quantspec.onnx.quantize_linear`)."""
        return quantize_linear(x, self._s, self._z, out=out, **self._kwargs())

    input_dtype = property(lambda self: qtype(self.x_dtype).dtype)
    out_dtype = property(lambda self: qtype(self.output_dtype).dtype)
    code_type = property(lambda self: qtype(self.output_dtype))
    channels = property(lambda self: len(self.scale) if isinstance(self.scale, tuple) else 1)

    def channel(self, c: int) -> QuantizeLinearOp:
        if not isinstance(self.scale, tuple):
            return super().channel(c)
        c = self._check_channel(c)
        return QuantizeLinearOp(self.scale[c], None if self.zero_point is None else self.zero_point[c],
                                self.output_dtype, self.axis, self.saturate, self.precision, self.opset, self.x_dtype,
                                self.scale_dtype, self.compat, self.ort_version)

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        return self(x, out=out)

    def grid(self) -> tuple[float, float]:
        zp = 0.0 if self.zero_point is None else float(self._first(self.zero_point))
        return float(self._first(self.scale)), zp

    @staticmethod
    def _first(v):
        return v[0] if isinstance(v, tuple) else v

    def real_range(self) -> tuple[float, float]:
        t = self.code_type
        step, zero = self.grid()
        if not t.is_int:
            return -float(t.qmax) * step, float(t.qmax) * step
        a, b = (float(t.qmin) - zero) * step, (float(t.qmax) - zero) * step
        return (a, b) if a <= b else (b, a)

    def spec_string(self) -> str:
        return self._string({"opset": self.opset, "scale": self.scale, "zero_point": self.zero_point,
                             "output_dtype": self.output_dtype, "axis": self.axis if self.channels > 1 else None,
                             "x_dtype": self.x_dtype if self.x_dtype != "float" else None,
                             "scale_dtype": self.scale_dtype if self.scale_dtype != self.x_dtype else None,
                             "precision": self.precision, "saturate": None if self.saturate else False,
                             "compat": self.compat if self.compat != "spec" else None,
                             "ort_version": self.ort_version})


@dataclass(frozen=True)
class DequantizeLinearOp(QuantizerRecord):
    """ONNX ``DequantizeLinear``: ``y = (x - zero_point) * scale``.

    ``x_dtype``: the type of the codes; ``zero_point``: None or values of that type; ``scale`` /
    ``scale_dtype`` / ``axis`` / ``output_dtype`` (None: the scale's type) / ``opset`` / ``compat`` as
    :func:`quantspec.onnx.dequantize_linear` takes them (``ort_version`` too)."""

    scale: float | tuple[float, ...]
    zero_point: int | float | tuple | None = None
    x_dtype: str = "uint8"
    axis: int = 1
    output_dtype: str | None = None
    opset: int | None = None
    scale_dtype: str = "float"
    compat: str = "spec"
    ort_version: str | None = None

    spec: ClassVar[str] = "onnx"
    op: ClassVar[str] = "DequantizeLinear"
    kind: ClassVar[str] = "dequantize"

    def __post_init__(self):
        x_dtype = _type_name(self.x_dtype, "x_dtype")
        _set(self, x_dtype=x_dtype, scale_dtype=_type_name(self.scale_dtype, "scale_dtype"),
             output_dtype=None if self.output_dtype is None else _type_name(self.output_dtype, "output_dtype"))
        s, z = _common(self, "scale", "zero_point", x_dtype)
        _set(self, _s=s, _z=z)
        probe = np.zeros(s.size if s.ndim else 1, qtype(x_dtype).dtype)
        n = s.size
        a = self.axis
        shape = (1,) if s.ndim == 0 else ((n,) + (1,) * (-a - 1)) if a < 0 else ((1,) * a + (n,))
        self(probe.reshape(shape))

    def __call__(self, x, *, out: np.ndarray | None = None) -> np.ndarray:
        """The values of the codes ``x`` (:func:`quantspec.onnx.dequantize_linear`)."""
        return dequantize_linear(x, self._s, self._z, axis=self.axis, output_dtype=self.output_dtype,
                                 opset=self.opset, compat=self.compat, ort_version=self.ort_version, out=out)

    input_dtype = property(lambda self: qtype(self.x_dtype).dtype)
    out_dtype = property(lambda self: qtype(self.output_dtype or self.scale_dtype).dtype)
    code_type = property(lambda self: qtype(self.x_dtype))
    channels = property(lambda self: len(self.scale) if isinstance(self.scale, tuple) else 1)

    def channel(self, c: int) -> DequantizeLinearOp:
        if not isinstance(self.scale, tuple):
            return super().channel(c)
        c = self._check_channel(c)
        return DequantizeLinearOp(self.scale[c], None if self.zero_point is None else self.zero_point[c], self.x_dtype,
                                  self.axis, self.output_dtype, self.opset, self.scale_dtype, self.compat,
                                  self.ort_version)

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        return self(flat_input(x, None), out=out)

    def grid(self) -> tuple[float, float]:
        s = self.scale[0] if isinstance(self.scale, tuple) else self.scale
        z = self.zero_point[0] if isinstance(self.zero_point, tuple) else self.zero_point
        return float(s), 0.0 if z is None else float(z)

    def real_range(self) -> tuple[float, float]:
        t = self.code_type
        out = np.empty(2, self.out_dtype)
        self.channel(0).run(np.array([t.qmin, t.qmax]).astype(t.dtype), out)
        return float(out[0]), float(out[1])

    def spec_string(self) -> str:
        return self._string({"opset": self.opset, "scale": self.scale, "zero_point": self.zero_point,
                             "x_dtype": self.x_dtype, "axis": self.axis if self.channels > 1 else None,
                             "scale_dtype": self.scale_dtype if self.scale_dtype != "float" else None,
                             "output_dtype": self.output_dtype,
                             "compat": self.compat if self.compat != "spec" else None,
                             "ort_version": self.ort_version})
