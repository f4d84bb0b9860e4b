"""The flatbuffer verifier LiteRT runs before it reads a model, over the whole schema.

LiteRT loads a .tflite file only after the flatbuffers ``Verifier`` has accepted it
(``FlatBufferModel::VerifyAndBuildFromAllocation``: "The model is not a valid Flatbuffer buffer"
otherwise).  quantspec's reader (:mod:`.model`) checks what it reads; this module checks what the
verifier checks, everywhere in the file, including the tables quantspec never reads, so that a file
quantspec accepts is one LiteRT accepts too.  The rules, with LiteRT's default verifier options
(alignment checked, at most 64 nested tables and 1,000,000 tables, a buffer below 2^31 - 1 bytes):

- the file is at least 12 bytes and holds the identifier ``TFL3`` at bytes 4..8;
- a range is valid when its length is below the file size and it ends inside the file (the file
  size being at most 2^31 - 2: LiteRT verifies only that much of a larger file);
- an offset field (uoffset, uint32) is 4-aligned, not 0, below 2^31, and points inside the file;
- a table is 4-aligned; its vtable (``table - soffset``) is 2-aligned, its size is even and the
  whole vtable lies inside the file; a scalar field present in the vtable is aligned to its own
  size and lies inside the file (its offset inside the table is not compared with the table size);
- a vector (or string) length is 4-aligned, below ``(2^31 - 1) / element size``, and the length
  with the elements lies inside the file; the elements' own alignment is not checked;
- a string is followed by a NUL byte inside the file;
- the elements of a vector of tables or strings are offsets read without the offset-field checks
  (the element may be 0 or point anywhere): the table or string they reach is then verified;
- a union value is verified as the table its type field names; a type the schema does not know,
  or NONE, is accepted whatever the offset points at (the offset field itself is still checked).

The schema facts (every table reachable from ``Model``, its fields, their ids and types) are the
data in :mod:`._schema`.
"""

from __future__ import annotations

import struct
from typing import Any

from ..errors import ModelError
from . import _schema

__all__ = ["verify", "MAX_BUFFER_SIZE", "MAX_DEPTH", "MAX_TABLES", "MIN_BUFFER_SIZE"]

#: FLATBUFFERS_MAX_BUFFER_SIZE (the largest soffset)
MAX_BUFFER_SIZE = 2**31 - 1
#: the verifier's defaults: nesting depth and number of tables
MAX_DEPTH = 64
MAX_TABLES = 1_000_000
#: FLATBUFFERS_MIN_BUFFER_SIZE: a root offset, an soffset and a vtable of two uint16
MIN_BUFFER_SIZE = 12

_SIZES = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
          "uint64": 8, "float32": 4, "float64": 8}

_REFUSES = "LiteRT's flatbuffer verifier refuses the file (\"not a valid Flatbuffer buffer\")"


class _Invalid(Exception):
    """One verifier rule broken; turned into a ModelError naming where, at the top."""

    def __init__(self, rule: str):
        self.rule = rule


def _plan(name: str) -> tuple:
    """A table's fields as the verifier walks them: (name, vtable slot, kind, detail)."""
    out = []
    for fname, fid, ftype, _default, _enum in _schema.TABLES[name]:
        slot = 4 + 2 * fid
        if ftype in _SIZES:
            out.append((fname, slot, "scalar", _SIZES[ftype]))
        elif ftype == "string":
            out.append((fname, slot, "string", None))
        elif ftype.startswith("union:"):
            type_slot = next(4 + 2 * f[1] for f in _schema.TABLES[name] if f[0] == fname + "_type")
            out.append((fname, slot, "union", (type_slot, _schema.ENUMS[ftype[6:]])))
        elif ftype.startswith("["):
            elem = ftype[1:-1]
            if elem in _SIZES:
                out.append((fname, slot, "vector", _SIZES[elem]))
            elif elem == "string":
                out.append((fname, slot, "strings", None))
            else:
                out.append((fname, slot, "tables", elem))
        else:
            out.append((fname, slot, "table", ftype))
    return tuple(out)


_PLANS = {name: _plan(name) for name in _schema.TABLES}


