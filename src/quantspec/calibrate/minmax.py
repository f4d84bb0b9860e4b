"""Min/max calibration: onnxruntime's ``MinMaxCalibrater`` and the TFLite converter's calibrator.

:class:`MinMaxObserver` gives the range ``onnxruntime.quantization.calibrate`` computes with
``CalibrationMethod.MinMax`` (``create_calibrator(..., extra_options={"symmetric", "moving_average",
"averaging_constant"})``), fed the same batches:

- per batch (one inference), the minimum and maximum of the tensor as onnxruntime's ``ReduceMin`` /
  ``ReduceMax`` compute them (:func:`quantspec.calibrate._jitted.ort_min_max`: a NaN counts or not
  depending on where it is, as in onnxruntime; an empty batch gives their identities, ``+inf`` and
  ``-inf``);
- per ``collect_data`` call (:meth:`MinMaxObserver.flush`; :meth:`range` flushes), ``np.nanmin`` /
  ``np.nanmax`` over the batches, or ``np.nanmean`` with ``moving_average``; ``symmetric``:
  ``(-m, m)`` with ``m = nanmax(|min|, |max|)``;
- across calls, the new range merged into the old: ``min`` / ``max`` (Python's, as onnxruntime's
  ``merge_range``), or ``old + averaging_constant * (new - old)`` with ``moving_average``.

:class:`TFLiteMinMaxObserver` gives the range the TFLite converter's calibrator records for a
tensor over the representative dataset (``calibration_logger.cc`` ``MinMax::Update``): the global
minimum and maximum, NaN skipped, starting from ``min = FLT_MAX`` and ``max = FLT_MIN`` (the
smallest *positive* float: a tensor with no positive value keeps ``max = 1.1754944e-38``), and the
parameters the converter then derives (:func:`quantspec.litert.activation_params`).
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, InvalidArgumentError
from ._load import jitted
from .ranges import CalibrationRange

__all__ = ["MinMaxObserver", "TFLiteMinMaxObserver", "as_batch", "quiet_float_warnings"]


def as_batch(batch, argument: str = "batch") -> np.ndarray:
    """An activation batch as a flat float32 array in C order (the tensor as a runtime holds it)."""
    if isinstance(batch, (bool, np.bool_)):
        raise DTypeError(argument, "must be a float32 array", batch)
    a = np.asarray(batch)
    if a.dtype != np.float32:
        if a.dtype.kind in "iu" or (a.dtype.kind == "f" and a.dtype != np.float32):
            raise DTypeError(argument, "must be float32, the type of the tensors the calibrators read (convert it "
                             "with .astype(np.float32) if that is what your model computes)", str(a.dtype))
        raise DTypeError(argument, "must be a float32 array", str(a.dtype))
    return np.ascontiguousarray(a).reshape(-1)


class MinMaxObserver:
    """onnxruntime's MinMax calibrator for one tensor, fed batch by batch (see the module docstring).

    ``update(batch)`` per inference; ``flush()`` where onnxruntime's ``collect_data`` call ends
    (optional: :meth:`range` flushes); :meth:`range` is ``compute_data()[tensor]``;
    :meth:`params` the scale and zero point onnxruntime's quantizer derives from it."""

    method = "MinMax"

    def __init__(self, *, symmetric: bool = False, moving_average: bool = False, averaging_constant: float = 0.01):
        if isinstance(averaging_constant, bool) or not isinstance(averaging_constant, (int, float, np.floating)):
            raise InvalidArgumentError("averaging_constant", "must be a number in [0, 1]", averaging_constant)
        if moving_average and not 0 <= averaging_constant <= 1:
            raise InvalidArgumentError("averaging_constant", "must be in [0, 1] (onnxruntime: 'Invalid averaging "
                                       "constant, which should not be < 0 or > 1.')", averaging_constant)
        self.symmetric = bool(symmetric)
        self.moving_average = bool(moving_average)
        self.averaging_constant = averaging_constant
        self._mins: list = []          # each run's ReduceMin / ReduceMax (float32 values)
        self._maxs: list = []
        self._range: tuple[np.ndarray, np.ndarray] | None = None

    def update(self, batch) -> MinMaxObserver:
        """One batch: the tensor's values in one inference."""
        x = as_batch(batch)
        if x.size == 0:      # onnxruntime's ReduceMin / ReduceMax of no value: their identities
            mn, mx = np.float32(np.inf), np.float32(-np.inf)
        else:
            mn, mx = ort_min_max(x)
        self._mins.append(mn)
        self._maxs.append(mx)
        return self

    def flush(self) -> MinMaxObserver:
        """End of a ``collect_data`` call: the batches since the last flush become one range, merged
        into the range so far."""
        if not self._mins:
            return self
        # onnxruntime passes numpy a list of the runs' 1-element outputs (a list, not an array: np.nanmin
        # of an array takes another path, fmin.reduce, which keeps another zero's sign)
        mins = list(np.array(self._mins, np.float32).reshape(-1, 1))
        maxs = list(np.array(self._maxs, np.float32).reshape(-1, 1))
        with np.errstate(over="ignore", invalid="ignore"), quiet_float_warnings():
            if self.moving_average:
                lo, hi = np.nanmean(mins, axis=0), np.nanmean(maxs, axis=0)
            else:
                lo, hi = np.nanmin(mins, axis=0), np.nanmax(maxs, axis=0)
            if self.symmetric:
                m = np.nanmax([np.abs(lo), np.abs(hi)], axis=0)
                lo, hi = -m, +m
        self._mins, self._maxs = [], []
        if self._range is None:
            self._range = (lo, hi)
        else:
            old_lo, old_hi = self._range
            if self.moving_average:
                c = self.averaging_constant
                with np.errstate(over="ignore", invalid="ignore"):     # inf - inf: NaN, as numpy gives it
                    self._range = (old_lo + c * (lo - old_lo), old_hi + c * (hi - old_hi))
            else:
                self._range = (_python_min(old_lo, lo), _python_max(old_hi, hi))
        return self

    def range(self) -> CalibrationRange:
        """The calibrated range (``TensorData.range_value``: 1-element float32 arrays)."""
        self.flush()
        if self._range is None:
            raise InvalidArgumentError("batch", "no data has been observed (onnxruntime: 'No data is collected.')",
                                       None)
        return CalibrationRange(self.method, *self._range)

    def params(self, quant_type: str = "uint8", **options):
        """``(zero_point, scale)`` for this range (:func:`quantspec.calibrate.onnx_params`)."""
        from .params import onnx_params

        return onnx_params(self.range(), quant_type, **options)


