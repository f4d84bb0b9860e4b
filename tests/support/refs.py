"""Access to the reference runtimes the conformance tests compare against.

With ``QUANTSPEC_REQUIRE_REFERENCES=1`` (as CI sets it) a runtime that cannot be imported is a test
*failure*; without it the test is skipped, so a developer without the runtimes can still run the
unit tests.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

REQUIRE = os.environ.get("QUANTSPEC_REQUIRE_REFERENCES") == "1"

def _locked(distribution: str) -> str:
    """The version requirements/test.txt (the test environment's lock) pins ``distribution`` at."""
    lock = Path(__file__).resolve().parents[2] / "requirements" / "test.txt"
    for line in lock.read_text().splitlines():
        name, _, version = line.partition("==")
        if name.lower().replace("_", "-") == distribution:
            return version
    raise LookupError(f"requirements/test.txt does not pin {distribution}")


#: the reference runtimes' versions in the locked test environment (what the conformance suites check)
PINNED = {"onnx": _locked("onnx"), "onnxruntime": _locked("onnxruntime"), "tensorflow": _locked("tensorflow-cpu"),
          "ai_edge_litert": _locked("ai-edge-litert")}


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
    from quantspec._fastpath import jit

    if not jit.enabled():
        pytest.skip("QUANTSPEC_FAST=0: the fast path is switched off")
