"""The tensors of a source checkpoint, found from its headers alone, and read a slab of rows at a time.

``SRC`` may be a ``.safetensors`` file, a directory of them (with or without a
``*.safetensors.index.json``), an index file, an ``.npz`` or an ``.npy``.  :func:`discover` reads
only headers and returns a :class:`SourceTensor` per tensor (name, file, type, shape, and where its
bytes lie), after checking the checkpoint as a whole: a tensor name given twice across files, an
index naming a missing shard or a tensor its shard does not hold, a shard file the index does not
name, a damaged header, each a :class:`~quantspec.errors.TensorFileError` naming the tensor and the
file, before anything is written.

Reading (:func:`read_rows`): a tensor stored contiguously in little-endian order (every safetensors
tensor, C-ordered native ``.npy`` files and stored ``.npz`` members) is read with ``preadv`` straight
into a caller's buffer, at the offset its header gives; the page cache holds the file, the process
holds only that buffer.  Anything else (a Fortran-ordered or big-endian ``.npy``, a compressed
``.npz`` member) is read through numpy: mapped where it can be, else whole (documented).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._tensorfiles import tensorio
from ..dtypes import qtype
from ..errors import TensorFileError

__all__ = ["KINDS", "SourceTensor", "Source", "discover", "read_rows", "SAFETENSORS_CODES", "private_files", "private"]

#: safetensors dtype code -> quantspec type name, for every code a source may hold
SAFETENSORS_CODES = dict(tensorio._ST_CODES)
_UNSIGNED_EXTRA = {"U32": np.dtype("<u4"), "U64": np.dtype("<u8")}


@dataclass(frozen=True)
class SourceTensor:
    """One source tensor.  ``offset`` / ``nbytes``: where its bytes lie in ``path`` (``offset`` None
    when it cannot be read by offset; then ``array`` reads it)."""

    name: str
    path: str                  # the file, absolute
    file: str                  # the file as the manifest names it (relative to the checkpoint)
    dtype: str                 # quantspec type name ("bfloat16", "float", "int64", ...) or a numpy str
    shape: tuple[int, ...]
    offset: int | None
    nbytes: int
    itemsize: int
    order: int                 # position in the source (file order, then offset)

    @property
    def rows(self) -> int:
        """Rows along axis 0 (the unit of slabs): ``shape[0]``; 1 for a scalar."""
        return int(self.shape[0]) if self.shape else 1

    @property
    def row_bytes(self) -> int:
        return self.nbytes // self.rows if self.rows else 0


#: the kinds of source ``discover`` reads (a :class:`Source`'s ``kind``, recorded in the manifest)
KINDS = ("safetensors", "npz", "npy")


def member_file(file: str, member: str) -> str:
    """How a tensor's record names the file of an ``.npz`` member: ``FILE:MEMBER``."""
    return f"{file}:{member}"


def names_a_file_of(file, files: list[str], kind: str) -> bool:
    """Whether a record's ``file`` names one of a source's ``files`` (of ``kind``): that file, or a
    member of it (:func:`member_file`) for an ``.npz``."""
    return file in files or (kind == "npz" and isinstance(file, str)
                             and any(file.startswith(member_file(f, "")) for f in files))


@dataclass
class Source:
    """A discovered checkpoint: its tensors in order and the files they come from."""

    root: str
    kind: str                  # one of KINDS
    files: list[str]
    tensors: list[SourceTensor]
    index: str | None = None


# -- discovery ------------------------------------------------------------------------------------
_SHARD = re.compile(r"^(?P<prefix>.+)-(?P<i>\d+)-of-(?P<n>\d+)\.safetensors$")


def discover(src: str | os.PathLike) -> Source:
    """The tensors of ``src`` (headers only)."""
    path = Path(src)
    if not path.exists():
        raise TensorFileError("src", "must name an existing file or directory", str(path))
    if path.is_dir():
        indexes = sorted(path.glob("*.safetensors.index.json"))
        if len(indexes) > 1:
            raise TensorFileError("src", "holds more than one *.safetensors.index.json; give the index to use",
                                  str(path), detail=", ".join(p.name for p in indexes))
        if indexes:
            return _from_index(indexes[0])
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise TensorFileError("src", "is a directory without .safetensors files", str(path))
        return _from_files(path, files, None)
    name = path.name.lower()
    if name.endswith(".safetensors.index.json"):
        return _from_index(path)
    if name.endswith(".safetensors"):
        return _from_files(path.parent, [path], None)
    if name.endswith(".npz"):
        return _from_npz(path)
    if name.endswith(".npy"):
        return _from_npy(path)
    raise TensorFileError("src", "must be a .safetensors file, a directory of them, a *.safetensors.index.json, "
                          "an .npz or an .npy", str(path))


