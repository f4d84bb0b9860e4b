"""LiteRT QUANTIZE / DEQUANTIZE as records: one frozen dataclass per operator, holding its
:class:`~quantspec.litert.QuantParams`.

Calling a record runs :func:`quantspec.litert.quantize` / :func:`~quantspec.litert.dequantize` on an
array.  The records are the inputs of :func:`quantspec.equivalent` and :func:`quantspec.translate`
(interface: :mod:`quantspec._semantics.oprecord`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .._semantics.oprecord import QuantizerRecord
from ..dtypes import qtype
from ..errors import DTypeError, RangeError
from .params import QuantParams, check_params, dequantize, quantize

__all__ = ["QuantizeOp", "DequantizeOp"]

_DEQUANTIZE_INPUTS = ("int8", "uint8", "int16", "uint16", "int32")


def _params(params) -> QuantParams:
    if isinstance(params, QuantParams):
        return check_params(params)
    if isinstance(params, (tuple, list)) and 1 <= len(params) <= 3:
        return check_params(QuantParams(*params))
    raise DTypeError("params", "must be a quantspec.litert.QuantParams (or a (scale, zero_point[, "
                     "quantized_dimension]) tuple)", type(params).__name__)


class _LiteRTRecord(QuantizerRecord):
    spec: ClassVar[str] = "litert"

    @property
    def channels(self) -> int:
        return len(self.params)

    def _channel_params(self, c: int) -> QuantParams:
        c = self._check_channel(c)
        return QuantParams(self.params.scale[c], self.params.zero_point[c])

    def grid(self) -> tuple[float, float]:
        return float(self.params.scale[0]), float(self.params.zero_point[0])

    def _fields(self) -> dict:
        p = self.params
        if p.per_axis:
            return {"scale": tuple(float(s) for s in p.scale), "zero_point": tuple(int(z) for z in p.zero_point),
                    "quantized_dimension": p.quantized_dimension}
        return {"scale": float(p.scale[0]), "zero_point": int(p.zero_point[0])}


@dataclass(frozen=True)
class QuantizeOp(_LiteRTRecord):
    """LiteRT ``QUANTIZE`` (float32 -> int8) with its output's :class:`QuantParams`:
    ``clamp(round_half_away(x / scale) + zero_point, -128, 127)`` (:func:`quantspec.litert.quantize`).
    ``QuantizeOp(QuantParams(0.05, -3))``, or ``QuantizeOp((0.05, -3))``."""

    params: QuantParams

    op: ClassVar[str] = "QUANTIZE"
    kind: ClassVar[str] = "quantize"

    def __post_init__(self):
        p = _params(self.params)
        lo, hi = p._zp_span
        if lo < -128 or hi > 127:
            raise RangeError("params.zero_point", "must lie in [-128, 127] for int8", hi if hi > 127 else lo)
        object.__setattr__(self, "params", p)

    def __call__(self, x, *, out: np.ndarray | None = None) -> np.ndarray:
        return quantize(x, self.params, out=out)

    input_dtype = property(lambda self: np.dtype(np.float32))
    out_dtype = property(lambda self: np.dtype(np.int8))
    code_type = property(lambda self: qtype("int8"))

    def channel(self, c: int) -> QuantizeOp:
        return super().channel(c) if not self.params.per_axis else QuantizeOp(self._channel_params(c))

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        return self(x, out=out)

    def real_range(self) -> tuple[float, float]:
        s, z = self.grid()
        return (-128 - z) * s, (127 - z) * s

    def spec_string(self) -> str:
        return self._string(self._fields())


@dataclass(frozen=True)
class DequantizeOp(_LiteRTRecord):
    """LiteRT ``DEQUANTIZE`` of codes of type ``input_dtype`` (int8 by default) with their
    :class:`QuantParams` (:func:`quantspec.litert.dequantize`), to float32."""

    params: QuantParams
    input_dtype_name: str = "int8"

    op: ClassVar[str] = "DEQUANTIZE"
    kind: ClassVar[str] = "dequantize"

    def __post_init__(self):
        object.__setattr__(self, "params", _params(self.params))
        t = qtype(self.input_dtype_name, "input_dtype_name")
        if t.name not in _DEQUANTIZE_INPUTS:
            raise DTypeError("input_dtype_name", "must be one of " + ", ".join(_DEQUANTIZE_INPUTS), t.name)
        object.__setattr__(self, "input_dtype_name", t.name)
        self(np.zeros(1 if not self.params.per_axis else (1,) * self.params.quantized_dimension
                      + (len(self.params),), t.dtype))

    def __call__(self, q, *, out: np.ndarray | None = None) -> np.ndarray:
        return dequantize(q, self.params, out=out)

    input_dtype = property(lambda self: qtype(self.input_dtype_name).dtype)
    out_dtype = property(lambda self: np.dtype(np.float32))
    code_type = property(lambda self: qtype(self.input_dtype_name))

    def channel(self, c: int) -> DequantizeOp:
        if not self.params.per_axis:
            return super().channel(c)
        return DequantizeOp(self._channel_params(c), self.input_dtype_name)

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        return self(x, out=out)

    def real_range(self) -> tuple[float, float]:
        t = self.code_type
        s, z = self.grid()
        return (float(t.qmin) - z) * s, (float(t.qmax) - z) * s

    def spec_string(self) -> str:
        f = self._fields()
        if self.input_dtype_name != "int8":
            f["input_dtype"] = self.input_dtype_name
        return self._string(f)
