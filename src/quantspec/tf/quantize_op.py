"""QuantizeV2 (``tf.quantization.quantize``): float32 -> qint8 / quint8 / qint16 / quint16 / qint32.

Prepare, then compute.  :func:`prepare_quantize` checks the call against TensorFlow's rules and
computes, for each slice (one for per-tensor, one per channel with an axis), the adjusted range
and the scale factors in exactly the precision the kernel uses (docs/tensorflow.md, for
Eigen and for oneDNN) into a frozen :class:`QuantizePlan` of 1-D float32 arrays.
:func:`compute_quantize` is then a few lines of float32 array arithmetic per mode, with
flush-to-zero after every operation (:mod:`quantspec.tf._fp`).

The codes for NaN (and for the other non-finite values some degenerate ranges produce) follow
Eigen's vectorised loop; TensorFlow's scalar tail differs for signed 8/16-bit MIN_COMBINED and
SCALED (docs/tensorflow.md, "NaN").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._semantics.arrays import check_fits, from_foreign
from .._fastpath.plancache import PlanCache, own
from .._semantics.rounding import half_away_from_zero, half_to_even
from ..errors import InvalidArgumentError, RangeError, RuntimeUnsupportedError, ShapeError
from . import _args, fast, spec
from ._fp import F32_MAX, clamp, cvtt_int32, cvtt_int64, fadd, fdiv, fmul, fsub, ftz, std_max, std_min
from .spec import TFType

__all__ = ["QuantizePlan", "adjust_range", "prepare_quantize", "precast", "cast", "compute_quantize", "quantize",
           "slices"]

f32 = np.float32


@dataclass(frozen=True)
class QuantizePlan:
    """Everything :func:`compute_quantize` needs; per-slice fields are 1-D float32 arrays (one
    entry per slice), ready for a fused kernel.  How ``lo``, ``hi``, ``scale`` and ``bias`` are used
    depends on ``path`` and ``mode`` (:func:`precast`):

    - eigen MIN_COMBINED: ``(clamp(x, lo, hi) - lo) * scale - bias``, rounded for signed T
      (bias = half range) and truncated by the cast for unsigned T (bias = -0.5);
    - eigen MIN_FIRST: ``min(max(round(x * scale) - bias, lo), hi)`` (lo, hi: the int32-safe bounds);
    - eigen SCALED: ``R(clamp(x, lo, hi) * scale)``;
    - onednn SCALED: ``rint(x * scale)``, saturated; onednn MIN_FIRST: ``rint(x * scale + bias)``,
      saturated (bias = -min * scale);
    - onednn-scalar (rank-0 MIN_FIRST): ``(x - lo) * scale``, truncated and wrapped to uint8.
    """

    T: TFType
    mode: str
    round_mode: str
    path: str                 # "eigen" | "onednn" | "onednn-scalar": the kernel that runs
    axis: int | None          # normalised axis, None for per-tensor
    lo: np.ndarray
    hi: np.ndarray
    scale: np.ndarray
    bias: np.ndarray
    output_min: np.ndarray
    output_max: np.ndarray


# -- range adjustment ---------------------------------------------------------------------
def adjust_range(in_min: np.ndarray, in_max: np.ndarray, emr: np.float32):
    """QuantizeV2's range adjustment, per slice: the range is widened to contain 0 and to be at
    least ``max(1, |min|, |max|) * ensure_minimum_range`` wide."""
    min_r = std_min(f32(0), in_min)
    eps = fmul(std_max(f32(1), std_max(np.abs(in_min), np.abs(in_max))), emr)
    max_r = std_max(f32(0), std_max(in_max, fadd(min_r, eps)))
    return min_r.astype(f32), max_r.astype(f32)


def _double_to_float(v: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return ftz(np.asarray(v, np.float64).astype(f32))


# -- Eigen parameters, per mode --------------------------------------------------------------
def _eigen_min_combined(T: TFType, min_r, max_r):
    # scale is computed in double: (double(max) - double(min)) / double(max_r - min_r)
    span = np.float64(T.highest) - np.float64(T.lowest)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = _double_to_float(span / fsub(max_r, min_r).astype(np.float64))
    if T.signed:  # half_range_ = float((double(max) - double(min) + 1) / 2.0f)
        bias = np.full_like(min_r, f32((span + 1) / 2.0))
    else:         # the unsigned fast path adds 0.5f: x - (-0.5) is x + 0.5 exactly
        bias = np.full_like(min_r, f32(-0.5))
    return min_r, max_r, scale, bias, min_r, max_r


def _eigen_min_first(T: TFType, min_r, max_r):
    steps_1 = np.float64(2.0 ** T.bits - 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(max_r == min_r, f32(0),
                         _double_to_float(steps_1 / fsub(max_r, min_r).astype(np.float64))).astype(f32)
    range_min_scaled = half_away_from_zero(fmul(min_r, scale))
    bias = fsub(range_min_scaled, f32(T.lowest))
    # FloatToQuantizedStruct::lower/upper_bound_float: qint32 stops at 2147483520
    lb = max(f32(T.lowest), f32(-2.147483648e9))
    ub = min(f32(T.highest), f32(2.147483520e9))
    return np.full_like(min_r, lb), np.full_like(min_r, ub), scale, bias, min_r, max_r


def _eigen_scaled(T: TFType, min_r, max_r, narrow_range: bool):
    min_out = f32(T.lowest + (1 if narrow_range else 0))  # int -> float, as the kernel's int*float
    max_out = f32(T.highest)                              # qint32: 2^31
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        sf_min = np.where(fmul(min_out, min_r) > 0, fdiv(min_out, min_r), F32_MAX)
        sf_max = np.where(fmul(max_out, max_r) > 0, fdiv(max_out, max_r), F32_MAX)
    scale = std_min(sf_min, sf_max).astype(f32)
    lo = fdiv(min_out, scale)
    hi = fdiv(max_out, scale)
    return lo, hi, scale, np.zeros_like(scale), lo, hi


# -- oneDNN parameters ----------------------------------------------------------------------
def _onednn_scaled(T: TFType, min_r, max_r):
    max_abs = std_max(np.abs(min_r), np.abs(max_r)).astype(f32)
    target = f32(127.5) if T.signed else f32(255.0)      # (2^bits - 1) / 2 for signed (sic)
    scale = fdiv(target, max_abs)
    out_min = -max_abs if T.signed else np.zeros_like(max_abs)
    return out_min, max_abs, scale, np.zeros_like(scale), out_min, max_abs


def _onednn_min_first(T: TFType, min_r, max_r):
    scale = fdiv(f32(255.0), fsub(max_r, min_r))       # src scales 255.0f / (max - min)
    bias = fmul(-min_r, scale)                          # the shift -min, scaled the same way
    return min_r, max_r, scale, bias, min_r, max_r


def _onednn_min_first_scalar(T: TFType, min_r, max_r):
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = _double_to_float(np.float64(255.0) / fsub(max_r, min_r).astype(np.float64))
    return min_r, max_r, scale, np.zeros_like(scale), min_r, max_r


# -- prepare ---------------------------------------------------------------------------------
def _range_arg(value, argument: str, per_axis: bool, channels: int) -> np.ndarray:
    a = _args.param(value, argument, np.dtype(f32))
    if per_axis:
        if a.ndim != 1:
            raise ShapeError(argument, f"must be a 1-D array with one value per slice of the axis ({channels}) "
                             f"when an axis is given (TensorFlow: '{argument} must be a 1-D tensor whose size "
                             "matches the axis dimension')", a.shape)
        if a.shape[0] != channels:
            raise ShapeError(argument, f"must have one value per slice of the axis: {channels}, not {a.shape[0]} "
                             f"(TensorFlow: '{argument} must be a 1-D tensor whose size matches the axis dimension')",
                             a.shape)
        return a
    if a.size != 1:
        raise ShapeError(argument, "must hold a single value when no axis is given (TensorFlow: 'If axis is not "
                         f"specified, {argument} must contain a single float element')", a.shape)
    return a.reshape(1)


def prepare_quantize(min_range, max_range, T, *, shape: tuple[int, ...], mode="MIN_COMBINED",
                     round_mode="HALF_AWAY_FROM_ZERO", narrow_range=False, axis=None,
                     ensure_minimum_range=0.01, kernel="eigen") -> QuantizePlan:
    """Check a QuantizeV2 call for an input of ``shape`` and compute its per-slice parameters."""
    T = spec.tf_type(T)
    mode = _args.choice(mode, "mode", spec.MODES)
    round_mode = _args.choice(round_mode, "round_mode", spec.ROUND_MODES)
    if round_mode not in spec.QUANTIZE_ROUND_MODES[mode]:
        raise InvalidArgumentError("round_mode", f"must be {' or '.join(spec.QUANTIZE_ROUND_MODES[mode])} with mode "
                                   f"{mode}: HALF_TO_EVEN needs mode 'SCALED' (TensorFlow: 'Round mode 'HALF_TO_EVEN' "
                                   "only supported for mode 'SCALED'')", round_mode)
    narrow_range = _args.flag(narrow_range, "narrow_range")
    kernel = _args.kernel_of(kernel)
    emr = _args.number(ensure_minimum_range, "ensure_minimum_range")  # a float attribute: 0.01 is 0.0099999998
    ndim = len(shape)
    ax = _args.axis_of(axis, ndim)
    channels = 1 if ax is None else shape[ax]
    path = spec.route("quantize", kernel, mode, T.name, narrow_range=narrow_range, round_mode=round_mode,
                      per_axis=ax is not None).kernel
    _args.require_kernel(path, "QuantizeV2", mode, T.name)
    in_min = ftz(_range_arg(min_range, "min_range", ax is not None, channels))
    in_max = ftz(_range_arg(max_range, "max_range", ax is not None, channels))
    _args.require_per_axis_mode("QuantizeV2", mode, ax, channels)
    bad = (~(in_max >= in_min)) if path == "onednn" else (in_max < in_min)
    if np.any(bad):
        i = int(np.argmax(bad))
        where = f" in slice {i}" if ax is not None else ""
        raise RangeError("max_range", "must not be smaller than min_range" + where +
                         (" (oneDNN also refuses NaN)" if path == "onednn" else "") +
                         " (TensorFlow: 'input_max_range must be larger than input_min_range.')",
                         (float(in_min[i]), float(in_max[i])))
    if path == "onednn":
        if ndim == 0 and mode == "MIN_FIRST":
            if np.ndim(min_range) or np.ndim(max_range):
                raise ShapeError("min_range", "must be a scalar for a rank-0 input under oneDNN "
                                 "(TensorFlow: '`min_input` must be rank 0')", (np.shape(min_range), np.shape(max_range)))
            path = "onednn-scalar"
        elif ndim not in spec.ONEDNN_RANKS:
            raise RuntimeUnsupportedError("x", "the oneDNN QuantizeV2 kernel takes inputs of rank 1 to 5 (TensorFlow: "
                                          "'Input dims must be <= 5 and >= 1' / 'Scalar calculation in MKL is "
                                          "supported only for MIN_FIRST mode'); use kernel='eigen'", f"rank {ndim}")

    min_r, max_r = adjust_range(in_min, in_max, emr)
    if path == "eigen":
        if mode == "MIN_COMBINED":
            params = _eigen_min_combined(T, min_r, max_r)
        elif mode == "MIN_FIRST":
            params = _eigen_min_first(T, min_r, max_r)
        else:
            params = _eigen_scaled(T, min_r, max_r, narrow_range)
    elif path == "onednn":
        params = (_onednn_scaled if mode == "SCALED" else _onednn_min_first)(T, min_r, max_r)
    else:
        params = _onednn_min_first_scalar(T, min_r, max_r)
    lo, hi, scale, bias, out_min, out_max = (np.ascontiguousarray(p, dtype=f32) for p in params)
    return QuantizePlan(T, mode, round_mode, path, ax, lo, hi, scale, bias, out_min, out_max)


# -- compute ---------------------------------------------------------------------------------
def slices(x: np.ndarray, axis: int | None) -> np.ndarray:
    """View x as [outer, slices, inner] (``flat_inner_outer_dims``)."""
    if axis is None:
        return x.reshape(1, 1, x.size)
    pre = int(np.prod(x.shape[:axis], dtype=np.int64))
    post = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    return x.reshape(pre, x.shape[axis], post)


def _saturate(t: np.ndarray, T: TFType) -> np.ndarray:
    """Eigen's vectorised float -> 8/16-bit cast: cvttps2dq, then saturating packs."""
    return np.clip(cvtt_int32(t), T.lowest, T.highest).astype(T.dtype)