def _from_index(index: Path) -> Source:
    try:
        data = json.loads(index.read_text(encoding="utf-8"))
        weight_map = data["weight_map"]
        assert isinstance(weight_map, dict) and all(isinstance(k, str) and isinstance(v, str)
                                                   for k, v in weight_map.items())
    except Exception:
        raise TensorFileError("src", "is not a safetensors index (a JSON object with a 'weight_map' of "
                              "tensor name -> shard file)", str(index)) from None
    root = index.parent
    names = list(dict.fromkeys(weight_map.values()))
    for shard in names:
        p = root / shard
        if Path(shard).name != shard or not p.is_file():
            named = next(k for k, v in weight_map.items() if v == shard)
            raise TensorFileError("src", "has an index naming a shard that does not exist", str(p),
                                  detail=f"the index {index.name} maps tensor {named!r} to it")
    # shard files of the same naming pattern that the index does not name
    patterns = {(m["prefix"], m["n"]) for m in map(_SHARD.match, names) if m}
    for p in sorted(root.glob("*.safetensors")):
        m = _SHARD.match(p.name)
        if p.name not in names and m and (m["prefix"], m["n"]) in patterns:
            raise TensorFileError("src", "holds a shard file the index does not name", str(p),
                                  detail=f"the index {index.name} names {len(names)} shards")
    source = _from_files(root, [root / s for s in names], index)
    for t in source.tensors:
        want = weight_map.get(t.name)
        if want is None:
            raise TensorFileError("src", f"tensor {t.name!r} is in a shard but not in the index", t.path,
                                  detail=f"index {index.name}")
        if want != Path(t.path).name:
            raise TensorFileError("src", f"tensor {t.name!r} is in another shard than the index says", t.path,
                                  detail=f"the index {index.name} maps it to {want}")
    held = {t.name for t in source.tensors}
    for k, v in weight_map.items():
        if k not in held:
            raise TensorFileError("src", f"the index names tensor {k!r}, which its shard does not hold",
                                  str(root / v), detail=f"index {index.name}")
    return source


def _from_files(root: Path, files: list[Path], index: Path | None) -> Source:
    tensors: list[SourceTensor] = []
    seen: dict[str, str] = {}
    for p in files:
        for t in _safetensors_header(p, root, len(tensors)):
            if t.name in seen:
                raise TensorFileError("src", f"tensor {t.name!r} is held by two files", t.path,
                                      detail=f"also in {seen[t.name]}")
            seen[t.name] = t.path
            tensors.append(t)
    return Source(str(root), "safetensors", [str(p.resolve()) for p in files], tensors,
                  None if index is None else str(index.resolve()))


def _safetensors_header(path: Path, root: Path, start: int, argument: str = "src") -> list[SourceTensor]:
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise TensorFileError(argument, "is too short to be a safetensors file", str(path))
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise TensorFileError(argument, "has a safetensors header longer than the file", str(path))
            raw = f.read(n)
    except OSError as e:
        raise TensorFileError(argument, "could not be read", str(path), detail=e.strerror or str(e)) from None
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=tensorio._no_duplicate_keys)
    except tensorio._DuplicateKey as e:
        raise TensorFileError(argument, f"has a safetensors header naming tensor {e.args[0]!r} twice", str(path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TensorFileError(argument, "has a safetensors header that is not JSON", str(path), detail=str(e)) from None
    if not isinstance(header, dict):
        raise TensorFileError(argument, "has a safetensors header that is not a JSON object", str(path))
    meta = header.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict) and all(isinstance(v, str) for v in meta.values())):
        raise TensorFileError(argument, "has a safetensors header whose __metadata__ is not a map of strings", str(path))
    base, length = 8 + n, size - 8 - n
    out = []
    ordered = sorted(header.items(), key=lambda kv: _offsets(kv[1]))
    for i, (name, info) in enumerate(ordered):
        code = info.get("dtype") if isinstance(info, dict) else None
        if code in SAFETENSORS_CODES:
            t = qtype(SAFETENSORS_CODES[code])
            dtype, itemsize = t.name, t.dtype.itemsize
        elif code in _UNSIGNED_EXTRA:
            dtype, itemsize = _UNSIGNED_EXTRA[code].str, _UNSIGNED_EXTRA[code].itemsize
        else:
            raise TensorFileError(argument, f"tensor {name!r} has a dtype quantspec cannot read", str(path),
                                  detail=f"dtype {code!r}")
        shape, offsets = info.get("shape"), info.get("data_offsets")
        if (not isinstance(shape, list) or not all(tensorio._is_count(s) for s in shape) or not isinstance(offsets, list)
                or len(offsets) != 2 or not all(tensorio._is_count(o) for o in offsets)):
            raise TensorFileError(argument, f"tensor {name!r} has a malformed header entry", str(path))
        count = 1
        for s in shape:
            count *= s
        a, b = offsets
        problem = tensorio.offsets_problem(a, b, count * itemsize, length)
        if problem:
            raise TensorFileError(argument, f"tensor {name!r} {problem}", str(path), detail=f"offsets {offsets}")
        out.append(SourceTensor(name, str(path.resolve()), _relative(path, root), dtype, tuple(shape), base + a, b - a,
                                itemsize, start + i))
    return out


