"""quantspec's thread pool: helper threads that never spin, and a caller that never waits for them.

A parallel call of a fast kernel (:func:`run`) hands the same compiled kernel to the helper threads
and runs it on the calling thread at once.  Every participant claims work items a few at a time from
a shared counter (``nbprim.claim``) until none are left, so

- the calling thread starts immediately and does all the work if no helper comes (a helper that is
  asleep, or has no core on a busy machine, costs nothing but the notice: the call is never slower
  than the serial kernel by more than that);
- the caller waits only for work a helper has claimed and not yet finished (a few work items), not
  for every thread of the pool to wake and reach a barrier, as an OpenMP parallel region does;
- idle helpers block on a condition variable: they never spin, so they never take a core from the
  caller's next computation or from another library's threads (BLAS, onnxruntime, ...).

The kernels are numba functions compiled with ``nogil=True``: the helpers run them in parallel with
the caller.  A process made by ``fork()`` starts without the parent's helper threads; it makes its own
on its first parallel call.  One helper fewer than the cores this process may use
(``os.sched_getaffinity``), or ``QUANTSPEC_NUM_THREADS - 1``.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from . import jit

__all__ = ["run", "threads", "ENV"]

#: the number of threads (the caller and the helpers) a parallel call uses; default: the cores
ENV = "QUANTSPEC_NUM_THREADS"


def threads() -> int:
    """Threads a parallel call uses: ``QUANTSPEC_NUM_THREADS``, else the cores this process may use."""
    value = jit.env(ENV).strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            pass
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class _Job:
    __slots__ = ("entry", "args")

    def __init__(self, entry, args):
        self.entry, self.args = entry, args


class _Pool:
    def __init__(self):
        self._cond = threading.Condition()
        self._job: _Job | None = None
        self._generation = 0
        self._threads: list[threading.Thread] = []
        self._pid = os.getpid()

    def _ensure(self, helpers: int) -> None:
        if self._pid != os.getpid():            # a forked child: the parent's helpers are not here
            self.__init__()
        while len(self._threads) < helpers:
            t = threading.Thread(target=self._helper, name=f"quantspec-helper-{len(self._threads)}", daemon=True)
            t.start()
            self._threads.append(t)

    def _helper(self) -> None:
        seen = 0
        cond = self._cond
        while True:
            with cond:
                while self._generation == seen:
                    cond.wait()
                seen = self._generation
                job = self._job
            if job is None:
                continue
            try:
                job.entry(*job.args)
            except BaseException:      # pragma: no cover - the caller's own run raises the same error
                pass
            with cond:
                cond.notify_all()          # a caller may wait for the work this thread claimed

    def run(self, entry, args: tuple, claims: np.ndarray, work: int, helpers: int):
        self._ensure(helpers)
        job = _Job(entry, args)
        cond = self._cond
        with cond:
            self._job = job
            self._generation += 1
            cond.notify_all()
        finished = entry(*args)                 # the caller works at once
        with cond:
            if self._job is job:
                self._job = None                # a helper that wakes later has nothing to do
            if finished < work:                 # work a helper claimed is not done yet: wait for it
                while claims[1] < work:         # (read under the lock the helper notifies under)
                    cond.wait()


_POOL = _Pool()


def run(entry, args: tuple, claims: np.ndarray, work: int, parts: int) -> None:
    """Run the kernel ``entry(*args)`` on the calling thread and ``parts - 1`` helpers; ``args`` holds
    ``claims`` (the work counter: zeros) and the kernel claims ``work`` work items from it and returns
    the number finished when it found none left."""
    if parts <= 1:
        entry(*args)
        return
    _POOL.run(entry, args, claims, work, parts - 1)
