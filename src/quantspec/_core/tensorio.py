"""Reading and writing tensor files: ``.npy``, ``.npz`` and ``.safetensors``.

- Every write is atomic: the data goes to a temporary file in the destination's directory, is
  flushed and fsync'ed, then renamed over the destination, so an interrupted run never leaves a
  half-written file behind.
- ``.npy`` cannot record ml_dtypes types (numpy writes them as opaque ``V1``).  quantspec writes
  such arrays to ``.npy`` as their plain storage integers: int4/int2 as int8 values, uint4/uint2 as
  uint8 values, 8/6/4-bit floats as uint8 bit patterns, bfloat16 as uint16 bit patterns; the caller
  is told so, and reads them back with an explicit ``dtype``.  ``.npz`` and ``.safetensors`` keep the
  exact type: ``.npz`` with a ``__quantspec_dtypes__`` entry (a JSON object name -> type),
  ``.safetensors`` with its own dtype codes, or a ``quantspec.dtype.<name>`` metadata entry for the
  types safetensors has no code for.
- The safetensors format (8-byte little-endian header length, JSON header, raw little-endian data)
  is read and written here directly; the ``safetensors`` package is not needed.

Malformed files raise :class:`quantspec.errors.TensorFileError`, naming the file and the problem.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..dtypes import QType, qtype
from ..errors import TensorFileError

__all__ = ["read_tensors", "write_tensors", "atomic_write_bytes", "check_suffix", "to_storage", "from_storage",
           "SUFFIXES"]

SUFFIXES = (".npy", ".npz", ".safetensors")
_DTYPES_KEY = "__quantspec_dtypes__"

# safetensors dtype codes <-> quantspec type names
_ST_CODES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "U16": "uint16", "I16": "int16", "I32": "int32",
    "I64": "int64", "F16": "float16", "BF16": "bfloat16", "F32": "float", "F64": "double",
    "F8_E4M3": "float8e4m3fn", "F8_E5M2": "float8e5m2", "F8_E8M0": "float8e8m0",
}
_ST_NAMES = {v: k for k, v in _ST_CODES.items()}


def to_storage(a: np.ndarray) -> np.ndarray:
    """The plain-numpy representation of an array (values for sub-byte ints, bit patterns for
    narrow floats); plain numpy arrays are returned unchanged."""
    t = _type_of(a)
    if t is None or t.dtype == t.storage:
        return a
    if t.kind == "int":  # int4/int2/uint4/uint2: the values
        return a.astype(t.storage)
    return a.view(t.storage)  # narrow floats, bfloat16: the bit patterns


def from_storage(a: np.ndarray, t: QType, argument: str = "input") -> np.ndarray:
    """Inverse of :func:`to_storage`: reinterpret plain storage as the type ``t``."""
    if a.dtype == t.dtype:
        return a
    if t.kind == "int" and t.bits < 8:
        if not np.issubdtype(a.dtype, np.integer):
            raise TensorFileError(argument, f"{t.name} data must be stored as integers", str(a.dtype))
        lo, hi = t.qmin, t.qmax
        if a.size and (a.min() < lo or a.max() > hi):
            raise TensorFileError(argument, f"{t.name} values must lie in [{lo}, {hi}]",
                                  (int(a.min()), int(a.max())))
        return a.astype(t.dtype)
    if a.dtype != t.storage:
        raise TensorFileError(argument, f"{t.name} data must be stored as {t.storage} bit patterns", str(a.dtype))
    return a.view(t.dtype)


def _type_of(a: np.ndarray) -> QType | None:
    try:
        return qtype(a.dtype)
    except Exception:
        return None


# -- atomic writing ----------------------------------------------------------------------------
def atomic_write_bytes(path: str | os.PathLike, chunks) -> None:
    """Write ``chunks`` (bytes or an iterable of bytes-like objects) to ``path`` atomically."""
    if isinstance(chunks, (bytes, bytearray, memoryview)):
        chunks = (chunks,)

    def writer(f):
        for c in chunks:
            f.write(c)

    _atomic_with(Path(path), writer)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _atomic_with(path: Path, writer) -> None:
    """Run ``writer(file)`` on a temporary file beside ``path``, then rename it over ``path``."""
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file ordinary permissions
    try:
        with os.fdopen(fd, "wb") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_suffix(path: str | os.PathLike, argument: str) -> Path:
    """``path`` as a Path, if it names a tensor file type quantspec reads and writes."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise TensorFileError(argument, f"must end in one of {', '.join(SUFFIXES)}", str(path))
    return path


