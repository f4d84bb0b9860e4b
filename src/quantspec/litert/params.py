"""LiteRT quantization parameters (notes/litert.md §4; spec: litert-8bit-quantization-spec.md).

A real value ``r`` and its quantized code ``q`` are related by ``r = scale * (q - zero_point)``,
with one (scale, zero_point) pair per tensor, or one per slice of ``quantized_dimension`` for
per-axis tensors (weights, and the biases that go with them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import AxisError, InvalidArgumentError, ShapeError

__all__ = ["QuantParams"]


@dataclass(frozen=True, eq=False)
class QuantParams:
    """Quantization parameters of one LiteRT tensor.

    ``scale`` is a 1-D float32 array and ``zero_point`` a 1-D int64 array of the same length (a
    single zero point given with several scales is repeated); ``quantized_dimension`` is the axis the
    entries run along when there is more than one.  Scalars and lists are accepted and converted.
    """

    scale: np.ndarray
    zero_point: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    quantized_dimension: int = 0

    def __post_init__(self):
        s = np.atleast_1d(np.asarray(self.scale, dtype=np.float32)).copy()
        z = np.atleast_1d(np.asarray(self.zero_point))
        if s.ndim != 1 or s.size == 0:
            raise ShapeError("scale", "must be a scalar or a non-empty 1-D array", self.scale)
        if z.dtype.kind == "f":
            if not np.all(np.isfinite(z)) or np.any(z != np.trunc(z)):
                raise InvalidArgumentError("zero_point", "must hold integers", self.zero_point)
        elif z.dtype.kind not in "iu":
            raise InvalidArgumentError("zero_point", "must hold integers", self.zero_point)
        z = z.astype(np.int64)
        if z.ndim != 1:
            raise ShapeError("zero_point", "must be a scalar or a 1-D array", self.zero_point)
        if z.size == 1 and s.size > 1:
            z = np.repeat(z, s.size)
        if z.size != s.size:
            raise ShapeError("zero_point", f"must have one entry per scale ({s.size})", self.zero_point)
        if isinstance(self.quantized_dimension, bool) or not isinstance(self.quantized_dimension, (int, np.integer)) \
                or self.quantized_dimension < 0:
            raise AxisError("quantized_dimension", "must be a non-negative integer", self.quantized_dimension)
        s.setflags(write=False)
        z.setflags(write=False)
        object.__setattr__(self, "scale", s)
        object.__setattr__(self, "zero_point", z)
        object.__setattr__(self, "quantized_dimension", int(self.quantized_dimension))

    @property
    def per_axis(self) -> bool:
        """True when there is more than one (scale, zero_point) pair."""
        return self.scale.size > 1

    def __len__(self) -> int:
        return int(self.scale.size)

    def __eq__(self, other) -> bool:
        if not isinstance(other, QuantParams):
            return NotImplemented
        return (self.quantized_dimension == other.quantized_dimension
                and self.scale.tobytes() == other.scale.tobytes()
                and self.zero_point.tobytes() == other.zero_point.tobytes())

    def __hash__(self) -> int:
        return hash((self.scale.tobytes(), self.zero_point.tobytes(), self.quantized_dimension))

    def __repr__(self) -> str:
        if self.per_axis:
            return (f"QuantParams(scale=<{self.scale.size} values>, zero_point=<{self.zero_point.size} values>, "
                    f"quantized_dimension={self.quantized_dimension})")
        return f"QuantParams(scale={float(self.scale[0])!r}, zero_point={int(self.zero_point[0])})"
