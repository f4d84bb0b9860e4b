"""Running a conversion (or a verification) on a Dask cluster: :class:`DaskBackend`.

The layout is planned before any data moves (:mod:`.layout`), and a task — one slab of rows of one
tensor (:class:`quantspec.checkpoint.encode.Task`) — is a pure function of the files, so a cluster
only has to run the same tasks elsewhere: each worker reads its slab from the source, computes it and
writes its bytes at their final offsets in the temporary shard file; the client that planned the run
receives each task's small result (digest, error sums), drives the progress bar, finishes each
shard when its last slab has been written and commits the checkpoint, exactly as on one machine.
The bytes are the same.  One huge tensor spreads over every worker, a slab per task.

``dask`` (``convert(..., dask=...)``, ``--dask``):

- ``"local:N"``: a ``dask.distributed.LocalCluster`` of N worker processes (one thread each), started
  for the run and closed after it;
- a scheduler address (``"tcp://10.0.0.5:8786"``, ``"10.0.0.5:8786"``, ``"tls://..."``): an existing
  cluster, whose workers must mount ``SRC`` and ``DST`` at the same paths as the client and run the
  same quantspec version;
- a ``dask.distributed.Client``: used as it is (not closed).

Failures: a task that raises (an I/O error) is retried (``RETRIES`` times), and a task whose worker
dies is run again elsewhere (the scheduler's ``allowed-failures``); a slab computed twice writes the
same bytes at the same place.  Bad data found by a task (NaN in a weight) is not retried: it is the
same error again.  A task that fails for good stops the run: no new task starts, the ones running
finish (and the shards that the tasks before the failed one complete are finished), and
:class:`TaskFailedError` names every tensor (and rows) that failed; no file is left under a final
name (finished shards stay, hidden, for a rerun to keep).

Tasks keep no file open between them (:func:`quantspec.checkpoint.sources.private_files`): a
long-lived worker reads a replaced file afresh, and on a network file system each write reaches the
server when the task closes its file, before the client finishes the shard.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from typing import Any

from ..errors import InvalidArgumentError, QuantSpecError, UnsupportedError
from .backend import Backend, LocalBackend

__all__ = ["DaskBackend", "TaskFailedError", "RETRIES", "INSTALL", "parse", "backend"]

#: times a task that raised is run again before it fails for good
RETRIES = 3
#: how long to try to reach a scheduler given by its address
CONNECT_TIMEOUT = "20s"
INSTALL = "pip install 'quantspec[dask]'"
_LOCAL = re.compile(r"local:(\d+)")


class TaskFailedError(QuantSpecError, RuntimeError):
    """Tasks of a run on a cluster failed for good (after retries).  Shards finished before stay
    hidden in ``DST`` for a rerun to keep."""

    keeps_finished = True


def parse(dask: Any) -> tuple[str, Any]:
    """``("local", N)``, ``("address", text)`` or ``("client", client)`` for ``convert``'s ``dask``
    argument (anything else is refused naming the forms it may take)."""
    if isinstance(dask, str):
        text = dask.strip()
        m = _LOCAL.fullmatch(text)
        if m:
            n = int(m[1])
            if not 1 <= n <= 1024:
                raise InvalidArgumentError("dask", "local:N must start between 1 and 1024 worker processes", dask)
            return "local", n
        if text.startswith("local"):
            raise InvalidArgumentError("dask", "must be local:N with N worker processes (local:4)", dask)
        if text and not any(c.isspace() for c in text):
            return "address", text
    elif type(dask).__name__ == "Client" and hasattr(dask, "submit") and hasattr(dask, "scheduler_info"):
        return "client", dask
    raise InvalidArgumentError("dask", "must be None, 'local:N', a scheduler address ('tcp://host:8786') or a "
                               "dask.distributed.Client", dask)


def _distributed():
    try:
        import distributed
    except ImportError:
        raise UnsupportedError("dask", f"needs dask.distributed, which is not installed: {INSTALL}") from None
    return distributed


def _describe(item: Any) -> str:
    e = getattr(item, "entry", None)
    if e is None:
        return repr(item)
    return f"tensor {e.source.name!r} rows {item.r0}-{item.r1} (of {e.source.file})"


class _Failed:
    """A task's deterministic error (bad data), returned rather than raised so it is not retried."""

    def __init__(self, error: BaseException):
        self.error = error


def _remote(fn, item):
    """What a worker runs: ``fn(item)``, keeping no file open."""
    from .sources import private_files

    with private_files():
        try:
            return fn(item)
        except QuantSpecError as e:
            return _Failed(e)