def _offsets(info) -> tuple:
    try:
        return tuple(info["data_offsets"])
    except Exception:
        return (0, 0)


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return path.name


def _type_name(dtype: np.dtype) -> tuple[str, int]:
    try:
        return qtype(dtype).name, dtype.itemsize
    except Exception:
        return dtype.str, dtype.itemsize


def _from_npy(path: Path) -> Source:
    try:
        with path.open("rb") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f)
            offset = f.tell()
    except Exception as e:
        raise TensorFileError("src", "is not a readable .npy file", str(path), detail=f"{type(e).__name__}: {e}") from None
    return Source(str(path.parent), "npy", [str(path.resolve())],
                  [_array_entry(path.stem, path, path.name, dtype, tuple(shape), offset, fortran, 0)])


def _array_entry(name, path, file, dtype, shape, offset, fortran, order) -> SourceTensor:
    if dtype.hasobject:
        raise TensorFileError("src", f"tensor {name!r} holds Python objects", str(path))
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    direct = offset is not None and not (fortran and len(shape) > 1) and (dtype.isnative or dtype.itemsize == 1) \
        and dtype.byteorder != ">"
    tname, itemsize = _type_name(dtype.newbyteorder("=") if not dtype.isnative else dtype)
    return SourceTensor(name, str(Path(path).resolve()), file, tname, shape, offset if direct else None,
                        count * dtype.itemsize, itemsize, order)


def _from_npz(path: Path) -> Source:
    tensors = []
    try:
        with zipfile.ZipFile(path) as zf, path.open("rb") as f:
            names = [i.filename for i in zf.infolist()]
            if len(set(names)) != len(names):
                raise TensorFileError("src", "holds two members of one name", str(path))
            for k, info in enumerate(zf.infolist()):
                if not info.filename.endswith(".npy"):
                    raise TensorFileError("src", "holds a member that is not a .npy array", str(path),
                                          detail=f"member {info.filename!r}")
                name = info.filename[:-4]
                if name == tensorio._DTYPES_KEY:
                    continue
                offset = None
                with zf.open(info) as m:
                    version = np.lib.format.read_magic(m)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                            else np.lib.format.read_array_header_2_0)
                    shape, fortran, dtype = read(m)
                    header_len = m.tell() if info.compress_type == zipfile.ZIP_STORED else None
                if info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 1:
                    f.seek(info.header_offset)
                    local = f.read(30)
                    name_len, extra_len = struct.unpack("<HH", local[26:30])
                    offset = info.header_offset + 30 + name_len + extra_len + header_len
                tensors.append(_array_entry(name, path, member_file(path.name, name), dtype, tuple(shape), offset, fortran,
                                            len(tensors)))
    except TensorFileError:
        raise
    except Exception as e:
        raise TensorFileError("src", "is not a readable .npz file", str(path), detail=f"{type(e).__name__}: {e}") from None
    types = _npz_types(path) if len(tensors) < len(names) else {}
    tensors = [_retyped(t, types.get(t.name)) for t in tensors]
    return Source(str(path.parent), "npz", [str(path.resolve())], tensors)


