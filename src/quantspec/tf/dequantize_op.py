"""Dequantize (``tf.quantization.dequantize``): qint8 / quint8 / qint16 / quint16 / qint32 -> float32
or bfloat16.

Prepare, then compute.  Dequantize applies **no** range adjustment and
does not check ``min_range <= max_range``: the range is used exactly as given, so pass the
``output_min`` / ``output_max`` QuantizeV2 returned to undo it.  Per slice, the plan holds the
float32 factors the kernel computes:

==================  ===============================================================
mode                value
==================  ===============================================================
MIN_COMBINED        ``((float(q) + half) * scale) + bias``; scale = (max - min) / (maxT - minT),
                    bias = min, half = (maxT - minT + 1) / 2 for signed T, else 0
MIN_FIRST           ``bias + float(q) * scale``; scale = float((max - min) / (2^bits - 1)) in
                    double, bias = round(min / scale) * scale - minT * scale
SCALED              ``float(q) * scale``; scale = max(min / min_out, max / maxT) (signed),
                    max / maxT (unsigned); oneDNN: docs/tensorflow.md
==================  ===============================================================

bfloat16 results are the float32 results rounded to nearest even.
"""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .._semantics.arrays import from_foreign
from .._fastpath.plancache import PlanCache, own
from .._semantics.arrays import check_fits
from .._semantics.rounding import half_away_from_zero
from ..errors import DTypeError, RuntimeUnsupportedError, ShapeError, UnsupportedError
from . import _args, fast, spec
from ._fp import cvtt_int32, fadd, fdiv, fmul, fsub, ftz, std_max
from .quantize_op import slices
from .spec import TFType

__all__ = ["DequantizePlan", "prepare_dequantize", "compute_dequantize", "dequantize", "output_dtype"]

f32 = np.float32
_OUTPUT_DTYPES = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


@dataclass(frozen=True)
class DequantizePlan:
    """Everything :func:`compute_dequantize` needs; ``scale`` and ``bias`` are 1-D float32 arrays
    with one entry per slice."""

    T: TFType
    mode: str
    path: str                 # "eigen" | "onednn"
    axis: int | None
    dtype: np.dtype           # float32 or bfloat16
    half: np.float32          # MIN_COMBINED's half range (0 for unsigned T)
    scale: np.ndarray
    bias: np.ndarray
    wrap_int32: bool          # Eigen SCALED qint32 per-tensor: codes that round to 2^31 wrap


def output_dtype(value) -> np.dtype:
    """``dtype=``: ``"float32"`` / ``"bfloat16"`` or the numpy / ml_dtypes dtypes."""
    if isinstance(value, str) and value.strip().lower() in ("float32", "float", "bfloat16"):
        key = value.strip().lower()
        return _OUTPUT_DTYPES["float32" if key == "float" else key]
    try:
        dt = np.dtype(value)
    except Exception:
        dt = None
    if dt is not None and dt in _OUTPUT_DTYPES.values():
        return dt
    raise DTypeError("dtype", "must be float32 or bfloat16 (TensorFlow: 'Output type must be bfloat16 or float')",
                     value)


def _dtype_name(dt: np.dtype) -> str:
    return "bfloat16" if dt == _OUTPUT_DTYPES["bfloat16"] else "float32"


def _range_arg(value, argument: str, per_axis: bool, channels: int) -> np.ndarray:
    a = _args.param(value, argument, np.dtype(f32))
    tf_name = "input_min_tensor" if argument == "min_range" else "input_max_tensor"
    if a.size != channels:
        raise ShapeError(argument, f"must have as many elements as the input has on the dequantization axis: "
                         f"{channels} (TensorFlow: '{tf_name} must have as many elements as input on the "
                         f"dequantization axis')", a.shape)
    if per_axis and a.ndim != 1:  # TensorFlow CHECK-fails (aborts the process) on this
        raise ShapeError(argument, "must be a 1-D array when an axis is given (TensorFlow aborts the process on "
                         "other shapes)", a.shape)
    return a.reshape(channels)


