"""What kind of file a command was given, from its first bytes (its name only where they cannot tell).

``quantspec check`` and ``quantspec convert`` take more than one kind of file; :mod:`quantspec.cli`
routes each to its package with these rules:

- a ``.tflite`` model has ``TFL3`` at bytes 4..8 (the flatbuffer file identifier);
- a serialized ONNX ``ModelProto`` begins with a protobuf tag that is one of ModelProto's fields with
  its wire type (:func:`looks_like_onnx`: a guess from the content for choosing a reader; the reader
  decides);
- a checkpoint (``quantspec convert``): a directory, or a file named .safetensors / .npz / .npy /
  .json, or one whose first bytes are a safetensors header (8 bytes of length, then ``{``), a zip
  (.npz) or an .npy.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["head", "looks_like_onnx", "looks_like_tflite", "model_kind", "is_onnx_source", "CHECKPOINT_SUFFIXES"]

# ModelProto's fields (number -> protobuf wire type): what the first bytes of a serialized model can be
_MODEL_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2, 26: 2}
#: the names quantspec convert takes as checkpoints whatever their content
CHECKPOINT_SUFFIXES = (".safetensors", ".npz", ".npy", ".json")


def head(path, n: int = 16) -> bytes | None:
    """The first ``n`` bytes of the file at ``path``; None where it cannot be read (the reader that
    gets it then says why)."""
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return None


def looks_like_tflite(data: bytes) -> bool:
    return data[4:8] == b"TFL3"


def looks_like_onnx(data: bytes) -> bool:
    """Whether ``data`` (the first bytes of a file) can begin a serialized ONNX ``ModelProto``: not a
    .tflite and a first protobuf tag that is a ModelProto field with its wire type."""
    if len(data) < 2 or looks_like_tflite(data):
        return False
    tag, shift, i = 0, 0, 0
    while i < min(len(data), 5):
        b = data[i]
        tag |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            break
        shift += 7
    else:
        return False
    return _MODEL_FIELDS.get(tag >> 3) == (tag & 7)


def model_kind(path) -> str | None:
    """``"tflite"`` or ``"onnx"`` by the file's first bytes (a file that cannot be read, or an empty
    one, by its name); None when it is neither."""
    data = head(path)
    suffix = Path(path).suffix.lower()
    if not data:
        return {".tflite": "tflite", ".onnx": "onnx"}.get(suffix)
    if looks_like_tflite(data):
        return "tflite"
    if looks_like_onnx(data) or suffix == ".onnx":
        return "onnx"
    return "tflite" if suffix == ".tflite" else None


def is_onnx_source(path) -> bool:
    """Whether ``quantspec convert``'s SRC is an ONNX model rather than a checkpoint (module docstring)."""
    p = Path(path)
    if p.is_dir() or p.suffix.lower() in CHECKPOINT_SUFFIXES:
        return False
    if p.suffix.lower() == ".onnx":
        return True
    data = head(p)
    if data is None or data[8:9] == b"{" or data[:4] == b"PK\x03\x04" or data[:6] == b"\x93NUMPY":
        return False
    return looks_like_onnx(data)
