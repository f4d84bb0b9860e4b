"""Static (calibrated) quantization of float ONNX models, byte for byte as onnxruntime 1.31.1's
``onnxruntime.quantization.quantize_static``.

``quantize_static(model_input, model_output, calibration_data, *, quant_format="qdq", per_channel=False,
reduce_range=False, activation_type="uint8", weight_type="int8", calibrate_method="minmax",
op_types_to_quantize=None, nodes_to_exclude=None, extra_options=None) -> StaticQuantizationReport``

- ``model_input``: a path or an ``onnx.ModelProto``; ``model_output``: a path (written to a temporary
  name, then renamed) or None.
- ``calibration_data``: a dict of stacked samples (first axis), a list of feed dicts or an
  onnxruntime ``CalibrationDataReader``; the ranges come from
  :func:`quantspec.onnxmodels.calibration.collect_ranges` with onnxruntime's tensor selection.
- ``quant_format``: ``"qdq"`` / ``"qoperator"`` or ``QuantFormat``; ``activation_type`` /
  ``weight_type``: ``"uint8"``, ``"int8"``, and in the QDQ format on models of opset 21 or later
  ``"uint16"``, ``"int16"``, or ``QuantType`` (onnxruntime's 4-bit and float8 types are refused, as
  are int8 activations with uint8 weights and 16-bit types in QOperator, which onnxruntime refuses
  too, and 16-bit types below opset 21, where onnxruntime converts the model first);
  ``calibrate_method``: ``"minmax"``, ``"entropy"``, ``"percentile"``, ``"distribution"`` or
  ``CalibrationMethod``.  Note that onnxruntime's own default activation type is int8; here it is uint8.
- ``extra_options``: onnxruntime's keys.  Reproduced: ActivationSymmetric, WeightSymmetric,
  ForceQuantizeNoInputCheck, MatMulConstBOnly, AddQDQPairToWeight, OpTypesToExcludeOutputQuantization,
  DedicatedQDQPair, QDQOpTypePerChannelSupportToAxis, QuantizeBias, QDQKeepRemovableActivations,
  QDQDisableWeightAdjustForInt32Bias, MinimumRealRange, ActivationRestrictedAsymmetric,
  UseQDQContribOps, extra.Sigmoid.nnapi, the Calib* keys (given to the calibration), and
  TensorQuantOverrides of initializers, per tensor or per channel: explicit ``scale`` / ``zero_point``,
  or ``symmetric``, ``reduce_range``, ``rmin`` / ``rmax``
  (:mod:`quantspec.onnxmodels.static.overrides`; the keys ``quant_type`` and ``convert``, and
  overrides of activations or biases, are refused).  Refused unless at their default: EnableSubgraph,
  SmoothQuant, BlockSize, DefaultTensorType.
- ``nodes_to_exclude`` must name nodes of the model (onnxruntime ignores unknown names; here they are
  an error).

What is equal to onnxruntime's output: the set of quantized tensors, the op types of the nodes, and
every scale, zero point and quantized initializer (dtype, shape and values: 8- and 16-bit weights,
int32 biases) under onnxruntime's names (``{tensor}_scale``, ``{tensor}_zero_point``, ``{tensor}_quantized``,
``{bias}_quantized``...), so the model's outputs in onnxruntime are bitwise those of onnxruntime's own
quantized model.  Both formats cover every op type of onnxruntime's default list, with
onnxruntime's rules (QOperator: QLinearConv, QLinearMatMul, com.microsoft QGemm, QLinearAdd,
QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearWhere, QLinearSoftmax,
QLinearAveragePool, QLinearGlobalAveragePool, and 8-bit MaxPool, Reshape, Squeeze, Unsqueeze, Flatten,
Transpose, Split, Pad, Resize, Gather, ArgMax; QDQ: QuantizeLinear / DequantizeLinear pairs, Relu and
Clip folded into their producer), except EmbedLayerNormalization in the QOperator format
(:class:`quantspec.errors.UnsupportedError` naming the node, were one to be quantized).  Where
onnxruntime refuses the model it writes (a QOperator graph with a tensor left without a producer), so
does this.  Subgraphs (If / Loop bodies) are not quantized, as onnxruntime by default.  Refused:
float16 models, opsets below 10 (onnxruntime converts them first).

Weight codes are ``round(float32(w) / scale)`` (a float32 division, ties to even) in both formats;
scales are ``float32((rmax - rmin) / (qmax - qmin))`` computed in float64; see
:mod:`quantspec.onnxmodels.static.params` for the exact arithmetic.  The one place the two formats
round the same weight differently is an explicit scale (TensorQuantOverrides): QOperator divides by
the float64 scale, QDQ by its float32 value (see :mod:`quantspec.onnxmodels.static.overrides`).

``quantize_with_ranges(model, ranges, options=None, **keywords) -> (ModelProto, report)`` is the same
with ranges given (``{tensor: CalibrationRange}``, or onnxruntime ``TensorData``).
"""

from __future__ import annotations

from .api import StaticQuantizationReport, prepare_model, quantize_static, quantize_with_ranges
from .options import StaticOptions, normalize_options

__all__ = ["quantize_static", "quantize_with_ranges", "StaticQuantizationReport", "StaticOptions",
           "normalize_options", "prepare_model"]
