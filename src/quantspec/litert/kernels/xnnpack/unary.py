"""QUANTIZE, LOGISTIC and TANH as the XNNPACK delegate computes them (``xnn_unary_convert``,
``xnn_unary_sigmoid``, ``xnn_unary_tanh``; DEQUANTIZE gives the reference kernel's bytes).

- **QUANTIZE** float32 -> int8 (``f32-qs8-vcvt``): ``clamp(rint(min(x · f32(1 / s), 32767)) + z)``
  — a multiplication by the reciprocal instead of a division, ties to even; NaN and +inf give 127,
  -inf -128.
- **QUANTIZE** int8 -> int8 (``qs8-vcvt``): a Q8 multiplier ``m = lrintf(256 · f32(s_in / s_out))``,
  ``out = clamp(((x - z_in) · m + 128) >> 8) + z_out)`` — 8 fractional bits where the reference
  kernel has 31.
- **LOGISTIC / TANH**: a 256-entry table of XNNPACK's reference arithmetic
  (``src/reference/unary-elementwise.cc``): ``d = f32(f32(q - z_in) · s_in)``; sigmoid in double
  (``e = exp(d)``, ``f32(e / (1 + e))``, 1 above 100 and 0 below -100), tanh with ``tanhf``; then
  ``clamp(nearbyint(f32(f32(t · f32(1 / s_out)) + z_out)))``, ties to even.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from dataclasses import dataclass

import numpy as np

from .. import _common as c
from .. import activations as ref_act
from .. import quantize as ref_q

__all__ = ["Quantize", "Logistic", "Tanh", "lut"]


@dataclass(frozen=True)
class XnnQuantizeFloat:
    shape: tuple[int, ...]
    inverse_scale: np.float32
    zero_point: int


@dataclass(frozen=True)
class XnnRequantize:
    shape: tuple[int, ...]
    input_zero_point: int
    output_zero_point: int
    multiplier: int


class Quantize(ref_q.Quantize):
    """QUANTIZE on XNNPACK."""

    def prepare(self, inputs, outputs, options):
        p = super().prepare(inputs, outputs, options)
        x, o = inputs[0], outputs[0]
        if isinstance(p, ref_q.FloatQuantizeParams):
            s, z = c.activation(self.name, "output", o)
            with np.errstate(divide="ignore", over="ignore"):
                return XnnQuantizeFloat(p.shape, np.float32(np.float32(1) / s), z)
        s_in, z_in = c.activation(self.name, "input", x)
        s_out, z_out = c.activation(self.name, "output", o)
        ratio = np.float32(s_in / s_out)
        return XnnRequantize(p.shape, z_in, z_out, int(np.rint(np.float32(np.float32(256) * ratio))))

    def compute(self, p, arrays):
        if isinstance(p, XnnQuantizeFloat):
            (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, np.dtype(np.float32))])
            with np.errstate(over="ignore", invalid="ignore"):
                v = x.astype(np.float32) * p.inverse_scale
                v = np.where(np.isnan(v), np.float32(32767), np.minimum(v, np.float32(32767)))
                r = np.rint(v)
                r = np.where(r < -2.0 ** 31, -(2.0 ** 31), r).astype(np.int64)
            r = np.clip(r, -32768, 32767)
            out = np.clip(np.clip(r + p.zero_point, -32768, 32767), -128, 127)
            return [out.astype(np.int8)]
        (x,) = c.check_arrays(self.name, arrays, [(0, p.shape, np.dtype(np.int8))])
        acc = (x.astype(np.int64) - p.input_zero_point) * p.multiplier + 128
        return [np.clip((acc >> 8) + p.output_zero_point, -128, 127).astype(np.int8)]


def _libm(name: str):
    try:
        path = ctypes.util.find_library("m")
        f = getattr(ctypes.CDLL(path), name) if path else None
    except (OSError, AttributeError):  # pragma: no cover - no C math library
        return None
    if f is not None:
        f.argtypes = [ctypes.c_float]
        f.restype = ctypes.c_float
    return f


_TANHF = _libm("tanhf")


def _sigmoid(d: np.ndarray) -> np.ndarray:
    out = np.empty(d.shape, np.float32)
    for i, v in enumerate(d.tolist()):
        if v > 100:
            out[i] = 1.0
        elif v < -100:
            out[i] = 0.0
        else:
            e = np.exp(np.float64(v))
            out[i] = np.float32(e / (1.0 + e))
    return out


def _tanh(d: np.ndarray) -> np.ndarray:
    if _TANHF is None:  # pragma: no cover
        return np.tanh(d.astype(np.float32))
    return np.array([_TANHF(float(v)) for v in d.tolist()], np.float32)


def lut(input_scale, input_zero_point: int, output_scale, output_zero_point: int, function) -> np.ndarray:
    """XNNPACK's table for a quantized unary op: indexed by the input byte (``lut[x.view(uint8)]``)."""
    v = np.arange(-128, 128, dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        d = ((v.astype(np.float32) - np.float32(input_zero_point)) * np.float32(input_scale)).astype(np.float32)
        t = function(d)
        inv = np.float32(np.float32(1) / np.float32(output_scale))
        q = np.float32(t * inv) + np.float32(output_zero_point)
        q = np.where(np.isnan(q), np.float32(0), q)
        r = np.clip(np.rint(q), -128, 127).astype(np.int8)
    table = np.empty(256, np.int8)
    table[v.astype(np.int8).view(np.uint8)] = r
    return table


class _Lut(ref_act.LutKernel):
    function = staticmethod(_sigmoid)

    def prepare(self, inputs, outputs, options):
        p = super().prepare(inputs, outputs, options)
        s_in, z_in = c.activation(self.name, "input", inputs[0])
        s_out, z_out = c.activation(self.name, "output", outputs[0])
        table = lut(s_in, z_in, s_out, z_out, self.function)
        table.setflags(write=False)
        return ref_act.LutParams(p.shape, table)


class Logistic(_Lut):
    name = "LOGISTIC"
    function = staticmethod(_sigmoid)


class Tanh(_Lut):
    name = "TANH"
    function = staticmethod(_tanh)
