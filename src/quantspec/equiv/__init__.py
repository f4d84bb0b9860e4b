"""Quantizers across specs: prove two equal over every input, translate one into another.

- :func:`equivalent` (``quantspec.equivalent``): run two quantizer records over every input of a
  type (all 2^32 float32 bit patterns, all 2^16 float16 / bfloat16 ones, or a given array) and report
  where their codes differ (:mod:`.prove`, :mod:`.report`);
- :func:`translate` (``quantspec.translate``): the record of another spec that agrees with a given
  one on the most inputs, and how the real converters choose (:mod:`.translate`, :mod:`.converters`);
- :func:`parse`: a record from its one-line spec string (:mod:`.specstring`).
"""

from __future__ import annotations

# imported here, not on first use: the function ``translate`` shares its name with the module
# ``quantspec.equiv.translate``, and importing that module (directly, by anyone) would otherwise
# leave the module object where the function should be
from .prove import equivalent
from .report import ChannelReport, EquivalenceReport, Example
from .specstring import parse
from .translate import Translation, translate

__all__ = ["ChannelReport", "EquivalenceReport", "Example", "Translation", "equivalent", "parse", "translate"]
