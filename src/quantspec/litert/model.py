"""Reading .tflite models: :func:`load_model`.

A .tflite file is a flatbuffer with the file identifier ``TFL3``, laid out by LiteRT's
``schema.fbs``.  quantspec reads it with its own small, bounds-checked flatbuffer reader, so the
library needs neither ai-edge-litert nor the ``flatbuffers`` package at run time; the schema facts
the reader needs (field ids, types and defaults of each table, enum and union numbers) are data in
:mod:`._schema`, generated from the schema that ships in ai-edge-litert and checked against it by
the tests.

The flatbuffer binary layout, as read here (all little-endian):

- the file starts with a ``uoffset`` (uint32) to the root table, then the 4-byte file identifier;
- a table starts with an ``soffset`` (int32): its vtable is at ``table - soffset``; the vtable holds
  its own size (uint16), the table's inline size (uint16), then one uint16 per field id: the
  field's offset inside the table, 0 when the field is absent (the schema default applies);
- a string, vector or sub-table field holds a ``uoffset`` relative to the field's own position;
  a vector is a uint32 element count followed by the elements (tables: one uoffset each); a
  string is a byte vector (followed by a NUL byte);
- a union is two fields: ``<name>_type`` (a uint8 naming the member table) and the table offset.

Every offset, length and index is checked before use, and the total amount of structure decoded is
bounded by the file size, so malformed, truncated or fuzzed input raises
:class:`quantspec.errors.ModelError` naming what is wrong — never an IndexError, struct.error,
MemoryError or a hang.  Quantization parameters are read as they are in the file (including
combinations LiteRT refuses, which :func:`quantspec.litert.check_model` reports); structure that
LiteRT's ``InterpreterBuilder`` refuses to load (out-of-range indices and buffers, constant data
whose size does not match the shape, an unknown tensor type, another schema version) is a
ModelError.

Constant data is returned typed and shaped, read-only; buffers stored outside the flatbuffer
(``Buffer.offset``/``size``, relative to the start of the file, as large models store them) are
resolved.
"""

from __future__ import annotations

import os
import struct
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from .._semantics.packing import unpack_codes
from ..dtypes import QType, by_tflite
from ..errors import ModelError, QuantSpecError
from . import _schema, _verify
from .params import QuantParams

__all__ = ["load_model", "example_model", "EXAMPLE_MODELS", "Model", "Subgraph", "Tensor", "Operator", "Quantization", "SignatureDef",
           "SCHEMA_VERSION", "op_name"]

#: the schema version LiteRT accepts (``TFLITE_SCHEMA_VERSION``)
SCHEMA_VERSION = 3
FILE_IDENTIFIER = b"TFL3"

_BUILTIN_OPERATORS: dict[int, str] = _schema.ENUMS["BuiltinOperator"]
_TENSOR_TYPES: dict[int, str] = _schema.ENUMS["TensorType"]

_SCALAR_FORMATS = {"bool": "<?", "int8": "<b", "uint8": "<B", "int16": "<h", "uint16": "<H", "int32": "<i",
                   "uint32": "<I", "int64": "<q", "uint64": "<Q", "float32": "<f", "float64": "<d"}
_VECTOR_DTYPES = {"bool": np.dtype(np.bool_), "int8": np.dtype("<i1"), "uint8": np.dtype("<u1"),
                  "int16": np.dtype("<i2"), "uint16": np.dtype("<u2"), "int32": np.dtype("<i4"),
                  "uint32": np.dtype("<u4"), "int64": np.dtype("<i8"), "uint64": np.dtype("<u8"),
                  "float32": np.dtype("<f4"), "float64": np.dtype("<f8")}


