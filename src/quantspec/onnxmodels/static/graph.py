"""A small mutable view of an ONNX graph, with the edits both writers make (replace a tensor's name
in the nodes that read or write it, add and drop initializers, drop unused initializers, sort)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16)


class Graph:
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.graph = model.graph
        types: dict[str, onnx.ValueInfoProto] = {vi.name: vi for vi in self.graph.value_info}
        types.update({vi.name: vi for vi in self.graph.output})
        types.update({vi.name: vi for vi in self.graph.input})
        self.value_infos = types
        #: the initializers of the model as given (some rules look only at these)
        self.original_initializers = {t.name: t for t in self.graph.initializer}
        self._inits: dict[str, TensorProto] = {}
        for t in self.graph.initializer:
            self._inits.setdefault(t.name, t)
        self._readers: dict[str, list[int]] | None = None  # name -> positions of the nodes reading it
        opsets = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
        self.opset = opsets[0].version if len(opsets) == 1 else None

    # -- lookups ---------------------------------------------------------------------------------
    def initializer(self, name: str) -> TensorProto | None:
        """The first initializer of that name."""
        return self._inits.get(name)

    def is_initializer(self, name: str) -> bool:
        return self.initializer(name) is not None

    def elem_type(self, name: str) -> int | None:
        """The element type of an initializer or of a typed value, else None."""
        init = self.initializer(name)
        if init is not None:
            return init.data_type
        vi = self.value_infos.get(name)
        if vi is not None and vi.type.HasField("tensor_type"):
            return vi.type.tensor_type.elem_type
        return None

    def is_float(self, name: str) -> bool:
        """A float / float16 initializer or typed value (onnxruntime's test for what may be quantized)."""
        init = self.initializer(name)
        if init is not None:
            return init.data_type in FLOAT_TYPES
        vi = self.value_infos.get(name)
        return vi is not None and vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in FLOAT_TYPES

    def is_float_initializer(self, name: str) -> bool:
        init = self.initializer(name)
        return init is not None and init.data_type in FLOAT_TYPES

    def is_graph_output(self, name: str) -> bool:
        return any(o.name == name for o in self.graph.output)

    def is_graph_input(self, name: str) -> bool:
        return any(i.name == name for i in self.graph.input)

    def consumers(self, name: str) -> int:
        """How many (node, input slot) pairs read ``name``."""
        return sum(1 for n in self.graph.node for i in n.input if i and i == name)

    def array(self, name: str) -> np.ndarray:
        return numpy_helper.to_array(self.initializer(name))

    def constant_value(self, name: str) -> np.ndarray | None:
        for node in self.graph.node:
            if node.op_type == "Constant" and node.output[0] == name:
                for attr in node.attribute:
                    if attr.name == "value":
                        return numpy_helper.to_array(attr.t)
        init = self.initializer(name)
        return None if init is None else numpy_helper.to_array(init)

    # -- edits -----------------------------------------------------------------------------------
    def add_initializer(self, tensor: TensorProto) -> None:
        """Add unless one of that name exists."""
        if tensor.name not in self._inits:
            self.append_initializer(tensor)

    def append_initializer(self, tensor: TensorProto) -> None:
        """Add (a second one of a name is kept after the first, as onnxruntime's list extension keeps it)."""
        self.graph.initializer.append(tensor)
        self._inits.setdefault(tensor.name, self.graph.initializer[len(self.graph.initializer) - 1])

    def remove_initializer(self, name: str) -> None:
        init = self._inits.pop(name, None)
        if init is not None:
            self.graph.initializer.remove(init)
            for t in self.graph.initializer:
                if t.name == name:
                    self._inits[name] = t
                    break
            for gi in list(self.graph.input):
                if gi.name == name:
                    self.graph.input.remove(gi)

    def add_nodes(self, nodes) -> None:
        for node in nodes:
            self.graph.node.append(node)
            if self._readers is not None:
                k = len(self.graph.node) - 1
                for name in dict.fromkeys(i for i in node.input if i):
                    self._readers.setdefault(name, []).append(k)

    def remove_node(self, node) -> None:
        if node in self.graph.node:
            self.graph.node.remove(node)
            self._readers = None

    def replace_input(self, old: str, new: str, node_names: set[str] | None = None) -> None:
        """In the nodes reading ``old`` (those named in ``node_names`` when given), read ``new`` instead."""
        if self._readers is None:
            self._readers = {}
            for k, node in enumerate(self.graph.node):
                for name in dict.fromkeys(i for i in node.input if i):
                    self._readers.setdefault(name, []).append(k)
        kept, moved = [], []
        for k in self._readers.pop(old, []):
            node = self.graph.node[k]
            if node_names is None or node.name in node_names:
                for j, name in enumerate(node.input):
                    if name == old:
                        node.input[j] = new
                moved.append(k)
            else:
                kept.append(k)
        if kept:
            self._readers[old] = kept
        if moved and new:
            into = self._readers.setdefault(new, [])
            into.extend(k for k in moved if k not in into)
            into.sort()

    def replace_output(self, old: str, new: str) -> None:
        for node in self.graph.node:
            for j, name in enumerate(node.output):
                if name == old:
                    node.output[j] = new

    def largest_suffix(self, prefix: str) -> int:
        best = -1
        for t in self.graph.initializer:
            if t.name.startswith(prefix):
                try:
                    best = max(best, int(t.name[len(prefix):]))
                except ValueError:
                    continue
        return best

    def clean_initializers(self) -> set[str]:
        """Drop the initializers no node reads (nor a graph output, nor a node of a subgraph), and their
        graph inputs.  Returns the names read that nothing provides (no node, initializer or input)."""
        wanted = _read_names(self.graph)
        for init in [t for t in self.graph.initializer if t.name not in wanted]:
            self.remove_initializer(init.name)
        provided = {o for n in self.graph.node for o in n.output} | {t.name for t in self.graph.initializer}
        provided |= {i.name for i in self.graph.input}
        return wanted - provided

    def sort(self) -> None:
        """Order the nodes so each comes after the producers of its inputs (stable otherwise)."""
        nodes = list(self.graph.node)
        produced = {o: k for k, n in enumerate(nodes) for o in n.output if o}
        done: list[bool] = [False] * len(nodes)
        order: list[int] = []
        visiting: set[int] = set()

        def visit(k: int) -> None:
            stack = [(k, iter([produced[i] for i in nodes[k].input if i in produced]))]
            visiting.add(k)
            while stack:
                cur, deps = stack[-1]
                nxt = next((d for d in deps if not done[d]), None)
                if nxt is None:
                    stack.pop()
                    visiting.discard(cur)
                    if not done[cur]:
                        done[cur] = True
                        order.append(cur)
                elif nxt in visiting:
                    raise ValueError("graph has a cycle")
                else:
                    visiting.add(nxt)
                    stack.append((nxt, iter([produced[i] for i in nodes[nxt].input if i in produced])))

        for k in range(len(nodes)):
            if not done[k]:
                visit(k)
        self.graph.ClearField("node")
        self.graph.node.extend(nodes[k] for k in order)


def _read_names(graph, outer: bool = True) -> set[str]:
    """The names the nodes of ``graph`` and of its subgraphs read (a subgraph's own values, initializers
    and inputs left out), and its outputs."""
    names = {i for n in graph.node for i in n.input if i} | {o.name for o in graph.output}
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                names |= _read_names(attr.g, False)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    names |= _read_names(g, False)
    if not outer:
        names -= {o for n in graph.node for o in n.output}
        names -= {t.name for t in graph.initializer} | {i.name for i in graph.input}
    return names


def scale_zp_initializers(base: str, zero_point: np.ndarray, scale: np.ndarray, zp_type: int,
                          scale_type: int | None = None, shape=None) -> tuple[TensorProto, TensorProto]:
    """``{base}_scale`` and ``{base}_zero_point`` written as onnxruntime writes them (typed value lists,
    not raw bytes)."""
    shape = list(scale.shape) if shape is None else list(shape)
    if scale_type is None:
        scale_type = TensorProto.FLOAT16 if scale.dtype == np.float16 else TensorProto.FLOAT
    zp = helper.make_tensor(base + "_zero_point", zp_type, shape, np.asarray(zero_point).ravel().tolist())
    sc = helper.make_tensor(base + "_scale", scale_type, shape, np.asarray(scale).ravel().tolist())
    return sc, zp


def np_to_tensor(array: np.ndarray, name: str) -> TensorProto:
    return numpy_helper.from_array(array, name)


def write_bias(g: Graph, bias: str, codes: np.ndarray, scale, float_dtype) -> tuple[str, str, str, int | None]:
    """Add the initializers of a quantized bias as onnxruntime writes them in both formats: its int32
    ``codes`` as ``{bias}_quantized``, its ``scale`` in the bias's float type (``float_dtype``, 1-D) as
    ``{bias}_quantized_scale``, and an int32 zero point of 0, a scalar for one scale, else one per
    scale.  Returns (codes, scale, zero point names, axis: 0 for several scales, else None)."""
    q_name = bias + "_quantized"
    g.append_initializer(numpy_helper.from_array(codes, q_name))
    scale_data = np.asarray(scale, dtype=float_dtype).reshape(-1)
    g.append_initializer(numpy_helper.from_array(scale_data, q_name + "_scale"))
    if np.asarray(scale).size > 1:
        zp = numpy_helper.from_array(np.zeros(np.asarray(scale).shape, dtype=np.int32).reshape(-1),
                                     q_name + "_zero_point")
    else:
        zp = helper.make_tensor(q_name + "_zero_point", TensorProto.INT32, [], [0])
    g.append_initializer(zp)
    return q_name, q_name + "_scale", q_name + "_zero_point", 0 if scale_data.size > 1 else None