def _wrap(i: np.ndarray, T: TFType) -> np.ndarray:
    """Keep the low bits of an integer (C++ narrowing)."""
    return i.astype(T.dtype)


def precast(x: np.ndarray, plan: QuantizePlan) -> np.ndarray:
    """The float32 values the kernel converts to codes, as a [outer, slices, inner] array."""
    x3 = ftz(slices(x, plan.axis))
    lo, hi, scale, bias = (getattr(plan, k)[None, :, None] for k in ("lo", "hi", "scale", "bias"))
    if plan.path == "eigen" and plan.mode == "MIN_COMBINED":
        v = fsub(fmul(fsub(clamp(x3, lo, hi), lo), scale), bias)
        return v if not plan.T.signed else half_away_from_zero(v)  # unsigned: truncated by the cast
    if plan.path == "eigen" and plan.mode == "MIN_FIRST":
        v = fsub(half_away_from_zero(fmul(x3, scale)), bias)
        return std_min(std_max(v, lo), hi)
    if plan.path == "eigen":  # SCALED
        rnd = half_to_even if plan.round_mode == "HALF_TO_EVEN" else half_away_from_zero
        return rnd(fmul(clamp(x3, lo, hi), scale))
    if plan.path == "onednn":
        v = fmul(x3, scale)
        return fadd(v, bias) if plan.mode == "MIN_FIRST" else v
    return fmul(fsub(x3, lo), scale)  # onednn-scalar