def op_name(builtin_code: int, deprecated_builtin_code: int = 0, custom_code: str | None = None) -> str:
    """The operator name LiteRT resolves: ``max(builtin_code, deprecated_builtin_code)`` as a
    BuiltinOperator name, the custom code for CUSTOM ops, ``BUILTIN_<n>`` for a number this schema
    does not know."""
    code = max(int(builtin_code), int(deprecated_builtin_code))
    name = _BUILTIN_OPERATORS.get(code, f"BUILTIN_{code}")
    if name == "CUSTOM":
        return f"CUSTOM:{custom_code}" if custom_code else "CUSTOM"
    return name


# --------------------------------------------------------------------------------------------
# the flatbuffer reader
# --------------------------------------------------------------------------------------------

class _Reader:
    """Bounds-checked access to the flatbuffer in ``buf``; tables decode to dicts of field values."""

    def __init__(self, buf: bytes):
        self.buf = buf
        self.size = len(buf)
        # Every decoded element, table and string byte spends one unit.  A well-formed flatbuffer
        # decodes each of its bytes at most once (shared sub-objects are cached), so this bound is
        # only reached by crafted files whose objects overlap or repeat: those stop with an error
        # instead of running for a very long time.
        self.budget = 8 * self.size + 100_000
        self.cache: dict[tuple[str, int], dict[str, Any]] = {}

    def fail(self, where: str, rule: str, value: Any = ...) -> ModelError:
        return ModelError(where, rule, value)

    def need(self, pos: int, length: int, where: str) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            raise self.fail(where, f"lies outside the file (bytes {pos}..{pos + length} of a {self.size}-byte file); "
                            "the file is truncated or corrupt")

    def spend(self, units: int, where: str) -> None:
        self.budget -= units
        if self.budget < 0:
            raise self.fail(where, "makes the model decode far more structure than its size allows "
                            "(overlapping or repeated objects); the file is corrupt")

    def scalar(self, fmt: str, pos: int, where: str):
        self.need(pos, struct.calcsize(fmt), where)
        return struct.unpack_from(fmt, self.buf, pos)[0]

    def uoffset(self, pos: int, where: str) -> int:
        return pos + self.scalar("<I", pos, where)

    def string(self, pos: int, where: str) -> str:
        n = self.scalar("<I", pos, where)
        self.need(pos + 4, n, where)
        self.spend(n // 8 + 1, where)
        return bytes(self.buf[pos + 4:pos + 4 + n]).decode("utf-8", errors="replace")

    def vector_header(self, pos: int, elem_size: int, where: str) -> int:
        n = self.scalar("<I", pos, where)
        self.need(pos + 4, n * elem_size, where)
        self.spend(n + 1, where)
        return n

    def table(self, pos: int, name: str, where: str) -> dict[str, Any]:
        key = (name, pos)
        if key in self.cache:
            return self.cache[key]
        self.spend(1, where)
        vt = pos - self.scalar("<i", pos, where)
        vt_size = self.scalar("<H", vt, where + " (vtable)")
        obj_size = self.scalar("<H", vt + 2, where + " (vtable)")
        if vt_size < 4 or vt_size % 2:
            raise self.fail(where, "has a malformed vtable (its size must be an even number >= 4)", vt_size)
        if obj_size < 4:
            raise self.fail(where, "has a malformed vtable (table size < 4)", obj_size)
        self.need(vt, vt_size, where + " (vtable)")
        self.need(pos, obj_size, where)
        out: dict[str, Any] = {}
        for fname, fid, ftype, default, enum in _schema.TABLES[name]:
            slot = 4 + 2 * fid
            off = self.scalar("<H", vt + slot, where) if slot + 2 <= vt_size else 0
            fwhere = f"{where}.{fname}"
            if off == 0:
                if default is not None:
                    out[fname] = default
                continue
            if ftype in _SCALAR_FORMATS:
                width = struct.calcsize(_SCALAR_FORMATS[ftype])
                if off + width > obj_size:
                    raise self.fail(fwhere, "lies outside its table; the file is corrupt")
                out[fname] = self.scalar(_SCALAR_FORMATS[ftype], pos + off, fwhere)
                continue
            if off + 4 > obj_size:
                raise self.fail(fwhere, "lies outside its table; the file is corrupt")
            target = self.uoffset(pos + off, fwhere)
            if ftype == "string":
                out[fname] = self.string(target, fwhere)
            elif ftype.startswith("union:"):
                union = ftype[6:]
                member = _schema.ENUMS.get(union, {}).get(out.get(fname + "_type", 0))
                if member in _schema.TABLES:
                    out[fname] = self.table(target, member, fwhere)
            elif ftype.startswith("["):
                elem = ftype[1:-1]
                if elem in _VECTOR_DTYPES:
                    dt = _VECTOR_DTYPES[elem]
                    n = self.vector_header(target, dt.itemsize, fwhere)
                    out[fname] = np.frombuffer(self.buf, dtype=dt, count=n, offset=target + 4)
                elif elem == "string":
                    n = self.vector_header(target, 4, fwhere)
                    out[fname] = [self.string(self.uoffset(target + 4 + 4 * i, fwhere), f"{fwhere}[{i}]")
                                  for i in range(n)]
                elif elem in _schema.TABLES:
                    n = self.vector_header(target, 4, fwhere)
                    out[fname] = [self.table(self.uoffset(target + 4 + 4 * i, fwhere), elem, f"{fwhere}[{i}]")
                                  for i in range(n)]
                else:  # a vector of tables this reader does not decode: record that it is there
                    out[fname] = True
            elif ftype in _schema.TABLES:
                out[fname] = self.table(target, ftype, fwhere)
            else:  # a table this reader does not decode
                out[fname] = True
        self.cache[key] = out
        return out


# --------------------------------------------------------------------------------------------
# the model records
# --------------------------------------------------------------------------------------------

def _readonly(a: np.ndarray) -> np.ndarray:
    if a.flags.writeable:
        a = a.view()
        a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class Quantization:
    """A tensor's ``QuantizationParameters`` exactly as stored in the file (LiteRT checks some of
    this when it loads a model; :func:`quantspec.litert.check_model` reports what breaks the spec).
    ``scale`` is float32, ``zero_point`` int64; an absent vector is empty."""

    scale: np.ndarray
    zero_point: np.ndarray
    quantized_dimension: int = 0
    min: np.ndarray | None = None
    max: np.ndarray | None = None
    details: str | None = None     # the QuantizationDetails member (e.g. "BlockwiseQuantization")
    zero_point_present: bool = True

    def __repr__(self) -> str:
        def show(a):
            return repr(a.tolist()) if a.size <= 4 else f"<{a.size} values>"
        extra = f", details={self.details!r}" if self.details else ""
        return (f"Quantization(scale={show(self.scale)}, zero_point={show(self.zero_point)}, "
                f"quantized_dimension={self.quantized_dimension}{extra})")


@dataclass(frozen=True, eq=False)
class Tensor:
    """One tensor of a subgraph."""

    index: int
    name: str
    shape: tuple[int, ...]
    type_name: str                     # the schema's TensorType name: "INT8", "FLOAT32", "STRING", ...
    dtype: QType | None                # quantspec's type row; None for types it has none for (STRING, ...)
    quantization: Quantization | None  # as stored; None when the tensor has no quantization table
    params: QuantParams | None         # affine parameters as LiteRT reads them, None when not quantized
    buffer: int = 0
    data: np.ndarray | None = None     # constant data, typed and shaped, read-only; None if not constant
    shape_signature: tuple[int, ...] | None = None
    is_variable: bool = False
    sparse: bool = False
    external_buffer: int = 0

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self.shape) or "scalar"
        parts = [f"#{self.index}", repr(self.name), f"{self.type_name.lower()}[{shape}]"]
        if self.params is not None:
            p = self.params
            if p.per_axis:
                parts.append(f"scale=<{len(p)} values> axis={p.quantized_dimension}")
            else:
                parts.append(f"scale={float(p.scale[0]):.9g} zp={int(p.zero_point[0])}")
        if self.data is not None:
            parts.append("const")
        if self.is_variable:
            parts.append("variable")
        return "Tensor(" + " ".join(parts) + ")"