def _plain_min_max(x: np.ndarray):
    """``(min, max)`` of ``x`` by numpy's vectorised reductions, or None where the order of the
    comparisons could matter: a NaN anywhere (numpy's result is then NaN) or a zero extreme (``-0.0``
    and ``+0.0`` compare equal, so which one a runtime keeps depends on its order).  Otherwise the
    extreme values are unique bit patterns (two nonzero floats that compare equal have the same
    bits), so any order of comparisons that keeps a value unless another is strictly smaller
    (larger) ends with exactly these."""
    mn, mx = np.minimum.reduce(x), np.maximum.reduce(x)
    if mn == mn and mx == mx and mn != 0 and mx != 0:
        return mn, mx
    return None


def ort_min_max(x: np.ndarray):
    """onnxruntime's ``ReduceMin`` / ``ReduceMax`` of a flat float32 array: numpy's reductions where
    they give the same bits (:func:`_plain_min_max`), else the kernel that follows onnxruntime's
    lane order (:func:`quantspec.calibrate._jitted.ort_min_max`)."""
    plain = _plain_min_max(x)
    return plain if plain is not None else jitted().ort_min_max(x)


def _min_max_skip_nan(x: np.ndarray, mn, mx):
    """The TFLite calibrator's running ``(min, max, seen)`` over ``x`` (NaN skipped, a value replacing
    the current one only when strictly smaller / larger): numpy's reductions where they give the same
    bits, else the element-order kernel."""
    plain = _plain_min_max(x)
    if plain is not None:
        lo, hi = plain
        return (lo if lo < mn else mn), (hi if hi > mx else mx), True
    return jitted().min_max_skip_nan(x, mn, mx)


def _python_min(a, b):
    """Python's ``min(a, b)`` on two 1-element arrays: ``b`` only when ``b < a``."""
    return b if bool(b < a) else a


def _python_max(a, b):
    return b if bool(b > a) else a


class quiet_float_warnings:
    """numpy's All-NaN-slice RuntimeWarning off (onnxruntime prints it; the value is the same)."""

    def __enter__(self):
        import warnings

        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc):
        self._w.__exit__(*exc)


_FLT_MAX = np.float32(np.finfo(np.float32).max)
_FLT_MIN = np.float32(np.finfo(np.float32).tiny)      # std::numeric_limits<float>::min()


class TFLiteMinMaxObserver:
    """The TFLite converter's calibrator for one tensor (see the module docstring): ``update(batch)``
    per inference of the representative dataset, :meth:`range` the recorded ``(min, max)`` as float32
    scalars, :meth:`params` the int8 :class:`~quantspec.litert.QuantParams` the converter gives the
    tensor (:func:`quantspec.litert.activation_params`)."""

    method = "TFLite MinMax"

    def __init__(self):
        self._min = _FLT_MAX
        self._max = _FLT_MIN
        self._seen = False

    def update(self, batch) -> TFLiteMinMaxObserver:
        x = as_batch(batch)
        if x.size:
            mn, mx, seen = _min_max_skip_nan(x, self._min, self._max)
            self._min, self._max = np.float32(mn), np.float32(mx)
            self._seen |= bool(seen)
        return self

    def range(self) -> CalibrationRange:
        if not self._seen:
            raise InvalidArgumentError("batch", "no value that is not NaN has been observed (the calibrator records "
                                       "no range for the tensor)", None)
        return CalibrationRange(self.method, np.float32(self._min), np.float32(self._max))

    def params(self, dtype: str = "int8"):
        """The converter's int8 parameters for the recorded range."""
        from ..litert.params import activation_params

        r = self.range()
        return activation_params(r.lowest, r.highest, dtype)