def prepare_dequantize(min_range, max_range, T, *, shape: tuple[int, ...], mode="MIN_COMBINED",
                       narrow_range=False, axis=None, dtype="float32", kernel="eigen") -> DequantizePlan:
    """Check a Dequantize call for an input of ``shape`` and compute its per-slice factors."""
    T = spec.tf_type(T)
    mode = _args.choice(mode, "mode", spec.MODES)
    narrow_range = _args.flag(narrow_range, "narrow_range")
    kernel = _args.kernel_of(kernel)
    dt = output_dtype(dtype)
    ndim = len(shape)
    ax = _args.axis_of(axis, ndim)
    channels = 1 if ax is None else shape[ax]
    r = spec.route("dequantize", kernel, mode, T.name, narrow_range=narrow_range, per_axis=ax is not None)
    _args.require_kernel(r.kernel, "Dequantize", mode, T.name)
    allowed = (spec.ONEDNN_DEQUANTIZE_DTYPES if r.kernel == "onednn" else spec.DEQUANTIZE_DTYPES)[_dtype_name(dt)]
    if mode not in allowed:
        raise UnsupportedError("mode", f"must be {' or '.join(allowed)} for a {_dtype_name(dt)} result (TensorFlow: "
                               f"'When output type is bfloat16, Mode string must be 'MIN_COMBINED'')", mode)
    in_min = ftz(_range_arg(min_range, "min_range", ax is not None, channels))
    in_max = ftz(_range_arg(max_range, "max_range", ax is not None, channels))
    _args.require_per_axis_mode("Dequantize", mode, ax, channels)
    if r.kernel == "onednn":
        if ndim not in spec.ONEDNN_RANKS:
            raise RuntimeUnsupportedError("x", "the oneDNN Dequantize kernel takes inputs of rank 1 to 5 "
                                          "(TensorFlow: 'Input dims must be <= 5 and >= 1'); use kernel='eigen'",
                                          f"rank {ndim}")
        if 0 in shape:
            raise RuntimeUnsupportedError("x", "TensorFlow's oneDNN Dequantize kernel aborts the process on an "
                                          "empty input; use kernel='eigen'", tuple(shape))

    half = f32(0)
    wrap = False
    if mode == "MIN_COMBINED":
        denom = fsub(f32(T.highest), f32(T.lowest))          # float(maxT) - minT, in float
        if T.signed:
            half = fdiv(fadd(denom, f32(1)), f32(2))[()]
        scale = fdiv(fsub(in_max, in_min), denom)
        bias = in_min
    elif mode == "MIN_FIRST":
        with np.errstate(over="ignore", invalid="ignore"):
            scale = ftz((fsub(in_max, in_min).astype(np.float64) / (2.0 ** T.bits - 1.0)).astype(f32))
        snapped = fmul(half_away_from_zero(fdiv(in_min, scale)), scale)
        rounded_min = np.where(in_max == in_min, in_min, snapped).astype(f32)
        bias = fsub(rounded_min, fmul(f32(T.lowest), scale))
    elif r.kernel == "onednn":  # _MklDequantize
        target = T.bits - 1 if T.signed else T.bits
        v_max = fsub(f32(2 ** target), f32(1))
        v_min = -f32(2 ** target) if T.signed else f32(0)
        if narrow_range:
            v_min = fadd(v_min, f32(1))[()]
        scale = std_max(fdiv(in_min, v_min), fdiv(in_max, v_max)) if v_min != 0 else fdiv(in_max, v_max)
        bias = np.zeros_like(in_min)
    else:  # Eigen SCALED
        min_out = f32(T.lowest + (1 if narrow_range else 0))
        max_t = f32(T.highest)
        scale = fdiv(in_max, max_t) if T.lowest == 0 else std_max(fdiv(in_min, min_out), fdiv(in_max, max_t))
        bias = np.zeros_like(in_min)
        # DequantizeTensor casts qint32 -> int -> float, and the int step goes through float:
        # codes that round to 2^31 come back as -2^31.  DequantizeSlice (several slices) does not.
        wrap = T.bits == 32 and channels == 1
    return DequantizePlan(T, mode, r.kernel, ax, dt, f32(half),
                          np.ascontiguousarray(scale, dtype=f32), np.ascontiguousarray(bias, dtype=f32), wrap)


