"""ADD and MUL as LiteRT's optimized int8 kernels compute them (``optimized_integer_ops::Add`` /
``Mul``, ``BroadcastAddDispatch`` / ``BroadcastMulDispatch``; SUB has no optimized int8 kernel and
runs the reference one).

The kernels loop over the output in calls, each call processing a contiguous run of elements with
a vector loop (NEON code translated to SSE) and a scalar tail with the reference formulas.  How
the output is cut into calls is the broadcast pattern (``ProcessBroadcastShapes``):

- equal shapes (after left-padding with 1s): one elementwise call over everything;
- a "five-fold" broadcast ``(y0, y1, y2, y3, y4)``: with ``y4 > 1``, one elementwise call per run
  of ``y4`` elements; with ``y4 == 1``, one scalar-broadcast call per run of ``y3``;
- any other broadcast: the reference kernel for every element.

Vector lanes compute differently from the reference formulas:

- ADD, elementwise (16 lanes): each input is shifted left by ``20 + e_i`` in one step (a negative
  count is a truncating right shift) before ``SaturatingRoundingDoublingHighMul`` — one rounding
  where the reference rounds twice; the sum is requantized as in the reference, then *narrowed to
  int16 by truncation* and the output zero point added in int16 (wrapping) before saturating to
  int8.  So an output beyond int16 wraps around (e.g. to -128 instead of 127).
- ADD, scalar broadcast (8 lanes): ``SaturatingRoundingDoublingHighMul`` of ``x << 20``, then a
  *truncating* right shift by ``-e_i`` (instead of rounding), the same narrowing.
- MUL (16 lanes, both kinds): the reference arithmetic, then saturation to int16, the output zero
  point added in int16 (wrapping), saturation to int8.
- ADD on int16 (16x8 models, general scales, equal shapes; ``AddElementwiseInt16``): 16 lanes with
  the same single-step input scaling as the int8 lanes, the sum requantized as in the reference,
  the zero point added and the clamp applied in int32; a broadcast int16 ADD runs the reference
  kernel, and so does the power-of-two-scale one (``pot_scale_int16``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...fixedpoint import mbqm, rdbpot, srdhm, wrap_int32
from .. import _common as c
from .. import elementwise as ref
from ._lanes import block_mask, saturate, wrap_int16

__all__ = ["Add", "Mul", "broadcast_lanes", "REFERENCE", "ELEMENTWISE", "SCALAR_BROADCAST"]

_INT8 = np.dtype(np.int8)

#: lane kinds of :func:`broadcast_lanes`
REFERENCE, ELEMENTWISE, SCALAR_BROADCAST = 0, 1, 2


def broadcast_lanes(shape1: tuple[int, ...], shape2: tuple[int, ...], elementwise_width: int,
                    scalar_width: int) -> np.ndarray:
    """For every output element (C order), which code computes it: :data:`REFERENCE` (a scalar
    tail or the generic broadcast), :data:`ELEMENTWISE` or :data:`SCALAR_BROADCAST` (vector lanes
    of those two functions); ``ProcessBroadcastShapes`` + ``BinaryBroadcastFiveFold``."""
    rank = max(len(shape1), len(shape2))
    a = (1,) * (rank - len(shape1)) + tuple(shape1)
    b = (1,) * (rank - len(shape2)) + tuple(shape2)
    out = tuple(max(x, y) for x, y in zip(a, b))
    size = int(np.prod(out, dtype=np.int64))
    if a == b:
        return np.where(block_mask(size, elementwise_width), ELEMENTWISE, REFERENCE).astype(np.int8)
    first_fast = None
    for i in range(rank - 1, -1, -1):
        if a[i] == b[i]:
            continue
        if a[i] == 1:
            first_fast = True
        elif b[i] == 1:
            first_fast = False
        break
    if first_fast is None:                         # (not reachable for shapes that broadcast)
        return np.full(size, REFERENCE, np.int8)
    sa, sb = (a, b) if first_fast else (b, a)
    y = [1, 1, 1, 1, 1]
    i = rank - 1
    while i >= 0 and sa[i] == sb[i]:
        y[4] *= sb[i]
        i -= 1
    while i >= 0 and sa[i] == 1:
        y[3] *= sb[i]
        i -= 1
    while i >= 0 and sa[i] == sb[i]:
        y[2] *= sa[i]
        i -= 1
    while i >= 0 and sb[i] == 1:
        y[1] *= sa[i]
        i -= 1
    while i >= 0 and sa[i] == sb[i]:
        y[0] *= sb[i]
        i -= 1
    if i >= 0:                                     # not a five-fold pattern: BroadcastAdd6DSlow
        return np.full(size, REFERENCE, np.int8)
    if y[4] > 1:
        run, width, kind = y[4], elementwise_width, ELEMENTWISE
    else:
        run, width, kind = y[3], scalar_width, SCALAR_BROADCAST
    lanes = np.where(block_mask(run, width), kind, REFERENCE).astype(np.int8)
    return np.broadcast_to(lanes, (size // run if run else 0, run)).reshape(-1)


def _extended(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Equal shapes once the shorter is padded with leading 1s (``ProcessBroadcastShapes``: no broadcast)."""
    rank = max(len(a), len(b))
    return (1,) * (rank - len(a)) + tuple(a) == (1,) * (rank - len(b)) + tuple(b)


def _shift(x: np.ndarray, n: int) -> np.ndarray:
    """``vshlq_s32`` by a constant count: left (wrapping) for ``n >= 0``, arithmetic right (truncating
    toward -inf) for ``n < 0``."""
    return wrap_int32(x << n).astype(np.int64) if n >= 0 else x >> -n


