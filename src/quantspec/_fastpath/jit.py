"""Whether the fused (numba) kernels run, and loading them without paying for it at import time.

quantspec has two paths for every element-wise operation: the readable numpy reference path, and a
fast path of fused multithreaded kernels compiled by numba (a dependency of quantspec).  The fast
path is the default wherever it exists.

- ``QUANTSPEC_FAST=0`` (or ``false``/``no``/``off``) switches the fast path off: every call takes
  the numpy reference path.  Any other value, or none, leaves it on when numba can be imported.
  Where numba cannot be imported (not installed, or a build that does not match this numpy), every
  call takes the reference path and quantspec says so once, on stderr, with the reason
  (:func:`numba_available`).
- Nothing here imports numba before it is needed.  ``import quantspec`` and ``quantspec --help``
  stay fast; numba is imported on the first call that may run a fast kernel, and a kernel module
  loaded when one does.
- Compiled kernels are cached on disk (numba ``cache=True``), so the JIT cost is paid once per
  machine, not once per process (:func:`install_cache_locator`).  The cache lives under
  ``$NUMBA_CACHE_DIR`` when that is set, else in ``__pycache__`` next to the kernel sources when
  that directory is writable, else (a read-only or system-wide install) in a per-user directory:
  ``$QUANTSPEC_CACHE_DIR``, else the user cache directory (``platformdirs``, or
  ``$XDG_CACHE_HOME``, else ``~/.cache``) ``/quantspec/numba``.  Where none of these can be
  written, kernels are compiled in memory, in every process that needs them, and quantspec says so
  once.  A cached kernel is reused only while the sources it was compiled from are unchanged.
- The command line announces, once, on stderr, that it is compiling kernels for this machine
  (:func:`announce_compiles`); ``quantspec warmup`` compiles them all ahead of time.

The kernels are compiled with ``fastmath=False``: the LLVM fast-math flags would turn ``x / s``
into ``x * (1 / s)`` (``arcp``), fuse multiply-adds (``contract``) and drop the NaN/inf rules
(``nnan``/``ninf``); each of these changes results.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["enabled", "env", "reference_only", "prefer_reference", "numba_available", "load", "cache_dir",
           "install_cache_locator", "lock_cache_saves", "fingerprint", "ENV", "CLI_FAST_FROM", "announce_compiles",
           "mark_kernel", "KERNELS", "uncached", "cache_location", "note"]

ENV = "QUANTSPEC_FAST"
_OFF = {"0", "false", "no", "off"}
_available: bool | None = None


def numba_available() -> bool:
    """numba can be imported.  Tried once, the first time the fast path is wanted (importing numba
    is what the first fast kernel does anyway); where it fails, quantspec says once, on stderr, why
    every call takes the reference path."""
    global _available
    if _available is None:
        _available = _import_numba()
    return _available


def _import_numba() -> bool:
    if "numba" in sys.modules:
        return True
    try:
        found = importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):  # pragma: no cover - broken installs
        found = False
    if not found:
        note("numba is not installed")
        return False
    try:
        import numba  # noqa: F401
    except Exception as e:  # ImportError, or a numba built for another numpy / llvmlite
        note(f"numba could not be imported ({type(e).__name__}: {e})")
        return False
    return True


_NOTED: set[str] = set()


def note(reason: str, what: str = "the fast kernels are off, every call runs on the numpy reference path "
                                  "(the same results, slower)") -> None:
    """Say once per process, on stderr, that ``what`` (once for each ``what``), because ``reason``."""
    if what in _NOTED:
        return
    _NOTED.add(what)
    print(f"quantspec: {what}: {reason}", file=sys.stderr, flush=True)


_REFERENCE_DEPTH = 0
_ENCODED: dict[str, object] = {}


def env(name: str) -> str:
    """The environment variable ``name``, or "" when it is not set; read afresh on every call.

    ``os.environ.get`` encodes the name and walks the Mapping protocol (about 0.7 us, a tenth of a
    small quantize); this looks the encoded name up in ``os.environ``'s own dict, which every change
    made through ``os.environ`` (``monkeypatch.setenv`` included) updates, and falls back to
    ``os.environ.get`` wherever that dict is not there."""
    environ = os.environ
    try:
        key = _ENCODED[name]
    except KeyError:
        key = _ENCODED[name] = environ.encodekey(name) if hasattr(environ, "encodekey") else None
    data = getattr(environ, "_data", None)
    if key is None or not isinstance(data, dict):
        return environ.get(name, "")
    value = data.get(key)
    return "" if value is None else environ.decodevalue(value)


def enabled() -> bool:
    """The fast path runs: numba is installed, ``QUANTSPEC_FAST`` does not switch it off, and no
    :func:`reference_only` block is open.

    Read on every call, so a test or a user can flip ``QUANTSPEC_FAST`` at run time."""
    if _REFERENCE_DEPTH:
        return False
    value = env(ENV)
    if value and value.strip().lower() in _OFF:
        return False
    return numba_available()


@contextlib.contextmanager
def reference_only():
    """Within the block every call takes the numpy reference path (the same bytes).  For a one-shot
    process with little data, which would spend longer importing numba and loading compiled kernels
    (about 0.6 s) than computing (the CLI, :data:`CLI_FAST_FROM`)."""
    global _REFERENCE_DEPTH
    _REFERENCE_DEPTH += 1
    try:
        yield
    finally:
        _REFERENCE_DEPTH -= 1


#: the one-shot CLI commands (quantize, dequantize: the tensors' elements; run: the model's tensors'
#: elements) take the fast path from this many elements in all, or when numba is already imported or
#: ``QUANTSPEC_FAST`` is set: below it the numpy reference path finishes (in under 0.1 s for
#: quantize) before numba would have loaded
CLI_FAST_FROM = 1 << 22


def prefer_reference(elements: int) -> bool:
    """Whether a one-shot command over ``elements`` elements should run :func:`reference_only`."""
    return elements < CLI_FAST_FROM and "numba" not in sys.modules and ENV not in os.environ


def _user_cache_dir() -> Path:
    explicit = os.environ.get("QUANTSPEC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    try:
        import platformdirs
    except ImportError:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        return Path(base) / "quantspec" / "numba"
    return Path(platformdirs.user_cache_dir("quantspec")) / "numba"


def _writable(directory: Path) -> bool:
    cache = directory / "__pycache__"
    target = cache if cache.exists() else directory
    return os.access(target, os.W_OK | os.X_OK)


def cache_dir(kernel_file: Path) -> Path:
    """Where numba keeps the compiled kernels of the module ``kernel_file``: ``NUMBA_CACHE_DIR`` if
    set, else the ``__pycache__`` beside it if writable, else the per-user directory."""
    return _cache_dirs(Path(kernel_file))[0]


def _cache_dirs(kernel_file: Path) -> list[Path]:
    """The directories to try, best first (:func:`cache_dir`; the per-user one after the package's
    when that turns out not to be writable)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return [Path(os.environ["NUMBA_CACHE_DIR"]) / "quantspec" / kernel_file.parent.name]
    user = _user_cache_dir() / kernel_file.parent.name
    if _writable(kernel_file.parent):
        return [kernel_file.parent / "__pycache__", user]
    return [user]


