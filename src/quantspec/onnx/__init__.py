"""ONNX QuantizeLinear / DequantizeLinear, every opset (10, 13, 19, 21, 23, 24, 25, 28), bit-exact.

``compat="spec"`` (default) follows the operator text; ``"reference"`` reproduces onnx.reference
1.23 on x86-64; ``"onnxruntime"`` reproduces onnxruntime 1.31.1 or 1.32.0 CPU (``ort_version=``; by
default the installed onnxruntime's release when it is one of those, else 1.32.0).  See
``docs/onnx.md`` for the semantics and the divergence table, and :mod:`quantspec.onnx.reference` for
the arithmetic.
"""

from __future__ import annotations

import importlib
import warnings

from . import opsets
from .functions import dequantize_linear, quantize_linear, quantize_linear_packed
from .ops import DequantizeLinearOp, QuantizeLinearOp
from .packing import pack, unpack
from .plan import COMPAT_MODES, DequantizePlan, QuantizePlan, plan_dequantize, plan_quantize

__all__ = ["quantize_linear", "quantize_linear_packed", "dequantize_linear", "pack", "unpack", "plan_quantize", "plan_dequantize",
           "QuantizePlan", "DequantizePlan", "COMPAT_MODES", "opsets", "QuantizeLinearOp", "DequantizeLinearOp"]

#: the ONNX model tools are the package quantspec.onnxmodels (this package is the operator spec alone,
#: and the model tools build on it); their names here from earlier versions keep working, with a
#: DeprecationWarning that says where they are now
_MOVED = ("check_model", "audit", "CheckReport", "AuditReport", "convert_model", "ModelConversionReport", "models")


#: names of the ONNX model tools that belong to this package's contract, loaded when first used (no
#: warning): the static quantization of a float model
_CONTRACT = {"quantize_static": "quantspec.onnxmodels.static"}


def __getattr__(name: str):
    if name in _CONTRACT:
        return getattr(importlib.import_module(_CONTRACT[name]), name)
    if name in _MOVED:
        new = "quantspec.onnxmodels" + ("" if name == "models" else f".{name}")
        warnings.warn(f"quantspec.onnx.{name} is {new} (the ONNX model tools are a package of their own)",
                      DeprecationWarning, stacklevel=2)
        tools = importlib.import_module("quantspec.onnxmodels")
        return tools if name == "models" else getattr(tools, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