@dataclass(frozen=True)
class OptimizedBinary:
    base: object                    # the reference kernel's prepared record
    lanes: np.ndarray               # int8, one lane kind per output element (C order)


class Add(ref.Add):
    """ADD, optimized (see the module docstring)."""

    #: the activation types this kernel models (the optimized mode runs others on the reference kernel)
    activations = ("int8", "int16")

    def prepare(self, inputs, outputs, options) -> OptimizedBinary:
        p = super().prepare(inputs, outputs, options)
        if getattr(p, "dtype", _INT8) != _INT8:          # int16: one elementwise call, or the reference
            size = int(np.prod(p.output_shape, dtype=np.int64))
            same = _extended(p.shapes[0], p.shapes[1]) and getattr(p, "pot_shifts", None) is None
            kind = ELEMENTWISE if same else REFERENCE
            return OptimizedBinary(p, np.where(block_mask(size, 16), kind, REFERENCE).astype(np.int8))
        return OptimizedBinary(p, broadcast_lanes(p.shapes[0], p.shapes[1], 16, 8))

    def compute(self, q: OptimizedBinary, arrays):
        p = q.base
        dtype = getattr(p, "dtype", _INT8)
        x, y = c.check_arrays(p.op, arrays, [(0, p.shapes[0], dtype), (1, p.shapes[1], dtype)])
        reference = ref.add_sub_compute(p, arrays)[0].reshape(-1)
        if not q.lanes.any():
            return [reference.reshape(p.output_shape)]
        out = reference.copy()
        if dtype != _INT8:
            n = int(np.count_nonzero(q.lanes))
            out[:n] = self._lanes16(p, x.reshape(-1)[:n], y.reshape(-1)[:n])
            return [out.reshape(p.output_shape)]
        if p.shapes[0] == p.shapes[1]:              # one elementwise call: the vector lanes are a prefix
            n = int(np.count_nonzero(q.lanes))
            out[:n] = self._lanes(p, x.reshape(-1)[:n], y.reshape(-1)[:n], ELEMENTWISE)
            return [out.reshape(p.output_shape)]
        xb = np.broadcast_to(x, p.output_shape).reshape(-1)
        yb = np.broadcast_to(y, p.output_shape).reshape(-1)
        for kind in (ELEMENTWISE, SCALAR_BROADCAST):
            sel = q.lanes == kind
            if sel.any():
                out[sel] = self._lanes(p, xb[sel], yb[sel], kind)
        return [out.reshape(p.output_shape)]

    @staticmethod
    def _lanes(p, x: np.ndarray, y: np.ndarray, kind: int) -> np.ndarray:
        """The vector lanes' arithmetic on the elements they compute."""
        a = x.astype(np.int64) - p.offsets[0]
        b = y.astype(np.int64) - p.offsets[1]
        (m1, m2, mo), (e1, e2, eo) = p.multipliers, p.shifts
        if kind == ELEMENTWISE:
            a = srdhm(_shift(a, p.left_shift + e1), m1)
            b = srdhm(_shift(b, p.left_shift + e2), m2)
        else:
            a = _shift(srdhm(_shift(a, p.left_shift), m1), e1)
            b = _shift(srdhm(_shift(b, p.left_shift), m2), e2)
        s = rdbpot(srdhm(wrap_int32(a + b).astype(np.int64), mo), -eo)
        v = saturate(wrap_int16(wrap_int16(s) + p.output_zero_point), 8)
        return np.clip(v, p.act_min, p.act_max)

    @staticmethod
    def _lanes16(p, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``AddElementwiseInt16``'s vector lanes."""
        a = x.astype(np.int64) - p.offsets[0]
        b = y.astype(np.int64) - p.offsets[1]
        (m1, m2, mo), (e1, e2, eo) = p.multipliers, p.shifts
        a = srdhm(_shift(a, p.left_shift + e1), m1)
        b = srdhm(_shift(b, p.left_shift + e2), m2)
        s = rdbpot(srdhm(wrap_int32(a + b).astype(np.int64), mo), -eo)
        return np.clip(wrap_int32(s + p.output_zero_point), p.act_min, p.act_max)


class Mul(ref.Mul):
    """MUL, optimized (see the module docstring)."""

    def prepare(self, inputs, outputs, options) -> OptimizedBinary:
        p = super().prepare(inputs, outputs, options)
        return OptimizedBinary(p, broadcast_lanes(p.shapes[0], p.shapes[1], 16, 16))

    def compute(self, q: OptimizedBinary, arrays):
        p = q.base
        if not q.lanes.any():
            return super().compute(p, arrays)
        x, y = c.check_arrays(self.name, arrays, [(0, p.shapes[0], _INT8), (1, p.shapes[1], _INT8)])
        # both codes share MultiplyByQuantizedMultiplier; they differ in what follows it
        prod = wrap_int32((x.astype(np.int64) - p.offsets[0]) * (y.astype(np.int64) - p.offsets[1]))
        raw = mbqm(prod.astype(np.int64), p.multiplier, p.shift).reshape(-1)
        reference = wrap_int32(raw + p.output_zero_point)
        lanes = saturate(wrap_int16(saturate(raw, 16) + p.output_zero_point), 8)
        out = np.where(q.lanes != REFERENCE, lanes, reference)
        return [np.clip(out, p.act_min, p.act_max).astype(np.int8).reshape(p.output_shape)]
