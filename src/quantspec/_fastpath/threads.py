"""Thread pools that take turns: BLAS's and the fast kernels' never spin against each other.

numpy's BLAS (OpenBLAS) and numba's thread pool (OpenMP) each keep their worker threads spinning for
a while after a parallel call, waiting for the next one.  A program that alternates the two — the
LiteRT interpreter: an int8 GEMM on float BLAS, then a requantization kernel, then the next GEMM —
runs each call while the other pool's workers still spin, with twice as many busy threads as cores:
on 2 cores a converter-made MobileNetV2 ran at 0.3-0.8x LiteRT's reference kernels, and at 2.2-2.4x
with ``OPENBLAS_NUM_THREADS=1``.

:func:`blas_on_caller` runs a block with BLAS on the calling thread only (``threadpoolctl``, the
maintained way to set OpenBLAS's, MKL's and BLIS's thread counts at run time, restored afterwards):
the fast kernels keep the cores to themselves, and no environment variable is needed.  Without
``threadpoolctl``, or where no BLAS library is found, the block runs as it is.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["blas_on_caller", "enter", "leave"]

_LOCK = threading.Lock()
_BLAS = None            # the BLAS libraries' controllers (threadpoolctl), found once
_DEPTH = 0
_SAVED: list = []


def _blas() -> list:
    global _BLAS
    if _BLAS is None:
        try:
            from threadpoolctl import ThreadpoolController

            _BLAS = [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]
        except Exception:           # threadpoolctl missing, or a library it cannot read
            _BLAS = []
    return _BLAS


@contextlib.contextmanager
def blas_on_caller():
    """Within the block, BLAS computes on the calling thread only (nested blocks and several threads
    share one setting: the first to enter sets it, the last to leave restores it)."""
    entered = enter()
    try:
        yield
    finally:
        leave(entered)


def enter() -> bool:
    """:func:`blas_on_caller`'s entry, for a caller that saves the ``with`` statement (the LiteRT
    interpreter's run); returns what :func:`leave` needs."""
    global _DEPTH, _SAVED
    libs = _BLAS if _BLAS is not None else _blas()
    if not libs:
        return False
    with _LOCK:
        if _DEPTH == 0:
            _SAVED = []
            for lib in libs:
                n = lib.get_num_threads()
                if n is not None and n != 1:
                    lib.set_num_threads(1)
                    _SAVED.append((lib, n))
        _DEPTH += 1
    return True


def leave(entered: bool) -> None:
    """:func:`blas_on_caller`'s exit (``entered``: what :func:`enter` returned)."""
    global _DEPTH, _SAVED
    if not entered:
        return
    with _LOCK:
        _DEPTH -= 1
        if _DEPTH == 0:
            for lib, n in _SAVED:
                lib.set_num_threads(n)
            _SAVED = []
