"""Which initializers of a model are weights, and how each lies: the table of weight inputs and the
mapping between an ONNX weight and the layout the checkpoint schemes are written for.

The schemes of :mod:`quantspec.checkpoint.schemes` take a weight stored ``[out_features,
in_features, ...]``: "per output channel" is axis 0 and blocks run along axis 1.  ONNX operators
store their weights in two layouts:

- **out-in** (``[N, K]``, ``[M, C/group, kh, kw, ...]``): Gemm's B with ``transB=1`` and Conv's W.
  The weight *is* the checkpoint layout (a Conv weight is read as ``M`` rows of ``C/group * kh *
  kw`` elements).  DequantizeLinear: per channel ``axis=0``; blocks ``axis=1``.
- **in-out** (``[K, N]``): MatMul's B and Gemm's B with ``transB=0``.  The checkpoint layout is the
  transpose: the scheme runs on ``B^T`` and its codes and parameters are transposed back.
  DequantizeLinear: per channel ``axis=1`` (a scale per column N); blocks ``axis=0`` (``block_size``
  consecutive rows of K share a scale; the scale is ``[ceil(K / block), N]``).

:data:`WEIGHT_INPUTS` is the table (one row per operator); :func:`find_weights` applies it to every
initializer of the main graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checkpoint.schemes import Scheme
from .graph import DEFAULT_DOMAINS, Graph, Node
from .io import type_name

__all__ = ["Layout", "OUT_IN", "IN_OUT", "WeightInput", "WEIGHT_INPUTS", "Use", "Candidate", "find_weights",
           "markdown"]


@dataclass(frozen=True)
class Layout:
    """How an ONNX weight maps to the checkpoint layout ``[out, in...]``: ``out_axis`` is the ONNX axis
    of the output channels, ``in_axis`` the axis blocks run along (both 2-D axes for in-out)."""

    name: str
    out_axis: int
    in_axis: int

    @property
    def transposed(self) -> bool:
        return self.name == "in-out"

    def rows_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The weight's shape in the checkpoint layout (what the scheme's rules see)."""
        return (shape[1], shape[0]) if self.transposed else tuple(shape)

    def rows(self, w: np.ndarray) -> np.ndarray:
        """The weight as ``[out, in]`` rows: a view (strided for in-out)."""
        return w.T if self.transposed else w.reshape(w.shape[0], -1)

    def attributes(self, s: Scheme) -> dict[str, int]:
        """DequantizeLinear's ``axis`` / ``block_size`` for scheme ``s`` on a weight of this layout."""
        if s.granularity == "tensor":
            return {}
        if s.granularity == "channel":
            return {"axis": self.out_axis}
        return {"axis": self.in_axis, "block_size": s.block}

    def param_shape(self, s: Scheme, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The ONNX shape of the scale (and zero point) of scheme ``s`` on a weight of ``shape``."""
        if s.granularity == "tensor":
            return ()
        if s.granularity == "channel":
            return (shape[self.out_axis],)
        out = list(shape)
        out[self.in_axis] = -(-shape[self.in_axis] // s.block)
        return tuple(out)


OUT_IN = Layout("out-in", 0, 1)
IN_OUT = Layout("in-out", 1, 0)


@dataclass(frozen=True)
class WeightInput:
    """One operator's weight input: ``input`` (its position), ``name`` (the operator's name for it),
    ``ranks`` the ranks it takes (None: 3 or more), and the layout (``layout``: a layout, or
    ``"transB"``: out-in when the node's ``transB`` is 1, in-out when it is 0; then ``note`` holds the
    two cases' notes, ``" / "`` between)."""

    op_type: str
    input: int
    name: str
    ranks: tuple[int, ...] | None
    layout: Layout | str
    note: str

    def layout_of(self, node: Node) -> Layout | str:
        """The node's layout, or why it has none."""
        if isinstance(self.layout, Layout):
            return self.layout
        t = node.attrs.get("transB", 0)
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or int(t) not in (0, 1):
            return f"its transB is {t!r}, not 0 or 1"
        return OUT_IN if int(t) == 1 else IN_OUT


#: the weight input of each operator whose constant weights are quantized (default domain)
WEIGHT_INPUTS: dict[str, WeightInput] = {w.op_type: w for w in (
    WeightInput("MatMul", 1, "B", (2,), IN_OUT, "`[K, N]`; a stack of matrices (rank 3 or more) is kept"),
    WeightInput("Gemm", 1, "B", (2,), "transB", "`[K, N]` / `[N, K]`"),
    WeightInput("Conv", 1, "W", None, OUT_IN, "`[M, C/group, k1, k2, ...]`, read as M rows of `C/group*k1*k2*...`"),
)}


@dataclass(frozen=True)
class Use:
    node: Node
    input: int


@dataclass
class Candidate:
    """One initializer of the main graph: ``layout`` is set when it is a weight the converter may
    quantize, else ``reason`` says why it is not one."""

    tensor: Any                     # its TensorProto
    name: str
    dtype: str                      # quantspec / ONNX type name
    shape: tuple[int, ...]
    uses: list[Use]
    layout: Layout | None = None
    reason: str = ""

    @property
    def rows_shape(self) -> tuple[int, ...]:
        return self.layout.rows_shape(self.shape) if self.layout is not None else self.shape

    @property
    def nbytes(self) -> int:
        from ..dtypes import qtype

        try:
            t = qtype(self.dtype)
        except Exception:
            return 0
        n = math.prod(self.shape)
        return (n * t.bits + 7) // 8

    def where(self) -> str:
        """Where it is used as a weight ("MatMul B (2 nodes)")."""
        kinds = sorted({f"{u.node.op_type} {WEIGHT_INPUTS[u.node.op_type].name}" for u in self.uses})
        n = len(self.uses)
        return ", ".join(kinds) + (f" ({n} nodes)" if n > 1 else "")


def _describe(u: Use) -> str:
    node = u.node
    label = f"{node.op_type} {node.name!r}" if node.name else f"{node.op_type} (node {node.index})"
    return f"input {u.input} of {label}" + (f" in {node.graph}" if node.graph else "")


def _role(u: Use) -> tuple[Layout | None, str]:
    """The layout of one use, or why it is not a weight use."""
    node = u.node
    w = WEIGHT_INPUTS.get(node.op_type) if node.domain in DEFAULT_DOMAINS else None
    if w is None or u.input != w.input:
        return None, f"not a weight: {_describe(u)}"
    layout = w.layout_of(node)
    if not isinstance(layout, Layout):
        return None, f"{_describe(u)}: {layout}"
    return layout, ""


def find_weights(graph: Graph) -> list[Candidate]:
    """Every initializer of the main graph, in order, each a weight (with its layout) or not (with
    the reason)."""
    proto = graph.model.proto
    inputs = {i.name for i in proto.graph.input}
    outputs = {o.name for o in proto.graph.output}
    old_ir = graph.ir_version < 4          # before IR 4 every initializer is listed as a graph input
    out = []
    for t in proto.graph.initializer:
        name = t.name
        shape = tuple(int(d) for d in t.dims)
        uses = [Use(n, k) for n in graph.consumers.get(name, []) for k, i in enumerate(n.inputs) if i == name]
        c = Candidate(t, name, type_name(t.data_type), shape, uses)
        out.append(c)
        if name in inputs and not old_ir:
            c.reason = "also a graph input (a value the caller may override)"
        elif name in outputs:
            c.reason = "also a graph output"
        elif name in graph.producer:
            c.reason = "also the output of a node"
        elif not uses:
            c.reason = "not used by any node"
        else:
            layouts = set()
            for u in uses:
                layout, why = _role(u)
                if layout is None:
                    c.reason = why
                    break
                layouts.add(layout)
                ranks = WEIGHT_INPUTS[u.node.op_type].ranks
                if (ranks is None and len(shape) < 3) or (ranks is not None and len(shape) not in ranks):
                    want = "3 or more dimensions" if ranks is None else " or ".join(f"{r}-D" for r in ranks)
                    c.reason = f"{u.node.op_type} weights of {len(shape)}-D are kept ({_describe(u)}; the converter takes {want})"
                    break
            else:
                if len(layouts) > 1:
                    c.reason = "used as a weight in both layouts (in-out and out-in)"
                else:
                    c.layout = layouts.pop()
    return out


def markdown() -> str:
    """The docs' table of weight inputs and their DequantizeLinear attributes (docs/onnx-models.md)."""
    rows = ["| operator | weight | layout | per channel | blocks of B | note |", "|---|---|---|---|---|---|"]
    for w in WEIGHT_INPUTS.values():
        cases = [(f" with `transB={t}`", OUT_IN if t else IN_OUT, w.note.split(" / ")[t]) for t in (0, 1)] \
            if w.layout == "transB" else [("", w.layout, w.note)]
        for when, lay, note in cases:
            rows.append(f"| {w.op_type} | {w.name} (input {w.input}){when} | {lay.name} | `axis={lay.out_axis}` | "
                        f"`axis={lay.in_axis}, block_size=B` | {note} |")
    return "\n".join(rows) + "\n"
