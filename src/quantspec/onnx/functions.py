"""The functions of ONNX QuantizeLinear / DequantizeLinear (``quantize_linear``, ``dequantize_linear``,
``quantize_linear_packed``), re-exported by :mod:`quantspec.onnx`: each call's plan (kept for the next
call in :data:`PLANS`), then the fast path or the readable reference path."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._fastpath import runner as core
from .._fastpath import jit
from .._fastpath.plancache import PlanCache, own
from .._semantics.arrays import check_fits, from_foreign, native
from ..dtypes import qtype
from ..errors import InvalidArgumentError
from . import fast, reference
from .packing import pack
from .plan import plan_dequantize, plan_quantize

__all__ = ["quantize_linear", "quantize_linear_packed", "dequantize_linear", "PLANS"]


def quantize_linear(x: Any, y_scale: Any, y_zero_point: Any = None, *, axis: int = 1, block_size: int = 0,
                    output_dtype: Any = None, saturate: bool = True, precision: Any = None, opset: int | None = None,
                    compat: str = "spec", out: np.ndarray | None = None, ort_version: str | None = None) -> np.ndarray:
    """ONNX QuantizeLinear: ``y = saturate(x / y_scale + y_zero_point)``.

    ``x``: float32, float16, bfloat16 or int32 array (Python numbers become float32).
    ``y_scale``: scalar (per-tensor), 1-D of length ``x.shape[axis]`` (per-axis) or x's shape with
    ``ceil(x.shape[axis] / block_size)`` on ``axis`` (blocked).  ``y_zero_point``: same shape as the
    scale; its type is the output type.  ``output_dtype`` / ``precision``: an ONNX type number, a type
    name or a dtype.  ``opset``: None = the newest; older opsets reject what they did not have.
    ``out``: a preallocated result array (shape of x, the output type), filled and returned.
    ``ort_version`` (only with ``compat="onnxruntime"``): the onnxruntime release to reproduce,
    ``"1.31.1"`` or ``"1.32.0"`` (``"1.31"`` / ``"1.32"`` name them too); None: the installed
    onnxruntime's release when it is one of those, else the newest (``quantspec.onnx.plan.ORT_VERSIONS``).

    Runs on the fused multithreaded kernels of :mod:`quantspec.onnx.fast` when numba is installed
    (``QUANTSPEC_FAST=0`` forces the numpy reference path of :mod:`quantspec.onnx.reference`; both
    give the same bytes).
    """
    attrs = (axis, block_size, output_dtype, saturate, precision, opset, compat, ort_version)
    if type(x) is np.ndarray:
        # a call that repeats the last one (the same parameter and attribute objects): its plan and
        # prepared kernel call at once (fast.repeat)
        hit = PLANS.recall("q", x, (y_scale, y_zero_point), attrs)
        if hit is not None and hit[1] is not None and jit.enabled():
            done = fast.repeat(hit[0], hit[1], x, out)
            if done is not None:
                return done
    x, y_scale, y_zero_point = _native(x), from_foreign(y_scale), from_foreign(y_zero_point)
    plan, prepared = _planned("q", x, y_scale, y_zero_point, attrs)
    if out is None:
        check_fits(plan.shape, plan.out.dtype.itemsize)
    x = np.asarray(x, dtype=plan.x_type.dtype)
    if prepared is not None and jit.enabled():
        return fast.quantize(plan, x, out, prepared)
    impl = fast if fast.path(plan) == "fast" else reference
    return impl.quantize(plan, x, out)


def quantize_linear_packed(x: Any, y_scale: Any, y_zero_point: Any = None, **attributes: Any) -> np.ndarray:
    """QuantizeLinear with the result in ONNX's ``TensorProto.raw_data`` layout: ``pack(quantize_linear(...))``.

    Takes the arguments of :func:`quantize_linear` (except ``out``) and returns a uint8 array of the
    packed bytes (``.tobytes()`` gives ``raw_data``): two 4-bit codes a byte (element 0 in the low
    nibble), four 2-bit codes a byte, four 6-bit codes in three bytes; other types their element
    bytes.  An addition to the contract's :func:`quantize_linear`, which returns unpacked arrays.
    """
    if "out" in attributes:
        raise InvalidArgumentError("out", "is not an argument of quantize_linear_packed", attributes["out"])
    q = quantize_linear(x, y_scale, y_zero_point, **attributes)
    t = qtype(q.dtype)
    if t.bits in (2, 4) and jit.enabled():              # the packing pass on the fused kernels too
        codes = np.ascontiguousarray(q).reshape(-1).view(np.uint8)
        out = np.empty((codes.size * t.bits + 7) // 8, np.uint8)
        if out.size:
            core.launch(jit.load("quantspec._fastpath.fastpack").pack, (codes, out, t.bits, core.CHUNK),
                        -(-out.size // core.CHUNK), codes.size)
        return out
    return np.frombuffer(pack(q), np.uint8).copy()


def dequantize_linear(x: Any, x_scale: Any, x_zero_point: Any = None, *, axis: int = 1, block_size: int = 0,
                      output_dtype: Any = None, opset: int | None = None, compat: str = "spec",
                      out: np.ndarray | None = None, ort_version: str | None = None) -> np.ndarray:
    """ONNX DequantizeLinear: ``y = (x - x_zero_point) * x_scale``, rounded once to the output type
    (``output_dtype``, else the scale's type).  Arguments as for :func:`quantize_linear`."""
    attrs = (axis, block_size, output_dtype, opset, compat, ort_version)
    if type(x) is np.ndarray:
        hit = PLANS.recall("dq", x, (x_scale, x_zero_point), attrs)
        if hit is not None and hit[1] is not None and jit.enabled():
            done = fast.repeat(hit[0], hit[1], x, out)
            if done is not None:
                return done
    x, x_scale, x_zero_point = _native(x), from_foreign(x_scale), from_foreign(x_zero_point)
    plan, prepared = _planned("dq", x, x_scale, x_zero_point, attrs)
    if out is None:
        check_fits(plan.shape, plan.out.dtype.itemsize)
    if prepared is not None and jit.enabled():
        return fast.dequantize(plan, np.asarray(x), out, prepared)
    impl = fast if fast.path(plan) == "fast" else reference
    return impl.dequantize(plan, np.asarray(x), out)


def _native(x: Any) -> Any:
    """Another library's array (torch, JAX, ...) as a numpy array over its memory, and a big-endian
    (non-native) array as the same values in this machine's byte order."""
    if type(x) is np.ndarray:
        return x if x.dtype.isnative else native(x)
    x = from_foreign(x)
    return native(x) if isinstance(x, np.ndarray) else x


# -- plans kept for the next call (quantspec._fastpath.plancache) -------------------------------------
PLANS = PlanCache()


_ATTRIBUTES = {"q": ("axis", "block_size", "output_dtype", "saturate", "precision", "opset", "compat", "ort_version"),
               "dq": ("axis", "block_size", "output_dtype", "opset", "compat", "ort_version")}


def _planned(kind: str, x: Any, scale: Any, zero_point: Any, attrs: tuple):
    """(plan, prepared fast-path state or None) for this call: from the cache, or made (and cached
    when the call's arguments can be keyed)."""
    values = (scale, zero_point)
    hit = PLANS.recall(kind, x, values, attrs)
    if hit is not None:
        return hit
    key = PLANS.key(kind, x, values, attrs)
    hit = PLANS.get(key)
    if hit is not None:
        PLANS.remember(kind, x, values, attrs, hit)
        return hit
    make = plan_quantize if kind == "q" else plan_dequantize
    kwargs = dict(zip(_ATTRIBUTES[kind], attrs))
    if key is None:
        return make(x, scale, zero_point, **kwargs), None
    plan = make(x, own(scale), own(zero_point), **kwargs)
    prepared = None
    if fast.covers(plan) and all(plan.shape):
        prepared = fast.prepare_quantize(plan, True) if kind == "q" else fast.prepare_dequantize(plan, True)
    PLANS.put(key, (plan, prepared))
    PLANS.remember(kind, x, values, attrs, (plan, prepared))
    return plan, prepared
