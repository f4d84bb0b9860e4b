"""TensorFlow's quantization ops, bit for bit as its CPU kernels compute them.

Public API (docs/tensorflow.md):

- :func:`quantize` — ``QuantizeV2`` (``tf.quantization.quantize``);
- :func:`dequantize` — ``Dequantize``;
- :func:`quantize_and_dequantize_v2`, :func:`quantize_and_dequantize_v3`,
  :func:`quantize_and_dequantize_v4` — ``QuantizeAndDequantizeV2/V3/V4``;
- :func:`fake_quant_with_min_max_args`, :func:`fake_quant_with_min_max_vars`,
  :func:`fake_quant_with_min_max_vars_per_channel` — ``FakeQuantWithMinMax*``.

``kernel="eigen"`` (the default) reproduces the portable Eigen kernels (TensorFlow with
``TF_ENABLE_ONEDNN_OPTS=0``); ``kernel="onednn"`` reproduces stock TensorFlow on x86-64 Linux, which
hands some QuantizeV2 / Dequantize calls to its oneDNN kernels (:mod:`quantspec.tf.spec` lists them).
"""

from __future__ import annotations

from .dequantize_op import dequantize
from .fake_quant import (fake_quant_with_min_max_args, fake_quant_with_min_max_vars,
                         fake_quant_with_min_max_vars_per_channel)
from .qdq import quantize_and_dequantize_v2, quantize_and_dequantize_v3, quantize_and_dequantize_v4
from .ops import DequantizeOp, FakeQuantOp, QuantizeAndDequantizeOp, QuantizeV2Op
from .quantize_op import quantize

__all__ = [
    "quantize", "dequantize",
    "quantize_and_dequantize_v2", "quantize_and_dequantize_v3", "quantize_and_dequantize_v4",
    "fake_quant_with_min_max_args", "fake_quant_with_min_max_vars", "fake_quant_with_min_max_vars_per_channel",
    "QuantizeV2Op", "DequantizeOp", "FakeQuantOp", "QuantizeAndDequantizeOp",
]
