"""TensorFlow's quantizers as records: one frozen dataclass per op, holding its attributes.

========================== =========================================================================
record                     calling it runs
========================== =========================================================================
:class:`QuantizeV2Op`      :func:`quantspec.tf.quantize` (returns the codes; ``output_range`` holds
                           output_min / output_max)
:class:`DequantizeOp`      :func:`quantspec.tf.dequantize`
:class:`FakeQuantOp`       ``fake_quant_with_min_max_args`` / ``_vars`` / ``_vars_per_channel``
                           (``variant="args" | "vars" | "per_channel"``)
:class:`QuantizeAndDequantizeOp`  ``quantize_and_dequantize_v2`` / ``_v3`` / ``_v4`` (``version``)
========================== =========================================================================

Ranges are stored as the float32 values TensorFlow holds (a Python float, or a tuple of them for
per-axis records); the attributes are checked when the record is made, with the errors the
functions raise.  The records are the inputs of :func:`quantspec.equivalent` and
:func:`quantspec.translate` (interface: :mod:`quantspec._semantics.oprecord`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .. import dtypes
from .._semantics.oprecord import QuantizerRecord, f32_values, flat_input
from ..errors import InvalidArgumentError, ShapeError, UnsupportedError
from . import _args, spec
from .dequantize_op import dequantize, output_dtype, prepare_dequantize
from .fast import path_fake_quant as fast_path_fake_quant
from .fast import path_qdq as fast_path_qdq
from .qdq import run_plan as run_qdq
from .fake_quant import run_plan as run_fake_quant
from .fake_quant import (plan_fake_quant, fake_quant_with_min_max_args, fake_quant_with_min_max_vars,
                         fake_quant_with_min_max_vars_per_channel)
from .qdq import prepare_qdq, quantize_and_dequantize_v2, quantize_and_dequantize_v3, quantize_and_dequantize_v4
from .quantize_op import output_range, prepare_quantize, quantize

__all__ = ["QuantizeV2Op", "DequantizeOp", "FakeQuantOp", "QuantizeAndDequantizeOp"]


def _set(obj, **values) -> None:
    for k, v in values.items():
        object.__setattr__(obj, k, v)


def _ranges(lo, hi, names: tuple[str, str], per_axis: bool):
    """Both range arguments as float32 values: scalars, or tuples of one length when ``per_axis``."""
    a, b = f32_values(lo, names[0]), f32_values(hi, names[1])
    if per_axis:
        a = a if isinstance(a, tuple) else (a,)
        b = b if isinstance(b, tuple) else (b,)
        if len(a) != len(b):
            raise ShapeError(names[1], f"must have one value per slice, as {names[0]} ({len(a)})", len(b))
    elif isinstance(a, tuple) or isinstance(b, tuple):
        bad = names[0] if isinstance(a, tuple) else names[1]
        raise ShapeError(bad, "must be a single value for a per-tensor record (give an axis for per-axis ranges)",
                         lo if bad == names[0] else hi)
    return a, b


def _axis(axis) -> int | None:
    if axis is None:
        return None
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise InvalidArgumentError("axis", "must be None (per-tensor) or an integer", axis)
    return int(axis)


def _shape_for(axis: int | None, channels: int) -> tuple[int, ...]:
    """The smallest input shape with ``channels`` slices along ``axis``."""
    if axis is None:
        return (1,)
    if axis < 0:
        return (channels,) + (1,) * (-axis - 1)
    return (1,) * axis + (channels,)


def _pick(values, c: int):
    return (values[c],) if isinstance(values, tuple) else values


# -- QuantizeV2 --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuantizeV2Op(QuantizerRecord):
    """TensorFlow ``QuantizeV2`` (``tf.quantization.quantize``) with its attributes.

    ``min_range`` / ``max_range``: floats, or one per slice of ``axis`` (per-axis).  The other fields
    are the op's attributes, as :func:`quantspec.tf.quantize` takes them.  ``op(x)`` returns the
    codes; :attr:`output_range` is ``(output_min, output_max)``."""

    min_range: float | tuple[float, ...]
    max_range: float | tuple[float, ...]
    T: str = "qint8"
    mode: str = "MIN_COMBINED"
    round_mode: str = "HALF_AWAY_FROM_ZERO"
    narrow_range: bool = False
    axis: int | None = None
    ensure_minimum_range: float = 0.01
    kernel: str = "eigen"

    spec: ClassVar[str] = "tf"
    op: ClassVar[str] = "QuantizeV2"
    kind: ClassVar[str] = "quantize"

    def __post_init__(self):
        axis = _axis(self.axis)
        lo, hi = _ranges(self.min_range, self.max_range, ("min_range", "max_range"), axis is not None)
        T = spec.tf_type(self.T)
        mode = _args.choice(self.mode, "mode", spec.MODES)
        round_mode = _args.choice(self.round_mode, "round_mode", spec.ROUND_MODES)
        narrow = _args.flag(self.narrow_range, "narrow_range")
        emr = float(_args.number(self.ensure_minimum_range, "ensure_minimum_range"))
        kernel = _args.kernel_of(self.kernel)
        _set(self, min_range=lo, max_range=hi, T=T.name, mode=mode, round_mode=round_mode, narrow_range=narrow,
             axis=axis, ensure_minimum_range=emr, kernel=kernel)
        n = len(lo) if axis is not None else 1
        plan = prepare_quantize(np.asarray(lo, np.float32), np.asarray(hi, np.float32), T,
                                shape=_shape_for(axis, n), mode=mode, round_mode=round_mode, narrow_range=narrow,
                                axis=axis, ensure_minimum_range=emr, kernel=kernel)
        _set(self, _plan=plan, _T=T)

    def __call__(self, x, *, out: np.ndarray | None = None) -> np.ndarray:
        """The codes of ``x`` (:func:`quantspec.tf.quantize`)."""
        return quantize(x, self.min_range, self.max_range, self.T, mode=self.mode, round_mode=self.round_mode,
                        narrow_range=self.narrow_range, axis=self.axis,
                        ensure_minimum_range=self.ensure_minimum_range, kernel=self.kernel, out=out)[0]

    @property
    def output_range(self) -> tuple[np.ndarray, np.ndarray]:
        """QuantizeV2's ``(output_min, output_max)`` (0-d per-tensor, 1-D per-axis)."""
        return output_range(self._plan)

    # -- quantizer-record interface ------------------------------------------------------------
    input_dtype = property(lambda self: np.dtype(np.float32))
    out_dtype = property(lambda self: self._T.dtype)
    code_type = property(lambda self: self._T.qtype)
    channels = property(lambda self: 1 if self.axis is None else len(self.min_range))

    def channel(self, c: int) -> QuantizeV2Op:
        if self.axis is None:
            return super().channel(c)
        c = self._check_channel(c)
        return QuantizeV2Op(_pick(self.min_range, c), _pick(self.max_range, c), self.T, self.mode, self.round_mode,
                            self.narrow_range, self.axis, self.ensure_minimum_range, self.kernel)

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        self(flat_input(x, self.axis), out=flat_input(out, self.axis))
        return out

    def real_range(self) -> tuple[float, float]:
        return float(self._plan.output_min[0]), float(self._plan.output_max[0])

    def grid(self) -> tuple[float, float]:
        p, T = self._plan, self._T
        lo, hi = float(p.output_min[0]), float(p.output_max[0])
        if p.path == "eigen" and self.mode == "MIN_COMBINED":
            step = (hi - lo) / (float(T.highest) - float(T.lowest))
            half = (float(T.highest) - float(T.lowest) + 1) / 2 if T.signed else 0.0
            return step, -half - lo / step
        if p.path == "eigen" and self.mode == "MIN_FIRST":
            return 1.0 / float(p.scale[0]), -float(p.bias[0])
        if self.mode == "MIN_FIRST":      # oneDNN: rint(x * scale + bias)
            return 1.0 / float(p.scale[0]), -float(p.bias[0])
        return 1.0 / float(p.scale[0]), 0.0

    def spec_string(self) -> str:
        return self._string({"mode": self.mode, "round_mode": self.round_mode if self.mode == "SCALED" else None,
                             "T": self.T, "min": self.min_range, "max": self.max_range,
                             "narrow_range": self.narrow_range or None, "axis": self.axis,
                             "ensure_minimum_range": self.ensure_minimum_range if self.ensure_minimum_range
                             != float(np.float32(0.01)) else None,
                             "kernel": self.kernel if self.kernel != "eigen" else None})


