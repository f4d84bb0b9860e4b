"""Where a quantizer's code changes: the exact decision thresholds of a monotone quantizer.

Every quantizer here is a non-decreasing step function of its input (for a positive scale): the code
of ``x`` is the number of thresholds at or below ``x``, offset by the lowest code.  Ordering the
finite inputs of a float type by value (``-max, ..., -0.0, +0.0, ..., +max``; an *ordinal* for each
bit pattern), :func:`thresholds` finds, for every code ``k`` above the lowest, the first ordinal
whose code is ``>= k``: a binary search over the ordinals, run for all codes at once, each step one
call of the quantizer's own kernel on an array holding one input per code.

From two quantizers' thresholds, :func:`disagreement` gives exactly how many finite inputs they code
differently (the ordinals between corresponding thresholds, merged) and the largest difference,
without running either on those inputs.  :func:`quantspec.translate` ranks its candidates so; the
counts it reports come from the exhaustive comparison (:mod:`.prove`), and the tests check that the
two agree.  Inf and NaN are scored on representatives (each NaN of a sign coded alike).
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .._semantics.oprecord import QuantizerRecord
from ..errors import UnsupportedError
from .prove import DOMAINS, decoder, run_record

__all__ = ["Ordinals", "ordinals_for", "codes_of", "limits", "thresholds", "Steps", "disagreement",
           "nonfinite_disagreement",
           "boundary_inputs"]

_MAX_CODES = 1 << 17


@dataclass(frozen=True)
class Ordinals:
    """The value order of a float type's bit patterns."""

    dtype: np.dtype
    bits: int

    @property
    def half(self) -> int:
        return 1 << (self.bits - 1)

    @property
    def max_bits(self) -> int:
        """The bit pattern of the largest finite value."""
        return int(np.array(ml_dtypes.finfo(self.dtype).max, self.dtype).view(_UINT[self.bits]))

    @property
    def first(self) -> int:
        """The ordinal of the most negative finite value."""
        return self.half - 1 - self.max_bits

    @property
    def end(self) -> int:
        """One past the ordinal of the largest finite value."""
        return self.half + self.max_bits + 1

    def to_bits(self, o: np.ndarray) -> np.ndarray:
        o = np.asarray(o, np.int64)
        pos = o >= self.half
        return np.where(pos, o - self.half, self.half | (self.half - 1 - o)).astype(_UINT[self.bits])

    def of_bits(self, b: np.ndarray) -> np.ndarray:
        b = np.asarray(b).astype(np.int64)
        neg = (b & self.half) != 0
        mag = b & (self.half - 1)
        return np.where(neg, self.half - 1 - mag, self.half + mag)

    def values(self, o: np.ndarray) -> np.ndarray:
        return self.to_bits(o).view(self.dtype)


_UINT = {16: np.uint16, 32: np.uint32}
_EXPONENT_BITS = {(32, "float32"): 8, (16, "float16"): 5, (16, "bfloat16"): 8}


def ordinals_for(dtype) -> Ordinals:
    dt = np.dtype(dtype)
    for d, _, bits in DOMAINS.values():
        if d == dt:
            return Ordinals(d, bits)
    raise UnsupportedError("dtype", "has no float ordering here (float32, float16, bfloat16)", str(dt))


def codes_of(op: QuantizerRecord, x: np.ndarray, offset: int = 0) -> np.ndarray:
    """The codes ``op`` gives ``x`` (int64, shifted by ``offset``; a NaN output of a simulated
    quantizer: the sentinel of :mod:`._jitted`)."""
    x = np.ascontiguousarray(x, dtype=op.input_dtype).reshape(-1)
    y = np.empty(x.size, op.out_dtype)
    run_record(op, x, y)
    mode, step, zero = decoder(op, offset)
    if mode == 0:
        t = op.code_type
        raw = y if y.dtype.kind in "iu" else y.view(t.storage)
        return raw.astype(np.int64) + zero
    v = y.astype(np.float64)
    with np.errstate(invalid="ignore"):
        k = np.rint(v / step)
    out = np.where(np.isnan(v), -(1 << 62), 0).astype(np.int64)
    ok = ~np.isnan(v)
    with np.errstate(invalid="ignore"):
        # an infinite output (a range near float32's largest value) converts as in the kernels'
        # ``_code``: the x86 conversion of an out-of-range float, INT64_MIN, without numpy's warning
        out[ok] = k[ok].astype(np.int64) + zero
    return out


@dataclass(frozen=True)
class Steps:
    """A quantizer as a step function on the ordinals ``[first, end)`` of ``order``: the code of
    ordinal ``o`` is ``low + number of thresholds <= o``; ``thresholds`` is sorted."""

    order: Ordinals
    low: int
    thresholds: np.ndarray
    first: int
    end: int

    def code_at(self, o: np.ndarray) -> np.ndarray:
        return self.low + np.searchsorted(self.thresholds, np.asarray(o, np.int64), side="right")


