"""From a histogram to a range: the entropy, percentile and distribution methods of onnxruntime's
``HistogramCollector``, with its arithmetic (the same float32 / float64 numpy operations on the same
arrays, so the same bits).

- :func:`percentile_threshold`: the cumulative distribution ``cumsum(hist / total)`` (float64) and
  the bin edges where it reaches the percentile (``np.searchsorted``); symmetric: ``(-e, e)`` at
  ``percentile / 100``; else the two tails ``(100 - percentile) / 200`` each; then clamped to the
  data's min and max.
- :func:`entropy_threshold`: for each candidate width ``i`` from ``num_quantized_bins // 2`` to the
  middle bin, the reference distribution ``p`` (the central bins, outliers added to the end bins)
  against ``q`` (``p`` merged into ``num_quantized_bins`` groups and spread back over each group's
  non-empty bins, integer division truncated), both smoothed (zeros replaced by 1e-4, taken from
  the others) and compared by KL divergence in float32; the lowest divergence wins (the first on
  ties), clamped to the data's min and max.  :func:`entropy_threshold` computes every candidate in
  two fused passes (numpy's float32 pairwise summation reproduced, numpy's ``log`` in between);
  :func:`entropy_threshold_reference` one candidate at a time with numpy (onnxruntime's float32
  operations on arrays of the same shapes; its integer sums from prefix sums and
  ``np.add.reduceat``, the same integers as its Python loops).
- :func:`avg_std`: the mean and standard deviation of the bin centres weighted by the counts
  (``scenario="p3"``: of their cube roots), float64 reductions stored as float32.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._semantics.arrays import check_fits
from ..errors import InvalidArgumentError, TooLargeError
from ._load import jitted

__all__ = ["percentile_threshold", "entropy_threshold", "entropy_threshold_reference", "avg_std", "smooth",
           "kl_divergence"]


def _clamp(low, high, min_value, max_value):
    if low < min_value:
        low = min_value
    if high > max_value:
        high = max_value
    return low, high


def percentile_threshold(hist, edges, min_value, max_value, percentile, symmetric: bool):
    if percentile < 0 or percentile > 100:
        raise InvalidArgumentError("percentile", "must be in [0, 100] (onnxruntime: 'Invalid percentile. Must be in "
                                   "range 0 <= percentile <= 100.')", percentile)
    cdf = np.cumsum(hist / hist.sum())
    if symmetric:
        right = np.searchsorted(cdf, percentile / 100.0)
        edge = np.array(edges[right], dtype=edges.dtype)
        low, high = -edge, edge
    else:
        tail = (100.0 - percentile) / 200.0
        right = np.searchsorted(cdf, 1.0 - tail)
        left = np.searchsorted(cdf, tail)
        low, high = np.array(edges[left], dtype=edges.dtype), np.array(edges[right], dtype=edges.dtype)
    return _clamp(low, high, min_value, max_value)


def smooth(p: np.ndarray, eps: float = 0.0001) -> np.ndarray | None:
    """A distribution with its zeros replaced by ``eps`` and the mass taken evenly from the others
    (float32), or None when it is all zeros."""
    zeros = (p == 0).astype(np.float32)
    nonzeros = (p != 0).astype(np.float32)
    n_zeros = zeros.sum()
    n_nonzeros = p.size - n_zeros
    if not n_nonzeros:
        return None
    eps1 = eps * float(n_zeros) / float(n_nonzeros)
    if not eps1 < 1.0:
        raise InvalidArgumentError("num_quantized_bins", "leaves too few non-empty bins to smooth the distribution "
                                   f"(onnxruntime fails here too: eps1={eps1})", int(n_zeros))
    out = p.astype(np.float32)
    out += eps * zeros + (-eps1) * nonzeros
    return out


def kl_divergence(p: np.ndarray, q: np.ndarray) -> np.float32:
    """KL(p || q) of two non-normalised float32 distributions, in float32."""
    pk = np.asarray(p).astype(np.float32)
    pk = 1.0 * pk / np.sum(pk, axis=0, keepdims=True)
    qk = np.asarray(q).astype(np.float32)
    pk, qk = np.broadcast_arrays(pk, qk)
    qk = 1.0 * qk / np.sum(qk, axis=0, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.empty(pk.shape, dtype=pk.dtype)
        terms[:] = pk * np.log(pk / qk)
    terms[(pk == 0) & (qk >= 0)] = 0
    terms[~((pk > 0) & (qk > 0))] = np.inf
    return np.sum(terms, axis=0).astype(pk.dtype)


#: values of candidate distributions the entropy search holds at once (each takes about 36 bytes of
#: working arrays: the float32 distributions, ratios, logs and terms, the int64 counts)
ENTROPY_GROUP = 1 << 22
#: the most candidate values the entropy search weighs (about bins^2 / 4; 2^31 takes seconds to a
#: minute); a histogram grown past that by a later call is refused
ENTROPY_LIMIT = 1 << 31


def entropy_threshold(hist, edges, min_value, max_value, num_quantized_bins: int):
    """The entropy method's range: every candidate width in two fused passes (the integer
    distributions, their smoothing, normalisation and ratio; then the divergences), numpy's float32
    ``log`` in between (``quantspec.calibrate._jitted.entropy_prepare`` / ``entropy_finish``), the same
    bits as :func:`entropy_threshold_reference`."""
    k = jitted()
    num_bins = hist.size
    zero = num_bins // 2
    half_q = num_quantized_bins // 2
    count = zero - half_q + 1
    if half_q < 1 and count >= 1:     # one quantized bin: the candidates start at width 1 (the numpy path)
        return entropy_threshold_reference(hist, edges, min_value, max_value, num_quantized_bins)
    if count < 1 or half_q < 1:
        raise InvalidArgumentError("num_quantized_bins", f"must be between 2 and about the number of bins ({num_bins}) "
                                   "for the entropy method", num_quantized_bins)
    widths = np.array([min(zero + i + 1, num_bins) - (zero - i) for i in range(half_q, zero + 1)], np.int64)
    offsets = np.concatenate([[0], np.cumsum(widths)]).astype(np.int64)
    # the candidates in groups of about ENTROPY_GROUP values (every candidate is computed on its own,
    # so the grouping changes no bit): the working arrays of a histogram grown to many bins (their
    # values number about bins^2 / 4) stay a few hundred MB, not all at once
    total = int(offsets[-1])
    if total > ENTROPY_LIMIT:
        raise TooLargeError("batch", f"grows the entropy method's histogram to {num_bins} bins (from the first call's "
                            f"range, by the later calls'): its search would weigh {total} candidate values (about "
                            f"bins^2 / 4), more than quantspec's limit of {ENTROPY_LIMIT} (onnxruntime would loop "
                            "that many Python steps)", total)
    hist64 = np.ascontiguousarray(hist, np.int64)
    state = np.zeros(count, np.int64)
    divergences = np.empty(count)
    c0 = 0
    while c0 < count:
        c1 = int(np.searchsorted(offsets, offsets[c0] + max(ENTROPY_GROUP, int(widths[c0])), "right")) - 1
        c1 = min(max(c1, c0 + 1), count)
        offs = offsets[c0:c1 + 1] - offsets[c0]
        size = int(offs[-1])
        check_fits((size,), 36, "batch", f"the entropy method's candidate distributions (a histogram of {num_bins} "
                   "bins, grown from the first call's range by the later calls')")
        pk, qk, ratio = np.empty(size, np.float32), np.empty(size, np.float32), np.ones(size, np.float32)
        k.entropy_prepare(hist64, zero, half_q + c0, num_quantized_bins, offs, pk, qk, ratio, state[c0:c1])
        if np.any(state[c0:c1] < 0):
            raise InvalidArgumentError("num_quantized_bins", "leaves too few non-empty bins to smooth the distribution "
                                       "(onnxruntime fails here too)", num_quantized_bins)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log(ratio)
        k.entropy_finish(offs, pk, qk, logs, state[c0:c1], np.empty(size, np.float32), divergences[c0:c1])
        c0 = c1
    best = int(np.argmin(divergences))
    i = half_q + best
    low, high = edges[zero - i], edges[min(zero + i + 1, num_bins)]
    return _clamp(low, high, min_value, max_value)


def entropy_threshold_reference(hist, edges, min_value, max_value, num_quantized_bins: int):
    """The entropy method one candidate at a time with numpy (the readable path)."""
    num_bins = hist.size
    zero = num_bins // 2
    half_q = num_quantized_bins // 2
    dtype = edges.dtype
    count = zero - half_q + 1
    if count < 1:
        raise InvalidArgumentError("num_quantized_bins", f"must be at most about the number of bins ({num_bins}) for "
                                   "the entropy method", num_quantized_bins)
    divergences = np.zeros(count)
    bounds = []
    prefix = np.concatenate([[0], np.cumsum(hist)])
    total = prefix[-1]
    for i in range(half_q, zero + 1):
        start = zero - i
        end = min(zero + i + 1, num_bins)
        bounds.append((edges[start], edges[end]))
        sliced = hist[start:end]
        p = sliced.copy()
        p[0] += prefix[start]
        p[-1] += total - prefix[end]
        merged = sliced.size // num_quantized_bins
        whole = num_quantized_bins * merged
        groups = np.arange(0, whole, merged) if merged else np.zeros(0, np.int64)
        quantized = np.add.reduceat(sliced[:whole], groups) if merged else np.zeros(num_quantized_bins, np.int64)
        quantized = quantized.astype(np.int64)
        quantized[-1] += sliced[whole:].sum()
        q = np.zeros(p.size, np.int64)
        if merged:
            nonzero = (p[:whole] != 0).astype(np.int64)
            norms = np.add.reduceat(nonzero, groups)
            with np.errstate(divide="ignore", invalid="ignore"):
                spread = np.where(norms != 0, quantized / np.where(norms != 0, norms, 1), 0)
            q[:whole] = np.repeat(spread.astype(np.int64), merged)
        ps, qs = smooth(p), smooth(q)
        if ps is None or qs is None:
            divergences[i - half_q] = np.array(np.inf, dtype=dtype)
        else:
            divergences[i - half_q] = np.array(kl_divergence(ps, qs), dtype=dtype)
    best = int(np.argmin(divergences))
    low, high = bounds[best]
    return _clamp(low, high, min_value, max_value)


def avg_std(hist, edges, power=1):
    """The weighted mean and standard deviation of the bin centres (``power`` other than 1: of their
    signed ``power``-th powers), as float32 0-d arrays."""
    if power <= 0:
        raise InvalidArgumentError("power", "must be > 0", power)
    values = (edges[:-1] + edges[1:]) * 0.5
    if power == 1:
        avg = (hist * values).sum() / hist.sum()
        std = ((hist * values ** 2).sum() / hist.sum() - avg ** 2) ** 0.5
        return np.array(avg, dtype=edges.dtype), np.array(std, dtype=edges.dtype)
    if int(power) == power and int(power) % 2 == 1:
        avg = (hist * values ** power).sum() / hist.sum()
        std = ((hist * (values ** power - avg) ** 2).sum() / hist.sum()) ** 0.5
        return np.array(avg, dtype=edges.dtype), np.array(std, dtype=edges.dtype)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sign = np.abs(values) / values
    sign[np.isnan(sign)] = 1
    sign[np.isinf(sign)] = 1
    values = np.abs(values) ** power * sign
    avg = (hist * values).sum() / hist.sum()
    std = ((hist * values ** 2).sum() / hist.sum() - avg ** 2) ** 0.5
    return np.array(avg, dtype=edges.dtype), np.array(std, dtype=edges.dtype)
