"""Shared machinery of the fuzzers (the ``test_fuzz_*`` files): sizes and seeds, array strategies,
the outcome rule, and a subprocess runner with a time limit.

**The outcome rule.**  Every fuzzed call either returns normally (and then equals the oracle, where
one runs), or raises a :mod:`quantspec.errors` exception with a message.  Anything else -- another
exception, a numpy warning escaping to the user, a crash, a hang -- fails the test.

**Sizes.**  ``QUANTSPEC_FUZZ_EXAMPLES`` (default :data:`DEFAULT_EXAMPLES`) is the number of examples
each hypothesis property runs and scales the mutation fuzzers' counts; ``QUANTSPEC_FUZZ_SEED``
(default 1818) seeds everything, so a CI failure reproduces; ``QUANTSPEC_FUZZ_FROM`` resumes the
mutation fuzzers of a long run at a mutant number (:data:`FROM`).  A long local run::

    QUANTSPEC_FUZZ_EXAMPLES=20000 pytest -p no:xdist tests/test_fuzz_*.py

**Extending.**  A new public function joins :data:`fuzz_api.TARGETS`; a new file format (or a
directory layout, such as a checkpoint) joins :data:`fuzz_files.FORMATS`; a new model format joins
:data:`fuzz_files.MODEL_FORMATS`.  Each entry says how to make valid inputs, how to call quantspec,
and (where there is one) how to run the oracle; the fuzzers pick them up.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import os
import pickle
import signal
import traceback
import warnings
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from quantspec.errors import QuantSpecError

DEFAULT_EXAMPLES = 50
EXAMPLES = max(1, int(os.environ.get("QUANTSPEC_FUZZ_EXAMPLES", str(DEFAULT_EXAMPLES))))
SEED = int(os.environ.get("QUANTSPEC_FUZZ_SEED", "1818"))
#: the mutation fuzzers' counts are EXAMPLES times these factors
SCALE = EXAMPLES / DEFAULT_EXAMPLES
#: QUANTSPEC_FUZZ_SHRINK=0 reports the first failing example as found (no shrinking: quicker to triage)
SHRINK = os.environ.get("QUANTSPEC_FUZZ_SHRINK", "1") != "0"
#: QUANTSPEC_FUZZ_FROM=N: the .onnx and .tflite mutation fuzzers make their first N mutants (so that
#: mutant N is the same as in a full run) but check only the mutants from N on: a long run resumed
#: after a fix
FROM = max(0, int(os.environ.get("QUANTSPEC_FUZZ_FROM", "0")))


def fuzz_settings(factor: float = 1.0) -> settings:
    """hypothesis settings of one property: ``factor * EXAMPLES`` examples, no deadline (a busy
    machine is not a bug; hangs are caught by :func:`isolated`), no example database (a CI run is the
    seed's run), shrinking on."""
    return settings(max_examples=max(1, int(round(EXAMPLES * factor))), deadline=None, database=None,
                    derandomize=False, print_blob=True,
                    phases=(Phase.explicit, Phase.generate) + ((Phase.shrink,) if SHRINK else ()),
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture])


# -- the outcome rule --------------------------------------------------------------------------

class Outcome:
    """A call's outcome: ``value`` (a normal return) or ``error`` (a quantspec error)."""

    def __init__(self, value: Any = None, error: QuantSpecError | None = None):
        self.value, self.error = value, error

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        return f"error {type(self.error).__name__}: {self.error}" if self.error else "ok"


