"""LiteRT quantization parameters (the LiteRT 8-bit quantization specification,
https://ai.google.dev/edge/litert/models/quantization_spec, as the TF 2.21 converter applies it).

A real value ``r`` and its quantized code ``q`` are related by ``r = scale * (q - zero_point)``,
with one (scale, zero_point) pair per tensor, or one per slice of ``quantized_dimension`` for
per-axis tensors (weights, and the biases that go with them).

Besides the :class:`QuantParams` record, this module holds the parameter choices of the TensorFlow
2.21 converter (MLIR quantizer with ``legacy_float_scale=true``) and the element-wise conversions,
each bit-exact with the code it names:

- :func:`activation_params` — ``ConvertStatsToQDQs`` + ``TensorRangeSanityCheck`` + ``DownCastScale``;
- :func:`weight_params` — ``GetUniformQuantizedPerAxisTypeForWeight`` (symmetric, narrow range);
- :func:`bias_params` — ``GetUniformQuantizedTypeForBias``;
- :func:`adjust_for_bias` — ``QuantizationDriver::SetBiasParamsWithAdjustments``, which widens the
  weight and bias scales of channels whose quantized bias would exceed INT32_MAX / 2;
- :func:`quantize` — the QUANTIZE kernel (``reference_ops::AffineQuantize`` / ``PerChannelQuantize``);
- :func:`quantize_weights` — ``QuantizeLegacy`` (``SymmetricPerChannelQuantizeValues``, or
  ``PortableSymmetricQuantizeFloats`` for per-tensor weights);
- :func:`quantize_bias` — ``SymmetricBiasQuantize``;
- :func:`dequantize` — the DEQUANTIZE kernel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._semantics.arrays import check_fits, distinct, from_foreign
from .._semantics.granularity import normalize_axis
from .._semantics.intcast import cvtt_int32
from .._semantics.rounding import half_away_from_zero, half_to_even
from ..dtypes import qtype
from ..errors import AxisError, DTypeError, InvalidArgumentError, RangeError, ShapeError, UnsupportedError

__all__ = ["QuantParams", "activation_params", "weight_params", "bias_params", "adjust_for_bias", "quantize",
           "quantize_weights", "quantize_bias", "dequantize"]


_F32_MAX = float(np.finfo(np.float32).max)


@dataclass(frozen=True, eq=False)
class QuantParams:
    """Quantization parameters of one LiteRT tensor.

    ``scale`` is a 1-D float32 array and ``zero_point`` a 1-D int64 array of the same length (a
    single zero point given with several scales is repeated); ``quantized_dimension`` is the axis the
    entries run along when there is more than one.  Scalars and lists are accepted and converted.
    """

    scale: np.ndarray
    zero_point: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    quantized_dimension: int = 0

    def __post_init__(self):
        raw = self.scale
        if isinstance(raw, (bool, np.bool_)):
            raise DTypeError("scale", "must be a real number or a 1-D array of real numbers, not a bool", raw)
        try:
            a = np.asarray(raw)
        except (ValueError, TypeError):   # ragged nesting
            raise ShapeError("scale", "must be a scalar or a non-empty 1-D array", raw) from None
        if a.dtype.kind not in "fiu":     # strings ("0.5" too), complex, bools, objects
            raise DTypeError("scale", "must be a real number or a 1-D array of real numbers",
                             raw if a.size <= 8 else str(a.dtype))
        if a.ndim > 1 or a.size == 0:
            raise ShapeError("scale", "must be a scalar or a non-empty 1-D array", raw)
        if a.dtype.kind == "f" and a.dtype.itemsize > 4 and not (a.ndim == 0 and abs(float(a)) <= _F32_MAX):
            # beyond the float32 range a scale becomes inf: refused, as any other, where it is used
            with np.errstate(over="ignore"):
                s = np.atleast_1d(a.astype(np.float32))
        else:
            s = np.atleast_1d(a.astype(np.float32))
        try:
            z = np.atleast_1d(np.asarray(self.zero_point))
        except (ValueError, TypeError):
            raise ShapeError("zero_point", "must be a scalar or a 1-D array", self.zero_point) from None
        if z.dtype.kind == "f":
            if not np.all(np.isfinite(z)) or np.any(z != np.trunc(z)):
                raise InvalidArgumentError("zero_point", "must hold integers", self.zero_point)
            if z.size and np.abs(z).max() >= 2.0 ** 63:
                raise RangeError("zero_point", "must fit in int64", float(z[np.abs(z) >= 2.0 ** 63][0]))
        elif z.dtype.kind not in "iu":
            raise InvalidArgumentError("zero_point", "must hold integers", self.zero_point)
        elif z.dtype == np.uint64 and z.size and z.max() > np.iinfo(np.int64).max:
            raise RangeError("zero_point", "must fit in int64", int(z.max()))
        z = z.astype(np.int64)
        if z.ndim != 1:
            raise ShapeError("zero_point", "must be a scalar or a 1-D array", self.zero_point)
        if z.size == 1 and s.size > 1:
            z = np.repeat(z, s.size)
        if z.size != s.size:
            raise ShapeError("zero_point", f"must have one entry per scale ({s.size})", self.zero_point)
        if isinstance(self.quantized_dimension, bool) or not isinstance(self.quantized_dimension, (int, np.integer)) \
                or self.quantized_dimension < 0:
            raise AxisError("quantized_dimension", "must be a non-negative integer", self.quantized_dimension)
        s.setflags(write=False)
        z.setflags(write=False)
        object.__setattr__(self, "scale", s)
        object.__setattr__(self, "zero_point", z)
        object.__setattr__(self, "quantized_dimension", int(self.quantized_dimension))
        # facts that every call checks, found once (the arrays are read-only copies of our own)
        bad = ~np.isfinite(s) | (s <= 0)
        bad_scale, note = None, ""
        if bad.any():
            i = int(np.argmax(bad))
            bad_scale = float(np.atleast_1d(a)[i])   # the value given, before its conversion to float32
            if math.isfinite(bad_scale) and bad_scale > 0:
                note = (f"LiteRT scales are float32, and {bad_scale!r} "
                        + ("overflows to inf" if bad_scale > 1 else "underflows to 0") + " in float32")
        object.__setattr__(self, "_bad_scale", bad_scale)
        object.__setattr__(self, "_bad_scale_note", note)
        object.__setattr__(self, "_zp_span", (int(z.min()), int(z.max())))
        object.__setattr__(self, "_hash", hash((s.tobytes(), z.tobytes(), self.quantized_dimension)))

    @property
    def per_axis(self) -> bool:
        """True when there is more than one (scale, zero_point) pair."""
        return self.scale.size > 1

    def __len__(self) -> int:
        return int(self.scale.size)

    def __eq__(self, other) -> bool:
        if not isinstance(other, QuantParams):
            return NotImplemented
        return (self.quantized_dimension == other.quantized_dimension
                and self.scale.tobytes() == other.scale.tobytes()
                and self.zero_point.tobytes() == other.zero_point.tobytes())

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        if self.per_axis:
            return (f"QuantParams(scale=<{self.scale.size} values>, zero_point=<{self.zero_point.size} values>, "
                    f"quantized_dimension={self.quantized_dimension})")
        return f"QuantParams(scale={float(self.scale[0])!r}, zero_point={int(self.zero_point[0])})"


# -------------------------------------------------------------------------------------------------
# argument checks
# -------------------------------------------------------------------------------------------------

#: the converter's tolerance below which a calibrated range is widened (kNearZeroTolerance)
NEAR_ZERO_TOLERANCE = 1.0e-6
INT32_MAX = (1 << 31) - 1


def _float_array(x: Any, argument: str, *, quiet: bool = False, refuse_overflow: bool = False,
                 check: Any = None) -> np.ndarray:
    """A float input as float32 (LiteRT tensors and the converter's constants are float32).

    ``quiet``: values beyond the float32 range become +-inf without numpy's overflow warning (the
    converter's functions, which then refuse them with :func:`_not_finite`); ``refuse_overflow``:
    such values raise here (for functions that take infinities as data).  ``check(shape)``, when
    given, checks the other arguments against the input's shape before any value is read or
    converted."""
    if isinstance(x, (bool, np.bool_)):
        raise DTypeError(argument, "must be a float array or scalar, not a bool", x)
    try:
        a = np.asarray(x)
    except (ValueError, TypeError):   # ragged nesting
        raise ShapeError(argument, "must be a real number or a rectangular array of them", x) from None
    if a.dtype.kind not in "fiu":
        raise DTypeError(argument, "must be a real-valued (float) array", str(a.dtype) if a.dtype.kind != "O" else x)
    if check is not None:
        check(a.shape)
    if a.dtype != np.float32:
        check_fits(a.shape, 4, argument, "its float32 copy")
    if (quiet or refuse_overflow) and a.dtype.kind == "f" and a.dtype.itemsize > 4:
        with np.errstate(over="ignore"):
            f = a.astype(np.float32)
        if refuse_overflow:
            inf = np.isinf(f)
            if inf.any() and np.isfinite(a[inf]).any():
                raise _not_finite(a[inf & np.isfinite(a)], argument)
        return f
    return a.astype(np.float32, copy=False)


def _not_finite(x: Any, argument: str) -> RangeError:
    """The error for a float input with NaN or +-inf once in float32: values given as NaN or
    infinity, or finite values beyond the float32 range (called on the error path only)."""
    a = np.asarray(x)
    scalar = a.ndim == 0
    with np.errstate(over="ignore", invalid="ignore"):
        given_finite = np.isfinite(a.astype(np.float64))
    if given_finite.all() and a.dtype.kind == "f":
        big = a[np.abs(a.astype(np.float64)) > _F32_MAX] if not scalar else a
        return RangeError(argument, f"must lie within the float32 range, magnitude <= {_F32_MAX!r} (LiteRT "
                          "tensors and the converter's values are float32)", float(big.flat[0]))
    return RangeError(argument, "must be finite", float(a) if scalar else "array with NaN or infinity")


def check_params(params: Any, argument: str = "params", shape: tuple[int, ...] | None = None) -> QuantParams:
    if not isinstance(params, QuantParams):
        raise DTypeError(argument, "must be a quantspec.litert.QuantParams", type(params).__name__)
    if params._bad_scale is not None:
        raise RangeError(f"{argument}.scale", "must be finite and > 0", params._bad_scale,
                         detail=params._bad_scale_note)
    if shape is not None and params.per_axis:
        d = params.quantized_dimension
        if d >= len(shape):
            raise AxisError(f"{argument}.quantized_dimension", f"must be < the rank of the data ({len(shape)})", d)
        if shape[d] != len(params):
            raise ShapeError(f"{argument}.scale", f"per-axis parameters need one scale per slice of dimension {d} "
                             f"(size {shape[d]})", len(params))
    return params


def along_axis(a: np.ndarray, params: QuantParams, ndim: int) -> np.ndarray:
    """A per-axis parameter array shaped to broadcast along the quantized dimension."""
    if not params.per_axis:
        return a[0]
    shape = [1] * ndim
    shape[params.quantized_dimension] = a.size
    return a.reshape(shape)


def _check_out(out: Any, shape: tuple[int, ...], dtype: np.dtype, argument: str = "out") -> np.ndarray:
    if not isinstance(out, np.ndarray):
        raise DTypeError(argument, "must be a numpy array", type(out).__name__)
    if out.dtype != dtype:
        raise DTypeError(argument, f"must have dtype {dtype}", str(out.dtype))
    if out.shape != tuple(shape):
        raise ShapeError(argument, f"must have the result's shape {tuple(shape)}", out.shape)
    if not out.flags.writeable:
        raise InvalidArgumentError(argument, "must be writeable", "read-only array")
    return out


# -------------------------------------------------------------------------------------------------
# the converter's parameters
# -------------------------------------------------------------------------------------------------

def activation_params(min: Any, max: Any, dtype: str = "int8") -> QuantParams:  # noqa: A002 - the spec's names
    """The int8 (scale, zero point) the TF 2.21 converter gives an activation whose calibrated range
    is ``[min, max]`` (the global min/max the calibrator recorded over the representative dataset).

    Exactly as ``ConvertStatsToQDQs`` / ``TensorRangeSanityCheck`` / ``DownCastScale`` compute it
    with ``min`` and ``max`` taken as float32 (the calibrator stores them so):

    1. the range is widened to include 0: ``rmin = min(min, 0)``, ``rmax = max(max, 0)``;
    2. a range narrower than 1e-6 is widened by 1e-6 on both sides (double arithmetic), so an
       all-zero tensor gets scale ``f32(2e-6)/255`` (the ``|rmax - rmin| < DBL_EPSILON`` special case
       of ``fakeQuantAttrsToType`` can no longer apply, and ``DownCastScale`` would override it);
    3. ``scale = (f32(rmax) - f32(rmin)) / 255`` in float32 arithmetic;
    4. ``zp = f32(-128 - rmin / scale)`` (double division), clamped to [-128, 127], else rounded
       half away from zero.
    """
    if qtype(dtype).name != "int8":
        raise UnsupportedError("dtype", "only 'int8' activations are implemented (the spec's type)", dtype)
    lo = _float_array(min, "min", quiet=True)
    hi = _float_array(max, "max", quiet=True)
    if lo.ndim or hi.ndim:
        raise ShapeError("min" if lo.ndim else "max", "must be a scalar (activations are per-tensor)",
                         lo.shape if lo.ndim else hi.shape)
    if not np.isfinite(lo):
        raise _not_finite(min, "min")
    if not np.isfinite(hi):
        raise _not_finite(max, "max")
    if lo > hi:
        raise RangeError("min", f"must be <= max ({float(hi)!r})", float(lo))
    qmin, qmax = -128, 127
    rmin = np.minimum(np.float64(lo), 0.0)
    rmax = np.maximum(np.float64(hi), 0.0)
    if abs(rmax - rmin) < NEAR_ZERO_TOLERANCE:
        rmin = rmin - NEAR_ZERO_TOLERANCE
        rmax = rmax + NEAR_ZERO_TOLERANCE
    with np.errstate(over="ignore"):
        scale = (np.float32(rmax) - np.float32(rmin)) / np.float32(qmax - qmin)
    if not np.isfinite(scale):
        raise RangeError("max", "gives a range wider than float32 can hold", float(hi))
    zp_from_min = np.float32(qmin - rmin / np.float64(scale))
    if zp_from_min < qmin:
        zp = qmin
    elif zp_from_min > qmax:
        zp = qmax
    else:
        zp = int(half_away_from_zero(zp_from_min))
    return QuantParams(np.float32(scale), zp)


def _weight_maxabs(w: np.ndarray, axis: int | None) -> np.ndarray:
    """max |w| per slice of ``axis`` (all of w when None), 0 for empty slices, as float64.

    ``max(max(w), -min(w))``: exact, and two reductions instead of a full-size copy of |w| (the
    tensor may be a mapped file larger than memory)."""
    if w.size == 0:
        return np.zeros(1 if axis is None else w.shape[axis])
    length = 1 if axis is None else w.shape[axis]
    w = distinct(w)      # a broadcast view: its distinct elements only (the axis may be cut to 1 too)
    other = None if axis is None else tuple(i for i in range(w.ndim) if i != axis)
    m = np.maximum(w.max(axis=other), -w.min(axis=other)).astype(np.float64)
    return np.broadcast_to(np.abs(m), (length,)).copy()  # abs: -0.0 from an all-zero slice is 0


def weight_params(w: Any, axis: int | None = 0) -> QuantParams:
    """The symmetric int8 parameters the TF 2.21 converter gives the float32 weights ``w``:
    per-axis along ``axis`` (0 for CONV_2D and FULLY_CONNECTED filters, 3 for DEPTHWISE_CONV_2D;
    ``axis=None`` for per-tensor weights), zero point 0, narrow range [-127, 127].

    Per slice (``GetUniformQuantizedPerAxisTypeForWeight`` + ``ExpandVerySmallRange`` +
    ``DownCastScale``): ``m = max |w|`` (0 included); a range ``2m <= 1e-6`` is widened to
    ``m = 5e-7``; ``scale = (f32(m) - f32(-m)) / 254`` in float32 arithmetic (= ``f32(m / 127)``)."""
    def check(shape):           # the axis, before any value is read
        nonlocal axis
        if len(shape) == 0 and axis is not None:
            raise ShapeError("w", "per-axis weights need at least one dimension (use axis=None for per-tensor)", shape)
        if axis is not None:
            axis = normalize_axis(axis, len(shape), "axis")
            if shape[axis] == 0:
                raise ShapeError("w", f"dimension {axis} (the quantized dimension) is empty", shape)
            check_fits((shape[axis],), 16, "w", "its per-channel parameters")

    a = _float_array(w, "w", quiet=True, check=check)
    if a.size and not (np.isfinite(distinct(a).max()) and np.isfinite(distinct(a).min())):  # NaN, +-inf show there
        raise _not_finite(w, "w")
    m = _weight_maxabs(a, axis)
    m = np.where(2.0 * m > NEAR_ZERO_TOLERANCE, m, NEAR_ZERO_TOLERANCE / 2)
    with np.errstate(over="ignore"):
        scale = (np.float32(m.astype(np.float32)) - (-m).astype(np.float32)) / np.float32(254)
    if not np.all(np.isfinite(scale)):
        raise RangeError("w", "has values too large for a float32 scale", float(m.max()))
    return QuantParams(scale.astype(np.float32), np.zeros(scale.size, np.int64), 0 if axis is None else axis)


def bias_params(input_params: QuantParams, weight_params: QuantParams) -> QuantParams:  # noqa: F811
    """The int32 bias parameters the converter derives (``GetUniformQuantizedTypeForBias``):
    ``scale[c] = f32(double(input scale) * double(weight scale[c]))``, zero point 0, per-axis
    (quantized dimension 0) exactly when the weights are.

    The converter then checks the bias values against these scales: where a quantized bias would
    exceed INT32_MAX / 2 it widens that channel's bias and weight scales (:func:`adjust_for_bias`
    gives the final pair)."""
    check_params(input_params, "input_params")
    check_params(weight_params, "weight_params")
    if input_params.per_axis:
        raise ShapeError("input_params", "must be per-tensor (activations have one scale)", len(input_params))
    with np.errstate(over="ignore"):     # beyond float32: inf, refused below
        scale = (np.float64(input_params.scale[0]) * weight_params.scale.astype(np.float64)).astype(np.float32)
    if np.any(scale == 0) or not np.all(np.isfinite(scale)):
        raise RangeError("weight_params", "gives a bias scale that is 0 or not finite in float32",
                         float(scale[(scale == 0) | ~np.isfinite(scale)][0]))
    return QuantParams(scale, np.zeros(scale.size, np.int64), 0)


#: the largest quantized bias the converter allows before widening scales (INT32_MAX / 2)
BIAS_MAX = INT32_MAX // 2


def adjust_for_bias(input_params: QuantParams, weight_params: QuantParams,
                    bias: Any) -> tuple[QuantParams, QuantParams]:
    """The converter's final ``(weight params, bias params)`` of a FULLY_CONNECTED / CONV_2D /
    DEPTHWISE_CONV_2D with float bias ``bias`` (``QuantizationDriver::SetBiasParamsWithAdjustments``).

    ``weight_params`` are those of :func:`weight_params` for the layer's weights.  Starting from
    ``bias_params(input_params, weight_params)``, a bias that would quantize beyond
    ``BIAS_MAX = INT32_MAX // 2`` gets the scale ``|b| / BIAS_MAX`` (double) and the weights get
    ``|b| / BIAS_MAX / input scale``, both stored as float32:

    - per-axis: channel by channel, where ``|f32(b[c])| / bias_scale[c] > BIAS_MAX``;
    - per-tensor: ``R = max |b|``, when ``R / bias_scale >= BIAS_MAX`` (not ``<``).

    Without such a bias the result is ``(weight_params, bias_params(input_params, weight_params))``.
    Quantize the weights and the bias with the returned parameters (:func:`quantize_weights`,
    :func:`quantize_bias`)."""
    plain = bias_params(input_params, weight_params)
    b = _float_array(bias, "bias", quiet=True)
    if b.ndim != 1:
        raise ShapeError("bias", "must be 1-D (one value per output channel)", b.shape)
    if weight_params.per_axis and b.size != len(weight_params):
        raise ShapeError("bias", f"needs one value per weight scale ({len(weight_params)})", b.size)
    if b.size and not np.all(np.isfinite(b)):
        raise _not_finite(bias, "bias")
    s_in = np.float64(input_params.scale[0])
    bias_scale = plain.scale.astype(np.float64)
    w_scale = weight_params.scale.astype(np.float64)
    abs_b = np.abs(b).astype(np.float64)
    if weight_params.per_axis:
        adjust = abs_b / bias_scale > BIAS_MAX
        new_bias = np.where(adjust, abs_b / BIAS_MAX, bias_scale)
        new_w = np.where(adjust, new_bias / s_in, w_scale)
    else:
        r = abs_b.max() if b.size else 0.0
        if r / bias_scale[0] < BIAS_MAX:
            return weight_params, plain
        new_bias = np.array([r / BIAS_MAX])
        new_w = new_bias / s_in
    with np.errstate(over="ignore"):
        new_w = new_w.astype(np.float32)
    if not np.all(np.isfinite(new_w)):
        raise RangeError("bias", "needs a weight scale |bias| / BIAS_MAX / input scale beyond the float32 range",
                         float(abs_b[~np.isfinite(new_w)][0]) if weight_params.per_axis else float(r),
                         detail=f"The input scale is {float(s_in)!r}")
    w_out = QuantParams(new_w, weight_params.zero_point, weight_params.quantized_dimension)
    b_out = QuantParams(new_bias.astype(np.float32), plain.zero_point, plain.quantized_dimension)
    return w_out, b_out


# -------------------------------------------------------------------------------------------------
# element-wise conversions
# -------------------------------------------------------------------------------------------------

def affine_quantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``clamp(int32(TfLiteRound(x / scale)) + zero_point, lo, hi)`` with float32 ``x``/``scale``,
    as LiteRT's AffineQuantize: an out-of-range or NaN quotient converts to INT32_MIN (x86
    ``cvttss2si``) and the zero point is added with int32 wrap-around.  Returns int64 values."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        r = half_away_from_zero(x / scale)
    zp = np.asarray(zero_point, dtype=np.int64)
    # INT32_MIN + zp wraps to a large positive value for a negative zp, stays very negative otherwise
    wild = np.where(zp < 0, hi, lo)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(r) < np.float32(2 ** 31))
        clipped = np.clip(np.where(bad, 0, r), -(1 << 20), 1 << 20).astype(np.int64)
    return np.where(bad, wild, np.clip(clipped + zp, lo, hi))


def quantize(x: Any, params: QuantParams, *, out: np.ndarray | None = None) -> np.ndarray:
    """LiteRT QUANTIZE, float32 -> int8 (``reference_ops::AffineQuantize``; ``PerChannelQuantize``
    for per-axis ``params``): ``clamp(TfLiteRound(x / scale) + zero_point, -128, 127)`` with a true
    float32 division and rounding half away from zero.  ``x`` is converted to float32.  NaN and
    quotients beyond the int32 range become -128 (127 when the zero point is negative), as in the
    interpreter on x86-64."""
    def check(shape):
        check_params(params, "params", shape)
        lo, hi = params._zp_span
        if lo < -128 or hi > 127:
            raise RangeError("params.zero_point", "must lie in [-128, 127] for int8", hi if hi > 127 else lo)
        if out is not None:
            _check_out(out, shape, np.dtype(np.int8))
        else:
            check_fits(shape, 1, "x")

    a = _float_array(from_foreign(x), "x", quiet=True, check=check)     # float64 beyond the float32 range: +-inf, as data
    from . import fast
    result = fast.quantize(a, params, out if out is not None else np.empty(a.shape, np.int8))
    if result is not None:
        return result
    q = affine_quantize(a, along_axis(params.scale, params, a.ndim), along_axis(params.zero_point, params, a.ndim),
                         -128, 127)
    if out is None:
        return q.astype(np.int8)
    out[...] = q
    return out


def quantize_weights(w: Any, params: QuantParams) -> np.ndarray:
    """The int8 weight values the converter writes for the float32 weights ``w`` (``QuantizeLegacy``):

    - per-axis ``params``: ``clamp(TfLiteRound(w * f32(1.0 / scale[c])), -127, 127)``, the product
      in float32 (``SymmetricPerChannelQuantizeValues``);
    - per-tensor ``params``: ``PortableSymmetricQuantizeFloats``, which recomputes the range
      ``R = max |w|`` itself: ``clamp(round(w * f32(127 / R)), -127, 127)``; when its scale ``R/127``
      differs from ``params.scale`` by more than 1e-3 (``R = 0``, or parameters not derived from
      ``w``), the converter falls back to ``round_half_to_even(w / scale)`` in double.

    Where the factor is beyond float32 (``127 / R`` for ``R`` below ~``127 / FLT_MAX``, or ``1 / scale``
    for a scale below ~``1 / FLT_MAX``) it is +inf, and every product (``0 * inf`` is NaN) converts as the
    C++ ``static_cast<int32_t>`` does on x86, to INT32_MIN, which clamps to -127 (as the converter
    writes such weights).

    The zero point must be 0 (symmetric weights)."""
    def check(shape):
        check_params(params, "params", shape)
        if np.any(params.zero_point != 0):
            raise InvalidArgumentError("params.zero_point", "must be 0 for weights (symmetric quantization)",
                                       int(params.zero_point[params.zero_point != 0][0]))
        check_fits(shape, 1, "w")

    a = _float_array(w, "w", quiet=True, check=check)
    if a.size and not np.all(np.isfinite(a)):
        raise _not_finite(w, "w")
    with np.errstate(over="ignore", invalid="ignore"):
        # a factor beyond float32 (max |w| or a scale below ~1/FLT_MAX) is +inf: w * inf and 0 * inf
        # then convert as the C++ static_cast<int32_t> does on x86 (INT32_MIN), which clamps to -127
        if params.per_axis:
            inv = (1.0 / params.scale.astype(np.float64)).astype(np.float32)
            q = cvtt_int32(half_away_from_zero(a * along_axis(inv, params, a.ndim)))
        else:
            r = np.float32(np.abs(a).max()) if a.size else np.float32(0)
            portable_scale = np.float32(r / np.float32(127)) if r != 0 else np.float32(1)
            if r != 0 and abs(np.float64(portable_scale) - np.float64(params.scale[0])) <= 1e-3:
                q = cvtt_int32(half_away_from_zero(a * np.float32(np.float32(127) / r)))
            else:
                q = half_to_even(a.astype(np.float64) / np.float64(params.scale[0]))
    return np.asarray(np.clip(q, -127, 127)).astype(np.int8)   # a 0-d input: a 0-d array, not a numpy scalar


def quantize_bias(b: Any, params: QuantParams) -> np.ndarray:
    """The int32 bias values the converter writes (``SymmetricBiasQuantize``):
    ``clamp(TfLiteRound(b * f32(1.0 / scale)), -INT32_MAX, INT32_MAX)`` with the product in float32,
    one scale per element of a 1-D per-axis bias; NaN gives 0."""
    def check(shape):
        check_params(params, "params", shape)
        if np.any(params.zero_point != 0):
            raise InvalidArgumentError("params.zero_point", "must be 0 for a bias",
                                       int(params.zero_point[params.zero_point != 0][0]))
        check_fits(shape, 4, "b")

    a = _float_array(b, "b", refuse_overflow=True, check=check)
    with np.errstate(over="ignore", invalid="ignore"):
        inv = (1.0 / params.scale.astype(np.float64)).astype(np.float32)   # inf for a scale below 2^-128
        r = half_away_from_zero(a * along_axis(inv, params, a.ndim)).astype(np.float64)
        r = np.where(np.isnan(r), 0, np.clip(r, -INT32_MAX, INT32_MAX))   # SafeCast, then +-INT32_MAX
    return r.astype(np.int32)


def dequantize(q: Any, params: QuantParams, *, out: np.ndarray | None = None) -> np.ndarray:
    """LiteRT DEQUANTIZE: ``scale * (q - zero_point)`` as float32 — per-tensor as
    ``f32(double(scale) * (q - zp))`` (``reference_integer_ops::Dequantize``), per-axis as the
    float32 product ``scale[c] * f32(q - zp[c])`` (``PerChannelDequantize``); both are the correctly
    rounded product whenever ``|q - zp| <= 2^24``.  ``q`` is an int8, uint8, int16 or int32 array."""
    q = from_foreign(q)
    if isinstance(q, (bool, np.bool_)):
        raise DTypeError("q", "must be an integer array, not a bool", q)
    a = np.asarray(q)
    if a.dtype.kind not in "iu" or a.dtype.itemsize > 4 or a.dtype == np.uint32:
        raise DTypeError("q", "must be an int8, uint8, int16, uint16 or int32 array", str(a.dtype))
    check_params(params, "params", a.shape)
    lo, hi = params._zp_span
    if lo < -(1 << 31) or hi >= (1 << 31):
        # LiteRT keeps a zero point as int32 once the model is loaded (the file's int64 cut to its low
        # 32 bits); here q - zero_point would wrap around int64 and change sign
        raise RangeError("params.zero_point", "must fit in int32 (LiteRT holds zero points as int32)",
                         hi if hi >= (1 << 31) else lo)
    if out is not None:
        _check_out(out, a.shape, np.dtype(np.float32))
    else:
        check_fits(a.shape, 4, "q")
    from . import fast
    result = fast.dequantize(a, params, out if out is not None else np.empty(a.shape, np.float32))
    if result is not None:
        return result
    d = a.astype(np.int64) - along_axis(params.zero_point, params, a.ndim)
    s = along_axis(params.scale, params, a.ndim)
    if d.size == 0 or np.max(np.abs(d)) <= (1 << 24):
        result = d.astype(np.float32) * s                      # exact operands: one float32 rounding
    elif params.per_axis:
        result = d.astype(np.float32) * s
    else:
        result = (np.float64(s) * d.astype(np.float64)).astype(np.float32)
    if out is None:
        return np.asarray(result, dtype=np.float32)
    out[...] = result
    return out
