"""FakeQuantWithMinMaxArgs / Vars / VarsPerChannel: simulated quantization of a float32 tensor.

TensorFlow's ``fake_quant_ops_functor.h``.  ``Nudge`` moves [min, max] so that 0.0 falls on the integer grid
``[quant_min, quant_max]`` = ``[narrow_range ? 1 : 0, 2^num_bits - 1]``; then

    y = floor(clamp(x, nudged_min, nudged_max) - nudged_min) * inv_scale - quant_zero + 0.5) * scale

where Args and VarsPerChannel multiply by ``inv_scale`` = (quant_max - quant_min) / (max - min),
computed on its own (not 1 / scale), while Vars **divides** by ``scale``: the two differ in the last
bit for some inputs (at 16 bits visibly).  Vars and VarsPerChannel return 0 for a slice with
min == max == 0 and do not check min < max.  All arithmetic is float32 with flush-to-zero.

:func:`compute_fake_quant` is the readable reference path; :func:`run_plan` runs the fused kernel of
:mod:`quantspec.tf.fast` instead when the fast path is on (the same bytes, for every float32 input).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._semantics.arrays import check_fits
from .._semantics.rounding import half_away_from_zero
from ..errors import RangeError, ShapeError
from . import _args, fast, spec
from ._fp import clamp, cvtt_int32, fadd, fdiv, fmul, fsub, ftz

__all__ = ["FakeQuantPlan", "plan_fake_quant", "nudge", "compute_fake_quant", "run_plan", "fake_quant_with_min_max_args",
           "fake_quant_with_min_max_vars", "fake_quant_with_min_max_vars_per_channel"]

f32 = np.float32


@dataclass(frozen=True)
class FakeQuantPlan:
    """Per-slice float32 parameters (1-D arrays; one slice, or one per channel of the last axis)."""

    divide: bool              # Vars: divide by scale instead of multiplying by inv_scale
    nudged_min: np.ndarray
    nudged_max: np.ndarray
    scale: np.ndarray
    inv_scale: np.ndarray
    quant_zero: np.ndarray
    zero: np.ndarray          # bool: min == max == 0, the result is 0 (Vars, VarsPerChannel)


def nudge(mn: np.ndarray, mx: np.ndarray, num_bits: int, narrow_range: bool):
    """``Nudge``: (nudged_min, nudged_max, scale, inv_scale) per slice."""
    quant_min = f32(1 if narrow_range else 0)
    quant_max = f32((1 << num_bits) - 1)
    steps = fsub(quant_max, quant_min)
    with np.errstate(all="ignore"):
        scale = fdiv(fsub(mx, mn), steps)
        inv_scale = fdiv(steps, fsub(mx, mn))
        zp_from_min = fsub(quant_min, fdiv(mn, scale))
    zp = np.where(zp_from_min < quant_min, quant_min,
                  np.where(zp_from_min > quant_max, quant_max, half_away_from_zero(zp_from_min)))
    zp = cvtt_int32(zp).astype(np.uint16).astype(f32)   # the nudged zero point is a uint16
    nudged_min = fmul(fsub(quant_min, zp), scale)
    nudged_max = fmul(fsub(quant_max, zp), scale)
    return nudged_min, nudged_max, scale, inv_scale


def plan_fake_quant(mn, mx, num_bits, narrow_range, *, divide: bool, zero_special: bool) -> FakeQuantPlan:
    mn, mx = ftz(mn), ftz(mx)
    nmin, nmax, scale, inv = nudge(mn, mx, num_bits, narrow_range)
    quant_zero = np.floor(fadd(fmul(-nmin, inv), f32(0.5)))
    zero = ((mn == 0) & (mx == 0)) if zero_special else np.zeros(mn.shape, bool)
    return FakeQuantPlan(divide, nmin, nmax, scale, inv, quant_zero, zero)


def compute_fake_quant(x: np.ndarray, plan: FakeQuantPlan) -> np.ndarray:
    """``x`` (float32, last axis = the slices of ``plan``) through the fake quantizer."""
    check_fits(x.shape, 4)
    depth = plan.scale.shape[0]
    x2 = ftz(x.reshape(x.size // depth if depth else 0, depth))
    shifted = fsub(clamp(x2, plan.nudged_min, plan.nudged_max), plan.nudged_min)
    v = fdiv(shifted, plan.scale) if plan.divide else fmul(shifted, plan.inv_scale)
    y = fmul(np.floor(fadd(fsub(v, plan.quant_zero), f32(0.5))), plan.scale)
    if plan.zero.any():
        y = np.where(plan.zero, f32(0), y)
    return y.reshape(x.shape)


def run_plan(x: np.ndarray, plan: FakeQuantPlan, out: np.ndarray | None = None) -> np.ndarray:
    """``x`` through the fake quantizer of ``plan``: the fused kernel when the fast path is on
    (:func:`quantspec.tf.fast.path_fake_quant`), else :func:`compute_fake_quant`.  ``out``: a float32
    array of ``x``'s shape that receives the result."""
    if fast.path_fake_quant(plan) == "fast":
        check_fits(x.shape, 4)
        return fast.fake_quant(x, plan, out=out)
    y = compute_fake_quant(x, plan)
    if out is None:
        return y
    out[...] = y
    return out


