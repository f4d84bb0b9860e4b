"""From a calibrated range to quantization parameters, as the tools compute them.

:func:`onnx_params` is what onnxruntime's quantizer does with an activation's range
(``quant_utils.compute_scale_zp`` with the limits of ``get_qmin_qmax_for_qType``):

1. the range widened to contain 0 (``np.minimum(rmin, 0)``, ``np.maximum(rmax, 0)``, in the
   range's type), then to ``min_real_range`` if given, then made symmetric if asked;
2. ``scale = (rmax - rmin) / (qmax - qmin)`` in float64; a scale below the type's smallest normal
   gives scale 1 and zero point 0;
3. the zero point ``round_half_even(qmin - rmin / scale)`` (symmetric: ``round((qmin + qmax) / 2)``)
   in the quantized type, the scale stored in the range's type (float32).

The limits (:data:`QRANGES`): the type's full range; with ``symmetric`` for int8 / int16 the narrow
one (-127 / -32767); with ``reduce_range`` the 7-bit (15-bit) ones.  :func:`float8_params` is
``compute_scale_zp_float8`` (E4M3FN: the scale ``std / std(float8 values)``, zero point 0), for the
Distribution method's ``std``.  For the TFLite converter's parameters see
:meth:`quantspec.calibrate.TFLiteMinMaxObserver.params` (:func:`quantspec.litert.activation_params`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..dtypes import qtype
from ..errors import DTypeError, InvalidArgumentError, ShapeError, UnsupportedError
from .ranges import CalibrationRange

__all__ = ["onnx_params", "float8_params", "QRANGES"]

#: (qmin, qmax) per type: full range, ``symmetric``, ``reduce_range``
QRANGES = {
    "uint8": {"full": (0, 255), "reduced": (0, 127)},
    "int8": {"full": (-128, 127), "symmetric": (-127, 127), "reduced": (-64, 64)},
    "uint16": {"full": (0, 65535), "reduced": (0, 32767)},
    "int16": {"full": (-32768, 32767), "symmetric": (-32767, 32767), "reduced": (-16384, 16384)},
}


def _limits(name: str, symmetric: bool, reduce_range: bool):
    row = QRANGES[name]
    key = "reduced" if reduce_range else ("symmetric" if symmetric and "symmetric" in row else "full")
    dt = qtype(name).dtype
    lo, hi = row[key]
    return np.array(lo, dtype=dt), np.array(hi, dtype=dt)


def onnx_params(calibrated, quant_type: str = "uint8", *, symmetric: bool = False, reduce_range: bool = False,
                min_real_range: float | None = None):
    """``(zero_point, scale)`` of onnxruntime's quantizer for the range ``calibrated`` (a
    :class:`CalibrationRange`, an observer, or a pair ``(rmin, rmax)`` of float32 arrays / scalars);
    ``quant_type`` uint8, int8, uint16 or int16.  The values and dtypes of ``compute_scale_zp``'s
    result (the zero point in the quantized type, the scale float32)."""
    if hasattr(calibrated, "range") and callable(calibrated.range):
        calibrated = calibrated.range()
    if isinstance(calibrated, CalibrationRange):
        rmin, rmax = calibrated.range_value
    else:
        try:
            rmin, rmax = calibrated
        except (TypeError, ValueError):
            raise InvalidArgumentError("calibrated", "must be a CalibrationRange, an observer or a pair (rmin, rmax)",
                                       calibrated) from None
    rmin = rmin if hasattr(rmin, "dtype") else np.float32(rmin)
    rmax = rmax if hasattr(rmax, "dtype") else np.float32(rmax)
    for name_, v in (("rmin", rmin), ("rmax", rmax)):
        if np.size(v) != 1:
            raise ShapeError("calibrated", f"must give one {name_} value (a per-tensor range)", np.shape(v))
        if np.dtype(v.dtype).kind != "f":
            raise DTypeError("calibrated", f"must give a floating-point {name_} (onnxruntime reads its dtype's "
                             "smallest normal number)", str(v.dtype))
    name = qtype(quant_type, "quant_type").name
    if name not in QRANGES:
        raise UnsupportedError("quant_type", "must be one of " + ", ".join(QRANGES) + " (onnxruntime: 'Only INT8, "
                               "UINT8, INT16, and UINT16 are supported.')", name)
    qmin, qmax = _limits(name, symmetric, reduce_range)
    rmin = np.minimum(rmin, np.array(0, dtype=rmin.dtype))
    rmax = np.maximum(rmax, np.array(0, dtype=rmax.dtype))
    if min_real_range is not None:
        try:
            mrr = np.asarray(min_real_range, dtype=rmin.dtype)
        except (TypeError, ValueError):
            mrr = None
        if mrr is None or mrr.ndim or isinstance(min_real_range, (str, bytes)):
            raise InvalidArgumentError("min_real_range", "must be None or a number", min_real_range)
        rmax = max(rmax, rmin + mrr)
    if symmetric:
        absmax = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -absmax, +absmax
    with np.errstate(invalid="ignore"):     # inf - inf: NaN, refused below as onnxruntime's assertion does
        dr = np.array(rmax, dtype=np.float64) - np.array(rmin, dtype=np.float64)
        dq = np.array(qmax, dtype=np.float64) - np.array(qmin, dtype=np.float64)
        scale = np.array(dr / dq)
    if not scale >= 0:
        raise InvalidArgumentError("calibrated", "gives a range whose width is not a number >= 0 (NaN in the range?); "
                                   "onnxruntime fails here too ('scale issue')", (float(np.ravel(rmin)[0]),
                                                                                  float(np.ravel(rmax)[0])))
    if scale < np.finfo(rmax.dtype).tiny:
        return np.array(0, dtype=qmin.dtype), np.array(1.0, dtype=rmax.dtype)
    with np.errstate(invalid="ignore", over="ignore"):    # an infinite range: inf / inf, NaN cast, as numpy does
        if symmetric:
            zero = np.array(np.round((qmin + qmax) / np.array(2.0, dtype=np.float64)), dtype=qmin.dtype)
        else:
            zero = np.array(np.round(qmin - rmin / scale), dtype=qmin.dtype)
        return zero, scale.astype(rmax.dtype)


_E4M3 = None


def float8_params(calibrated):
    """``(zero_point, scale)`` for float8 E4M3FN from a Distribution range's ``std``:
    ``scale = std / std(every finite float8e4m3fn value)``, zero point float8 0."""
    global _E4M3
    if hasattr(calibrated, "range") and callable(calibrated.range):
        calibrated = calibrated.range()
    std = getattr(calibrated, "std", None) if isinstance(calibrated, CalibrationRange) else None
    if std is None:
        raise InvalidArgumentError("calibrated", "needs a standard deviation (the Distribution method's range)",
                                   calibrated)
    if _E4M3 is None:
        values = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
        _E4M3 = np.std(values[np.isfinite(values)])
    return np.array(0, dtype=ml_dtypes.float8_e4m3fn), np.array(std / _E4M3, dtype=std.dtype)
