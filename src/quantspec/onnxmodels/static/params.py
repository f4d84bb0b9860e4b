"""Quantization parameters and quantized initializers, with onnxruntime 1.31.1's arithmetic.

Every function keeps the numpy dtypes onnxruntime's ``quant_utils`` / ``base_quantizer`` compute in,
because the bytes depend on them:

- activation scale: the range is widened to hold 0, the width ``rmax - rmin`` and ``qmax - qmin`` are
  taken in float64, the scale ``width / qrange`` is float64 and rounded once to the range's dtype
  (float32); the zero point is ``round(qmin - rmin / scale_f64)`` (half to even), or the middle of
  ``[qmin, qmax]`` when symmetric; a scale under float32's ``tiny`` becomes 1.0 with zero point 0;
- weight codes: ``round(float32(w) / scale_f32)`` (a float32 division, half to even), plus the zero
  point in float32, clipped to the full range of the type;
- int32 bias: ``round(float64(b) / float64(input_scale_f32 * weight_scale_f32 * beta))``, clipped
  to int32 (the product of the scales is float32);
- the weight scale raised when the bias scale would overflow int32 (``1.0001 * 2 * |b|max / (2^32 - 2)``),
  whose intermediate dtype is float64 per tensor and float32 per channel, as onnxruntime's.
"""

from __future__ import annotations

import numpy as np

from ...errors import RangeError

#: element type name -> (numpy dtype, ONNX TensorProto type number)
QTYPES = {"uint8": (np.uint8, 2), "int8": (np.int8, 3), "uint16": (np.uint16, 4), "int16": (np.int16, 5)}

_FULL = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}
_SYMMETRIC = {"int8": (-127, 127), "int16": (-32767, 32767)}
_REDUCED = {"uint8": (0, 127), "int8": (-64, 64), "uint16": (0, 32767), "int16": (-16384, 16384)}

def full_range(qtype: str) -> tuple[int, int, type]:
    """``(qmin, qmax, numpy dtype)`` of the whole type."""
    lo, hi = _FULL[qtype]
    return lo, hi, QTYPES[qtype][0]


INT32_MIN, INT32_MAX = np.float64(np.iinfo(np.int32).min), np.float64(np.iinfo(np.int32).max)


