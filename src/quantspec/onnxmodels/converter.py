"""``quantspec.onnxmodels.convert_model``: weight-only quantization of a float ONNX model.

Each constant weight of MatMul, Gemm and Conv (an initializer of the main graph, :mod:`.weights`)
becomes ``DequantizeLinear(codes, scale[, zero point])`` feeding the operator, with the schemes of
``quantspec convert`` for checkpoints (:mod:`quantspec.checkpoint.schemes`): the codes and parameters
are the checkpoint encoders' (:mod:`.encoder`), laid out as the operator stores its weight.

The steps, each before the next:

1. **Plan**: every initializer is a weight with its layout, or kept with the reason; the recipe gives
   each weight its scheme (the checkpoint package's rules: a scheme that cannot take a tensor keeps it,
   unless a rule names the tensor exactly, which is an error).
2. **Opset**: the lowest opset whose DequantizeLinear has the types and attributes of every scheme used
   (:func:`required_opset`, read from :mod:`quantspec.onnx.opsets`); a model below it is upgraded by
   ``onnx.version_converter`` (refused clearly when that fails), a model at or above it keeps its opset.
3. **Quantize** each weight.
4. **Write** the model atomically (:func:`quantspec.onnxmodels.io.save_model`): the initializer ``W``
   is replaced by ``W_quantized``, ``W_scale`` (and ``W_zero_point``), and a DequantizeLinear node at the
   head of the graph produces ``W`` again (through a Cast for float16 and bfloat16 models: the
   DequantizeLinear output is float32, the checkpoint's dequantized value), so every consumer, in
   subgraphs too, reads the same name.  External data as the source had it, or when the model is
   over 2 GB.

With ``format="matmulnbits"`` (schemes int4-bN and uint4-bN-asym) step 4 instead replaces each
MatMul whose B is a float32 weight by a com.microsoft MatMulNBits node equal to onnxruntime's
``MatMulNBitsQuantizer`` (:mod:`.nbits`); the opset is kept (MatMulNBits is a contrib operator).

The opset upgrade (step 2) runs ``onnx.version_converter`` on the model *without* its large
initializers' data (:func:`upgrade_opset`): the converter never touches weight values, and copying
and checking a model of weights is most of its time.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from .._fastpath import jit
from ..checkpoint.schemes import KEEP, SCHEMES, Scheme, load_recipe
from ..dtypes import qtype
from ..errors import InvalidArgumentError, ModelError, RangeError, UnsupportedError
from ..onnx import opsets
from .convreport import ModelConversionReport, WeightReport
from .encoder import Quantized, quantize_weight
from .graph import read_graph
from . import nbits
from .io import OnnxModel, load_model, onnx_module, save_model
from .weights import IN_OUT, OUT_IN, Candidate, find_weights

__all__ = ["convert_model", "required_opset", "dequantize_attributes", "onnxruntime_refusal", "markdown",
           "upgrade_opset", "FORMATS"]

#: the output formats of :func:`convert_model`: DequantizeLinear (QDQ) weights, or com.microsoft
#: MatMulNBits nodes
FORMATS = ("qdq", "matmulnbits")


def dequantize_attributes(s: Scheme) -> tuple[str, ...]:
    """The DequantizeLinear attributes scheme ``s`` needs: ``axis`` (per channel, blocked),
    ``block_size`` (blocked), ``output_dtype`` (a float8e8m0 scale, whose DequantizeLinear would
    otherwise output float8e8m0)."""
    out = []
    if s.granularity != "tensor":
        out.append("axis")
    if s.granularity == "block":
        out.append("block_size")
    if s.scale_type == "float8e8m0":
        out.append("output_dtype")
    return tuple(out)


def required_opset(s: Scheme | str) -> int:
    """The lowest opset whose DequantizeLinear takes scheme ``s``'s codes (and zero point) type, its
    scale type and the attributes it needs, from the opset table (:data:`quantspec.onnx.opsets.VERSIONS`)."""
    s = SCHEMES[s] if isinstance(s, str) else s
    needs = set(dequantize_attributes(s))
    for r in opsets.VERSIONS:
        if s.codes in r.dq_x and s.scale_type in r.dq_scale and needs <= set(r.dq_attrs):
            return r.version
    raise UnsupportedError("scheme", "has no DequantizeLinear version that takes it", s.name)  # pragma: no cover


def onnxruntime_refusal(s: Scheme | str) -> str | None:
    """Why onnxruntime 1.31 cannot run the DequantizeLinear of scheme ``s`` (None: it can), as
    quantspec's ``compat="onnxruntime"`` mode knows it (:func:`quantspec.onnx.plan_dequantize`)."""
    from ..onnx import plan_dequantize
    from ..errors import RuntimeUnsupportedError

    s = SCHEMES[s] if isinstance(s, str) else s
    shape = (4, 64)
    codes = np.zeros(shape, qtype(s.codes).dtype)
    pshape = OUT_IN.param_shape(s, shape)
    scale = np.ones(pshape, qtype(s.scale_type).dtype)
    zp = np.zeros(pshape, codes.dtype) if s.zero_point else None
    attrs: dict[str, Any] = dict(OUT_IN.attributes(s))
    if s.scale_type == "float8e8m0":
        attrs["output_dtype"] = "float"
    try:
        plan_dequantize(codes, scale, zp, compat="onnxruntime", opset=required_opset(s), **attrs)
    except RuntimeUnsupportedError as e:
        return e.rule
    return None