def cast(v: np.ndarray, plan: QuantizePlan) -> np.ndarray:
    """The conversion of :func:`precast`'s values to the codes of ``plan.T``."""
    T = plan.T
    if plan.path == "onednn":  # oneDNN saturates in float; NaN gives MIN_FIRST 255, SCALED minT
        nan_code = T.highest if plan.mode == "MIN_FIRST" else T.lowest
        v = np.where(np.isnan(v), f32(nan_code), np.clip(v, f32(T.lowest), f32(T.highest)))
        return half_to_even(v).astype(T.dtype)
    if plan.path == "onednn-scalar" or plan.mode == "MIN_FIRST" or not T.signed:
        return _wrap(cvtt_int32(v), T)      # float -> int32 -> T, keeping the low bits
    if T.bits == 32:                        # QInt32 from float: lrint into int64, narrowed (2^31 wraps)
        return _wrap(cvtt_int64(v), T)
    return _saturate(v, T)                  # 8/16-bit signed: Eigen's vectorised cast saturates


def compute_quantize(x: np.ndarray, plan: QuantizePlan, out: np.ndarray | None = None) -> np.ndarray:
    """The codes of float32 ``x`` under ``plan``."""
    codes = cast(precast(x, plan), plan).reshape(x.shape)
    if out is None:
        return codes
    out[...] = codes
    return out


