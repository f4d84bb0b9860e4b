"""Whole checkpoints: ``quantspec.checkpoint.convert`` and ``open``.

``convert(src, dst, scheme)`` turns a float checkpoint (safetensors, sharded or not, .npz, .npy;
float32, float16, bfloat16) into a quantized one: a directory of safetensors shards holding each
tensor's codes, scale and zero point, with its own index and a manifest, in quantspec's layout or
compressed-tensors' (``format=``), on this machine or a Dask cluster (``dask=``); ``open(dst)`` reads
it back (either layout, or a compressed-tensors checkpoint of another tool); ``verify(src, dst)``
checks it against its source, byte for byte.  See ``docs/checkpoints.md`` for the schemes, their
exact rules and the file layouts.

The package, a module per concern: :mod:`.sources` (reading the input), :mod:`.schemes` (the schemes
and recipes), :mod:`.layout` (planning every output byte), :mod:`.encode` (one slab, fast or
reference), :mod:`.digest` (the source digests), :mod:`.backend` (where slabs run), :mod:`.cluster`
(Dask), :mod:`.paths` (paths and URLs), :mod:`.writer` (the output files), :mod:`.ctlayout` (the
compressed-tensors layout), :mod:`.converter` (``convert``), :mod:`.stored` and :mod:`.reader`
(``open``), :mod:`.rederive` and :mod:`.verify` (``verify``), :mod:`._cli` (``quantspec convert`` /
``verify``), :mod:`.bench`.
"""

from __future__ import annotations

from .converter import convert
from .progress import ProgressEvent
from .reader import QuantizedCheckpoint, open
from .report import ConversionReport, Difference, TensorCheck, TensorReport, VerifyReport
from .schemes import SCHEMES, Scheme
from .verify import verify

__all__ = ["convert", "open", "verify", "ConversionReport", "TensorReport", "VerifyReport", "TensorCheck",
           "Difference", "QuantizedCheckpoint", "ProgressEvent", "SCHEMES", "Scheme"]