# -- Dequantize --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DequantizeOp(QuantizerRecord):
    """TensorFlow ``Dequantize`` (``tf.quantization.dequantize``) with its attributes; ``op(codes)``
    returns the float32 (or bfloat16) values."""

    min_range: float | tuple[float, ...]
    max_range: float | tuple[float, ...]
    T: str = "qint8"
    mode: str = "MIN_COMBINED"
    narrow_range: bool = False
    axis: int | None = None
    dtype: str = "float32"
    kernel: str = "eigen"

    spec: ClassVar[str] = "tf"
    op: ClassVar[str] = "Dequantize"
    kind: ClassVar[str] = "dequantize"

    def __post_init__(self):
        axis = _axis(self.axis)
        lo, hi = _ranges(self.min_range, self.max_range, ("min_range", "max_range"), axis is not None)
        T = spec.tf_type(self.T)
        mode = _args.choice(self.mode, "mode", spec.MODES)
        narrow = _args.flag(self.narrow_range, "narrow_range")
        dt = output_dtype(self.dtype)
        kernel = _args.kernel_of(self.kernel)
        name = "bfloat16" if dt != np.dtype(np.float32) else "float32"
        _set(self, min_range=lo, max_range=hi, T=T.name, mode=mode, narrow_range=narrow, axis=axis, dtype=name,
             kernel=kernel)
        n = len(lo) if axis is not None else 1
        plan = prepare_dequantize(np.asarray(lo, np.float32), np.asarray(hi, np.float32), T,
                                  shape=_shape_for(axis, n), mode=mode, narrow_range=narrow, axis=axis, dtype=dt,
                                  kernel=kernel)
        _set(self, _plan=plan, _T=T)

    def __call__(self, q, *, out: np.ndarray | None = None) -> np.ndarray:
        """The values of the codes ``q`` (:func:`quantspec.tf.dequantize`)."""
        return dequantize(q, self.min_range, self.max_range, self.T, mode=self.mode, narrow_range=self.narrow_range,
                          axis=self.axis, dtype=self.dtype, kernel=self.kernel, out=out)

    input_dtype = property(lambda self: self._T.dtype)
    out_dtype = property(lambda self: self._plan.dtype)
    code_type = property(lambda self: self._T.qtype)
    channels = property(lambda self: 1 if self.axis is None else len(self.min_range))

    def channel(self, c: int) -> DequantizeOp:
        if self.axis is None:
            return super().channel(c)
        c = self._check_channel(c)
        return DequantizeOp(_pick(self.min_range, c), _pick(self.max_range, c), self.T, self.mode, self.narrow_range,
                            self.axis, self.dtype, self.kernel)

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        self(flat_input(x, self.axis), out=flat_input(out, self.axis))
        return out

    def real_range(self) -> tuple[float, float]:
        """The values of the lowest and the highest code (of the first channel)."""
        T = self._T
        out = np.empty(2, self.out_dtype)
        self.channel(0).run(np.array([T.lowest, T.highest], T.dtype), out)
        return float(out[0]), float(out[1])

    def grid(self) -> tuple[float, float]:
        p = self._plan
        if self.mode == "MIN_COMBINED":
            scale = float(p.scale[0])
            return scale, -float(p.half) - float(p.bias[0]) / scale
        if self.mode == "MIN_FIRST":
            scale = float(p.scale[0])
            return scale, -float(p.bias[0]) / scale
        return float(p.scale[0]), 0.0

    def spec_string(self) -> str:
        return self._string({"mode": self.mode, "T": self.T, "min": self.min_range, "max": self.max_range,
                             "narrow_range": self.narrow_range or None, "axis": self.axis,
                             "dtype": self.dtype if self.dtype != "float32" else None,
                             "kernel": self.kernel if self.kernel != "eigen" else None})