@dataclass(frozen=True, eq=False)
class Operator:
    """One operator of a subgraph.  ``name`` is the builtin operator name LiteRT resolves
    (``max(builtin_code, deprecated_builtin_code)``), or ``CUSTOM:<code>`` for custom ops.
    ``options`` is the snake_case mapping of the op's options table (enum values as schema names,
    every scalar field present with its schema default when the file omits it; absent vectors are
    absent keys), the mapping quantspec's kernels take."""

    index: int
    name: str
    inputs: tuple[int, ...]            # tensor indices; -1 = an omitted optional input
    outputs: tuple[int, ...]
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    options_type: str | None = None    # the BuiltinOptions member stored in the file, if any
    opcode_index: int = 0
    builtin_code: int = 0
    deprecated_builtin_code: int = 0
    custom_code: str | None = None
    version: int = 1
    intermediates: tuple[int, ...] = ()
    custom_options: bytes | None = None

    @property
    def is_custom(self) -> bool:
        return self.name.startswith("CUSTOM")

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return (f"Operator(#{self.index} {self.name} v{self.version} inputs={list(self.inputs)} "
                f"outputs={list(self.outputs)}" + (f" {{{opts}}}" if opts else "") + ")")


@dataclass(frozen=True, eq=False)
class Subgraph:
    index: int
    name: str
    tensors: tuple[Tensor, ...]
    operators: tuple[Operator, ...]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]

    def __repr__(self) -> str:
        return (f"Subgraph(#{self.index} {self.name!r}: {len(self.tensors)} tensors, {len(self.operators)} operators, "
                f"inputs={list(self.inputs)}, outputs={list(self.outputs)})")


