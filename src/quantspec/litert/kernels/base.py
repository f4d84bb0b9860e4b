"""The shape every LiteRT kernel of quantspec has: prepare, then compute.

Like LiteRT's own kernels (``tflite/kernels/*.cc``), a kernel has two steps:

- ``prepare(inputs, outputs, options)`` sees what is known before any data flows — each tensor's
  shape, type, quantization parameters and, for constant tensors (weights, bias, shape/axis/padding
  tensors), its data — and the operator's options.  It checks what LiteRT checks, computes every
  parameter that depends only on those (multipliers and shifts, lookup tables, activation clamps,
  padding, precomputed weight sums...) and returns them in a frozen dataclass.
- ``compute(prepared, arrays)`` is a pure function of that record and the input arrays, returning
  the list of output arrays.  No Python loop over output pixels.

``options`` is a mapping keyed by the option field names of the LiteRT flatbuffer schema in
snake_case (``padding``, ``stride_w``, ``stride_h``, ``dilation_w_factor``, ``depth_multiplier``,
``fused_activation_function``, ``keep_dims``, ``align_corners``, ``half_pixel_centers``, ``beta``,
``axis``, ``batch_dims``, ``block_size``, ``squeeze_dims``, ``new_shape``, ``output_type``, ...).
Enum values are their schema names as strings (``"SAME"``, ``"RELU6"``, ``"INT32"``); a missing key
means the schema's default.  The model loader produces exactly this mapping, and tests build models
from it, so a kernel never sees flatbuffer objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..._semantics.rounding import half_away_from_zero
from ...dtypes import QType
from ...errors import InvalidArgumentError, UnsupportedError
from ..params import QuantParams

__all__ = ["TensorSpec", "Kernel", "register", "REGISTRY", "activation_range"]


@dataclass(frozen=True, eq=False)
class TensorSpec:
    """What a kernel's prepare step knows about one tensor."""

    shape: tuple[int, ...]
    dtype: QType
    params: QuantParams | None = None
    data: np.ndarray | None = None  # constant data, typed and shaped; None for run-time tensors
    name: str = ""

    @property
    def is_constant(self) -> bool:
        return self.data is not None


class Kernel:
    """Base class of a LiteRT builtin-op kernel.  Subclasses set ``name`` (the builtin operator
    name, e.g. ``"CONV_2D"``) and implement :meth:`prepare` and :meth:`compute`."""

    name: ClassVar[str] = ""

    def prepare(self, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec],
                options: Mapping[str, Any]) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def compute(self, prepared: Any, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:  # pragma: no cover
        raise NotImplementedError

    def __call__(self, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec],
                 options: Mapping[str, Any], arrays: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        """Prepare and compute in one call (convenient for one-off use and tests)."""
        return self.compute(self.prepare(inputs, outputs, options), arrays)

    def __repr__(self) -> str:
        return f"<quantspec LiteRT kernel {self.name}>"


#: builtin operator name -> kernel instance; filled by :func:`register` as kernel modules import
REGISTRY: dict[str, Kernel] = {}


def register(cls: type[Kernel]) -> type[Kernel]:
    """Class decorator: instantiate the kernel and enter it in :data:`REGISTRY` under its name."""
    if not cls.name or cls.name in REGISTRY:
        raise RuntimeError(f"kernel name {cls.name!r} is empty or registered twice")
    REGISTRY[cls.name] = cls()
    return cls


#: fused activation -> the real-valued interval it clamps to (None = that side unbounded)
FUSED_ACTIVATIONS: dict[str, tuple[float | None, float | None]] = {
    "NONE": (None, None),
    "RELU": (0.0, None),
    "RELU6": (0.0, 6.0),
    "RELU_N1_TO_1": (-1.0, 1.0),
}


def activation_range(fused: str, params: QuantParams, dtype: QType) -> tuple[int, int]:
    """``CalculateActivationRangeQuantized`` (K/kernel_util.cc): the integer clamp of a fused
    activation on an output with ``params`` of type ``dtype``.  Each bound is
    ``zero_point + TfLiteRound(bound / scale)`` computed in float32, then clipped to the type's range."""
    if fused not in FUSED_ACTIVATIONS:
        raise UnsupportedError("fused_activation_function", "must be one of " + ", ".join(FUSED_ACTIVATIONS)
                               + " for a quantized kernel", fused)
    lo, hi = int(dtype.qmin), int(dtype.qmax)
    low, high = FUSED_ACTIVATIONS[fused]
    scale = np.float32(params.scale[0])
    zp = int(params.zero_point[0])

    def quantize(f: float) -> int:
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            tmp = half_away_from_zero(np.float32(f) / scale)
        # LiteRT's Quantize() fails Prepare unless tmp fits int32 (compared in float32, so 2^31
        # passes and converts to INT32_MIN on x86); zero_point + q is an int32 addition.
        if not (np.float32(-2.0 ** 31) <= tmp <= np.float32(2.0 ** 31 - 1)):
            error = InvalidArgumentError("fused_activation_function", f"bound {f} / output scale does not fit "
                                         "int32: LiteRT rejects this model at prepare (CalculateActivationRange"
                                         "Quantized)", float(scale))
            error.limit = "activation-range"
            raise error
        q = -(1 << 31) if tmp >= 2.0 ** 31 else int(tmp)
        return ((zp + q + (1 << 31)) % (1 << 32)) - (1 << 31)

    if low is not None:
        lo = max(lo, quantize(low))
    if high is not None:
        hi = min(hi, quantize(high))
    return lo, hi
