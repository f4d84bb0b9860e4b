"""LiteRT's optimized int8 kernels (``OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES``), as the
x86-64 interpreter of ai-edge-litert 2.3.0 runs them.

:data:`OPS` maps each builtin operator whose optimized kernel gives other bytes than the reference
one to quantspec's kernel for it (same prepare / compute interface as :mod:`..base`); every other
operator runs its reference kernel in this mode, which the tests prove byte-identical to LiteRT's
optimized one.  One module per kernel family; :mod:`._lanes` holds the shared lane arithmetic.
"""

from __future__ import annotations

from ..base import Kernel
from .activations import Logistic, LogSoftmax, Softmax, Tanh
from .elementwise import Add, Mul
from .gemm import Conv2D, DepthwiseConv2D, FullyConnected
from .quantize import Dequantize, Quantize
from .reduce import Mean, ReduceProd, Sum
from .transpose_conv import TransposeConv

__all__ = ["OPS", "not_modelled"]


def _table(*kernels: type[Kernel]) -> dict[str, Kernel]:
    table: dict[str, Kernel] = {}
    for cls in kernels:
        k = cls()
        table[k.name] = k
    return table


#: operator name -> optimized kernel, for the operators whose optimized kernel differs from the
#: reference one
OPS: dict[str, Kernel] = _table(Conv2D, DepthwiseConv2D, FullyConnected, Add, Mul, Mean, Sum, Softmax, LogSoftmax,
                                Logistic, Tanh, Quantize, Dequantize, TransposeConv, ReduceProd)


def not_modelled(name: str, inputs, outputs, options) -> str | None:
    """Why quantspec cannot reproduce LiteRT's optimized kernel for this operator, or None.

    16x8 CONV_2D / FULLY_CONNECTED with an int32 bias (``quantized_bias_type`` INT32; the converter's
    default is int64) run LiteRT's optimized int16 GEMM kernels, which quantspec does not model
    (measured on random models: CONV_2D differs from the reference kernel on about 0.2% of the
    outputs, FULLY_CONNECTED, whose reference requantizes in floating point, on most)."""
    if name not in ("CONV_2D", "FULLY_CONNECTED") or not inputs or inputs[0] is None:
        return None
    if inputs[0].dtype.name != "int16":
        return None
    bias = inputs[2] if len(inputs) > 2 else None
    if bias is not None:
        int32 = bias.dtype.name == "int32"
    else:
        int32 = name == "CONV_2D" and (options or {}).get("quantized_bias_type") == "INT32"
    if int32:
        return (f"LiteRT's optimized 16x8 {name} with an int32 bias (an int16 GEMM) is not modelled by quantspec; "
                "the reference mode runs it")
    return None