_KERNELS_CACHED_IN: set[str] = set()


def cache_location() -> str | None:
    """Where this process keeps the kernels it compiles (a directory; None: not known yet, or in
    memory only)."""
    return min(_KERNELS_CACHED_IN) if _KERNELS_CACHED_IN else None


def uncached(kernel_file) -> None:
    """The kernels of ``kernel_file`` could not be given an on-disk cache: they are compiled in
    memory (said once)."""
    tried = ", ".join(str(d) for d in _cache_dirs(Path(kernel_file)))
    note(f"no writable cache directory (tried {tried}; set QUANTSPEC_CACHE_DIR to choose one)",
         "the fast kernels are compiled in memory, in every process, not cached on disk")


#: every dispatcher marked as one of quantspec's kernels (``quantspec warmup`` lists what they compiled)
KERNELS: list = []


def mark_kernel(dispatcher) -> None:
    """Mark ``dispatcher`` as one of quantspec's kernels (:func:`announce_compiles` watches them)."""
    dispatcher._quantspec_kernel = True
    KERNELS.append(dispatcher)


# -- saying that kernels are being compiled ---------------------------------------------------------
_ANNOUNCE = None
_STDERR = object()          # announce_compiles' default: whatever sys.stderr is when the notice is printed
_LISTENING = False
#: roughly what compiling one kernel (one operation for one combination of types) takes on a 2-core
#: machine, for the notice
KERNEL_SECONDS = "about 1 s"


def announce_compiles(stream=None) -> contextlib.AbstractContextManager:
    """Say once, on ``stream`` (default: ``sys.stderr`` as it is when the notice is printed), when this
    process starts compiling a kernel: the first call of each combination of types compiles one (then
    cached).  The command line turns this on for the length of a command: used as a context manager,
    the notice is off again when the block ends.  numba is not imported here."""
    global _ANNOUNCE
    _ANNOUNCE = stream if stream is not None else _STDERR
    if "numba" in sys.modules:
        _listen()
    return _AnnounceOff()


class _AnnounceOff(contextlib.AbstractContextManager):
    def __exit__(self, *exc):
        global _ANNOUNCE
        _ANNOUNCE = None
        return None


def _listen() -> None:
    global _LISTENING
    if _LISTENING or _ANNOUNCE is None:
        return
    from numba.core import event

    class Notice(event.Listener):
        def on_start(self, ev):
            if getattr(ev.data.get("dispatcher"), "_quantspec_kernel", False):
                _announce()

        def on_end(self, ev):
            pass

    event.register("numba:compile", Notice())
    _LISTENING = True


