"""Element-wise work on tensors of any size, a slab of rows at a time (the command line).

``quantspec quantize|dequantize`` maps its input (:func:`tensorio.read_tensors` with
``mapped=True``), and each spec describes the work on every input tensor as a :class:`Job`: a
function that computes rows ``[lo, hi)`` of the result along axis 0 (with the parameters that
follow axis 0 cut to those rows) and the step that slab boundaries must respect (a block size
along axis 0).  :func:`outputs` turns the jobs into :class:`tensorio.Stream` objects that the
writer pulls a slab at a time, so memory holds one slab of input and output, not the tensors.

A tensor whose parameters cannot be cut (or a small one) is computed whole, in one call: the result
is the same bytes either way, because every operation here is element-wise given its parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import tensorio
from ..errors import TensorFileError

__all__ = ["Job", "SLAB", "rows_of", "cutter", "slab_rows", "outputs"]

SLAB = 1 << 24
"""Elements per slab (16 Mi: 64 MiB of float32); tensors up to this size are computed whole."""


@dataclass(frozen=True)
class Job:
    """The work on one input tensor ``x``.

    ``compute(lo, hi)`` returns ``{name: rows lo..hi of the result, other: side output, ...}``;
    ``compute(0, rows_of(x.shape))`` is the whole computation with the parameters as given.  Side
    outputs (TensorFlow's output_min / output_max) must not depend on the rows.  ``step``: slab
    boundaries are multiples of it and every slab has at least ``step`` rows; ``None``: the
    tensor is computed whole."""

    name: str
    x: np.ndarray
    step: int | None
    compute: Callable[[int, int], dict[str, np.ndarray]]


def rows_of(shape: Sequence[int]) -> int:
    return int(shape[0]) if len(shape) else 0


def cutter(params: Sequence[Any], rows: int, per: int = 1) -> Callable[[int, int], tuple] | None:
    """For parameters whose axis 0 runs along x's axis 0, one entry per ``per`` rows: a function
    ``(lo, hi) -> the parameters of rows [lo, hi)`` (``lo`` a multiple of ``per``), or None when one
    of them does not have that many entries (then the whole call reports or handles it).  None
    entries and scalars are passed through."""
    n = -(-rows // per)
    for p in params:
        if p is not None and np.ndim(p) and np.shape(p)[0] != n:
            return None

    def cut(lo: int, hi: int) -> tuple:
        return tuple(p if p is None or not np.ndim(p) else p[lo // per:-(-hi // per)] for p in params)

    return cut


def slab_rows(shape: Sequence[int], step: int) -> int:
    """Rows per slab: about :data:`SLAB` elements, a multiple of ``step``, at least ``step``."""
    per_row = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
    n = SLAB // max(per_row, 1)
    return max(step, n - n % step)


def _pieces(job: Job, rows: int, size: int) -> Iterator[np.ndarray]:
    lo = 0
    while lo < rows:
        hi = min(rows, lo + size)
        if rows - hi < job.step:  # never leave fewer than step rows for the last slab
            hi = rows
        yield job.compute(lo, hi)[job.name]
        tensorio.release(job.x[lo:hi])
        lo = hi


def outputs(jobs: Sequence[Job]) -> dict[str, Any]:
    """The outputs of ``jobs`` in order: arrays for tensors computed whole, and a
    :class:`tensorio.Stream` for each large one, computed a slab at a time while it is written."""
    out: dict[str, Any] = {}
    source: dict[str, str] = {}  # output name -> the input tensor whose job made it

    def add(job: Job, items) -> None:
        for k, v in items:
            if k in out:  # e.g. TensorFlow's NAME.output_min beside an input tensor of that name
                raise TensorFileError("output", f"would hold two tensors named {k!r}: from input tensor "
                                      f"{source[k]!r} and from input tensor {job.name!r}", k,
                                      detail="rename one, or select tensors with --tensor")
            out[k], source[k] = v, job.name

    for job in jobs:
        shape = tuple(job.x.shape)
        rows = rows_of(shape)
        if job.step is None or job.x.size <= SLAB or rows <= job.step:
            add(job, job.compute(0, rows).items())
            continue
        probe = job.compute(0, job.step)  # the result's type and the side outputs, from the first rows
        stream = tensorio.Stream(shape, probe[job.name].dtype, _pieces(job, rows, slab_rows(shape, job.step)))
        add(job, [(job.name, stream)] + [(k, v) for k, v in probe.items() if k != job.name])
    return out
