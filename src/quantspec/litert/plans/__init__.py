"""Run plans: what :class:`~quantspec.litert.Interpreter` runs for an operator of a model on the fast
path, the same bytes as its reference kernel's ``compute`` with less work per call.

A reference kernel's ``compute`` is written to be read: it checks its arrays, broadcasts, converts
and requantizes with whole-array numpy operations, each making a temporary.  Inside a model that is
most of the cost: a converter-made mobile model's tensors are small (a few thousand values, often
fewer), so a kernel's dozen numpy calls cost more than its arithmetic, and LiteRT's reference
kernels, plain C++ loops, spend microseconds per operator.  A plan is made once per operator when
the interpreter first runs its graph on the fast path, from the operator's prepared record and its
tensors' shapes, and keeps everything that depends on those alone:

- **CONV_2D, FULLY_CONNECTED, BATCH_MATMUL**: the windows copied to a float32 matrix in one numba
  pass (:func:`~quantspec.litert._jitted_plans.im2col`, no temporaries), one float32 BLAS GEMM per exact chunk of
  the depth (:mod:`quantspec.litert._gemm`: why a float32 GEMM of integers is exact), and one numba pass for
  everything after it (:func:`~quantspec.litert._jitted_plans.epilogue`: zero-point correction, bias, the int32 wrap,
  the requantization, the clamp).  int16 activations (the 16x8 kernels) split each value into its
  high byte and its low byte, two int8-sized operands whose float32 GEMMs are exact in chunks of
  about 500 (their int16 product with an int8 weight is not exact in float32 beyond a depth of 4),
  and recombine them in the epilogue (``256 * high + low``).
- **DEPTHWISE_CONV_2D**: the fused numba kernel of :mod:`quantspec.litert.fast` (int8) or the exact accumulation
  and the epilogue (int16), every argument prepared.
- **ADD, SUB, MUL** (int8): a 65536-entry table of the operator's result for every pair of input
  codes, made by the reference kernel itself on every pair, and one gather over the broadcast
  inputs (:func:`~quantspec.litert._jitted_plans.gather2`); **SQUARED_DIFFERENCE, PRELU** gather from the table their
  kernel already made.  The tables of unary operators (HARD_SWISH, LOGISTIC, GELU, RSQRT, ...) are
  gathered without the per-call checks.
- **MEAN, SUM** over adjacent axes, **SOFTMAX** (int8): one numba pass each.
- **RESHAPE, SQUEEZE**: a view (the interpreter never writes into an array it has handed on).
- **GATHER** (no batch dimensions): one numba pass that checks the positions and copies;
  **TRANSPOSE** (constant permutation): the copy of the permuted view; **CONCATENATION**: numpy's
  concatenation.
- **PAD, PADV2** (constant paddings and pad value): a copy of the pad-filled output made once, the
  input written into it; **RESIZE_BILINEAR** (int8, constant size): one numba pass.

On the interpreter's fast loop, tables in a row become one where the tensor between them is read by
nothing else (and not every tensor is kept): a unary table after a pair or unary table is their
composed table (:func:`fold`; where the second marks codes LiteRT fails on, as RSQRT does, the
composition carries the marks and an input that reaches one runs both plans, so the second raises),
and a pair table whose input is a pair table's output is one pass over the three inputs
(:func:`chain`).  Each is the same bytes by construction: the second table indexed by the first's
entries.

A plan is used only for the shapes and types it was made for (an operator whose input a run finds
with another shape takes its kernel), and only on the fast path: ``QUANTSPEC_FAST=0`` runs every
kernel's reference ``compute``.  Where a plan cannot reproduce a case — a non-constant filter,
grouped convolution, a table the reference kernel refuses to compute (an input pair on which LiteRT
has undefined behaviour), a row whose reciprocal LiteRT aborts on — it returns or defers to the
reference kernel, which computes or raises as before.  ``tests/test_litert_plans.py`` proves plan
and kernel equal on every kind of operator; the model tests compare both with LiteRT.

Scratch matrices (im2col, the GEMM's result) are kept by the plan between runs; a plan entered by a
second thread while the first is inside it takes fresh ones.  Outputs are always fresh arrays.

**The contract.**  A plan is made by :func:`make` from what a kernel's ``prepare`` returned
(:mod:`quantspec.litert.kernels.base` states the kernels' prepare/compute contract) and the
operator's tensor specs; its ``compute(unused, arrays)`` returns what the kernel's
``compute(prepared, arrays)`` returns, byte for byte, or calls it (:meth:`Plan.reference`).

**Layout**, one module per family as in :mod:`quantspec.litert.kernels`: :mod:`.base` (the
:class:`Plan` interface and what plans share: scratch buffers, the plan kernels' entry points, the
exact GEMM and its epilogue), :mod:`.conv`, :mod:`.fully_connected`, :mod:`.batch_matmul`,
:mod:`.unary`, :mod:`.elementwise`, :mod:`.quantize`, :mod:`.pooling`, :mod:`.reduce`,
:mod:`.activations`, :mod:`.movement`, :mod:`.resize`, and :mod:`.folding` (:func:`fold`,
:func:`chain`); this module chooses the plan of an operator (:func:`make`).
"""

