"""quantspec: the quantization of TensorFlow, ONNX and LiteRT, bit for bit.

Subpackages (imported on first use):

- :mod:`quantspec.onnx` — QuantizeLinear / DequantizeLinear, every opset, three compat modes;
- :mod:`quantspec.tf` — QuantizeV2, Dequantize, QuantizeAndDequantize*, FakeQuant*;
- :mod:`quantspec.litert` — the LiteRT 8-bit spec: parameters, fixed point, int8 kernels, models;
- :mod:`quantspec.onnxmodels` — ONNX models: ``check_model``, ``audit``, ``convert_model``;
- :mod:`quantspec.checkpoint` — whole checkpoints: ``convert`` and ``open``;
- :mod:`quantspec.equiv` — :func:`translate` a quantizer between the specs, prove two
  :func:`equivalent` over every input;
- :mod:`quantspec.calibrate` — calibration observers with the ranges and parameters of
  onnxruntime's calibrators and of the TFLite converter.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"
__all__ = ["onnx", "tf", "litert", "onnxmodels", "checkpoint", "errors", "dtypes", "equiv", "calibrate", "translate",
           "equivalent", "__version__"]


def __getattr__(name: str):
    if name in ("translate", "equivalent"):     # quantspec.equiv's two entry points
        value = getattr(importlib.import_module(".equiv", __name__), name)
        globals()[name] = value
        return value
    if name in ("onnx", "tf", "litert", "onnxmodels", "checkpoint", "errors", "dtypes", "equiv", "calibrate"):
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'quantspec' has no attribute {name!r}")
