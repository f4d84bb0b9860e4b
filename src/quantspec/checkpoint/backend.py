"""Where the tasks run.

A backend runs a stream of independent tasks (:class:`quantspec.checkpoint.encode.Task`, a pure
function of the task and the files) and hands each result back, in the caller's thread, as it
arrives.  :class:`LocalBackend`, the one machine's backend, runs them on a pool of threads (the
kernels, reading, hashing and writing all release the GIL), one per core: while one thread's slab is
being read, another's is computed and a third's written.  At most ``2 x workers`` tasks are in
flight, so memory holds a few slabs whatever the checkpoint's size.

A cluster's backend (:class:`quantspec.checkpoint.cluster.DaskBackend`) implements the same
:meth:`Backend.map`; :func:`quantspec.checkpoint.cluster.backend` chooses one.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

__all__ = ["Backend", "LocalBackend"]


class Backend:
    """Runs ``fn`` on every item; ``on_result(item, result)`` is called in the caller's thread as
    results arrive.  The first exception stops the run (tasks not started are dropped; those running
    finish) and is raised."""

    workers: int = 1

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any], on_result: Callable[[Any, Any], None]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class LocalBackend(Backend):
    """A pool of ``workers`` threads (default: the cores this process may run on)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or _cores()
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="quantspec-convert")

    def map(self, fn, items, on_result) -> None:
        pending: deque[tuple[Any, Future]] = deque()
        it = iter(items)
        limit = 2 * self.workers
        exhausted = False
        try:
            while True:
                while not exhausted and len(pending) < limit:
                    try:
                        item = next(it)
                    except StopIteration:
                        exhausted = True
                        break
                    pending.append((item, self._pool.submit(fn, item)))
                if not pending:
                    return
                # results are delivered in submission order (the order of the plan), each as soon as
                # it and every earlier one have finished
                item, fut = pending[0]
                wait([fut])
                for _, f in pending:               # a later task's error stops the run as soon as seen
                    if f.done() and not f.cancelled() and f.exception() is not None:
                        f.result()
                pending.popleft()
                on_result(item, fut.result())
        except BaseException:
            for _, f in pending:
                f.cancel()
            wait([f for _, f in pending])
            raise

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

