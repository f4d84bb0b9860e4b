"""How TensorFlow's Eigen CPU kernels order their work, where the order shows in the result.

Two places of QuantizeAndDequantize (notes in docs/tensorflow.md, "NaN") depend on it:

**Vector packets and the scalar tail.**  TensorFlow's x86-64 pip build compiles Eigen for AVX: an
element-wise expression is evaluated in packets of :data:`PACKET` elements (8 float32, 4 float64)
and the last ``size % PACKET`` elements one at a time.  The two loops are separate machine code, and
where both operands of the final multiplication are NaN they keep a different operand's payload.
:func:`vectorised` says which elements the packet loop computes.  The thread split does not move
the boundary (Eigen aligns every block to whole packets).

**Min and max of the data** (``range_given=False``) use Eigen's full reduction (per-tensor) or its
generic dimension reducer (per axis), whose NaN handling is not IEEE ``fmin``:

- the packet loop keeps its accumulator when the new value is NaN: NaN is skipped;
- the scalar loop (the tail) and every combination of partial results (the packet accumulators with
  the tail, the halves of a tree reduction, the threads' shards) keep the *new* value when a
  comparison involves NaN, so a NaN met there replaces everything before it, and is in turn replaced
  by the next value;
- per axis, every element goes through the scalar loop, in the order inner index, then outer index.

So a NaN among the data is skipped, or it wipes out the values reduced before it, or it becomes the
range (when it is the last value reduced), depending on its position.  Ties between -0.0 and +0.0
follow the same orders.  Above about 108 thousand float32 (54 thousand float64) elements the full
reduction is split across TensorFlow's intra-op threads (Eigen's cost model), and the split moves
the boundaries: :func:`intra_op_threads` is TensorFlow's own default for that count.

Every function returns the chosen *element* (an index), so NaN payloads and the sign of zero are
the data's own, as in TensorFlow.
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["PACKET", "BLOCK", "vectorised", "vectorised_blocks", "intra_op_threads", "reduction_threads",
           "full_min_max", "axis_min_max"]

#: Eigen's packet size for TensorFlow's AVX build, per element type
PACKET = {np.dtype(np.float32): 8, np.dtype(np.float64): 4}

_LEAF_PACKETS = 1024          # Eigen's tree reduction: leaves of at most 1024 packets
_ENV_THREADS = "TF_NUM_INTRAOP_THREADS"


def vectorised(size: int, packet: int) -> np.ndarray:
    """Which of ``size`` consecutive results Eigen's packet loop computes (the rest: its scalar tail)."""
    return np.arange(size) < (size // packet) * packet


#: target block size of Eigen's tiled evaluation of QuantizeAndDequantize's per-axis HALF_UP kernel without
#: a given range (``1 / TensorCostModel::taskSize``: 40000 cycles over 3.5 cycles per float32 element --
#: 8 bytes moved at 11/64 cycle a byte plus 17 compute cycles spread over a packet -- or 7 per float64)
BLOCK = {np.dtype(np.float32): 11428, np.dtype(np.float64): 5714}


def vectorised_blocks(outer: int, channels: int, inner: int, packet: int, target: int) -> np.ndarray:
    """Which results of one slice ([outer, inner], row-major) Eigen's *tiled* evaluation computes in
    packets.  The slice is cut into blocks of about ``target`` elements, innermost dimension first
    (``kSkewedInnerDims``); a block is written row by row, each row a packet loop and a scalar tail,
    except that the rows of a block holding whole rows of a tensor with one slice are contiguous in
    the output and written as one run."""
    if outer * inner == 0:
        return np.zeros((outer, inner), bool)
    if outer * inner <= target:
        rows, cols = outer, inner
    else:
        cols = min(target, inner)
        rows = min(-(-target // max(cols, 1)), outer)
    o = np.arange(outer)[:, None]
    i = np.arange(inner)[None, :]
    col_extent = np.minimum(cols, inner - (i // cols) * cols)
    if channels == 1 and cols == inner:
        row_extent = np.minimum(rows, outer - (o // rows) * rows)
        run, pos = row_extent * inner, (o % rows) * inner + i
    else:
        run, pos = np.broadcast_to(col_extent, (outer, inner)), np.broadcast_to(i % cols, (outer, inner))
    return pos < (run // packet) * packet


def intra_op_threads() -> int:
    """The size of TensorFlow's intra-op thread pool by default: ``TF_NUM_INTRAOP_THREADS`` when set,
    else the CPUs this process may run on (``port::MaxParallelism``)."""
    try:
        env = int(os.environ.get(_ENV_THREADS, "0"))
    except ValueError:
        env = 0
    if env > 0:
        return env
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def reduction_threads(size: int, dtype: np.dtype, pool: int | None = None) -> int:
    """The shards of Eigen's multithreaded full min/max reduction (``TensorCostModel::numThreads``):
    per element, a load of ``itemsize`` bytes at 11/64 cycle a byte plus the reducer's default
    functor cost 10 spread over a packet; 100000 cycles to start, 100000 more per extra thread."""
    dtype = np.dtype(dtype)
    pool = intra_op_threads() if pool is None else pool
    per_element = dtype.itemsize * (11.0 / 64.0) + 10.0 / PACKET[dtype]
    threads = (size * per_element - 100000.0) / 100000.0 + 0.9
    return int(min(pool, max(1, int(min(threads, 2 ** 31 - 1)))))


class _Reducer:
    """Index-valued min (``largest=False``) or max over the flat array ``x``.  Index -1 stands for the
    initial value (+inf for min, -inf for max); keys are compared with ``<`` (the max negates them)."""

    def __init__(self, x: np.ndarray, largest: bool):
        self.x = x
        with np.errstate(invalid="ignore"):
            self.keys = -x if largest else x
        self.packet = PACKET[x.dtype]

    def key(self, i: int):
        return np.inf if i < 0 else self.keys[i]

    def fold(self, t: int, acc: int) -> int:
        """The scalar loop and every combination of partial results: ``acc < t ? acc : t``."""
        return acc if self.key(acc) < self.key(t) else t

    def _pick(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Lane-wise packet min ``b < a ? b : a`` (index arrays)."""
        ka = np.where(a < 0, np.inf, self.keys[np.maximum(a, 0)])
        kb = np.where(b < 0, np.inf, self.keys[np.maximum(b, 0)])
        with np.errstate(invalid="ignore"):
            return np.where(kb < ka, b, a)

    def leaf(self, first: int, num: int) -> int:
        """``InnerMostDimReducer`` on [first, first + num): four packet accumulators over whole groups of
        four packets, then one over the remaining packets, a halving tree across the lanes, the scalar
        tail, and ``V < S ? V : S`` to finish."""
        p = self.packet
        end = (num // p) * p
        tail = -1
        for i in range(first + end, first + num):
            tail = self.fold(i, tail)
        vector = self._packets_fast(first, end)
        if vector is None:
            vector = self._packets(first, num)
        return vector if self.key(vector) < self.key(tail) else tail

    def _packets_fast(self, first: int, end: int) -> int | None:
        """The packet loops' pick where the order cannot show: the first element of the least key (NaN
        skipped), unless that key is a zero of both signs (then None: the order decides the sign)."""
        if end == 0:
            return -1
        keys = self.keys[first:first + end]
        nan = np.isnan(keys)
        if nan.any():
            keys = np.where(nan, np.inf, keys)           # (np.fmin mishandles signalling NaNs)
        best = int(np.argmin(keys))
        if keys[best] == np.inf:
            return -1
        if keys[best] == 0:
            zero = keys == 0
            neg = np.signbit(keys) & zero
            if neg.any() and (zero & ~neg).any():
                return None
        return first + best

    def _packets(self, first: int, num: int) -> int:
        """The packet loops lane by lane (for the sign of a zero extreme)."""
        p = self.packet
        lanes = np.arange(p)
        acc = np.full(p, -1, np.int64)
        start = 0
        if num >= 4 * p:
            whole = (num // (4 * p)) * (4 * p)
            block = self.keys[first:first + whole].reshape(-1, 4, p)
            with np.errstate(invalid="ignore"):
                block = np.where(np.isnan(block), np.inf, block)     # a NaN never enters an accumulator
            j = np.argmin(block, axis=0)                             # the first occurrence of the minimum
            best = np.take_along_axis(block, j[None], axis=0)[0]
            idx = first + j * 4 * p + np.arange(4)[:, None] * p + lanes[None, :]
            accs = np.where(best < np.inf, idx, -1)
            acc = accs[0]
            for other in accs[1:]:
                acc = self._pick(acc, other)
            start = whole
        end = (num // p) * p
        for s in range(start, end, p):
            acc = self._pick(acc, first + s + lanes)
        width = p // 2
        while width:
            acc = self._pick(acc[:width], acc[width:2 * width])
            width //= 2
        return int(acc[0])

    def tree(self, first: int, num: int) -> int:
        """Eigen's tree reduction: halves split on a packet boundary down to leaves of 1024 packets."""
        p = self.packet
        if num > p * _LEAF_PACKETS:
            split = p * -(-(first + -(-num // 2)) // p)
            left = min(split - first, num)
            acc = self.fold(self.tree(first, left), -1)
            if left < num:
                acc = self.fold(self.tree(split, num - left), acc)
            return acc
        return self.leaf(first, num)

    def full(self, threads: int) -> int:
        """``FullReducer`` on the thread pool: ``threads`` shards of ``n // threads`` elements (the
        remainder reduced first), combined in order."""
        n = self.x.size
        if n == 0:
            return -1
        if threads <= 1:
            return self.tree(0, n)
        size = n // threads
        blocks = n // size
        shards = [self.tree(i * size, size) for i in range(blocks)]
        acc = self.tree(blocks * size, n - blocks * size) if blocks * size < n else -1
        for s in shards:
            acc = self.fold(s, acc)
        return acc


def _value(x: np.ndarray, i: int, largest: bool):
    return x[i] if i >= 0 else x.dtype.type(-np.inf if largest else np.inf)


def full_min_max(x: np.ndarray, threads: int | None = None):
    """``input.minimum()`` and ``input.maximum()`` of a flat float32/float64 array, as TensorFlow's
    per-tensor QuantizeAndDequantize computes them (``threads``: the pool size; default
    :func:`intra_op_threads`)."""
    x = np.ascontiguousarray(x).reshape(-1)
    if x.size and not np.isnan(x).any():
        mn, mx = x.min(), x.max()
        # without NaN only the sign of a zero extreme can depend on the order
        if (mn != 0 and mx != 0) or not _mixed_zeros(x).any():
            return mn, mx
    shards = reduction_threads(x.size, x.dtype, threads) if x.size else 1
    return tuple(_value(x, _Reducer(x, largest).full(shards), largest) for largest in (False, True))


def _mixed_zeros(x3: np.ndarray, axis=None) -> np.ndarray:
    """Whether both +0.0 and -0.0 occur (per slice of ``axis``)."""
    zero = x3 == 0
    neg = zero & np.signbit(x3)
    return neg.any(axis=axis) & (zero & ~neg).any(axis=axis)


def axis_min_max(x3: np.ndarray):
    """``input.minimum({0, 2})`` and ``input.maximum({0, 2})`` of an [outer, channels, inner] array: one
    scalar loop per channel over inner index, then outer index (``GenericDimReducer``)."""
    outer, channels, inner = x3.shape
    if x3.size and not np.isnan(x3).any():
        mn, mx = x3.min(axis=(0, 2)), x3.max(axis=(0, 2))
        zero = (mn == 0) | (mx == 0)
        if not zero.any() or not (_mixed_zeros(x3, (0, 2)) & zero).any():
            return mn, mx
    seq = np.ascontiguousarray(x3.transpose(1, 2, 0)).reshape(channels, outer * inner)
    length = seq.shape[1]
    out = []
    for largest in (False, True):
        init = x3.dtype.type(-np.inf if largest else np.inf)
        if length == 0:
            out.append(np.full(channels, init, x3.dtype))
            continue
        with np.errstate(invalid="ignore"):
            keys = -seq if largest else seq
        nan = np.isnan(keys)
        last_nan = np.where(nan.any(axis=1), length - 1 - np.argmax(nan[:, ::-1], axis=1), -1)
        # values up to the last NaN are forgotten; ties keep the later value (acc < t ? acc : t)
        masked = np.where(np.arange(length)[None, :] <= last_nan[:, None], np.inf, keys)
        pick = length - 1 - np.argmin(masked[:, ::-1], axis=1)   # the last occurrence of the minimum
        value = seq[np.arange(channels), pick]                     # (a last NaN is its own pick)
        out.append(value.astype(x3.dtype, copy=False))
    return out[0], out[1]