@dataclass(frozen=True)
class SignatureDef:
    key: str
    subgraph_index: int
    inputs: Mapping[str, int]     # signature name -> tensor index
    outputs: Mapping[str, int]


@dataclass(frozen=True, eq=False)
class Model:
    """A .tflite model.  ``tensors``, ``operators``, ``inputs`` and ``outputs`` are those of the
    main subgraph (subgraph 0), the one LiteRT's ``Interpreter`` runs."""

    version: int
    description: str
    subgraphs: tuple[Subgraph, ...]
    signature_defs: tuple[SignatureDef, ...] = ()
    metadata: Mapping[str, bytes] = field(default_factory=lambda: MappingProxyType({}))
    size: int = 0                 # bytes in the file
    #: every operator code of the file, as (operator name, version): LiteRT resolves them all when it
    #: loads the model, those no operator uses too
    operator_codes: tuple[tuple[str, int], ...] = ()

    @property
    def main(self) -> Subgraph:
        return self.subgraphs[0]

    @property
    def tensors(self) -> tuple[Tensor, ...]:
        return self.main.tensors

    @property
    def operators(self) -> tuple[Operator, ...]:
        return self.main.operators

    @property
    def inputs(self) -> tuple[int, ...]:
        return self.main.inputs

    @property
    def outputs(self) -> tuple[int, ...]:
        return self.main.outputs

    def tensor(self, key: int | str) -> Tensor:
        """A tensor of the main subgraph by index or by name."""
        if isinstance(key, str):
            for t in self.tensors:
                if t.name == key:
                    return t
            raise ModelError("tensor", "names no tensor of the model", key)
        if isinstance(key, (int, np.integer)) and not isinstance(key, bool) and 0 <= key < len(self.tensors):
            return self.tensors[int(key)]
        raise ModelError("tensor", f"must be a tensor index in [0, {len(self.tensors)}) or a name", key)

    def __repr__(self) -> str:
        ops = sorted({op.name for op in self.operators})
        return (f"Model(version={self.version}, {len(self.subgraphs)} subgraph(s), main: {len(self.tensors)} tensors, "
                f"{len(self.operators)} operators ({', '.join(ops)}), inputs={list(self.inputs)}, "
                f"outputs={list(self.outputs)}, {self.size} bytes)")

    def summary(self) -> str:
        """A readable multi-line listing of the main subgraph's tensors and operators."""
        lines = [repr(self), "tensors:"]
        lines += [f"  {t!r}" for t in self.tensors]
        lines.append("operators:")
        lines += [f"  {op!r}" for op in self.operators]
        return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# building the records
