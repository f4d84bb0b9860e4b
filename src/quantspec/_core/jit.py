"""Whether the fused (numba) kernels run, and loading them without paying for it at import time.

quantspec has two paths for every element-wise operation (DESIGN.md principle 5): the readable
numpy reference path, and a fast path of fused multithreaded kernels compiled by numba.  The fast
path is the default wherever it exists and numba is installed (``pip install quantspec[fast]``).

- ``QUANTSPEC_FAST=0`` (or ``false``/``no``/``off``) switches the fast path off: every call takes
  the numpy reference path.  Any other value, or none, leaves it on when numba is importable.
- Nothing here imports numba.  ``import quantspec`` and ``quantspec --help`` stay fast; numba is
  imported, and a kernel module loaded, on the first call that runs a fast kernel.
- Compiled kernels are cached on disk (numba ``cache=True``), so the JIT cost is paid once per
  machine, not once per process.  The cache lives in ``__pycache__`` next to the kernel sources
  when that directory is writable; when it is not (a read-only or system-wide install), and
  ``NUMBA_CACHE_DIR`` is not set, it is pointed at a per-user directory:
  ``$QUANTSPEC_CACHE_DIR``, else ``$XDG_CACHE_HOME/quantspec/numba``, else
  ``~/.cache/quantspec/numba``.

The kernels are compiled with ``fastmath=False``: the LLVM fast-math flags would turn ``x / s``
into ``x * (1 / s)`` (``arcp``), fuse multiply-adds (``contract``) and drop the NaN/inf rules
(``nnan``/``ninf``); each of these changes results (notes/performance.md §2.4).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from pathlib import Path
from types import ModuleType

__all__ = ["enabled", "numba_available", "load", "cache_dir", "ENV"]

ENV = "QUANTSPEC_FAST"
_OFF = {"0", "false", "no", "off"}
_available: bool | None = None


def numba_available() -> bool:
    """numba can be imported (checked without importing it)."""
    global _available
    if _available is None:
        try:
            _available = importlib.util.find_spec("numba") is not None
        except (ImportError, ValueError):  # pragma: no cover - broken installs
            _available = False
    return _available


def enabled() -> bool:
    """The fast path runs: numba is installed and ``QUANTSPEC_FAST`` does not switch it off.

    Read on every call, so a test or a user can flip ``QUANTSPEC_FAST`` at run time."""
    if os.environ.get(ENV, "").strip().lower() in _OFF:
        return False
    return numba_available()


def _user_cache_dir() -> Path:
    explicit = os.environ.get("QUANTSPEC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "quantspec" / "numba"


def _writable(directory: Path) -> bool:
    cache = directory / "__pycache__"
    target = cache if cache.exists() else directory
    return os.access(target, os.W_OK | os.X_OK)


def cache_dir(package_dir: Path) -> Path:
    """Where numba keeps the compiled kernels of the modules in ``package_dir``."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    if _writable(package_dir):
        return package_dir / "__pycache__"
    return _user_cache_dir()


def _configure_cache(package_dir: Path) -> None:
    """Point numba's cache at a per-user directory when the install directory is read-only.

    Must run before numba is first imported (numba reads ``NUMBA_CACHE_DIR`` then)."""
    if os.environ.get("NUMBA_CACHE_DIR") or _writable(package_dir):
        return
    target = _user_cache_dir()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable cache anywhere: numba then compiles in memory each process
        return
    os.environ["NUMBA_CACHE_DIR"] = str(target)
    import sys

    if "numba" in sys.modules:  # numba already imported by the application: tell it now
        from numba.core import config

        config.reload_config()


_DEPENDENCIES = ("nbprim.py",)  # kernel building blocks in this directory that every kernel module inlines


def _refresh(origin: Path, depends: tuple[Path, ...]) -> None:
    """numba's cache is keyed by the kernel module's own source file only: when a file its kernels
    inline is newer (a development checkout), touch the module so that the stale cache is dropped."""
    try:
        newest = max(p.stat().st_mtime for p in depends)
        if newest > origin.stat().st_mtime and os.access(origin, os.W_OK):
            os.utime(origin)
    except (OSError, ValueError):  # pragma: no cover - missing files, read-only trees
        pass


def load(module: str, depends: tuple[str, ...] = ()) -> ModuleType:
    """Import a kernel module (one that imports numba), configuring the on-disk cache first.

    ``depends``: sibling modules (file names) the kernels inline, besides :mod:`nbprim`."""
    import sys

    if module in sys.modules:
        return sys.modules[module]
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.origin:
        origin = Path(spec.origin)
        _configure_cache(origin.parent)
        here = Path(__file__).parent
        _refresh(origin, tuple(here / d for d in _DEPENDENCIES) + tuple(origin.parent / d for d in depends))
    return importlib.import_module(module)
