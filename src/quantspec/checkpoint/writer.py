"""Writing the output directory so that nothing is ever lost or half-written under a final name.

- Each shard is written to a temporary file in ``DST`` (``.NAME.partial``), created at its full size
  (``posix_fallocate``: a disk too small fails here, before any data is computed), filled by the
  tasks at their planned offsets, then given its final header (with the source digests), flushed,
  ``fsync``'ed and renamed to ``.NAME.done``.
- When every shard is done, each ``.done`` file is renamed to its final name, and the index and the
  manifest are written (temporary name, ``fsync``, rename).  ``DST`` therefore holds a finished
  checkpoint or none: an interrupted run (Ctrl-C, ``kill -9``, a full disk) leaves only dot-files.
- Rerunning the same conversion keeps each ``.done`` (or final) shard whose header records the same
  plan and whose recorded source digests equal the source's (:func:`finished`), and recomputes the
  others.  A run holds ``DST/.quantspec.lock`` (``flock``) so that two runs never write one directory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import struct
import tempfile
from pathlib import Path

from ..errors import TensorFileError
from .layout import Plan, Shard

__all__ = ["Output", "PARTIAL", "DONE"]

PARTIAL, DONE = ".partial", ".done"
LOCK = ".quantspec.lock"


def _hidden(name: str, suffix: str) -> str:
    return f".{name}{suffix}"


class Output:
    """The destination directory of one conversion."""

    def __init__(self, dst: str | os.PathLike, plan: Plan):
        self.dir = Path(dst)
        self.plan = plan
        self._lock = None

    # -- the directory ----------------------------------------------------------------------------
    def open(self) -> None:
        """Create ``DST`` (it must be empty or hold an earlier conversion's files) and lock it."""
        fmt = self.plan.format
        if self.dir.exists() and not self.dir.is_dir():
            raise TensorFileError("dst", "must be a directory (it is created when missing)", str(self.dir))
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TensorFileError("dst", "cannot be created", str(self.dir), detail=e.strerror or str(e)) from None
        src_files = {str(Path(f).resolve()) for f in self.plan.source.files}
        ours = self._ours()
        for p in self.dir.iterdir():
            if str(p.resolve()) in src_files:
                raise TensorFileError("dst", "holds the source checkpoint; write the conversion to another directory",
                                      str(self.dir))
            if p.name not in ours and not p.name.startswith(".") and not (p.name.endswith(".safetensors")
                                                                        and self._is_ours(p)):
                raise TensorFileError("dst", "holds files that are not a quantspec conversion's; give an empty or new "
                                      "directory", str(self.dir), detail=f"for example {p.name!r}")
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            return
        handle = open(self.dir / LOCK, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise TensorFileError("dst", "is being written by another conversion (its lock is held)",
                                  str(self.dir)) from None
        self._lock = handle

    def close(self) -> None:
        """Remove the lock file and release the lock (held: nobody else wrote it meanwhile)."""
        if self._lock is not None:
            with contextlib.suppress(OSError):
                (self.dir / LOCK).unlink()
            with contextlib.suppress(OSError):
                self._lock.close()
            self._lock = None

    def _ours(self) -> set[str]:
        """The names an earlier quantspec conversion left in ``DST`` (from its index)."""
        fmt = self.plan.format
        names = {fmt.index_name, fmt.manifest_name, *fmt.extra_names}
        with contextlib.suppress(Exception):
            index = json.loads((self.dir / fmt.index_name).read_text())
            names.update(index["weight_map"].values())
        with contextlib.suppress(Exception):         # an earlier conversion to another layout, and its files
            earlier = json.loads((self.dir / fmt.manifest_name).read_text())["format"]
            if earlier == "compressed-tensors":
                names.add("config.json")
        names.update(sh.name for sh in self.plan.shards)
        return names

    def _is_ours(self, path: Path) -> bool:
        header = read_header(path)
        return header is not None and self.plan.format.is_ours(header)

    def check_space(self, shards: list[Shard]) -> None:
        """Refuse to start when the device cannot hold the shards still to be written."""
        need = sum(sh.size for sh in shards)
        try:
            st = os.statvfs(self.dir)
        except (OSError, AttributeError):
            return
        free = st.f_bavail * st.f_frsize
        if need > free:
            raise TensorFileError("dst", "is on a device without room for the conversion", str(self.dir),
                                  detail=f"needs {need / 1e9:.2f} GB, {free / 1e9:.2f} GB free")

    # -- shards ------------------------------------------------------------------------------------
    def partial(self, sh: Shard) -> Path:
        return self.dir / _hidden(sh.name, PARTIAL)

    def done(self, sh: Shard) -> Path:
        return self.dir / _hidden(sh.name, DONE)

    def final(self, sh: Shard) -> Path:
        return self.dir / sh.name

    def create(self, sh: Shard) -> str:
        """The temporary file of ``sh`` at its full size, with a placeholder header; its path."""
        path = self.partial(sh)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as e:
            raise TensorFileError("dst", "could not be written", str(path), detail=e.strerror or str(e)) from None
        try:
            try:
                if hasattr(os, "posix_fallocate"):
                    os.posix_fallocate(fd, 0, sh.size)
                else:  # pragma: no cover
                    os.ftruncate(fd, sh.size)
            except OSError as e:
                if e.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise TensorFileError("dst", "ran out of space", str(path),
                                          detail=f"shard {sh.name} needs {sh.size / 1e9:.2f} GB") from None
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.ftruncate(fd, sh.size)
            header = self.plan.header(sh)
            os.pwrite(fd, struct.pack("<Q", len(header)) + header, 0)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise
        os.close(fd)
        return str(path)

    def finish(self, sh: Shard, done: dict[int, tuple[str, str | None]]) -> None:
        """Write ``sh``'s final header (``done``: entry index -> source digest, error statistics),
        flush it to the disk and rename it ``.NAME.done``."""
        path = self.partial(sh)
        header = self.plan.header(sh, done)
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
            try:
                os.pwrite(fd, struct.pack("<Q", len(header)) + header, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(path, self.done(sh))
        except OSError as e:
            raise TensorFileError("dst", "could not be written", str(path), detail=e.strerror or str(e)) from None

    def commit(self, manifest: dict) -> None:
        """Every shard is done: final names, then the index and the manifest, then stale files away."""
        fmt = self.plan.format
        old = self._ours()
        try:
            for sh in self.plan.shards:
                if self.done(sh).exists() or not self.final(sh).exists():   # else: kept where it was
                    os.replace(self.done(sh), self.final(sh))
            _atomic_json(self.dir / fmt.index_name, fmt.index(self.plan))
            for name, content in fmt.extra_files(self.plan).items():
                _atomic_json(self.dir / name, content)
            _atomic_json(self.dir / fmt.manifest_name, manifest)
        except OSError as e:
            raise TensorFileError("dst", "could not be written", str(self.dir), detail=e.strerror or str(e)) from None
        keep = {fmt.index_name, fmt.manifest_name, *fmt.extra_names} | {sh.name for sh in self.plan.shards}
        for name in old - keep:
            with contextlib.suppress(OSError):
                (self.dir / name).unlink()
        _fsync_dir(self.dir)

    def clean(self, keep_done: bool = True) -> None:
        """Remove the temporary files of this or an earlier interrupted run (``.done`` shards too
        unless ``keep_done``)."""
        for p in self.dir.glob(".*"):
            if p.name.endswith(PARTIAL) or p.name.endswith(".tmp") or (not keep_done and p.name.endswith(DONE)):
                with contextlib.suppress(OSError):
                    p.unlink()


def header_bytes(path: str | os.PathLike) -> bytes | None:
    """A safetensors file's JSON header as its bytes (padding included), or None when it cannot be
    read (no file, too short, a length past 100 MB)."""
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return None
            (n,) = struct.unpack("<Q", head)
            if n > 100 << 20:
                return None
            return f.read(n)
    except OSError:
        return None


def read_header(path: str | os.PathLike) -> dict | None:
    """A safetensors file's header as a dict, or None when it cannot be read as one."""
    raw = header_bytes(path)
    try:
        data = json.loads(raw) if raw is not None else None
    except Exception:       # invalid JSON or UTF-8, nesting past the recursion limit
        return None
    return data if isinstance(data, dict) else None


def _atomic_json(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