def markdown() -> str:
    """The docs' table of schemes on ONNX models (docs/onnx-models.md)."""
    rows = ["| scheme | codes | scale | opset | DequantizeLinear attributes | onnxruntime 1.31 |", "|---|---|---|---|---|---|"]
    for s in SCHEMES.values():
        attrs = ", ".join(dequantize_attributes(s)) or "-"
        why = onnxruntime_refusal(s)
        ort = "runs" if why is None else "no: " + why.replace("onnxruntime 1.31 ", "").replace("|", "/")
        codes = s.codes + (" + zero point" if s.zero_point else "")
        rows.append(f"| `{s.name}` | {codes} | {s.scale_type} | {required_opset(s)} | {attrs} | {ort} |")
    return "\n".join(rows) + "\n"


def _destination(dst: Any, model: OnnxModel) -> Path:
    if not isinstance(dst, (str, os.PathLike)) or not str(dst):
        raise InvalidArgumentError("dst", "must be the path of the .onnx file to write", dst)
    path = Path(dst)
    if path.is_dir():
        raise InvalidArgumentError("dst", "must be a file path, not a directory", str(path))
    if model.path is not None:
        target = path.resolve()
        if target == model.path.resolve():
            raise InvalidArgumentError("dst", "must not be the source model itself", str(path))
        data = (path.parent / f"{path.name}.data").resolve()
        onnx = onnx_module()
        for t in model.proto.graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                for e in t.external_data:
                    if e.key == "location" and model.base_dir is not None and \
                            (model.base_dir / e.value).resolve() in (data, target):
                        raise InvalidArgumentError("dst", "would overwrite the source model's external data file",
                                                   str(path), detail=f"the source keeps tensor {t.name!r} in {e.value}")
    return path


def _plan(cands: list[Candidate], rules, src: str) -> list[tuple[Candidate, str, str]]:
    """(candidate, scheme or "keep", reason) for every initializer."""
    plan = []
    seen = set()
    for c in cands:
        if c.name in seen:
            raise ModelError("src", "has two initializers of one name", c.name, detail=src)
        seen.add(c.name)
        a = rules.assign(c.name, c.dtype, c.rows_shape)
        if c.layout is None:
            if a.explicit and a.scheme != KEEP:
                raise InvalidArgumentError("recipe", f"asks for scheme {a.scheme} on initializer {c.name!r}, which is "
                                           f"not a weight the converter takes: {c.reason}", src)
            plan.append((c, KEEP, c.reason))
            continue
        if a.scheme != KEEP and SCHEMES[a.scheme].takes(c.dtype, c.rows_shape) is not None:
            raise InvalidArgumentError("recipe", f"asks for scheme {a.scheme} on weight {c.name!r}, which it cannot "
                                       f"take: {a.reason}", src)
        plan.append((c, a.scheme, a.reason))
    return plan