# --------------------------------------------------------------------------------------------

def _read_bytes(path_or_bytes: Any) -> bytes:
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        return bytes(path_or_bytes)
    if isinstance(path_or_bytes, np.ndarray) and path_or_bytes.dtype == np.uint8:
        return path_or_bytes.tobytes()
    if isinstance(path_or_bytes, (str, os.PathLike)):
        try:
            with open(path_or_bytes, "rb") as f:
                return f.read()
        except OSError as e:
            raise ModelError("model", "cannot be read", os.fspath(path_or_bytes),
                             detail=e.strerror or type(e).__name__) from None
    raise ModelError("model", "must be a path to a .tflite file, its bytes, or a Model", type(path_or_bytes).__name__)


def _options(table: str | None, raw: dict[str, Any] | None) -> dict[str, Any]:
    if table is None or table not in _schema.TABLES:
        return {}
    raw = raw or {}
    out: dict[str, Any] = {}
    for fname, _fid, ftype, default, enum in _schema.TABLES[table]:
        if fname not in raw:
            continue
        value = raw[fname]
        if enum is not None:
            value = _schema.ENUMS[enum].get(value, value)
        elif isinstance(value, np.ndarray):
            value = tuple(value.tolist())
        elif ftype == "float32":
            value = float(np.float32(value))
        elif isinstance(value, dict) or value is True and ftype != "bool":
            continue  # a sub-table: no option of the ops quantspec runs has one
        out[fname] = value
    return out


def _ints(r: _Reader, raw: dict[str, Any], key: str, where: str) -> tuple[int, ...]:
    v = raw.get(key)
    if not isinstance(v, np.ndarray):
        return ()
    r.spend(v.size, where)
    return tuple(v.tolist())


def _unpack_subbyte(data: np.ndarray, qt: QType, n: int) -> np.ndarray:
    codes = unpack_codes(data, qt.bits, n)
    if qt.signed:
        half = 1 << (qt.bits - 1)
        codes = ((codes.astype(np.int16) ^ half) - half).astype(np.int8)
    return codes.astype(qt.dtype)


def _constant(where: str, raw_data: np.ndarray, qt: QType | None, shape: tuple[int, ...]) -> np.ndarray:
    n = 1
    for d in shape:
        n *= d
    if qt is None:                      # STRING and other types without a fixed element: raw bytes
        return _readonly(raw_data)
    if qt.is_packed:
        need = (n * qt.bits + 7) // 8
        if raw_data.size != need:
            raise ModelError(where, f"holds {raw_data.size} bytes, but {n} packed {qt.name} values of shape "
                             f"{list(shape)} need {need}")
        return _readonly(_unpack_subbyte(raw_data, qt, n).reshape(shape))
    size = qt.dtype.itemsize
    if raw_data.size != n * size:
        raise ModelError(where, f"holds {raw_data.size} bytes, but {qt.name} data of shape {list(shape)} "
                         f"needs {n * size}")
    arr = raw_data.view(qt.dtype)   # flatbuffers are little-endian, as every host LiteRT runs on
    if sys.byteorder == "big" and size > 1:  # pragma: no cover
        arr = arr.byteswap()
    return _readonly(arr.reshape(shape))


