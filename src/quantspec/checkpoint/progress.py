"""Progress of a conversion: a bar on a terminal (tqdm), nothing otherwise, or the caller's callback.

``convert(..., progress=...)``: ``None`` shows bars when stderr is a terminal and tqdm is installed
(``pip install 'quantspec[convert]'``), ``True`` always tries to, ``False`` shows nothing, and a
callable receives a :class:`ProgressEvent` at each step (the start, every slab, every shard, the end).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ProgressEvent", "Progress", "progress_for"]


@dataclass(frozen=True)
class ProgressEvent:
    """``kind``: "start", "scan" (a slab read for a per-tensor scheme's range, or hashed to check a
    shard an earlier run finished), "slab", "shard" (a shard finished), "done".  Byte counts are of
    the source data; ``total`` may grow once, when a finished shard turns out to need converting."""

    kind: str
    done: int
    total: int
    shard: str = ""
    shard_done: int = 0
    shard_total: int = 0
    tensor: str = ""


class Progress:
    """Receives the conversion's steps; this base class ignores them."""

    def start(self, total: int, shards: int) -> None: ...
    def grow(self, nbytes: int) -> None: ...
    def shard(self, name: str, total: int) -> None: ...
    def advance(self, nbytes: int, tensor: str, scan: bool = False) -> None: ...
    def shard_done(self) -> None: ...
    def close(self) -> None: ...


class _Callback(Progress):
    def __init__(self, fn: Callable[[ProgressEvent], Any]):
        self.fn = fn
        self.done = self.total = self.sdone = self.stotal = 0
        self.name = ""

    def start(self, total, shards):
        self.total = total
        self.fn(ProgressEvent("start", 0, total))

    def grow(self, nbytes):
        self.total += nbytes

    def shard(self, name, total):
        self.name, self.sdone, self.stotal = name, 0, total

    def advance(self, nbytes, tensor, scan=False):
        self.done += nbytes
        if not scan:
            self.sdone += nbytes
        self.fn(ProgressEvent("scan" if scan else "slab", self.done, self.total, self.name, self.sdone, self.stotal,
                              tensor))

    def shard_done(self):
        self.fn(ProgressEvent("shard", self.done, self.total, self.name, self.sdone, self.stotal))

    def close(self):
        self.fn(ProgressEvent("done", self.done, self.total))


class _Bars(Progress):
    """Two tqdm bars: the whole run and the current shard, in bytes, with rate and ETA."""

    def __init__(self, tqdm):
        self.tqdm = tqdm
        self.run = self.sh = None

    def start(self, total, shards):
        self.run = self.tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="convert", position=0,
                             dynamic_ncols=True, leave=True, file=sys.stderr)

    def grow(self, nbytes):
        if self.run is not None and nbytes:
            self.run.total += nbytes
            self.run.refresh()

    def shard(self, name, total):
        if self.sh is not None:
            self.sh.close()
        self.sh = self.tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=name, position=1,
                            dynamic_ncols=True, leave=False, file=sys.stderr)

    def advance(self, nbytes, tensor, scan=False):
        if self.run is not None:
            self.run.update(nbytes)
            if scan:
                self.run.set_postfix_str("scanning ranges", refresh=False)
        if self.sh is not None and not scan:
            self.sh.update(nbytes)

    def shard_done(self):
        if self.sh is not None:
            self.sh.close()
            self.sh = None

    def close(self):
        self.shard_done()
        if self.run is not None:
            self.run.close()
            self.run = None


def progress_for(progress: Any) -> Progress:
    """The :class:`Progress` for ``convert``'s ``progress`` argument."""
    if isinstance(progress, Progress):
        return progress
    if callable(progress):
        return _Callback(progress)
    if progress is False:
        return Progress()
    if progress is None and not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        return Progress()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return Progress()
    return _Bars(tqdm)
