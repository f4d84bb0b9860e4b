"""The checker's report: :class:`Violation` and :class:`CheckReport`, shaped like the LiteRT
checker's (``.ok``, ``.violations``, ``render()``, ``to_json()``), and :data:`RULES`, the rule ids
with what each requires."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["RULES", "Violation", "CheckReport", "markdown"]

#: rule id -> what it requires (ids are stable)
RULES: dict[str, str] = {
    "opset": "the model imports a default-domain opset",
    "op-version": "the operator exists in the model's opset (QuantizeLinear and DequantizeLinear from opset 10, "
                  "QLinearMatMul's float8 types from opset 21, ...)",
    "inputs": "the operator has each input it needs (x and the scale), no more than it takes, and its one output",
    "attribute": "only attributes the operator version has, of the right kind and value",
    "dtype": "inputs and outputs of types the operator version accepts (for QuantizeLinear before opset 23 "
             "the scale has x's type)",
    "output-dtype": "output_dtype is an output type of the version and agrees with the zero point's type; a "
                    "float8e8m0 DequantizeLinear scale comes with an output_dtype",
    "saturate": "saturate=0 only where it has an effect: float8 outputs",
    "precision": "precision (opset 23 on) is one of the version's precision types",
    "axis": "axis lies in [-r, r-1] for per-axis and blocked parameters",
    "scale-shape": "the scale is a scalar (per tensor), 1-D with the axis's length (per axis) or x's shape with "
                   "ceil(D/block_size) on the axis (blocked), or a shape the operator accepts",
    "block-size": "block_size is 0 unless the parameters are blocked, and then ceil(D/block_size) equals the "
                  "scale's length on the axis (MatMulNBits: a power of two, at least 16)",
    "zero-point-shape": "the zero point has the scale's shape (or a shape the operator accepts)",
    "zero-point-type": "the zero point has the quantized tensor's type",
    "scale": "constant scales are finite, and not 0 where the operator divides by them",
    "zero-point-range": "constant zero points lie in their type's range; int32 and float8 zero points are 0",
    "same-params": "DequantizeLinear -> an op that only moves values -> QuantizeLinear keeps the scale and zero "
                   "point (and, around MaxPool / ReduceMax / ReduceMin, a positive scale)",
    "shape": "other inputs the quantization parameters rely on have the shape they must (QLinearConv's bias, "
             "MatMulNBits' packed weights, A's last dimension K and bias (N,))",
}


@dataclass(frozen=True)
class Violation:
    """One broken rule at a node and a tensor.  ``node_index`` is the node's position in its graph
    (``graph`` is "" for the main graph, else the subgraph's path); ``tensor`` the tensor's name;
    ``position`` where the tensor sits on the node (``"input 1 (y_scale)"``) or the attribute."""

    rule: str
    node_index: int | None
    tensor: str | None
    message: str
    node_name: str | None = None
    op_type: str | None = None
    domain: str = ""
    graph: str = ""
    position: str = ""
    expected: Any = None
    found: Any = None

    # the LiteRT checker's names, so one consumer reads both reports
    @property
    def op_index(self) -> int | None:
        return self.node_index

    @property
    def op_name(self) -> str | None:
        return self.op_type

    @property
    def tensor_name(self) -> str | None:
        return self.tensor

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "graph": self.graph, "node_index": self.node_index, "node_name": self.node_name,
                "op_type": self.op_type, "domain": self.domain, "tensor": self.tensor, "position": self.position,
                "expected": _jsonable(self.expected), "found": _jsonable(self.found), "message": self.message,
                # the LiteRT report's keys for the same facts
                "op_index": self.node_index, "op_name": self.op_type, "tensor_name": self.tensor}

    @property
    def where(self) -> str:
        if self.node_index is None:
            return "model"
        node = f"{self.graph}:" if self.graph else ""
        node += f"node {self.node_index} {self.op_type}" + (f" {self.node_name!r}" if self.node_name else "")
        return node

    def __str__(self) -> str:
        where = [self.where]
        if self.tensor:
            where.append(f"tensor {self.tensor!r}" + (f" [{self.position}]" if self.position else ""))
        elif self.position:
            where.append(self.position)
        return f"[{self.rule}] {', '.join(where)}: {self.message} (expected {_show(self.expected)}, found " \
               f"{_show(self.found)})"


@dataclass(frozen=True)
class CheckReport:
    """The result of :func:`quantspec.onnxmodels.check_model`: ``ok`` when there is no violation.
    ``nodes``: how many quantization nodes were checked (QuantizeLinear, DequantizeLinear and the
    operators with quantization parameters); ``opset``: the model's default-domain opset."""

    violations: tuple[Violation, ...]
    nodes: int = 0
    opset: int | None = None
    model: str | None = None
    op_types: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(sorted({v.rule for v in self.violations}))

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "format": "onnx", "ok": self.ok, "opset": self.opset, "nodes": self.nodes,
                "op_types": list(self.op_types), "violations": [v.to_json() for v in self.violations],
                "summary": {"violations": len(self.violations), "rules": list(self.rules)}}

    def json(self, **kwargs) -> str:
        return json.dumps(self.to_json(), **kwargs)

    def render(self, width: int = 40) -> str:
        """A readable table, one row per violation, then the details."""
        head = self.model or "model"
        if self.ok:
            return (f"{head}: conformant to the ONNX quantization operators (opset {self.opset}, {self.nodes} "
                    f"quantization nodes checked)")
        cols = ("rule", "node", "tensor", "expected", "found")
        rows = []
        for v in self.violations:
            node = "-" if v.node_index is None else f"{v.node_index} {v.op_type}"
            if v.graph:
                node = f"{v.graph}:{node}"
            tensor = v.tensor or (v.position if v.position else "-")
            rows.append((v.rule, node, tensor, _show(v.expected), _show(v.found)))
        rows = [tuple(_clip(c, width) for c in r) for r in rows]
        widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
        out = [f"{head}: {len(self.violations)} violation(s) of the ONNX quantization operators (opset {self.opset}, "
               f"{self.nodes} quantization nodes checked)", "",
               "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip(), "  ".join("-" * w for w in widths)]
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        out += ["", "details:"]
        out += [f"  {k}. {v}" for k, v in enumerate(self.violations, 1)]
        return "\n".join(out)

    __str__ = render


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.9g}"
    if isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
        return " or ".join(value)
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def markdown() -> str:
    """The rule table (docs/onnx-models.md)."""
    lines = ["| rule | requires |", "|---|---|"]
    lines += [f"| `{rule}` | {text} |" for rule, text in RULES.items()]
    return "\n".join(lines) + "\n"
