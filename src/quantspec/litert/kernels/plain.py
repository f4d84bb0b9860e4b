"""The unquantized (float32, int32, int64, bool) paths of a few ops, for the scaffolding converter-made
models put around their int8 arithmetic: loop counters and conditions of WHILE and IF subgraphs
(``i + 1``, ``i < n``, ``reduce_sum(x) > 0`` on dequantized values).

These are the plain element-wise ops of the LiteRT reference kernels: ADD, SUB, MUL (with the fused
activation's clamp: ``CalculateActivationRange`` for float and int32), the six comparisons, and SUM
over float32 / int32 (``reference_ops::ReduceGeneric``: each output is the sum of its reduced
elements taken one by one in the input's row-major order, in the input type — float32 rounding
after every addition, int32 wrapping).  int32 arithmetic wraps like the C++ does on x86.

SQUARE on float32 (``K/square.cc``): the converter keeps Keras ``UnitNormalization``'s square in
float32 between a DEQUANTIZE and a QUANTIZE; ``x * x``, one IEEE product, the same in every
resolver.

Each op keeps one kernel in the registry: :class:`TypeDispatch` wraps the quantized kernel and
hands the model to the plain kernel when the op's first input is not a quantized type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import DTypeError, UnsupportedError
from . import _common as c
from . import comparisons, elementwise, reduce  # noqa: F401 - the quantized kernels this module wraps
from .base import REGISTRY, Kernel, register
from .reduce import resolve_axes

__all__ = ["TypeDispatch", "PlainBinary", "PlainComparison", "PlainSum", "Square", "PLAIN_TYPES"]

#: the unquantized types the plain paths take
PLAIN_TYPES = ("float", "int32", "int64", "bool")
_QUANTIZED = ("int8", "uint8", "int16", "int4")


@dataclass(frozen=True, eq=False)
class Tagged:
    plain: bool
    prepared: Any


class TypeDispatch(Kernel):
    """One registry entry, two kernels: the quantized one, and ``plain`` for unquantized types."""

    def __init__(self, name: str, quantized: Kernel, plain: Kernel):
        self.name = name                     # type: ignore[misc]
        self.quantized = quantized
        self.plain = plain

    def prepare(self, inputs, outputs, options):
        first = next((t for t in inputs if t is not None), None)
        if first is not None and first.dtype.name in PLAIN_TYPES:
            return Tagged(True, self.plain.prepare(inputs, outputs, options))
        return Tagged(False, self.quantized.prepare(inputs, outputs, options))

    def compute(self, prepared: Tagged, arrays):
        return (self.plain if prepared.plain else self.quantized).compute(prepared.prepared, arrays)

    def __repr__(self) -> str:
        return f"<quantspec LiteRT kernel {self.name} (quantized and {', '.join(PLAIN_TYPES)})>"


@dataclass(frozen=True, eq=False)
class PlainBinaryParams:
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    dtype: np.dtype
    output_shape: tuple[int, ...]
    bounds: tuple[Any, Any] | None


_ACT_BOUNDS = {"NONE": (None, None), "RELU": (0, None), "RELU6": (0, 6), "RELU_N1_TO_1": (-1, 1)}


class PlainBinary(Kernel):
    """ADD / SUB / MUL of two float32, int32 or int64 tensors, with broadcasting."""

    def __init__(self, name: str, ufunc):
        self.name = name                     # type: ignore[misc]
        self.ufunc = ufunc

    def prepare(self, inputs, outputs, options):
        x, y = c.count(self.name, inputs, outputs, 2, names=("input 0", "input 1"))
        c.require_type(self.name, [("input 0", x)], ("float", "int32", "int64"), error=DTypeError)
        c.require_same_type(x, y, "input 1", self.name)
        c.require_same_type(x, outputs[0], "output", self.name)
        fused = c.option(options, "fused_activation_function", "NONE")
        if fused not in _ACT_BOUNDS:
            raise UnsupportedError("options['fused_activation_function']", f"{self.name} supports "
                                   + ", ".join(_ACT_BOUNDS), fused)
        bounds = None if fused == "NONE" else _ACT_BOUNDS[fused]
        shape = c.broadcast_shape(self.name, x.shape, y.shape)
        return PlainBinaryParams((tuple(x.shape), tuple(y.shape)), np.dtype(x.dtype.dtype), shape, bounds)

    def compute(self, p: PlainBinaryParams, arrays):
        x, y = c.check_arrays(self.name, arrays, [(0, p.shapes[0], p.dtype), (1, p.shapes[1], p.dtype)])
        with np.errstate(all="ignore"):
            z = self.ufunc(x, y).astype(p.dtype)
        if p.bounds is not None:
            lo, hi = p.bounds
            if lo is not None:
                z = np.maximum(z, np.asarray(lo, p.dtype))
            if hi is not None:
                z = np.minimum(z, np.asarray(hi, p.dtype))
        return [np.asarray(z, p.dtype).reshape(p.output_shape)]


class PlainComparison(Kernel):
    """A comparison of two float32, int32, int64 or bool tensors (bool output)."""

    def __init__(self, name: str, compare):
        self.name = name                     # type: ignore[misc]
        self.compare = compare

    def prepare(self, inputs, outputs, options):
        x, y = c.count(self.name, inputs, outputs, 2, names=("input 0", "input 1"))
        c.require_type(self.name, [("input 0", x)], PLAIN_TYPES, error=DTypeError)
        c.require_same_type(x, y, "input 1", self.name)
        shape = c.broadcast_shape(self.name, x.shape, y.shape)
        return PlainBinaryParams((tuple(x.shape), tuple(y.shape)), np.dtype(x.dtype.dtype), shape, None)

    def compute(self, p: PlainBinaryParams, arrays):
        x, y = c.check_arrays(self.name, arrays, [(0, p.shapes[0], p.dtype), (1, p.shapes[1], p.dtype)])
        return [np.asarray(self.compare(x, y), bool).reshape(p.output_shape)]


@dataclass(frozen=True, eq=False)
class PlainSumParams:
    shape: tuple[int, ...]
    dtype: np.dtype
    axes: tuple[int, ...] | None
    keep_dims: bool
    axis_shape: tuple[int, ...]


class PlainSum(Kernel):
    """SUM of float32 or int32 values, added one by one in row-major order (``ReduceGeneric``)."""

    name = "SUM"

    def prepare(self, inputs, outputs, options):
        x, axis = c.count(self.name, inputs, outputs, 2, names=("input", "axis"))
        c.require_type(self.name, [("input", x)], ("float", "int32"), error=DTypeError)
        c.require_type(self.name, [("axis", axis)], ("int32",), error=DTypeError)
        keep = c.option(options, "keep_dims", False, kind=bool)
        axes = None if axis.data is None else resolve_axes(self.name, axis.data, len(x.shape))
        return PlainSumParams(tuple(x.shape), np.dtype(x.dtype.dtype), axes, keep, tuple(axis.shape))

    def compute(self, p: PlainSumParams, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.dtype)])
        axes = p.axes
        if axes is None:
            axes = resolve_axes(self.name, c.value(arrays, (), 1, "axis"), len(p.shape))
        kept = [d for d in range(x.ndim) if d not in axes]
        reduced = sorted(axes)
        moved = np.transpose(x, kept + reduced).reshape(-1 if kept else 1, int(np.prod([x.shape[d] for d in reduced],
                                                                                    dtype=np.int64)))
        acc = np.zeros(moved.shape[0], p.dtype)
        with np.errstate(all="ignore"):
            for k in range(moved.shape[1]):                 # one rounding (or wrap) per addition, in order
                acc = (acc + moved[:, k]).astype(p.dtype)
        shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if p.keep_dims else \
            tuple(x.shape[d] for d in kept)
        return [acc.reshape(shape)]


def _install() -> None:
    plain = {"ADD": PlainBinary("ADD", np.add), "SUB": PlainBinary("SUB", np.subtract),
             "MUL": PlainBinary("MUL", np.multiply),
             "LESS": PlainComparison("LESS", np.less), "LESS_EQUAL": PlainComparison("LESS_EQUAL", np.less_equal),
             "GREATER": PlainComparison("GREATER", np.greater),
             "GREATER_EQUAL": PlainComparison("GREATER_EQUAL", np.greater_equal),
             "EQUAL": PlainComparison("EQUAL", np.equal), "NOT_EQUAL": PlainComparison("NOT_EQUAL", np.not_equal),
             "SUM": PlainSum()}
    for name, kernel in plain.items():
        current = REGISTRY.get(name)
        if current is not None and not isinstance(current, TypeDispatch):
            REGISTRY[name] = TypeDispatch(name, current, kernel)


_install()


@register
class Square(Kernel):
    """SQUARE on float32: ``x * x``."""

    name = "SQUARE"

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        c.require_type(self.name, [("input", x)], ("float",), error=DTypeError)
        c.require_same_type(x, outputs[0], "output", self.name)
        return tuple(int(d) for d in x.shape)

    def compute(self, p, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p, np.dtype(np.float32))])
        with np.errstate(all="ignore"):
            return [(x * x).astype(np.float32)]