def limits(order: Ordinals, bound: float | None) -> tuple[int, int]:
    """The ordinals ``[first, end)`` of the finite inputs ``x`` with ``|x| <= bound`` (all finite
    inputs when None)."""
    if bound is None:
        return order.first, order.end
    with np.errstate(over="ignore"):
        b = np.array(abs(bound), np.float64).astype(order.dtype)
    if not np.isfinite(np.float64(b)):
        return order.first, order.end
    o = int(order.of_bits(b.view(_UINT[order.bits]).reshape(1))[0])
    return 2 * order.half - 1 - o, o + 1


def thresholds(op: QuantizerRecord, offset: int = 0, order: Ordinals | None = None,
               bound: float | None = None, window: tuple[int, int] | None = None) -> Steps:
    """The decision thresholds of a one-channel quantizer (or simulated quantizer) ``op`` over the
    finite inputs of magnitude at most ``bound`` (None: all), or over the ordinals ``window =
    (first, end)``: where it is non-decreasing (LiteRT's QUANTIZE is not, beyond ``2^31 * scale``,
    where the int32 conversion wraps)."""
    order = order or ordinals_for(op.input_dtype)
    first, end = limits(order, bound) if window is None else (int(window[0]), int(window[1]))
    ends = order.values(np.array([first, end - 1]))
    c = codes_of(op, ends.astype(op.input_dtype), offset)
    low, high = int(c[0]), int(c[1])
    if high < low:
        raise UnsupportedError("op", "is not a non-decreasing function of its input (a negative scale?)", str(op))
    n = high - low
    if n > _MAX_CODES:
        raise UnsupportedError("op", f"has too many codes ({n}) to find its thresholds", str(op))
    ks = np.arange(low + 1, high + 1, dtype=np.int64)
    lo = np.full(n, first, np.int64)
    hi = np.full(n, end - 1, np.int64)      # code(hi) >= k always
    while n and np.any(lo < hi):
        mid = (lo + hi) // 2
        got = codes_of(op, order.values(mid).astype(op.input_dtype), offset)
        ge = got >= ks
        hi = np.where(ge, mid, hi)
        lo = np.where(ge, lo, mid + 1)
    return Steps(order, low, np.maximum.accumulate(lo) if n else lo, first, end)


def disagreement(a: Steps, b: Steps) -> tuple[int, int]:
    """(inputs of their common ordinals on which the two step functions differ, their largest code
    difference)."""
    if (a.first, a.end) != (b.first, b.end):
        raise ValueError("step functions over different inputs")
    cuts = np.unique(np.concatenate([a.thresholds, b.thresholds, [a.first, a.end]]))
    cuts = cuts[(cuts >= a.first) & (cuts <= a.end)]
    starts, stops = cuts[:-1], cuts[1:]
    ca, cb = a.code_at(starts), b.code_at(starts)
    diff = ca != cb
    count = int((stops - starts)[diff].sum())
    largest = int(np.abs(ca - cb).max()) if starts.size else 0
    return count, largest


def nonfinite_disagreement(a: QuantizerRecord, b: QuantizerRecord, offset: int, order: Ordinals) -> int:
    """Inf / NaN inputs the two code differently, counting each NaN of a sign as its quiet NaN does."""
    specials = np.concatenate([np.array([np.inf, -np.inf]).astype(order.dtype), _quiet_nans(order)])
    ca = codes_of(a, specials.astype(a.input_dtype), offset)
    cb = codes_of(b, specials.astype(b.input_dtype), 0)
    per_nan = _nan_patterns(order)
    weights = np.array([1, 1, per_nan, per_nan], np.int64)
    return int(weights[ca != cb].sum())


def _nan_patterns(order: Ordinals) -> int:
    exp = _EXPONENT_BITS[order.bits, order.dtype.name]
    return (1 << (order.bits - 1 - exp)) - 1


def _quiet_nans(order: Ordinals) -> np.ndarray:
    exp = _EXPONENT_BITS[order.bits, order.dtype.name]
    mant = order.bits - 1 - exp
    q = ((1 << exp) - 1) << mant | (1 << (mant - 1))
    return np.array([q, order.half | q], _UINT[order.bits]).view(order.dtype)


def boundary_inputs(steps: list[Steps], width: int = 2) -> np.ndarray:
    """The bit patterns around every threshold of the given step functions: ordinals ``t - width``
    .. ``t + width - 1`` (the last input of each code and the first of the next, and neighbours)."""
    if not steps:
        return np.zeros(0, np.uint64)
    order = steps[0].order
    t = np.unique(np.concatenate([s.thresholds for s in steps]))
    o = (t[:, None] + np.arange(-width, width)[None, :]).reshape(-1)
    o = o[(o >= steps[0].first) & (o < steps[0].end)]
    return order.to_bits(np.unique(o)).astype(np.uint64)
