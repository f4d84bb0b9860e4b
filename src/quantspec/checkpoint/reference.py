"""The readable reference path of the converter: one slab of rows, in numpy, from quantspec's own
spec implementations.

:func:`encode` composes a scheme's rules (:mod:`quantspec.checkpoint.rules`): the parameter rule's
numpy computation, in the same float32 / float64 steps as the tool it matches; the scale as the
layout stores it (:func:`stored_scale`); then the codes rule's reference codes, from the operator the
rule names: ONNX QuantizeLinear (:func:`quantspec.onnx.quantize_linear`, numpy path) of the stored
parameters, LiteRT's converter weights (:func:`quantspec.litert.params.quantize_weights`), or
onnxruntime's MatMulNBits routine (a reciprocal multiply rounded half away from zero).  The fast
kernels (:mod:`._jitted`, called by each rule's ``fast``) must give the same bytes; the tests compare
both, and both with the tools.

:func:`encode` returns unpacked arrays (codes as their ml_dtypes / numpy type, the scale, the zero
point); :mod:`.encode` packs them.  ``ort_int_params``, ``amax_scale`` and ``mx_exponents`` (the
built-in rules' arithmetic) live in :mod:`.rules` and are importable from here too.
"""

from __future__ import annotations

import numpy as np

from .._fastpath import jit
from ..dtypes import qtype
from .rules import amax_scale, mx_exponents, ort_int_params
from .schemes import Scheme

__all__ = ["encode", "tensor_params", "ort_int_params", "mx_exponents", "amax_scale", "dequantize", "stored_scale"]


#: the epsilon compressed-tensors puts in place of a zero scale, per stored type
_EPS = {"bfloat16": np.float32(2.0 ** -7), "float16": np.float32(2.0 ** -10), "float": np.float32(2.0 ** -23)}


def stored_scale(scale: np.ndarray, scale_type: str = "float") -> np.ndarray:
    """The float32 scale as stored: unchanged for ``"float"`` (quantspec's layout; float8e8m0 scales
    are exact already); ``"ct:bfloat16"``, ``"ct:float16"``, ``"ct:float"``: as compressed-tensors
    keeps it — rounded to bfloat16 / float16 (ties to even), or float32 — and a zero scale (±0: a
    block of zeros, or a scale that rounds to zero) replaced by the type's epsilon, as
    compressed-tensors replaces zero scales.  Returned as float32 values."""
    if not scale_type.startswith("ct:"):
        return scale
    import ml_dtypes

    kind = scale_type[3:]
    s = np.asarray(scale, np.float32)
    if kind in ("bfloat16", "float16"):
        r = s.astype(ml_dtypes.bfloat16 if kind == "bfloat16" else np.float16).astype(np.float32)
    else:
        r = s
    return np.where(r == 0, _EPS[kind], r).astype(np.float32)


def tensor_params(s: Scheme, mn: float, mx: float, scale_type: str = "float") -> tuple[np.float32, int]:
    """(scale, zero point) of a per-tensor scheme from the tensor's float32 min and max (its
    parameter rule's :meth:`~quantspec.checkpoint.rules.ParamRule.tensor`), the scale as stored in
    ``scale_type`` (:func:`stored_scale`)."""
    scale, zp = s.param_rule.tensor(s, mn, mx)
    return np.float32(stored_scale(scale, scale_type)), int(zp)


def encode(s: Scheme, x: np.ndarray, tparams: tuple | None = None,
           scale_type: str = "float") -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(codes, scale, zero point or None) of the rows ``x`` (float32 ``[rows, cols]``) under scheme
    ``s``; ``tparams``: the (scale, zero point) of a per-tensor scheme.  ``scale_type``: the type the
    scale is stored as (:func:`stored_scale`); the codes are those of the stored scale.

    The scheme's parameter rule chooses the parameters
    (:meth:`~quantspec.checkpoint.rules.ParamRule.compute`), the layout rounds the scale
    (:func:`stored_scale`; the zero point stays the rule's), and the scheme's codes rule computes
    the codes of the stored parameters (:meth:`~quantspec.checkpoint.rules.CodesRule.reference`)."""
    t = qtype(s.codes)
    if s.granularity == "tensor":
        scale, zp = tparams
        zero = np.array(zp, t.dtype) if t.is_int else None
        codes = s.codes_rule.reference(s, x, np.float32(scale), zero)
        return codes, np.asarray(np.float32(scale)), (zero if s.zero_point else None)
    scale, zp = s.param_rule.compute(s, x)
    scale = stored_scale(scale, scale_type)
    codes = s.codes_rule.reference(s, x, scale, zp)
    return codes, scale, (zp if s.zero_point else None)


def dequantize(s: Scheme, codes: np.ndarray, scale: np.ndarray, zp: np.ndarray | None) -> np.ndarray:
    """DequantizeLinear of stored codes and parameters, float32 (quantspec.onnx, numpy path)."""
    from ..onnx import dequantize_linear

    attrs = s.attributes()
    with jit.reference_only():
        return dequantize_linear(codes, scale, zp, output_dtype="float", **attrs)
