"""Checking an ONNX model's quantization against the operators' rules: :func:`check_model`.

Every QuantizeLinear and DequantizeLinear node (default domain and onnxruntime's com.microsoft
domain), and the quantization parameters of QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger
and com.microsoft MatMulNBits, is checked against the operator version in force for the model's
opset:

- types and attributes: read from the opset table (:mod:`quantspec.onnx.opsets`) and the table of
  the other operators (:mod:`quantspec.onnxmodels.qops`) — never restated here;
- the shapes of scales and zero points (per tensor, per axis, blocked; ``axis`` and ``block_size``):
  the very function that validates :func:`quantspec.onnx.quantize_linear`'s arguments
  (:mod:`quantspec.onnx.plan`) is run on the shapes, so the checker and the kernels cannot disagree;
- the values of constant parameters: finite scales, not 0 where the operator divides by them; zero
  points in their type's range (a value stored out of range in ``int32_data`` is silently wrapped
  when read), 0 for int32 and float8;
- DequantizeLinear -> op -> QuantizeLinear around an operator that only moves values: the same scale
  and zero point on both sides (:data:`quantspec.onnxmodels.qops.SAME_PARAMS_OPS`).

Tensor types and shapes come from the model and from onnx shape inference
(:mod:`quantspec.onnxmodels.graph`); a rule that needs a fact nobody knows (a dynamic shape, a scale
computed at run time) is not evaluated rather than guessed.  Value rules (``scale``,
``zero-point-range``) are reported once per tensor, at the first node that uses it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtypes import qtype
from ..errors import QuantSpecError
from ..onnx import opsets
from ..onnx.plan import resolve_granularity
from . import qops
from .graph import DEFAULT_DOMAINS, MS_DOMAIN, Graph, Node, read_graph
from .io import type_name
from .report import RULES, CheckReport, Violation

__all__ = ["check_model", "RULES", "QDQ_VERSIONS"]

QDQ_VERSIONS = tuple(r.version for r in opsets.VERSIONS)
_OPNAMES = {"q": "QuantizeLinear", "dq": "DequantizeLinear"}
_INPUT_NAMES = {"q": ("x", "y_scale", "y_zero_point"), "dq": ("x", "x_scale", "x_zero_point")}
_VALUE_RULES = frozenset({"scale", "zero-point-range"})
_FLOAT8 = frozenset({"float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"})
#: every type any quantization operator takes as a scale (values of another type are not read)
_SCALES = frozenset({"float", "float16", "bfloat16", "int32", "float8e8m0"})


class _Collector:
    def __init__(self) -> None:
        self.out: list[Violation] = []
        self.seen: set[tuple[str, str]] = set()

    def add(self, rule: str, node: Node | None, tensor: str | None, message: str, *, position: str = "",
            expected: Any = None, found: Any = None) -> None:
        assert rule in RULES, rule
        if tensor and rule in _VALUE_RULES:
            if (rule, tensor) in self.seen:
                return
            self.seen.add((rule, tensor))
        self.out.append(Violation(
            rule=rule, node_index=None if node is None else node.index, tensor=tensor or None, message=message,
            node_name=None if node is None else (node.name or None), op_type=None if node is None else node.op_type,
            domain="" if node is None else node.domain, graph="" if node is None else node.graph,
            position=position, expected=expected, found=found))


def check_model(path_or_model: Any) -> CheckReport:
    """Check an ONNX model (a path, its bytes, an ``onnx.ModelProto``) against the rules of its
    quantization operators.  Raises :class:`quantspec.errors.ModelError` when the model cannot be
    read."""
    g = read_graph(path_or_model)
    c = _Collector()
    if g.opset is None:
        c.add("opset", None, None, "the model imports no default-domain (ai.onnx) opset", expected="an opset import",
              found="none")
    checked = 0
    op_types: set[str] = set()
    for node in g.nodes:
        check = _dispatch(node)
        if check is None:
            continue
        checked += 1
        op_types.add(node.op_type)
        check(c, g, node)
    _same_params(c, g)
    path = None if g.model.path is None else str(g.model.path)
    return CheckReport(violations=tuple(c.out), nodes=checked, opset=g.opset, model=path,
                       op_types=tuple(sorted(op_types)))


def _dispatch(node: Node):
    op, domain = node.op_type, node.domain
    if op in ("QuantizeLinear", "DequantizeLinear") and domain in (*DEFAULT_DOMAINS, MS_DOMAIN):
        kind = "q" if op == "QuantizeLinear" else "dq"
        contrib = domain == MS_DOMAIN
        return lambda c, g, n: _check_qdq(c, g, n, kind, contrib)
    if op == "MatMulNBits" and domain == MS_DOMAIN:
        return _check_nbits
    row = qops.find(op, domain)
    if row is not None:
        return lambda c, g, n: _check_qop(c, g, n, row)
    return None


# ------------------------------------------------------------------------------------------------
# QuantizeLinear / DequantizeLinear
# ------------------------------------------------------------------------------------------------

def _position(k: int, names: tuple[str, ...]) -> str:
    return f"input {k} ({names[k]})" if k < len(names) else f"input {k}"


def _check_qdq(c: _Collector, g: Graph, node: Node, op: str, contrib: bool) -> None:
    opname = _OPNAMES[op]
    names = _INPUT_NAMES[op]
    if contrib:
        row, version, label = qops.CONTRIB_QDQ, 13, f"com.microsoft {opname}"
        if MS_DOMAIN not in g.opsets:
            c.add("op-version", node, None, "the model does not import the com.microsoft domain its node uses",
                  expected="an opset import for com.microsoft", found="none")
    else:
        version = g.version(node, QDQ_VERSIONS)
        if version is None:
            if g.opset is not None:
                c.add("op-version", node, None, f"{opname} does not exist before opset {QDQ_VERSIONS[0]}",
                      expected=f">= {QDQ_VERSIONS[0]}", found=g.opset)
            return
        row = opsets.row(version)
        label = f"{opname}-{version}"

    x, s, z = node.input(0), node.input(1), node.input(2)
    if not x or not s:
        missing = names[0] if not x else names[1]
        c.add("inputs", node, None, f"{label} needs its input {missing}", position=f"input {names.index(missing)}",
              expected=f"{names[0]}, {names[1]} and an optional {names[2]}", found=f"{len(node.inputs)} inputs")
        return
    if len(node.inputs) > 3:
        c.add("inputs", node, None, f"{label} takes at most 3 inputs", expected=3, found=len(node.inputs))
    _output(c, node, label)

    attrs = _attributes(c, g, node, label, row.q_attrs if op == "q" else row.dq_attrs, op, contrib)
    axis, block = attrs.get("axis", 1), attrs.get("block_size", 0)
    od = attrs.get("output_dtype", 0)
    odn = type_name(od) if od else None

    xi, si = g.info(x), g.info(s)
    zi = g.info(z) if z else None
    xt, st, zt = xi.type_name, si.type_name, (zi.type_name if zi else None)
    if op == "q":
        _type(c, node, x, _position(0, names), xt, row.q_x, f"{label} quantizes x")
        _type(c, node, s, _position(1, names), st, row.q_scale, f"{label} takes y_scale")
        if row.q_scale_is_x_type and xt and st and st != xt and st in row.q_scale:
            c.add("dtype", node, s, f"y_scale must have x's type in {label} (x and y_scale share one type "
                  "parameter before opset 23)", position=_position(1, names), expected=xt, found=st)
        if odn is not None and odn not in row.q_out:
            c.add("output-dtype", node, None, f"output_dtype must be an output type of {label}",
                  position="attribute output_dtype", expected=row.q_out, found=odn)
        if z:
            _type(c, node, z, _position(2, names), zt, row.q_out, f"{label} outputs (the zero point's type)")
        if odn is not None and zt is not None and odn != zt:
            c.add("output-dtype", node, z, "output_dtype must equal the type of y_zero_point when both are given",
                  position="attribute output_dtype", expected=zt, found=odn)
        out = odn or zt or "uint8"
        if "saturate" in attrs and attrs["saturate"] == 0 and out not in _FLOAT8:
            c.add("saturate", node, None, f"saturate=0 has no effect on a {out} output: it applies to float8 only",
                  position="attribute saturate", expected="saturate only with a float8 output",
                  found=f"saturate=0 with {out}")
        prec = attrs.get("precision", 0)
        if prec:
            pn = type_name(prec)
            if pn not in row.precision:
                c.add("precision", node, None, f"precision must be one of {label}'s precision types",
                      position="attribute precision", expected=row.precision, found=pn)
    else:
        _type(c, node, x, _position(0, names), xt, row.dq_x, f"{label} dequantizes x")
        if z and xt and zt and zt != xt:
            c.add("zero-point-type", node, z, "x_zero_point must have x's type", position=_position(2, names),
                  expected=xt, found=zt)
        _type(c, node, s, _position(1, names), st, row.dq_scale, f"{label} takes x_scale")
        if odn is not None and odn not in row.dq_out:
            c.add("output-dtype", node, None, f"output_dtype must be an output type of {label}",
                  position="attribute output_dtype", expected=row.dq_out, found=odn)
        if odn is None and st is not None and st in row.dq_scale and st not in row.dq_out:
            c.add("output-dtype", node, s, f"a {st} scale needs output_dtype: without it the output takes the "
                  "scale's type, which DequantizeLinear cannot output", position="attribute output_dtype",
                  expected=row.dq_out, found=f"no output_dtype ({st} output)")

    if contrib and "axis" not in attrs and si.shape is not None and not _scalar(si.shape):
        c.add("scale-shape", node, s, f"{label} without an axis attribute is per tensor: {names[1]} must be a "
              "scalar", position=_position(1, names), expected="()", found=si.shape)
    elif si.shape is not None:
        _shapes(c, node, xi.shape, si.shape, zi.shape if zi else None, axis, block, version, names, s, z)

    sv = g.value(s) if st in (row.q_scale if op == "q" else row.dq_scale) else None   # a scale of a valid type
    if sv is not None:
        _scale_values(c, node, s, _position(1, names), sv, divides=op == "q")
    if z:
        _zero_point_values(c, g, node, z, _position(2, names), op)


def _output(c: _Collector, node: Node, label: str) -> None:
    if len(node.outputs) != 1 or not node.outputs[0]:
        c.add("inputs", node, None, f"{label} has one output", position="outputs", expected=1,
              found=len([o for o in node.outputs if o]))


def _attributes(c: _Collector, g: Graph, node: Node, label: str, allowed: tuple[str, ...], op: str,
                contrib: bool) -> dict[str, int]:
    """Check the node's attributes against the version's list; the integer values of the valid ones."""
    out: dict[str, int] = {}
    for a in node.proto.attribute:
        if a.name not in allowed:
            since = opsets.ATTRIBUTE_SINCE.get(a.name, (None, None))[op == "dq"]
            extra = f" (it arrived in opset {since})" if since and not contrib else ""
            c.add("attribute", node, None, f"{label} has no attribute {a.name!r}{extra}", position=f"attribute {a.name}",
                  expected=allowed or "no attributes", found=a.name)
            continue
        value = node.attrs.get(a.name)
        if not isinstance(value, int) or isinstance(value, bool):
            c.add("attribute", node, None, f"{a.name} must be an integer attribute", position=f"attribute {a.name}",
                  expected="INT", found=g._onnx.AttributeProto.AttributeType.Name(a.type))
            continue
        if a.name == "saturate" and value not in (0, 1):
            c.add("attribute", node, None, "saturate must be 0 or 1", position="attribute saturate",
                  expected=(0, 1), found=value)
            continue
        if a.name in ("output_dtype", "precision") and value != 0 and type_name(value).startswith("type "):
            rule = "output-dtype" if a.name == "output_dtype" else "precision"
            c.add(rule, node, None, f"{a.name} must be an ONNX TensorProto data type", position=f"attribute {a.name}",
                  expected="a TensorProto.DataType number", found=value)
            continue
        out[a.name] = value
    return out


def _type(c: _Collector, node: Node, tensor: str, position: str, found: str | None, allowed: tuple[str, ...],
          what: str) -> None:
    if found is not None and found not in allowed:
        c.add("dtype", node, tensor, f"{what} of type " + ", ".join(allowed), position=position, expected=allowed,
              found=found)


def _scalar(shape: tuple) -> bool:
    return len(shape) <= 1 and all(d == 1 for d in shape)


def _fill(x_shape: tuple, s_shape: tuple, axis: int, block: int) -> tuple[int, ...]:
    """x's shape with each unknown dimension replaced by the value the parameters imply, so that a
    shape rule is only broken by what is known."""
    r = len(x_shape)
    a = axis + r if -r <= axis < 0 else axis
    per_tensor = math.prod(s_shape) == 1 and len(s_shape) <= 1
    out = []
    for i, d in enumerate(x_shape):
        if d is not None:
            out.append(d)
        elif per_tensor or not 0 <= a < r or None in s_shape:
            out.append(1)
        elif block == 0:
            out.append(s_shape[0] if i == a and len(s_shape) == 1 else 1)
        elif len(s_shape) != r:
            out.append(1)
        else:
            out.append(s_shape[i] * block if i == a else s_shape[i])
    return tuple(out)


def _shapes(c: _Collector, node: Node, x_shape, s_shape, z_shape, axis: int, block: int, version: int,
            names: tuple[str, ...], s: str, z: str) -> None:
    """The granularity rules of :mod:`quantspec.onnx.plan`, run on the shapes."""
    if None in s_shape or (z_shape is not None and None in z_shape):
        return
    if x_shape is None:  # x's rank unknown: only the zero point against the scale
        if z_shape is not None and z_shape != s_shape and not (_scalar(s_shape) and _scalar(z_shape)):
            c.add("zero-point-shape", node, z, f"{names[2]} must have the shape of {names[1]}",
                  position=_position(2, names), expected=s_shape, found=z_shape)
        return
    for rule, shape, tensor, k in (("scale-shape", s_shape, s, 1), ("zero-point-shape", z_shape, z, 2)):
        if shape is not None and not _holdable(shape):     # a damaged declaration: no array has that shape
            c.add(rule, node, tensor, f"{names[k]} declares {math.prod(shape)} elements ({list(shape)}), a shape no "
                  "tensor can have", position=_position(k, names), found=tuple(shape))
            return
    filled = _fill(x_shape, s_shape, axis, block)
    scale = np.broadcast_to(np.zeros((), np.float32), s_shape)
    zp = None if z_shape is None else np.broadcast_to(np.zeros((), np.uint8), z_shape)
    try:
        resolve_granularity(filled, scale, zp, axis, block, "spec", version, names[1], names[2])
    except QuantSpecError as e:
        rule = {"axis": "axis", "block_size": "block-size", names[1]: "scale-shape",
                names[2]: "zero-point-shape"}.get(e.argument, "scale-shape")
        tensor = {"scale-shape": s, "zero-point-shape": z}.get(rule)
        position = {"axis": "attribute axis", "block-size": "attribute block_size",
                    "scale-shape": _position(1, names), "zero-point-shape": _position(2, names)}[rule]
        c.add(rule, node, tensor, f"{e.argument} {e.rule}", position=position,
              expected=_expected(rule, filled, s_shape, axis, block, version), found=e.value)


def _holdable(shape) -> bool:
    """Whether an array can have ``shape``: no negative dimension, and fewer than 2^59 elements even
    with its zero dimensions counted as 1 (numpy refuses a shape whose bytes, so counted, pass 2^63;
    2^59 leaves room for 8-byte elements)."""
    return all(d >= 0 for d in shape) and math.prod(max(d, 1) for d in shape) < 1 << 59


def _expected(rule: str, x_shape: tuple, s_shape: tuple, axis: int, block: int, version: int) -> Any:
    r = len(x_shape)
    a = axis + r if -r <= axis < 0 else axis
    if rule == "axis":
        return f"[{-r}, {r - 1}]"
    if rule == "zero-point-shape":
        return s_shape
    per_tensor = math.prod(s_shape) == 1 and len(s_shape) <= 1
    if rule == "block-size":
        if block < 0:
            return ">= 0"
        if per_tensor or len(s_shape) != r or not 0 <= a < r:
            return 0
        d, n = x_shape[a], s_shape[a]
        if n == 0:
            return "none (the scale is empty)"
        lo = -(-d // n)
        return f"[{lo}, {-(-d // (n - 1)) - 1}]" if n > 1 else f">= {lo}"
    if version < 13 or not 0 <= a < r:
        return "()"
    if block == 0:
        return f"() or ({x_shape[a]},)"
    return tuple(-(-d // block) if i == a else d for i, d in enumerate(x_shape))


def _scale_values(c: _Collector, node: Node, tensor: str, position: str, values: np.ndarray, divides: bool) -> None:
    with np.errstate(all="ignore"):
        f = np.asarray(values).astype(np.float64)
    bad = ~np.isfinite(f)
    if divides:
        bad |= f == 0
    if bad.any():
        i = int(np.argmax(bad.reshape(-1)))
        n = int(bad.sum())
        what = "finite and non-zero" if divides else "finite"
        why = " (the operator divides by it)" if divides else ""
        c.add("scale", node, tensor, f"every scale must be {what}{why}: {n} of {f.size} are not", position=position,
              expected=what, found=float(f.reshape(-1)[i]))


def _zero_point_values(c: _Collector, g: Graph, node: Node, z: str, position: str, op: str) -> None:
    zt = g.info(z).type_name
    try:
        t = qtype(zt) if zt else None
    except QuantSpecError:
        t = None
    if t is None:
        return
    if t.kind == "bool" or t.bits > 32:      # not a zero point type at all: the type rule reports it
        return
    stored = g.stored_ints(z)
    if stored is not None and t.is_int and t.bits in (8, 16):
        bad = (stored < t.qmin) | (stored > t.qmax)
        if bad.any():
            c.add("zero-point-range", node, z, f"a {t.name} zero point must lie in its type's range (the file stores "
                  f"{int(stored[np.argmax(bad)])}, which reads back wrapped)", position=position,
                  expected=(int(t.qmin), int(t.qmax)), found=int(stored[np.argmax(bad)]))
            return
    values = g.value(z)
    if values is None:
        return
    with np.errstate(all="ignore"):
        nonzero = np.asarray(values).astype(np.float64) != 0
    if not nonzero.any():
        return
    first = np.asarray(values).reshape(-1)[int(np.argmax(nonzero.reshape(-1)))]
    found = float(first) if t.is_float else int(first)
    if t.name == "int32" and op == "dq":
        c.add("zero-point-range", node, z, "int32 input has no zero point: it must be 0", position=position,
              expected=0, found=found)
    elif t.name in _FLOAT8:
        why = ("onnx.reference and onnxruntime refuse another" if op == "dq"
               else "onnx.reference and onnxruntime ignore it")
        c.add("zero-point-range", node, z, f"a float8 zero point must be 0 ({why})", position=position,
              expected=0.0, found=found)


# ------------------------------------------------------------------------------------------------
# QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger
# ------------------------------------------------------------------------------------------------

def _check_qop(c: _Collector, g: Graph, node: Node, row: qops.QOp) -> None:
    version = g.version(node, row.versions)
    if version is None:
        if g.opset is not None:
            c.add("op-version", node, None, f"{row.op_type} does not exist before opset {row.versions[0]}",
                  expected=f">= {row.versions[0]}", found=g.opset)
        return
    label = f"{row.op_type}-{version}"
    types = row.types[version]
    names = tuple(n for n, _, _ in row.inputs)
    for k, (name, _, optional) in enumerate(row.inputs):
        if not optional and not node.input(k):
            c.add("inputs", node, None, f"{label} needs its input {name}", position=f"input {k}",
                  expected=f"{len([i for i in row.inputs if not i[2]])} required inputs", found=f"{len(node.inputs)} inputs")
            return
    if len(node.inputs) > len(row.inputs):
        c.add("inputs", node, None, f"{label} takes at most {len(row.inputs)} inputs", expected=len(row.inputs),
              found=len(node.inputs))
    _output(c, node, label)
    _bind_types(c, g, node, label, types, row.inputs, row.output)
    for qz in row.quantized:
        tensor = node.input(qz.tensor) if qz.tensor >= 0 else (node.outputs[0] if node.outputs else "")
        t_shape = g.info(tensor).shape if tensor else None
        params = [(k, kind) for k, kind in ((qz.scale, "scale"), (qz.zero_point, "zero point")) if k is not None]
        shapes = {}
        for k, kind in params:
            name = node.input(k)
            if not name:
                continue
            p_shape = g.info(name).shape
            shapes[kind] = p_shape
            if p_shape is not None and not any(_layout_ok(lay, p_shape, t_shape) for lay in qz.layouts):
                rule = "scale-shape" if kind == "scale" else "zero-point-shape"
                c.add(rule, node, name, f"{names[k]} must be " + " or ".join(qops.LAYOUTS[lay] for lay in qz.layouts)
                      + f" of {qz.name}", position=_position(k, names),
                      expected=" or ".join(_layout_shape(lay, t_shape) for lay in qz.layouts), found=p_shape)
                shapes[kind] = None
        if qz.same_shape and shapes.get("scale") is not None and shapes.get("zero point") is not None \
                and shapes["scale"] != shapes["zero point"]:
            c.add("zero-point-shape", node, node.input(qz.zero_point), f"{names[qz.zero_point]} must have the shape "
                  f"of {names[qz.scale]}", position=_position(qz.zero_point, names), expected=shapes["scale"],
                  found=shapes["zero point"])
        if qz.scale is not None and node.input(qz.scale) and g.info(node.input(qz.scale)).type_name in _SCALES:
            sv = g.value(node.input(qz.scale))
            if sv is not None:
                _scale_values(c, node, node.input(qz.scale), _position(qz.scale, names), sv, qz.divides)
        if qz.zero_point is not None and node.input(qz.zero_point):
            _zero_point_values(c, g, node, node.input(qz.zero_point), _position(qz.zero_point, names), "qop")
    if row.op_type == "QLinearConv" and node.input(8):
        b_shape, w_shape = g.info(node.input(8)).shape, g.info(node.input(3)).shape
        if b_shape is not None and w_shape and w_shape[0] is not None and b_shape not in ((w_shape[0],), (None,)):
            c.add("shape", node, node.input(8), "B must be 1-D with one entry per output channel (w's dimension 0)",
                  position=_position(8, names), expected=(w_shape[0],), found=b_shape)


def _bind_types(c: _Collector, g: Graph, node: Node, label: str, types: dict, inputs: tuple, output: str | None) -> None:
    """Each input (and the output) of a type the version accepts, the inputs that share a type
    parameter of one type (a zero point has its tensor's type)."""
    bound: dict[str, tuple[str, str]] = {}
    slots = [(node.input(k), name, tp, _position(k, tuple(n for n, _, _ in inputs))) for k, (name, tp, _) in enumerate(inputs)]
    if output is not None and node.outputs:
        slots.append((node.outputs[0], "output", output, "output 0"))
    for tensor, name, tp, position in slots:
        if not tensor:
            continue
        tn = g.info(tensor).type_name
        if tn is None:
            continue
        allowed = types.get(tp, (tp,))
        if tn not in allowed:
            c.add("dtype", node, tensor, f"{label} takes {name} of type " + ", ".join(allowed), position=position,
                  expected=allowed, found=tn)
            continue
        if tp in bound and bound[tp][0] != tn:
            rule = "zero-point-type" if "zero_point" in name else "dtype"
            c.add(rule, node, tensor, f"{name} must have the type of {bound[tp][1]} (one type parameter {tp})",
                  position=position, expected=bound[tp][0], found=tn)
            continue
        bound.setdefault(tp, (tn, name))


def _layout_ok(layout: str, p: tuple, t: tuple | None) -> bool:
    def same(a, b):
        return a is None or b is None or a == b

    if layout == "tensor":
        return len(p) <= 1 and all(d in (1, None) for d in p)
    if t is None:
        return len(p) >= 1
    if layout == "channel":
        return len(p) == 1 and len(t) >= 1 and same(p[0], t[0])
    if len(t) < 2:
        return False
    if layout == "row":
        return (len(p) == 1 and same(p[0], t[-2])) or (
            len(p) == len(t) and all(same(a, b) for a, b in zip(p[:-1], t[:-1])) and p[-1] in (1, None))
    if layout == "column":
        return (len(p) == 1 and same(p[0], t[-1])) or (
            len(p) == len(t) and all(same(a, b) for a, b in zip(p[:-2], t[:-2])) and p[-2] in (1, None)
            and same(p[-1], t[-1]))
    return False


def _layout_shape(layout: str, t: tuple | None) -> str:
    if layout == "tensor":
        return "()"
    if t is None:
        return layout
    if layout == "channel":
        return f"({t[0]},)"
    if layout == "row":
        return f"({t[-2]},) or {(*t[:-1], 1)}" if len(t) >= 2 else "per row"
    return f"({t[-1]},) or {(*t[:-2], 1, t[-1])}" if len(t) >= 2 else "per column"


# ------------------------------------------------------------------------------------------------
# com.microsoft MatMulNBits
# ------------------------------------------------------------------------------------------------

def _check_nbits(c: _Collector, g: Graph, node: Node) -> None:
    rule = qops.MATMUL_NBITS
    label = "com.microsoft MatMulNBits"
    names = tuple(n for n, _, _ in rule.inputs)
    for k, (name, _, optional) in enumerate(rule.inputs):
        if not optional and not node.input(k):
            c.add("inputs", node, None, f"{label} needs its input {name}", position=f"input {k}",
                  expected="A, B and scales", found=f"{len(node.inputs)} inputs")
            return
    _output(c, node, label)
    attrs = {}
    for a in node.proto.attribute:
        if a.name not in rule.attrs:
            c.add("attribute", node, None, f"{label} has no attribute {a.name!r}", position=f"attribute {a.name}",
                  expected=rule.attrs, found=a.name)
        elif isinstance(node.attrs.get(a.name), int):
            attrs[a.name] = node.attrs[a.name]
    for name in rule.required_attrs:
        if name not in attrs:
            c.add("attribute", node, None, f"{label} needs the attribute {name}", position=f"attribute {name}",
                  expected=f"an integer {name}", found="none")
    bits, block = attrs.get("bits", 4), attrs.get("block_size")
    if bits not in rule.bits:
        c.add("attribute", node, None, "bits must be one MatMulNBits supports", position="attribute bits",
              expected=rule.bits, found=bits)
        return
    if block is None:
        c.add("attribute", node, None, f"{label} needs the attribute block_size", position="attribute block_size",
              expected="a power of two >= 16", found="none")
        return
    if block < rule.min_block_size or block & (block - 1):
        c.add("block-size", node, None, f"block_size must be a power of two, at least {rule.min_block_size}",
              position="attribute block_size", expected=f"a power of two >= {rule.min_block_size}", found=block)
        return
    _bind_types(c, g, node, label, dict(rule.types), rule.inputs, None)
    if "K" not in attrs or "N" not in attrs:
        return
    K, N = attrs["K"], attrs["N"]
    if K <= 0 or N <= 0:
        c.add("shape", node, None, "K and N must be positive", position="attribute K" if K <= 0 else "attribute N",
              expected="> 0", found=K if K <= 0 else N)
        return
    k_blocks = -(-K // block)
    a_shape = g.info(node.input(0)).shape
    if a_shape and a_shape[-1] is not None and a_shape[-1] != K:
        c.add("shape", node, node.input(0), "A's last dimension must be K", position=_position(0, names),
              expected=K, found=a_shape[-1])
    bias = node.input(5)
    if bias:
        b_info = g.info(bias).shape
        if b_info is not None and tuple(b_info) != (N,):
            c.add("shape", node, bias, "bias must hold one value per output column: (N,)", position=_position(5, names),
                  expected=(N,), found=b_info)
    b_shape = g.info(node.input(1)).shape
    want_b = (N, k_blocks, block * bits // 8)
    if b_shape is not None and tuple(b_shape) != want_b:
        c.add("shape", node, node.input(1), "B must be the packed weights (N, ceil(K / block_size), block_size * "
              "bits / 8)", position=_position(1, names), expected=want_b, found=b_shape)
    s_shape = g.info(node.input(2)).shape
    if s_shape is not None and tuple(s_shape) not in ((N, k_blocks), (N * k_blocks,)):
        c.add("scale-shape", node, node.input(2), "scales must hold one scale per block: (N, ceil(K / block_size))",
              position=_position(2, names), expected=(N, k_blocks), found=s_shape)
    z = node.input(3)
    if z:
        zi = g.info(z)
        if zi.shape is not None and zi.type_name is not None:
            packed = zi.type_name == "uint8"
            cols = -(-k_blocks * bits // 8) if packed else k_blocks
            if tuple(zi.shape) not in ((N, cols), (N * cols,)):
                what = "packed uint8 (N, ceil(k_blocks * bits / 8))" if packed else "(N, k_blocks) of A's type"
                c.add("zero-point-shape", node, z, f"zero_points must be {what}", position=_position(3, names),
                      expected=(N, cols), found=zi.shape)
    sv = g.value(node.input(2)) if g.info(node.input(2)).type_name in _SCALES else None
    if sv is not None:
        _scale_values(c, node, node.input(2), _position(2, names), sv, divides=False)


# ------------------------------------------------------------------------------------------------
# DequantizeLinear -> data movement -> QuantizeLinear
# ------------------------------------------------------------------------------------------------

def _is(node: Node | None, op: str) -> bool:
    return node is not None and node.op_type == op and node.domain in (*DEFAULT_DOMAINS, MS_DOMAIN)


def _params(g: Graph, node: Node) -> tuple[np.ndarray | None, np.ndarray | None, str | None]:
    """(scale values, zero point values, quantized type) of a Q or DQ node; None where not constant."""
    s, z = node.input(1), node.input(2)
    if g.info(s).type_name not in _SCALES or (z and g.info(z).type_name is None):
        return None, None, None
    scale = g.value(s) if s else None
    if z:
        zp = g.value(z)
        ztype = g.info(z).type_name
    else:
        zp, ztype = None, None
    if node.op_type == "DequantizeLinear":
        qtype_name = g.info(node.input(0)).type_name or ztype
    else:
        od = node.attrs.get("output_dtype", 0)
        qtype_name = ztype or (type_name(od) if isinstance(od, int) and od else "uint8")
    if not z:
        zp = np.zeros(np.shape(scale) if scale is not None else (), np.float64)
    return scale, zp, qtype_name


def _describe(scale, zp, t) -> str:
    def short(a):
        a = np.asarray(a)
        if a.size == 1:
            v = a.reshape(-1)[0]
            return f"{float(v):.9g}" if a.dtype.kind == "f" or a.dtype.kind == "V" else str(v)
        return f"{a.size} values"
    return f"scale {short(scale)}, zero point {short(np.asarray(zp).astype(np.float64))} ({t})"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.size != b.size:
        return False
    with np.errstate(all="ignore"):
        fa, fb = a.reshape(-1).astype(np.float64), b.reshape(-1).astype(np.float64)
    return bool(np.all((fa == fb) | (np.isnan(fa) & np.isnan(fb))))


def _same_params(c: _Collector, g: Graph) -> None:
    for node in g.nodes:
        if node.op_type not in qops.SAME_PARAMS_OPS or node.domain not in DEFAULT_DOMAINS:
            continue
        dq = g.producer.get(node.input(0))
        if not _is(dq, "DequantizeLinear"):
            continue
        d_scale, d_zp, d_type = _params(g, dq)
        if d_scale is None:
            continue
        if node.op_type in qops.POSITIVE_SCALE_OPS and np.any(np.asarray(d_scale).astype(np.float64) <= 0):
            c.add("same-params", node, dq.input(1), f"{node.op_type} compares values: run on the codes it needs a "
                  f"positive scale (a negative one reverses their order); the DequantizeLinear before it (node "
                  f"{dq.index}) has {_describe(d_scale, d_zp, d_type)}", position="input 0",
                  expected="scale > 0", found=float(np.min(np.asarray(d_scale).astype(np.float64))))
        outs = node.outputs if node.op_type == "Split" else node.outputs[:1]
        for o in outs:
            for q in g.consumers.get(o, []):
                if not _is(q, "QuantizeLinear") or q.input(0) != o:
                    continue
                if q.input(1) == dq.input(1) and q.input(2) == dq.input(2):
                    continue
                q_scale, q_zp, q_type = _params(g, q)
                if q_scale is None:
                    continue
                if _same(d_scale, q_scale) and _same(d_zp, q_zp) and d_type == q_type:
                    continue
                c.add("same-params", q, q.input(1), f"the QuantizeLinear after {node.op_type} (node {node.index}) must "
                      f"have the scale, zero point and type of the DequantizeLinear before it (node {dq.index}): a "
                      f"runtime that runs {node.op_type} on the codes needs them equal", position="input 1 (y_scale)",
                      expected=_describe(d_scale, d_zp, d_type), found=_describe(q_scale, q_zp, q_type))
