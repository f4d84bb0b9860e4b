"""QuantizeAndDequantizeV2 / V3 / V4: simulated quantization of a float32 or float64 tensor.

TensorFlow's ``quantize_and_dequantize_op.h``.  V2 and V4 share one forward kernel (V4 differs only in its gradient); V3
takes ``num_bits`` as a tensor, defaults ``range_given`` to True and always rounds half to even.
Every operation is in the input's own type (float or double), with flush-to-zero.

Prepare, then compute: :func:`prepare_qdq` finds the range of each slice (the given one, or the
data's min and max) and the kernel's ``scale`` / ``inverse_scale`` (``ComputeQuantizationRange``);
:func:`compute_qdq` is ``R(clamp(x, min, max) * scale) * inverse_scale`` — without the clamp when
the range was not given; :func:`run_plan` runs the fused kernel of :mod:`quantspec.tf.fast` instead
where the fast path covers the plan (the same bytes).

TensorFlow 2.21 regression: V2 and V4 with ``range_given=True`` and an axis fail with "input_min must
be a scalar."; quantspec computes the intended per-axis result, which is what V3 computes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._semantics.arrays import check_fits
from .._semantics.rounding import half_to_even
from ..errors import RangeError, ShapeError
from . import _args, _eigen, fast, spec
from ._fp import clamp, fadd, fdiv, fmul, ftz
from .quantize_op import slices

__all__ = ["QDQPlan", "prepare_qdq", "compute_qdq", "run_plan", "quantize_and_dequantize_v2",
           "quantize_and_dequantize_v3", "quantize_and_dequantize_v4"]


@dataclass(frozen=True)
class QDQPlan:
    """Per-slice ``lo``, ``hi`` (the clamp range, only used when ``clamp``), ``scale`` and ``inv``
    (1-D arrays in the input's dtype)."""

    round_mode: str
    clamp: bool
    axis: int | None
    lo: np.ndarray
    hi: np.ndarray
    scale: np.ndarray
    inv: np.ndarray


def quantization_range(signed: bool, num_bits: int, narrow_range: bool, mn: np.ndarray, mx: np.ndarray):
    """``ComputeQuantizationRange``: the scale that maps [mn, mx] into the integer range without
    moving 0, its inverse, and the range adjusted on the side that did not set the scale."""
    t = mn.dtype.type
    min_q = (-(1 << (num_bits - 1)) + (1 if narrow_range else 0)) if signed else 0
    max_q = (1 << (num_bits - 1)) - 1 if signed else (1 << num_bits) - 1
    fmin_q = np.array(min_q, np.int64).astype(mn.dtype)[()]    # int64 -> T, nearest even
    fmax_q = np.array(max_q, np.int64).astype(mn.dtype)[()]
    big = t(np.finfo(mn.dtype).max)
    with np.errstate(divide="ignore", invalid="ignore"):
        s_min = np.where(fmul(fmin_q, mn) > 0, fdiv(fmin_q, mn), big)
        s_max = np.where(fmul(fmax_q, mx) > 0, fdiv(fmax_q, mx), big)
    from_min = s_min < s_max
    scale = np.where(from_min, s_min, s_max)
    inv = np.where(from_min, fdiv(mn, fmin_q), fdiv(mx, fmax_q))
    lo = np.where(from_min, mn, fmul(fmin_q, inv))
    hi = np.where(from_min, fmul(fmax_q, inv), mx)
    return (np.asarray(a, mn.dtype) for a in (lo, hi, scale, inv))


def _data_range(x3: np.ndarray, axis: int | None):
    """The min and max of each slice of the data, as the kernel's Eigen reductions find them: the
    whole tensor through Eigen's full reduction, each slice of an axis through its generic reducer.
    Where NaN elements are, they are skipped, or replace what was reduced before them, or become the
    range (:mod:`quantspec.tf._eigen`; docs/tensorflow.md, "NaN")."""
    if axis is None:
        mn, mx = _eigen.full_min_max(x3)
        return np.asarray(mn, x3.dtype).reshape(1), np.asarray(mx, x3.dtype).reshape(1)
    return _eigen.axis_min_max(x3)


def prepare_qdq(x: np.ndarray, input_min, input_max, *, version: int, signed_input=True, num_bits=8,
                range_given=False, round_mode="HALF_TO_EVEN", narrow_range=False, axis=None) -> QDQPlan:
    """Check a QuantizeAndDequantize call and compute its per-slice parameters."""
    signed = _args.flag(signed_input, "signed_input")
    if version == 3:
        nb = np.asarray(num_bits) if isinstance(num_bits, (np.ndarray, np.generic)) else num_bits
        if isinstance(nb, np.ndarray):
            if nb.ndim != 0:
                raise ShapeError("num_bits", "must be a scalar (TensorFlow: 'Invalid shape. The `num_bits` tensor "
                                 "should be a scalar')", nb.shape)
            nb = nb[()]
        num_bits = nb
    num_bits = _args.integer(num_bits, "num_bits")
    top = spec.QDQ_MAX_BITS[signed]
    if not 0 < num_bits <= top:
        raise RangeError("num_bits", f"must be in [1, {top}] with signed_input={signed} "
                         "(TensorFlow: 'num_bits is out of range')", num_bits)
    range_given = _args.flag(range_given, "range_given")
    round_mode = "HALF_TO_EVEN" if version == 3 else _args.choice(round_mode, "round_mode", spec.QDQ_ROUND_MODES)
    narrow_range = _args.flag(narrow_range, "narrow_range")
    ax = _args.axis_of(axis, x.ndim)
    check_fits(x.shape, x.dtype.itemsize)    # the result (and a copy, when a view cannot be reshaped)
    x3 = slices(x, ax)
    channels = x3.shape[1]
    if range_given:
        mn = _args.param(input_min, "input_min", x.dtype)
        mx = _args.param(input_max, "input_max", x.dtype)
        for name, a in (("input_min", mn), ("input_max", mx)):
            if ax is None and version != 3 and a.ndim != 0:
                raise ShapeError(name, "must be a scalar when no axis is given (TensorFlow: 'input_min must be a "
                                 "scalar.')", a.shape)
            if ax is None and a.size != 1:  # V3: TensorFlow CHECK-fails (aborts the process) here
                raise ShapeError(name, "must hold a single value when no axis is given (TensorFlow aborts the "
                                 "process otherwise)", a.shape)
            if ax is not None and a.ndim != 1:
                raise ShapeError(name, "must be 1-D when an axis is given (TensorFlow: 'Shape must be rank 1 for "
                                 "input_min_tensor when the axis is specified')", a.shape)
            if ax is not None and a.shape[0] != channels:
                raise ShapeError(name, f"must have one value per slice of axis {ax}: {channels} (TensorFlow: "
                                 "'input_min_tensor has incorrect size')", a.shape)
        mn, mx = ftz(mn.reshape(channels)), ftz(mx.reshape(channels))
        if ax is None and not mn[0] <= mx[0]:
            raise RangeError("input_min", "must not be larger than input_max (TensorFlow: 'Invalid range: "
                             "input_min > input_max'; NaN is refused too)", (mn[0].item(), mx[0].item()))
    else:
        mn, mx = _data_range(ftz(x3), ax)
    lo, hi, scale, inv = quantization_range(signed, num_bits, narrow_range, mn, mx)
    return QDQPlan(round_mode, range_given, ax, lo, hi, scale, inv)


def compute_qdq(x: np.ndarray, plan: QDQPlan) -> np.ndarray:
    x3 = ftz(slices(x, plan.axis))
    lo, hi, scale, inv = (a[None, :, None] for a in (plan.lo, plan.hi, plan.scale, plan.inv))
    if plan.clamp:
        x3 = clamp(x3, lo, hi)
    v = fmul(x3, scale)
    if plan.round_mode == "HALF_TO_EVEN":
        v = half_to_even(v)
    else:  # HALF_UP: floor(v + 0.5) in the input's type -- inexact near 0.5 and above 2^23
        v = np.floor(fadd(v, x.dtype.type(0.5)))
    y = fmul(v, inv)
    if np.isnan(plan.inv).any():
        y = _nan_times_nan(v, inv, y, plan)
    return y.reshape(x.shape)


def run_plan(x: np.ndarray, plan: QDQPlan, out: np.ndarray | None = None) -> np.ndarray:
    """``x`` through ``plan``: the fused kernel where :func:`quantspec.tf.fast.path_qdq` takes it, else
    :func:`compute_qdq`.  ``out``: an array of ``x``'s shape and dtype that receives the result."""
    if x.dtype == np.dtype(np.float32) and fast.path_qdq(plan) == "fast":
        return fast.qdq(x, plan, out=out)
    y = compute_qdq(x, plan)
    if out is None:
        return y
    out[...] = y
    return out


def _keeps_v(plan: QDQPlan, shape: tuple[int, int, int]) -> np.ndarray | None:
    """Where TensorFlow's kernel keeps the payload of ``v`` in ``v * inv`` when both are NaN ([outer, 1,
    inner], for every slice), or None where it keeps ``inv``'s everywhere.  The scalar loops keep
    ``inv``'s; the packet loops keep the operand the compiler put first, which differs between the
    kernel's instantiations (measured on TensorFlow 2.21, float32 and float64 alike):

    ============================  ==============  ===========================
    kernel                        HALF_TO_EVEN    HALF_UP
    ============================  ==============  ===========================
    range given (clamp)           v               v
    per-tensor, range not given   inv             inv
    per-axis, range not given     inv             v (tiled evaluation)
    ============================  ==============  ===========================

    The clamping kernel runs over each slice's outer * inner results in row-major order (packets,
    then a scalar tail); the per-axis HALF_UP kernel without a range is evaluated in tiles
    (:func:`quantspec.tf._eigen.vectorised_blocks`)."""
    outer, channels, inner = shape
    packet = _eigen.PACKET[plan.scale.dtype]
    if plan.clamp:
        return _eigen.vectorised(outer * inner, packet).reshape(outer, 1, inner)
    if plan.axis is not None and plan.round_mode == "HALF_UP":
        target = _eigen.BLOCK[plan.scale.dtype]
        return _eigen.vectorised_blocks(outer, channels, inner, packet, target).reshape(outer, 1, inner)
    return None


def _nan_times_nan(v: np.ndarray, inv: np.ndarray, y: np.ndarray, plan: QDQPlan) -> np.ndarray:
    """The payload of ``v * inv`` where both are NaN: x86 keeps one operand's, quieted, and which one
    depends on the machine code (numpy's own loops pick either, by position); :func:`_keeps_v`."""
    both = np.isnan(v) & np.isnan(inv)
    if not both.any():
        return y
    uint = {4: np.uint32, 8: np.uint64}[v.dtype.itemsize]
    quiet = uint(1 << (np.finfo(v.dtype).nmant - 1))
    keep = np.broadcast_to(inv, v.shape)
    keeps_v = _keeps_v(plan, v.shape)
    if keeps_v is not None:
        keep = np.where(keeps_v, v, keep)
    bits = np.where(both, keep.view(uint) | quiet, y.view(uint))
    return bits.view(v.dtype)


def _qdq(version, x, input_min, input_max, **kw) -> np.ndarray:
    op = {2: "QuantizeAndDequantizeV2", 3: "QuantizeAndDequantizeV3", 4: "QuantizeAndDequantizeV4"}[version]
    x = _args.tensor(x, "x", spec.QDQ_DTYPES, op)
    if version == 3 and x.ndim == 0:
        raise ShapeError("x", f"must have at least one dimension for {op} (TensorFlow 2.21 refuses a scalar: "
                         "'Axis requested is larger than input dimensions. Axis: -1 Input Dimensions: 0')", x.shape)
    plan = prepare_qdq(x, input_min, input_max, version=version, **kw)
    return run_plan(x, plan)


def quantize_and_dequantize_v2(x, input_min=None, input_max=None, *, signed_input=True, num_bits=8,
                               range_given=False, round_mode="HALF_TO_EVEN", narrow_range=False, axis=None):
    """TensorFlow ``QuantizeAndDequantizeV2``.  ``input_min`` / ``input_max`` are only read when
    ``range_given``; with an axis they hold one value per slice (where TensorFlow 2.21 itself fails,
    see the module docstring)."""
    return _qdq(2, x, input_min, input_max, signed_input=signed_input, num_bits=num_bits, range_given=range_given,
                round_mode=round_mode, narrow_range=narrow_range, axis=axis)


def quantize_and_dequantize_v3(x, input_min, input_max, num_bits, *, signed_input=True, range_given=True,
                               narrow_range=False, axis=None):
    """TensorFlow ``QuantizeAndDequantizeV3`` (rounds half to even; ``num_bits`` is an integer or a
    0-d integer array)."""
    return _qdq(3, x, input_min, input_max, signed_input=signed_input, num_bits=num_bits, range_given=range_given,
                narrow_range=narrow_range, axis=axis)


def quantize_and_dequantize_v4(x, input_min=None, input_max=None, *, signed_input=True, num_bits=8,
                               range_given=False, round_mode="HALF_TO_EVEN", narrow_range=False, axis=None):
    """TensorFlow ``QuantizeAndDequantizeV4`` (``tf.quantization.quantize_and_dequantize_v2``): the
    forward result of V2; V4 differs only in its gradient."""
    return _qdq(4, x, input_min, input_max, signed_input=signed_input, num_bits=num_bits, range_given=range_given,
                round_mode=round_mode, narrow_range=narrow_range, axis=axis)