def _npz_types(path: Path) -> dict:
    """The ``__quantspec_dtypes__`` entry quantspec writes beside ml_dtypes members (name -> type)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            types = json.loads(bytes(z[tensorio._DTYPES_KEY]).decode())
        assert isinstance(types, dict)
        return types
    except Exception:
        raise TensorFileError("src", f"has a malformed {tensorio._DTYPES_KEY} entry", str(path)) from None


def _retyped(t: SourceTensor, name: str | None) -> SourceTensor:
    """A member stored as the bit patterns of a type the entry names (bfloat16, float8): that type."""
    if name is None:
        return t
    try:
        q = qtype(name)
    except Exception:
        return t
    if q.kind == "float" and q.dtype.itemsize == t.itemsize and np.dtype(q.storage).itemsize == t.itemsize \
            and t.dtype in ("uint8", "uint16"):
        return SourceTensor(t.name, t.path, t.file, q.name, t.shape, t.offset, t.nbytes, t.itemsize, t.order)
    return t


# -- reading ----------------------------------------------------------------------------------------
_PREADV = hasattr(os, "preadv")
_FDS: dict[str, tuple[int, tuple]] = {}     # path -> (descriptor, (device, inode) it reads)
_FDS_LOCK = threading.Lock()
_RETIRED: list[int] = []        # descriptors of files since replaced, closed by close_all
_ARRAYS: dict[tuple, np.ndarray] = {}
_PRIVATE = threading.local()


@contextlib.contextmanager
def private_files():
    """Within this block, this thread keeps no file open between calls: each read (and each write of
    :func:`quantspec.checkpoint.encode.write_at`) opens its file and closes it again.  Tasks on a
    cluster's long-lived worker processes run so: a file replaced between two runs is read afresh,
    and on a network file system a worker's writes reach the server when it closes the file
    (close-to-open consistency), before the client finishes the shard."""
    before = getattr(_PRIVATE, "on", False)
    _PRIVATE.on = True
    try:
        yield
    finally:
        _PRIVATE.on = before


def private() -> bool:
    """Whether this thread is inside :func:`private_files`."""
    return getattr(_PRIVATE, "on", False)


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise TensorFileError("src", "could not be opened", path, detail=e.strerror or str(e)) from None


def _fd(path: str) -> int:
    """This process's descriptor of ``path``, opened once and kept, and opened again when ``path`` now
    names another file than the one kept open (replaced, or deleted and written again, since: a kept
    descriptor would go on reading the old file's bytes)."""
    try:
        st = os.stat(path)
        now = (st.st_dev, st.st_ino)
    except OSError:
        now = None
    hit = _FDS.get(path)
    if hit is None or hit[1] != now:
        with _FDS_LOCK:
            hit = _FDS.get(path)
            if hit is None or hit[1] != now:
                if hit is not None:      # closed by close_all: another thread may be reading through it
                    _RETIRED.append(hit[0])
                fd = _open(path)
                st = os.fstat(fd)
                hit = _FDS[path] = (fd, (st.st_dev, st.st_ino))
    return hit[0]


def close_all() -> None:
    """Close the source files this process opened (and forget arrays read whole)."""
    with _FDS_LOCK:
        for fd, _ in _FDS.values():
            try:
                os.close(fd)
            except OSError:
                pass
        _FDS.clear()
        for fd in _RETIRED:
            with contextlib.suppress(OSError):
                os.close(fd)
        _RETIRED.clear()
        _ARRAYS.clear()


def _array(t: SourceTensor) -> np.ndarray:
    """A tensor that cannot be read by offset: through numpy (mapped when it can be), kept while the
    file is unchanged."""
    try:
        st = os.stat(t.path)
    except OSError as e:
        raise TensorFileError("src", "could not be opened", t.path, detail=e.strerror or str(e)) from None
    key = (t.path, t.name, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
    a = _ARRAYS.get(key)
    if a is None:
        with _FDS_LOCK:
            a = _ARRAYS.get(key)
            if a is None:
                if t.path.endswith(".npy"):
                    a = np.load(t.path, mmap_mode="r", allow_pickle=False)
                else:
                    with np.load(t.path, allow_pickle=False) as z:
                        a = z[t.name]
                _ARRAYS[key] = a
    return a


def read_rows(t: SourceTensor, r0: int, r1: int, out: np.ndarray | None = None) -> np.ndarray:
    """Rows ``[r0, r1)`` of ``t``'s bytes as a flat uint8 array (in ``out`` when given: a uint8 buffer
    of at least that many bytes), native byte order."""
    rb = t.row_bytes
    n = (r1 - r0) * rb
    buf = out[:n] if out is not None else np.empty(n, np.uint8)
    if n == 0:
        return buf
    if t.offset is not None:
        own = private()
        fd = _open(t.path) if own else _fd(t.path)
        try:
            return _pread(t, fd, buf, r0 * rb, n)
        finally:
            if own:
                os.close(fd)
    a = _array(t)
    rows = np.ascontiguousarray(a.reshape(t.rows, -1)[r0:r1] if a.ndim else a.reshape(1))
    rows = rows.astype(rows.dtype.newbyteorder("="), copy=False)
    buf[:] = rows.reshape(-1).view(np.uint8)
    tensorio.release(a)
    return buf


def _pread(t: SourceTensor, fd: int, buf: np.ndarray, start: int, n: int) -> np.ndarray:
    """``n`` bytes of ``t`` from byte ``start`` of its data into ``buf``."""
    view = memoryview(buf)
    done, pos = 0, t.offset + start
    while done < n:
        try:
            if _PREADV:
                got = os.preadv(fd, [view[done:]], pos + done)
            else:  # pragma: no cover - systems without preadv: a read, then a copy
                chunk = os.pread(fd, min(n - done, 1 << 26), pos + done)
                view[done:done + len(chunk)] = chunk
                got = len(chunk)
        except OSError as e:
            raise TensorFileError("src", f"tensor {t.name!r} could not be read", t.path,
                                  detail=e.strerror or str(e)) from None
        if got <= 0:
            raise TensorFileError("src", f"tensor {t.name!r} ends before its header says (the file is truncated)",
                                  t.path)
        done += got
    return buf
