"""A read-only view of an ONNX graph for the checker and the audit: its nodes (subgraphs included),
its constants, the opset in force, and each tensor's type and shape.

Types and shapes come from the model's own declarations and from ``onnx.shape_inference`` (not
strict: a node it cannot type leaves its outputs unknown rather than failing).  Inference runs on a
*skeleton* of the model — large initializers replaced by typed graph inputs — so it never
serializes the weights: a model over 2 GB, or one whose weights are in external data files, is
inferred from its structure alone.

Constants are the initializers and the outputs of ``Constant`` nodes, of the main graph and of the
subgraphs (an outer scope's constants are visible inside its subgraphs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ModelError, QuantSpecError
from .io import OnnxModel, load_model, onnx_module, tensor_size, type_name

__all__ = ["Graph", "Node", "TensorInfo", "DEFAULT_DOMAINS", "MS_DOMAIN"]

DEFAULT_DOMAINS = ("", "ai.onnx")
MS_DOMAIN = "com.microsoft"
#: initializers of at least this many bytes are left out of the shape-inference skeleton
_SKELETON_FROM = 1 << 16


@dataclass(frozen=True)
class TensorInfo:
    """What is known of a tensor: its ONNX element type (None: unknown) and shape (None: unknown
    rank; a dimension that is not a number is None)."""

    elem_type: int | None
    shape: tuple[int | None, ...] | None

    @property
    def type_name(self) -> str | None:
        return None if self.elem_type is None else type_name(self.elem_type)

    @property
    def rank(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        """The shape when every dimension is known."""
        if self.shape is None or any(d is None for d in self.shape):
            return None
        return tuple(self.shape)  # type: ignore[arg-type]


UNKNOWN = TensorInfo(None, None)


@dataclass(frozen=True, eq=False)
class Node:
    """One node: ``index`` is its position in its graph; ``graph`` is "" for the main graph, else the
    path of the subgraph holding it (``"loop_node/body"``)."""

    index: int
    proto: Any
    graph: str = ""
    attrs: dict = field(default_factory=dict)

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def domain(self) -> str:
        return self.proto.domain

    @property
    def name(self) -> str:
        return self.proto.name

    @property
    def inputs(self) -> list[str]:
        return list(self.proto.input)

    @property
    def outputs(self) -> list[str]:
        return list(self.proto.output)

    def input(self, k: int) -> str:
        """The name of input ``k`` ("" when absent)."""
        return self.proto.input[k] if k < len(self.proto.input) else ""

    @property
    def label(self) -> str:
        where = f"{self.graph}:" if self.graph else ""
        return f"{where}{self.index} {self.op_type}" + (f" {self.name!r}" if self.name else "")


class Graph:
    """The view: ``nodes`` (main graph first, then subgraphs, each in its order), ``opset`` (the
    default domain's version, None when the model imports none), ``opsets`` (domain -> version),
    :meth:`info`, :meth:`constant`, :meth:`value`, ``producer`` and ``consumers``."""

    def __init__(self, model: Any):
        self.model: OnnxModel = load_model(model)
        onnx = onnx_module()
        self._onnx = onnx
        proto = self.model.proto
        self.opsets: dict[str, int] = {}
        for o in proto.opset_import:
            self.opsets["" if o.domain == "ai.onnx" else o.domain] = int(o.version)
        self.opset: int | None = self.opsets.get("")
        self.ir_version = int(proto.ir_version)
        self.nodes: list[Node] = []
        self._constants: dict[str, Any] = {}       # name -> TensorProto
        self._infos: dict[str, TensorInfo] = {}
        self.producer: dict[str, Node] = {}
        self.consumers: dict[str, list[Node]] = {}
        self.inputs: list[str] = []               # the main graph's inputs that are not initializers
        self.outputs: list[str] = [o.name for o in proto.graph.output]
        self._walk(proto.graph, "")
        inits = {t.name for t in proto.graph.initializer}
        self.inputs = [i.name for i in proto.graph.input if i.name not in inits]
        self._infer(proto)

    # -- structure --------------------------------------------------------------------------------
    def _walk(self, graph: Any, path: str) -> None:
        helper = self._onnx.helper
        for t in graph.initializer:
            self._constants.setdefault(t.name, t)
        for vi in (*graph.input, *graph.value_info, *graph.output):
            self._declare(vi)
        subgraphs = []
        for k, n in enumerate(graph.node):
            attrs = {}
            for a in n.attribute:
                if a.type in (self._onnx.AttributeProto.GRAPH, self._onnx.AttributeProto.GRAPHS):
                    subs = [a.g] if a.type == self._onnx.AttributeProto.GRAPH else list(a.graphs)
                    for j, g in enumerate(subs):
                        suffix = f"{a.name}" + (f"[{j}]" if a.type == self._onnx.AttributeProto.GRAPHS else "")
                        subgraphs.append((g, f"{path + '/' if path else ''}{n.name or f'node {k}'}/{suffix}"))
                    continue
                try:
                    attrs[a.name] = helper.get_attribute_value(a)
                except Exception:  # an attribute of an unknown kind
                    attrs[a.name] = None
            node = Node(k, n, path, attrs)
            self.nodes.append(node)
            for o in n.output:
                if o:
                    self.producer.setdefault(o, node)
            for i in n.input:
                if i:
                    self.consumers.setdefault(i, []).append(node)
            if n.op_type == "Constant" and n.domain in DEFAULT_DOMAINS and n.output:
                tensor = self._constant_value(n)
                if tensor is not None:
                    self._constants.setdefault(n.output[0], tensor)
        for g, sub in subgraphs:
            self._walk(g, sub)

    def _constant_value(self, n: Any) -> Any:
        """The TensorProto a Constant node produces (None for a sparse or unreadable one)."""
        onnx = self._onnx
        from onnx import numpy_helper

        for a in n.attribute:
            try:
                if a.name == "value":
                    t = onnx.TensorProto()
                    t.CopyFrom(a.t)
                    t.name = n.output[0]
                    return t
                if a.name in ("value_float", "value_floats"):
                    return numpy_helper.from_array(np.asarray(a.f if a.name == "value_float" else list(a.floats),
                                                              np.float32), n.output[0])
                if a.name in ("value_int", "value_ints"):
                    return numpy_helper.from_array(np.asarray(a.i if a.name == "value_int" else list(a.ints),
                                                              np.int64), n.output[0])
            except Exception:
                return None
        return None

    def _declare(self, vi: Any) -> None:
        info = self._info_of(vi.type)
        if info is not UNKNOWN:
            old = self._infos.get(vi.name)
            if old is None or old.elem_type is None or (old.shape is None and info.shape is not None):
                self._infos[vi.name] = info

    @staticmethod
    def _info_of(tp: Any) -> TensorInfo:
        if not tp.HasField("tensor_type"):
            return UNKNOWN
        tt = tp.tensor_type
        elem = int(tt.elem_type) or None
        shape = None
        if tt.HasField("shape"):
            # a negative dim_value (no valid model has one) is as good as unknown
            shape = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0 else None
                          for d in tt.shape.dim)
        return TensorInfo(elem, shape)

    def _infer(self, proto: Any) -> None:
        """Types and shapes by onnx shape inference on a skeleton of the model."""
        onnx = self._onnx
        skeleton = onnx.ModelProto()
        skeleton.ir_version = proto.ir_version
        skeleton.opset_import.extend(proto.opset_import)
        skeleton.functions.extend(proto.functions)
        g, src = skeleton.graph, proto.graph
        g.name = src.name
        g.node.extend(src.node)
        g.input.extend(src.input)
        g.output.extend(src.output)
        g.value_info.extend(src.value_info)
        declared = {i.name for i in src.input}
        for t in src.initializer:
            big = t.data_location == onnx.TensorProto.EXTERNAL or tensor_size(t) >= _SKELETON_FROM
            if big:
                if t.name not in declared:
                    g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
            else:
                g.initializer.append(t)
        try:
            inferred = onnx.shape_inference.infer_shapes(skeleton, check_type=False, strict_mode=False,
                                                         data_prop=True)
        except Exception:  # a model inference cannot read: keep what the model declares
            inferred = None
        if inferred is not None:
            self._collect(inferred.graph)

    def _collect(self, graph: Any) -> None:
        for vi in (*graph.input, *graph.value_info, *graph.output):
            self._declare(vi)
        for n in graph.node:
            for a in n.attribute:
                if a.type == self._onnx.AttributeProto.GRAPH:
                    self._collect(a.g)
                elif a.type == self._onnx.AttributeProto.GRAPHS:
                    for g in a.graphs:
                        self._collect(g)

    # -- tensors ----------------------------------------------------------------------------------
    def constant(self, name: str) -> Any:
        """The TensorProto of a constant tensor (initializer or Constant node output), else None."""
        return self._constants.get(name) if name else None

    def value(self, name: str) -> np.ndarray | None:
        """The values of a constant tensor (None for one that is not constant).  Raises ModelError
        when its data cannot be read."""
        t = self.constant(name)
        return None if t is None else self.model.values(t)

    def info(self, name: str) -> TensorInfo:
        """Type and shape of a tensor (constants from their TensorProto)."""
        t = self.constant(name)
        if t is not None:
            dims = tuple(int(d) for d in t.dims)
            if any(d < 0 for d in dims):
                raise ModelError("model", f"has a constant tensor {name!r} with a negative dimension", list(dims))
            return TensorInfo(int(t.data_type) or None, dims)
        return self._infos.get(name, UNKNOWN) if name else UNKNOWN

    def stored_ints(self, name: str) -> np.ndarray | None:
        """For a constant stored in ``int32_data`` (8- and 16-bit integers, as onnx.helper.make_tensor
        writes them): the stored numbers, before they are cast to the tensor's type — a value out of
        the type's range survives there and is silently wrapped when read.  None otherwise."""
        t = self.constant(name)
        if t is None or t.HasField("raw_data") or t.data_location == self._onnx.TensorProto.EXTERNAL:
            return None
        if len(t.int32_data):
            return np.asarray(t.int32_data, np.int64)
        return None

    def version(self, node: Node, versions: tuple[int, ...]) -> int | None:
        """The operator version in force for ``node`` among ``versions`` (the domain's opset picks the
        newest version not above it); None when the domain's opset predates them all or is not
        imported."""
        opset = self.opsets.get("" if node.domain in DEFAULT_DOMAINS else node.domain)
        if opset is None:
            return None
        usable = [v for v in versions if v <= opset]
        return max(usable) if usable else None


def read_graph(model: Any) -> Graph:
    """A :class:`Graph` of a model given as :func:`quantspec.onnxmodels.io.load_model` takes it."""
    if isinstance(model, Graph):
        return model
    try:
        return Graph(model)
    except QuantSpecError:
        raise
    except Exception as e:  # pragma: no cover - a model the onnx package parsed but whose structure surprises us
        raise ModelError("model", "has a structure quantspec cannot read", detail=f"{type(e).__name__}: {e}") from None
