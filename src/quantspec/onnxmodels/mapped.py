"""Reading a large ONNX file without copying its weights: the protobuf message is parsed by the
``onnx`` package as always, but from a copy of the file in which each large initializer's
``raw_data`` field has been left out; those initializers are then marked as external data whose
file is the model file itself, at the offset where their bytes lie, and are read (mapped) from
there when asked for.

Only the wire framing is read here — each field's number, wire type and length, so that the fields
around a skipped ``raw_data`` can be copied and the lengths of the messages that enclose it
re-encoded; every value is parsed by protobuf.  A file this reader does not find plain (the graph
in more than one piece, an initializer whose data is not one ``raw_data`` field, two initializers of
one name, anything malformed) is read by ``onnx.load`` as before.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

__all__ = ["load_mapped", "MAPPED_FROM"]

#: initializers whose raw data is at least this many bytes are left in the file
MAPPED_FROM = 1 << 20

_GRAPH = 7           # ModelProto.graph
_INITIALIZER = 5     # GraphProto.initializer
_RAW_DATA = 9        # TensorProto.raw_data
_PLAIN_TENSOR = {1, 2, 8, 9, 12}    # dims, data_type, name, raw_data, doc_string


class _NotPlain(Exception):
    pass


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise _NotPlain
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(buf, start: int, end: int):
    """(number, wire type, value start, value end, field start) of each field of the message in
    ``buf[start:end]``."""
    pos = start
    while pos < end:
        first = pos
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, after = _varint(buf, pos, end)
        elif wire == 1:
            after = pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos, end)
            after = pos + length
        elif wire == 5:
            after = pos + 4
        else:                                   # groups: not in ONNX's messages
            raise _NotPlain
        if after > end or number == 0:
            raise _NotPlain
        yield number, wire, pos, after, first
        pos = after


def _message(number: int, body: bytes) -> bytes:
    return _encode_varint(number << 3 | 2) + _encode_varint(len(body)) + body


def _lean_graph(buf, start: int, end: int, spans: list) -> bytes:
    out = []
    index = 0
    for number, wire, v0, v1, f0 in _fields(buf, start, end):
        if number != _INITIALIZER or wire != 2:
            out.append(buf[f0:v1])
            continue
        raw = None
        kept = []
        plain = True
        for n2, w2, u0, u1, g0 in _fields(buf, v0, v1):
            plain &= n2 in _PLAIN_TENSOR
            if n2 == _RAW_DATA and w2 == 2 and raw is None:
                raw = (u0, u1 - u0)
            else:
                kept.append(buf[g0:u1])
        if plain and raw is not None and raw[1] >= MAPPED_FROM:
            spans.append((index, raw[0], raw[1]))
            out.append(_message(_INITIALIZER, b"".join(kept)))
        else:
            out.append(buf[f0:v1])
        index += 1
    return b"".join(out)


def _lean_model(buf, size: int) -> tuple[bytes, list[tuple[int, int, int]]]:
    spans: list[tuple[int, int, int]] = []
    out = []
    graphs = 0
    for number, wire, v0, v1, f0 in _fields(buf, 0, size):
        if number == _GRAPH and wire == 2:
            graphs += 1
            if graphs > 1:
                raise _NotPlain
            out.append(_message(_GRAPH, _lean_graph(buf, v0, v1, spans)))
        else:
            out.append(buf[f0:v1])
    return b"".join(out), spans


def load_mapped(path: Path) -> tuple[Any, frozenset[str]] | None:
    """``(proto, names)``: the model at ``path`` parsed without the data of its large initializers,
    which are marked external with the model file as their file (``names``); None when the file is
    not one this reader takes (then read it with ``onnx.load``).  Raises what ``onnx`` raises on a
    file it cannot parse."""
    import onnx

    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size < MAPPED_FROM:
            return None
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            try:
                lean, spans = _lean_model(buf, size)
            except _NotPlain:
                return None
    if not spans:
        return None
    proto = onnx.load_model_from_string(lean)
    inits = proto.graph.initializer
    names = [inits[i].name for i, _, _ in spans]
    if len(set(names)) != len(names) or len({t.name for t in inits}) != len(inits):
        return None
    for i, offset, length in spans:
        t = inits[i]
        if t.HasField("raw_data") or t.data_location == onnx.TensorProto.EXTERNAL:
            return None
        t.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", path.name), ("offset", str(offset)), ("length", str(length))):
            e = t.external_data.add()
            e.key, e.value = key, value
    return proto, frozenset(names)
