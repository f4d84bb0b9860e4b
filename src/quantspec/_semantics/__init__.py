"""Spec-neutral semantics shared by the ONNX, TensorFlow and LiteRT halves of quantspec: arrays and
argument coercion, axes and granularity, integer conversions as C++ performs them, narrow float
conversion, sub-byte packing, rounding, and the quantizer records (numpy only; no numba)."""
