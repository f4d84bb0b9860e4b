"""The TensorFlow section of ``quantspec demo``: QuantizeV2 / Dequantize of the bundled weights in
each mode, and how many codes TensorFlow's oneDNN kernels (stock TensorFlow on x86-64 Linux)
compute differently from its Eigen kernels (TF_ENABLE_ONEDNN_OPTS=0)."""

from __future__ import annotations

import numpy as np

from . import dequantize, quantize

SCHEMES = [
    ("qint8 MIN_COMBINED", dict(T="qint8", mode="MIN_COMBINED")),
    ("quint8 MIN_FIRST", dict(T="quint8", mode="MIN_FIRST")),
    ("qint8 SCALED, HALF_TO_EVEN", dict(T="qint8", mode="SCALED", round_mode="HALF_TO_EVEN")),
    ("qint8 SCALED per-channel (axis 0)", dict(T="qint8", mode="SCALED", axis=0)),
    ("qint16 SCALED, narrow range", dict(T="qint16", mode="SCALED", narrow_range=True)),
]


def section(w: np.ndarray, out) -> None:
    print("TensorFlow QuantizeV2 / Dequantize (Eigen kernels). The last column counts the codes stock\n"
          "TensorFlow computes differently on x86-64 Linux, where oneDNN takes some of these calls:\n", file=out)
    head = f"{'scheme':<44} {'rel. RMS err':>12} {'max |err|':>10}   {'oneDNN vs Eigen':>16}"
    print(head, file=out)
    print("-" * len(head), file=out)
    for name, kw in SCHEMES:
        axis = kw.get("axis")
        lo = w.min(axis=1) if axis == 0 else np.float32(w.min())
        hi = w.max(axis=1) if axis == 0 else np.float32(w.max())
        codes, omin, omax = quantize(w, lo, hi, **kw)
        dq_kw = {k: v for k, v in kw.items() if k in ("mode", "narrow_range", "axis")}
        back = dequantize(codes, omin, omax, **dq_kw)
        err = back - w
        onednn, _, _ = quantize(w, lo, hi, kernel="onednn", **kw)
        diff = int(np.count_nonzero(onednn != codes))
        print(f"{name:<44} {np.linalg.norm(err) / np.linalg.norm(w):12.2e} {np.abs(err).max():10.2e}   "
              f"{(f'{diff} codes' if diff else 'identical'):>16}", file=out)
