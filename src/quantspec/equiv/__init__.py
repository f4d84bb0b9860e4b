"""Quantizers across specs: prove two equal over every input, translate one into another.

- :func:`equivalent` (``quantspec.equivalent``): run two quantizer records over every input of a
  type (all 2^32 float32 bit patterns, all 2^16 float16 / bfloat16 ones, or a given array) and report
  where their codes differ (:mod:`.prove`, :mod:`.report`);
- :func:`translate` (``quantspec.translate``): the record of another spec that agrees with a given
  one on the most inputs, and how the real converters choose (:mod:`.translate`, :mod:`.converters`);
- :func:`parse`: a record from its one-line spec string (:mod:`.specstring`).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "equivalent": "prove",
    "EquivalenceReport": "report",
    "ChannelReport": "report",
    "Example": "report",
    "translate": "translate",
    "Translation": "translate",
    "parse": "specstring",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'quantspec.equiv' has no attribute {name!r}")