# -- public API ------------------------------------------------------------------------------
def quantize(x, min_range, max_range, T, *, mode="MIN_COMBINED", round_mode="HALF_AWAY_FROM_ZERO",
             narrow_range=False, axis=None, ensure_minimum_range=0.01, kernel="eigen", out=None):
    """TensorFlow ``QuantizeV2``: quantize float32 ``x`` to ``T``.

    Returns ``(output, output_min, output_max)``: the codes (numpy int8 / uint8 / int16 / uint16 /
    int32), and the range the codes represent as float32 arrays (0-d per-tensor, 1-D with an
    axis).  ``kernel="eigen"`` reproduces TensorFlow's portable kernel, ``"onednn"`` the oneDNN
    kernel stock TensorFlow on x86-64 Linux runs where it rewrites the op.  ``out=`` receives the
    codes.  See docs/tensorflow.md.
    """
    x, min_range, max_range = from_foreign(x), from_foreign(min_range), from_foreign(max_range)
    x = _args.tensor(x, "x", (np.dtype(f32),), "QuantizeV2")
    attrs = (T, mode, round_mode, narrow_range, axis, ensure_minimum_range, kernel)
    hit = _PLANS.recall("q", x, (min_range, max_range), attrs)
    if hit is None:
        key = _PLANS.key("q", x, (min_range, max_range), attrs)
        hit = _PLANS.get(key)
        if hit is not None:
            _PLANS.remember("q", x, (min_range, max_range), attrs, hit)
    if hit is None:
        plan = prepare_quantize(own(min_range), own(max_range), T, shape=x.shape, mode=mode, round_mode=round_mode,
                                narrow_range=narrow_range, axis=axis, ensure_minimum_range=ensure_minimum_range,
                                kernel=kernel)
        fastable = key is not None and x.size and plan.path in ("eigen", "onednn")
        prepared = fast.prepare_quantize(plan, x.shape, True) if fastable else None
        _PLANS.put(key, (plan, prepared))
        if key is not None:
            _PLANS.remember("q", x, (min_range, max_range), attrs, (plan, prepared))
    else:
        plan, prepared = hit
    _args.check_out(out, x.shape, plan.T.dtype)
    if out is None:
        check_fits(x.shape, plan.T.dtype.itemsize)
    if fast.path_quantize(plan) == "fast":
        codes = fast.quantize(x, plan, out=out, prepared=prepared)
    else:
        codes = compute_quantize(x, plan, out=out)
    return (codes, *output_range(plan))


def output_range(plan: QuantizePlan) -> tuple[np.ndarray, np.ndarray]:
    """QuantizeV2's output_min and output_max: 0-d per-tensor, 1-D per-axis; copies (the plan may
    be kept for the next call, :mod:`quantspec._fastpath.plancache`)."""
    if plan.axis is None:
        return plan.output_min.reshape(()).copy(), plan.output_max.reshape(()).copy()
    return plan.output_min.copy(), plan.output_max.copy()


_PLANS = PlanCache()