def _quantization(raw: dict[str, Any] | None) -> Quantization | None:
    if raw is None:
        return None
    scale = raw.get("scale")
    zp = raw.get("zero_point")
    details = None
    dt = raw.get("details_type", 0)
    if dt:
        details = _schema.ENUMS["QuantizationDetails"].get(dt, f"UNKNOWN_{dt}")
    return Quantization(
        scale=_readonly(np.asarray(scale if scale is not None else (), np.float32)),
        zero_point=_readonly(np.asarray(zp if zp is not None else (), np.int64)),
        quantized_dimension=int(raw.get("quantized_dimension", 0)),
        min=_readonly(np.asarray(raw["min"], np.float32)) if "min" in raw else None,
        max=_readonly(np.asarray(raw["max"], np.float32)) if "max" in raw else None,
        details=details,
        zero_point_present=zp is not None,
    )


def _params(q: Quantization | None) -> QuantParams | None:
    """Affine parameters as LiteRT's ``ParseQuantization`` reads them: present when there is at least
    one scale and as many zero points; otherwise (no quantization, or a combination LiteRT refuses)
    None, and the raw :class:`Quantization` tells the checker what is wrong."""
    if q is None or q.details == "BlockwiseQuantization" or q.scale.size == 0:
        return None
    if q.zero_point.size != q.scale.size or q.quantized_dimension < 0:
        return None
    try:
        return QuantParams(q.scale, q.zero_point, q.quantized_dimension)
    except QuantSpecError:  # pragma: no cover - excluded by the checks above
        return None


