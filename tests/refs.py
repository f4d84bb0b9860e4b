"""Access to the reference runtimes the conformance tests compare against.

With ``QUANTSPEC_REQUIRE_REFERENCES=1`` (as CI sets it) a runtime that cannot be imported is a test
*failure*; without it the test is skipped, so a developer without the runtimes can still run the
unit tests.
"""

from __future__ import annotations

import importlib
import os

import pytest

REQUIRE = os.environ.get("QUANTSPEC_REQUIRE_REFERENCES") == "1"

#: the versions the notes measured and quantspec's compat modes reproduce
PINNED = {"onnx": "1.23.2", "onnxruntime": "1.31.1", "tensorflow": "2.21.0", "ai_edge_litert": "2.3.0"}


def require(module: str):
    """Import a reference runtime, or fail (CI) / skip (developer machine) when it is missing."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # ImportError, or a broken install
        message = f"reference runtime {module!r} cannot be imported: {type(e).__name__}: {e}"
        if REQUIRE:
            pytest.fail(message + " (QUANTSPEC_REQUIRE_REFERENCES=1: a missing runtime is a failure)")
        pytest.skip(message)


def require_fast():
    """The fast path needs numba (``pip install 'quantspec[fast]'``): skipped without it, a failure in
    CI (QUANTSPEC_REQUIRE_REFERENCES=1), like a missing reference runtime.  A run with QUANTSPEC_FAST=0
    (the whole suite on the reference path) skips the fast-path tests."""
    require("numba")
    from quantspec._core import jit

    if not jit.enabled():
        pytest.skip("QUANTSPEC_FAST=0: the fast path is switched off")
