"""How the real model converters re-express a quantizer in another spec, as data and a few lines each.

=========================================  ==================================================================
conversion                                 the converter's rule (read from its source; tests rerun it)
=========================================  ==================================================================
TF FakeQuant (Args, Vars), 8 bits          **TFLite converter** (TensorFlow 2.21, MLIR; ``fake_quant_utils.h``
-> LiteRT int8                             + ``FakeQuantSupport.cc``): unsigned storage ``[qmin, 255]``
                                           (``qmin = narrow_range``), in double: ``scale = (max - min) /
                                           (255 - qmin)``; the zero point from the min side
                                           ``qmin - min / scale`` or the max side ``255 - max / scale``,
                                           whichever adds the smaller error (``|q| + |r / scale|``), clamped to
                                           ``[qmin, 255]``, else rounded half away from zero; a range narrower
                                           than DBL_EPSILON gets scale 1 and zero point qmin.  Then int8:
                                           zero point - 128, the scale stored as float32.  The test suite
                                           runs the converter and reads the model's parameters.
TF FakeQuant (Args, Vars), 8 bits,         **tf2onnx** (``onnx_opset/quantize.py``): a uint8 QuantizeLinear /
not narrow -> ONNX QDQ                     DequantizeLinear pair with ``scale = (max - min) / 255`` in double,
                                           stored as float32, and zero point ``-round_half_even(min /
                                           scale)`` (the double scale); refused (no conversion) when that
                                           zero point is outside [0, 255], for ``narrow_range`` and for
                                           ``num_bits != 8``.
TF QuantizeAndDequantizeV2/V3/V4 with      **tf2onnx** (``rewriter/quantization_ops_rewriter.py``): int8
``range_given`` -> ONNX QDQ                (unsigned: uint8) with zero point 0; per channel ``scale =
                                           max(min / min_q, max / max_q)`` in float32 (``min_q`` = -128,
                                           -127 with ``narrow_range``, unused (0) when unsigned; ``max_q`` =
                                           127, 255 unsigned; ``num_bits`` is not read); refused for a scale
                                           that is not > 0.
LiteRT QUANTIZE / DEQUANTIZE -> ONNX       **tf2onnx** (``--tflite``, ``tflite_handlers/tfl_math.py``):
                                           QuantizeLinear / DequantizeLinear with the tensor's scale (float32)
                                           and zero point, per-tensor only.
TF QuantizeV2 / Dequantize -> ONNX         none: tf2onnx has no handler for these ops (it refuses them).
=========================================  ==================================================================
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ConverterChoice", "converter_choice", "tflite_fake_quant", "tf2onnx_fake_quant", "tf2onnx_qdq",
           "tf2onnx_tflite"]

TFLITE = "TFLite converter (TensorFlow 2.21, MLIR quantizer)"
TF2ONNX = "tf2onnx"


@dataclass(frozen=True)
class ConverterChoice:
    """What a real converter makes of a quantizer: its record (None where it refuses the
    conversion) and how it computes it (or why it refuses)."""

    converter: str
    record: Any
    note: str

    def to_dict(self) -> dict:
        return {"converter": self.converter, "record": None if self.record is None else self.record.spec_string(),
                "note": self.note}


def _round_half_away(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def tflite_fake_quant(mn: float, mx: float, narrow_range: bool) -> tuple[float, int]:
    """``(scale, zero point)`` the TFLite converter gives a tensor after an 8-bit FakeQuant with range
    ``[mn, mx]``, in int8 terms (``fakeQuantAttrsToType`` with unsigned storage, then the shift to int8)."""
    qmin, qmax = (1 if narrow_range else 0), 255
    rmin, rmax = float(mn), float(mx)
    if abs(rmax - rmin) < sys.float_info.epsilon:
        return 1.0, qmin - 128
    scale = (rmax - rmin) / float(qmax - qmin)
    from_min = qmin - rmin / scale
    err_min = abs(qmin) + abs(rmin / scale)
    from_max = qmax - rmax / scale
    err_max = abs(qmax) + abs(rmax / scale)
    zp = from_min if err_min < err_max else from_max
    nudged = qmin if zp < qmin else qmax if zp > qmax else _round_half_away(zp)
    return float(np.float32(scale)), nudged - 128


def tf2onnx_fake_quant(mn: float, mx: float) -> tuple[float, int] | None:
    """``(scale, zero point)`` of tf2onnx's uint8 QDQ for an 8-bit FakeQuant ``[mn, mx]``, or None
    where it refuses (the zero point outside [0, 255])."""
    scale = (float(mx) - float(mn)) / 255.0
    if not scale > 0 or not math.isfinite(scale):
        return None
    zp = -float(np.around(float(mn) / scale))
    if not 0 <= zp <= 255:
        return None
    return float(np.float32(scale)), int(zp)


def tf2onnx_qdq(mn, mx, signed_input: bool, narrow_range: bool) -> list[float] | None:
    """Per-channel float32 scales of tf2onnx's QDQ for QuantizeAndDequantize with a given range, or
    None where it refuses (a scale that is not > 0)."""
    min_q, max_q = -127, 127
    if not narrow_range and signed_input:
        min_q = -128
    if not signed_input:
        min_q, max_q = 0, 255
    scales = []
    for lo, hi in zip(np.atleast_1d(np.asarray(mn, np.float32)), np.atleast_1d(np.asarray(mx, np.float32))):
        with np.errstate(all="ignore"):
            from_min = lo / np.float32(min_q) if min_q < 0 else np.float32(0)   # float32 / int: float32
            from_max = hi / np.float32(max_q) if max_q > 0 else np.float32(0)
        s = from_min if from_min > from_max else from_max
        if not s > 0:
            return None
        scales.append(float(np.float32(s)))
    return scales


def tf2onnx_tflite(record) -> tuple[float, int] | None:
    """tf2onnx's TFLite path keeps a per-tensor QUANTIZE / DEQUANTIZE's scale and zero point."""
    p = record.params
    if p.per_axis:
        return None
    return float(p.scale[0]), int(p.zero_point[0])


def converter_choice(source, spec: str, key: str) -> ConverterChoice | None:
    """The real converter's record for translating ``source`` to ``spec``'s op ``key`` (a key of
    :mod:`.specstring`), or None where no converter makes this conversion."""
    from ..litert.ops import DequantizeOp as LDequantize
    from ..litert.ops import QuantizeOp as LQuantize
    from ..litert.params import QuantParams
    from ..onnx.ops import DequantizeLinearOp, QuantizeLinearOp
    from ..tf.ops import FakeQuantOp, QuantizeAndDequantizeOp

    if isinstance(source, FakeQuantOp) and source.variant in ("args", "vars"):
        if spec == "litert" and key == "quantize":
            if source.num_bits != 8:
                return ConverterChoice(TFLITE, None, "the rule here covers 8-bit FakeQuant only")
            s, z = tflite_fake_quant(source.min, source.max, source.narrow_range)
            return ConverterChoice(TFLITE, LQuantize(QuantParams(s, z)),
                                   "fakeQuantAttrsToType on uint8 storage (double, zero point from the side with the "
                                   "smaller error, rounded half away from zero), then zero point - 128")
        if spec == "onnx" and key == "quantizelinear":
            if source.num_bits != 8 or source.narrow_range:
                return ConverterChoice(TF2ONNX, None, "tf2onnx refuses FakeQuant with narrow_range or num_bits != 8")
            got = tf2onnx_fake_quant(source.min, source.max)
            if got is None:
                return ConverterChoice(TF2ONNX, None, "tf2onnx refuses: its zero point -round(min / scale) is outside "
                                       "uint8")
            return ConverterChoice(TF2ONNX, QuantizeLinearOp(got[0], got[1], "uint8", opset=13),
                                   "uint8 QDQ, scale (max - min) / 255 in double, zero point -round_half_even(min / "
                                   "scale)")
    if isinstance(source, QuantizeAndDequantizeOp) and spec == "onnx" and key == "quantizelinear":
        if not source.range_given:
            return ConverterChoice(TF2ONNX, None, "without range_given tf2onnx computes the scale in the graph "
                                   "(ReduceMin / ReduceMax of the data): no fixed parameters")
        scales = tf2onnx_qdq(source.input_min, source.input_max, source.signed_input, source.narrow_range)
        if scales is None:
            return ConverterChoice(TF2ONNX, None, "tf2onnx refuses: a scale that is not > 0")
        out = "int8" if source.signed_input else "uint8"
        scale = scales[0] if source.axis is None else tuple(scales)
        zp = 0 if source.axis is None else (0,) * len(scales)
        return ConverterChoice(TF2ONNX, QuantizeLinearOp(scale, zp, out, axis=1 if source.axis is None else source.axis,
                                                         opset=13),
                               "zero point 0, scale max(min / min_q, max / max_q) in float32 (num_bits is not read)")
    if isinstance(source, LQuantize) and spec == "onnx" and key == "quantizelinear":
        got = tf2onnx_tflite(source)
        if got is None:
            return ConverterChoice(TF2ONNX, None, "tf2onnx's TFLite path takes per-tensor QUANTIZE only")
        return ConverterChoice(TF2ONNX, QuantizeLinearOp(got[0], got[1], "int8", opset=13),
                               "the tensor's scale and zero point, unchanged")
    if isinstance(source, LDequantize) and spec == "onnx" and key == "dequantizelinear":
        got = tf2onnx_tflite(source)
        if got is None:
            return ConverterChoice(TF2ONNX, None, "tf2onnx's TFLite path takes per-tensor DEQUANTIZE only")
        return ConverterChoice(TF2ONNX, DequantizeLinearOp(got[0], got[1], source.input_dtype_name, opset=13),
                               "the tensor's scale and zero point, unchanged")
    if source.spec == "tf" and source.op in ("QuantizeV2", "Dequantize") and spec == "onnx":
        return ConverterChoice(TF2ONNX, None, f"tf2onnx has no handler for {source.op}")
    return None
