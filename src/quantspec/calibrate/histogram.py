"""Histogram calibration: onnxruntime's Entropy, Percentile and Distribution calibrators.

onnxruntime's ``HistogramCalibrater`` keeps, per tensor, a histogram built one ``collect_data`` call
at a time from all the batches of that call (``HistogramCollector``):

- **values** (Entropy, Distribution, and Percentile with ``symmetric=False``): the first call bins
  the data into ``num_bins`` bins over ``[-t, t]``, ``t = max(|nanmin|, |nanmax|)`` of the call's
  data (float32); a later call with ``t <= t_old`` adds its counts on the old bins; one with a larger
  ``t`` widens the range by whole old bins on each side (``k = int((t - t_old) // stride + 1)``,
  stride ``2 t_old / bins``, all float32) and adds the old counts in the middle;
- **absolute values** (Percentile with ``symmetric=True``, :func:`create_calibrator`'s default): the
  first call bins ``|x|`` into ``num_bins`` bins over ``[min |x|, max |x|]`` (numpy's automatic
  range: NaN makes it fail, as onnxruntime does); later calls extend the edges by
  ``np.arange(last + width, max + width, width)`` and bin on the extended edges.

The observers here keep the same histogram, bin for bin: the data of a call are kept until
:meth:`HistogramObserver.flush` (as onnxruntime keeps the outputs of its inference runs), copied one
after another into one buffer that grows by doubling, their extremes (and those of their absolute
values) taken in one pass while they arrive; the binning is one fused pass over the call's values
(of ``|x|`` for the absolute histogram, with no temporary array) whose arithmetic is numpy's own
(:mod:`quantspec.calibrate._jitted`; where the edges are exactly ``np.linspace``'s float32 formula,
which is checked edge by edge, the two edges around a value are computed rather than looked up, so
the pass vectorises), on quantspec's thread pool from ``quantspec._fastpath.runner.SERIAL_BELOW / 8``
values: each thread counts the blocks of values it claims into
its own row of counts and the rows are summed in integers, so the histogram is the same on any
number of threads.  The bin edges are computed with the same numpy calls on the same float32
scalars.  From the histogram, :mod:`.algorithms` finds the
range (entropy, percentile) or the statistics (distribution) as onnxruntime does.
"""

from __future__ import annotations

import numpy as np

from .._fastpath import pool, runner
from .._semantics.arrays import check_fits
from ..errors import InvalidArgumentError, ShapeError
from . import algorithms
from .minmax import quiet_float_warnings, as_batch
from ._load import jitted
from .ranges import CalibrationRange

__all__ = ["HistogramObserver", "EntropyObserver", "PercentileObserver", "DistributionObserver"]

_METHODS = ("entropy", "percentile", "distribution")