def qrange(qtype: str, reduce_range: bool = False, symmetric: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(qmin, qmax)`` as 0-d arrays of the quantized dtype: the reduced (7-bit) range first, then the
    symmetric int8 range [-127, 127], else the full range."""
    if reduce_range:
        lo, hi = _REDUCED[qtype]
    elif symmetric and qtype in _SYMMETRIC:
        lo, hi = _SYMMETRIC[qtype]
    else:
        lo, hi = _FULL[qtype]
    dtype = QTYPES[qtype][0]
    return np.array(lo, dtype=dtype), np.array(hi, dtype=dtype)


def scale_zero_point(rmin: np.ndarray, rmax: np.ndarray, qmin: np.ndarray, qmax: np.ndarray, symmetric: bool,
                     min_real_range: float | None = None, name: str = "") -> tuple[np.ndarray, np.ndarray]:
    """``(zero_point, scale)`` for the real range ``[rmin, rmax]`` (arrays of one value, any shape, their
    dtype kept for the scale).  A range whose scale is not a number >= 0 (a NaN in it: NaN or infinite
    values in the tensor) is a RangeError naming the tensor ``name``, where onnxruntime's
    ``compute_scale_zp`` fails its assertion ("scale issue")."""
    rmin = np.minimum(rmin, np.array(0, dtype=rmin.dtype))
    rmax = np.maximum(rmax, np.array(0, dtype=rmax.dtype))
    if min_real_range is not None:
        floor = rmin + np.asarray(min_real_range, dtype=rmin.dtype)
        rmax = floor if floor > rmax else rmax
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, +absmax
    width = np.array(rmax, dtype=np.float64) - np.array(rmin, dtype=np.float64)
    steps = np.array(qmax, dtype=np.float64) - np.array(qmin, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        scale = np.array(width / steps)
    if not scale >= 0:
        what = f"tensor {name!r}" if name else "a tensor"
        raise RangeError("calibration_data", f"gives {what} a range with no quantization scale: the tensor holds NaN "
                         "or infinite values (onnxruntime's quantizer fails here too, 'scale issue')",
                         f"[{_shown(rmin)}, {_shown(rmax)}]")
    if scale < np.finfo(rmax.dtype).tiny:
        return np.array(0, dtype=qmin.dtype), np.array(1.0, dtype=rmax.dtype)
    if symmetric:
        middle = (int(qmin) + int(qmax)) / np.array(2.0, dtype=np.float64)
        zero_point = np.array(np.round(middle), dtype=qmin.dtype)
    else:
        zero_point = np.array(np.round(qmin - rmin / scale), dtype=qmin.dtype)
    return zero_point, scale.astype(rmax.dtype)


def data_params(data: np.ndarray, qtype: str, symmetric: bool, reduce_range: bool,
                min_real_range: float | None, rmin_override=None, rmax_override=None) -> tuple[np.ndarray, np.ndarray]:
    """``(zero_point, scale)`` (0-d arrays) of a flat float tensor, from its own min and max (or the
    given ones, cast to the tensor's dtype)."""
    if rmin_override is not None:
        rmin = np.array(rmin_override, dtype=data.dtype)
    else:
        rmin = np.array(data.min() if data.size else 0.0, dtype=data.dtype)
    if rmax_override is not None:
        rmax = np.array(rmax_override, dtype=data.dtype)
    else:
        rmax = np.array(data.max() if data.size else 0.0, dtype=data.dtype)
    qmin, qmax = qrange(qtype, reduce_range, symmetric)
    if not data.size:
        return np.array(0, dtype=qmin.dtype), np.array(1.0, dtype=data.dtype)
    return scale_zero_point(rmin, rmax, qmin, qmax, symmetric, min_real_range)


def quantize_values(data: np.ndarray, qtype: str, scale, zero_point) -> np.ndarray:
    """The codes of a flat float tensor for one scale and zero point: float32 division, half-to-even
    rounding, zero point added in float32, clipped to the full range of the type."""
    qmin, qmax = qrange(qtype)
    codes = np.asarray(np.round(data.astype(np.float32) / scale) + zero_point)
    np.clip(codes, qmin, qmax, out=codes)
    return codes.astype(QTYPES[qtype][0])


def weight_params(data: np.ndarray, qtype: str, symmetric: bool, reduce_range: bool, min_real_range: float | None,
                  axis: int | None, ranges=None) -> tuple[np.ndarray, np.ndarray]:
    """``(zero_point, scale)``: 0-d arrays per tensor, 1-D arrays (one per slice along ``axis``) per channel.
    ``ranges``: given ``(rmin, rmax)`` (None for the data's own), one pair per tensor or a list per channel."""
    if axis is None:
        lo, hi = ranges if ranges is not None else (None, None)
        return data_params(data.reshape(-1), qtype, symmetric, reduce_range, min_real_range, lo, hi)
    zps, scales = [], []
    for i in range(data.shape[axis]):
        lo, hi = ranges[i] if ranges is not None else (None, None)
        zp, sc = data_params(data.take(i, axis).reshape(-1), qtype, symmetric, reduce_range, min_real_range, lo, hi)
        zps.append(zp)
        scales.append(sc)
    return np.asarray(zps), np.asarray(scales)


def quantize_weight(data: np.ndarray, qtype: str, zero_point: np.ndarray, scale: np.ndarray,
                    axis: int | None) -> np.ndarray:
    """The codes of a weight, per tensor (``axis`` None) or per slice along ``axis``, shaped as ``data``."""
    if axis is None:
        return quantize_values(data.reshape(-1), qtype, scale, zero_point).reshape(data.shape)
    shape = list(data.shape)
    shape[axis] = 1
    parts = [quantize_values(data.take(i, axis).reshape(-1), qtype, scale[i], zero_point[i]).reshape(shape)
             for i in range(data.shape[axis])]
    return np.concatenate(parts, axis)


_EPSILON = 1.0001
_INT32_STEPS = np.array(np.iinfo(np.int32).max, dtype=np.float64) - np.array(np.iinfo(np.int32).min + 1,
                                                                              dtype=np.float64)


def _raised(absmax, input_scale: np.ndarray, weight_scale) -> np.ndarray | None:
    """The raised weight scale (float64) when ``input_scale * weight_scale`` is too small for ``absmax``."""
    smallest = _EPSILON * (2.0 * absmax) / _INT32_STEPS
    in64 = np.array(np.asarray(input_scale).item(), dtype=np.float64)
    w64 = np.array(np.asarray(weight_scale).item(), dtype=np.float64)
    candidate = in64 * w64
    if candidate < smallest and candidate > 0.0:
        return w64 * (smallest / candidate)
    return None


def raise_weight_scale_for_bias(bias: np.ndarray, input_scale: np.ndarray, weight_scale: np.ndarray,
                                per_channel: bool) -> np.ndarray | None:
    """The weight scale raised so that the int32 bias does not saturate, or None when no element needed it.
    Per tensor the bias's abs-max is taken in float64; per channel each ``|b[i]|`` stays in the bias's
    dtype, as onnxruntime computes them."""
    if not weight_scale.size:
        return None
    dtype = weight_scale.dtype
    if not per_channel:
        rmin = np.minimum(bias.min(), np.array(0, dtype=np.float64))
        rmax = np.maximum(bias.max(), np.array(0, dtype=np.float64))
        new = _raised(np.maximum(np.abs(rmin), np.abs(rmax)), input_scale, weight_scale)
        return None if new is None else np.array(new, dtype=dtype)
    if weight_scale.ndim != 1:
        return None
    out, changed = weight_scale.copy(), False
    for i in range(weight_scale.shape[0]):
        new = _raised(np.abs(bias[i]), input_scale, weight_scale[i])
        if new is not None:
            out[i] = new.astype(dtype)
            changed = True
    return out if changed else None


def bias_scale(input_scale: np.ndarray, weight_scale: np.ndarray, beta: float = 1.0):
    """The int32 bias's scale, ``input_scale * weight_scale * beta`` in the scales' dtype."""
    return input_scale * weight_scale * beta


def quantize_bias(bias: np.ndarray, scale) -> np.ndarray:
    """The int32 bias: float64 division, half-to-even rounding, clipped to int32, shaped as ``bias``."""
    q = (np.asarray(bias, dtype=np.float64) / np.asarray(scale, dtype=np.float64)).round()
    return np.clip(q, INT32_MIN, INT32_MAX).astype(np.int32).reshape(bias.shape)


def snapped_uint8(rmin, rmax, qmin: int, qmax: int, min_real_range: float | None) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime's ActivationRestrictedAsymmetric rule for uint8 activations (Python float arithmetic):
    the zero point is qmin when the range holds no negative value, else the middle ``(qmin + qmax + 1) // 2``,
    and the scale the smallest that covers the range from there (float32 at the end)."""
    mid = (qmin + qmax + 1) // 2
    lo = min(float(np.squeeze(rmin)), 0.0)
    hi = max(float(np.squeeze(rmax)), 0.0)
    if min_real_range is not None and min_real_range > 0:
        hi = max(hi, lo + float(min_real_range))
    if hi <= lo:
        zp = qmin if lo >= 0.0 else mid
        absmax = max(abs(lo), abs(hi))
        denom = (qmax - qmin) if zp == qmin else max(1, (qmax - qmin) // 2)
        value = (absmax if absmax > 0 else 1.0) / max(1, denom)
        if min_real_range is not None and value < min_real_range / (qmax - qmin):
            value = min_real_range / (qmax - qmin)
        return np.array(zp, dtype=np.uint8), np.array(value, dtype=np.float32)
    if lo >= 0.0:
        zero_point = np.array(qmin, dtype=np.uint8)
        scale = np.array(hi / (qmax - qmin), dtype=np.float32)
    else:
        zero_point = np.array(mid, dtype=np.uint8)
        scale = np.array(max(-lo / (mid - qmin), hi / (qmax - mid)), dtype=np.float32)
    if min_real_range is not None and float(scale) < min_real_range / (qmax - qmin):
        scale = np.array(min_real_range / (qmax - qmin), dtype=np.float32)
    return zero_point, scale


def _shown(a) -> str:
    a = np.asarray(a).ravel()
    return str(float(a[0])) if a.size == 1 else str(a.tolist())


def activation_params(lowest: np.ndarray, highest: np.ndarray, qtype: str, symmetric: bool,
                      min_real_range: float | None, restricted: bool = False,
                      name: str = "") -> tuple[np.ndarray, np.ndarray]:
    """``(zero_point, scale)`` of an activation from its calibrated range (the range's shape kept), or
    the ActivationRestrictedAsymmetric pair (0-d) for asymmetric uint8 when ``restricted``."""
    qmin, qmax = qrange(qtype, False, symmetric)
    pair = scale_zero_point(np.asarray(lowest), np.asarray(highest), qmin, qmax, symmetric, min_real_range, name)
    if restricted and qtype == "uint8" and not symmetric:
        return snapped_uint8(lowest, highest, int(qmin), int(qmax), min_real_range)
    return pair


def activation_table(ranges: dict, options) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{tensor: (zero_point, scale)}`` of every calibrated tensor (``ranges``: ``{name: Range}``) under
    ``options`` (:class:`.options.StaticOptions`): its activation type and symmetry, MinimumRealRange and
    ActivationRestrictedAsymmetric, as both writers compute them before they quantize anything."""
    restricted = bool(options.opt("ActivationRestrictedAsymmetric"))
    return {name: activation_params(r.lowest, r.highest, options.activation_type, options.activation_symmetric,
                                    options.opt("MinimumRealRange"), restricted, name)
            for name, r in ranges.items()}