class _Verifier:
    def __init__(self, buf: bytes):
        self.buf = buf
        self.size = min(len(buf), MAX_BUFFER_SIZE - 1)
        self.tables = 0
        self.depth = 0
        self.done: dict[tuple[int, str], int] = {}
        self.path: list[str] = []

    # -- the primitive checks (Verifier::Verify, VerifyAlignment, VerifyOffset, ...) ------------
    def range(self, pos: int, length: int) -> None:
        if not (length < self.size and 0 <= pos <= self.size - length):
            raise _Invalid(f"lies outside the file (bytes {pos}..{pos + length} of a {self.size}-byte file)")

    def aligned(self, pos: int, align: int) -> None:
        if pos % align:
            raise _Invalid(f"is not aligned: byte {pos} is not a multiple of {align}")

    def u32(self, pos: int) -> int:
        return struct.unpack_from("<I", self.buf, pos)[0]

    def u16(self, pos: int) -> int:
        return struct.unpack_from("<H", self.buf, pos)[0]

    def offset(self, pos: int) -> int:
        self.aligned(pos, 4)
        self.range(pos, 4)
        o = self.u32(pos)
        if o == 0:
            raise _Invalid("is an offset of 0 (it points at itself)")
        if o >= 2**31:
            raise _Invalid(f"is an offset of {o}, beyond the largest a flatbuffer allows (2^31 - 1)")
        self.range(pos + o, 1)
        return pos + o

    def vector(self, pos: int, elem_size: int) -> int:
        self.aligned(pos, 4)
        self.range(pos, 4)
        n = self.u32(pos)
        if n >= MAX_BUFFER_SIZE // elem_size:
            raise _Invalid(f"declares {n} elements, more than a flatbuffer can hold")
        self.range(pos, 4 + elem_size * n)
        return n

    def string(self, pos: int) -> None:
        n = self.vector(pos, 1)
        end = pos + 4 + n
        try:
            self.range(end, 1)
        except _Invalid:
            raise _Invalid("is a string whose terminating NUL byte lies outside the file") from None
        if self.buf[end] != 0:
            raise _Invalid(f"is a string not terminated by a NUL byte (byte {end} is {self.buf[end]})")

    # -- tables ------------------------------------------------------------------------------
    def table(self, pos: int, name: str) -> None:
        key = (pos, name)
        seen = self.done.get(key)
        if seen is not None:              # verified before: the C++ verifier walks it again, and counts
            self.tables += seen
            if self.tables > MAX_TABLES:
                raise _Invalid(f"makes the file hold more than {MAX_TABLES} tables")
            return
        before = self.tables
        self.aligned(pos, 4)
        self.range(pos, 4)
        vt = pos - struct.unpack_from("<i", self.buf, pos)[0]
        self.tables += 1
        self.depth += 1
        if self.depth > MAX_DEPTH or self.tables > MAX_TABLES:
            raise _Invalid(f"makes the file nest more than {MAX_DEPTH} tables or hold more than {MAX_TABLES}")
        self.path.append(" (vtable)")
        self.aligned(vt, 2)
        self.range(vt, 2)
        vsize = self.u16(vt)
        if vsize & 1:
            raise _Invalid(f"has an odd vtable size ({vsize})")
        self.range(vt, vsize)
        self.path.pop()
        for fname, slot, kind, detail in _PLANS[name]:
            off = self.u16(vt + slot) if slot < vsize else 0
            if not off:
                continue
            self.path.append(fname)
            f = pos + off
            if kind == "scalar":
                self.aligned(f, detail)
                self.range(f, detail)
            else:
                target = self.offset(f)
                if kind == "string":
                    self.string(target)
                elif kind == "table":
                    self.table(target, detail)
                elif kind == "vector":
                    self.vector(target, detail)
                elif kind == "union":
                    type_slot, members = detail
                    type_off = self.u16(vt + type_slot) if type_slot < vsize else 0
                    member = members.get(self.buf[pos + type_off] if type_off else 0)
                    if member in _PLANS:
                        self.path[-1] = f"{fname} ({member})"
                        self.table(target, member)
                else:  # a vector of strings or of tables
                    n = self.vector(target, 4)
                    for i in range(n):
                        e = target + 4 + 4 * i
                        self.path.append(f"[{i}]")
                        if kind == "strings":
                            self.string(e + self.u32(e))
                        else:
                            self.table(e + self.u32(e), detail)
                        self.path.pop()
            self.path.pop()
        self.depth -= 1
        self.done[key] = self.tables - before


def verify(buf: Any) -> None:
    """Raise :class:`~quantspec.errors.ModelError` unless LiteRT's flatbuffer verifier accepts the
    .tflite bytes ``buf``; the message names the part of the file that breaks a rule."""
    v = _Verifier(buf)
    if len(buf) < MIN_BUFFER_SIZE:
        raise ModelError("model", f"is {len(buf)} bytes, too short to be a .tflite flatbuffer")
    if bytes(buf[4:8]) != b"TFL3":
        raise ModelError("model", "is not a .tflite model: the flatbuffer file identifier is not 'TFL3'",
                         bytes(buf[4:8]))
    try:
        v.path.append("root offset")
        root = v.offset(0)
        v.path[-1] = "model"
        v.table(root, "Model")
    except _Invalid as e:
        where = v.path[0] + "".join(p if p.startswith(("[", " ")) else "." + p for p in v.path[1:])
        raise ModelError(where, e.rule + "; " + _REFUSES) from None
