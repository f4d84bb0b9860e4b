"""Test-wide settings.

TensorFlow's Eigen kernels are the oracle in-process, so oneDNN is switched off before anything can
import TensorFlow; the oneDNN comparisons run in their own subprocess with it switched on.
"""

import os
import sys
from pathlib import Path

import pytest

os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

sys.path.insert(0, str(Path(__file__).parent / "support"))  # the oracles and helpers: `import refs`


@pytest.fixture
def small_parallel(monkeypatch):
    """The fast path's parallel kernels at small sizes: from 2 Ki elements, work items of 1600
    elements (of one-byte codes: a whole stream buffer of 1 KiB, then whole lines, then a tail),
    streaming stores from 1 KiB of output, for runs from a line long (short runs stream too)."""
    from quantspec._fastpath import runner as core

    monkeypatch.setattr(core, "SERIAL_BELOW", 2048)
    monkeypatch.setattr(core, "SERIAL_BELOW_PASSIVE", 2048)
    monkeypatch.setattr(core, "CHUNK", 1600)
    monkeypatch.setattr(core, "STREAM_FROM", 1024)
    monkeypatch.setattr(core, "STREAM_BLOCK", 64)     # fast.run: the shortest run that streams


@pytest.fixture(autouse=True)
def _interpreter_kernels_at_every_size(monkeypatch):
    """The interpreter runs its smallest tensors on the reference path (REFERENCE_IN_MODELS); the
    tests' models are small, so every test lowers that to 0 and runs the fast kernels on them
    (tests/test_litert_fast.py checks the default)."""
    from quantspec.litert import interpreter

    monkeypatch.setattr(interpreter, "REFERENCE_IN_MODELS", 0)