# -- reading -----------------------------------------------------------------------------------
def read_tensors(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read every tensor of a .npy (one tensor, named after the file's stem), .npz or
    .safetensors file, with its exact type where the file records one."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise TensorFileError("path", f"must end in one of {', '.join(SUFFIXES)}", str(path))
    if not path.is_file():
        raise TensorFileError("path", "must name an existing file", str(path))
    try:
        if suffix == ".npy":
            return {path.stem: np.load(path, allow_pickle=False)}
        if suffix == ".npz":
            return _read_npz(path)
        return _read_safetensors(path)
    except TensorFileError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError, UnicodeDecodeError) as e:
        raise TensorFileError("path", f"is not a readable {suffix} file", str(path), detail=str(e)) from None


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        names = list(z.files)
        types: dict[str, str] = {}
        if _DTYPES_KEY in names:
            try:
                types = json.loads(bytes(z[_DTYPES_KEY]).decode())
                assert isinstance(types, dict)
            except Exception:
                raise TensorFileError("path", f"has a malformed {_DTYPES_KEY} entry", str(path)) from None
            names.remove(_DTYPES_KEY)
        out = {}
        for n in names:
            a = z[n]
            if n in types:
                a = from_storage(a, qtype(types[n], f"{path.name}:{_DTYPES_KEY}[{n}]"), f"{path.name}:{n}")
            out[n] = a
        return out


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    if len(raw) < 8:
        raise TensorFileError("path", "is too short to be a safetensors file", str(path))
    (n,) = struct.unpack("<Q", raw[:8])
    if n > len(raw) - 8:
        raise TensorFileError("path", "has a safetensors header longer than the file", str(path))
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TensorFileError("path", "has a safetensors header that is not JSON", str(path), detail=str(e)) from None
    if not isinstance(header, dict):
        raise TensorFileError("path", "has a safetensors header that is not a JSON object", str(path))
    meta = header.pop("__metadata__", None) or {}
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, info in header.items():
        try:
            code, shape, (start, end) = info["dtype"], info["shape"], info["data_offsets"]
            shape = tuple(int(s) for s in shape)
        except Exception:
            raise TensorFileError("path", f"tensor {name!r} has a malformed header entry", str(path)) from None
        if code not in _ST_CODES:
            raise TensorFileError("path", f"tensor {name!r} has a dtype quantspec cannot read", code)
        t = qtype(_ST_CODES[code])
        count = int(np.prod(shape, dtype=np.int64))
        if not (0 <= start <= end <= len(data)) or end - start != count * t.dtype.itemsize:
            raise TensorFileError("path", f"tensor {name!r} has data offsets that do not fit its shape and dtype",
                                  (start, end))
        a = np.frombuffer(data[start:end], dtype=t.dtype.newbyteorder("<")).astype(t.dtype, copy=True).reshape(shape)
        special = meta.get(f"quantspec.dtype.{name}")
        if special:
            a = from_storage(a, qtype(special, f"{path.name}:__metadata__"), f"{path.name}:{name}")
        out[name] = a
    return out


# -- writing -----------------------------------------------------------------------------------
def write_tensors(path: str | os.PathLike, tensors: Mapping[str, np.ndarray]) -> list[str]:
    """Write ``tensors`` atomically; return notes for the user (e.g. how a .npy stored a type)."""
    path = Path(path)
    suffix = path.suffix.lower()
    notes: list[str] = []
    if suffix not in SUFFIXES:
        raise TensorFileError("output", f"must end in one of {', '.join(SUFFIXES)}", str(path))
    if suffix == ".npy":
        if len(tensors) != 1:
            raise TensorFileError("output", "a .npy file holds exactly one tensor; use .npz or .safetensors",
                                  f"{len(tensors)} tensors")
        (a,) = tensors.values()
        t = _type_of(a)
        s = to_storage(a)
        if s is not a:
            how = "values" if t.kind == "int" else "bit patterns"
            notes.append(f"{path.name}: .npy cannot record {t.name}; stored as {s.dtype} {how} "
                         f"(read it back with dtype {t.name}, or use .npz/.safetensors)")
        _atomic_with(path, lambda f: np.save(f, np.ascontiguousarray(s), allow_pickle=False))
        return notes
    if suffix == ".npz":
        types, arrays = {}, {}
        for n, a in tensors.items():
            if n == _DTYPES_KEY:
                raise TensorFileError("tensors", "a tensor may not be named like quantspec's type entry", n)
            s = to_storage(a)
            if s is not a:
                types[n] = _type_of(a).name
            arrays[n] = s
        if types:
            arrays[_DTYPES_KEY] = np.frombuffer(json.dumps(types).encode(), dtype=np.uint8)
        _atomic_with(path, lambda f: np.savez(f, **arrays))
        return notes
    # safetensors
    header: dict = {}
    meta: dict = {}
    blobs = []
    offset = 0
    for n, a in tensors.items():
        t = _type_of(a)
        if t is None:
            raise TensorFileError("tensors", "has a dtype safetensors cannot hold", f"{n}: {a.dtype}")
        if t.name in _ST_NAMES:
            code, s = _ST_NAMES[t.name], a
        else:
            s = to_storage(a)
            code = _ST_NAMES[qtype(s.dtype).name]
            meta[f"quantspec.dtype.{n}"] = t.name
        b = np.ascontiguousarray(s).astype(s.dtype.newbyteorder("<"), copy=False).tobytes()
        header[n] = {"dtype": code, "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    atomic_write_bytes(path, [struct.pack("<Q", len(h)), h, *blobs])
    return notes
