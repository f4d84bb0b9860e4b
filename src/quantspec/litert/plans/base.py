"""What every plan shares: the :class:`Plan` interface, scratch buffers, kernel entry points, the exact GEMM."""

from __future__ import annotations

import threading
from typing import Any, Sequence

import numpy as np

from ..._fastpath import jit
from .._gemm import f32_chunk

__all__ = ["Plan", "Scratch", "Requant", "jitted", "own", "bind", "exact_chunks", "exact_gemm"]


def jitted():
    """The plans' numba kernels (:mod:`quantspec.litert._jitted_plans`)."""
    return jit.load("quantspec.litert._jitted_plans")


def own(a, dtype=None) -> np.ndarray:
    """A fresh, writable, contiguous copy: every array a plan hands a kernel has the same flags, so
    that each kernel compiles one signature per combination of types (numba's array type includes
    whether it is writable)."""
    return np.array(a, dtype=dtype, order="C", copy=True)


def bind(name: str, args: tuple):
    """The compiled entry point of the plan kernel ``name`` for exactly the types of ``args``
    (:func:`quantspec._fastpath.runner.dispatcher_entry`: no type checks at each call), for a plan whose later calls
    pass arguments of the same numba types: its own arrays, and the operator's inputs as flat
    (``reshape(-1)``: C-contiguous) arrays of one-byte codes, whose type can differ only by the
    writeable flag, which compiled code that reads them does not depend on."""
    from ..._fastpath.runner import dispatcher_entry

    return dispatcher_entry(getattr(jitted(), name), args)


class Plan:
    """The interface the interpreter calls: ``compute(unused, arrays) -> outputs``, like a kernel
    whose prepared record is the plan itself.  ``entry``: the compiled entry point of its numba kernel
    once bound (:func:`bind`), for plans whose inputs are one-byte codes."""

    __slots__ = ("kernel", "prepared", "entry")

    def __init__(self, kernel, prepared):
        self.kernel, self.prepared = kernel, prepared
        self.entry = None

    def reference(self, arrays):
        """The reference kernel's compute (cases the plan defers)."""
        return self.kernel.compute(self.prepared, arrays)

    def compute(self, unused, arrays):  # pragma: no cover - abstract
        raise NotImplementedError


class Scratch:
    """Buffers kept between runs, for one thread at a time (another thread gets fresh ones)."""

    __slots__ = ("lock", "shapes", "buffers")

    def __init__(self, shapes: Sequence[tuple[tuple[int, ...], Any]]):
        self.lock = threading.Lock()
        self.shapes = tuple(shapes)
        self.buffers = None

    def take(self):
        if self.lock.acquire(False):
            if self.buffers is None:
                self.buffers = tuple(np.empty(s, d) for s, d in self.shapes)
            return self.buffers, True
        return tuple(np.empty(s, d) for s, d in self.shapes), False

    def give(self, owned: bool) -> None:
        if owned:
            self.lock.release()


def exact_chunks(depth: int, a_bound: int, b_bound: int) -> list[tuple[int, int]] | None:
    """The depth cut into pieces whose float32 GEMMs are exact (None: a piece would be too short)."""
    kc = f32_chunk(a_bound, b_bound)
    if kc >= depth:
        return [(0, depth)]
    if kc < 64 or depth * a_bound * b_bound > (1 << 53):
        return None
    return [(k0, min(depth, k0 + kc)) for k0 in range(0, depth, kc)]


def exact_gemm(a: np.ndarray, w: np.ndarray, chunks, g32: np.ndarray, g64: np.ndarray | None) -> np.ndarray:
    """``a @ w`` exactly: one float32 GEMM per chunk of the depth, summed in float64 (exact: every
    chunk's result is an integer of at most 2^24, their sum far below 2^53)."""
    if len(chunks) == 1:
        np.matmul(a, w, out=g32)
        return g32
    for j, (k0, k1) in enumerate(chunks):
        np.matmul(a[:, k0:k1], w[k0:k1], out=g32)
        if j == 0:
            np.copyto(g64, g32)
        else:
            np.add(g64, g32, out=g64)
    return g64


class Requant:
    """The per-channel arrays and constants of an epilogue."""

    __slots__ = ("corr", "mult", "shift", "eff", "kind", "zo", "lo", "hi", "dtype", "entry")

    def __init__(self, channels, corr, kind, zo, lo, hi, dtype, multiplier=None, shift=None, eff=None):
        from .. import _jitted_plans as K

        self.corr = own(np.broadcast_to(np.asarray(corr, np.int64), (channels,)))
        m = np.broadcast_to(np.asarray(0 if multiplier is None else multiplier, np.int64), (channels,))
        s = np.broadcast_to(np.asarray(0 if shift is None else shift, np.int64), (channels,))
        if kind == K.MBQM64:                          # the int64 overload's reduced multiplier, total shift
            m = np.where(m < 0x7FFF0000, (m + (1 << 15)) >> 16, 0x7FFF)
            s = 15 - s
        self.mult = own(m)
        self.shift = own(s)
        self.eff = own(np.broadcast_to(np.asarray(0.0 if eff is None else eff, np.float64),
                                                        (channels,)))
        self.kind, self.zo, self.lo, self.hi, self.dtype = int(kind), int(zo), int(lo), int(hi), np.dtype(dtype)
        self.entry = None

    def run(self, g: np.ndarray, split: bool, rows: int, channels: int) -> np.ndarray:
        """The epilogue over ``g``, an accumulator the plan made itself (its type, contiguity and
        alignment the same on every call: the entry point is bound once)."""
        out = np.empty((rows, channels), self.dtype)
        args = (g.reshape(-1), split, self.corr, self.mult, self.shift, self.eff, self.kind, self.zo, self.lo,
                self.hi, out.reshape(-1))
        entry = self.entry
        if entry is None:
            entry = self.entry = bind("epilogue", args)
        entry(*args)
        return out
