"""quantspec: the quantization of TensorFlow, ONNX and LiteRT, bit for bit.

Subpackages (imported on first use):

- :mod:`quantspec.onnx` — QuantizeLinear / DequantizeLinear, every opset, three compat modes;
- :mod:`quantspec.tf` — QuantizeV2, Dequantize, QuantizeAndDequantize*, FakeQuant*;
- :mod:`quantspec.litert` — the LiteRT 8-bit spec: parameters, fixed point, int8 kernels, models;
- :mod:`quantspec.checkpoint` — whole checkpoints: ``convert`` and ``open``.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"
__all__ = ["onnx", "tf", "litert", "checkpoint", "errors", "dtypes", "__version__"]


def __getattr__(name: str):
    if name in ("onnx", "tf", "litert", "checkpoint", "errors", "dtypes"):
        module = importlib.import_module(f".{name}", __name__)
        globals()[name] = module
        return module
    raise AttributeError(f"module 'quantspec' has no attribute {name!r}")