from __future__ import annotations

from typing import Callable

from .activations import SoftmaxPlan, softmax_plan
from .base import Plan
from .batch_matmul import BatchMatMulPlan, batch_matmul_plan
from .conv import ConvPlan, DepthwisePlan, WideDepthwisePlan, conv_plan, depthwise_plan
from .elementwise import BinaryPlan, PairTablePlan, binary_plan
from .folding import FoldedPairPlan, FoldedUnaryPlan, PairChainPlan, byte_table, chain, fold
from .fully_connected import SMALL_FC, FullyConnectedPlan, SmallFullyConnectedPlan, fc_plan
from .movement import (ConcatPlan, GatherPlan, PadPlan, ReshapePlan, TransposePlan, concat_plan, gather_plan, pad_plan,
                       reshape_plan, transpose_plan)
from .pooling import PoolPlan, pool_plan
from .quantize import FloatQuantizePlan, dequantize_plan, quantize_plan
from .reduce import MeanPlan, mean_plan
from .resize import ResizeBilinearPlan, resize_plan
from .unary import UnaryTablePlan, unary_plan

__all__ = ["make", "Plan", "fold", "chain", "byte_table", "NO_BLAS", "UNARY_TABLES", "PAIR_TABLES", "SMALL_FC",
           "ConvPlan", "DepthwisePlan", "WideDepthwisePlan", "FullyConnectedPlan", "SmallFullyConnectedPlan",
           "BatchMatMulPlan", "UnaryTablePlan", "PairTablePlan", "BinaryPlan", "FloatQuantizePlan", "PoolPlan",
           "MeanPlan", "SoftmaxPlan", "ReshapePlan", "PadPlan", "ResizeBilinearPlan", "GatherPlan", "ConcatPlan",
           "TransposePlan", "FoldedPairPlan", "FoldedUnaryPlan", "PairChainPlan"]


_BUILDERS: dict[str, Callable] = {
    "GATHER": gather_plan,
    "TRANSPOSE": transpose_plan,
    "CONCATENATION": concat_plan,
    "PAD": pad_plan,
    "PADV2": pad_plan,
    "RESIZE_BILINEAR": resize_plan,
    "CONV_2D": conv_plan,
    "FULLY_CONNECTED": fc_plan,
    "BATCH_MATMUL": batch_matmul_plan,
    "DEPTHWISE_CONV_2D": depthwise_plan,
    "MEAN": mean_plan,
    "SUM": mean_plan,
    "SOFTMAX": softmax_plan,
    "RESHAPE": reshape_plan,
    "SQUEEZE": reshape_plan,
    "AVERAGE_POOL_2D": pool_plan,
    "MAX_POOL_2D": pool_plan,
}
#: builders that also read the operator's options
_BUILDERS_OPTIONS: dict[str, Callable] = {
    "QUANTIZE": quantize_plan,
    "DEQUANTIZE": dequantize_plan,
}
#: operators whose prepared record is a code-to-code table (kernels/unary.py, kernels/activations.py)
UNARY_TABLES = frozenset({"HARD_SWISH", "GELU", "RSQRT", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1",
                          "LEAKY_RELU", "LOGISTIC", "TANH"})
