"""What an observer computes: :class:`CalibrationRange`, the fields of onnxruntime's ``TensorData``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["CalibrationRange"]


@dataclass(frozen=True, eq=False)
class CalibrationRange:
    """A calibrated range, with the same values, dtypes and shapes as the fields of onnxruntime's
    ``TensorData`` for the calibrator it reproduces: ``lowest`` / ``highest`` (numpy arrays; MinMax
    gives 1-element arrays, the histogram methods 0-d ones), and where the method has them the
    histogram (``hist``, int64 counts; ``hist_edges``, float32) and ``avg`` / ``std`` (Distribution).
    ``method`` names the calibrator."""

    method: str
    lowest: np.ndarray
    highest: np.ndarray
    hist: np.ndarray | None = None
    hist_edges: np.ndarray | None = None
    avg: np.ndarray | None = None
    std: np.ndarray | None = None

    @property
    def range_value(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lowest, highest)``, as ``TensorData.range_value``."""
        return self.lowest, self.highest

    def as_floats(self) -> tuple[float, float]:
        lo, hi = np.asarray(self.lowest).reshape(-1), np.asarray(self.highest).reshape(-1)
        if lo.size != 1 or hi.size != 1:
            from ..errors import ShapeError

            raise ShapeError("lowest", "must hold one value (and highest too) to be read as two floats",
                             (lo.shape, hi.shape))
        return float(lo[0]), float(hi[0])

    def __repr__(self) -> str:
        if np.size(self.lowest) == 1 and np.size(self.highest) == 1:
            lo, hi = self.as_floats()
        else:
            lo, hi = self.lowest, self.highest
        extra = "" if self.hist is None else f", {self.hist.size} bins"
        return f"CalibrationRange({self.method}: [{lo!r}, {hi!r}]{extra})"
