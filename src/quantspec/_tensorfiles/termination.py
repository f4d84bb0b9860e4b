"""SIGTERM and SIGHUP unwind the command like Ctrl-C (SIGINT) does.

Python's default for SIGTERM and SIGHUP ends the process at once, without running ``finally``
blocks, so a write in progress would leave its temporary file behind.  While a command runs,
:func:`unwinding` turns those signals into a :class:`Terminated` exception (a ``BaseException``, like
``KeyboardInterrupt``): the writers' cleanup runs, and the command exits with ``128 + signal``.
A signal whose handler is not the default one (``nohup`` ignores SIGHUP; an embedding program may
have its own) is left alone.  SIGKILL cannot be caught: the writers use an unnamed temporary file
where the system allows (see :mod:`quantspec._tensorfiles.tensorio`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["Terminated", "unwinding"]

_SIGNALS = ("SIGTERM", "SIGHUP")


class Terminated(BaseException):
    """The process received SIGTERM or SIGHUP while a command ran."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        try:
            self.name = signal.Signals(signum).name
        except ValueError:  # pragma: no cover
            self.name = f"signal {signum}"


def _raise(signum: int, frame) -> None:
    raise Terminated(signum)


@contextlib.contextmanager
def unwinding() -> Iterator[None]:
    """Within the block, SIGTERM / SIGHUP (where they have their default handler) raise
    :class:`Terminated`; the previous handlers come back after it.  Outside the main thread, where
    Python cannot set handlers, nothing changes."""
    installed = {}
    if threading.current_thread() is threading.main_thread():
        for name in _SIGNALS:
            sig = getattr(signal, name, None)
            if sig is None:
                continue
            try:
                if signal.getsignal(sig) is signal.SIG_DFL:
                    installed[sig] = signal.signal(sig, _raise)
            except (ValueError, OSError):  # pragma: no cover
                pass
    try:
        yield
    finally:
        for sig, previous in installed.items():
            signal.signal(sig, previous)
