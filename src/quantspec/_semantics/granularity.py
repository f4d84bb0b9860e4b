"""Axis normalisation and the broadcasting of per-tensor, per-axis and blocked parameters.

The *rules* of which shapes a spec accepts live with the spec (ONNX in
:mod:`quantspec.onnx.params`, TensorFlow in :mod:`quantspec.tf`, LiteRT in its op table); this
module only holds the mechanics they share: normalising an axis, and expanding a parameter array
so that it broadcasts against the input.
"""

from __future__ import annotations

import numpy as np

from ..errors import AxisError

__all__ = ["normalize_axis", "per_axis_view", "expand_blocks", "block_count"]


def normalize_axis(axis: int, ndim: int, argument: str = "axis") -> int:
    """Map ``axis`` in ``[-ndim, ndim-1]`` to ``[0, ndim-1]``; raise :class:`AxisError` otherwise."""
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise AxisError(argument, "must be an integer", axis)   # 1.0 too: an axis is not a float
    a = int(axis)
    if ndim == 0:
        raise AxisError(argument, "has no meaning for a rank-0 input; it needs at least one dimension", axis)
    if not -ndim <= a < ndim:
        raise AxisError(argument, f"must be in [{-ndim}, {ndim - 1}] for a rank-{ndim} input", axis)
    return a + ndim if a < 0 else a


def per_axis_view(param: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """Reshape a 1-D parameter of length D[axis] so it broadcasts along ``axis`` of a rank-``ndim``
    array (``axis`` already normalised)."""
    shape = [1] * ndim
    shape[axis] = param.shape[0]
    return param.reshape(shape)


def block_count(dim: int, block_size: int) -> int:
    """Number of blocks of ``block_size`` covering ``dim`` elements (the last may be partial)."""
    return -(-dim // block_size)


def expand_blocks(param: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int) -> np.ndarray:
    """Repeat each element of a blocked parameter ``block_size`` times along ``axis`` and cut it to
    ``shape[axis]`` (a partial last block keeps its scale)."""
    out = np.repeat(param, block_size, axis=axis)
    if out.shape[axis] != shape[axis]:
        out = np.take(out, np.arange(shape[axis]), axis=axis)
    return out
