"""The divergence audit of an ONNX model: for each QuantizeLinear / DequantizeLinear node, where
onnxruntime and onnx.reference can compute something other than the operator text, and where
onnxruntime actually did — the model-level counterpart of ``compat=``.

Statically, each node's types, attributes, constant parameters and shapes decide which rows of the
divergence table (:data:`quantspec.onnx.divergences.DIVERGENCES`, rendered in ``docs/onnx.md``) can
apply to it, and which runtime departs there: a float16 quotient, float8 with ``saturate=0``, the
position of 4-bit elements, non-finite inputs, a negative zero point, int32 input...  The positions
onnxruntime computes on its plain (non-MLAS) path are those quantspec's ``compat="onnxruntime"``
kernels use (:mod:`quantspec.onnx.reference`).

Dynamically, the model runs in onnxruntime (graph optimizations off) with every Q/DQ node's inputs
and output exposed (:mod:`quantspec.onnxmodels.ortrun`); quantspec recomputes each node from the
inputs onnxruntime gave it, under each compat mode, and counts the elements where onnxruntime's
output differs from ``compat="spec"`` (how far onnxruntime departs from the spec on these inputs),
where ``compat="reference"`` differs from the spec (what onnx.reference would do), and where
onnxruntime differs from ``compat="onnxruntime"`` — which must be nowhere: quantspec reproduces
onnxruntime, and the audit says so for every node.  Nodes inside subgraphs are audited statically
only.

Each com.microsoft MatMulNBits node of the main graph (constant B, scales and zero points) is audited
too (:class:`NBitsAudit`): quantspec dequantizes its weight as the operator defines it
(:func:`quantspec.onnxmodels.nbits.dequantize`), and onnxruntime computes the node alone on rows of
the identity matrix, whose product is the weight it multiplies by (each output element is ``1 * w``
plus exact zeros: bit-exact but for the sign of a zero).  Other quantized operators (QLinearConv,
QLinearMatMul, MatMulInteger, ConvInteger, MatMulNBits the audit cannot take) are listed as not
audited.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._fastpath import jit
from ..dtypes import qtype
from ..errors import InvalidArgumentError, QuantSpecError
from ..onnx import opsets
from ..onnx.divergences import DIVERGENCES
from ..onnx.plan import resolve_granularity, ort_support, plan_dequantize, plan_quantize
from ..onnx.reference import ort_plain_mask
from .graph import DEFAULT_DOMAINS, MS_DOMAIN, Graph, Node, read_graph
from .io import type_name

__all__ = ["audit", "AuditReport", "NodeAudit", "NBitsAudit", "Risk", "MODES"]

MODES = ("spec", "reference", "onnxruntime")
_TABLE = {d.key: d for d in DIVERGENCES}
_QDQ_VERSIONS = tuple(r.version for r in opsets.VERSIONS)
_FLOAT8 = ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz")
_FLOATS = ("float", "float16", "bfloat16")
#: a shape of more elements than this is not scanned for onnxruntime's 4-bit head and tail positions
_MASK_LIMIT = 1 << 26
_RUNTIME_NAMES = {"reference": "onnx.reference", "onnxruntime": "onnxruntime"}


@dataclass(frozen=True)
class Risk:
    """A divergence that can apply to a node: ``key`` and ``behaviour`` as in docs/onnx.md's table
    (``key`` None for what the table has no row for: a type onnxruntime has no kernel for);
    ``runtimes``: which of ``"reference"`` (onnx.reference) and ``"onnxruntime"`` can compute
    something other than the spec there, or refuse; ``when``: for which inputs."""

    key: str | None
    behaviour: str
    runtimes: tuple[str, ...]
    when: str

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "behaviour": self.behaviour, "runtimes": list(self.runtimes), "when": self.when}

    def __str__(self) -> str:
        who = ", ".join(_RUNTIME_NAMES[r] for r in self.runtimes)
        return f"{self.key or 'no kernel'} ({who}): {self.when}"


@dataclass(frozen=True)
class NodeAudit:
    """One QuantizeLinear / DequantizeLinear node.  The counts are None when the node was not run
    (``--static``, a subgraph, an input onnxruntime did not give) or when a mode refused it
    (``errors`` says why).  ``first`` describes the first element where onnxruntime departs from
    the spec: its index, the input and both outputs."""

    node_index: int
    op_type: str
    output: str
    node_name: str | None = None
    domain: str = ""
    graph: str = ""
    risks: tuple[Risk, ...] = ()
    elements: int | None = None
    onnxruntime_vs_spec: int | None = None
    reference_vs_spec: int | None = None
    onnxruntime_vs_compat: int | None = None
    errors: dict = field(default_factory=dict)
    first: dict | None = None

    @property
    def ran(self) -> bool:
        return self.elements is not None

    def to_json(self) -> dict[str, Any]:
        return {"node_index": self.node_index, "node_name": self.node_name, "op_type": self.op_type,
                "domain": self.domain, "graph": self.graph, "output": self.output, "elements": self.elements,
                "onnxruntime_vs_spec": self.onnxruntime_vs_spec, "reference_vs_spec": self.reference_vs_spec,
                "onnxruntime_vs_compat": self.onnxruntime_vs_compat, "errors": dict(self.errors),
                "first_difference": self.first, "risks": [r.to_json() for r in self.risks]}


@dataclass(frozen=True)
class NBitsAudit:
    """One com.microsoft MatMulNBits node: ``elements`` (K * N) of its weight compared, ``differences``
    the elements where onnxruntime's weight (the node run on identity rows) differs from quantspec's
    dequantization of B, scales and zero points; both None when it was not run (``reason`` says why;
    ``first``: the first difference)."""

    node_index: int
    output: str
    node_name: str | None = None
    attributes: dict = field(default_factory=dict)
    elements: int | None = None
    differences: int | None = None
    reason: str = ""
    first: dict | None = None

    @property
    def ran(self) -> bool:
        return self.elements is not None

    def to_json(self) -> dict[str, Any]:
        return {"node_index": self.node_index, "node_name": self.node_name, "op_type": "MatMulNBits",
                "domain": MS_DOMAIN, "output": self.output, "attributes": dict(self.attributes),
                "elements": self.elements, "differences": self.differences, "reason": self.reason,
                "first_difference": self.first}


@dataclass(frozen=True)
class AuditReport:
    """The result of :func:`audit`.  ``ran``: the model was run in onnxruntime (``inputs`` says on
    what); ``departures``: the nodes where onnxruntime's output differs from the spec's;
    ``confirmed``: quantspec's ``compat="onnxruntime"`` gave onnxruntime's bytes at every node run;
    ``matmul_nbits``: the MatMulNBits audits (``nbits_departures``: those where onnxruntime's weight
    differs from the operator's dequantization); ``not_audited``: the quantization nodes not computed,
    with the reason; ``ok``: run, confirmed, and no departure of either kind."""

    nodes: tuple[NodeAudit, ...]
    model: str | None = None
    opset: int | None = None
    ran: bool = False
    inputs: str = "none"
    onnxruntime: str | None = None
    notes: tuple[str, ...] = ()
    matmul_nbits: tuple[NBitsAudit, ...] = ()
    #: the quantized nodes that were not audited, each described with the reason
    not_audited: tuple[str, ...] = ()

    @property
    def departures(self) -> tuple[NodeAudit, ...]:
        return tuple(n for n in self.nodes if n.onnxruntime_vs_spec)

    @property
    def nbits_departures(self) -> tuple[NBitsAudit, ...]:
        return tuple(n for n in self.matmul_nbits if n.differences)

    @property
    def audited(self) -> int:
        """The nodes whose outputs were computed by onnxruntime and compared."""
        return sum(n.ran for n in self.nodes) + sum(n.ran for n in self.matmul_nbits)

    @property
    def confirmed(self) -> bool:
        return all(not n.onnxruntime_vs_compat for n in self.nodes) and not any(
            "onnxruntime" in n.errors and n.ran for n in self.nodes)

    @property
    def ok(self) -> bool:
        return self.ran and self.confirmed and not self.departures and not self.nbits_departures

    def node(self, index_or_name: int | str, graph: str = "") -> NodeAudit:
        """A node's audit by its index (in ``graph``) or its name."""
        for n in self.nodes:
            if (n.node_index == index_or_name and n.graph == graph) or (n.node_name and n.node_name == index_or_name):
                return n
        raise InvalidArgumentError("node", "is not a QuantizeLinear / DequantizeLinear node of the model", index_or_name)

    def to_json(self) -> dict[str, Any]:
        keys = sorted({r.key for n in self.nodes for r in n.risks if r.key})
        return {"model": self.model, "opset": self.opset, "ran": self.ran, "inputs": self.inputs,
                "onnxruntime": self.onnxruntime, "ok": self.ok, "confirmed": self.confirmed,
                "notes": list(self.notes), "nodes": [n.to_json() for n in self.nodes],
                "matmul_nbits": [n.to_json() for n in self.matmul_nbits], "not_audited": list(self.not_audited),
                "summary": {"nodes": len(self.nodes), "run": sum(n.ran for n in self.nodes),
                            "matmul_nbits": len(self.matmul_nbits),
                            "matmul_nbits_run": sum(n.ran for n in self.matmul_nbits),
                            "departures": len(self.departures),
                            "elements_onnxruntime_vs_spec": sum(n.onnxruntime_vs_spec or 0 for n in self.nodes),
                            "elements_reference_vs_spec": sum(n.reference_vs_spec or 0 for n in self.nodes),
                            "divergences": keys}}

    def json(self, **kwargs) -> str:
        return json.dumps(self.to_json(), **kwargs)

    def render(self) -> str:
        head = self.model or "model"
        out = [f"{head}: {len(self.nodes)} QuantizeLinear/DequantizeLinear node(s)"
               + (f", {len(self.matmul_nbits)} MatMulNBits node(s)" if self.matmul_nbits else "")
               + f", opset {self.opset}"]
        if self.ran:
            out.append(f"run by onnxruntime {self.onnxruntime} (graph optimizations off) on {self.inputs}")
            elements = sum(n.onnxruntime_vs_spec or 0 for n in self.nodes)
            if self.departures:
                out.append(f"onnxruntime departed from the spec at {len(self.departures)} node(s), {elements} element(s)")
            elif not self.not_audited:
                out.append("onnxruntime computed every node as the spec does")
            else:
                k = len(self.not_audited)
                out.append(f"onnxruntime computed the {self.audited} audited node(s) as the spec does ({k} quantized "
                           f"node{'s' if k > 1 else ''} not audited)")
            if self.nbits_departures:
                k = sum(n.differences or 0 for n in self.nbits_departures)
                out.append(f"onnxruntime's MatMulNBits weight DIFFERED from the operator's dequantization at "
                           f"{len(self.nbits_departures)} node(s), {k} element(s)")
            out.append('quantspec compat="onnxruntime" gave onnxruntime\'s bytes at every node' if self.confirmed
                       else 'quantspec compat="onnxruntime" DIFFERED from onnxruntime (a quantspec bug: please report it)')
        else:
            out.append("static audit (not run)")
        out += [f"note: {n}" for n in self.notes]
        out += [f"not audited: {n}" for n in self.not_audited]
        for n in self.matmul_nbits:
            a = n.attributes
            what = (f"MatMulNBits node {n.node_index} {n.output} (K={a.get('K')}, N={a.get('N')}, bits={a.get('bits')}, "
                    f"block_size={a.get('block_size')}): ")
            if n.ran:
                out.append(what + (f"{n.elements} weight elements, {n.differences} differ from the operator's "
                                   "dequantization" if n.differences else
                                   f"onnxruntime's weight equals the operator's dequantization ({n.elements} elements)"))
                if n.first:
                    out.append(f"  first difference at {tuple(n.first['index'])}: onnxruntime {n.first['onnxruntime']}, "
                               f"spec {n.first['spec']}")
        cols = ("node", "op", "output", "elements", "ort!=spec", "ref!=spec", "ort!=compat", "can diverge")
        rows = []
        for n in self.nodes:
            node = (f"{n.graph}:" if n.graph else "") + str(n.node_index)
            op = ("ms:" if n.domain == MS_DOMAIN else "") + ("Q" if n.op_type == "QuantizeLinear" else "DQ")
            keys = ", ".join(dict.fromkeys(r.key or "no-kernel" for r in n.risks)) or "-"
            rows.append((node, op, _clip(n.output, 32), _num(n.elements), _num(n.onnxruntime_vs_spec),
                         _num(n.reference_vs_spec), _num(n.onnxruntime_vs_compat), keys))
        if rows:
            widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
            out += ["", "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip(),
                    "  ".join("-" * w for w in widths)]
            out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        details = []
        for n in self.nodes:
            for mode, why in n.errors.items():
                details.append(f"  node {n.node_index} {n.output}: compat={mode!r} refuses it: {why}")
            if n.first:
                f = n.first
                details.append(f"  node {n.node_index} {n.output}: first difference at {tuple(f['index'])}: input "
                               f"{f['x']}, onnxruntime {f['onnxruntime']}, spec {f['spec']}")
        risks: dict[str, list] = {}
        for n in self.nodes:
            for r in n.risks:
                risks.setdefault(str(r), []).append(n.node_index)
        if risks:
            details.append("  divergences that can apply (docs/onnx.md, 'Divergence table'):")
            for text, where in risks.items():
                details.append(f"    {text} -- node(s) {', '.join(map(str, where))}")
        if details:
            out += ["", "details:", *details]
        return "\n".join(out)

    __str__ = render


def _num(v: int | None) -> str:
    return "-" if v is None else str(v)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


# ------------------------------------------------------------------------------------------------
# one node, as quantspec reads it
# ------------------------------------------------------------------------------------------------

@dataclass
class _QDQ:
    node: Node
    op: str                      # "q" or "dq"
    opset: int | None            # the opset quantspec computes the node at
    version: int | None
    x_type: str | None
    scale_type: str | None
    out_type: str | None
    attrs: dict
    x_shape: tuple | None
    scale: np.ndarray | None     # constant (or run) values
    zero_point: np.ndarray | None
    has_zero_point: bool
    zero_point_type: str | None

    def kwargs(self, compat: str) -> dict:
        a = self.attrs
        kw = dict(axis=a.get("axis", 1), block_size=a.get("block_size", 0), output_dtype=a.get("output_dtype", 0),
                  opset=self.opset, compat=compat)
        if self.op == "q":
            kw.update(saturate=a.get("saturate", 1), precision=a.get("precision", 0))
        return kw


def _qdq_nodes(g: Graph) -> list[Node]:
    return [n for n in g.nodes if n.op_type in ("QuantizeLinear", "DequantizeLinear")
            and n.domain in (*DEFAULT_DOMAINS, MS_DOMAIN)]


def _describe(g: Graph, node: Node, values: dict[str, np.ndarray]) -> _QDQ:
    op = "q" if node.op_type == "QuantizeLinear" else "dq"
    contrib = node.domain == MS_DOMAIN
    version = 21 if contrib else g.version(node, _QDQ_VERSIONS)
    opset = 21 if contrib else g.opset
    attrs = {k: v for k, v in node.attrs.items() if isinstance(v, int) and not isinstance(v, bool)}
    x, s, z = node.input(0), node.input(1), node.input(2)

    def get(name):
        if not name:
            return None
        if g.constant(name) is None:
            return values.get(name)
        if type_name_unknown(g.info(name).type_name or ""):
            return None             # not a type any quantization parameter has: the checker reports it
        return g.value(name)

    xi = g.info(x)
    x_shape = xi.static_shape
    if x in values:
        x_shape = tuple(values[x].shape)
    xt, st = xi.type_name, g.info(s).type_name
    zt = g.info(z).type_name if z else None
    if op == "q":
        od = attrs.get("output_dtype", 0)
        out = zt or (type_name(od) if od else "uint8")
    else:
        od = attrs.get("output_dtype", 0)
        out = type_name(od) if od else st
    return _QDQ(node, op, opset, version, xt, st, out, attrs, x_shape, get(s), get(z), bool(z), zt)


# ------------------------------------------------------------------------------------------------
# static: which divergences can apply
# ------------------------------------------------------------------------------------------------

def _risk(key: str, runtimes: tuple[str, ...], when: str) -> Risk:
    return Risk(key, _TABLE[key].behaviour, runtimes, when)


def _fake(shape: tuple, dtype) -> np.ndarray:
    return np.broadcast_to(np.zeros((), dtype), shape)


def _plan(q: _QDQ, compat: str):
    """A plan of the node on a stand-in x of its shape (None when the shape or a parameter is unknown);
    raises what the plan raises."""
    if q.x_shape is None or q.x_type is None or q.scale is None or q.opset is None:
        return None
    try:
        x = _fake(q.x_shape, qtype(q.x_type).dtype)
    except QuantSpecError:
        return None
    if q.has_zero_point and q.zero_point is None:
        return None
    if q.op == "q":
        return plan_quantize(x, q.scale, q.zero_point, **q.kwargs(compat))
    return plan_dequantize(x, q.scale, q.zero_point, **q.kwargs(compat))


def _plain_positions(q: _QDQ) -> int | None:
    """How many elements onnxruntime quantizes on its plain (non-MLAS) path, where ±inf and huge values
    become qmin: all of them for float16 input, 2-bit outputs and blocks along a non-last axis; the odd
    head and tail element of each slice for 4-bit outputs.  None when the shape is not known."""
    try:
        plan = _plan(q, "onnxruntime")
    except QuantSpecError:
        return None
    if plan is None or math.prod(plan.shape) > _MASK_LIMIT:
        return None
    mask = ort_plain_mask(plan)
    n = math.prod(plan.shape)
    if isinstance(mask, (bool, np.bool_)):
        return n if mask else 0
    return int(np.count_nonzero(mask))


def _negative(values: np.ndarray | None) -> bool:
    return values is not None and bool(np.any(np.asarray(values).astype(np.float64) < 0))


def _q_risks(q: _QDQ) -> list[Risk]:
    """The divergence-table rows this QuantizeLinear may meet.  onnxruntime's rows are those of the
    release quantspec reproduces (the installed one when it is reproduced: :func:`ort_support`)."""
    out: list[Risk] = []
    ort = ort_support()
    xt, st, ot = q.x_type, q.scale_type, q.out_type
    prec = type_name(q.attrs["precision"]) if q.attrs.get("precision") else None
    division = prec or st
    t = qtype(ot) if ot and not type_name_unknown(ot) else None
    if t is None:
        return out
    # does this release divide in the precision P at this operator version, as the spec does?
    in_p = ort.precision_since is not None and (q.version or 0) >= ort.precision_since
    if xt == "float16" and st == "float16" and division == "float16" and not in_p:
        if t.is_int:
            out.append(_risk("f16-quotient", ("onnxruntime",), f"for some inputs: onnxruntime {ort.release} divides "
                             "in float32, the spec and onnx.reference in float16"))
        elif ot in _FLOAT8:
            out.append(_risk("f16-to-float8", ("onnxruntime",), f"for some inputs: onnxruntime {ort.release} rounds "
                             "a float32 quotient once, the spec and onnx.reference a float16 one"))
    if (q.version or 0) >= 23 and xt == "float" and st == "float16" and prec is None:
        if ort.mixed_types and in_p:
            out.append(_risk("f32-x-f16-scale", ("reference",), "for some inputs onnx.reference divides "
                             "in float32 (the spec and onnxruntime in float16)"))
        else:
            out.append(_risk("f32-x-f16-scale", ("reference", "onnxruntime"), "for some inputs onnx.reference "
                             f"divides in float32 (the spec in float16); onnxruntime {ort.release} refuses x and "
                             "scale of different types"))
    if prec is not None and prec != "float":
        if not in_p:
            out.append(_risk("precision-attribute", ("onnxruntime",), f"for some inputs: onnxruntime {ort.release} "
                             f"ignores precision={prec} and divides in float32"))
        elif prec not in ort.precisions:
            out.append(_risk("precision-attribute", ("onnxruntime",), f"onnxruntime {ort.release} refuses "
                             f"precision={prec}"))
    if t.is_int and xt in _FLOATS:
        plain = _plain_positions(q) if ort.plain_loop else 0
        # float16 input: onnxruntime's departure is the table's own row, f16-inf, below
        ort_plain = xt != "float16" and (plain is None or plain > 0)
        who = ("reference", "onnxruntime") if ort_plain else ("reference",)
        note = "" if not ort_plain else (
            " (onnxruntime: on its plain path" + ("" if plain is None else f", {plain} element(s)") + ")")
        out.append(_risk("inf-to-int", who, f"for ±inf inputs{note}"))
        out.append(_risk("huge-to-int", who, f"for |x / scale| >= 2^31{note}"))
        f16_plain = xt == "float16" and ort.plain_loop
        if _negative(q.zero_point) or (q.has_zero_point and q.zero_point is None and t.signed):
            nan_who = ("reference", "onnxruntime") if ort_plain or f16_plain else ("reference",)
            out.append(_risk("nan-negative-zp", nan_who, "for NaN inputs (a negative zero point)"))
        if xt == "float16":
            out.append(_risk("f16-inf", ("reference", "onnxruntime") if f16_plain else ("reference",),
                             "for ±inf and huge float16 inputs"))
        elif t.bits == 4 and (plain is None or plain > 0):
            where = "the odd head or tail element of each slice" if plain is None else \
                f"{plain} position(s): the odd head or tail element of each slice"
            out.append(_risk("int4-position", ("onnxruntime",), f"for ±inf and huge inputs at {where}"))
    saturate = q.attrs.get("saturate", 1)
    if ot == "float8e4m3fn" and saturate == 0:
        out.append(_risk("e4m3fn-sat0-480", ("onnxruntime",), "for 480 <= |x / scale| < 496"))
    if ot == "float8e5m2":
        if saturate == 0:
            out.append(_risk("e5m2-sat0-61440", ("onnxruntime",), "for 61440 <= |x / scale| < 65536"))
        out.append(_risk("e5m2-nan", ("onnxruntime",), "for NaN inputs (another NaN encoding)"))
    if ot == "float4e2m1":
        if q.has_zero_point:
            out.append(_risk("float4-zero-point", ("onnxruntime",), "onnxruntime has no float4 kernel"))
        out.append(_risk("float4-nan", ("reference",), "for NaN inputs"))
    if ot in ("float6e2m3", "float6e3m2"):
        out.append(_risk("float6-nan", ("reference",), "for NaN inputs"))
    if xt == "int32":
        out.append(_risk("int32-x", ("reference", "onnxruntime"), "onnx.reference divides in float64 (for |x| > "
                         "2^24); onnxruntime has no int32 QuantizeLinear"))
    if xt == "bfloat16":
        out.append(_risk("bfloat16-input", ("onnxruntime",), "onnxruntime has no bfloat16 kernels"))
    return out


def type_name_unknown(name: str) -> bool:
    try:
        qtype(name)
        return False
    except QuantSpecError:
        return True


def _dq_risks(q: _QDQ) -> list[Risk]:
    out: list[Risk] = []
    if q.x_type == "int32" and q.has_zero_point and (q.zero_point is None or np.any(np.asarray(q.zero_point) != 0)):
        out.append(_risk("dq-int32-zero-point", ("reference", "onnxruntime"), "the spec refuses it; onnx.reference "
                         "and onnxruntime disagree for |x| > 2^24 and near ±2^31"))
    if q.scale_type == "float8e8m0" and not q.attrs.get("output_dtype"):
        out.append(_risk("dq-e8m0-no-output-dtype", ("reference",), "the spec refuses it; onnx.reference outputs "
                         "float8e8m0"))
    if q.version is not None and q.version < 19 and q.node.domain != MS_DOMAIN:
        out.append(_risk("dq-before-19", ("reference",), "onnx.reference has no DequantizeLinear before version 19"))
    if q.scale_type == "bfloat16" or q.out_type == "bfloat16":
        out.append(_risk("bfloat16-input", ("onnxruntime",), "onnxruntime has no bfloat16 kernels"))
    return out


def _shape_risks(q: _QDQ) -> list[Risk]:
    """Parameters the spec refuses and onnx.reference accepts."""
    if q.x_shape is None or q.scale is None or (q.has_zero_point and q.zero_point is None) or q.version is None:
        return []
    scale, zp = np.asarray(q.scale), None if q.zero_point is None else np.asarray(q.zero_point)
    names = ("y_scale", "y_zero_point") if q.op == "q" else ("x_scale", "x_zero_point")
    axis, block = q.attrs.get("axis", 1), q.attrs.get("block_size", 0)

    def accepts(compat):
        try:
            resolve_granularity(q.x_shape, scale, zp, axis, block, compat, q.version, *names)
            return True
        except QuantSpecError:
            return False

    if accepts("spec") or not accepts("reference"):
        return []
    if zp is not None and scale.ndim == 1 and scale.size > 1 and zp.size == 1:
        return [_risk("per-axis-scalar-zp", ("reference",), "the spec refuses it; onnx.reference broadcasts the zero "
                      "point")]
    if block:
        return [_risk("blocked-out-of-range", ("reference",), "the spec refuses it; onnx.reference repeats and cuts")]
    if scale.size == 1 and scale.ndim >= 2:
        return [_risk("size1-rank2-scale", ("reference",), "the spec refuses it; onnx.reference takes it as per "
                      "tensor")]
    return []


def _kernel_risk(q: _QDQ, risks: list[Risk]) -> list[Risk]:
    """onnxruntime has no kernel for the node (and no table row says so already)."""
    if any("onnxruntime" in r.runtimes and ("kernel" in r.when or "refuses" in r.when) for r in risks):
        return []
    try:
        _plan(q, "onnxruntime")
    except QuantSpecError as e:
        if type(e).__name__ == "RuntimeUnsupportedError":
            return [Risk(None, "onnxruntime cannot run the node", ("onnxruntime",), str(e))]
    return []


def _risks(q: _QDQ) -> tuple[Risk, ...]:
    if q.x_type is None or q.scale_type is None:
        return ()
    out = _q_risks(q) if q.op == "q" else _dq_risks(q)
    out += _shape_risks(q)
    out += _kernel_risk(q, out)
    return tuple(out)


# ------------------------------------------------------------------------------------------------
# dynamic: run, recompute, count
# ------------------------------------------------------------------------------------------------

def _bits(a: np.ndarray) -> np.ndarray:
    """Element values comparable for equality: integers as values, floats as bit patterns (NaN
    payloads and -0.0 count)."""
    a = np.ascontiguousarray(a)
    t = qtype(a.dtype)
    if t.is_int or t.kind == "bool":
        return a.astype(np.int64)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


def _count(a: np.ndarray, b: np.ndarray) -> tuple[int, np.ndarray | None]:
    if a.shape != b.shape or a.dtype != b.dtype:
        return max(a.size, b.size), None
    differ = _bits(a) != _bits(b)
    return int(np.count_nonzero(differ)), differ


def _show(v: Any) -> Any:
    v = np.asarray(v)
    t = qtype(v.dtype)
    if t.is_int:
        return int(v)
    if t.bits <= 8:
        return f"{float(v.astype(np.float32))!r} (0x{int(v.view(np.uint8)):02x})"
    return repr(float(v.astype(np.float64)))


def _recompute(q: _QDQ, x: np.ndarray, ort_y: np.ndarray) -> dict[str, Any]:
    from ..onnx import dequantize_linear, quantize_linear

    results, errors = {}, {}
    fn = quantize_linear if q.op == "q" else dequantize_linear
    for mode in MODES:
        try:
            results[mode] = fn(x, q.scale, q.zero_point, **q.kwargs(mode))
        except QuantSpecError as e:
            errors[mode] = f"{type(e).__name__}: {e}"
    out: dict[str, Any] = {"elements": int(ort_y.size), "errors": errors}
    if "spec" in results:
        n, differ = _count(ort_y, results["spec"])
        out["onnxruntime_vs_spec"] = n
        if n and differ is not None:
            idx = np.unravel_index(int(np.argmax(differ.reshape(-1))), differ.shape)
            out["first"] = {"index": [int(i) for i in idx], "x": _show(x[idx]), "onnxruntime": _show(ort_y[idx]),
                            "spec": _show(results["spec"][idx])}
        if "reference" in results:
            out["reference_vs_spec"] = _count(results["reference"], results["spec"])[0]
    if "onnxruntime" in results:
        out["onnxruntime_vs_compat"] = _count(ort_y, results["onnxruntime"])[0]
    return out


def _random_feeds(g: Graph, seed: int) -> tuple[dict[str, np.ndarray], list[str]]:
    rng = np.random.default_rng(seed)
    feeds, notes = {}, []
    for name in g.inputs:
        info = g.info(name)
        if info.elem_type is None or info.shape is None:
            raise InvalidArgumentError("inputs", "are needed: the model's input has no declared type and shape for "
                                       "random values", name)
        shape = tuple(1 if d is None else d for d in info.shape)
        if None in info.shape:
            notes.append(f"input {name!r}: its unknown dimensions were set to 1 for the random values")
        try:
            t = qtype(info.elem_type)
        except QuantSpecError:
            raise InvalidArgumentError("inputs", "are needed: quantspec makes random values for numeric inputs only",
                                       f"{name!r} of type {info.type_name}") from None
        if t.kind == "bool":
            feeds[name] = rng.integers(0, 2, shape).astype(bool)
        elif t.is_int:
            lo, hi = (int(t.qmin), int(t.qmax)) if t.bits <= 32 else (-1000, 1000)
            feeds[name] = rng.integers(lo, hi, shape, endpoint=True).astype(t.dtype)
        else:
            feeds[name] = rng.standard_normal(shape).astype(np.float32).astype(t.dtype)
    return feeds, notes


def _given_feeds(g: Graph, inputs: Any) -> dict[str, np.ndarray]:
    if isinstance(inputs, np.ndarray):
        inputs = [inputs]
    if isinstance(inputs, (list, tuple)):
        if len(inputs) != len(g.inputs):
            raise InvalidArgumentError("inputs", f"must hold one array per model input ({len(g.inputs)}: "
                                       f"{', '.join(g.inputs)})", f"{len(inputs)} arrays")
        inputs = dict(zip(g.inputs, inputs))
    if not isinstance(inputs, dict):
        raise InvalidArgumentError("inputs", "must be a dict of arrays by input name, a list in model order, or one "
                                   "array", type(inputs).__name__)
    unknown = sorted(set(inputs) - set(g.inputs))
    missing = [n for n in g.inputs if n not in inputs]
    if unknown or missing:
        raise InvalidArgumentError("inputs", "must name the model's inputs: " + ", ".join(g.inputs),
                                   detail=(f"unknown: {', '.join(unknown)}. " if unknown else "")
                                   + (f"missing: {', '.join(missing)}" if missing else ""))
    out = {}
    for name in g.inputs:
        a = np.asarray(inputs[name])
        info = g.info(name)
        if info.elem_type is not None:
            want = qtype(info.elem_type) if not type_name_unknown(type_name(info.elem_type)) else None
            if want is not None and a.dtype != want.dtype:
                raise InvalidArgumentError("inputs", f"input {name!r} must be {want.name}", str(a.dtype))
        out[name] = a
    return out


def _constant_node(g: Graph, n: Node) -> bool:
    """All the node's inputs are constants (a DequantizeLinear of a weight)."""
    return all(g.constant(i) is not None for i in n.inputs if i)


def audit(path_or_model: Any, inputs: Any = None, *, run: bool = True, seed: int = 0) -> AuditReport:
    """Audit every QuantizeLinear / DequantizeLinear node of an ONNX model (a path, its bytes, an
    ``onnx.ModelProto``).

    ``inputs``: the model's inputs (a dict by name, a list in model order, or one array); None runs
    it on seeded random inputs (``seed``): standard normal floats, integers over their range.
    ``run=False`` gives the static audit alone (no onnxruntime needed).  A node whose inputs are all
    constants (a weight's DequantizeLinear) is run alone in onnxruntime, one at a time, so a
    weight-only quantized model needs no inputs and never holds more than one dequantized weight.
    See :class:`AuditReport`.
    """
    g = read_graph(path_or_model)
    nodes = _qdq_nodes(g)
    constant_nodes = "the nodes' constant inputs" if nodes or any(
        n.op_type == "MatMulNBits" and n.domain == MS_DOMAIN and not n.graph for n in g.nodes) else \
        "nothing (no QuantizeLinear / DequantizeLinear node)"
    values: dict[str, np.ndarray] = {}
    notes: list[str] = []
    ran, described, version = False, "none", None
    dynamic = [n for n in nodes if not n.graph and not _constant_node(g, n)]
    if run:
        from .ortrun import ort_module, run_exposed

        version = ort_module().__version__
        ran = True
        if dynamic:
            if inputs is None:
                feeds, feed_notes = _random_feeds(g, seed)
                notes += feed_notes
                described = f"random inputs (seed {seed})"
            else:
                feeds = _given_feeds(g, inputs)
                described = "the given inputs"
            wanted = []
            for n in dynamic:
                wanted += [i for i in n.inputs[:3] if i and g.constant(i) is None]
                wanted += [o for o in n.outputs[:1] if o]
            wanted = [w for w in dict.fromkeys(wanted) if w not in feeds]
            values = {**feeds, **run_exposed(g, wanted, feeds, notes)}
        elif inputs is not None:
            # the nodes are all on constants, but the model is what the user runs: it runs whole on the inputs
            feeds = _given_feeds(g, inputs)
            run_exposed(g, [o.name for o in g.model.proto.graph.output], feeds, notes)
            notes.append("the whole model ran on the given inputs in onnxruntime")
            described = constant_nodes
        else:
            run_exposed(g, [], {}, notes)     # the whole model must load in onnxruntime, as a user's session does
            described = constant_nodes
        if any(not n.graph and n not in dynamic for n in nodes):
            notes.append("the nodes whose inputs are all constants (weights) ran alone in onnxruntime, one at a time")
        if any(n.graph for n in nodes):
            notes.append("nodes inside subgraphs are audited statically only")
    elements = sum(int(values[o].size) for n in dynamic for o in n.outputs[:1] if o in values) + \
        sum(math.prod(g.info(n.input(0)).static_shape or (1 << 30,)) for n in nodes if n not in dynamic and not n.graph)
    # a small model: the numpy reference kernels (the same bytes) finish before numba would have loaded
    with jit.reference_only() if jit.prefer_reference(elements) else contextlib.nullcontext():
        audits = [_audit_node(g, n, values, ran and not n.graph, notes) for n in nodes]
    nbits_audits, not_audited = _audit_others(g, ran, notes)
    not_audited = [f"{a.op_type} node {a.node_index} {a.output}: not run ("
                   + ("inside a subgraph" if a.graph else "see its errors") + ")"
                   for a in audits if ran and not a.ran] + not_audited
    path = None if g.model.path is None else str(g.model.path)
    return AuditReport(nodes=tuple(audits), model=path, opset=g.opset, ran=ran, inputs=described,
                       onnxruntime=version, notes=tuple(notes), matmul_nbits=tuple(nbits_audits),
                       not_audited=tuple(not_audited))


# ------------------------------------------------------------------------------------------------
# com.microsoft MatMulNBits, and the quantized operators the audit does not compute
# ------------------------------------------------------------------------------------------------

#: bytes of identity rows fed to onnxruntime at a time
_IDENTITY_BYTES = 16 << 20


def _nbits_refusal(g: Graph, n: Node) -> str | None:
    """Why the audit cannot compute this MatMulNBits node, or None."""
    a = n.attrs
    for key in ("K", "N", "block_size"):
        if not isinstance(a.get(key), int) or isinstance(a.get(key), bool) or a[key] <= 0:
            return f"its attribute {key} is missing or not a positive integer"
    bits = a.get("bits", 4)
    if bits not in (2, 4, 8) or a["block_size"] * bits % 8:
        return f"bits {bits!r} with block_size {a['block_size']}"
    if n.graph:
        return "inside a subgraph"
    if n.input(4):
        return "it has g_idx (act-order), which the audit does not compute"
    t1 = g.info(n.input(2)).type_name       # T1: A's type, the scales' type
    if t1 != "float":
        return f"its scales (and A) are {t1 or 'of unknown type'} (the audit computes float32 nodes)"
    for k, role in ((1, "B"), (2, "scales")):
        if g.constant(n.input(k)) is None:
            return f"its {role} is not a constant"
    z = n.input(3)
    if z and (g.constant(z) is None or g.info(z).type_name != "uint8"):
        return "its zero points are not constant packed uint8"
    return None


def _audit_nbits(g: Graph, n: Node, run: bool, notes: list[str]) -> NBitsAudit:
    from .nbits import dequantize

    a = n.attrs
    attrs = {k: a[k] for k in ("K", "N", "bits", "block_size", "accuracy_level") if k in a}
    out = n.outputs[0] if n.outputs else ""
    why = _nbits_refusal(g, n)
    if why is None and not run:
        why = "static audit (not run)"
    if why is not None:
        return NBitsAudit(n.index, out, n.name or None, attrs, reason=why)
    K, N, bits, block = a["K"], a["N"], a.get("bits", 4), a["block_size"]
    try:
        z = n.input(3)
        spec = dequantize(g.value(n.input(1)), g.value(n.input(2)), g.value(z) if z else None, K, N, bits, block)
        ort_w = _nbits_weight(g, n, notes)
    except QuantSpecError as e:
        return NBitsAudit(n.index, out, n.name or None, attrs, reason=f"{type(e).__name__}: {e}")
    # a zero's sign does not survive the product (1 * -0 + 0 * w is +0): values are compared as numbers
    diff = ~((ort_w == spec) | (np.isnan(ort_w) & np.isnan(spec)))
    count = int(diff.sum())
    first = None
    if count:
        i = np.unravel_index(int(np.argmax(diff.reshape(-1))), diff.shape)
        first = {"index": [int(v) for v in i], "onnxruntime": float(ort_w[i]), "spec": float(spec[i])}
    return NBitsAudit(n.index, out, n.name or None, attrs, elements=int(spec.size), differences=count, first=first)


def _nbits_weight(g: Graph, n: Node, notes: list[str]) -> np.ndarray:
    """The weight ``[K, N]`` onnxruntime multiplies by at MatMulNBits node ``n``: the node alone (no
    bias; no accuracy_level, whose int8 arithmetic would round the identity) run on rows of the
    identity matrix."""
    from .ortrun import _fetch, _load, ort_module

    onnx = g._onnx
    ort = ort_module()
    K, N = n.attrs["K"], n.attrs["N"]
    proto = onnx.NodeProto()
    proto.CopyFrom(n.proto)
    del proto.input[4:]
    kept = [x for x in proto.attribute if x.name != "accuracy_level"]
    del proto.attribute[:]
    proto.attribute.extend(kept)
    proto.input[0], proto.output[0] = "A", "Y"
    inits = []
    for name in dict.fromkeys(i for i in proto.input[1:] if i):
        t = g.constant(name)
        if t.data_location == onnx.TensorProto.EXTERNAL:
            t = onnx.numpy_helper.from_array(np.asarray(g.model.values(t, mapped=False)), name)
        inits.append(t)
    graph = onnx.helper.make_graph([proto], "matmulnbits", [onnx.helper.make_tensor_value_info("A", onnx.TensorProto.FLOAT,
                                                                                              [None, K])],
                                   [onnx.helper.make_tensor_value_info("Y", onnx.TensorProto.FLOAT, None)],
                                   initializer=inits)
    model = onnx.helper.make_model(graph, opset_imports=list(g.model.proto.opset_import))
    model.ir_version = g.model.proto.ir_version
    sess = _load(ort, model, None, notes)
    out = np.empty((K, N), np.float32)
    step = max(1, min(K, _IDENTITY_BYTES // (4 * K)))
    for k0 in range(0, K, step):
        m = min(step, K - k0)
        eye = np.zeros((m, K), np.float32)
        eye[np.arange(m), k0 + np.arange(m)] = 1
        out[k0:k0 + m] = _fetch(ort, sess, ["Y"], {"A": eye})["Y"]
    return out


def _audit_others(g: Graph, run: bool, notes: list[str]) -> tuple[list[NBitsAudit], list[str]]:
    """The MatMulNBits audits, and the quantized nodes not audited (with the reason)."""
    from . import qops

    audits, skipped = [], []
    for n in g.nodes:
        if n.op_type == "MatMulNBits" and n.domain == MS_DOMAIN:
            a = _audit_nbits(g, n, run, notes)
            audits.append(a)
            if run and not a.ran:
                skipped.append(f"MatMulNBits node {n.index} {a.output}: {a.reason}")
        elif run and n.op_type not in ("QuantizeLinear", "DequantizeLinear") and qops.find(n.op_type, n.domain):
            where = f" in {n.graph}" if n.graph else ""
            skipped.append(f"{n.op_type} node {n.index}{where} {n.outputs[0] if n.outputs else ''}: the audit computes "
                           "QuantizeLinear, DequantizeLinear and MatMulNBits nodes only")
    return audits, skipped


def _audit_node(g: Graph, n: Node, values: dict[str, np.ndarray], run: bool, notes: list[str]) -> NodeAudit:
    """One node: its risks, and, when it runs, its counts."""
    out_name = n.outputs[0] if n.outputs else ""
    counts: dict[str, Any] = {}
    if run and out_name and _constant_node(g, n):
        from .ortrun import run_node

        try:
            values = {out_name: run_node(g, n, notes)}
        except QuantSpecError as e:
            counts["errors"] = {"onnxruntime (run alone)": f"{type(e).__name__}: {e}"}
            values = {}
    q = _describe(g, n, values)
    risks = _risks(q)
    x = values.get(n.input(0))
    if x is None and g.constant(n.input(0)) is not None and not type_name_unknown(g.info(n.input(0)).type_name or ""):
        x = g.value(n.input(0))
    if run and x is not None and out_name in values and q.scale is not None \
            and not (q.has_zero_point and q.zero_point is None):
        counts = _recompute(q, np.asarray(x), values[out_name])
    return NodeAudit(node_index=n.index, op_type=n.op_type, output=out_name, node_name=n.name or None,
                     domain=n.domain, graph=n.graph, risks=risks, elements=counts.get("elements"),
                     onnxruntime_vs_spec=counts.get("onnxruntime_vs_spec"),
                     reference_vs_spec=counts.get("reference_vs_spec"),
                     onnxruntime_vs_compat=counts.get("onnxruntime_vs_compat"),
                     errors=counts.get("errors", {}), first=counts.get("first"))
