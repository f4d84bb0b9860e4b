"""MEAN and SUM as LiteRT's optimized int8 kernels compute them (``tflite/kernels/reduce.cc`` with
``kGenericOptimized``).

**MEAN** over the two spatial axes of a 4-D input with ``keep_dims`` (``optimized_integer_ops::Mean``;
every other MEAN runs the reference kernel)::

    bias  = z_out - (int)(f32(z_in * s_in / s_out) ± 0.5f)        (float32, truncated)
    (M, e) = QuantizeMultiplier(f32(s_in / f32(H·W · s_out)))
    out[c] = clamp(requantize(Σ_{h,w} q[h, w, c], M, e) + bias)     (the raw sum: no zero point)

The channels are split between threads (``min(C // 8, num_threads)`` ranges of nearly equal size);
within each range, blocks of 16 channels requantize half-up (:func:`._lanes.mbqm_half_up`) and the
rest with the reference ``MultiplyByQuantizedMultiplier``.  So the bytes depend on the thread
count; the interpreter's ``num_threads`` (LiteRT's default is 1) says how many.

**SUM** (``optimized_ops::QuantizedMeanOrSum``) in float32, with ``S`` the int32 sum of the raw
values and ``n`` the number of reduced elements::

    scale = f32(s_in / s_out);   bias = f32(f32(-z_in * scale) * f32(n))
    out = clamp(int32(roundf(f32(f32(S) * scale) + bias)) + z_out)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...._semantics.rounding import half_away_from_zero
from ....errors import UnsupportedError
from ... import fixedpoint as fp
from ...fixedpoint import wrap_int32
from .. import _common as c
from .. import reduce as ref
from ..shape_arithmetic import ReduceProd as _ReferenceProd
from ._lanes import block_mask, mbqm_half_up, mbqm_reference

__all__ = ["Mean", "Sum", "ReduceProd", "thread_ranges"]

_INT8 = np.dtype(np.int8)
_THREADS = "quantspec_num_threads"
INT32_MIN = -(1 << 31)


def thread_ranges(depth: int, threads: int, min_per_thread: int = 8) -> list[tuple[int, int]]:
    """How ``optimized_integer_ops::Mean`` splits ``depth`` channels between threads."""
    count = max(depth // min_per_thread, 1)
    count = min(count, threads)
    ranges, start = [], 0
    for i in range(count):
        end = start + (depth - start) // (count - i)
        ranges.append((start, end))
        start = end
    return ranges


@dataclass(frozen=True)
class MeanOptimized:
    base: ref.ReduceParams
    threads: int
    multiplier: int                 # of the 4-D spatial path
    shift: int
    bias: int


def _strip(options):
    options = dict(options or {})
    threads = c.option(options, _THREADS, 1, kind=int)
    options.pop(_THREADS, None)
    return options, threads


class Mean(ref.Mean):
    """MEAN, optimized: the 4-D spatial mean with ``keep_dims`` (thread-dependent), else the
    reference kernel."""

    def prepare(self, inputs, outputs, options) -> MeanOptimized:
        options, threads = _strip(options)
        p = super().prepare(inputs, outputs, options)
        s_in, z_in = c.activation(self.name, "input", inputs[0])
        s_out, _ = c.activation(self.name, "output", outputs[0])
        m = e = bias = 0
        if len(p.shape) == 4 and p.keep_dims:
            h, w = p.shape[1], p.shape[2]
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                temp = np.float32(np.float32(z_in) * s_in) / s_out
                temp = temp + np.float32(0.5) if temp > 0 else temp - np.float32(0.5)
                real = s_in / (np.float32(h * w) * s_out)
            if not (np.isfinite(temp) and abs(temp) < 2.0 ** 31):
                raise UnsupportedError("MEAN", "z_in * s_in / s_out does not fit int32 (the optimized kernel's "
                                       "cast is undefined behaviour)", float(temp))
            bias = int(wrap_int32(np.int64(p.output_zero_point) - int(temp)))
            if h * w > 0 and np.isfinite(real) and real > 0:
                m, e = fp.quantize_multiplier(float(real))
                if e > 30:
                    raise UnsupportedError("MEAN output", "a scale s_in / (H·W·s_out) >= 2^30 needs a left shift of "
                                           "31 or more, undefined in LiteRT's C++", float(real))
        return MeanOptimized(p, threads, int(m), int(e), bias)

    def compute(self, q: MeanOptimized, arrays):
        p = q.base
        axes = p.axes
        if axes is None:
            (a,) = c.check_arrays(p.op, arrays, [(1, p.axis_shape, np.dtype(np.int32))])
            axes = ref.resolve_axes(p.op, a, len(p.shape))
        if not (len(p.shape) == 4 and p.keep_dims and len(axes) == 2 and set(axes) == {1, 2}
                and 0 not in p.shape):
            return super().compute(p, arrays)
        (x,) = c.check_arrays(p.op, arrays, [(0, p.shape, _INT8)])
        total = x.astype(np.int64).sum(axis=(1, 2))                       # (N, C); |S| < 2^31 for int8 sizes
        total = wrap_int32(total).astype(np.int64)
        depth = p.shape[3]
        vector = np.zeros(depth, bool)
        for start, end in thread_ranges(depth, q.threads):
            vector[start:end] = block_mask(end - start, 16)
        y = np.where(vector, mbqm_half_up(total, q.multiplier, q.shift),
                     mbqm_reference(total, q.multiplier, q.shift))
        out = np.clip(wrap_int32(y + q.bias), -128, 127).astype(np.int8)
        return [out.reshape(p.shape[0], 1, 1, depth)]


@dataclass(frozen=True)
class SumOptimized:
    base: ref.ReduceParams
    scale: np.float32
    bias_per_element: np.float32     # f32(-z_in * scale)


class Sum(ref.Sum):
    """SUM, optimized: the float32 formula of the module docstring."""

    def prepare(self, inputs, outputs, options) -> SumOptimized:
        options, _ = _strip(options)
        options.pop("quantspec_sum_semantics", None)
        p = super().prepare(inputs, outputs, options)
        s_in, z_in = c.activation(self.name, "input", inputs[0])
        s_out, _ = c.activation(self.name, "output", outputs[0])
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            scale = np.float32(s_in / s_out)
            per = np.float32(np.float32(-z_in) * scale)
        return SumOptimized(p, scale, per)

    def compute(self, q: SumOptimized, arrays):
        p = q.base
        x, axes, out_shape, n = ref.reduction(p, arrays, _INT8)
        if x.size == 0 or n == 0:
            return [np.zeros(out_shape, np.int8)]
        values = x.astype(np.int64)
        total = wrap_int32(values.sum(axis=axes) if axes else values)
        with np.errstate(over="ignore", invalid="ignore"):
            bias = np.float32(q.bias_per_element * np.float32(n))
            v = half_away_from_zero(np.float32(total.astype(np.float32) * q.scale) + bias).astype(np.float32)
            inside = (v >= np.float32(-2.0 ** 31)) & (v < np.float32(2.0 ** 31))
            r = np.where(inside, v, INT32_MIN).astype(np.int64)
        out = np.clip(wrap_int32(r + p.output_zero_point), -128, 127).astype(np.int8)
        return [np.asarray(out).reshape(out_shape)]


class ReduceProd(_ReferenceProd):
    """REDUCE_PROD on quantized int8 / int16 (``optimized_ops::QuantizedReduceProd``): the reference
    arithmetic, except that a reduction over no axis of size > 1 copies the input bytes
    (:func:`..reduce.quantized_prod`)."""

    activations = ("int8", "int16")

    def compute(self, p, arrays):
        if isinstance(p, ref.ProdParams):
            return ref.quantized_prod(p, arrays, optimized=True)
        return super().compute(p, arrays)
