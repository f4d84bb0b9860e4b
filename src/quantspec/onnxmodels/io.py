"""Reading and writing ONNX models with the ``onnx`` package: paths, bytes and ``ModelProto``
objects; weights in external data files; models over 2 GB.

A model is read *without* its external data (``onnx.load(..., load_external_data=False)``): the
graph is small whatever the size of the weights, and a weight's values are read only when asked for
(:meth:`OnnxModel.values`), large ones mapped from their file rather than read.  That is how a model
over 2 GB — protobuf's limit for one message, so such a model always keeps its weights in external
data files — is checked and audited without holding its weights in memory.

:func:`save_model` writes a model atomically (temporary files renamed into place), moving large
tensors to one external data file beside it when asked or when the model would not fit in one
protobuf message; the ``ModelProto`` passed is not modified.
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..dtypes import qtype
from ..filetypes import looks_like_onnx
from ..errors import ModelError, QuantSpecError, UnsupportedError
from .mapped import load_mapped

__all__ = ["onnx_module", "OnnxModel", "tensor_size", "load_model", "save_model", "set_external", "looks_like_onnx", "without_initializers", "one_node_model",
           "PROTOBUF_LIMIT", "type_name"]

#: protobuf refuses to serialize or parse one message of 2 GiB or more
PROTOBUF_LIMIT = (1 << 31) - 1
#: external tensors of at least this many bytes are mapped from their file instead of read
MAP_FROM = 1 << 20

def onnx_module():
    """The ``onnx`` package, or an error saying how to install it."""
    try:
        import onnx
    except ImportError as e:
        raise UnsupportedError("model", "reading ONNX models needs the onnx package (pip install 'quantspec[onnx]')",
                               detail=f"{type(e).__name__}: {e}") from None
    return onnx


def type_name(elem_type: int) -> str:
    """The name of an ONNX ``TensorProto.DataType`` number: quantspec's type name where it has a row
    (``float``, ``int4``, ``float8e4m3fn``...), else ONNX's own name in lower case (``int64``, ``string``)."""
    try:
        return qtype(int(elem_type)).name
    except QuantSpecError:
        pass
    try:
        return onnx_module().TensorProto.DataType.Name(int(elem_type)).lower()
    except (ValueError, TypeError):
        return f"type {elem_type}"


