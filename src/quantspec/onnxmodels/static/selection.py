"""Which nodes are quantized, and the calibrated ranges as the writers use them.

- a node is quantized when its op type is in ``op_types_to_quantize`` (by default every op type of
  :data:`registry.DEFAULT_OP_TYPES`), it is not a QuantizeLinear / DequantizeLinear, and its name is
  not in ``nodes_to_exclude``;
- ranges: a quantized Relu or Clip whose input has no other reader gives its output's range to its
  input (the two share one scale), and a quantized Softmax's output range is [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import InvalidArgumentError
from .graph import Graph
from .options import StaticOptions
from .registry import DEFAULT_OP_TYPES


@dataclass
class Range:
    """A calibrated range as the writers read it: ``lowest`` / ``highest`` arrays of one value (their
    dtype and shape as onnxruntime's ``TensorData`` has them)."""

    lowest: np.ndarray
    highest: np.ndarray


def op_types(options: StaticOptions) -> tuple[str, ...]:
    return options.op_types_to_quantize if options.op_types_to_quantize else DEFAULT_OP_TYPES


def should_quantize(node, options: StaticOptions) -> bool:
    if node.op_type not in op_types(options):
        return False
    if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
        return False
    return node.name not in options.nodes_to_exclude


def check_excluded_names(graph: Graph, options: StaticOptions) -> None:
    """``nodes_to_exclude`` must name nodes of the model (onnxruntime ignores unknown names silently;
    a misspelt name would quantize a node the caller meant to keep, so it is refused here)."""
    names = {n.name for n in graph.graph.node}
    missing = [n for n in options.nodes_to_exclude if n not in names]
    if missing:
        raise InvalidArgumentError("nodes_to_exclude", "must name nodes of the model", missing)


def to_ranges(ranges: dict) -> dict[str, Range]:
    """CalibrationRange / onnxruntime TensorData / (lowest, highest) pairs -> :class:`Range`."""
    out = {}
    for name, value in ranges.items():
        if isinstance(value, Range):
            out[name] = Range(value.lowest, value.highest)
        elif hasattr(value, "range_value"):
            lo, hi = value.range_value
            out[name] = Range(np.asarray(lo), np.asarray(hi))
        elif hasattr(value, "lowest") and hasattr(value, "highest"):
            out[name] = Range(np.asarray(value.lowest), np.asarray(value.highest))
        else:
            lo, hi = value
            out[name] = Range(np.asarray(lo), np.asarray(hi))
    return out


def adjust_ranges(graph: Graph, ranges: dict[str, Range], options: StaticOptions) -> None:
    for node in graph.graph.node:
        if node.op_type in ("Clip", "Relu"):
            if not should_quantize(node, options):
                continue
            if graph.consumers(node.input[0]) != 1:
                continue
            if node.input[0] not in ranges or node.output[0] not in ranges:
                continue
            ranges[node.input[0]] = ranges[node.output[0]]
        elif node.op_type == "Softmax":
            if not should_quantize(node, options):
                continue
            ranges[node.output[0]] = Range(np.array(0.0, dtype=np.float32), np.array(1.0, dtype=np.float32))