class DaskBackend(Backend):
    """Runs tasks on a Dask cluster (see the module docstring); results come back to the caller's
    thread in the order the tasks were given."""

    def __init__(self, dask: Any, retries: int = RETRIES):
        kind, value = parse(dask)
        distributed = _distributed()
        self.retries = retries
        self._cluster = None
        self._own = kind != "client"
        try:
            if kind == "local":
                # silence_logs: the worker processes' own log lines (at ERROR, a heartbeat that meets the
                # scheduler closing at the end of the run prints a traceback); a task's failure still
                # reaches this process through its future
                self._cluster = distributed.LocalCluster(n_workers=value, threads_per_worker=1, processes=True,
                                                         dashboard_address=":0", silence_logs=logging.CRITICAL)
                self.client = distributed.Client(self._cluster)
            elif kind == "address":
                self.client = distributed.Client(value, timeout=CONNECT_TIMEOUT)
            else:
                self.client = value
        except QuantSpecError:
            raise
        except Exception as e:   # no scheduler there, a refused connection, a cluster that cannot start
            self.close()
            raise InvalidArgumentError("dask", "could not connect to a Dask scheduler" if kind == "address" else
                                       "could not start a local Dask cluster", dask,
                                       detail=f"{type(e).__name__}: {e}") from None
        self.workers = max(1, sum(self.client.nthreads().values()))

    def map(self, fn, items, on_result) -> None:
        distributed = _distributed()
        it = iter(items)
        window = max(8, 4 * max(1, sum(self.client.nthreads().values())))
        pending: deque = deque()               # (item, future), in submission order
        done: dict[str, tuple[bool, Any]] = {}  # future key -> (ok, result or error)
        running = distributed.as_completed()
        failures: list[tuple[Any, BaseException]] = []
        exhausted = False

        def submit() -> bool:
            try:
                item = next(it)
            except StopIteration:
                return False
            fut = self.client.submit(_remote, fn, item, retries=self.retries, pure=False)
            pending.append((item, fut))
            running.add(fut)
            return True

        try:
            while True:
                while not exhausted and not failures and len(pending) - len(done) < window:
                    exhausted = not submit()
                if not pending:
                    break
                if len(done) < len(pending):
                    fut = next(running)
                    try:
                        result = fut.result()
                        ok = not isinstance(result, _Failed)
                        done[fut.key] = (ok, result if ok else result.error)
                    except Exception as e:    # failed for good: retries spent, or its workers kept dying
                        done[fut.key] = (False, e)
                    if not done[fut.key][0]:
                        failures.append((next(i for i, f in pending if f.key == fut.key), done[fut.key][1]))
                # results in order, up to the first that failed (the tasks before it all finish: the
                # shards they complete are finished, for a rerun to keep)
                while pending and pending[0][1].key in done and done[pending[0][1].key][0]:
                    item, fut = pending.popleft()
                    _, result = done.pop(fut.key)
                    on_result(item, result)
                if failures and len(done) == len(pending):     # the tasks already running have finished
                    self._raise(failures)
        except BaseException:
            futures = [f for _, f in pending]
            if futures:
                self.client.cancel(futures)
            raise

    @staticmethod
    def _raise(failures) -> None:
        data = [e for _, e in failures if isinstance(e, QuantSpecError)]
        if data:                 # bad data (NaN in a weight...): the same error as on one machine
            raise data[0]
        tensors = list(dict.fromkeys(getattr(getattr(i, "entry", None), "source", None) and i.entry.source.name
                                     for i, _ in failures))
        first_item, first = failures[0]
        raise TaskFailedError("dask", f"tasks failed on the cluster for tensor{'s' if len(tensors) > 1 else ''} "
                              + ", ".join(repr(t) for t in tensors),
                              detail=f"{len(failures)} task{'s' if len(failures) > 1 else ''} failed for good, "
                              f"first {_describe(first_item)}: {type(first).__name__}: {first}; nothing was written "
                              "under a final name, and a rerun keeps the shards that were finished")

    def close(self) -> None:
        client, cluster = getattr(self, "client", None), self._cluster
        if self._own and client is not None:
            try:
                client.close()
            except Exception:
                pass
        if cluster is not None:
            try:
                cluster.close()
            except Exception:
                pass
        self._cluster = None


def backend(dask: Any = None, workers: int | None = None) -> Backend:
    """The backend for ``convert``'s ``dask`` argument: None gives a
    :class:`quantspec.checkpoint.backend.LocalBackend`, anything else a :class:`DaskBackend`."""
    if dask is None:
        return LocalBackend(workers)
    return DaskBackend(dask)
