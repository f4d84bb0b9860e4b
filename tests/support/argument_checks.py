"""Helpers for the tests that a bad argument beside a huge input is named at once: huge broadcast
views (no memory behind them) and a check that a call is refused within a second of CPU time."""

from __future__ import annotations

import time

import numpy as np
import pytest


def huge_broadcast(dtype, n=58, shape=None):
    """A broadcast view declaring 2^n elements (no memory behind it)."""
    return np.broadcast_to(np.array(0.5 if np.dtype(dtype).kind == "f" else 3, dtype), shape or (2 ** (n // 2), 2 ** (n - n // 2)))


def refused_quickly(call, error):
    t0 = time.process_time()
    with pytest.raises(error) as e:
        call()
    assert time.process_time() - t0 < 1.0
    return e.value