#: initializers of at least this many bytes travel through the version converter without their data
_LIGHT_FROM = 1 << 10


def _light(proto: Any) -> tuple[Any, dict[str, Any]]:
    """A copy of ``proto`` whose large main-graph initializers hold no data (name, type and dims
    kept), and those initializers by name."""
    from .io import tensor_size, without_initializers

    out = without_initializers(proto)
    held = {}
    for t in proto.graph.initializer:
        if tensor_size(t) < _LIGHT_FROM or t.name in held:
            out.graph.initializer.append(t)
            continue
        stub = out.graph.initializer.add()
        stub.name, stub.data_type = t.name, t.data_type
        stub.dims.extend(t.dims)
        held[t.name] = t
    return out, held


def _has_data(t: Any) -> bool:
    return bool(t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data or t.uint64_data
                or t.string_data or t.external_data)


def upgrade_opset(proto: Any, target: int) -> Any:
    """``onnx.version_converter.convert_version(proto, target)`` without carrying the weights: the
    converter runs on a copy whose large initializers hold no data, then the initializers are put
    back.  Only initializers of 1 kB or more travel empty (shapes, axes and other small constants an
    adapter may read keep their values).  Should the converter fail on the light model, or an adapter
    write into, drop or retype an initializer it was given empty, the whole model is converted as
    before (the tests compare both results on several models and find them byte-identical)."""
    onnx_module()
    from onnx import version_converter

    light, held = _light(proto)
    if not held:
        return version_converter.convert_version(proto, target)
    try:
        out = version_converter.convert_version(light, target)
    except Exception:  # the converter's own error, from the model as it is, is the one to report
        return version_converter.convert_version(proto, target)
    seen = set()
    for t in out.graph.initializer:
        orig = held.get(t.name)
        if orig is None:
            continue
        if t.data_type != orig.data_type or list(t.dims) != list(orig.dims) or _has_data(t):
            return version_converter.convert_version(proto, target)
        seen.add(t.name)
    if seen != set(held):      # an initializer dropped or renamed: let the converter see everything
        return version_converter.convert_version(proto, target)
    for t in out.graph.initializer:
        orig = held.get(t.name)
        if orig is not None:
            t.CopyFrom(orig)
    return out


def _upgrade(proto: Any, opset: int, target: int, why: str) -> Any:
    """The model at default-domain opset ``target`` (:func:`upgrade_opset`)."""
    try:
        out = upgrade_opset(proto, target)
    except Exception as e:  # the converter raises RuntimeError, ValueError, its own errors...
        raise UnsupportedError("src", f"is at opset {opset}, and {why} needs opset {target}; onnx.version_converter "
                               f"cannot upgrade this model (convert it to opset {target} or later first, or choose "
                               "another scheme)", opset, detail=f"{type(e).__name__}: {str(e).strip()[:500]}") from None
    got = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in out.opset_import}.get("")
    if got != target:  # pragma: no cover - the converter's contract
        raise UnsupportedError("src", f"could not be upgraded to opset {target}", got)
    return out


