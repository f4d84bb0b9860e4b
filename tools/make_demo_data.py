"""Make src/quantspec/data/demo_weights.npz: the tensor `quantspec demo` quantizes.

A deterministic stand-in for one linear layer of a trained network (no network access here, so no
downloaded checkpoint): 128 output channels x 256 inputs, heavy-tailed values (Student-t, 4 degrees of
freedom), per-channel magnitudes spread over a decade (log-normal), and a few outlier weights — the
features that make per-tensor, per-channel and blocked schemes differ.  Run from the repository root:
python tools/make_demo_data.py
"""

from pathlib import Path

import numpy as np

rng = np.random.default_rng(20261122)
rows, cols = 128, 256
w = rng.standard_t(4, size=(rows, cols)) * np.exp(rng.normal(-3.0, 0.6, size=(rows, 1)))
outliers = rng.choice(rows * cols, size=12, replace=False)
w.reshape(-1)[outliers] *= 8.0
w = w.astype(np.float32)
out = Path(__file__).resolve().parents[1] / "src" / "quantspec" / "data" / "demo_weights.npz"
np.savez_compressed(out, weight=w)
print(f"wrote {out} ({out.stat().st_size} bytes): weight {w.shape} {w.dtype}, max |w| {np.abs(w).max():.4f}")
