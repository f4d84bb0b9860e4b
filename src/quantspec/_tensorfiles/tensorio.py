"""Reading and writing tensor files: ``.npy``, ``.npz`` and ``.safetensors``.

- Every write is atomic: the data goes to a temporary file in the destination's directory, is
  flushed and fsync'ed, then renamed over the destination, so an interrupted run never leaves a
  half-written file behind.  On Linux the temporary file is unnamed (``O_TMPFILE``) until it is
  complete, so even a killed process leaves no temporary file.
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

import collections
import io
import json
import mmap
import os
import secrets
import struct
import tempfile
import warnings
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import QType, qtype
from ..errors import QuantSpecError, TensorFileError

__all__ = ["read_tensors", "write_tensors", "offsets_problem", "Stream", "release", "check_suffix", "to_storage",
           "from_storage", "SUFFIXES", "MAP_FROM"]

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
        least, most = _span(a)
        if least < lo or most > hi:
            raise TensorFileError(argument, f"{t.name} values must lie in [{lo}, {hi}]", (least, most))
        if isinstance(a, np.memmap) and a.dtype.itemsize == 1:
            # a mapped file (any size): the byte values in range are the codes.  A view keeps the
            # file's pages instead of a copy in memory; ml_dtypes and quantspec's kernels read the
            # code's low bits (a negative value's high bits are set, where astype would clear them)
            return a.view(t.dtype)
        return a.astype(t.dtype)
    if a.dtype != t.storage:
        raise TensorFileError(argument, f"{t.name} data must be stored as {t.storage} bit patterns", str(a.dtype))
    return a.view(t.dtype)


def _span(a: np.ndarray) -> tuple[int, int]:
    """The least and the greatest value of an integer array ((0, 0) when empty), read a slab at a
    time: a mapped file's pages are given back after each (:func:`release`)."""
    flat = a.reshape(-1, order="A")  # a view of a C- or Fortran-ordered file's data
    least = most = 0
    for i in range(0, flat.size, _SPAN_SLAB):
        piece = flat[i:i + _SPAN_SLAB]
        lo, hi = int(piece.min()), int(piece.max())
        least, most = (lo, hi) if i == 0 else (min(least, lo), max(most, hi))
        release(piece)
    return least, most


_SPAN_SLAB = 1 << 24


def _type_of(a: np.ndarray) -> QType | None:
    return _type_of_dtype(a.dtype)


def _type_of_dtype(dt: np.dtype) -> QType | None:
    try:
        return qtype(dt)
    except Exception:
        return None


# -- atomic writing ----------------------------------------------------------------------------
def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _unnamed_file(directory: Path) -> int | None:
    """A file descriptor of a new unnamed file in ``directory`` (Linux ``O_TMPFILE``), or None where
    the system or the file system has none (or /proc, which names it later, is not mounted)."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        return os.open(directory, flag | os.O_RDWR | os.O_CLOEXEC, 0o666)  # the umask applies
    except OSError:  # not supported here (EOPNOTSUPP, EISDIR on old kernels...): a named file
        return None


def _name_unnamed(fd: int, directory: Path, name: str) -> Path:
    """Link the unnamed file ``fd`` into ``directory`` under a fresh hidden name beside ``name``."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        while True:
            tmp = f".{name}.{secrets.token_hex(4)}.tmp"
            try:  # linkat(AT_SYMLINK_FOLLOW) through /proc: Python calls linkat when dst_dir_fd is given
                os.link(f"/proc/self/fd/{fd}", tmp, dst_dir_fd=dfd, follow_symlinks=True)
                return directory / tmp
            except FileExistsError:
                continue
    finally:
        os.close(dfd)


def _atomic_with(path: Path, writer) -> None:
    """Run ``writer(file)`` on a temporary file beside ``path``, then rename it over ``path``.
    A failure of the file system (no such directory, no permission, no space) is a
    :class:`TensorFileError` naming the file; nothing is left behind.

    Where Linux allows it (``O_TMPFILE``), the temporary file has no name while it is written and is
    linked under a hidden name only when complete, just before the rename: a process killed meanwhile,
    even by SIGKILL, leaves nothing.  Elsewhere it is a named hidden file ``.NAME.XXXX.tmp``, removed
    on any error, on Ctrl-C and (in the ``quantspec`` command) on SIGTERM / SIGHUP; only SIGKILL or a
    power cut can leave it behind there."""
    directory = path.parent if str(path.parent) else Path(".")
    fd = _unnamed_file(directory)
    tmp = None
    try:
        if fd is None:
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise TensorFileError("output", "cannot be created: its directory must exist and be writable", str(path),
                              detail=e.strerror or str(e)) from None
    try:
        if tmp is not None:
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file ordinary permissions
        with os.fdopen(fd, "w+b") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
            if tmp is None:
                try:
                    tmp = _name_unnamed(f.fileno(), directory, path.name)
                except OSError:  # the file system would not link it: copy it to a named file
                    tmp = _copied(f, directory, path.name)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(e, OSError):
            raise TensorFileError("output", "could not be written", str(path), detail=e.strerror or str(e)) from None
        raise


