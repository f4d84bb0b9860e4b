"""Whole checkpoints: ``quantspec.checkpoint.convert`` and ``open``.

``convert(src, dst, scheme)`` turns a float checkpoint (safetensors, sharded or not, .npz, .npy;
float32, float16, bfloat16) into a quantized one: a directory of safetensors shards holding each
tensor's codes, scale and zero point, with its own index and a manifest; ``open(dst)`` reads it back.
See ``docs/checkpoints.md`` for the schemes, their exact rules and the file layout.

The package, a module per concern: :mod:`.sources` (reading the input), :mod:`.schemes` (the schemes
and recipes), :mod:`.layout` (planning every output byte), :mod:`.encode` (one slab, fast or
reference), :mod:`.backend` (where slabs run), :mod:`.writer` (the output files), :mod:`.convert`,
:mod:`.reader` (``open``), :mod:`._cli` (``quantspec convert``), :mod:`.bench`.
"""

from __future__ import annotations

from .converter import convert
from .progress import ProgressEvent
from .reader import QuantizedCheckpoint, open
from .report import ConversionReport, TensorReport
from .schemes import SCHEMES, Scheme

__all__ = ["convert", "open", "ConversionReport", "TensorReport", "QuantizedCheckpoint", "ProgressEvent", "SCHEMES",
           "Scheme"]
