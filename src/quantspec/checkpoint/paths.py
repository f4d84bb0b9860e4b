"""Paths and URLs of checkpoints: a local path, or an fsspec URL of a file system every machine of
the run mounts.

A conversion on a cluster reads and writes files by path on each worker (``pread`` / ``pwrite`` at
planned offsets), so ``SRC`` and ``DST`` must name a file system that every worker mounts at the same
place: a local disk for one machine, a shared (network) file system for a cluster, or an object store
mounted as one.  They may be given as paths or as URLs: ``file:///shared/model`` (and ``local://``)
is the path ``/shared/model``.  Plain paths never need fsspec; a URL of another protocol is refused
with the reason, before anything is read.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import InvalidArgumentError, UnsupportedError

__all__ = ["local_path", "LOCAL_PROTOCOLS"]

#: fsspec protocols naming this machine's file system
LOCAL_PROTOCOLS = ("file", "local")


def local_path(path: Any, argument: str) -> str | os.PathLike:
    """``path`` as a local path: a path unchanged, ``file://`` / ``local://`` URLs as their path."""
    if isinstance(path, os.PathLike):
        return path
    if not isinstance(path, str) or not path:
        raise InvalidArgumentError(argument, "must be a path or a file:// URL", path)
    if "://" not in path:
        return path
    protocol = path.split("://", 1)[0].lower()
    if "::" in path or protocol not in LOCAL_PROTOCOLS:
        raise UnsupportedError(argument, "must be a path or a file:// URL of a file system every worker mounts "
                               f"at the same place (protocol {protocol!r} is not read or written directly: mount "
                               "the store, or copy the checkpoint to a shared file system)", path)
    parts = urlsplit(path)
    if parts.netloc not in ("", "localhost") or parts.query or parts.fragment:
        raise InvalidArgumentError(argument, "must be a file:// URL of an absolute path (file:///dir/name)", path)
    local = unquote(parts.path)
    if protocol == "local" and not local.startswith("/"):
        local = "/" + local
    return local