def compute_dequantize(q: np.ndarray, plan: DequantizePlan, out: np.ndarray | None = None) -> np.ndarray:
    """The values of the codes ``q`` under ``plan``."""
    qf = slices(q, plan.axis).astype(f32)     # int -> float rounds to nearest even (qint32)
    scale, bias = plan.scale[None, :, None], plan.bias[None, :, None]
    if plan.mode == "MIN_COMBINED":
        y = fadd(fmul(fadd(qf, plan.half), scale), bias)
    elif plan.mode == "MIN_FIRST":
        y = fadd(bias, fmul(qf, scale))
    else:
        if plan.wrap_int32:
            qf = cvtt_int32(qf).astype(f32)
        y = fmul(qf, scale)
    y = y.reshape(q.shape)
    if plan.dtype != np.dtype(f32):
        y = y.astype(plan.dtype)                # round to nearest even
    if out is None:
        return y
    out[...] = y
    return out


def dequantize(x, min_range, max_range, T=None, *, mode="MIN_COMBINED", narrow_range=False, axis=None,
               dtype="float32", kernel="eigen", out=None) -> np.ndarray:
    """TensorFlow ``Dequantize``: the float value of the codes ``x`` (numpy int8 / uint8 / int16 /
    uint16 / int32, read as qint8 / quint8 / qint16 / quint16 / qint32; ``T`` defaults to the type
    of ``x``).  ``dtype`` is float32 or bfloat16; ``out=`` receives the result.  See
    docs/tensorflow.md."""
    x, min_range, max_range = from_foreign(x), from_foreign(min_range), from_foreign(max_range)
    q, T = codes(x, T)
    attrs = (T, mode, narrow_range, axis, dtype, kernel)
    hit = _PLANS.recall("dq", q, (min_range, max_range), attrs)
    if hit is None:
        key = _PLANS.key("dq", q, (min_range, max_range), attrs)
        hit = _PLANS.get(key)
        if hit is not None:
            _PLANS.remember("dq", q, (min_range, max_range), attrs, hit)
    if hit is None:
        plan = prepare_dequantize(own(min_range), own(max_range), T, shape=q.shape, mode=mode,
                                  narrow_range=narrow_range, axis=axis, dtype=dtype, kernel=kernel)
        prepared = fast.prepare_dequantize(plan, q.shape, True) if key is not None and q.size else None
        _PLANS.put(key, (plan, prepared))
        if key is not None:
            _PLANS.remember("dq", q, (min_range, max_range), attrs, (plan, prepared))
    else:
        plan, prepared = hit
    _args.check_out(out, q.shape, plan.dtype)
    if out is None:
        check_fits(q.shape, plan.dtype.itemsize)
    if fast.path_dequantize(plan) == "fast":
        return fast.dequantize(q, plan, out=out, prepared=prepared)
    return compute_dequantize(q, plan, out=out)


_PLANS = PlanCache()


def codes(x, T=None) -> tuple[np.ndarray, TFType]:
    """Dequantize's input as an array of ``T``'s codes, and ``T`` (by default, from x's dtype)."""
    if isinstance(x, (np.ndarray, np.generic)):
        x = _args.native(np.asarray(x))
    if T is None:
        if not isinstance(x, np.ndarray):
            raise DTypeError("T", "is required when x is not a numpy array of a quantized type's storage dtype", T)
        T = spec.tf_type(x.dtype, "x")
    T = spec.tf_type(T)
    if isinstance(x, np.ndarray):
        if x.dtype != T.dtype:
            raise DTypeError("x", f"must hold {T.name} codes as {T.dtype} (T={T.name})", str(x.dtype))
        return x, T
    return _codes_from_python(x, T), T


def _codes_from_python(x, T: TFType) -> np.ndarray:
    from .._semantics.arrays import as_array

    return as_array(x, "x", T.qtype)