def outcome(call: Callable[[], Any], what: str = "") -> Outcome:
    """Run ``call``; a quantspec error is an outcome, numpy's warnings and every other exception fail
    (with ``what`` in the message, to reproduce)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)        # numpy's overflow / invalid-value noise
        try:
            return Outcome(value=call())
        except QuantSpecError as e:
            assert str(e), f"an empty error message: {what}"
            return Outcome(error=e)
        except Exception as e:  # noqa: BLE001 - the rule: nothing else may escape
            raise AssertionError(f"{type(e).__name__} escaped (not a quantspec error): {e}\n  call: {what}\n"
                                 + traceback.format_exc()) from None


# -- running a call in a subprocess with a time limit ----------------------------------------

def run_child(call: Callable[[], Any], timeout: float = 60.0) -> tuple[str, Any]:
    """Run ``call`` in a forked child: ``("ok", value)`` (the value pickled back),
    ``("exception", (class name, message))``, ``("crash", exit code or -signal)`` or ``("timeout", None)``.
    For oracles that may crash (LiteRT on a corrupt model) and for calls that may hang."""
    ctx = multiprocessing.get_context("fork")
    reader, writer = ctx.Pipe(duplex=False)

    def child():
        try:
            msg = ("ok", call())
        except BaseException as e:  # noqa: BLE001 - sent to the parent
            msg = ("exception", (type(e).__name__, str(e)))
        try:
            data = pickle.dumps(msg)
        except Exception as e:  # noqa: BLE001
            data = pickle.dumps(("exception", ("PicklingError", str(e))))
        writer.send_bytes(data)
        writer.close()
        os._exit(0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)    # fork in a process with threads
        p = ctx.Process(target=child, daemon=True)
        p.start()
    writer.close()
    try:
        if not reader.poll(timeout):
            os.kill(p.pid, signal.SIGKILL)
            p.join()
            return "timeout", None
        return pickle.loads(reader.recv_bytes())
    except EOFError:
        p.join()
        return "crash", p.exitcode
    finally:
        reader.close()
        p.join(10)


def isolated(call: Callable[[], Any], timeout: float = 60.0, what: str = "") -> tuple[str, Any]:
    """The outcome rule in a forked child: ``("ok", summary)`` / ``("error", (class name, message))``,
    where summary is :func:`summary` of the value; a non-quantspec exception, a crash (the child killed
    by a signal) or a hang (past ``timeout`` seconds) fails the test, naming ``what``."""
    def child():
        out = outcome(call, what)
        return ("ok", summary(out.value)) if out.ok else ("error", (type(out.error).__name__, str(out.error)))

    kind, payload = run_child(child, timeout)
    if kind == "timeout":
        raise AssertionError(f"a hang: no answer within {timeout} s: {what}")
    if kind == "crash":
        raise AssertionError(f"a crash: the call killed its process (exit {payload}): {what}")
    if kind == "exception":
        raise AssertionError(f"{payload[0]}: {payload[1]}")
    return payload


def summary(value: Any) -> Any:
    """A small picklable digest of a result (shapes, dtypes, bytes of small arrays)."""
    if isinstance(value, np.ndarray):
        return ("array", value.shape, str(value.dtype), value.tobytes() if value.size <= 1 << 16 else value.size)
    if isinstance(value, (tuple, list)):
        return tuple(summary(v) for v in value)
    return repr(value)[:200]


def chance(draw, p: float) -> bool:
    """True with probability ``p``.  (hypothesis' own floats lean on 0.0 and its integers on small values,
    so ``floats(0, 1) < p`` is true far more often than p: the draw seeds a generator instead.)"""
    import random

    return random.Random(draw(st.integers(0, 2 ** 32 - 1))).random() < p


# -- arrays --------------------------------------------------------------------------------------

FLOAT_TYPES = (np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float64))


def shapes(max_rank: int = 4, max_side: int = 6, min_rank: int = 0) -> st.SearchStrategy[tuple[int, ...]]:
    """Small shapes: 0-d, empty (a 0 side), odd sizes."""
    return st.lists(st.integers(0, max_side), min_size=min_rank, max_size=max_rank).map(tuple)


def float_values(rng: np.random.Generator, n: int, dtype: np.dtype, scale: float = 1.0) -> np.ndarray:
    """``n`` float values of ``dtype``: a mixture of ordinary values at many magnitudes, ties
    (k + 0.5) * scale, and the special values (±0, ±inf, NaN, subnormals, the largest finite)."""
    dtype = np.dtype(dtype)
    info = ml_dtypes.finfo(dtype) if dtype.kind == "V" else np.finfo(dtype)
    big, tiny = float(info.max), float(info.smallest_subnormal)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, big, -big, tiny, -tiny, float(info.tiny), 1.0, -1.0,
                         0.5, -0.5, 1.5, -2.5, 127.5, -128.5, 255.5, 1e30, -1e30], np.float64)
    kind = rng.integers(0, 4, n)
    out = np.empty(n, np.float64)
    mags = 10.0 ** rng.uniform(-8, 8, n)
    out[kind == 0] = (rng.standard_normal(n) * mags)[kind == 0]
    out[kind == 1] = ((rng.integers(-300, 300, n) + 0.5) * scale)[kind == 1]
    out[kind == 2] = specials[rng.integers(0, specials.size, n)][kind == 2]
    out[kind == 3] = rng.uniform(-3, 3, n)[kind == 3] * scale * 127
    with np.errstate(over="ignore", invalid="ignore"):
        return out.astype(np.float32).astype(dtype) if dtype != np.float64 else out


def int_values(rng: np.random.Generator, n: int, dtype: np.dtype) -> np.ndarray:
    dtype = np.dtype(dtype)
    info = ml_dtypes.iinfo(dtype) if dtype.kind == "V" else np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    edges = np.array([lo, hi, 0, -1 if lo < 0 else 1, lo + 1, hi - 1], np.int64)
    v = rng.integers(lo, hi + 1, n, dtype=np.int64)
    pick = rng.random(n) < 0.3
    v[pick] = edges[rng.integers(0, edges.size, n)][pick]
    return v.astype(dtype) if dtype.kind != "V" else v.astype(np.int8 if lo < 0 else np.uint8).astype(dtype)


def values(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any, scale: float = 1.0) -> np.ndarray:
    dtype = np.dtype(dtype)
    n = math.prod(shape)
    is_float = dtype.kind == "f" or (dtype.kind == "V" and _is_ml_float(dtype))
    flat = float_values(rng, n, dtype, scale) if is_float else int_values(rng, n, dtype)
    return flat.reshape(shape)


def _is_ml_float(dtype: np.dtype) -> bool:
    try:
        ml_dtypes.finfo(dtype)
        return True
    except Exception:  # noqa: BLE001
        return False


LAYOUTS = ("c", "fortran", "strided", "reversed", "big-endian", "read-only", "unaligned", "broadcast")


def layout(a: np.ndarray, how: str) -> np.ndarray:
    """The same values (``how="broadcast"``: those of a broadcast view of ``a``'s first slice) in
    another memory layout."""
    if how == "fortran":
        return np.asfortranarray(a)
    if how == "strided" and a.ndim:
        b = np.zeros(a.shape[:-1] + (a.shape[-1] * 2,), a.dtype)
        b[..., ::2] = a
        return b[..., ::2]
    if how == "reversed" and a.ndim:
        return a[::-1].copy()[::-1]
    if how == "big-endian" and a.dtype.kind in "iuf" and a.dtype.itemsize > 1:
        return a.astype(a.dtype.newbyteorder(">"))
    if how == "read-only":
        b = a.copy()
        b.setflags(write=False)
        return b
    if how == "unaligned" and a.dtype.itemsize > 1:
        raw = np.empty(a.nbytes + 1, np.uint8)[1:]
        b = raw.view(a.dtype).reshape(a.shape)
        b[...] = a
        return b
    if how == "broadcast" and a.ndim and a.shape[0] > 1:
        return np.broadcast_to(a[:1], a.shape)
    return a


def huge_view(dtype: Any, log2: int, value: Any = 1, rank: int = 2) -> np.ndarray:
    """A broadcast view declaring 2^log2 elements (no memory behind it)."""
    sides = [log2 // rank] * rank
    sides[-1] += log2 - sum(sides)
    return np.broadcast_to(np.array(value).astype(dtype), tuple(2 ** s for s in sides))


@st.composite
def arrays(draw, dtypes, shape=None, layouts=LAYOUTS, scale: float = 1.0, max_side: int = 6, min_rank: int = 0):
    """A numpy array of one of ``dtypes`` with seeded values (:func:`values`), in one of ``layouts``."""
    dtype = np.dtype(draw(st.sampled_from(list(dtypes))))
    shp = draw(shapes(max_side=max_side, min_rank=min_rank)) if shape is None else shape
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    a = values(rng, shp, dtype, scale)
    return layout(a, draw(st.sampled_from(list(layouts))))


@contextlib.contextmanager
def quiet():
    """numpy's warnings off (for the oracles' own arithmetic)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
