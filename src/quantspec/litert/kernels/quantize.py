"""QUANTIZE and DEQUANTIZE (``K/quantize.cc``, ``K/dequantize.cc``).

QUANTIZE has two uses in int8 models:

- requantization int8 -> int8 (the spec's QUANTIZE), also int8 <-> uint8 at legacy model edges::

      (M, e) = QuantizeMultiplier(double(s_in) / double(s_out))
      out = clamp(MultiplyByQuantizedMultiplier(x - z_in, M, e) + z_out)
      # int8 -> uint8 (uint8 -> int8) with equal scales and z_out = z_in + 128 (- 128): out = x ^ 0x80

- quantization float32 -> int8 at a model's input: :func:`quantspec.litert.quantize` (per-tensor,
  or per-axis when the output has several scales).

DEQUANTIZE int8 (uint8, int16) -> float32: :func:`quantspec.litert.dequantize`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InvalidArgumentError, UnsupportedError
from .. import fast
from .. import fixedpoint as fp
from ..fixedpoint import mbqm, wrap_int32
from ..params import QuantParams, affine_quantize, along_axis, check_params, dequantize
from . import _common as c
from .base import Kernel, register

__all__ = ["Quantize", "Dequantize"]


@dataclass(frozen=True)
class RequantizeParams:
    shape: tuple[int, ...]
    in_dtype: np.dtype
    out_dtype: np.dtype
    input_zero_point: int
    output_zero_point: int
    multiplier: int
    shift: int
    xor: bool             # the int8 <-> uint8 fast path


@dataclass(frozen=True)
class FloatQuantizeParams:
    shape: tuple[int, ...]
    out_dtype: np.dtype
    scale: np.ndarray     # float32, shaped to broadcast (per-axis) or 0-d
    zero_point: np.ndarray
    params: QuantParams | None = None   # the output's parameters (for the fast path)


@register
class Quantize(Kernel):
    """QUANTIZE: int8/uint8 -> int8/uint8 requantization, or float32 -> int8 quantization."""

    name = "QUANTIZE"

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        o = outputs[0]
        if o.params is None:
            raise InvalidArgumentError("QUANTIZE output", "needs quantization parameters (LiteRT rejects a "
                                       "QUANTIZE without affine quantization at prepare)", None)
        if x.dtype.name == "float":
            c.require_type(self.name, [("output", o)], ("int8", "int16"))
            p = o.params
            if p.per_axis:
                if p.quantized_dimension >= len(o.shape) or o.shape[p.quantized_dimension] != len(p):
                    raise InvalidArgumentError("QUANTIZE output", "per-axis parameters need one scale per slice "
                                               "of the quantized dimension", len(p))
            elif not (np.isfinite(p.scale[0]) and p.scale[0] > 0):
                raise InvalidArgumentError("QUANTIZE output scale", "must be finite and > 0", float(p.scale[0]))
            ndim = len(x.shape)
            return FloatQuantizeParams(tuple(x.shape), np.dtype(o.dtype.name),
                                       np.asarray(along_axis(p.scale, p, ndim), np.float32),
                                       np.asarray(along_axis(p.zero_point, p, ndim)), p)
        c.require_type(self.name, [("input", x)], ("int8", "uint8", "int16"))
        allowed = ("int8", "int16") if x.dtype.name == "int16" else ("int8", "uint8", "int16")
        c.require_type(self.name, [("output", o)], allowed)
        s_in, z_in = c.activation(self.name, "input", x)
        s_out, z_out = c.activation(self.name, "output", o)
        if x.dtype.name == "int16" and o.dtype.name == "int16" and (z_in, z_out) != (0, 0):
            raise c.limit("int16-zero-point", InvalidArgumentError(
                "QUANTIZE zero points", "must be 0 for int16 -> int16 (LiteRT rejects the model at prepare)",
                (z_in, z_out)))
        if x.dtype.name != "int16" and o.dtype.name != "int16":
            c.enforce(self.name, inputs, outputs)
        m, e = fp.quantize_multiplier(float(np.float64(s_in) / np.float64(s_out)))
        if e > 30:
            raise c.limit("multiplier-shift", UnsupportedError(
                "QUANTIZE", "a scale ratio s_in / s_out >= 2^30 needs a left shift of 31 or more, undefined in "
                "LiteRT's C++", float(s_in / s_out)))
        same_scale = m == 1 << 30 and e == 1
        xor = same_scale and ((x.dtype.name, o.dtype.name, z_in - z_out) in
                              (("int8", "uint8", -128), ("uint8", "int8", 128)))
        return RequantizeParams(tuple(x.shape), x.dtype.dtype, o.dtype.dtype, z_in, z_out, m, e, xor)

    def compute(self, p, arrays):
        if isinstance(p, FloatQuantizeParams):
            (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, np.dtype(np.float32))])
            if p.params is not None and p.out_dtype == np.int8:
                fast_result = fast.quantize(x, p.params, np.empty(p.shape, np.int8))
                if fast_result is not None:
                    return [fast_result]
            info = np.iinfo(p.out_dtype)
            return [affine_quantize(x, p.scale, p.zero_point, int(info.min), int(info.max)).astype(p.out_dtype)]
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.in_dtype)])
        if p.xor:
            return [(x.view(np.uint8) ^ 0x80).view(p.out_dtype)]
        info = np.iinfo(p.out_dtype)
        v = wrap_int32(mbqm(x.astype(np.int64) - p.input_zero_point, p.multiplier, p.shift) + p.output_zero_point)
        return [np.clip(v, info.min, info.max).astype(p.out_dtype)]


@dataclass(frozen=True)
class DequantizeParams:
    shape: tuple[int, ...]
    dtype: np.dtype
    params: QuantParams


@register
class Dequantize(Kernel):
    """DEQUANTIZE: int8 (uint8, int16) -> float32, per-tensor or per-axis."""

    name = "DEQUANTIZE"

    def prepare(self, inputs, outputs, options):
        (x,) = c.count(self.name, inputs, outputs, 1, names=("input",))
        o = outputs[0]
        c.require_type(self.name, [("input", x)], ("int8", "uint8", "int16"))
        c.require_type(self.name, [("output", o)], ("float",))
        if x.params is None:
            raise InvalidArgumentError("DEQUANTIZE input", "needs quantization parameters", None)
        if x.dtype.name == "int16" and np.any(x.params.zero_point != 0):
            raise InvalidArgumentError("DEQUANTIZE input zero_point", "must be 0 for int16 (LiteRT rejects it at "
                                       "prepare)", int(x.params.zero_point[0]))
        check_params(x.params, "DEQUANTIZE input params", tuple(x.shape))
        return DequantizeParams(tuple(x.shape), x.dtype.dtype, x.params)

    def compute(self, p: DequantizeParams, arrays):
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, p.dtype)])
        return [dequantize(x, p.params)]
