"""What every quantizer record (``quantspec.tf.QuantizeV2Op``, ``quantspec.onnx.QuantizeLinearOp``,
``quantspec.litert.QuantizeOp``, ...) has in common.

A quantizer record is a small frozen dataclass holding one operator's attributes and parameters in
its own spec's terms.  Calling it runs the spec's public function (``quantspec.tf.quantize``,
``quantspec.onnx.quantize_linear``, ``quantspec.litert.quantize``, ...) on an array: no arithmetic
of its own.  :mod:`quantspec.equiv` compares two records over every input of a type, and
:func:`quantspec.translate` turns a record of one spec into the closest record of another; both
reach a record only through the interface below.

``kind``
    ``"quantize"`` (float -> integer codes), ``"dequantize"`` (codes -> float) or ``"fake"`` (float
    -> float, a simulated quantizer: FakeQuant, QuantizeAndDequantize).  A fake quantizer's output
    is ``k * step`` for an integer ``k``; its *code* is ``k + zero_code``, read back from the output
    as ``rint(y / step) + zero_code`` (:meth:`QuantizerRecord.decode`): exact, because ``|k| <= 2^16``
    and the float32 product ``k * step`` is within half an ulp of the real one, unless that
    product is subnormal and flushed to zero (ranges narrower than about 1e-33).
``input_dtype``
    The type the record takes: float32 (or float16 / bfloat16 for ONNX) for quantizers, the code
    type for dequantizers.
``code_type``
    The :class:`quantspec.dtypes.QType` of the codes.
``channels`` / ``channel(c)``
    1 for per-tensor records; a per-axis record has one entry per slice of its axis, and
    ``channel(c)`` is the record of slice ``c`` alone (same class, one channel).
``run(x, out)``
    Fills ``out`` (1-D, ``out_dtype``) from the 1-D array ``x`` of ``input_dtype``, for a record with
    one channel: the spec's public function on that array.
``real_range()``
    ``(lo, hi)``: the real values the codes cover (beyond them a quantizer saturates).
``grid()``
    ``(step, zero)`` as Python floats: ``real(q) ~= step * (q - zero)``, the affine map the codes
    stand for (``zero`` may be fractional: TensorFlow MIN_COMBINED with a signed type maps 0.0
    between two codes).
``spec_string()``
    The record in the one-line syntax of :mod:`quantspec.equiv.specstring`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ..errors import DTypeError, InvalidArgumentError, ShapeError

__all__ = ["QuantizerRecord", "f32", "f32_values", "fmt_value", "flat_input"]


def f32(value: Any, argument: str) -> float:
    """A real number as the float32 value a spec stores it as (a Python float)."""
    if isinstance(value, (bool, np.bool_)):
        raise DTypeError(argument, "must be a number, not a bool", value)
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidArgumentError(argument, "must be a real number", value) from None
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def f32_values(value: Any, argument: str) -> float | tuple[float, ...]:
    """A scalar, or a 1-D sequence / array of reals, as float32 values: a float or a tuple of them."""
    if isinstance(value, (list, tuple, np.ndarray)):
        a = np.asarray(value)
        if a.ndim == 0:
            return f32(a[()], argument)
        if a.ndim != 1 or a.size == 0:
            raise ShapeError(argument, "must be a scalar or a non-empty 1-D sequence", value)
        return tuple(f32(v, argument) for v in a.tolist())
    return f32(value, argument)


def fmt_value(v: Any) -> str:
    """A number or a tuple of numbers as the spec string writes it (shortest round-trip form;
    a tuple as comma-separated values)."""
    if isinstance(v, tuple):
        return ",".join(fmt_value(e) for e in v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v) and abs(v) < 1e16:
            return str(int(v))
        with np.errstate(over="ignore"):
            short = np.float32(v)
        return str(short) if float(short) == v else repr(v)     # the shortest float32 spelling
    return str(v)


def flat_input(x: np.ndarray, ndim_axis: int | None, last: bool = False) -> np.ndarray:
    """A 1-D array as the input of a one-channel per-axis call: the channel axis (``ndim_axis``, the
    record's axis) of size 1 and the elements along another axis; ``last``: the channel on the last
    axis (``x.reshape(-1, 1)``)."""
    if ndim_axis is None:
        return x
    if last:
        return x.reshape(-1, 1)
    if ndim_axis < 0:
        return x.reshape((x.size,) + (1,) * (-ndim_axis))
    return x.reshape((1,) * (ndim_axis + 1) + (x.size,))


class QuantizerRecord:
    """Mix-in of the quantizer records; see the module docstring for the interface."""

    spec: ClassVar[str] = ""
    op: ClassVar[str] = ""
    kind: ClassVar[str] = "quantize"

    # -- to be provided by each record ------------------------------------------------------------
    @property
    def input_dtype(self) -> np.dtype:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def out_dtype(self) -> np.dtype:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def code_type(self):  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def channels(self) -> int:
        return 1

    def channel(self, c: int):
        if self.channels != 1 or c != 0:
            raise NotImplementedError
        return self

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def real_range(self) -> tuple[float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def grid(self) -> tuple[float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def decode(self) -> tuple[float, int]:
        """Fake quantizers: ``(step, zero_code)``, the code of an output ``y`` being
        ``rint(y / step) + zero_code``."""
        raise NotImplementedError

    def spec_string(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- shared -----------------------------------------------------------------------------------
    def _check_channel(self, c: int) -> int:
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, np.integer)) or not 0 <= c < self.channels:
            raise InvalidArgumentError("c", f"must be a channel index in [0, {self.channels})", c)
        return int(c)

    def _string(self, fields: dict) -> str:
        parts = [f"{self.spec}:{self.op}"]
        parts += [f"{k}={fmt_value(v)}" for k, v in fields.items() if v is not None]
        return " ".join(parts)

    def __str__(self) -> str:
        return self.spec_string()
