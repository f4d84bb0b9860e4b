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

def locked() -> dict[str, str]:
    """requirements/test.txt (the test environment's lock): distribution name (lower case, ``-`` for
    ``_``) -> the exact version it pins."""
    lock = Path(__file__).resolve().parents[2] / "requirements" / "test.txt"
    pins = {}
    for line in lock.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[name.lower().replace("_", "-")] = version
    return pins


#: the reference runtimes' versions in the locked test environment (what the conformance suites check)
PINNED = {module: locked()[dist] for module, dist in (("onnx", "onnx"), ("onnxruntime", "onnxruntime"),
                                                     ("tensorflow", "tensorflow-cpu"),
                                                     ("ai_edge_litert", "ai-edge-litert"))}


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
