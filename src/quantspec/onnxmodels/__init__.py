"""ONNX models: reading them (external data and models over 2 GB included), checking every
quantization node against the operators' rules, and auditing where onnxruntime and onnx.reference
depart from the spec inside a real model.  Needs the ``onnx`` package (``pip install
'quantspec[onnx]'``); the audit's run also needs ``onnxruntime``.

- :func:`check_model` -> :class:`CheckReport` (``quantspec check MODEL.onnx``);
- :func:`audit` -> :class:`AuditReport` (``quantspec audit MODEL.onnx``);
- :func:`convert_model` -> :class:`ModelConversionReport` (``quantspec convert MODEL.onnx OUT.onnx``):
  weight-only quantization of a float model with the checkpoint schemes, as DequantizeLinear nodes or
  com.microsoft MatMulNBits;
- :func:`quantize_static` -> :class:`StaticQuantizationReport` (``quantspec convert MODEL.onnx OUT.onnx
  --static``): onnxruntime's ``quantize_static``, byte for byte; :func:`collect_ranges` (``quantspec
  calibrate``): its calibration;
- :func:`load_model`, :func:`save_model`: the reading and writing helpers the others build on.

See ``docs/onnx-models.md``.
"""

from __future__ import annotations

from .auditor import AuditReport, NodeAudit, Risk, audit
from .checker import check_model
from .io import OnnxModel, load_model, save_model
from .report import RULES, CheckReport, Violation

__all__ = ["check_model", "CheckReport", "Violation", "RULES", "audit", "AuditReport", "NodeAudit", "Risk",
           "convert_model", "ModelConversionReport", "WeightReport", "required_opset", "load_model", "save_model",
           "OnnxModel", "quantize_static", "StaticQuantizationReport", "collect_ranges"]

#: the converters' names, imported when first used (they need quantspec.checkpoint or the calibrators, which
#: checking does not)
_CONVERTER = {"convert_model": "converter", "required_opset": "converter", "ModelConversionReport": "convreport",
              "WeightReport": "convreport", "quantize_static": "static", "StaticQuantizationReport": "static",
              "collect_ranges": "calibration"}


def __getattr__(name: str):
    if name in _CONVERTER:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_CONVERTER[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
