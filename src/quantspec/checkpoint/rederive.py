"""Codes re-derived from given parameters (``verify(..., params_from_dst=True)``), and the codes
compressed-tensors' own arithmetic gives, to explain where they differ.

:func:`codes` applies a scheme's codes rule (:meth:`quantspec.checkpoint.rules.CodesRule.codes`,
where each rule's arithmetic lives) to float32 inputs and *stored* parameters:

- ``onnx``: ONNX QuantizeLinear in float32 — ``saturate(round_half_even(x / scale) + zero_point)``
  (saturating float types), the stored scale widened exactly to float32;
- ``ort-nbits``: onnxruntime's MatMulNBits routine — ``clamp(int(roundf(x * (1 / scale))) +
  zero_point)``, ``1 / scale`` in float32, 0 for a zero scale;
- ``litert``: the TFLite converter's weights — ``clamp(round_half_away(x * float32(1 / float64(scale))),
  -127, 127)``;
- a registered scheme's own codes rule, by its name.

:func:`ct_codes` is what compressed-tensors' ``quantize`` computes for the same inputs and parameters
(``compressed_tensors.quantization.lifecycle.forward``): the division ``x / scale`` in the *weight's*
type (torch divides bfloat16 / float16 tensors in float32 and rounds the quotient to that type), the
zero point added in that type (rounded again), then clamped to the type's range and rounded half to
even (``torch.round``), or cast to float8e4m3fn (round to nearest even).  For float32 weights this is
QuantizeLinear; for bfloat16 weights the quotient keeps 8 significant bits, so a quotient such as
5.46875 rounds to 5.5 and then to 6 where QuantizeLinear gives 5 (docs/checkpoints.md lists the
inputs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._fastpath import jit
from ..dtypes import qtype
from .rules import as_float32, expand as _expand
from .schemes import codes_rule

__all__ = ["codes", "ct_codes", "code_distance"]


def codes(rule: Any, codes_type: str, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None,
          attrs: dict) -> np.ndarray:
    """The codes of ``x`` (float32) for the stored ``scale`` / ``zero_point`` under ``rule`` (a
    :class:`~quantspec.checkpoint.rules.CodesRule`, or its name: a built-in rule's or a registered
    scheme's), as values of ``codes_type``: the rule's
    :meth:`~quantspec.checkpoint.rules.CodesRule.codes`."""
    return codes_rule(rule).codes(codes_type, x, scale, zero_point, attrs)


def _round_to(q: np.ndarray, model: str) -> np.ndarray:
    if model == "bfloat16":
        import ml_dtypes
        return q.astype(ml_dtypes.bfloat16).astype(np.float32)
    if model == "float16":
        with np.errstate(over="ignore"):
            return q.astype(np.float16).astype(np.float32)
    return q


def ct_codes(codes_type: str, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None, attrs: dict,
             model: str, offset: int = 0) -> np.ndarray:
    """The codes compressed-tensors' ``quantize`` gives (module docstring) for weights of type
    ``model`` (``x``: their float32 values), as values of ``codes_type``.  ``offset``: what the
    layout adds to compressed-tensors' signed codes (128 for uint8, 8 for uint4 codes stored by
    quantspec's asymmetric schemes)."""
    t = qtype(codes_type)
    s = _expand(as_float32(scale), x, attrs)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        q = _round_to((x / s).astype(np.float32), model)
        if zero_point is not None:
            q = _round_to((q + _expand(zero_point.astype(np.float32) - np.float32(offset), x, attrs)).astype(np.float32),
                          model)
    if t.is_float:
        m = np.float32(t.qmax)
        with jit.reference_only():
            return np.clip(q, -m, m).astype(t.dtype)
    lo, hi = t.qmin - offset, t.qmax - offset
    with np.errstate(invalid="ignore"):          # NaN (0 / 0): torch's cast gives 0, as numpy's here
        r = np.rint(np.clip(q, lo, hi))
        return (np.where(np.isnan(r), 0, r).astype(np.int64) + offset).astype(t.dtype)


def code_distance(a: np.ndarray, b: np.ndarray, codes_type: str) -> np.ndarray:
    """|a - b| in code steps: integer difference for integer codes, the number of representable
    values between them for float codes (1: neighbours)."""
    t = qtype(codes_type)
    if not t.is_float:
        return np.abs(a.astype(np.int64) - b.astype(np.int64))

    def key(v):
        bits = np.ascontiguousarray(v).view(np.uint8 if t.dtype.itemsize == 1 else np.uint16).astype(np.int64)
        sign = 1 << (t.bits - 1)
        return np.where(bits & sign, -(bits & (sign - 1)), bits)

    return np.abs(key(a) - key(b))
