"""The ``equiv`` section of ``quantspec bench``: how long the exhaustive comparison of an int8
per-tensor pair takes (LiteRT QUANTIZE against ONNX QuantizeLinear, TensorFlow QuantizeV2 against
ONNX, TensorFlow FakeQuant against LiteRT and against ONNX), against the 60 s target for every float32
input.

The full run enumerates all 2^32 float32 inputs once per pair; ``--quick`` (or ``--size N``)
enumerates the first N bit patterns above 1.0 and extrapolates to 2^32 (the rate varies little with
the inputs: every chunk runs the same kernels).
"""

from __future__ import annotations

import time

__all__ = ["lines"]

PAIRS = [
    ("litert QUANTIZE vs onnx QuantizeLinear int8", "litert:QUANTIZE scale=0.05 zero_point=-3",
     "onnx:QuantizeLinear scale=0.05 zero_point=-3 output_dtype=int8"),
    ("tf QuantizeV2 SCALED qint8 vs onnx int8",
     "tf:QuantizeV2 mode=SCALED round_mode=HALF_TO_EVEN T=qint8 min=-6 max=6",
     "onnx:QuantizeLinear scale=0.047244094 zero_point=0 output_dtype=int8"),
    ("tf FakeQuant args vs litert QUANTIZE int8", "tf:FakeQuant variant=args min=-6 max=6",
     "litert:QUANTIZE scale=0.047058824 zero_point=0"),
    ("tf FakeQuant vars vs onnx QuantizeLinear uint8", "tf:FakeQuant variant=vars min=-1.3 max=2.7",
     "onnx:QuantizeLinear opset=13 scale=0.015686275 zero_point=83 output_dtype=uint8"),
]
TARGET_S = 60.0


def lines(size: int | None, quick: bool) -> list[str]:
    """Run the section; return its report lines."""
    from .prove import equivalent
    from .specstring import parse

    n = size if size else ((1 << 24) if quick else None)
    out = []
    for name, a_text, b_text in PAIRS:
        a, b = parse(a_text), parse(b_text)
        equivalent(a, b, "float32", subrange=(0x3f800000, 0x3f800000 + (1 << 20)), keep=0)    # warm
        t0 = time.perf_counter()
        if n is None:
            r = equivalent(a, b, "float32", keep=0)
            seconds = time.perf_counter() - t0
            what = f"all 2^32 float32 inputs in {seconds:6.1f} s"
            full = seconds
        else:
            r = equivalent(a, b, "float32", subrange=(0x3f800000, 0x3f800000 + n), keep=0)
            seconds = time.perf_counter() - t0
            full = seconds * (1 << 32) / n
            what = f"{n} inputs in {seconds:.2f} s -> all 2^32 in {full:6.1f} s (extrapolated)"
        verdict = "within" if full <= TARGET_S else "OVER"
        out.append(f"{name:<48} {what}; {r.inputs / seconds / 1e9:5.2f} Ginputs/s; {verdict} the {TARGET_S:.0f} s "
                   "target")
    return out