class _Names:
    """Fresh names that no tensor (or node) of the model has."""

    def __init__(self, taken: set[str]):
        self.taken = set(taken)

    def __call__(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


def _all_names(graph: Any) -> tuple[set[str], set[str]]:
    """The tensor names and node names of a graph and its subgraphs."""
    onnx = onnx_module()
    tensors, nodes = set(), set()
    stack = [graph]
    while stack:
        g = stack.pop()
        tensors.update(t.name for t in g.initializer)
        tensors.update(t.values.name for t in g.sparse_initializer)
        tensors.update(v.name for v in (*g.input, *g.output, *g.value_info))
        for n in g.node:
            nodes.add(n.name)
            tensors.update(n.input)
            tensors.update(n.output)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    stack.append(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    stack.extend(a.graphs)
    return tensors, nodes


def _rewrite(proto: Any, done: dict[str, tuple[Candidate, Scheme, Quantized]], ir_floor: int, old_ir: bool):
    """The output model: each quantized initializer replaced by its codes and parameters and a
    DequantizeLinear (and Cast) producing its name; returns (model, arrays for save_model)."""
    onnx = onnx_module()
    from onnx import helper

    from .io import without_initializers

    tensors, node_names = _all_names(proto.graph)
    fresh, fresh_node = _Names(tensors), _Names(node_names)
    out = without_initializers(proto)
    arrays = {}
    heads = []
    for t in proto.graph.initializer:
        hit = done.get(t.name)
        if hit is None:
            out.graph.initializer.append(t)
            continue
        c, s, q = hit
        inputs = []
        for role, a in (("quantized", q.codes), ("scale", q.scale), ("zero_point", q.zero_point)):
            if a is not None:
                inputs.append(_stub(out, fresh(f"{c.name}_{role}"), a, arrays))
        attrs = dict(q.attributes)
        if s.scale_type == "float8e8m0":
            attrs["output_dtype"] = onnx.TensorProto.FLOAT
        dq_out = c.name if c.dtype == "float" else fresh(f"{c.name}_dequantized")
        heads.append(helper.make_node("DequantizeLinear", inputs, [dq_out], name=fresh_node(f"{c.name}_DequantizeLinear"),
                                      **attrs))
        if dq_out != c.name:
            heads.append(helper.make_node("Cast", [dq_out], [c.name], name=fresh_node(f"{c.name}_Cast"),
                                          to=int(t.data_type)))
    nodes = list(out.graph.node)
    del out.graph.node[:]
    out.graph.node.extend(heads)
    out.graph.node.extend(nodes)
    if old_ir:      # before IR 4 initializers were listed as inputs; a weight is now a node's output
        keep = [i for i in out.graph.input if i.name not in done]
        del out.graph.input[:]
        out.graph.input.extend(keep)
    out.ir_version = max(int(out.ir_version), ir_floor)
    return out, arrays


def _nbits_plan(plan: list[tuple[Candidate, str, str]]) -> list[tuple[Candidate, str, str]]:
    """``format="matmulnbits"``: the planned weights that become MatMulNBits (a float32 ``[K, N]``
    B of main-graph MatMul nodes alone); the others are kept, with the reason."""
    out = []
    for c, s_name, reason in plan:
        if s_name == KEEP:
            out.append((c, s_name, reason))
            continue
        why = None
        if any(u.node.op_type != "MatMul" or u.input != 1 for u in c.uses):
            why = "--format matmulnbits quantizes MatMul weights (B) only"
        elif any(u.node.graph for u in c.uses):
            why = "--format matmulnbits replaces MatMul nodes of the main graph only (this one is in a subgraph)"
        elif c.dtype != "float" or c.layout is not IN_OUT or len(c.shape) != 2:
            why = f"--format matmulnbits takes float32 [K, N] weights (this is {c.dtype} {list(c.shape)})"
        out.append((c, KEEP, why) if why else (c, s_name, reason))
    return out


def _rewrite_nbits(proto: Any, done: dict[str, tuple[Candidate, Scheme, nbits.NBitsWeight]]):
    """The output model of ``format="matmulnbits"``: each MatMul whose B was quantized replaced by a
    com.microsoft MatMulNBits node (named as MatMulNBitsQuantizer names it), its packed weight, scales
    and zero points appended to the initializers; returns (model, arrays for save_model)."""
    onnx = onnx_module()
    from onnx import helper

    from .io import without_initializers

    tensors, node_names = _all_names(proto.graph)
    fresh, fresh_node = _Names(tensors), _Names(node_names)
    out = without_initializers(proto)
    for t in proto.graph.initializer:
        if t.name not in done:
            out.graph.initializer.append(t)
    arrays: dict[str, np.ndarray] = {}
    written: dict[str, list[str]] = {}
    nodes = []
    for n in proto.graph.node:
        if n.op_type != "MatMul" or len(n.input) < 2 or n.input[1] not in done:
            nodes.append(n)
            continue
        c, s, p = done[n.input[1]]
        names = written.get(c.name)
        if names is None:
            names = []
            for role, a in ((f"Q{nbits.BITS}", p.b), ("scales", p.scales), ("zero_points", p.zero_points)):
                if a is not None:
                    names.append(_stub(out, fresh(f"{c.name}_{role}"), a, arrays))
            written[c.name] = names
        nodes.append(helper.make_node("MatMulNBits", [n.input[0], *names], [n.output[0]],
                                      name=fresh_node(f"{n.name}_Q{nbits.BITS}") if n.name else "",
                                      domain=nbits.DOMAIN, **p.attributes))
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    keep = [i for i in out.graph.input if i.name not in done]
    del out.graph.input[:]
    out.graph.input.extend(keep)
    for o in out.opset_import:
        if o.domain == nbits.DOMAIN:
            o.version = 1
            break
    else:
        out.opset_import.append(onnx.helper.make_opsetid(nbits.DOMAIN, 1))
    return out, arrays


def convert_model(src: Any, dst: str | os.PathLike, scheme: str | None = None, *, recipe: Any = None,
                  include: Any = None, exclude: Any = None, external_data: bool | None = None,
                  workers: int | None = None, format: str = "qdq") -> ModelConversionReport:
    """Quantize the weights of the float ONNX model ``src`` and write the result to ``dst``.

    ``src``: a path, the serialized bytes or an ``onnx.ModelProto`` (external data is read from the
    model's directory).  ``dst``: the .onnx file to write (atomically; its external data, if any, beside
    it as ``<name>.data``).  ``scheme`` / ``recipe`` / ``include`` / ``exclude``: as
    :func:`quantspec.checkpoint.convert` takes them, over initializer names.  The constant weight of
    each MatMul (B), Gemm (B) and Conv (W) becomes ``DequantizeLinear(codes, scale[, zero point])``;
    every other initializer, and a weight the scheme cannot take (a blocked scheme's Conv weights, a
    1-D tensor, a stack of matrices, one used elsewhere too), is kept and reported with the reason.
    ``external_data``: True writes the large initializers to an external data file, False never,
    None (default) as the source did or when the model exceeds 2 GB.  ``workers``: threads (default
    the cores).  ``format``: ``"qdq"`` (default) as above; ``"matmulnbits"`` (schemes int4-bN and
    uint4-bN-asym) replaces each MatMul whose B is a float32 ``[K, N]`` weight by a com.microsoft
    MatMulNBits node, byte-identical to onnxruntime's ``MatMulNBitsQuantizer`` (QOperator, RTN), and
    keeps every other weight.  See ``docs/onnx-models.md``.
    """
    start = time.perf_counter()
    rules = load_recipe(recipe, scheme, include, exclude)
    if external_data is not None and not isinstance(external_data, bool):
        raise InvalidArgumentError("external_data", "must be True, False or None", external_data)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InvalidArgumentError("workers", "must be a positive number of threads, or None", workers)
    if not isinstance(format, str) or format not in FORMATS:
        raise InvalidArgumentError("format", f"must be one of {', '.join(FORMATS)}", format)
    if format == "matmulnbits":
        for name in {rules.default, *(r for _, r in rules.rules)} - {None, KEEP}:
            why = nbits.takes(SCHEMES[name])
            if why is not None:
                raise InvalidArgumentError("scheme", why, name)
    model = load_model(src, map_weights=True)
    where = str(model.path) if model.path is not None else type(src).__name__
    out_path = _destination(dst, model)
    graph = read_graph(model)
    opset = graph.opset
    if opset is None:
        raise ModelError("src", "imports no default-domain (ai.onnx) opset", where)
    plan = _plan(find_weights(graph), rules, where)
    if format == "matmulnbits":
        plan = _nbits_plan(plan)
    used = {s for _, s, _ in plan if s != KEEP}
    # MatMulNBits is a com.microsoft operator: the default-domain opset stays
    target = opset if format == "matmulnbits" else max([opset, *(required_opset(s) for s in used)])
    proto = model.proto
    if target > opset:
        why = max(used, key=required_opset)
        proto = _upgrade(proto, opset, target, f"scheme {why} (its DequantizeLinear types and attributes)")
    onnx_module()
    from onnx import helper

    done: dict[str, tuple[Candidate, Scheme, Quantized]] = {}
    reports = []
    elements = sum(math.prod(c.shape) for c, s_name, _ in plan if s_name != KEEP)
    # a small model: the encoders' numpy reference path (the same bytes) is done before numba would have loaded
    with jit.reference_only() if jit.prefer_reference(elements) else contextlib.nullcontext():
        for c, s_name, reason in plan:
            reports.append(_convert_one(model, c, s_name, reason, where, workers, done, format))
    if format == "matmulnbits":
        out, arrays = _rewrite_nbits(proto, done)
    else:
        ir_floor = helper.find_min_ir_version_for([helper.make_opsetid("", target)], ignore_unknown=True)
        out, arrays = _rewrite(proto, done, ir_floor, graph.ir_version < 4)
    if external_data is None and any(model.truly_external(t) for t in model.proto.graph.initializer):
        external_data = True
    files = save_model(OnnxModel(out, path=model.path, base_dir=model.base_dir, mapped=model.mapped), out_path,
                       external_data=external_data,
                       arrays=arrays)
    report = ModelConversionReport(where, str(out_path), opset, target, int(out.ir_version), reports,
                                   [str(f) for f in files])
    report.seconds = time.perf_counter() - start
    return report


def _convert_one(model: OnnxModel, c: Candidate, s_name: str, reason: str, where: str, workers: int | None,
                 done: dict, format: str = "qdq") -> WeightReport:
    """Quantize one planned weight (recorded in ``done``), or keep it; its report."""
    bytes_in = c.nbytes
    if s_name == KEEP:
        return WeightReport(c.name, KEEP, c.dtype, c.shape, bytes_in, bytes_in,
                            use=c.where() if c.layout is not None else "", reason=reason,
                            layout=c.layout.name if c.layout is not None else "")
    s = SCHEMES[s_name]
    w = model.values(c.tensor)
    if tuple(w.shape) != c.shape or qtype(w.dtype).name != c.dtype:
        raise ModelError("src", "has an initializer whose data does not match its type and dims", c.name)
    if format == "matmulnbits":
        p = nbits.quantize(s, w, c.layout, c.name, where, workers)
        if not np.isfinite(p.scales).all():
            raise _infinite_scale(c.name, s.name, where)
        done[c.name] = (c, s, p)
        out_bytes = sum(int(a.nbytes) for a in (p.b, p.scales, p.zero_points) if a is not None)
        return WeightReport(c.name, s.name, c.dtype, c.shape, bytes_in, out_bytes, use=c.where(), reason=reason,
                            layout="MatMulNBits", attributes=dict(p.attributes), rel_rms=p.rel_rms, max_abs=p.max_abs)
    q = quantize_weight(s, w, c.dtype, c.layout, c.name, where, workers)
    if not np.isfinite(q.scale.astype(np.float32)).all():
        raise _infinite_scale(c.name, s.name, where)
    done[c.name] = (c, s, q)
    out_bytes = sum(_nbytes(a) for a in (q.codes, q.scale, q.zero_point) if a is not None)
    return WeightReport(c.name, s.name, c.dtype, c.shape, bytes_in, out_bytes, use=c.where(), reason=reason,
                        layout=c.layout.name, attributes=dict(q.attributes), rel_rms=q.rel_rms, max_abs=q.max_abs)


def _infinite_scale(name: str, scheme: str, where: str) -> RangeError:
    return RangeError("src", f"weight {name!r} has values too large for scheme {scheme}: a scale is not finite",
                      where, detail="nothing was written; keep the tensor (--exclude NAME, or a recipe rule with "
                      "scheme 'keep')")


def _nbytes(a) -> int:
    t = qtype(a.dtype)
    return (a.size * t.bits + 7) // 8


def _stub(out, name: str, a, arrays: dict) -> str:
    """Add an initializer ``name`` of ``a``'s type and shape to ``out`` without its data (``arrays``
    holds the data, written when the model is saved); returns ``name``."""
    stub = out.graph.initializer.add()
    stub.name, stub.data_type = name, qtype(a.dtype).onnx
    stub.dims.extend(int(d) for d in a.shape)
    arrays[name] = a
    return name