def one_node_model(op: str, x: np.ndarray, scale, zero_point, attrs: dict, out_type, opset: int = 21):
    """A model of one ``op`` node (QuantizeLinear, DequantizeLinear) of input ``x``'s type and shape,
    with the scale (and the zero point, unless None) as initializers ``s`` / ``z``, output ``y`` of
    ``out_type``; IR version 10, which every supported onnxruntime reads."""
    onnx = onnx_module()
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    inits = [numpy_helper.from_array(np.asarray(scale), "s")]
    if zero_point is not None:
        inits.append(numpy_helper.from_array(np.asarray(zero_point), "z"))
    node = helper.make_node(op, ["x", "s", "z"][:len(inits) + 1], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", qtype(x.dtype).onnx, x.shape)],
                              [helper.make_tensor_value_info("y", qtype(out_type).onnx, x.shape)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


@dataclass(eq=False)
class OnnxModel:
    """A loaded ONNX model: ``proto`` (a ``ModelProto`` whose external tensors are still on disk),
    ``path`` (the file it was read from, None for bytes or a ModelProto) and ``base_dir`` (where its
    external data files are)."""

    proto: Any
    path: Path | None = None
    base_dir: Path | None = None
    #: initializers stored inline in the model file but left there when it was read (marked external,
    #: with the model file as their file: :func:`load_model` with ``map_weights``); they are inline again
    #: when the model is saved, unless external data is asked for
    mapped: frozenset = frozenset()
    _cache: dict = field(default_factory=dict, repr=False)

    def truly_external(self, tensor: Any) -> bool:
        """Whether ``tensor`` keeps its data in an external file in the model as stored (not one of
        :attr:`mapped`)."""
        return tensor.data_location == onnx_module().TensorProto.EXTERNAL and tensor.name not in self.mapped

    def __post_init__(self):
        _check_names(self.proto)

    def values(self, tensor: Any, *, mapped: bool = True) -> np.ndarray:
        """The values of a ``TensorProto`` of this model, as a numpy array of its type (ml_dtypes
        types for the sub-byte and narrow float types, unpacked).  External data is read from its
        file — mapped read-only when large and ``mapped``; an external tensor whose file is missing,
        outside the model's directory or too short is a :class:`ModelError`."""
        key = id(tensor)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is tensor:
            return hit[1]
        a = self._values(tensor, mapped)
        if a.nbytes <= MAP_FROM:       # parameters are asked for again and again; weights are not kept
            self._cache[key] = (tensor, a)
        return a

    def _values(self, tensor: Any, mapped: bool) -> np.ndarray:
        onnx = onnx_module()
        from onnx import numpy_helper

        name = tensor.name or "(unnamed tensor)"
        try:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                return self._external(tensor, mapped)
            if tensor.data_type == onnx.TensorProto.STRING:
                raise ModelError("model", "has a string tensor where a numeric one is needed", name)
            a = numpy_helper.to_array(tensor)
        except QuantSpecError:
            raise
        except Exception as e:  # numpy_helper raises ValueError, TypeError, KeyError... on malformed tensors
            raise ModelError("model", "has a tensor whose data cannot be read", name,
                             detail=f"{type(e).__name__}: {e}") from None
        return a

    def external_span(self, tensor: Any) -> tuple[Path, int, int]:
        """(file, offset, length) of an external tensor's data, checked: the file lies in the model's
        directory and holds the tensor's bytes."""
        from onnx.external_data_helper import ExternalDataInfo

        name = tensor.name
        try:
            info = ExternalDataInfo(tensor)
        except ValueError as e:
            raise ModelError("model", "has malformed external data fields", name, detail=str(e)) from None
        if self.base_dir is None:
            raise ModelError("model", "keeps tensor data in an external file, but was not read from a path (read it "
                             "from its file so the data can be found)", name)
        base = self.base_dir.resolve()
        where = (base / info.location).resolve()
        if not info.location or Path(info.location).is_absolute() or base not in (where, *where.parents):
            raise ModelError("model", "names an external data file outside the model's directory", info.location,
                             detail=f"tensor {name!r}")
        try:
            size = where.stat().st_size
        except OSError as e:
            raise ModelError("model", "names an external data file that cannot be read", str(where),
                             detail=f"tensor {name!r}: {e.strerror or type(e).__name__}") from None
        t = _row(tensor)
        if t is None:
            raise ModelError("model", "has an external tensor of a type quantspec does not read",
                             type_name(tensor.data_type), detail=f"tensor {name!r}")
        offset = info.offset or 0
        n = math.prod(int(d) for d in tensor.dims)
        want = ((n * t.bits + 7) // 8) if t.is_packed else n * t.dtype.itemsize
        length = info.length if info.length is not None else want
        if length != want or offset + length > size:
            raise ModelError("model", f"has external data that does not fit the tensor ({want} bytes for {n} "
                             f"{t.name} elements)", f"{length} bytes at offset {offset} of a {size}-byte file",
                             detail=f"tensor {name!r}")
        return where, offset, length

    def _external(self, tensor: Any, mapped: bool) -> np.ndarray:
        where, offset, length = self.external_span(tensor)
        t = _row(tensor)
        dims = tuple(int(d) for d in tensor.dims)
        if not t.is_packed and mapped and length >= MAP_FROM and sys.byteorder == "little":
            return np.memmap(where, dtype=t.storage.newbyteorder("<"), mode="r", offset=offset, shape=dims).view(t.dtype)
        with open(where, "rb") as f:
            f.seek(offset)
            data = f.read(length)
        from ..onnx.packing import unpack

        return unpack(data, t, dims)


def _check_names(proto: Any) -> None:
    """Refuse a model whose names are not text: protobuf hands a string field holding bytes that are
    not UTF-8 back as ``bytes``, which every later message and lookup would trip over."""
    def bad(value, what):
        if not isinstance(value, str):
            raise ModelError("model", f"has a {what} that is not valid UTF-8 text", repr(value)[:80])

    for op in proto.opset_import:
        bad(op.domain, "an opset domain")
    graphs = [proto.graph]
    while graphs:
        g = graphs.pop()
        bad(g.name, "graph name")
        for v in (*g.input, *g.output, *g.value_info, *g.initializer, *g.sparse_initializer):
            bad(getattr(v, "name", ""), "value or tensor name")
        for n in g.node:
            bad(n.name, "node name")
            bad(n.op_type, "operator type")
            bad(n.domain, "operator domain")
            for name in (*n.input, *n.output):
                bad(name, "node input or output name")
            for a in n.attribute:
                bad(a.name, "attribute name")
                if a.HasField("g"):
                    graphs.append(a.g)
                graphs.extend(a.graphs)


def _row(tensor: Any):
    """quantspec's type row of a tensor, None for a type it has none for (int64, string...)."""
    try:
        return qtype(int(tensor.data_type))
    except QuantSpecError:
        return None


def tensor_size(tensor: Any) -> int:
    """About how many bytes an initializer's data takes, read from its type and dims (asking protobuf
    for a large tensor's size copies its data): the elements times their width for a fixed-width type,
    else the message's serialized size; 0 for data in an external file."""
    onnx = onnx_module()
    if tensor.data_location == onnx.TensorProto.EXTERNAL:
        return 0
    row = _row(tensor)
    if row is None or tensor.data_type == onnx.TensorProto.STRING:
        return tensor.ByteSize()
    bits = row.bits if row.is_packed else np.dtype(row.dtype).itemsize * 8
    return (math.prod(int(d) for d in tensor.dims) * bits + 7) // 8


def load_model(path_or_model: Any, *, map_weights: bool = False) -> OnnxModel:
    """Read an ONNX model: a path, its serialized bytes, an ``onnx.ModelProto`` or an
    :class:`OnnxModel` (returned as it is).  External data stays on disk until a tensor's values are
    asked for.  Anything that is not a readable ONNX model is a :class:`ModelError`.

    ``map_weights`` (a path only): the large initializers stored inside the file stay there too, marked
    as external data in the model file itself (:attr:`OnnxModel.mapped`, :mod:`.mapped`): the file is
    neither read whole nor copied into protobuf messages.  For a caller that reads tensor data only
    through :meth:`OnnxModel.values` and writes with :func:`save_model`."""
    if isinstance(path_or_model, OnnxModel):
        return path_or_model
    onnx = onnx_module()
    if isinstance(path_or_model, onnx.ModelProto):
        return OnnxModel(path_or_model)
    if isinstance(path_or_model, (bytes, bytearray, memoryview)):
        try:
            return OnnxModel(onnx.load_model_from_string(bytes(path_or_model)))
        except Exception as e:
            raise ModelError("model", "is not a readable ONNX model", f"{len(path_or_model)} bytes",
                             detail=f"{type(e).__name__}: {e}") from None
    if isinstance(path_or_model, (str, os.PathLike)):
        path = Path(path_or_model)
        try:
            with open(path, "rb") as f:
                head = f.read(16)
        except OSError as e:
            raise ModelError("model", "cannot be read", str(path), detail=e.strerror or type(e).__name__) from None
        if not looks_like_onnx(head):
            raise ModelError("model", "is not an ONNX model (its first bytes are not those of a serialized "
                             "ModelProto)", str(path))
        try:
            found = load_mapped(path) if map_weights else None
            if found is not None:
                return OnnxModel(found[0], path=path, base_dir=path.parent, mapped=found[1])
            proto = onnx.load(str(path), load_external_data=False)
        except QuantSpecError:
            raise
        except Exception as e:  # protobuf's DecodeError, onnx's own errors, ...
            raise ModelError("model", "is not a readable ONNX model", str(path),
                             detail=f"{type(e).__name__}: {e}") from None
        return OnnxModel(proto, path=path, base_dir=path.parent)
    raise ModelError("model", "must be a path to an .onnx file, its bytes, or an onnx.ModelProto",
                     type(path_or_model).__name__)


# ------------------------------------------------------------------------------------------------
# writing
# ------------------------------------------------------------------------------------------------

def _data_bytes(tensor: Any) -> int:
    """How many bytes a tensor's data takes in the model (0 for external tensors)."""
    return len(tensor.raw_data) if tensor.HasField("raw_data") else tensor.ByteSize()


def save_model(model: Any, path: str | os.PathLike, *, external_data: bool | None = None,
               location: str | None = None, size_threshold: int = 1024,
               arrays: Mapping[str, np.ndarray] | None = None) -> list[Path]:
    """Write ``model`` (an ``onnx.ModelProto`` or :class:`OnnxModel`) to ``path`` atomically.

    ``external_data``: True moves the main graph's initializers of at least ``size_threshold`` bytes
    to one data file beside the model (``location``, default ``<file name>.data``), as ONNX's external
    data format lays them out (each tensor at a 4 KiB-aligned offset); None does so only when the model
    would exceed protobuf's 2 GB limit otherwise; False never.  Tensors already external in an
    :class:`OnnxModel` read from a file are copied from their file.

    ``arrays``: the data of initializers given by name rather than in the model — the model holds
    each as a tensor without data (name, type, dims), and the array, of that type and shape (an
    ml_dtypes array for the sub-byte and narrow float types), is written straight to the file: a
    model built from large arrays never holds their bytes in protobuf messages.

    Returns the files written (the model, then the data file if any).  The model passed in is not
    modified."""
    onnx = onnx_module()
    source = model if isinstance(model, OnnxModel) else None
    proto = model.proto if isinstance(model, OnnxModel) else model
    if not isinstance(proto, onnx.ModelProto):
        raise ModelError("model", "must be an onnx.ModelProto or an OnnxModel", type(model).__name__)
    path = Path(path)
    inits = list(proto.graph.initializer)
    arrays = _checked_arrays(arrays or {}, inits)
    mapped = source.mapped if source is not None else frozenset()
    has_external = any(t.data_location == onnx.TensorProto.EXTERNAL and t.name not in mapped for t in inits)
    size = proto.ByteSize() + sum(_array_bytes(a) for a in arrays.values()) + \
        sum(source.external_span(t)[2] for t in inits if t.name in mapped and t.name not in arrays)
    if external_data is None:
        external_data = has_external or size > PROTOBUF_LIMIT
    if has_external and not external_data:
        raise ModelError("external_data", "must be true for a model whose tensors are in external data files", False)
    if not external_data and size > PROTOBUF_LIMIT:
        raise ModelError("external_data", "must be true (or None) for a model over protobuf's 2 GB limit",
                         f"{size} bytes")
    location = location or f"{path.name}.data"
    if external_data and (Path(location).name != location or location in ("", ".", "..")):
        raise ModelError("location", "must be a file name in the model's directory", location)

    directory = path.parent if str(path.parent) else Path(".")
    out = without_initializers(proto)
    written: list[Path] = []
    tmp_data = None
    try:
        if external_data:
            fd, tmp_data = tempfile.mkstemp(prefix=f".{location}.", suffix=".tmp", dir=directory)
            with os.fdopen(fd, "wb") as f:
                for t in inits:
                    if t.name in arrays:
                        nbytes = _array_bytes(arrays[t.name])
                    elif t.name in mapped:
                        nbytes = source.external_span(t)[2]
                    else:
                        nbytes = None if t.data_location == onnx.TensorProto.EXTERNAL else _data_bytes(t)
                    if nbytes is not None and nbytes < size_threshold:
                        out.graph.initializer.append(_read_inline(t, source) if t.name in mapped and t.name not in arrays
                                                     else _inline(t, arrays.get(t.name)))
                        continue
                    f.write(b"\0" * ((-f.tell()) % 4096))
                    offset = f.tell()
                    length = _write_array(f, arrays[t.name]) if t.name in arrays else _write_tensor(f, t, source)
                    stub = onnx.TensorProto()
                    stub.name, stub.data_type = t.name, t.data_type
                    stub.dims.extend(t.dims)
                    if t.doc_string:
                        stub.doc_string = t.doc_string
                    set_external(stub, location, offset, length)
                    out.graph.initializer.append(stub)
                f.flush()
                os.fsync(f.fileno())
        else:
            out.graph.initializer.extend(_inline(t, arrays.get(t.name)) if t.name not in mapped or t.name in arrays
                                         else _read_inline(t, source) for t in inits)
        if out.ByteSize() > PROTOBUF_LIMIT:
            raise ModelError("model", "is over protobuf's 2 GB limit even without its large initializers",
                             f"{out.ByteSize()} bytes")
        payload = out.SerializeToString()
        fd, tmp_model = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            if tmp_data is not None:
                os.replace(tmp_data, directory / location)
                tmp_data = None
            os.replace(tmp_model, path)
        except BaseException:
            _unlink(tmp_model)
            raise
        written.append(path)
        if external_data:
            written.append(directory / location)
        return written
    except OSError as e:
        raise ModelError("path", "could not be written", str(path), detail=e.strerror or str(e)) from None
    finally:
        if tmp_data is not None:
            _unlink(tmp_data)


def _checked_arrays(arrays: Mapping[str, Any], inits: list) -> dict[str, np.ndarray]:
    by_name = {t.name: t for t in inits}
    out = {}
    for name, a in arrays.items():
        t = by_name.get(name)
        if t is None:
            raise ModelError("arrays", "names a tensor that is not an initializer of the main graph", name)
        a = np.asarray(a)
        want = type_name(t.data_type)
        try:
            got = qtype(a.dtype).name
        except QuantSpecError:
            got = str(a.dtype)
        if got != want or tuple(a.shape) != tuple(int(d) for d in t.dims):
            raise ModelError("arrays", f"must match its initializer ({want} of shape {tuple(t.dims)})",
                             f"{got} of shape {a.shape}", detail=f"tensor {name!r}")
        out[name] = a
    return out


def _array_bytes(a: np.ndarray) -> int:
    t = qtype(a.dtype)
    return (a.size * t.bits + 7) // 8 if t.is_packed else a.size * t.dtype.itemsize


def _write_array(f, a: np.ndarray) -> int:
    """Write an array in raw_data layout to ``f``; returns the number of bytes."""
    from ..onnx.packing import pack

    t = qtype(a.dtype)
    if t.bits in (2, 4) and a.size >= MAP_FROM:
        from .._fastpath import jit

        if jit.enabled():                     # a large 4- or 2-bit tensor: packed by the fused kernel
            from .._fastpath import runner as core

            codes = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            out = np.empty((codes.size * t.bits + 7) // 8, np.uint8)
            core.launch(jit.load("quantspec._fastpath.fastpack").pack, (codes, out, t.bits, core.CHUNK),
                        -(-out.size // core.CHUNK), codes.size)
            f.write(memoryview(out))
            return int(out.size)
    if t.is_packed or sys.byteorder != "little" or a.dtype.byteorder == ">":
        data = pack(a)
        f.write(data)
        return len(data)
    flat = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    for start in range(0, flat.size, 1 << 26):
        f.write(memoryview(flat[start:start + (1 << 26)]))
    return int(flat.size)


def _inline(t: Any, a: np.ndarray | None) -> Any:
    """The initializer with its data inline (from ``a`` when given)."""
    if a is None:
        return t
    onnx = onnx_module()
    from ..onnx.packing import pack

    out = onnx.TensorProto()
    out.CopyFrom(t)
    out.raw_data = pack(a)
    return out


def _read_inline(t: Any, source: OnnxModel) -> Any:
    """A mapped initializer (:attr:`OnnxModel.mapped`) with its data inline again, read from its file."""
    onnx = onnx_module()
    where, offset, length = source.external_span(t)
    out = onnx.TensorProto()
    out.CopyFrom(t)
    out.ClearField("external_data")
    out.ClearField("data_location")     # the model file holds none: the field was not there
    with open(where, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise ModelError("model", "has a file that ended early", str(where))
    out.raw_data = data
    return out


def without_initializers(proto: Any) -> Any:
    """A copy of ``proto`` whose main graph has no initializers (they are added back one by one), made
    field by field so that large initializers are never copied."""
    onnx = onnx_module()
    out = onnx.ModelProto()
    _copy_fields(proto, out, skip="graph")
    _copy_fields(proto.graph, out.graph, skip="initializer")
    return out


def _repeated(fd: Any) -> bool:
    flag = getattr(fd, "is_repeated", None)
    return bool(flag) if flag is not None else fd.label == fd.LABEL_REPEATED


def _copy_fields(src: Any, dst: Any, skip: str) -> None:
    for fd, value in src.ListFields():
        if fd.name == skip:
            continue
        if _repeated(fd):
            getattr(dst, fd.name).extend(value)
        elif fd.message_type is not None:
            getattr(dst, fd.name).CopyFrom(value)
        else:
            setattr(dst, fd.name, value)


def _write_tensor(f, t: Any, source: OnnxModel | None) -> int:
    """Write a tensor's data in raw_data layout to ``f`` (external data copied from its file in
    pieces); returns the number of bytes."""
    onnx = onnx_module()
    if t.data_location == onnx.TensorProto.EXTERNAL:
        if source is None:
            raise ModelError("model", "has an external tensor whose file is unknown (pass the OnnxModel read from "
                             "its path)", t.name)
        where, offset, length = source.external_span(t)
        with open(where, "rb") as src:
            src.seek(offset)
            left = length
            while left:
                piece = src.read(min(left, 1 << 24))
                if not piece:
                    raise ModelError("model", "has an external data file that ended early", str(where))
                f.write(piece)
                left -= len(piece)
        return length
    if t.HasField("raw_data"):
        f.write(t.raw_data)
        return len(t.raw_data)
    from onnx import numpy_helper

    data = numpy_helper.from_array(numpy_helper.to_array(t)).raw_data
    f.write(data)
    return len(data)


def set_external(tensor: Any, location: str, offset: int, length: int) -> None:
    """Mark a ``TensorProto`` (holding no data) as stored in the external file ``location`` (relative
    to the model's directory) at ``offset``, ``length`` bytes long."""
    onnx = onnx_module()
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", int(offset)), ("length", int(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, str(value)
    tensor.data_location = onnx.TensorProto.EXTERNAL


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
