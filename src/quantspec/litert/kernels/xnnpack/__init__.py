"""LiteRT's default op resolver on int8 models: the XNNPACK delegate for the operators it takes,
the optimized builtin kernels for the rest (``OpResolverType.AUTO``, ai-edge-litert 2.3.0, x86-64).

:func:`declines` (:mod:`.delegate`) says whether the delegate takes an operator; :data:`OPS` maps
each operator it can take to quantspec's kernel for XNNPACK's arithmetic (the reference kernel
where XNNPACK gives the same bytes: data movement, DEQUANTIZE; MAX_POOL_2D with its own output sizes).  One module per kernel
family; :mod:`._fp32` holds XNNPACK's float32 requantization.
"""

from __future__ import annotations

from .. import REGISTRY
from ..base import Kernel
from .binary import Add, Mul, Sub
from .delegate import RULES, declines, fails
from .extra import BatchMatMul, LeakyRelu, MaxPool2D, TransposeConv
from .gemm import Conv2D, DepthwiseConv2D, FullyConnected
from .reduce import Mean, Sum
from .resize import ResizeBilinear
from .unary import Logistic, Quantize, Tanh
from ..shape_arithmetic import XnnpackNeg

__all__ = ["OPS", "declines", "fails"]

_OWN: dict[str, Kernel] = {k.name: k for k in (cls() for cls in (Conv2D, DepthwiseConv2D, FullyConnected, Add, Sub, Mul,
                                                                   Mean, Sum, Quantize, Logistic, Tanh, ResizeBilinear,
                                                                   LeakyRelu, BatchMatMul, TransposeConv, MaxPool2D,
                                                                   XnnpackNeg))}

#: operator name -> the kernel that reproduces XNNPACK's bytes, for every operator the delegate can take
#: (and quantspec has a reference kernel for: the XNNPACK kernels validate with it)
OPS: dict[str, Kernel] = {name: _OWN.get(name) or REGISTRY[name] for name in RULES if name in REGISTRY}
