"""The calibration observers' compiled kernels (:mod:`quantspec.calibrate._jitted`), loaded on first use."""

from __future__ import annotations

from .._fastpath import jit
from ..errors import UnsupportedError

__all__ = ["jitted"]


def jitted():
    """The kernel module; numba is needed (the observers have no numpy path for their passes)."""
    if not jit.numba_available():
        raise UnsupportedError("numba", "is needed by the calibration observers' kernels (pip install "
                               "'quantspec[fast]')", None)
    return jit.load("quantspec.calibrate._jitted")