# -- FakeQuant -----------------------------------------------------------------------------------------
_FAKE_VARIANTS = ("args", "vars", "per_channel")


def _fake_code_type(num_bits: int):
    name = "uint2" if num_bits <= 2 else "uint4" if num_bits <= 4 else "uint8" if num_bits <= 8 else "uint16"
    return dtypes.qtype(name)


@dataclass(frozen=True)
class FakeQuantOp(QuantizerRecord):
    """TensorFlow ``FakeQuantWithMinMaxArgs`` (``variant="args"``), ``...Vars`` (``"vars"``) or
    ``...VarsPerChannel`` (``"per_channel"``: ``min`` / ``max`` one per channel of the last axis).

    A simulated quantizer: ``op(x)`` is float32.  Its codes (for :func:`quantspec.equivalent`) are
    the integers of the grid ``[quant_min, quant_max]`` = ``[narrow_range, 2^num_bits - 1]``:
    ``output / scale + nudged zero point``, with the op's nudged scale and zero point."""

    min: float | tuple[float, ...] = -6.0  # noqa: A003 - the op's names
    max: float | tuple[float, ...] = 6.0   # noqa: A003
    num_bits: int = 8
    narrow_range: bool = False
    variant: str = "args"

    spec: ClassVar[str] = "tf"
    op: ClassVar[str] = "FakeQuant"
    kind: ClassVar[str] = "fake"

    def __post_init__(self):
        if not isinstance(self.variant, str) or self.variant.strip().lower() not in _FAKE_VARIANTS:
            raise InvalidArgumentError("variant", "must be one of " + ", ".join(map(repr, _FAKE_VARIANTS)),
                                       self.variant)
        variant = self.variant.strip().lower()
        lo, hi = _ranges(self.min, self.max, ("min", "max"), variant == "per_channel")
        nb = _args.integer(self.num_bits, "num_bits")
        narrow = _args.flag(self.narrow_range, "narrow_range")
        _set(self, min=lo, max=hi, num_bits=nb, narrow_range=narrow, variant=variant)
        self(np.zeros((1, len(lo)) if variant == "per_channel" else (1,), np.float32))   # the op's own checks
        mn = np.asarray(lo if variant == "per_channel" else (lo,), np.float32)
        mx = np.asarray(hi if variant == "per_channel" else (hi,), np.float32)
        plan = plan_fake_quant(mn, mx, nb, narrow, divide=variant == "vars", zero_special=variant != "args")
        _set(self, _plan=plan)

    def __call__(self, x) -> np.ndarray:
        if self.variant == "args":
            return fake_quant_with_min_max_args(x, min=self.min, max=self.max, num_bits=self.num_bits,
                                                narrow_range=self.narrow_range)
        if self.variant == "vars":
            return fake_quant_with_min_max_vars(x, np.float32(self.min), np.float32(self.max), num_bits=self.num_bits,
                                                narrow_range=self.narrow_range)
        return fake_quant_with_min_max_vars_per_channel(x, np.asarray(self.min, np.float32),
                                                        np.asarray(self.max, np.float32), num_bits=self.num_bits,
                                                        narrow_range=self.narrow_range)

    input_dtype = property(lambda self: np.dtype(np.float32))
    out_dtype = property(lambda self: np.dtype(np.float32))
    code_type = property(lambda self: _fake_code_type(self.num_bits))
    channels = property(lambda self: len(self.min) if self.variant == "per_channel" else 1)

    @property
    def quant_range(self) -> tuple[int, int]:
        """``(quant_min, quant_max)``: the integer grid of the codes."""
        return (1 if self.narrow_range else 0), (1 << self.num_bits) - 1

    def channel(self, c: int) -> FakeQuantOp:
        if self.variant != "per_channel":
            return super().channel(c)
        c = self._check_channel(c)
        return FakeQuantOp((self.min[c],), (self.max[c],), self.num_bits, self.narrow_range, "per_channel")

    @property
    def fast(self) -> bool:
        """Whether :meth:`run` takes the fused kernels (multithreaded on large inputs), not numpy."""
        return fast_path_fake_quant(self._plan) == "fast"

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        f32_ = np.dtype(np.float32)
        if (self._plan.scale.shape[0] == 1 and x.dtype == f32_ and out.dtype == f32_ and x.shape == out.shape
                and type(x) is np.ndarray):
            return run_fake_quant(x, self._plan, out=out)   # one slice: the plan as it is, into out
        y = self(flat_input(x, -1 if self.variant == "per_channel" else None, last=True))
        out[...] = y.reshape(-1)
        return out

    def nudged(self) -> tuple[float, float, float, int]:
        """``(nudged_min, nudged_max, scale, zero_point)`` of the first channel, as the kernel computes
        them (float32 values; the zero point an integer of ``quant_range``)."""
        p = self._plan
        if bool(p.zero[0]) or not np.isfinite(p.quant_zero[0]):
            self._no_grid()
        quant_min = self.quant_range[0]
        return (float(p.nudged_min[0]), float(p.nudged_max[0]), float(p.scale[0]),
                int(p.quant_zero[0]) + quant_min)

    def _no_grid(self):
        raise UnsupportedError("min", "gives a FakeQuant without a grid (min == max == 0: every output is 0, or "
                               "a scale that is not a positive finite number): it has no codes to compare",
                               (self.min, self.max))

    def real_range(self) -> tuple[float, float]:
        nmin, nmax, _, _ = self.nudged()
        return nmin, nmax

    def grid(self) -> tuple[float, float]:
        _, _, scale, zp = self.nudged()
        return scale, float(zp)

    def decode(self) -> tuple[float, int]:
        _, _, scale, zp = self.nudged()
        if not scale > 0 or not np.isfinite(scale):
            self._no_grid()
        return scale, zp

    def spec_string(self) -> str:
        return self._string({"variant": self.variant, "min": self.min, "max": self.max, "num_bits": self.num_bits,
                             "narrow_range": self.narrow_range or None})


