"""Running a model in onnxruntime with chosen intermediate tensors exposed as graph outputs.

The session runs on the CPU with every graph optimization off (``ORT_DISABLE_ALL``): no constant
folding of DequantizeLinear on initializers and no fusion of Q/DQ pairs, so each QuantizeLinear and
DequantizeLinear runs as the node it is.  Tensors of types numpy cannot hold natively (the 4- and
2-bit integers, float8, float4, bfloat16) cross the boundary as their raw bytes
(``run_with_ort_values``, ``data_ptr``) and are unpacked by :func:`quantspec.onnx.unpack`.  A model
whose weights are in external data files is passed to onnxruntime without them, with the folder that
holds them (``session.model_external_initializers_file_folder_path``); its small external tensors are inlined
for the run, since onnxruntime's shape inference cannot read them from a model given as bytes.  A model whose IR version is
newer than onnxruntime reads is run with the newest IR version it reads, and the report says so.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

import numpy as np

from ..dtypes import qtype
from ..errors import InvalidArgumentError, QuantSpecError, RuntimeUnsupportedError, UnsupportedError
from ..onnx.packing import unpack
from .graph import Graph, Node

__all__ = ["ort_module", "run_exposed", "run_node", "PLAIN_NUMPY"]

#: types whose numpy arrays onnxruntime's Python binding takes and returns as they are
#: external tensors up to this size are inlined for onnxruntime (see run_exposed)
_INLINE_UP_TO = 1 << 16

PLAIN_NUMPY = frozenset({"float", "float16", "double", "int8", "uint8", "int16", "uint16", "int32", "int64", "bool"})


def ort_module():
    """The ``onnxruntime`` package, or an error saying how to install it."""
    try:
        import onnxruntime
    except ImportError as e:
        raise UnsupportedError("onnxruntime", "running the model needs the onnxruntime package (pip install "
                               "onnxruntime); use the static audit without it", detail=f"{type(e).__name__}: {e}") from None
    return onnxruntime


def _session(ort, payload: bytes, folder: str | None):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    if folder is not None:
        so.add_session_config_entry("session.model_external_initializers_file_folder_path", folder)
    return ort.InferenceSession(payload, so, providers=["CPUExecutionProvider"])


def _to_numpy(ov: Any) -> np.ndarray:
    """An OrtValue as a numpy array of its exact type (raw bytes for the types numpy lacks)."""
    t = qtype(int(ov.element_type()), "output")
    shape = tuple(int(d) for d in ov.shape())
    if t.name in PLAIN_NUMPY:
        return np.asarray(ov.numpy())
    n = int(np.prod(shape, dtype=np.int64))
    nbytes = (n * t.bits + 7) // 8 if t.is_packed else n * t.dtype.itemsize
    raw = ctypes.string_at(ov.data_ptr(), nbytes) if n else b""
    return unpack(raw, t, shape)


def _feed(ort, name: str, a: np.ndarray):
    t = qtype(a.dtype, f"input {name!r}")
    if t.name in PLAIN_NUMPY:
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(a))
    if t.is_packed:
        raise RuntimeUnsupportedError("inputs", f"onnxruntime's Python binding cannot take a {t.name} graph input",
                                      name)
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(np.ascontiguousarray(a).view(t.storage), t.onnx)


def _load(ort, proto: Any, folder: str | None, notes: list[str]):
    """A session of ``proto``; a model whose IR version onnxruntime does not read yet is loaded with
    the newest it reads (``proto.ir_version`` is changed: the caller restores it)."""
    try:
        return _session(ort, proto.SerializeToString(), folder)
    except Exception as e:
        m = re.search(r"max supported IR version: (\d+)", str(e))
        if m is None or int(m.group(1)) >= proto.ir_version:
            raise RuntimeUnsupportedError("model", f"onnxruntime {ort.__version__} cannot load it",
                                          detail=_short(e)) from None
        note = (f"the model's IR version {proto.ir_version} is newer than onnxruntime {ort.__version__} reads: it "
                f"ran with IR version {m.group(1)}")
        proto.ir_version = int(m.group(1))
    try:
        sess = _session(ort, proto.SerializeToString(), folder)
    except Exception as e:
        raise RuntimeUnsupportedError("model", f"onnxruntime {ort.__version__} cannot load it",
                                      detail=_short(e)) from None
    if note not in notes:
        notes.append(note)
    return sess


def _fetch(ort, sess, names: list[str], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    ort_feeds = {k: _feed(ort, k, v) for k, v in feeds.items()}
    try:
        values = sess.run_with_ort_values(names, ort_feeds)
    except Exception as e:
        raise InvalidArgumentError("inputs", f"onnxruntime {ort.__version__} could not run the model on them",
                                   detail=_short(e)) from None
    out = {}
    for name, ov in zip(names, values):
        try:
            out[name] = _to_numpy(ov)
        except QuantSpecError:
            raise
        except Exception as e:  # pragma: no cover - a type onnxruntime returns that quantspec has no row for
            raise RuntimeUnsupportedError("model", "returned a tensor quantspec cannot read", name,
                                          detail=_short(e)) from None
    return out


def run_exposed(g: Graph, names: list[str], feeds: dict[str, np.ndarray], notes: list[str]) -> dict[str, np.ndarray]:
    """Run ``g``'s model in onnxruntime on ``feeds`` and return the values of ``names`` (intermediate
    tensors included); what had to change to run it is added to ``notes``.  The model is left as it
    was.  No ``names``: the model is only loaded (a :class:`RuntimeUnsupportedError` when onnxruntime
    cannot load it), nothing runs."""
    ort = ort_module()
    onnx = g._onnx
    proto = g.model.proto
    names = list(dict.fromkeys(names))
    graph_outputs = {o.name for o in proto.graph.output}
    n_outputs = len(proto.graph.output)
    ir_version = proto.ir_version
    folder = str(g.model.base_dir.resolve()) if g.model.base_dir is not None else None
    restore = []          # (index, the initializer as it was)
    try:
        # onnxruntime's shape inference cannot read a small external tensor (a Reshape's shape) when the
        # model comes as bytes: those are inlined for the run, large weights stay in their files
        for i, t in enumerate(proto.graph.initializer):
            if t.data_location == onnx.TensorProto.EXTERNAL and g.model.external_span(t)[2] <= _INLINE_UP_TO:
                kept = onnx.TensorProto()
                kept.CopyFrom(t)
                restore.append((i, kept))
                t.CopyFrom(onnx.numpy_helper.from_array(np.asarray(g.model.values(t, mapped=False)), t.name))
        for name in names:
            if name not in graph_outputs:
                proto.graph.output.append(_value_info(g, name))
        sess = _load(ort, proto, folder, notes)
        return _fetch(ort, sess, names, feeds) if names else {}
    finally:
        del proto.graph.output[n_outputs:]
        proto.ir_version = ir_version
        for i, kept in restore:
            proto.graph.initializer[i].CopyFrom(kept)


def run_node(g: Graph, node: Node, notes: list[str]) -> np.ndarray:
    """Run one node whose inputs are all constants (a DequantizeLinear of a weight) alone in
    onnxruntime, and return its output: the same kernel as in the model, without running the model
    (no inputs needed, one weight in memory at a time)."""
    ort = ort_module()
    onnx = g._onnx
    proto = g.model.proto
    inits = []
    for name in node.inputs:
        if not name or any(t.name == name for t in inits):
            continue
        t = g.constant(name)
        if t.data_location == onnx.TensorProto.EXTERNAL:
            t = onnx.numpy_helper.from_array(np.asarray(g.model.values(t, mapped=False)), name)
        inits.append(t)
    out = node.outputs[0]
    graph = onnx.helper.make_graph([node.proto], "node", [], [_value_info(g, out)], initializer=inits)
    one = onnx.helper.make_model(graph, opset_imports=list(proto.opset_import))
    one.ir_version = proto.ir_version
    if one.ByteSize() > (1 << 31) - 1:
        raise RuntimeUnsupportedError("node", "has constant inputs over protobuf's 2 GB limit: it is not run alone",
                                      node.label)
    return _fetch(ort, _load(ort, one, None, notes), [out], {})[out]


def _value_info(g: Graph, name: str):
    onnx = g._onnx
    info = g.info(name)
    if info.elem_type is None:
        return onnx.ValueInfoProto(name=name)
    return onnx.helper.make_tensor_value_info(name, info.elem_type, None)


def _short(e: Exception, limit: int = 400) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
