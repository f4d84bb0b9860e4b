"""Which kernel runs an operator in each of the interpreter's kernel modes.

LiteRT's Python interpreter runs a model with one of three op resolvers, and quantspec's
:class:`~quantspec.litert.Interpreter` reproduces each (``kernels=``):

============  ====================================================  ==============================
mode          LiteRT                                                 kernels
============  ====================================================  ==============================
reference     ``OpResolverType.BUILTIN_REF``                         :data:`..kernels.OPS`
optimized     ``OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES``   :data:`.optimized.OPS`, else
                                                                     the reference kernel
xnnpack       ``OpResolverType.AUTO`` (the default: the XNNPACK      :data:`.xnnpack.OPS` for the
              delegate, then the optimized kernels)                  operators the delegate takes,
                                                                     the optimized ones for the rest
============  ====================================================  ==============================

The choice is made per operator when the interpreter prepares it (:func:`select`), from what the
XNNPACK delegate itself looks at: the operator, its options, and its tensors' types, shapes,
quantization parameters and constness.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import InvalidArgumentError, UnsupportedError
from .base import REGISTRY, Kernel, TensorSpec

__all__ = ["KERNEL_MODES", "RESOLVERS", "select", "check_mode", "check_threads", "kernel_options"]

#: the interpreter's kernel modes, in order
KERNEL_MODES = ("reference", "optimized", "xnnpack")

#: kernel mode -> the name of the LiteRT ``OpResolverType`` it reproduces
RESOLVERS = {"reference": "BUILTIN_REF", "optimized": "BUILTIN_WITHOUT_DEFAULT_DELEGATES", "xnnpack": "AUTO"}


def check_mode(kernels: Any) -> str:
    if kernels not in KERNEL_MODES:
        raise InvalidArgumentError("kernels", "must be one of " + ", ".join(map(repr, KERNEL_MODES)), kernels)
    return kernels


def check_threads(num_threads: Any) -> int:
    """``num_threads`` as LiteRT's interpreter takes it: an integer >= 1 (its default is 1)."""
    if isinstance(num_threads, bool) or not isinstance(num_threads, (int,)) or num_threads < 1:
        raise InvalidArgumentError("num_threads", "must be an integer >= 1 (LiteRT's interpreter default is 1)",
                                   num_threads)
    return int(num_threads)


#: operators whose optimized kernel's result depends on the interpreter's thread count (it splits
#: the work into ranges, and each range ends with a scalar tail)
THREAD_DEPENDENT = ("MEAN",)


def kernel_options(name: str, num_threads: int) -> dict[str, Any]:
    """quantspec's own options for an operator's optimized or XNNPACK kernel: the thread count, for
    the kernels whose bytes depend on it."""
    return {"quantspec_num_threads": num_threads} if name in THREAD_DEPENDENT else {}


def select(mode: str, name: str, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec],
           options: Mapping[str, Any]) -> tuple[Kernel, str]:
    """The kernel that runs operator ``name`` in ``mode``, and the engine it stands for
    (``"reference"``, ``"optimized"`` or ``"xnnpack"``)."""
    check_mode(mode)
    if mode == "xnnpack":
        from . import xnnpack

        if xnnpack.declines(name, inputs, outputs, options) is None:
            why = xnnpack.fails(name, inputs, outputs)
            if why is not None:
                raise UnsupportedError(f"{name}", "LiteRT's XNNPACK delegate takes this operator and then fails to "
                                       "create its runtime (allocate_tensors raises)", why)
            return xnnpack.OPS[name], "xnnpack"
    if mode in ("optimized", "xnnpack"):
        from . import optimized

        why = optimized.not_modelled(name, inputs, outputs, options)
        if why is not None:
            raise UnsupportedError(name, "has no kernel in quantspec's optimized mode", why)
        kernel = optimized.OPS.get(name)
        if kernel is not None and _models(kernel, inputs, outputs):
            return kernel, "optimized"
        return REGISTRY[name], "optimized"
    return REGISTRY[name], "reference"


def _models(kernel: Kernel, inputs: Sequence[TensorSpec | None], outputs: Sequence[TensorSpec]) -> bool:
    """Whether ``kernel`` models the operator's activation type (int8, and float at the edges of
    QUANTIZE / DEQUANTIZE, unless the kernel says more); other types run their reference kernel in
    the optimized mode."""
    types = getattr(kernel, "activations", ("int8",))
    k = getattr(kernel, "activation_input", 0)         # TRANSPOSE_CONV: input 2 (0 is the output shape)
    ts = [t for t in (*inputs[k:k + 1], *outputs[:1]) if t is not None]
    return all(t.dtype.name in (*types, "float") for t in ts) and any(t.dtype.name in types for t in ts)