def _num_bits(num_bits) -> int:
    nb = _args.integer(num_bits, "num_bits")
    lo, hi = spec.FAKE_QUANT_BITS
    if not lo <= nb <= hi:
        raise RangeError("num_bits", f"must be between {lo} and {hi}, inclusive (TensorFlow: 'num_bits must be "
                         "between 2 and 16, inclusive')", nb)
    return nb


def _input(x, op: str) -> np.ndarray:
    return _args.tensor(x, "x", (np.dtype(f32),), op)


def _scalar_range(min, max, rule: str):
    """min and max as float32 scalars (``rule`` is the message for another shape; ``{name}`` is filled in)."""
    out = []
    for name, value in (("min", min), ("max", max)):
        a = _args.param(value, name, np.dtype(f32))
        if a.ndim != 0:
            raise ShapeError(name, rule.format(name=name), a.shape)
        out.append(a)
    return out


def fake_quant_with_min_max_args(x, *, min=-6.0, max=6.0, num_bits=8, narrow_range=False):
    """TensorFlow ``FakeQuantWithMinMaxArgs`` (min and max are float attributes)."""
    x = _input(x, "FakeQuantWithMinMaxArgs")
    nb = _num_bits(num_bits)
    narrow = _args.flag(narrow_range, "narrow_range")
    mn, mx = _scalar_range(min, max, "must be a scalar (a float attribute of the op)")
    # TensorFlow compares the values as its kernels see them: with subnormals flushed to zero (DAZ), so
    # min=0, max=1e-39 is 0 >= 0 and refused (unflushed it would pass and give NaN everywhere)
    fmn, fmx = ftz(mn), ftz(mx)
    if not fmn < fmx:
        flushed = (" once subnormal values are flushed to zero, as TensorFlow's kernels see them "
                   f"({fmn.item()!r} >= {fmx.item()!r})" if (fmn.item(), fmx.item()) != (mn.item(), mx.item()) else "")
        raise RangeError("min", f"must be smaller than max{flushed} (TensorFlow: 'min has to be smaller than max'; "
                         "NaN is refused too)", (mn.item(), mx.item()))
    plan = plan_fake_quant(mn.reshape(1), mx.reshape(1), nb, narrow, divide=False, zero_special=False)
    return run_plan(x, plan)


def fake_quant_with_min_max_vars(x, min, max, *, num_bits=8, narrow_range=False):
    """TensorFlow ``FakeQuantWithMinMaxVars`` (min and max are rank-0 tensors; min < max is not
    checked, and min == max == 0 gives zeros)."""
    x = _input(x, "FakeQuantWithMinMaxVars")
    nb = _num_bits(num_bits)
    narrow = _args.flag(narrow_range, "narrow_range")
    mn, mx = _scalar_range(min, max, "must be rank 0 (TensorFlow: '`{name}` must be rank 0')")
    plan = plan_fake_quant(mn.reshape(1), mx.reshape(1), nb, narrow, divide=True, zero_special=True)
    return run_plan(x, plan)


def fake_quant_with_min_max_vars_per_channel(x, min, max, *, num_bits=8, narrow_range=False):
    """TensorFlow ``FakeQuantWithMinMaxVarsPerChannel``: one range per slice of the **last** axis
    (any rank >= 1)."""
    x = _input(x, "FakeQuantWithMinMaxVarsPerChannel")
    nb = _num_bits(num_bits)
    narrow = _args.flag(narrow_range, "narrow_range")
    if x.ndim == 0:
        raise ShapeError("x", "must have at least one dimension: the channels are its last axis (TensorFlow "
                         "aborts the process on a scalar)", x.shape)
    depth = x.shape[-1]
    mn = _args.param(min, "min", np.dtype(f32))
    mx = _args.param(max, "max", np.dtype(f32))
    for name, a in (("min", mn), ("max", mx)):
        if a.ndim != 1:
            raise ShapeError(name, f"must be rank 1 (TensorFlow: '`{name}` must be rank 1')", a.shape)
        if a.shape[0] != depth:
            raise ShapeError(name, f"must have one value per channel of the last axis: {depth} (TensorFlow: "
                             f"'{name} has incorrect size')", a.shape)
    plan = plan_fake_quant(mn, mx, nb, narrow, divide=False, zero_special=True)
    return run_plan(x, plan)
