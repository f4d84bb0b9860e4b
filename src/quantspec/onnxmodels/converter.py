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
from .io import OnnxModel, load_model, onnx_module, save_model
from .weights import OUT_IN, Candidate, find_weights

__all__ = ["convert_model", "required_opset", "dequantize_attributes", "onnxruntime_refusal", "markdown"]


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


def _upgrade(proto: Any, opset: int, target: int, why: str) -> Any:
    """The model at default-domain opset ``target`` (onnx.version_converter)."""
    onnx_module()
    from onnx import version_converter

    try:
        out = version_converter.convert_version(proto, target)
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
            if a is None:
                continue
            name = fresh(f"{c.name}_{role}")
            stub = out.graph.initializer.add()
            stub.name, stub.data_type = name, qtype(a.dtype).onnx
            stub.dims.extend(int(d) for d in a.shape)
            arrays[name] = a
            inputs.append(name)
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


def convert_model(src: Any, dst: str | os.PathLike, scheme: str | None = None, *, recipe: Any = None,
                  include: Any = None, exclude: Any = None, external_data: bool | None = None,
                  workers: int | None = None) -> ModelConversionReport:
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
    the cores).  See ``docs/onnx-models.md``.
    """
    start = time.perf_counter()
    rules = load_recipe(recipe, scheme, include, exclude)
    if external_data is not None and not isinstance(external_data, bool):
        raise InvalidArgumentError("external_data", "must be True, False or None", external_data)
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InvalidArgumentError("workers", "must be a positive number of threads, or None", workers)
    model = load_model(src)
    where = str(model.path) if model.path is not None else type(src).__name__
    out_path = _destination(dst, model)
    graph = read_graph(model)
    opset = graph.opset
    if opset is None:
        raise ModelError("src", "imports no default-domain (ai.onnx) opset", where)
    plan = _plan(find_weights(graph), rules, where)
    used = {s for _, s, _ in plan if s != KEEP}
    target = max([opset, *(required_opset(s) for s in used)])
    proto = model.proto
    if target > opset:
        why = max(used, key=required_opset)
        proto = _upgrade(proto, opset, target, f"scheme {why} (its DequantizeLinear types and attributes)")
    onnx = onnx_module()
    from onnx import helper

    done: dict[str, tuple[Candidate, Scheme, Quantized]] = {}
    reports = []
    elements = sum(math.prod(c.shape) for c, s_name, _ in plan if s_name != KEEP)
    # a small model: the encoders' numpy reference path (the same bytes) is done before numba would have loaded
    with jit.reference_only() if jit.prefer_reference(elements) else contextlib.nullcontext():
        for c, s_name, reason in plan:
            reports.append(_convert_one(model, c, s_name, reason, where, workers, done))
    ir_floor = helper.find_min_ir_version_for([helper.make_opsetid("", target)], ignore_unknown=True)
    out, arrays = _rewrite(proto, done, ir_floor, graph.ir_version < 4)
    if external_data is None and any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.proto.graph.initializer):
        external_data = True
    files = save_model(OnnxModel(out, path=model.path, base_dir=model.base_dir), out_path, external_data=external_data,
                       arrays=arrays)
    report = ModelConversionReport(where, str(out_path), opset, target, int(out.ir_version), reports,
                                   [str(f) for f in files])
    report.seconds = time.perf_counter() - start
    return report


def _convert_one(model: OnnxModel, c: Candidate, s_name: str, reason: str, where: str, workers: int | None,
                 done: dict) -> WeightReport:
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
    q = quantize_weight(s, w, c.dtype, c.layout, c.name, where, workers)
    if not np.isfinite(q.scale.astype(np.float32)).all():
        raise RangeError("src", f"weight {c.name!r} has values too large for scheme {s.name}: a scale is not finite",
                         where, detail="nothing was written; keep the tensor (--exclude NAME, or a recipe rule with "
                         "scheme 'keep')")
    done[c.name] = (c, s, q)
    out_bytes = sum(_nbytes(a) for a in (q.codes, q.scale, q.zero_point) if a is not None)
    return WeightReport(c.name, s.name, c.dtype, c.shape, bytes_in, out_bytes, use=c.where(), reason=reason,
                        layout=c.layout.name, attributes=dict(q.attributes), rel_rms=q.rel_rms, max_abs=q.max_abs)


def _nbytes(a) -> int:
    t = qtype(a.dtype)
    return (a.size * t.bits + 7) // 8
