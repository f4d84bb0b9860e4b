"""Control flow and resource variables: IF, WHILE, CALL_ONCE, VAR_HANDLE, READ_VARIABLE,
ASSIGN_VARIABLE (``tflite/kernels/if.cc``, ``while.cc``, ``call_once.cc``, ``var_handle.cc``,
``read_variable.cc``, ``assign_variable.cc``).

The interpreter hands these kernels what they need beyond tensors, in their options:
``quantspec_subgraph`` (subgraph index -> the prepared subgraph, which runs on a list of arrays) for
IF, WHILE and CALL_ONCE, and ``quantspec_state`` (the interpreter's resource variables and the
init subgraphs already run) for CALL_ONCE and the variable ops.

- **IF**: input 0 is a bool tensor of one element; the other inputs go to ``then_subgraph_index``
  when it is true, else to ``else_subgraph_index``; that subgraph's outputs are the op's.
- **WHILE**: the inputs are the loop variables; ``cond_subgraph_index`` (one bool output of one
  element) decides, ``body_subgraph_index`` computes the next values; the final values are the
  outputs.  A loop whose condition never turns false runs forever, in LiteRT and here.
- **CALL_ONCE**: runs ``init_subgraph_index`` (no inputs, no outputs) the first time the
  interpreter runs the op, never again.
- **VAR_HANDLE** gives the id of the variable named by ``(container, shared_name)`` (numbered in
  the order first seen, from 0); **ASSIGN_VARIABLE** stores a copy of its value input in it (type
  and shape included); **READ_VARIABLE** returns a copy (LiteRT fails at Eval when the variable was
  never assigned, or holds another type).  Variables live as long as the interpreter, across runs.

The subgraphs' inputs must have the types and shapes their callers pass (quantspec prepares each
subgraph once, with its stored shapes); another shape is an :class:`~quantspec.errors.UnsupportedError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...errors import DTypeError, InvalidArgumentError, ModelError, UnsupportedError
from . import _common as c
from .base import Kernel, register

__all__ = ["If", "While", "CallOnce", "VarHandle", "ReadVariable", "AssignVariable", "State"]


@dataclass
class State:
    """An interpreter's resource variables (id -> array), the ids of ``(container, shared_name)``
    and the CALL_ONCE init subgraphs already run."""

    variables: dict[int, np.ndarray] = field(default_factory=dict)
    ids: dict[tuple[str, str], int] = field(default_factory=dict)
    initialized: set[int] = field(default_factory=set)


def _subgraphs(op: str, options):
    get = (options or {}).get("quantspec_subgraph")
    if get is None:
        raise UnsupportedError(op, "runs other subgraphs: it runs inside quantspec.litert.Interpreter only", None)
    return get


def _state(op: str, options) -> State:
    state = (options or {}).get("quantspec_state")
    if state is None:
        raise UnsupportedError(op, "uses resource variables: it runs inside quantspec.litert.Interpreter only", None)
    return state


def _index(op: str, options, key: str) -> int:
    v = c.option(options, key, None, kind=int)
    if v is None:
        raise InvalidArgumentError(f"options[{key!r}]", f"is required by {op}", None)
    return v


def _check_call(op: str, graph, specs, what: str) -> None:
    """The subgraph's inputs take the caller's arrays: the same number, types and shapes."""
    sg = graph.sg
    if len(specs) != len(sg.inputs):
        raise ModelError(f"{op} {what} subgraph {sg.index}", f"must take {len(specs)} inputs (LiteRT rejects the "
                         "model at prepare)", len(sg.inputs))
    for k, (spec, i) in enumerate(zip(specs, sg.inputs)):
        t = sg.tensors[i]
        if spec is None:
            continue
        if t.dtype is None or spec.dtype.name != t.dtype.name:
            raise DTypeError(f"{op} {what} subgraph {sg.index} input {k}", "must have the caller's type",
                             None if t.dtype is None else t.dtype.name, detail=f"caller: {spec.dtype.name}")
        if tuple(spec.shape) != tuple(t.shape):
            raise UnsupportedError(f"{op} {what} subgraph {sg.index} input {k}", "has another shape than the "
                                   "caller's: quantspec runs subgraphs with the shapes they store",
                                   (tuple(t.shape), tuple(spec.shape)))


def _check_outputs(op: str, graph, count: int, what: str) -> None:
    if len(graph.sg.outputs) != count:
        raise ModelError(f"{op} {what} subgraph {graph.sg.index}", f"must have {count} outputs (LiteRT rejects "
                         "the model at prepare)", len(graph.sg.outputs))


def _call(graph, arrays) -> list[np.ndarray]:
    outs, _ = graph.run([np.asarray(a) for a in arrays])
    return [np.array(y, copy=True) for y in outs]


@dataclass(frozen=True, eq=False)
class IfParams:
    then_graph: Any
    else_graph: Any


@register
class If(Kernel):
    """IF: run the then or the else subgraph on inputs 1..n."""

    name = "IF"

    def prepare(self, inputs, outputs, options):
        if len(inputs) < 1 or inputs[0] is None:
            raise InvalidArgumentError("inputs", "IF needs its condition (input 0)", len(inputs))
        cond = inputs[0]
        if cond.dtype.name != "bool" or int(np.prod(cond.shape, dtype=np.int64)) != 1:
            raise DTypeError("IF condition", "must be a bool tensor of one element (LiteRT rejects the model at "
                             "prepare)", (cond.dtype.name, tuple(cond.shape)))
        get = _subgraphs(self.name, options)
        then_g = get(_index(self.name, options, "then_subgraph_index"))
        else_g = get(_index(self.name, options, "else_subgraph_index"))
        for graph, what in ((then_g, "then"), (else_g, "else")):
            _check_call(self.name, graph, list(inputs[1:]), what)
            _check_outputs(self.name, graph, len(outputs), what)
        return IfParams(then_g, else_g)

    def compute(self, p: IfParams, arrays):
        cond = bool(np.asarray(arrays[0]).reshape(-1)[0])
        return _call(p.then_graph if cond else p.else_graph, arrays[1:])


@dataclass(frozen=True, eq=False)
class WhileParams:
    cond_graph: Any
    body_graph: Any


@register
class While(Kernel):
    """WHILE: the body subgraph runs on the loop variables while the cond subgraph says true."""

    name = "WHILE"

    def prepare(self, inputs, outputs, options):
        if len(outputs) != len(inputs):
            raise ModelError("WHILE outputs", "must be as many as its inputs (LiteRT rejects the model at prepare)",
                             (len(inputs), len(outputs)))
        get = _subgraphs(self.name, options)
        cond_g = get(_index(self.name, options, "cond_subgraph_index"))
        body_g = get(_index(self.name, options, "body_subgraph_index"))
        _check_call(self.name, cond_g, list(inputs), "cond")
        _check_outputs(self.name, cond_g, 1, "cond")
        out = cond_g.sg.tensors[cond_g.sg.outputs[0]]
        if out.type_name != "BOOL" or tuple(out.shape) not in ((1,), ()):
            raise DTypeError(f"WHILE cond subgraph {cond_g.sg.index} output", "must be a bool tensor of one element "
                             "(LiteRT fails at prepare)", (out.type_name, tuple(out.shape)))
        _check_call(self.name, body_g, list(inputs), "body")
        _check_outputs(self.name, body_g, len(inputs), "body")
        return WhileParams(cond_g, body_g)

    def compute(self, p: WhileParams, arrays):
        values = [np.array(a, copy=True) for a in arrays]
        while True:
            (flag,) = _call(p.cond_graph, values)
            if not bool(flag.reshape(-1)[0]):
                return values
            values = _call(p.body_graph, values)


@dataclass(frozen=True, eq=False)
class CallOnceParams:
    graph: Any
    index: int
    state: State


@register
class CallOnce(Kernel):
    """CALL_ONCE: the init subgraph, the first time only."""

    name = "CALL_ONCE"

    def prepare(self, inputs, outputs, options):
        if inputs or outputs:
            raise ModelError("CALL_ONCE", "takes no inputs and no outputs (LiteRT rejects the model at prepare)",
                             (len(inputs), len(outputs)))
        index = _index(self.name, options, "init_subgraph_index")
        graph = _subgraphs(self.name, options)(index)
        if graph.sg.inputs or graph.sg.outputs:
            raise ModelError(f"CALL_ONCE init subgraph {index}", "must have no inputs and no outputs (LiteRT rejects "
                             "the model at prepare)", (len(graph.sg.inputs), len(graph.sg.outputs)))
        return CallOnceParams(graph, index, _state(self.name, options))

    def compute(self, p: CallOnceParams, arrays):
        if p.index not in p.state.initialized:
            p.graph.run([])
            p.state.initialized.add(p.index)
        return []


@dataclass(frozen=True, eq=False)
class VarHandleParams:
    shape: tuple[int, ...]
    resource_id: int


@register
class VarHandle(Kernel):
    """VAR_HANDLE: the id of the variable ``(container, shared_name)``."""

    name = "VAR_HANDLE"

    def prepare(self, inputs, outputs, options):
        if inputs or len(outputs) != 1:
            raise ModelError("VAR_HANDLE", "takes no inputs and one output", (len(inputs), len(outputs)))
        state = _state(self.name, options)
        key = (str(c.option(options, "container", "") or ""), str(c.option(options, "shared_name", "") or ""))
        rid = state.ids.setdefault(key, len(state.ids))
        return VarHandleParams(tuple(outputs[0].shape), rid)

    def compute(self, p: VarHandleParams, arrays):
        return [np.full(p.shape, p.resource_id, np.int32)]


def _resource(op: str, spec) -> None:
    if spec is None or int(np.prod(spec.shape, dtype=np.int64)) != 1 or spec.dtype.name != "int32":
        raise InvalidArgumentError(f"{op} resource", "must be a resource (or int32) tensor of one element (LiteRT "
                                   "rejects the model at prepare)", None if spec is None else tuple(spec.shape))


@dataclass(frozen=True, eq=False)
class VariableParams:
    state: State
    dtype: np.dtype | None


@register
class ReadVariable(Kernel):
    """READ_VARIABLE: a copy of the variable's value."""

    name = "READ_VARIABLE"

    def prepare(self, inputs, outputs, options):
        (resource,) = c.count(self.name, inputs, outputs, 1, names=("resource",))
        _resource(self.name, resource)
        return VariableParams(_state(self.name, options), np.dtype(outputs[0].dtype.dtype))

    def compute(self, p: VariableParams, arrays):
        rid = int(np.asarray(arrays[0]).reshape(-1)[0])
        value = p.state.variables.get(rid)
        if value is None:
            raise InvalidArgumentError("READ_VARIABLE", "reads a variable no ASSIGN_VARIABLE has set (LiteRT fails "
                                       "at Eval)", rid)
        if value.dtype != p.dtype:
            raise DTypeError("READ_VARIABLE output", "must have the variable's type (LiteRT fails at Eval)",
                             str(p.dtype), detail=f"variable: {value.dtype}")
        return [np.array(value, copy=True)]


@register
class AssignVariable(Kernel):
    """ASSIGN_VARIABLE: store a copy of the value in the variable."""

    name = "ASSIGN_VARIABLE"

    def prepare(self, inputs, outputs, options):
        if len(inputs) != 2 or any(t is None for t in inputs) or outputs:
            raise ModelError("ASSIGN_VARIABLE", "takes two inputs and no outputs (LiteRT rejects the model at "
                             "prepare)", (len(inputs), len(outputs)))
        _resource(self.name, inputs[0])
        return VariableParams(_state(self.name, options), None)

    def compute(self, p: VariableParams, arrays):
        rid = int(np.asarray(arrays[0]).reshape(-1)[0])
        p.state.variables[rid] = np.array(arrays[1], copy=True)
        return []