def _positive_int(value, argument: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidArgumentError(argument, "must be a positive integer", value)
    return int(value)


class HistogramObserver:
    """onnxruntime's histogram calibrator for one tensor: ``method`` "entropy", "percentile" or
    "distribution", with the options of its calibrator class.  ``update(batch)`` per inference,
    ``flush()`` at the end of a ``collect_data`` call (optional: :meth:`range` flushes)."""

    def __init__(self, method: str, *, symmetric: bool = False, num_bins: int = 128, num_quantized_bins: int = 128,
                 percentile: float = 99.999, scenario: str = "same"):
        if not isinstance(method, str) or method.lower() not in _METHODS:
            raise InvalidArgumentError("method", "must be one of " + ", ".join(map(repr, _METHODS)), method)
        self.method = method.lower()
        self.symmetric = bool(symmetric)
        self.num_bins = _positive_int(num_bins, "num_bins")
        self.num_quantized_bins = _positive_int(num_quantized_bins, "num_quantized_bins")
        if isinstance(percentile, bool) or not isinstance(percentile, (int, float, np.floating)):
            raise InvalidArgumentError("percentile", "must be a number in [0, 100]", percentile)
        self.percentile = percentile
        if scenario not in ("same", "p3"):
            raise InvalidArgumentError("scenario", "must be 'same' or 'p3'", scenario)
        self.scenario = scenario
        self._buffer = np.empty(0, np.float32)   # the call's batches, one after another
        self._pending_size = 0                    # values kept in the buffer
        self._batch_size = -1
        self._reset_pending()
        self._hist = None          # (hist int64, edges float32, min, max[, threshold])

    def _reset_pending(self) -> None:
        self._pending_size = 0
        self._batch_size = -1
        self._pending_lo = np.float32(np.inf)
        self._pending_hi = np.float32(-np.inf)
        self._pending_amin = np.float32(np.inf)     # over the non-NaN |x|
        self._pending_amax = np.float32(-np.inf)
        self._pending_count = 0

    @property
    def _absolute(self) -> bool:
        return self.method == "percentile" and self.symmetric

    def update(self, batch) -> HistogramObserver:
        """One batch: the tensor's values in one inference (kept until :meth:`flush`)."""
        x = as_batch(batch)
        if self._batch_size >= 0 and x.size != self._batch_size:
            raise ShapeError("batch", f"must have the size of the call's first batch ({self._batch_size} values): "
                             "onnxruntime stacks a call's batches into one array", x.size)
        need = self._pending_size + x.size
        if need > self._buffer.size:              # grown by doubling: a call's batches copied once each;
            # room for _RESERVE_BATCHES batches at once where that is at most _RESERVE values (pages
            # never written are never given memory by the system)
            reserve = _RESERVE_BATCHES * x.size if _RESERVE_BATCHES * x.size <= _RESERVE else 0
            grown = np.empty(max(need, 2 * self._buffer.size, reserve), np.float32)
            grown[: self._pending_size] = self._buffer[: self._pending_size]
            self._buffer = grown
        kept = self._buffer[self._pending_size: need]
        lo, hi, count, amin, amax = jitted().min_max_abs(x, kept)      # kept = x, in the same pass
        self._pending_size = need
        self._batch_size = x.size
        self._pending_count += int(count)
        if lo < self._pending_lo:
            self._pending_lo = np.float32(lo)
        if hi > self._pending_hi:
            self._pending_hi = np.float32(hi)
        if amin < self._pending_amin:
            self._pending_amin = np.float32(amin)
        if amax > self._pending_amax:
            self._pending_amax = np.float32(amax)
        return self

    def flush(self) -> HistogramObserver:
        """End of a ``collect_data`` call: the kept batches go into the histogram."""
        if self._batch_size < 0:
            return self
        data = self._buffer[: self._pending_size]
        lo, hi = self._call_min_max(data)
        with np.errstate(over="ignore", invalid="ignore"):    # numpy's overflow near float32's limit: the
            if self._absolute:                                 # values are numpy's, the warnings not printed
                self._add_absolute(data, lo, hi)
            else:
                self._add_values(data, lo, hi)
        self._reset_pending()
        if self._buffer.size > _KEEP_BUFFER:      # a large call's buffer is not held between calls
            self._buffer = np.empty(0, np.float32)
        return self

    def _call_min_max(self, data: np.ndarray):
        """``np.nanmin`` / ``np.nanmax`` of the call's stacked data: the fused pass's values, except
        that a zero result takes numpy's sign (which depends on where the zeros are)."""
        if data.size == 0:
            z = np.zeros((), np.float32)
            return z, z
        if self._pending_count == 0:          # all NaN: numpy's nanmin is NaN (with a warning)
            nan = np.array(np.nan, np.float32)
            return nan, nan
        lo, hi = np.float32(self._pending_lo), np.float32(self._pending_hi)
        if lo == 0 or hi == 0:
            with quiet_float_warnings():
                return np.nanmin(data), np.nanmax(data)
        return lo, hi

    # -- the values' histogram (collect_value / merge_histogram) ------------------------------------
    def _add_values(self, data, min_value, max_value):
        threshold = np.array(max(abs(min_value), abs(max_value)), dtype=np.float32)
        if self._hist is None:
            hist, edges = self._bin_range(data, self.num_bins, -threshold, threshold)
            self._hist = (hist, edges, min_value, max_value, threshold)
            return
        old_hist, old_edges, old_min, old_max, old_threshold = self._hist
        if threshold <= old_threshold:
            hist, _ = self._bin_range(data, len(old_hist), -old_threshold, old_threshold)
            self._hist = (hist + old_hist, old_edges, min(old_min, min_value), max(old_max, max_value), old_threshold)
            return
        if old_threshold == 0:
            hist, edges = self._bin_range(data, len(old_hist), -threshold, threshold)
            hist += old_hist
        else:
            old_num_bins = len(old_hist)
            old_stride = 2 * old_threshold / old_num_bins
            grow = (threshold - old_threshold) // old_stride + 1
            if not np.isfinite(grow):
                raise InvalidArgumentError("batch", f"widens the histogram's range [-{old_threshold}, {old_threshold}] "
                                           "beyond float32's (its bin width overflows: onnxruntime fails here too, "
                                           "'cannot convert float infinity to integer')", float(threshold))
            half = int(grow)
            new_num_bins = old_num_bins + 2 * half
            threshold = half * old_stride + old_threshold
            hist, edges = self._bin_range(data, new_num_bins, -threshold, threshold)
            hist[half:new_num_bins - half] += old_hist
        self._hist = (hist, edges, min(old_min, min_value), max(old_max, max_value), threshold)

    def _bin_range(self, data, bins: int, first, last):
        """``np.histogram(stacked data, bins, range=(first, last))``: counts and float32 edges."""
        first, last = _outer_edges(first, last)
        edges = _edges(first, last, bins)
        return _count_uniform(data, False, first, last, edges), edges

    # -- the absolute values' histogram (collect_absolute_value) -------------------------------------
    def _add_absolute(self, data, min_value, max_value):
        amin, amax = self._pending_amin, self._pending_amax          # over the non-NaN |x|
        nan = self._pending_count < data.size
        if self._hist is None:
            if data.size == 0:        # numpy's automatic range of no values: [0, 1]
                amin, amax = np.float32(0.0), np.float32(1.0)
            elif nan:                 # numpy's min / max of the stacked values propagate NaN
                amin = amax = np.float32(np.nan)
            if not (np.isfinite(amin) and np.isfinite(amax)):
                raise InvalidArgumentError("batch", f"holds NaN or inf values: the symmetric percentile histogram "
                                           f"takes its range from the data (numpy: 'autodetected range of [{amin}, "
                                           f"{amax}] is not finite'), so onnxruntime fails here too",
                                           (float(amin), float(amax)))
            first, last = _outer_edges(amin, amax)
            edges = _edges(first, last, self.num_bins).astype(np.float32)
            counts = _count_uniform(data, True, first, last, edges)
            self._hist = (counts, edges, min_value, max_value)
            return
        old_hist, old_edges, old_min, old_max = self._hist
        if data.size == 0:
            raise ShapeError("batch", "must hold at least one value in a later call of the symmetric percentile method "
                             "(onnxruntime takes np.nanmax of the call's values, which fails on none: 'zero-size "
                             "array to reduction operation fmax which has no identity')", data.shape)
        temp_amax = amax if amax >= 0 else np.float32(np.nan)       # np.nanmax: NaN when every value is NaN
        if temp_amax > old_edges[-1]:
            width = old_edges[1] - old_edges[0]
            more = (temp_amax - old_edges[-1]) / width
            if np.isfinite(more):
                check_fits((int(more) + len(old_edges) + 2,), _BIN_BYTES, "batch", "the histogram (its edges extended to "
                           f"{temp_amax} by steps of {width})")
            try:
                extra = np.arange(old_edges[-1] + width, temp_amax + width, width)
            except ValueError as e:     # the edges would pass float32's largest value
                raise InvalidArgumentError("batch", f"extends the histogram's edges up to {temp_amax} by steps of "
                                           f"{width}, which numpy cannot make (numpy: '{e}'; onnxruntime fails here "
                                           "too)", float(temp_amax)) from None
            old_edges = np.hstack((old_edges, extra))      # float64 (np.arange computes in double)
        # onnxruntime bins on these edges as they are (float64 once extended) and keeps them rounded
        counts = _count_edges(data, True, old_edges)
        edges = old_edges.astype(np.float32)
        counts[: len(old_hist)] += old_hist
        self._hist = (counts, edges, min(old_min, min_value), max(old_max, max_value))

    # -- results ------------------------------------------------------------------------------------
    def histogram(self) -> tuple[np.ndarray, np.ndarray]:
        """``(hist, hist_edges)`` so far (after a flush)."""
        self.flush()
        if self._hist is None:
            raise InvalidArgumentError("batch", "no data has been observed (onnxruntime: 'Histogram has not been "
                                       "collected. Please run collect() first.')", None)
        return self._hist[0], self._hist[1]

    def range(self) -> CalibrationRange:
        """The calibrated range (and histogram / statistics) as onnxruntime's ``compute_data()``."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):   # an empty histogram: 0 / 0
            return self._range()

    def _range(self) -> CalibrationRange:
        hist, edges = self.histogram()
        lo, hi = self._hist[2], self._hist[3]
        if self.method == "entropy":
            low, high = algorithms.entropy_threshold(hist, edges, lo, hi, self.num_quantized_bins)
            return CalibrationRange("Entropy", low, high, hist, edges)
        if self.method == "percentile":
            if hist.size < 2:
                raise InvalidArgumentError("num_bins", "must give a histogram of at least 2 bins for the percentile "
                                           "method (onnxruntime's result holds hist[0] and hist[1]: with one bin its "
                                           "calibrator fails, 'Unexpected tuple ... it has 3 elements')", hist.size)
            low, high = algorithms.percentile_threshold(hist, edges, lo, hi, self.percentile, self.symmetric)
            return CalibrationRange("Percentile", low, high, hist, edges)
        if self.num_bins < 512:
            raise InvalidArgumentError("num_bins", "must be at least 512 for the distribution method (onnxruntime: "
                                       "'Invalid num_bins. Must be in range 512 <= num_bins.')", self.num_bins)
        avg, std = algorithms.avg_std(hist, edges, 1 if self.scenario == "same" else 1.0 / 3.0)
        return CalibrationRange("Distribution", edges.min(), edges.max(), hist, edges, avg, std)

    def params(self, quant_type: str = "uint8", **options):
        """``(zero_point, scale)`` for this range (:func:`quantspec.calibrate.onnx_params`)."""
        from .params import onnx_params

        return onnx_params(self.range(), quant_type, **options)


#: the working bytes a histogram takes per bin while it grows: its edges (float32, numpy's
#: intermediate copies), a row of int64 counts per thread, their sum and the merged histogram
_BIN_BYTES = 48
#: a buffer of kept batches larger than this (float32 values) is released after its call's flush
_KEEP_BUFFER = 1 << 24
#: a call's first batch reserves room for this many batches, where that is at most _RESERVE values
_RESERVE_BATCHES = 32
_RESERVE = 1 << 22


#: the binning pass costs about this many elementwise passes per value: it goes parallel from
#: ``SERIAL_BELOW / _COST`` values (:func:`_weighted`)
_COST = 8


def _weighted(n: int) -> int:
    """``n`` values counted as the elementwise work they cost, for the pool's threshold."""
    return n * _COST


def _parts(n: int) -> int:
    """Threads that count ``n`` values (as :func:`quantspec._fastpath.runner.launch` chooses them)."""
    work = -(-n // jitted().HIST_BLOCK)
    return min(pool.threads(), work) if runner.parallel(_weighted(n)) else 1


def _count_uniform(x: np.ndarray, absolute: bool, first, last, edges: np.ndarray) -> np.ndarray:
    """``np.histogram(x or |x|, edges.size - 1, range=(first, last))``'s counts (int64), the values
    counted on the pool's threads, each into its own rows, the rows summed in integers."""
    k = jitted()
    bins = edges.size - 1
    if not x.size:
        return np.zeros(bins, np.int64)
    first, last = np.float32(first), np.float32(last)
    work = -(-x.size // k.HIST_BLOCK)
    step = _formula_step(edges, first, last)
    if step is not None:
        rows = np.zeros((_parts(x.size), bins + 1), np.int64)      # the last column: values not counted
        runner.launch(k.histogram_formula_parts, (x, bool(absolute), first, last, first, step, rows,
                                                np.zeros(2, np.int64)), work, _weighted(x.size))
        return rows[:, :bins].sum(axis=0)
    _check_width(x, absolute, first, last)
    rows = np.zeros((_parts(x.size), bins), np.int64)
    runner.launch(k.histogram_uniform_parts, (x, bool(absolute), first, last, edges, rows, np.zeros(2, np.int64)),
                work, _weighted(x.size))
    return rows.sum(axis=0)


def _check_width(x: np.ndarray, absolute: bool, first, last) -> None:
    """A range wider than float32's largest value (``last - first`` is inf): numpy's index of a value
    ``v`` is then ``((v - first) / inf) * bins``, NaN where ``v - first`` overflows too, and numpy's
    ``np.histogram`` (so onnxruntime) fails there with an IndexError (the NaN index cast to
    INT64_MIN); the pass would skip such values.  Refused as numpy refuses it."""
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.float32(last) - np.float32(first)):
            return
        v = np.abs(x) if absolute else x
        kept = v[(v >= first) & (v <= last)]
        if np.isinf(kept - np.float32(first)).any():
            raise InvalidArgumentError("batch", f"gives a histogram range [{first}, {last}] wider than float32's "
                                       "largest value, with values whose distance from its start overflows: numpy's "
                                       "histogram, and so onnxruntime, fails there (an IndexError)",
                                       (float(first), float(last)))


def _formula_step(edges: np.ndarray, first, last):
    """The float32 step of ``np.linspace(first, last, bins + 1)`` when ``edges`` are exactly its
    formula (``float32(k * step) + first``, checked edge by edge, and ``last``) and the index
    arithmetic stays exact in float32 (at most 2^24 bins, a finite positive width); else None."""
    bins = edges.size - 1
    if edges.dtype != np.float32 or not 1 <= bins <= 1 << 24 or edges[0] != first or edges[-1] != last:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        denom = np.float32(last - first)
        step = np.float32(denom / np.float32(bins))
    if not (np.isfinite(denom) and denom > 0 and np.isfinite(step) and step > 0):
        return None
    return step if jitted().uniform_edges_formula(edges, first, step) else None


def _count_edges(x: np.ndarray, absolute: bool, edges: np.ndarray) -> np.ndarray:
    """``np.histogram(x or |x|, bins=edges)``'s counts (int64) for increasing float32 or float64 ``edges``, on
    the pool's threads as :func:`_count_uniform`."""
    k = jitted()
    rows = np.zeros((_parts(x.size), edges.size - 1), np.int64)
    if x.size:
        runner.launch(k.histogram_edges_parts, (x, bool(absolute), edges, rows, np.zeros(2, np.int64)),
                    -(-x.size // k.HIST_BLOCK), _weighted(x.size))
    return rows.sum(axis=0)


def _edges(first, last, bins: int) -> np.ndarray:
    """``np.histogram``'s uniform bin edges over [first, last], refused as numpy refuses them."""
    check_fits((bins + 1,), _BIN_BYTES, "batch", f"the histogram ({bins} bins: its range grown by a later call, by "
               "whole bins of the first call's width)")
    edges = np.linspace(first, last, bins + 1, endpoint=True, dtype=np.result_type(first, last, np.float32))
    if np.any(edges[:-1] >= edges[1:]):
        raise InvalidArgumentError("num_bins", f"is too large for the data's range (numpy: 'Too many bins for "
                                   f"data range. Cannot create {bins} finite-sized bins.')", bins)
    return edges


def _outer_edges(first, last):
    """numpy's ``_get_outer_edges`` for a given range: an empty range widened by 0.5 on each side."""
    if not (np.isfinite(first) and np.isfinite(last)):
        raise InvalidArgumentError("batch", f"gives a histogram range that is not finite ([{first}, {last}]: every "
                                   "value NaN, or an infinity); numpy, and so onnxruntime, fails here too",
                                   (float(first), float(last)))
    if first == last:
        first = first - 0.5
        last = last + 0.5
    return first, last


class EntropyObserver(HistogramObserver):
    """``create_calibrator(..., CalibrationMethod.Entropy)``: ``num_bins=128``,
    ``num_quantized_bins=128``, ``symmetric=False`` by default."""

    def __init__(self, *, num_bins: int = 128, num_quantized_bins: int = 128, symmetric: bool = False):
        super().__init__("entropy", symmetric=symmetric, num_bins=num_bins, num_quantized_bins=num_quantized_bins)


class PercentileObserver(HistogramObserver):
    """``create_calibrator(..., CalibrationMethod.Percentile)``: ``num_bins=2048``,
    ``percentile=99.999``, ``symmetric=True`` by default (the histogram of absolute values)."""

    def __init__(self, *, num_bins: int = 2048, percentile: float = 99.999, symmetric: bool = True):
        super().__init__("percentile", symmetric=symmetric, num_bins=num_bins, percentile=percentile)


class DistributionObserver(HistogramObserver):
    """``create_calibrator(..., CalibrationMethod.Distribution)``: ``num_bins=2048``,
    ``scenario="same"`` by default; the range is the histogram's edges, with ``avg`` / ``std``."""

    def __init__(self, *, num_bins: int = 2048, scenario: str = "same"):
        super().__init__("distribution", num_bins=num_bins, scenario=scenario)
