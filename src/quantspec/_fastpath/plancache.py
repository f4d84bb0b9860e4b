"""Plans kept for the next call: planning a call (checking every rule, choosing the layout,
preparing the kernel's parameters) costs tens of microseconds warm, and hundreds right after a large
array has flushed the caches: a visible share of a 64 Mi-element quantize, and most of a small one.

Calls that repeat one another (same x shape and dtype, same parameter *values*, same attributes)
reuse the plan and its prepared fast-path state.  The key holds the parameters' bytes (so -0.0 and
0.0, or NaN payloads, never share a plan; parameters of more than :data:`SMALL` entries are not
cached) and the *type* of every attribute beside its value (so True is not taken for 1).  A plan is
made from copies of the caller's parameter arrays (:func:`own`), so changing those arrays later
cannot change a cached plan.  Used by :func:`quantspec.onnx.quantize_linear` and
:func:`quantspec.tf.quantize` and their dequantize twins.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from . import runner as core

__all__ = ["PlanCache", "own", "SMALL"]

#: parameters with more entries than this are not cached (hashing their bytes would start to cost
#: what planning does: about 3 us for 1024 float32)
SMALL = 1024


class _Uncacheable(Exception):
    pass


def _value_key(v: Any):
    t = type(v)
    if v is None:
        return None
    if t is float:
        return float, v.hex()
    if t is int:
        return int, v
    if isinstance(v, np.generic):
        dtype = v.dtype
        if dtype.kind not in "biufV":
            raise _Uncacheable
        return np.generic, dtype, v.tobytes()
    if isinstance(v, np.ndarray):
        if v.size > SMALL or v.dtype.kind not in "biufV":
            raise _Uncacheable
        return np.ndarray, v.dtype, v.shape, v.tobytes()
    raise _Uncacheable


def own(v: Any) -> Any:
    """``v``, or a copy of it if it is an array its owner could change."""
    return v.copy() if isinstance(v, np.ndarray) else v


#: types whose objects' identity fixes their value for as long as they live: None, Python floats and
#: ints, numpy numbers (not void scalars, which may be views into an array)
_IMMUTABLE = frozenset([type(None), float, int, *(np.dtype(c).type for c in "?bBhHiIlLqQefdg")])


def _constant(v: Any) -> bool:
    """``v``'s identity fixes its value (an attribute: a number, a string, a dtype or a type)."""
    return type(v) in _IMMUTABLE or type(v) in (str, bool) or isinstance(v, (np.dtype, type))


class PlanCache:
    """At most ``size`` entries (cleared when full), keyed by :meth:`key`."""

    def __init__(self, size: int = 256):
        self.size = size
        self._entries: dict = {}
        # the parameter values of the last keyed call when they were all immutable (held, so that
        # their identities stay theirs) and their keys: a loop that passes the same scale and zero
        # point objects again skips re-reading their bytes
        self._last: tuple = ((), ())
        # per kind, the last call whose parameters and attributes were all constants (held), with
        # its entry: a loop that repeats a call with the same objects skips the key (:meth:`recall`)
        self._recent: dict = {}

    def recall(self, kind: str, x: Any, values: tuple, attrs: tuple):
        """The entry of the last :meth:`remember`-ed call of ``kind`` if this one repeats it: x of the
        same shape and dtype, the very same parameter and attribute objects (all constants); else
        None.  About a tenth of :meth:`key` + :meth:`get`."""
        recent = self._recent.get(kind)
        if recent is None or type(x) is not np.ndarray:
            return None
        shape, dtype, chunk, rv, ra, entry = recent
        if (x.shape == shape and x.dtype is dtype and chunk == core.CHUNK and all(map(operator.is_, rv, values))
                and all(map(operator.is_, ra, attrs))):
            return entry
        return None

    def remember(self, kind: str, x: Any, values: tuple, attrs: tuple, entry) -> None:
        """Keep ``entry`` for :meth:`recall` when every parameter and attribute is a constant."""
        if type(x) is np.ndarray and all(map(_constant, values)) and all(map(_constant, attrs)):
            self._recent[kind] = (x.shape, x.dtype, core.CHUNK, tuple(values), tuple(attrs), entry)

    def key(self, kind: str, x: Any, values: tuple, attrs: tuple) -> tuple | None:
        """The key of a call on array ``x`` with parameter ``values`` and ``attrs``; None when the
        call cannot be keyed (x not an array, a large or non-numeric parameter).  An unhashable
        attribute gives a key that :meth:`get` never finds and :meth:`put` does not keep.  The
        layout's work-item size (``core.CHUNK``) is part of it."""
        if not isinstance(x, np.ndarray):
            return None
        last, keys = self._last
        if len(last) != len(values) or not all(map(operator.is_, last, values)):
            try:
                keys = tuple(map(_value_key, values))
            except _Uncacheable:
                return None
            if all(map(_IMMUTABLE.__contains__, map(type, values))):
                self._last = (tuple(values), keys)
        return (kind, x.shape, x.dtype, core.CHUNK, *keys, attrs, tuple(map(type, attrs)))

    def get(self, key: tuple | None):
        if key is None:
            return None
        try:
            return self._entries.get(key)
        except TypeError:                        # an unhashable attribute
            return None

    def put(self, key: tuple | None, entry) -> None:
        if key is None:
            return
        if len(self._entries) >= self.size:
            self._entries.clear()
            self._recent.clear()
        try:
            self._entries[key] = entry
        except TypeError:
            pass

    def clear(self) -> None:
        self._entries.clear()
        self._recent.clear()

    def values(self):
        return list(self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)