def _build(buf: bytes) -> Model:
    size = len(buf)
    if size < 8:
        raise ModelError("model", f"is {size} bytes, too short to be a .tflite flatbuffer")
    ident = bytes(buf[4:8])
    if ident != FILE_IDENTIFIER:
        raise ModelError("model", "is not a .tflite model: the flatbuffer file identifier is not 'TFL3'", ident)
    _verify.verify(buf)   # what LiteRT's flatbuffer verifier requires, over the whole file
    r = _Reader(buf)
    root = r.table(r.uoffset(0, "model root offset"), "Model", "model")

    version = int(root.get("version", 0))
    if version != SCHEMA_VERSION:
        raise ModelError("model.version", f"must be schema version {SCHEMA_VERSION} (LiteRT refuses others)", version)
    if "buffers" not in root:
        raise ModelError("model.buffers", "is missing (LiteRT refuses a model without a buffers vector)")
    raw_buffers = root["buffers"]
    raw_subgraphs = root.get("subgraphs") or []
    if not raw_subgraphs:
        raise ModelError("model.subgraphs", "is empty: the model has no subgraph")

    # operator codes -> names
    codes = []
    for i, oc in enumerate(root.get("operator_codes") or []):
        b, d = int(oc.get("builtin_code", 0)), int(oc.get("deprecated_builtin_code", 0))
        custom = oc.get("custom_code")
        codes.append((op_name(b, d, custom), b, d, custom, int(oc.get("version", 1))))

    # buffers -> raw uint8 data (None = no data)
    def buffer_data(k: int, where: str) -> np.ndarray | None:
        if k == 0:
            return None
        if k >= len(raw_buffers):
            raise ModelError(where, f"names buffer {k}, but the model has {len(raw_buffers)} buffers")
        b = raw_buffers[k]
        data = b.get("data")
        if isinstance(data, np.ndarray):
            return data
        offset, length = int(b.get("offset", 0)), int(b.get("size", 0))
        if offset > 1:  # stored outside the flatbuffer, relative to the start of the file
            if offset + length > size:
                raise ModelError(f"model.buffers[{k}]", f"points at bytes {offset}..{offset + length} outside the "
                                 f"{size}-byte file; the file is truncated or corrupt")
            return np.frombuffer(buf, dtype=np.uint8, count=length, offset=offset)
        return None

    subgraphs = []
    for si, sg in enumerate(raw_subgraphs):
        where_sg = f"subgraph {si}"
        if "tensors" not in sg:
            raise ModelError(where_sg, "has no tensors vector (LiteRT refuses it)")
        tensors = []
        for ti, t in enumerate(sg["tensors"]):
            where = f"{where_sg} tensor {ti}"
            shape = _ints(r, t, "shape", where)
            if any(d < 0 for d in shape):
                raise ModelError(where + " shape", "must not hold negative dimensions", list(shape))
            tnum = int(t.get("type", 0))
            if tnum not in _TENSOR_TYPES:
                raise ModelError(where + " type", "is not a TensorType of the LiteRT schema", tnum)
            type_name = _TENSOR_TYPES[tnum]
            try:
                qt = by_tflite(tnum)
            except QuantSpecError:
                qt = None
            q = _quantization(t.get("quantization"))
            if q is not None:  # each tensor holds its own copy of its parameters
                r.spend(q.scale.size + q.zero_point.size, where + " quantization")
            k = int(t.get("buffer", 0))
            raw = buffer_data(k, where + " buffer")
            if raw is not None and qt is not None and qt.is_packed:  # unpacking copies the data
                r.spend(2 * raw.size, where + " data")
            data = _constant(f"{where} ({t.get('name', '')!r}) buffer {k}", raw, qt, shape) if raw is not None else None
            tensors.append(Tensor(
                index=ti, name=t.get("name", ""), shape=shape, type_name=type_name, dtype=qt,
                quantization=q, params=_params(q), buffer=k, data=data,
                shape_signature=_ints(r, t, "shape_signature", where) if "shape_signature" in t else None,
                is_variable=bool(t.get("is_variable", False)), sparse="sparsity" in t,
                external_buffer=int(t.get("external_buffer", 0))))
        nt = len(tensors)

        def check_indices(values: tuple[int, ...], where: str, optional: bool) -> tuple[int, ...]:
            for v in values:
                if not (0 <= v < nt or (optional and v == -1)):
                    raise ModelError(where, f"names tensor {v}, but the subgraph has {nt} tensors")
            return values

        operators = []
        for oi, op in enumerate(sg.get("operators") or []):
            where = f"{where_sg} operator {oi}"
            ci = int(op.get("opcode_index", 0))
            if ci >= len(codes):
                raise ModelError(where + " opcode_index", f"must be below the number of operator codes ({len(codes)})", ci)
            name, b, d, custom, op_version = codes[ci]
            options_type = None
            ot = int(op.get("builtin_options_type", 0))
            if ot:
                options_type = _schema.ENUMS["BuiltinOptions"].get(ot, f"UNKNOWN_{ot}")
            # LiteRT's parser reads the options table it expects for the op
            # (``op->builtin_options_as_<Table>()``), and defaults when the file holds another.
            expected = _schema.OP_OPTIONS.get(name, options_type)
            raw_opts = op.get("builtin_options") if options_type == expected else None
            opts = _options(expected, raw_opts)
            r.spend(sum(len(v) for v in opts.values() if isinstance(v, tuple)), where + " options")
            co = op.get("custom_options")
            if isinstance(co, np.ndarray):
                co = co.tobytes()
            else:
                co = None
                off, n = int(op.get("large_custom_options_offset", 0)), int(op.get("large_custom_options_size", 0))
                if off > 1:
                    if off + n > size:
                        raise ModelError(where + " custom options", f"point at bytes {off}..{off + n} outside the "
                                         f"{size}-byte file")
                    co = bytes(buf[off:off + n])
            operators.append(Operator(
                index=oi, name=name,
                inputs=check_indices(_ints(r, op, "inputs", where), where + " inputs", True),
                outputs=check_indices(_ints(r, op, "outputs", where), where + " outputs", False),
                options=MappingProxyType(opts), options_type=options_type, opcode_index=ci,
                builtin_code=b, deprecated_builtin_code=d, custom_code=custom, version=op_version,
                intermediates=check_indices(_ints(r, op, "intermediates", where), where + " intermediates", False),
                custom_options=co))
        subgraphs.append(Subgraph(
            index=si, name=sg.get("name", ""), tensors=tuple(tensors), operators=tuple(operators),
            inputs=check_indices(_ints(r, sg, "inputs", where_sg), where_sg + " inputs", False),
            outputs=check_indices(_ints(r, sg, "outputs", where_sg), where_sg + " outputs", False)))

    signatures = []
    for i, sd in enumerate(root.get("signature_defs") or []):
        sgi = int(sd.get("subgraph_index", 0))
        if sgi >= len(subgraphs):
            raise ModelError(f"signature_defs[{i}].subgraph_index", f"must be below {len(subgraphs)}", sgi)
        nt = len(subgraphs[sgi].tensors)

        def tmap(maps, where):
            out = {}
            for m in maps or []:
                ti = int(m.get("tensor_index", 0))
                if ti >= nt:
                    raise ModelError(where, f"names tensor {ti}, but subgraph {sgi} has {nt} tensors")
                out[m.get("name", "")] = ti
            return MappingProxyType(out)

        signatures.append(SignatureDef(key=sd.get("signature_key", ""), subgraph_index=sgi,
                                       inputs=tmap(sd.get("inputs"), f"signature_defs[{i}].inputs"),
                                       outputs=tmap(sd.get("outputs"), f"signature_defs[{i}].outputs")))

    metadata = {}
    for i, md in enumerate(root.get("metadata") or []):
        k = int(md.get("buffer", 0))
        data = buffer_data(k, f"metadata[{i}] buffer") if k else None
        metadata[md.get("name", "")] = data.tobytes() if data is not None else b""

    return Model(version=version, description=root.get("description", ""), subgraphs=tuple(subgraphs),
                 signature_defs=tuple(signatures), metadata=MappingProxyType(metadata), size=size,
                 operator_codes=tuple((c[0], c[4]) for c in codes))


