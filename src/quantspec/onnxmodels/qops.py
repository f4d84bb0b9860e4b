"""The quantization parameters of the ONNX operators other than QuantizeLinear / DequantizeLinear,
as data: which inputs are quantized tensors, which hold their scales and zero points, the shapes
those may take, and the types each version accepts.

QuantizeLinear and DequantizeLinear of the default domain are described by
:mod:`quantspec.onnx.opsets`; this table covers QLinearConv, QLinearMatMul, MatMulInteger and
ConvInteger (default domain, transcribed from ``onnx.defs.get_schema``) and onnxruntime's
``com.microsoft`` QuantizeLinear, DequantizeLinear and MatMulNBits (transcribed from onnxruntime
1.31's contrib schemas).  ``tests/test_onnx_models_tables.py`` checks every type list against the
schemas themselves, so the table cannot drift from them.

It also lists the operators that move or select values without computing new ones, around which a
DequantizeLinear -> op -> QuantizeLinear group must keep its scale and zero point for a runtime to run
the op on the codes (:data:`SAME_PARAMS_OPS`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..onnx.opsets import OpsetRow

__all__ = ["Quantized", "QOp", "QOPS", "CONTRIB_QDQ", "MATMUL_NBITS", "SAME_PARAMS_OPS", "POSITIVE_SCALE_OPS",
           "LAYOUTS", "find"]

_I8 = ("int8", "uint8")
_F8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")

#: the shapes a parameter may take, by layout name (the tensor's shape is (D0, ..., Dn))
LAYOUTS = {
    "tensor": "a scalar (or one element): per tensor",
    "channel": "1-D with one entry per output channel (the tensor's dimension 0)",
    "row": "per row: 1-D of length M for a 2-D (M, K) tensor, or (D1, ..., M, 1) for an N-D one",
    "column": "per column: 1-D of length N for a 2-D (K, N) tensor, or (D1, ..., 1, N) for an N-D one",
}


@dataclass(frozen=True)
class Quantized:
    """One quantized tensor of an operator with its parameters.  ``tensor`` is the input index of
    the quantized tensor, or ``-1`` for the operator's output; ``scale`` / ``zero_point`` are input
    indices (None: the operator has none).  ``layouts`` are the accepted parameter shapes
    (:data:`LAYOUTS`); ``divides``: the operator divides by this scale (an output's scale), so it
    must not be 0; ``same_shape``: the zero point must have the scale's shape."""

    name: str
    tensor: int
    scale: int | None
    zero_point: int | None
    layouts: tuple[str, ...] = ("tensor",)
    divides: bool = False
    same_shape: bool = True


@dataclass(frozen=True)
class QOp:
    """An operator with quantized inputs or output.  ``inputs``: (name, type parameter or a fixed
    type, optional) in order; ``types``: version -> type parameter -> accepted type names;
    ``output``: the output's type parameter."""

    op_type: str
    domain: str
    inputs: tuple[tuple[str, str, bool], ...]
    output: str
    types: dict
    quantized: tuple[Quantized, ...]

    @property
    def versions(self) -> tuple[int, ...]:
        return tuple(sorted(self.types))


QOPS: tuple[QOp, ...] = (
    QOp("QLinearConv", "",
        inputs=(("x", "T1", False), ("x_scale", "float", False), ("x_zero_point", "T1", False), ("w", "T2", False),
                ("w_scale", "float", False), ("w_zero_point", "T2", False), ("y_scale", "float", False),
                ("y_zero_point", "T3", False), ("B", "T4", True)),
        output="T3",
        types={10: {"T1": _I8, "T2": _I8, "T3": _I8, "T4": ("int32",), "float": ("float",)}},
        quantized=(Quantized("x", 0, 1, 2), Quantized("w", 3, 4, 5, ("tensor", "channel"), same_shape=False),
                   Quantized("y", -1, 6, 7, divides=True))),
    QOp("QLinearMatMul", "",
        inputs=(("a", "T1", False), ("a_scale", "TS", False), ("a_zero_point", "T1", False), ("b", "T2", False),
                ("b_scale", "TS", False), ("b_zero_point", "T2", False), ("y_scale", "TS", False),
                ("y_zero_point", "T3", False)),
        output="T3",
        types={10: {"T1": _I8, "T2": _I8, "T3": _I8, "TS": ("float",)},
               21: {"T1": (*_I8, *_F8), "T2": (*_I8, *_F8), "T3": (*_I8, *_F8), "TS": ("float", "float16", "bfloat16")}},
        quantized=(Quantized("a", 0, 1, 2, ("tensor", "row")), Quantized("b", 3, 4, 5, ("tensor", "column")),
                   Quantized("y", -1, 6, 7, ("tensor", "row"), divides=True))),
    QOp("MatMulInteger", "",
        inputs=(("A", "T1", False), ("B", "T2", False), ("a_zero_point", "T1", True), ("b_zero_point", "T2", True)),
        output="T3",
        types={10: {"T1": _I8, "T2": _I8, "T3": ("int32",)}},
        quantized=(Quantized("A", 0, None, 2, ("tensor", "row")), Quantized("B", 1, None, 3, ("tensor", "column")))),
    QOp("ConvInteger", "",
        inputs=(("x", "T1", False), ("w", "T2", False), ("x_zero_point", "T1", True), ("w_zero_point", "T2", True)),
        output="T3",
        types={10: {"T1": _I8, "T2": _I8, "T3": ("int32",)}},
        quantized=(Quantized("x", 0, None, 2), Quantized("w", 1, None, 3, ("tensor", "channel")))),
)

#: onnxruntime's com.microsoft QuantizeLinear / DequantizeLinear (version 1), in the opset table's
#: form: per tensor, or per axis with the ``axis`` attribute (no blocks); without ``axis`` the
#: parameters must be scalars
CONTRIB_QDQ = OpsetRow(
    1, q_x=("float", "float16"), q_scale=("float", "float16"), q_scale_is_x_type=True,
    q_out=("int8", "uint8", "int16", "uint16", "int4", "uint4"), q_attrs=("axis",),
    dq_x=("int8", "uint8", "int16", "uint16", "int32", "int4", "uint4"), dq_scale=("float", "float16"),
    dq_out=("float", "float16"), dq_attrs=("axis",))


@dataclass(frozen=True)
class MatMulNBitsRule:
    """com.microsoft MatMulNBits (version 1): ``A (M, K) x dequantize(B)`` with B packed as
    ``(N, k_blocks, blob_size)`` uint8, ``k_blocks = ceil(K / block_size)``, ``blob_size =
    block_size * bits / 8``; ``scales`` (N, k_blocks) of A's type; ``zero_points`` packed uint8
    ``(N, ceil(k_blocks * bits / 8))`` or unpacked of A's type ``(N, k_blocks)``."""

    inputs: tuple[tuple[str, str, bool], ...] = (("A", "T1", False), ("B", "T2", False), ("scales", "T1", False),
                                                  ("zero_points", "T3", True), ("g_idx", "T4", True),
                                                  ("bias", "T1", True))
    types: tuple = (("T1", ("float", "float16", "bfloat16")), ("T2", ("uint8",)),
                    ("T3", ("uint8", "float16", "float", "bfloat16")), ("T4", ("int32",)))
    bits: tuple[int, ...] = (2, 4, 8)
    min_block_size: int = 16
    attrs: tuple[str, ...] = ("K", "N", "bits", "block_size", "accuracy_level", "weight_prepacked")
    required_attrs: tuple[str, ...] = ("K", "N")


MATMUL_NBITS = MatMulNBitsRule()

#: operators that only move or select values: onnxruntime's QDQ optimizer runs them on the codes
#: (dropping the DequantizeLinear before and the QuantizeLinear after) only when both carry the same
#: scale and zero point (onnxruntime's DropQDQNodesRules and SplitQDQRules); a runtime or tool that
#: always does so (onnxruntime.quantization writes these ops with the input's parameters on the
#: output) needs them equal
SAME_PARAMS_OPS = frozenset({"Expand", "Flatten", "Gather", "GatherElements", "Reshape", "Slice", "Squeeze",
                             "Tile", "Transpose", "Unsqueeze", "MaxPool", "ReduceMax", "ReduceMin", "Resize",
                             "Split"})
#: of those, the ones that compare values: on the codes they need a positive scale (a negative one
#: reverses the order)
POSITIVE_SCALE_OPS = frozenset({"MaxPool", "ReduceMax", "ReduceMin"})

_BY_KEY = {(q.op_type, q.domain): q for q in QOPS}


def find(op_type: str, domain: str) -> QOp | None:
    """The table row of an operator (domain "" for the default one), or None."""
    return _BY_KEY.get((op_type, "" if domain == "ai.onnx" else domain))
