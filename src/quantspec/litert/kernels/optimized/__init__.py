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
from .reduce import Mean, Sum
from .transpose_conv import TransposeConv

__all__ = ["OPS"]


def _table(*kernels: type[Kernel]) -> dict[str, Kernel]:
    table: dict[str, Kernel] = {}
    for cls in kernels:
        k = cls()
        table[k.name] = k
    return table


#: operator name -> optimized kernel, for the operators whose optimized kernel differs from the
#: reference one
OPS: dict[str, Kernel] = _table(Conv2D, DepthwiseConv2D, FullyConnected, Add, Mul, Mean, Sum, Softmax, LogSoftmax,
                                Logistic, Tanh, Quantize, Dequantize, TransposeConv)
