"""More binary element-wise kernels: SQUARED_DIFFERENCE and PRELU (``K/squared_difference.cc``,
``K/activations.cc`` PreluPrepare / PreluEval, ``KI/reference/prelu.h``; ``K/`` =
``tflite/kernels/``, ``KI/`` = ``K/internal/``).

**SQUARED_DIFFERENCE** (int8): both inputs brought to the scale ``2 * max(s1, s2)`` with 7 bits of
headroom, the difference squared in int32, then requantized::

    twice = double(2.0f * max(s1, s2))                        # the product in float32
    r1 = s1 / twice,  r2 = s2 / twice,  ro = twice^2 / double(f32(2^14) * f32(so))
    a = MBQM<1((x - z1) << 7, r1),  b = MBQM<1((y - z2) << 7, r2)
    out = clamp(MBQM<1((a - b)^2, ro) + zo)                   # MBQM<1: SmallerThanOneExp

LiteRT rejects zero points outside [-128, 127] and aborts (``QuantizeMultiplierSmallerThanOneExp``
CHECK) when ``ro >= 1``.  LiteRT has no int16 kernel (Eval fails).

**PRELU**: ``x >= z_in`` gives ``MBQM(x - z_in, s_in / s_out)``, otherwise
``MBQM((x - z_in) * (alpha - z_alpha), s_in * s_alpha / s_out)`` (the multipliers in float32), plus
``z_out``, clamped.  int8 input and alpha, or int16 input with int8 alpha; the alpha broadcasts
against the input, and the output has the input's shape.

An int8 kernel whose output depends on the two input codes alone is prepared as a 65536-entry
table indexed by the pair of codes; compute gathers from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import RangeError, ShapeError, UnsupportedError
from .. import fixedpoint as fp
from ..fixedpoint import mbqm, rdbpot, srdhm, wrap_int32
from . import _common as c
from .base import Kernel, register

__all__ = ["SquaredDifference", "Prelu", "pair_table"]

_PAIRS = np.arange(1 << 16, dtype=np.int64)
#: every (x, y) pair of int8 codes, in the order of the index (x_u8 << 8) | y_u8
_X8 = ((_PAIRS >> 8) ^ 0x80) - 0x80
_Y8 = ((_PAIRS & 0xFF) ^ 0x80) - 0x80


def pair_table(values: np.ndarray) -> np.ndarray:
    table = np.asarray(values).astype(np.int8)
    table.setflags(write=False)
    return table


def _pair_index(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    xb, yb = np.broadcast_arrays(x.view(np.uint8), y.view(np.uint8))
    return (xb.astype(np.uint16) << 8) | yb


@dataclass(frozen=True, eq=False)
class PairTableParams:
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    output_shape: tuple[int, ...]
    table: np.ndarray


@register
class SquaredDifference(Kernel):
    """SQUARED_DIFFERENCE, int8 with broadcasting."""

    name = "SQUARED_DIFFERENCE"

    def prepare(self, inputs, outputs, options):
        first = inputs[0] if inputs else None
        if first is not None and first.dtype.name == "int16":
            raise c.limit("no-int16-kernel", UnsupportedError(
                f"{self.name} input 0", "LiteRT has no int16 SQUARED_DIFFERENCE kernel (it fails at eval)", "int16"))
        x, y, o, ((s1, z1), (s2, z2), (so, zo)) = c.binary_operands(self.name, inputs, outputs)
        for name, z in (("input 0", z1), ("input 1", z2), ("output", zo)):
            if not -128 <= z <= 127:
                raise c.limit("zero-point-range", RangeError(
                    f"{self.name} {name} zero point", "must lie in [-128, 127] (LiteRT rejects the model at "
                    "prepare)", z))
        shape = c.broadcast_shape(self.name, x.shape, y.shape)
        f = np.float32
        twice = np.float64(f(2) * max(f(s1), f(s2)))
        r1 = np.float64(s1) / twice
        r2 = np.float64(s2) / twice
        with np.errstate(all="ignore"):
            ro = (twice * twice) / np.float64(f(1 << 14) * f(so))
        m1, e1 = fp.quantize_multiplier_smaller_than_one_exp(r1)
        m2, e2 = fp.quantize_multiplier_smaller_than_one_exp(r2)
        try:
            mo, eo = fp.quantize_multiplier_smaller_than_one_exp(float(ro))
        except RangeError:
            raise c.limit("add-output-multiplier", UnsupportedError(
                f"{self.name} output", "an output multiplier (2*max(s1, s2))^2 / (2^14 * s_out) >= 1 (an output "
                "scale this small) makes LiteRT abort (TFLITE_CHECK)", float(so))) from None
        a = rdbpot(srdhm(wrap_int32((_X8 - z1) << 7), m1), -e1)
        b = rdbpot(srdhm(wrap_int32((_Y8 - z2) << 7), m2), -e2)
        d = wrap_int32(a - b)
        out = wrap_int32(rdbpot(srdhm(wrap_int32(d * d), mo), -eo) + zo)
        table = pair_table(np.clip(out, -128, 127))
        return PairTableParams((tuple(x.shape), tuple(y.shape)), shape, table)

    def compute(self, p: PairTableParams, arrays):
        x, y = c.check_arrays(self.name, arrays, [(0, p.shapes[0], np.dtype(np.int8)),
                                                  (1, p.shapes[1], np.dtype(np.int8))])
        return [p.table[_pair_index(x, y)].reshape(p.output_shape)]


@dataclass(frozen=True, eq=False)
class PreluParams:
    shapes: tuple[tuple[int, ...], tuple[int, ...]]
    dtype: np.dtype
    table: np.ndarray | None            # int8: by (input, alpha) pair
    offsets: tuple[int, int, int]       # z_in, z_alpha, z_out
    multipliers: tuple[int, int, int, int]
    bounds: tuple[int, int]


def _prelu_values(x, a, offsets, multipliers, bounds):
    z_in, z_a, z_out = offsets
    m1, e1, m2, e2 = multipliers
    v = wrap_int32(np.asarray(x, np.int64) - z_in)
    positive = mbqm(v, m1, e1)
    negative = mbqm(wrap_int32(v * wrap_int32(np.asarray(a, np.int64) - z_a)), m2, e2)
    out = wrap_int32(np.where(v >= 0, positive, negative) + z_out)
    return np.clip(out, *bounds)


@register
class Prelu(Kernel):
    """PRELU: int8 input and alpha, or int16 input with int8 alpha."""

    name = "PRELU"

    def prepare(self, inputs, outputs, options):
        x, alpha = c.count(self.name, inputs, outputs, 2, names=("input", "alpha"))
        o = outputs[0]
        c.require_type(self.name, [("input", x)], ("int8", "int16"))
        c.require_type(self.name, [("alpha", alpha)], ("int8",))
        c.require_same_type(x, o, "output", self.name)
        (s_in, z_in), (s_a, z_a), (s_out, z_out) = (c.activation(self.name, n, t) for n, t in
                                                    (("input", x), ("alpha", alpha), ("output", o)))
        shape = c.broadcast_shape(self.name, x.shape, alpha.shape)
        if tuple(shape) != tuple(x.shape):
            raise c.limit("prelu-shape", ShapeError(
                f"{self.name} alpha", "must broadcast to the input's shape (LiteRT rejects the model at prepare)",
                (tuple(x.shape), tuple(alpha.shape))))
        f = np.float32
        with np.errstate(all="ignore"):
            r1 = float(f(s_in) / f(s_out))
            r2 = float(f(f(s_in) * f(s_a)) / f(s_out))
        ms = []
        for real in (r1, r2):
            if not np.isfinite(real):
                raise UnsupportedError(f"{self.name} scales", "give a non-finite multiplier", real)
            m, e = fp.quantize_multiplier(real)
            if e > 30:
                raise c.limit("multiplier-shift", UnsupportedError(
                    f"{self.name} scales", "a multiplier >= 2^30 needs a left shift of 31 or more, undefined in "
                    "LiteRT's C++", real))
            ms += [m, e]
        dtype = np.dtype(x.dtype.name)
        bounds = (int(x.dtype.qmin), int(x.dtype.qmax))
        offsets = (z_in, z_a, z_out)
        table = None
        if x.dtype.name == "int8":
            table = pair_table(_prelu_values(_X8, _Y8, offsets, tuple(ms), bounds))
        return PreluParams((tuple(x.shape), tuple(alpha.shape)), dtype, table, offsets, tuple(ms), bounds)

    def compute(self, p: PreluParams, arrays):
        x, a = c.check_arrays(self.name, arrays, [(0, p.shapes[0], p.dtype), (1, p.shapes[1], np.dtype(np.int8))])
        if p.table is not None:
            return [p.table[_pair_index(x, a)].reshape(p.shapes[0])]
        xb, ab = np.broadcast_arrays(x, a)
        return [_prelu_values(xb, ab, p.offsets, p.multipliers, p.bounds).astype(p.dtype).reshape(p.shapes[0])]
