"""Which op types are quantized and how: onnxruntime 1.31.1's two registries, as data.

Each table maps an op type to a *rule* name; the writers (``qdq.py``, ``qoperator.py``) hold one
function per rule.  An op type of the default list that a writer has no rule for is refused there
(:class:`quantspec.errors.UnsupportedError`) when a node of it would be quantized.
"""

from __future__ import annotations

#: QOperator format (onnxruntime's QLinearOps registry, its common ops included); EmbedLayerNormalization
#: (com.microsoft) is not reproduced
QOPERATOR_RULES: dict[str, str] = {
    "ArgMax": "argmax",
    "Conv": "conv",
    "Gemm": "gemm",
    "MatMul": "matmul",
    "Add": "binary",
    "Mul": "binary",
    "Relu": "clip_relu",
    "Clip": "clip_relu",
    "LeakyRelu": "activation",
    "Sigmoid": "activation",
    "MaxPool": "maxpool",
    "GlobalAveragePool": "global_average_pool",
    "Split": "split",
    "Pad": "pad",
    "Reshape": "direct",
    "Squeeze": "direct",
    "Unsqueeze": "direct",
    "Flatten": "direct",
    "Resize": "resize",
    "AveragePool": "pool",
    "Concat": "concat",
    "Softmax": "softmax",
    "Where": "where",
    "Gather": "gather",
    "Transpose": "direct",
    "EmbedLayerNormalization": "unsupported",
}

#: QDQ format (onnxruntime's QDQ registry); any other op type in op_types_to_quantize gets "base"
QDQ_RULES: dict[str, str] = {
    "Conv": "conv",
    "ConvTranspose": "conv",
    "Gemm": "gemm",
    "Clip": "removable",
    "Relu": "removable",
    "Reshape": "direct",
    "Transpose": "direct",
    "Squeeze": "direct",
    "Unsqueeze": "direct",
    "Flatten": "direct",
    "Resize": "resize",
    "MaxPool": "maxpool",
    "AveragePool": "direct",
    "Slice": "direct",
    "Pad": "pad",
    "MatMul": "matmul",
    "Split": "split",
    "Gather": "gather",
    "GatherElements": "gather",
    "Where": "where",
    "InstanceNormalization": "norm",
    "LayerNormalization": "norm",
    "BatchNormalization": "norm",
    "TopK": "direct",
    "CumSum": "base",
}

#: the op types quantized when op_types_to_quantize is not given: both registries together (onnxruntime
#: uses this union for either format)
DEFAULT_OP_TYPES: tuple[str, ...] = tuple(sorted(set(QOPERATOR_RULES) | set(QDQ_RULES)))

#: the per-channel axis of a weight when the option's table gives none
CONV_WEIGHT_AXIS = {"Conv": 0, "ConvTranspose": 1}