def _copied(f, directory: Path, name: str) -> str:
    """A named copy (beside ``name``) of the unnamed file ``f``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as g:
            f.seek(0)
            while chunk := f.read(1 << 24):
                g.write(chunk)
            g.flush()
            os.fsync(g.fileno())
    except BaseException:
        os.unlink(tmp)
        raise
    return tmp


def check_suffix(path: str | os.PathLike, argument: str) -> Path:
    """``path`` as a Path, if it names a tensor file type quantspec reads and writes."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise TensorFileError(argument, f"must end in one of {', '.join(SUFFIXES)}", str(path))
    return path


# -- reading -----------------------------------------------------------------------------------
MAP_FROM = 1 << 24
"""With ``mapped=True``, .npy files, stored .npz members and safetensors tensors of at least this
many bytes are memory-mapped read-only instead of read (smaller ones are read: a mapping costs more than it saves)."""


def read_tensors(path: str | os.PathLike, *, mapped: bool = False) -> dict[str, np.ndarray]:
    """Read every tensor of a .npy (one tensor, named after the file's stem), .npz or
    .safetensors file, with its exact type where the file records one.

    ``mapped=True`` maps large .npy files and safetensors tensors read-only (``np.memmap``) instead
    of reading them: nothing is read until it is used, and the pages are the file's own (the system
    can drop them again), so a file larger than memory can be processed a slab at a time.  .npz
    members are mapped too where they are stored uncompressed (as ``np.savez`` and quantspec write
    them); compressed ones are read.  Mapped int4/int2/uint4/uint2 codes (stored a byte each) are a
    view of the file's bytes (:func:`from_storage`): right values, but a negative code's high bits
    are set, so compare them as values, not as bytes."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise TensorFileError("path", f"must end in one of {', '.join(SUFFIXES)}", str(path))
    if not path.is_file():
        raise TensorFileError("path", "must name an existing file", str(path))
    try:
        with warnings.catch_warnings():
            # numpy parses a .npy header as a Python literal: a damaged one ("(1and 2)") makes Python's
            # tokenizer print a SyntaxWarning on stderr before the error this function raises
            warnings.simplefilter("ignore", SyntaxWarning)
            if suffix == ".npy":
                mode = "r" if mapped and path.stat().st_size >= MAP_FROM else None
                return {path.stem: np.load(path, mmap_mode=mode, allow_pickle=False)}
            if suffix == ".npz":
                return _read_npz(path, mapped)
            return _read_safetensors(path, mapped)
    except QuantSpecError:  # ours, already naming the file and the rule
        raise
    except Exception as e:  # numpy's and zipfile's readers fail on damaged files in many ways (ValueError,
        # OSError, EOFError, BadZipFile, KeyError, a tokenizer error from the .npy header, TypeError,
        # NotImplementedError for an unknown zip method or version, MemoryError for an absurd shape)
        raise TensorFileError("path", f"is not a readable {suffix} file", str(path),
                              detail=f"{type(e).__name__}: {e}") from None


def _read_npz(path: Path, mapped: bool = False) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        names = list(z.files)
        twice = sorted(n for n, k in collections.Counter(names).items() if k > 1)
        if twice:  # a zip may hold one name twice; which member is read would depend on how it is read
            raise TensorFileError("path", "holds two members of one name", str(path), detail=f"member {twice[0]!r}")
        types: dict[str, str] = {}
        if _DTYPES_KEY in names:
            try:
                types = json.loads(bytes(z[_DTYPES_KEY]).decode())
                assert isinstance(types, dict)
            except Exception:
                raise TensorFileError("path", f"has a malformed {_DTYPES_KEY} entry", str(path)) from None
            names.remove(_DTYPES_KEY)
        maps = _npz_maps(path) if mapped else {}
        out = {}
        for n in names:
            a = maps[n] if n in maps else z[n]
            if not isinstance(a, np.ndarray):  # np.load gives a member that is not .npy as its raw bytes
                raise TensorFileError("path", "holds a member that is not a .npy array (an .npz file holds "
                                      "only .npy members)", str(path), detail=f"member {n!r}")
            if n in types:
                a = from_storage(a, _recorded_type(types[n], f"{path.name}:{_DTYPES_KEY}[{n}]"), f"{path.name}:{n}")
            out[n] = a
        return out


def _npz_maps(path: Path) -> dict[str, np.ndarray]:
    """The members of an .npz file that can be mapped: stored uncompressed (as ``np.savez`` and
    quantspec write them), unencrypted, of at least :data:`MAP_FROM` bytes.  A member's data lies
    after its local zip header and its .npy header.  Anything unusual is left to ``np.load``."""
    maps = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for info in zf.infolist():
            if (info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1 or not info.filename.endswith(".npy")
                    or info.file_size < MAP_FROM):
                continue
            f.seek(info.header_offset)
            local = f.read(30)
            if len(local) < 30 or local[:4] != b"PK\x03\x04":
                continue
            name_len, extra_len = struct.unpack("<HH", local[26:30])
            start = info.header_offset + 30 + name_len + extra_len
            f.seek(start)
            try:
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(f)
            except (ValueError, OSError):
                continue
            offset = f.tell()
            count = int(np.prod(shape, dtype=np.int64))
            nbytes = count * dtype.itemsize
            if dtype.hasobject or nbytes < MAP_FROM or offset + nbytes > start + info.file_size:
                continue
            maps[info.filename[:-4]] = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape,
                                                 order="F" if fortran else "C")
    return maps


def _read_safetensors(path: Path, mapped: bool = False) -> dict[str, np.ndarray]:
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise TensorFileError("path", "is too short to be a safetensors file", str(path))
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise TensorFileError("path", "has a safetensors header longer than the file", str(path))
        raw_header = f.read(n)
        try:
            header = json.loads(raw_header.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
        except _DuplicateKey as e:
            raise TensorFileError("path", "has a safetensors header that names a key twice", str(path),
                                  detail=f"key {e.args[0]!r}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TensorFileError("path", "has a safetensors header that is not JSON", str(path),
                                  detail=str(e)) from None
        if not isinstance(header, dict):
            raise TensorFileError("path", "has a safetensors header that is not a JSON object", str(path))
        meta = header.pop("__metadata__", None)
        meta = {} if meta is None else meta
        if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
            raise TensorFileError("path", "has a safetensors __metadata__ that is not an object of strings", str(path))
        for key in list(header) + list(meta) + list(meta.values()):
            try:
                key.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate from a \u escape: not JSON text (RFC 8259 §8.2)
                raise TensorFileError("path", "has a safetensors header with a string that is not UTF-8 text "
                                      "(a lone surrogate escape)", str(path), detail=f"string {key!r}") from None
        base, length = 8 + n, size - 8 - n
        entries = _safetensors_entries(header, length, path)
        out = {}
        for name, t, shape, start, end in entries:
            stored = t.dtype.newbyteorder("<")
            if mapped and end - start >= MAP_FROM and stored == t.dtype:
                a = np.memmap(path, dtype=t.dtype, mode="r", offset=base + start, shape=shape)
            else:
                f.seek(base + start)
                a = np.frombuffer(f.read(end - start), dtype=stored).astype(t.dtype, copy=True).reshape(shape)
            special = meta.get(f"quantspec.dtype.{name}")
            if special:
                a = from_storage(a, _recorded_type(special, f"{path.name}:__metadata__"), f"{path.name}:{name}")
            out[name] = a
    return out


def _recorded_type(name: Any, where: str) -> QType:
    """The type a file records for a tensor by name (.npz's type entry, safetensors metadata): a
    TensorFileError naming the file when it is not a type name quantspec knows (a damaged file)."""
    if not isinstance(name, str):
        raise TensorFileError(where, "must record a type name (a string)", name)
    try:
        return qtype(name, where)
    except QuantSpecError:
        raise TensorFileError(where, "records a type quantspec does not know", name) from None


class _DuplicateKey(Exception):
    pass


def _no_duplicate_keys(pairs: list) -> dict:
    """A JSON object, refusing a key given twice (``json`` would keep the last silently)."""
    out = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def offsets_problem(start: int, end: int, nbytes: int, length: int) -> str | None:
    """What is wrong with a safetensors tensor's ``data_offsets`` [start, end) for ``nbytes`` bytes of data
    in a data section of ``length`` bytes, or None.  A tensor whose offsets fit its shape and dtype but
    end past the data the file holds is a truncated file (a copy cut short, a download not finished)."""
    if start <= end and end - start == nbytes and end > length:
        return (f"is cut short: the file is truncated (its data ends at byte {length} of the data section, the "
                f"tensor's at byte {end})")
    if not (start <= end <= length) or end - start != nbytes:
        return "has data offsets that do not fit its shape and dtype"
    return None


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _safetensors_entries(header: dict, length: int, path: Path) -> list[tuple[str, QType, tuple, int, int]]:
    """The tensors of a safetensors header as ``(name, type, shape, start, end)``, checked as the
    format requires: a known dtype, a shape of non-negative integers, two integer data offsets whose
    span holds exactly the shape's elements, and spans that together tile the data after the header
    with no gap and no overlap (the rule of the format and of the ``safetensors`` reader)."""
    entries = []
    for name, info in header.items():
        try:
            code, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        except Exception:
            raise TensorFileError("path", f"tensor {name!r} has a malformed header entry", str(path)) from None
        if (not isinstance(code, str) or not isinstance(shape, list) or not all(_is_count(s) for s in shape)
                or not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(o) for o in offsets)):
            raise TensorFileError("path", f"tensor {name!r} has a malformed header entry (dtype a string, shape a "
                                  "list of non-negative integers, data_offsets two non-negative integers)",
                                  str(path), detail=f"entry {info!r}"[:300])
        if code not in _ST_CODES:
            raise TensorFileError("path", f"tensor {name!r} has a dtype quantspec cannot read", code)
        t = qtype(_ST_CODES[code])
        start, end = offsets
        count = 1
        for s in shape:  # Python integers: no overflow
            count *= s
        problem = offsets_problem(start, end, count * t.dtype.itemsize, length)
        if problem:
            raise TensorFileError("path", f"tensor {name!r} {problem}", str(path), detail=f"data offsets {[start, end]}")
        entries.append((name, t, tuple(shape), start, end))
    covered = 0
    for name, _, _, start, end in sorted(entries, key=lambda e: (e[3], e[4])):
        if start != covered:
            raise TensorFileError("path", f"tensor {name!r} has data offsets that " + (
                "overlap another tensor's" if start < covered else "leave a gap before it") +
                " (a safetensors file's tensors tile its data exactly)", (start, end))
        covered = end
    if covered != length:
        raise TensorFileError("path", "has data after its last tensor (a safetensors file's tensors tile its "
                              "data exactly)", str(path), detail=f"{length - covered} bytes not covered")
    return entries


def release(a: np.ndarray) -> None:
    """Let the system drop the pages of a mapped array once they have been used (a read-only
    mapping's pages are the file's; they are read again if touched).  Anything else: nothing."""
    mm = getattr(a, "_mmap", None)
    if mm is None or not hasattr(mm, "madvise") or not a.flags.c_contiguous or a.nbytes == 0:
        return
    try:
        origin = np.frombuffer(mm, np.uint8, count=1).ctypes.data
        first = a.ctypes.data - origin
        page = mmap.PAGESIZE
        lo, hi = -(-first // page) * page, (first + a.nbytes) // page * page
        if hi > lo:
            mm.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
    except (ValueError, OSError, AttributeError):  # a best effort: the pages stay until the system needs them
        pass


# -- writing -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stream:
    """A tensor written a piece at a time: its ``shape`` and ``dtype`` (header first), then the
    arrays of ``pieces`` in order, which together hold its elements in C order."""

    shape: tuple[int, ...]
    dtype: np.dtype
    pieces: Iterable[np.ndarray]


def _as_stream(a) -> Stream:
    if isinstance(a, Stream):
        return a
    a = np.asarray(a)
    return Stream(a.shape, a.dtype, (a,))


def _storage_dtype(dt: np.dtype) -> np.dtype:
    t = _type_of_dtype(dt)
    return dt if t is None else np.dtype(t.storage)


def _write_pieces(f, name: str, s: Stream, byteorder: str = "=") -> None:
    """Write the pieces' storage bytes (``byteorder`` "<" for little-endian files), checking that
    they hold exactly the elements the header promised."""
    want, done = int(np.prod(s.shape, dtype=np.int64)), 0
    for piece in s.pieces:
        if piece.dtype != s.dtype:
            raise TensorFileError("tensors", f"tensor {name!r} changed type while it was written",
                                  f"{piece.dtype} after {s.dtype}")
        raw = to_storage(piece)
        if byteorder == "<":
            raw = raw.astype(raw.dtype.newbyteorder("<"), copy=False)
        raw = np.ascontiguousarray(raw)
        done += raw.size
        if done > want:
            break
        if raw.size:
            f.write(memoryview(raw.reshape(-1).view(np.uint8)))
        del piece, raw  # not held while the next piece is computed
    if done != want:
        raise TensorFileError("tensors", f"tensor {name!r} did not receive the elements of its shape {s.shape}",
                              f"{done} elements for {want}")


def _npy_header(shape: tuple[int, ...], dtype: np.dtype) -> bytes:
    buf = io.BytesIO()
    d = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    try:
        np.lib.format.write_array_header_1_0(buf, d)
    except ValueError:  # a header longer than 64 KiB needs format 2.0
        buf = io.BytesIO()
        np.lib.format.write_array_header_2_0(buf, d)
    return buf.getvalue()


def _check_name(name: str, suffix: str) -> None:
    """A tensor name the file can hold as it is: UTF-8 text (a JSON header or zip member name; a lone
    surrogate, which JSON's \\u escapes can carry in, has no UTF-8 form), and for .npz no NUL character
    (zipfile cuts a member's name at the first NUL, so 'a\\0b' and 'a\\0c' would both be written as 'a')."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise TensorFileError("tensors", f"a tensor name must be UTF-8 text to be written to {suffix}", name) from None
    if suffix == ".npz" and "\0" in name:
        raise TensorFileError("tensors", "a tensor name written to .npz may not hold a NUL character (a zip member "
                              "name ends at the first NUL)", name, detail="use .safetensors")


def write_tensors(path: str | os.PathLike, tensors: Mapping[str, Any]) -> list[str]:
    """Write ``tensors`` (arrays, or :class:`Stream` objects written a piece at a time) atomically;
    return notes for the user (e.g. how a .npy stored a type)."""
    path = Path(path)
    suffix = path.suffix.lower()
    notes: list[str] = []
    if suffix not in SUFFIXES:
        raise TensorFileError("output", f"must end in one of {', '.join(SUFFIXES)}", str(path))
    streams = {n: _as_stream(a) for n, a in tensors.items()}
    if suffix != ".npy":
        for n in streams:
            _check_name(n, suffix)
    if suffix == ".npy":
        if len(streams) != 1:
            raise TensorFileError("output", "a .npy file holds exactly one tensor; use .npz or .safetensors",
                                  f"{len(streams)} tensors")
        ((name, s),) = streams.items()
        stored = _storage_dtype(s.dtype)
        if stored != s.dtype:
            t = _type_of_dtype(s.dtype)
            how = "values" if t.kind == "int" else "bit patterns"
            notes.append(f"{path.name}: .npy cannot record {t.name}; stored as {stored} {how} "
                         f"(read it back with dtype {t.name}, or use .npz/.safetensors)")

        def npy(f):
            f.write(_npy_header(s.shape, stored))
            _write_pieces(f, name, s)

        _atomic_with(path, npy)
        return notes
    if suffix == ".npz":
        if _DTYPES_KEY in streams:
            raise TensorFileError("tensors", "a tensor may not be named like quantspec's type entry", _DTYPES_KEY)

        def npz(f):
            types = {}
            with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
                for n, s in streams.items():
                    stored = _storage_dtype(s.dtype)
                    if stored != s.dtype:
                        types[n] = _type_of_dtype(s.dtype).name
                    with z.open(n + ".npy", "w", force_zip64=True) as m:
                        m.write(_npy_header(s.shape, stored))
                        _write_pieces(m, n, s)
                if types:
                    entry = np.frombuffer(json.dumps(types).encode(), dtype=np.uint8)
                    with z.open(_DTYPES_KEY + ".npy", "w", force_zip64=True) as m:
                        m.write(_npy_header(entry.shape, entry.dtype))
                        m.write(entry.tobytes())

        _atomic_with(path, npz)
        return notes
    # safetensors
    if "__metadata__" in streams:  # the header's metadata entry: a tensor of that name would be read as it
        raise TensorFileError("tensors", "a tensor may not be named like the safetensors metadata entry",
                              "__metadata__", detail="write it to .npz, or rename it")
    header: dict = {}
    meta: dict = {}
    offset = 0
    for n, s in streams.items():
        t = _type_of_dtype(s.dtype)
        if t is None:
            raise TensorFileError("tensors", "has a dtype safetensors cannot hold", f"{n}: {s.dtype}")
        if t.name in _ST_NAMES:
            code = _ST_NAMES[t.name]
        else:
            code = _ST_NAMES[qtype(_storage_dtype(s.dtype)).name]
            meta[f"quantspec.dtype.{n}"] = t.name
        nbytes = int(np.prod(s.shape, dtype=np.int64)) * _storage_dtype(s.dtype).itemsize
        header[n] = {"dtype": code, "shape": list(s.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    if meta:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)

    def st(f):
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for n, s in streams.items():
            _write_pieces(f, n, s, "<")

    _atomic_with(path, st)
    return notes
