"""LiteRT (TFLite) and its 8-bit quantization specification.

Public API: ``QuantParams``, ``activation_params``, ``weight_params``, ``bias_params``
(and ``adjust_for_bias``, the converter's bias-overflow widening of both),
``quantize``, ``quantize_weights``, ``quantize_bias``, ``dequantize``, ``fixedpoint``, ``OPS``,
``OP_TABLE``, ``load_model``, ``check_model``, ``Interpreter``.  Names are imported from their
modules on first use, so ``import quantspec.litert`` stays cheap.
"""

from __future__ import annotations

import importlib

# public name -> module (relative to this package) that defines it
_EXPORTS = {
    "QuantParams": "params",
    "activation_params": "params",
    "weight_params": "params",
    "bias_params": "params",
    "adjust_for_bias": "params",
    "quantize": "params",
    "quantize_weights": "params",
    "quantize_bias": "params",
    "dequantize": "params",
    "OPS": "kernels",
    "OP_TABLE": "optable",
    "load_model": "model",
    "Model": "model",
    "example_model": "model",
    "check_model": "checker",
    "CheckReport": "checker",
    "Violation": "checker",
    "Interpreter": "interpreter",
    "QuantizeOp": "ops",
    "DequantizeOp": "ops",
}
_SUBMODULES = ("fixedpoint", "params", "optable", "kernels", "model", "checker", "interpreter")

__all__ = sorted([*_EXPORTS, *_SUBMODULES])


def __getattr__(name: str):
    if name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    else:
        raise AttributeError(f"module 'quantspec.litert' has no attribute {name!r}")
    globals()[name] = value
    return value