def _announce() -> None:
    global _ANNOUNCE
    stream, _ANNOUNCE = _ANNOUNCE, None
    if stream is None:
        return
    where = cache_location()
    kept = f"kept in {where} for later runs" if where else "not cached: no writable cache directory"
    try:        # a notice never stops a computation (a closed or broken stderr)
        print(f"quantspec: compiling fast kernels for this machine ({KERNEL_SECONDS} for each new combination of "
              f"types, once; {kept}; `quantspec warmup` compiles them all ahead of time)",
              file=sys.stderr if stream is _STDERR else stream, flush=True)
    except (OSError, ValueError):
        pass


_LOADED: dict[str, ModuleType] = {}


def load(module: str) -> ModuleType:
    """Import a kernel module (one that imports numba).  Looked up in a dict of the modules this
    function has finished importing first: the import machinery costs tens of microseconds on a call
    that follows a large kernel, whose data has flushed the caches.  (Not ``sys.modules``: it holds a
    module from the moment its import starts, so a second thread's first call would find it half
    initialized; ``importlib.import_module`` waits for the other thread's import to finish.)"""
    loaded = _LOADED.get(module)
    if loaded is not None:
        return loaded
    loaded = importlib.import_module(module)
    _listen()
    _LOADED[module] = loaded
    return loaded


# -- saving to the cache under a lock ------------------------------------------------------------
@contextlib.contextmanager
def _locked(path: str):
    """An exclusive inter-process lock on the file ``path`` (POSIX; elsewhere, no lock)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        handle = open(path, "a+")
    except OSError:      # pragma: no cover - nowhere to put the lock
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def lock_cache_saves(dispatcher) -> None:
    """Make ``dispatcher``'s on-disk cache safe for several processes compiling at once.

    numba saves a compiled signature by reading the cache index, taking the first free data-file
    number and writing the index back; two processes saving different signatures at the same moment
    (pytest-xdist, a process pool, on a cold cache) can take the same number, and one of them later
    loads the other's code.  Here the read-modify-write runs under a lock on the index file (the
    compilations themselves still run in parallel)."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    save = getattr(cache_file, "save", None)
    if save is None or not hasattr(cache_file, "_index_path"):
        return  # an unknown numba: its own behaviour

    def locked_save(key, data):
        with _locked(cache_file._index_path + ".lock"):
            save(key, data)

    cache_file.save = locked_save


# -- numba's on-disk cache for quantspec's kernels ----------------------------------------------
_PACKAGE = Path(__file__).resolve().parent.parent   # .../quantspec
_PRIMITIVES = Path(__file__).resolve().parent / "nbprim.py"


@functools.lru_cache(maxsize=None)
def _digest(path: str, mtime: float, size: int) -> bytes:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).digest()


def fingerprint(files) -> str:
    """A hash of the contents of ``files`` (a missing file counts as empty)."""
    h = hashlib.sha256()
    for f in files:
        try:
            st = os.stat(f)
        except FileNotFoundError:
            h.update(b"-")
            continue
        h.update(_digest(str(f), st.st_mtime, st.st_size))
    return h.hexdigest()


def install_cache_locator() -> None:
    """Teach numba where and how to cache quantspec's kernels (called by :mod:`.nbprim`, which every
    kernel module imports first).

    numba keys a cached kernel by the content of the kernel's own source file only, so a kernel that
    inlines building blocks from another file would be loaded stale after that file changed.  The
    locator installed here keys it by the kernel module, :mod:`quantspec._fastpath.nbprim` and the
    files the module names in ``KERNEL_SOURCES`` (paths relative to its directory), and stores it
    in a subdirectory of :func:`cache_dir` named after that key.  Functions outside quantspec keep
    numba's own locators."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    base = getattr(caching, "_CacheLocator", None)
    if impl is None or base is None or not isinstance(getattr(impl, "_locator_classes", None), list):
        return  # an unknown numba: its own locators (no tracking of nbprim.py)
    if any(getattr(c, "_quantspec", False) for c in impl._locator_classes):
        return

    class KernelLocator(base):
        _quantspec = True

        def __init__(self, py_func, py_file, directory: Path):
            self._lineno = py_func.__code__.co_firstlineno
            here = Path(py_file).resolve()
            extra = py_func.__globals__.get("KERNEL_SOURCES", ())
            self._stamp = fingerprint((here, _PRIMITIVES, *(here.parent / name for name in extra)))
            # one directory per version of the sources: an index written by other sources (whose
            # pickled signatures may name record classes that no longer exist) is never read
            self._path = str(directory / self._stamp[:16])

        def get_cache_path(self):
            return self._path

        def get_source_stamp(self):
            return self._stamp

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            try:
                inside = Path(py_file).resolve().is_relative_to(_PACKAGE)
            except (OSError, ValueError):
                inside = False
            if not inside:
                return None
            for directory in _cache_dirs(Path(py_file)):
                self = cls(py_func, py_file, directory)
                try:
                    self.ensure_cache_path()
                except OSError:      # not writable: the next place
                    continue
                _KERNELS_CACHED_IN.add(str(directory))
                return self
            return None              # nowhere to write: numba's own locators decide (or no cache)

    impl._locator_classes.insert(0, KernelLocator)
