"""Spec-neutral machinery shared by the ONNX, TensorFlow and LiteRT halves of quantspec:
rounding, axis and granularity handling, argument coercion, sub-byte packing, narrow float
conversion and tensor-file I/O."""
