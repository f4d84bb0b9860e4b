"""Calibration observers with the exact ranges and parameters of the tools they name.

Each observer is fed a tensor's activation arrays one batch (one inference) at a time and gives the
range — and from it the quantization parameters — that the named tool computes from the same
batches, bit for bit, in fused single-pass kernels:

============================  =================================================================
observer                      reproduces
============================  =================================================================
:class:`MinMaxObserver`       ``onnxruntime.quantization.calibrate`` ``CalibrationMethod.MinMax``
                              (``symmetric``, ``moving_average``, ``averaging_constant``)
:class:`EntropyObserver`      ``CalibrationMethod.Entropy`` (``num_bins``, ``num_quantized_bins``)
:class:`PercentileObserver`   ``CalibrationMethod.Percentile`` (``num_bins``, ``percentile``,
                              ``symmetric``)
:class:`DistributionObserver` ``CalibrationMethod.Distribution`` (``num_bins``, ``scenario``)
:class:`TFLiteMinMaxObserver` the TFLite converter's calibrator, then
                              :func:`quantspec.litert.activation_params`
============================  =================================================================

``observer.update(batch)`` per batch; ``observer.flush()`` where onnxruntime's ``collect_data`` call
ends (optional: ``range()`` flushes; one ``collect_data`` call over all batches is the common
case); ``observer.range()`` the :class:`CalibrationRange` (the fields of onnxruntime's
``TensorData``); ``observer.params(quant_type)`` / :func:`onnx_params` the zero point and scale of
onnxruntime's quantizer.  Modules: :mod:`.minmax`, :mod:`.histogram`, :mod:`.algorithms`,
:mod:`.params`, :mod:`._jitted`.  docs/calibrate.md describes each tool's rule.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "MinMaxObserver": "minmax",
    "TFLiteMinMaxObserver": "minmax",
    "HistogramObserver": "histogram",
    "EntropyObserver": "histogram",
    "PercentileObserver": "histogram",
    "DistributionObserver": "histogram",
    "CalibrationRange": "ranges",
    "onnx_params": "params",
    "float8_params": "params",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'quantspec.calibrate' has no attribute {name!r}")