# -- QuantizeAndDequantize ---------------------------------------------------------------------------
_QDQ = {2: quantize_and_dequantize_v2, 3: quantize_and_dequantize_v3, 4: quantize_and_dequantize_v4}


@dataclass(frozen=True)
class QuantizeAndDequantizeOp(QuantizerRecord):
    """TensorFlow ``QuantizeAndDequantizeV2`` / ``V3`` / ``V4`` (``version``) with its attributes
    (``range_given=None``: the op's default, True for V3 and False for V2 / V4).

    A simulated quantizer: ``op(x)`` is float32.  Its codes are the integers ``output / inverse_scale``
    in ``[min_q, max_q]`` (signed: ``[-2^(b-1) + narrow, 2^(b-1) - 1]``; unsigned ``[0, 2^b - 1]``),
    defined when the range is given (otherwise the range, and the grid, come from the data)."""

    input_min: float | tuple[float, ...] = 0.0
    input_max: float | tuple[float, ...] = 0.0
    version: int = 4
    signed_input: bool = True
    num_bits: int = 8
    range_given: bool | None = None
    round_mode: str = "HALF_TO_EVEN"
    narrow_range: bool = False
    axis: int | None = None

    spec: ClassVar[str] = "tf"
    op: ClassVar[str] = "QuantizeAndDequantize"
    kind: ClassVar[str] = "fake"

    def __post_init__(self):
        if self.version not in _QDQ or isinstance(self.version, bool):
            raise InvalidArgumentError("version", "must be 2, 3 or 4", self.version)
        axis = _axis(self.axis)
        lo, hi = _ranges(self.input_min, self.input_max, ("input_min", "input_max"), axis is not None)
        given = (self.version == 3) if self.range_given is None else _args.flag(self.range_given, "range_given")
        round_mode = "HALF_TO_EVEN" if self.version == 3 else _args.choice(self.round_mode, "round_mode",
                                                                            spec.QDQ_ROUND_MODES)
        _set(self, input_min=lo, input_max=hi, range_given=given, round_mode=round_mode, axis=axis,
             signed_input=_args.flag(self.signed_input, "signed_input"),
             num_bits=_args.integer(self.num_bits, "num_bits"),
             narrow_range=_args.flag(self.narrow_range, "narrow_range"))
        n = len(lo) if axis is not None else 1
        x = np.zeros(_shape_for(axis, n), np.float32)
        self(x)                                                      # the op's own checks
        plan = prepare_qdq(x, np.asarray(lo, np.float32), np.asarray(hi, np.float32), **self._kwargs(plan=True))
        _set(self, _plan=plan)

    def _kwargs(self, plan: bool = False) -> dict:
        kw = dict(signed_input=self.signed_input, num_bits=self.num_bits, range_given=self.range_given,
                  narrow_range=self.narrow_range, axis=self.axis)
        if plan:
            kw.update(version=self.version, round_mode=self.round_mode)
        elif self.version != 3:
            kw["round_mode"] = self.round_mode
        return kw

    def __call__(self, x) -> np.ndarray:
        lo = np.asarray(self.input_min, np.float32)
        hi = np.asarray(self.input_max, np.float32)
        if self.version == 3:
            kw = self._kwargs()
            nb = kw.pop("num_bits")
            return quantize_and_dequantize_v3(x, lo, hi, nb, **kw)
        return _QDQ[self.version](x, lo, hi, **self._kwargs())

    input_dtype = property(lambda self: np.dtype(np.float32))
    out_dtype = property(lambda self: np.dtype(np.float32))
    channels = property(lambda self: 1 if self.axis is None else len(self.input_min))

    @property
    def code_type(self):
        b = self.num_bits
        width = 8 if b <= 8 else 16 if b <= 16 else 32
        if not self.signed_input and width == 32:
            width = 64
        return dtypes.qtype(("int" if self.signed_input else "uint") + str(width))

    @property
    def quant_range(self) -> tuple[int, int]:
        """``(min_q, max_q)``: the integer grid of the codes."""
        b = self.num_bits
        if self.signed_input:
            return -(1 << (b - 1)) + (1 if self.narrow_range else 0), (1 << (b - 1)) - 1
        return 0, (1 << b) - 1

    def channel(self, c: int) -> QuantizeAndDequantizeOp:
        if self.axis is None:
            return super().channel(c)
        c = self._check_channel(c)
        return QuantizeAndDequantizeOp(_pick(self.input_min, c), _pick(self.input_max, c), self.version,
                                       self.signed_input, self.num_bits, self.range_given, self.round_mode,
                                       self.narrow_range, self.axis)

    @property
    def fast(self) -> bool:
        """Whether :meth:`run` takes the fused kernels (multithreaded on large inputs), not numpy:
        a given range whose inverse scale is not NaN (float32 inputs)."""
        return bool(self.range_given) and fast_path_qdq(self._plan) == "fast"

    def run(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        f32_ = np.dtype(np.float32)
        if (self.axis is None and self.range_given and x.dtype == f32_ and out.dtype == f32_
                and x.shape == out.shape and type(x) is np.ndarray):
            return run_qdq(x, self._plan, out=out)          # the given range's plan as it is, into out
        out[...] = self(flat_input(x, self.axis)).reshape(-1)
        return out

    def _given(self):
        if not self.range_given:
            raise UnsupportedError("range_given", "must be True to compare or translate: without it the range, and "
                                   "so the grid, comes from the data of each call", self.range_given)

    def real_range(self) -> tuple[float, float]:
        self._given()
        return float(self._plan.lo[0]), float(self._plan.hi[0])

    def grid(self) -> tuple[float, float]:
        self._given()
        return float(self._plan.inv[0]), 0.0

    def decode(self) -> tuple[float, int]:
        self._given()
        inv = float(self._plan.inv[0])
        if not inv > 0 or not np.isfinite(inv):
            raise UnsupportedError("input_min", "gives a QuantizeAndDequantize without a grid (a zero or non-finite "
                                   "inverse scale): it has no codes to compare", (self.input_min, self.input_max))
        return inv, 0

    def spec_string(self) -> str:
        return self._string({"version": self.version, "min": self.input_min, "max": self.input_max,
                             "signed_input": self.signed_input, "num_bits": self.num_bits,
                             "range_given": self.range_given,
                             "round_mode": self.round_mode if self.version != 3 else None,
                             "narrow_range": self.narrow_range or None, "axis": self.axis})

