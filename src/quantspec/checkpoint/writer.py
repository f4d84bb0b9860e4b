"""Writing the output directory so that nothing is ever lost or half-written under a final name.

- Each shard is written to a temporary file in ``DST`` (``.NAME.partial``), created at its full size
  (``posix_fallocate``: a disk too small fails here, before any data is computed), filled by the
  tasks at their planned offsets, then given its final header (with the source digests), flushed,
  ``fsync``'ed and renamed to ``.NAME.done``.
- When every shard is done, :meth:`Output.commit` publishes the checkpoint in two steps.  First every
  other file (the index, the manifest, the source's ``config.json`` / ``generation_config.json``) is
  written in full to a temporary name (``.NAME.tmp``) and ``fsync``'ed: everything that needs room on
  the disk is written here, and a failure leaves only dot-files.  Then renames only: the files of an
  earlier conversion that are about to be replaced go aside (``.NAME.old``; its manifest and index
  first), the ``.done`` shards take their final names, then the other files, the manifest last; the
  directory is ``fsync``'ed.  An error in any of these steps (a full disk included) undoes the renames
  already made, newest first, so that ``DST`` holds what it held before; the ``.done`` shards stay
  for the next run.  Only once everything is in place are the set-aside files and the earlier
  conversion's files this one no longer has removed.
- Rerunning the same conversion keeps each ``.done`` (or final) shard whose header records the same
  plan and whose recorded source digests equal the source's (:func:`finished`), and recomputes the
  others.  A run holds ``DST/.quantspec.lock`` (``flock``) so that two runs never write one directory.

Every error writing ``DST`` is a :class:`~quantspec.errors.TensorFileError` that keeps the finished
shards (``keeps_finished``): a rerun after the cause is fixed (space freed) resumes from them.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import struct
from pathlib import Path

from ..errors import TensorFileError
from .layout import CARRIED, Plan, Shard

__all__ = ["Output", "PARTIAL", "DONE", "OLD"]

PARTIAL, DONE, OLD, TMP = ".partial", ".done", ".old", ".tmp"
LOCK = ".quantspec.lock"
_SPACE = (errno.ENOSPC, errno.EDQUOT)
#: what an ``fsync`` of a directory answers on file systems that do not do it (not a failure)
_NO_DIR_SYNC = (errno.EINVAL, errno.EBADF, errno.EACCES, getattr(errno, "ENOTSUP", errno.EINVAL),
                getattr(errno, "EOPNOTSUPP", errno.EINVAL))


def _write_error(e: OSError, what: str, path, left: str) -> TensorFileError:
    """The error of a failed write to ``DST`` (``what``: the step, ``left``: what it left): it keeps
    the shards finished before (``keeps_finished``) for the next run, and says how to go on."""
    space = e.errno in _SPACE
    rule = f"ran out of space {what}" if space else f"could not be written {what}"
    again = ("free some space and run the same conversion again" if space
             else "run the same conversion again once the cause is fixed")
    err = TensorFileError("dst", f"{rule}; {left}: {again}", str(path), detail=e.strerror or str(e))
    err.keeps_finished = True
    return err


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
        """The names an earlier quantspec conversion left in ``DST`` (from its index), and those this
        one writes.  The copies of the source's files (``config.json``, ...) count only beside
        another sign of a conversion (its manifest, index, shards or hidden files): a directory that
        holds nothing but a ``config.json`` is someone else's."""
        fmt = self.plan.format
        names = {fmt.index_name, fmt.manifest_name}
        with contextlib.suppress(Exception):
            index = json.loads((self.dir / fmt.index_name).read_text())
            names.update(v for v in index["weight_map"].values() if isinstance(v, str) and Path(v).name == v)
        names.update(sh.name for sh in self.plan.shards)
        if self._converted(names):
            names.update(CARRIED)
            names.update(fmt.extra_names)
        return names

    def _converted(self, names: set[str]) -> bool:
        """Whether ``DST`` holds a sign of a quantspec conversion (finished or not)."""
        try:
            entries = list(self.dir.iterdir())
        except OSError:
            return False
        for p in entries:
            if p.name.startswith("."):
                if p.name.endswith((DONE, OLD, PARTIAL)):
                    return True
            elif p.name.endswith(".safetensors"):
                if self._is_ours(p):
                    return True
            elif p.name in names:                    # the index or the manifest
                return True
        return False

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
                    err = TensorFileError("dst", "ran out of space", str(path),
                                          detail=f"shard {sh.name} needs {sh.size / 1e9:.2f} GB")
                    err.keeps_finished = True
                    raise err from None
                if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.ftruncate(fd, sh.size)
            header = self.plan.header(sh)
            os.pwrite(fd, struct.pack("<Q", len(header)) + header, 0)
        except OSError as e:            # a full disk, a quota, an I/O error while making the file
            os.close(fd)
            with contextlib.suppress(OSError):
                path.unlink()
            raise _write_error(e, "while creating a shard", path, "the shards finished before are kept") from None
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
            raise _write_error(e, f"finishing shard {sh.name}", path,
                               "the shards finished before it are kept for the next run") from None

    def commit(self, manifest: dict) -> None:
        """Every shard is done: publish the checkpoint (module docstring).  Any ``OSError`` on the way
        leaves ``DST`` as it was (the renames made are undone) but for the ``.done`` shards and raises
        a :class:`~quantspec.errors.TensorFileError` that keeps them."""
        fmt = self.plan.format
        old = self._ours()
        files = dict(fmt.extra_files(self.plan))
        files[fmt.index_name] = fmt.index(self.plan)
        files[fmt.manifest_name] = manifest              # last: its arrival completes the checkpoint
        for sh in self.plan.shards:
            if not self.done(sh).exists() and not self.final(sh).exists():
                err = TensorFileError("dst", f"lost shard {sh.name} before the conversion was committed (neither "
                                      f"{self.done(sh).name} nor {sh.name} is there)", str(self.dir))
                err.keeps_finished = True
                raise err
        staged: list[tuple[str, Path]] = []
        try:                                             # 1. everything that needs room, under temporary names
            for name, content in files.items():
                tmp = self.dir / _hidden(name, TMP)
                staged.append((name, tmp))
                _write_file(tmp, content)
        except OSError as e:
            for _, tmp in staged:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            raise _write_error(e, "while writing the finished checkpoint's files", self.dir,
                               "nothing was placed under a final name, and the finished shards are kept") from None
        moves: list[tuple[Path, Path]] = []             # renames made, to undo newest first
        replaced = [n for n in (fmt.manifest_name, fmt.index_name) if n in files]
        replaced += [n for n in files if n not in replaced]
        replaced += [sh.name for sh in self.plan.shards if self.done(sh).exists()]
        try:                                             # 2. renames only
            for name in replaced:                        # what an earlier conversion holds under these names
                if os.path.lexists(self.dir / name):
                    self._move(self.dir / name, self.dir / _hidden(name, OLD), moves)
            for sh in self.plan.shards:                  # a shard without .done is kept where it is
                if self.done(sh).exists():
                    self._move(self.done(sh), self.final(sh), moves)
            for name, tmp in staged:
                self._move(tmp, self.dir / name, moves)
            _fsync_dir(self.dir, strict=True)
        except OSError as e:
            failed = []
            for src, dst in reversed(moves):
                try:
                    os.replace(dst, src)
                except OSError:
                    failed.append(dst.name)
            for _, tmp in staged:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            _fsync_dir(self.dir)
            if failed:
                left = ("undoing the renames failed too, so the directory may hold part of the new checkpoint under "
                        f"final names ({', '.join(sorted(failed))}); the finished shards are kept")
            else:
                left = "the directory holds what it held before, and the finished shards are kept"
            raise _write_error(e, "while placing the finished checkpoint under its final names", self.dir,
                               left) from None
        # 3. committed: what was set aside, and the earlier conversion's files this one does not have
        keep = set(files) | {sh.name for sh in self.plan.shards}
        for name in sorted(old - keep):
            with contextlib.suppress(OSError):
                os.unlink(self.dir / name)
        self._remove_set_aside(old | keep)
        _fsync_dir(self.dir)

    @staticmethod
    def _move(src: Path, dst: Path, moves: list[tuple[Path, Path]]) -> None:
        os.replace(src, dst)
        moves.append((src, dst))

    def _remove_set_aside(self, names: set[str]) -> None:
        """Remove the files a commit set aside (``.NAME.old``), those of a run killed mid-commit too."""
        for p in self.dir.glob(".*" + OLD):
            inner = p.name[1:-len(OLD)]
            if inner in names or inner in CARRIED or inner.endswith(".safetensors"):
                with contextlib.suppress(OSError):
                    os.unlink(p)

    def clean(self, keep_done: bool = True) -> None:
        """Remove the temporary files of this or an earlier interrupted run (``.done`` shards too
        unless ``keep_done``)."""
        for p in self.dir.glob(".*"):
            if p.name.endswith(PARTIAL) or p.name.endswith(TMP) or (not keep_done and p.name.endswith(DONE)):
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


def _write_file(path: Path, content: dict | bytes) -> None:
    """Write ``content`` (a dict: as JSON) to ``path`` in full and ``fsync`` it; on an error the file
    is removed and the ``OSError`` raised.  Only ``os`` calls (``open``, ``fchmod``, ``write``,
    ``fsync``, ``close``), so that each step can fail and be seen to fail."""
    data = content if isinstance(content, bytes) else (json.dumps(content, indent=1) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        try:
            if hasattr(os, "fchmod"):
                os.fchmod(fd, 0o644)             # readable by all, whatever the umask
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def _fsync_dir(path: Path, strict: bool = False) -> None:
    """Make the renames in ``path`` durable.  ``strict``: an error of the ``fsync`` itself is raised
    (not one that says the file system does not sync directories)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except AttributeError:               # pragma: no cover - not POSIX
        return
    except OSError as e:
        if strict and e.errno not in _NO_DIR_SYNC:
            raise
        return
    try:
        os.fsync(fd)
    except OSError as e:
        if strict and e.errno not in _NO_DIR_SYNC:
            raise
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