#: binary int8 operators computed from a table of every pair of codes
PAIR_TABLES = frozenset({"ADD", "SUB", "MUL", "SQUARED_DIFFERENCE", "PRELU"})


def make(name: str, kernel, prepared, inputs, outputs, options) -> Plan | None:
    """The plan of one operator (its builtin ``name``, reference ``kernel``, ``prepared`` record, input
    and output specs and options), or None where its kernel runs as it is."""
    from ...errors import QuantSpecError
    from ..kernels.plain import Tagged, TypeDispatch

    if isinstance(kernel, TypeDispatch):        # one entry, two kernels: the quantized one has plans
        if not isinstance(prepared, Tagged) or prepared.plain:
            return None
        kernel, prepared = kernel.quantized, prepared.prepared
    if any(t is not None and t.data is None and any(d < 0 for d in t.shape) for t in (*inputs, *outputs)):
        return None
    expected = _RECORDS.get(name)
    if expected is None or not isinstance(prepared, _record_types(expected)):
        return None
    try:
        if name in _BUILDERS:
            return _BUILDERS[name](kernel, prepared, inputs, outputs)
        if name in _BUILDERS_OPTIONS:
            return _BUILDERS_OPTIONS[name](kernel, prepared, inputs, outputs, options)
        if name in UNARY_TABLES:
            return unary_plan(kernel, prepared, inputs, outputs)
        if name in PAIR_TABLES:
            return binary_plan(name, kernel, prepared, inputs, outputs, options)
    except QuantSpecError:
        return None
    return None


#: per operator, the prepared records its plan reads ("module:Class" in quantspec.litert.kernels)
_RECORDS = {
    "CONV_2D": ("conv:ConvPrepared",), "DEPTHWISE_CONV_2D": ("conv:ConvPrepared",),
    "FULLY_CONNECTED": ("fully_connected:FullyConnectedPrepared",),
    "BATCH_MATMUL": ("batch_matmul:BatchMatMulParams",),
    "MEAN": ("reduce:ReduceParams",), "SUM": ("reduce:ReduceParams",),
    "SOFTMAX": ("activations:SoftmaxParams",),
    "RESHAPE": ("movement:ReshapePrepared",), "SQUEEZE": ("movement:SqueezePrepared",),
    "ADD": ("elementwise:AddSubParams",), "SUB": ("elementwise:AddSubParams",), "MUL": ("elementwise:MulParams",),
    "SQUARED_DIFFERENCE": ("binary:PairTableParams",), "PRELU": ("binary:PreluParams",),
    "AVERAGE_POOL_2D": ("pooling:PoolPrepared",), "MAX_POOL_2D": ("pooling:PoolPrepared",),
    "QUANTIZE": ("quantize:RequantizeParams", "quantize:FloatQuantizeParams"),
    "DEQUANTIZE": ("quantize:DequantizeParams",),
    "PAD": ("movement:PadPrepared",), "PADV2": ("movement:PadPrepared",),
    "GATHER": ("movement:GatherPrepared",), "TRANSPOSE": ("movement:TransposePrepared",),
    "CONCATENATION": ("movement:ConcatPrepared",),
    "RESIZE_BILINEAR": ("resize:ResizePrepared",),
    **{name: ("unary:CodeTable", "activations:LutParams") for name in UNARY_TABLES},
}


def _record_types(names: tuple[str, ...]) -> tuple[type, ...]:
    import importlib

    out = []
    for name in names:
        module, cls = name.split(":")
        out.append(getattr(importlib.import_module(f"quantspec.litert.kernels.{module}"), cls))
    return tuple(out)


#: plans that call no BLAS (numba kernels and numpy copies): a model whose program holds only these
#: (and data movement) runs without the interpreter's BLAS thread setting
NO_BLAS = (PairTablePlan, PairChainPlan, UnaryTablePlan, BinaryPlan, MeanPlan, SoftmaxPlan, ReshapePlan, PadPlan,
           ResizeBilinearPlan, GatherPlan, TransposePlan, ConcatPlan, PoolPlan, SmallFullyConnectedPlan, FloatQuantizePlan,
           DepthwisePlan, WideDepthwisePlan)