def load_model(path_or_bytes: Any) -> Model:
    """Read a .tflite model from a path or its bytes (a :class:`Model` is returned as it is).

    Raises :class:`quantspec.errors.ModelError` for anything that is not a readable .tflite model
    (wrong identifier, truncated or corrupt structure, out-of-range indices, constant data that does
    not fit its tensor), naming the part of the model that is wrong.
    """
    if isinstance(path_or_bytes, Model):
        return path_or_bytes
    buf = _read_bytes(path_or_bytes)
    try:
        return _build(buf)
    except QuantSpecError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, OverflowError, MemoryError,
            RecursionError) as e:  # pragma: no cover - every path above is bounds-checked
        raise ModelError("model", "is malformed", detail=f"{type(e).__name__}: {e}") from None


#: the example int8 models that ship with quantspec (made by examples/make_litert_models.py)
EXAMPLE_MODELS = ("mlp_softmax.tflite", "cnn.tflite", "mixed.tflite")


def example_model(name: str = "mlp_softmax.tflite") -> str:
    """The path of an example model shipped in ``quantspec/data``: ``mlp_softmax.tflite`` (FC, FC,
    SOFTMAX; int8 in/out), ``cnn.tflite`` (CONV_2D, DEPTHWISE_CONV_2D, ADD, pooling, MEAN; float
    in/out) or ``mixed.tflite`` (RESIZE_BILINEAR, PAD, TANH, LOGISTIC, CONCATENATION, TRANSPOSE;
    int8 in/out).  The ``.tflite`` suffix may be left out."""
    from pathlib import Path

    if not isinstance(name, str):
        raise ModelError("name", "must be the name of an example model: " + ", ".join(EXAMPLE_MODELS), name)
    key = name if name.endswith(".tflite") else name + ".tflite"
    if key not in EXAMPLE_MODELS:
        raise ModelError("name", "must be the name of an example model: " + ", ".join(EXAMPLE_MODELS), name)
    return str(Path(__file__).resolve().parent.parent / "data" / key)
