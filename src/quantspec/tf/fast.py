"""The fast path of TensorFlow QuantizeV2 / Dequantize: fused multithreaded kernels.

The readable reference path is :func:`quantspec.tf.quantize_op.compute_quantize` and
:func:`quantspec.tf.dequantize_op.compute_dequantize`; this module computes the same bytes in one
pass over the data with the generic kernel of :mod:`quantspec._fastpath.fastmap` and the element
functions of :mod:`quantspec.tf._jitted`, from the same prepared plan (whose per-slice
``lo``, ``hi``, ``scale``, ``bias`` are the kernel's parameters).  Tests run both paths on every
TensorFlow conformance corpus and require identical bytes (``tests/test_tf_fast.py``).

Every operation is the reference path's, in the same order and precision (float32, no fused
multiply-add), with flush-to-zero after each one and on the input (TensorFlow runs with FTZ/DAZ),
the C++ ``std::min``/``std::max`` argument order, ``std::round`` (half away from zero) or
``rint`` (half to even), and the x86 truncating conversions for the final cast.

Covered: QuantizeV2 for every mode, round mode and type, per-tensor and per-axis, Eigen and oneDNN
kernels (except oneDNN's rank-0 MIN_FIRST path, a single element); Dequantize for every mode and type,
float32 or bfloat16; FakeQuantWithMinMaxArgs / Vars / VarsPerChannel (the plan of
:mod:`quantspec.tf.fake_quant`: per-slice nudged range, scale, inverse scale, zero point and the
``min == max == 0`` flag along the last axis; reference path
:func:`quantspec.tf.fake_quant.compute_fake_quant`); QuantizeAndDequantizeV2 / V3 / V4 on float32
(both round modes, range given or from the data, per-tensor and per-axis) except where a slice's
inverse scale is NaN (the reference path then reproduces which NaN payload x86 keeps; reference path
:func:`quantspec.tf.qdq.compute_qdq`).  ``QUANTSPEC_FAST=0`` selects the reference path (:mod:`quantspec._fastpath.jit`).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .._fastpath import runner as core
from .._fastpath import jit

__all__ = ["path_quantize", "path_dequantize", "path_fake_quant", "path_qdq", "quantize", "dequantize", "fake_quant",
           "qdq", "prepare_quantize", "prepare_dequantize", "prepare_fake_quant", "prepare_qdq"]

# -- the records that select the element function (their class) and carry its constants -----------
# QuantizeV2: how the float value is computed from x (``rounds``: MIN_COMBINED with a signed T rounds
# with std::round, else the cast truncates; ``even``: SCALED rounds half to even, else half away from
# zero; ``min_first``: oneDNN MIN_FIRST adds the bias) ...
EigenMinCombined = namedtuple("EigenMinCombined", "rounds")
EigenMinFirst = namedtuple("EigenMinFirst", "tag")
EigenScaled = namedtuple("EigenScaled", "even")
OneDnn = namedtuple("OneDnn", "min_first")
# ... and how it becomes a code: the x86 int32 conversion clipped to [lowest, highest] (Eigen's
# saturating cast for 8/16-bit signed T; the full int32 range, i.e. the low bits, for unsigned T and
# MIN_FIRST), the int64 conversion's low 32 bits (qint32), or oneDNN's saturate-then-rint.
CastInt32 = namedtuple("CastInt32", "lowest highest")
CastWide = namedtuple("CastWide", "tag")
CastOneDnn = namedtuple("CastOneDnn", "lowest highest nan")
# Dequantize: the formula of the mode (``half``: MIN_COMBINED's half range; ``wrap``: SCALED qint32
# per-tensor, whose codes that round to 2^31 come back as -2^31), and the signed-code decoding.
DqMinCombined = namedtuple("DqMinCombined", "half")
DqMinFirst = namedtuple("DqMinFirst", "tag")
DqScaled = namedtuple("DqScaled", "wrap")
Codes = namedtuple("Codes", "mask half")
# FakeQuant: the value in steps is the shifted input times inv_scale (Args, VarsPerChannel) or divided
# by scale (Vars); ``zero``: some slice has min == max == 0, whose outputs are all 0.
FqMultiply = namedtuple("FqMultiply", "tag")
FqDivide = namedtuple("FqDivide", "tag")
FqZero = namedtuple("FqZero", "any")
# QuantizeAndDequantize: ``clamp`` to [lo, hi] when the range was given; ``even``: round half to even,
# else HALF_UP (floor(v + 0.5)).
QdqClamp = namedtuple("QdqClamp", "clamp")
QdqRound = namedtuple("QdqRound", "even")


def _jitted():
    return jit.load("quantspec.tf._jitted")     # registers the TensorFlow element functions


def path_quantize(plan) -> str:
    """``"fast"`` if QuantizeV2 with this plan runs on the fused kernels, else ``"reference"``."""
    return "fast" if jit.enabled() and plan.path in ("eigen", "onednn") else "reference"


def path_dequantize(plan) -> str:
    """``"fast"`` if Dequantize with this plan runs on the fused kernels, else ``"reference"``."""
    return "fast" if jit.enabled() else "reference"


def path_fake_quant(plan) -> str:
    """``"fast"`` if FakeQuant with this plan runs on the fused kernels, else ``"reference"``."""
    return "fast" if jit.enabled() else "reference"


def path_qdq(plan) -> str:
    """``"fast"`` if QuantizeAndDequantize with this plan runs on the fused kernels (float32, no NaN
    inverse scale), else ``"reference"``."""
    ok = plan.scale.dtype == np.dtype(np.float32) and not np.isnan(plan.inv).any()
    return "fast" if ok and jit.enabled() else "reference"


def _op(plan):
    """The (precast, cast) records of a QuantizeV2 plan."""
    T = plan.T
    if plan.path == "onednn":
        nan = T.highest if plan.mode == "MIN_FIRST" else T.lowest
        return OneDnn(int(plan.mode == "MIN_FIRST")), CastOneDnn(T.lowest, T.highest, nan)
    if plan.mode == "MIN_COMBINED":
        precast = EigenMinCombined(int(T.signed))
    elif plan.mode == "MIN_FIRST":
        precast = EigenMinFirst(0)
    else:
        precast = EigenScaled(int(plan.round_mode == "HALF_TO_EVEN"))
    if plan.mode == "MIN_FIRST" or not T.signed:
        return precast, CastInt32(-2 ** 31, 2 ** 31 - 1)     # the store keeps the low bits
    if T.bits == 32:
        return precast, CastWide(0)
    return precast, CastInt32(T.lowest, T.highest)


def _prepared(shape, axis, params, op, cached):
    """(layout, the parameters as it reads them, op, memo) for an input of ``shape``; ``memo`` keeps
    the kernel's entry points when the result serves many calls (``cached``; core.run)."""
    g, a = ("tensor", None) if axis is None else ("axis", axis)
    lay = core.layout(shape, g, a)
    return lay, core.flat_params(shape, g, a, lay, *params), op, {} if cached else None


def prepare_quantize(plan, shape: tuple[int, ...], cached: bool = False):
    """What :func:`quantize` needs for an input of ``shape`` that depends only on the plan.
    ``cached``: the result will serve many calls."""
    return _prepared(shape, plan.axis, (plan.lo, plan.hi, plan.scale, plan.bias), _op(plan), cached)


def prepare_dequantize(plan, shape: tuple[int, ...], cached: bool = False):
    """What :func:`dequantize` needs for codes of ``shape`` that depends only on the plan
    (``cached``: as for :func:`prepare_quantize`)."""
    T = plan.T
    decode = Codes((1 << T.bits) - 1 if T.bits < 32 else -1, (1 << (T.bits - 1)) if T.signed else 0)
    if plan.mode == "MIN_COMBINED":
        mode = DqMinCombined(float(plan.half))
    elif plan.mode == "MIN_FIRST":
        mode = DqMinFirst(0)
    else:
        mode = DqScaled(int(plan.wrap_int32))
    return _prepared(shape, plan.axis, (plan.scale, plan.bias), (mode, decode), cached)


def prepare_fake_quant(plan, shape: tuple[int, ...], cached: bool = False):
    """What :func:`fake_quant` needs for an input of ``shape`` (slices along the last axis) that
    depends only on the plan (``cached``: as for :func:`prepare_quantize`)."""
    depth = plan.scale.shape[0]
    axis = None if depth == 1 else len(shape) - 1
    f32 = np.float32
    params = (plan.nudged_min, plan.nudged_max, plan.scale, plan.inv_scale, plan.quant_zero,
              plan.zero.astype(f32))
    if axis is None:
        params = tuple(np.ascontiguousarray(p, f32).reshape(1) for p in params)
    op = (FqDivide(0) if plan.divide else FqMultiply(0), FqZero(int(bool(plan.zero.any()))))
    return _prepared(shape, axis, params, op, cached)


def prepare_qdq(plan, shape: tuple[int, ...], cached: bool = False):
    """What :func:`qdq` needs for an input of ``shape`` that depends only on the plan (``cached``: as
    for :func:`prepare_quantize`)."""
    op = (QdqClamp(int(plan.clamp)), QdqRound(int(plan.round_mode == "HALF_TO_EVEN")))
    return _prepared(shape, plan.axis, (plan.lo, plan.hi, plan.scale, plan.inv), op, cached)


def _run(x, y, prepared):
    lay, params, op, memo = prepared
    core.run(x, y, params, lay, op, memo=memo)


def quantize(x: np.ndarray, plan, out: np.ndarray | None = None, prepared=None) -> np.ndarray:
    """The codes of float32 ``x`` under a QuantizeV2 plan; same result as
    :func:`quantspec.tf.quantize_op.compute_quantize`.  ``prepared``: ``prepare_quantize(plan,
    x.shape)``, if at hand."""
    result = out if out is not None else np.empty(x.shape, plan.T.dtype)
    if result.size == 0:
        return result
    _jitted()
    prepared = prepare_quantize(plan, x.shape) if prepared is None else prepared
    dest, fresh = core.destination(result, x)
    storage = {1: np.uint8, 2: np.uint16, 4: np.uint32}[plan.T.dtype.itemsize]
    _run(core.flat(np.asarray(x, np.float32)), dest.reshape(-1).view(storage), prepared)
    if fresh:
        np.copyto(result, dest)
    return result


def dequantize(q: np.ndarray, plan, out: np.ndarray | None = None, prepared=None) -> np.ndarray:
    """The values of the codes ``q`` under a Dequantize plan; same result as
    :func:`quantspec.tf.dequantize_op.compute_dequantize`.  ``prepared``: ``prepare_dequantize(plan,
    q.shape)``, if at hand."""
    result = out if out is not None else np.empty(q.shape, plan.dtype)
    n = result.size
    if n == 0:
        return result
    _jitted()
    prepared = prepare_dequantize(plan, q.shape) if prepared is None else prepared
    codes = core.flat(np.asarray(q), {8: np.uint8, 16: np.uint16, 32: np.uint32}[plan.T.bits])
    dest, fresh = core.destination(result, q)
    if plan.dtype == np.dtype(np.float32):
        _run(codes, dest.reshape(-1), prepared)
    else:  # bfloat16: the float32 result rounded to nearest even, as the reference path does
        product = np.empty(n, np.float32)
        _run(codes, product, prepared)
        with np.errstate(over="ignore", invalid="ignore"):
            np.copyto(dest.reshape(-1), product, casting="unsafe")
    if fresh:
        np.copyto(result, dest)
    return result


def fake_quant(x: np.ndarray, plan, out: np.ndarray | None = None, prepared=None) -> np.ndarray:
    """FakeQuant of float32 ``x`` (the last axis holds the plan's slices) under a FakeQuant plan;
    same result as :func:`quantspec.tf.fake_quant.compute_fake_quant`.  ``prepared``:
    ``prepare_fake_quant(plan, x.shape)``, if at hand."""
    result = out if out is not None else np.empty(x.shape, np.float32)
    if result.size == 0:
        return result
    _jitted()
    prepared = prepare_fake_quant(plan, x.shape) if prepared is None else prepared
    dest, fresh = core.destination(result, x)
    _run(core.flat(np.asarray(x, np.float32)), dest.reshape(-1), prepared)
    if fresh:
        np.copyto(result, dest)
    return result


def qdq(x: np.ndarray, plan, out: np.ndarray | None = None, prepared=None) -> np.ndarray:
    """QuantizeAndDequantize of float32 ``x`` under a plan that :func:`path_qdq` takes; same result as
    :func:`quantspec.tf.qdq.compute_qdq`.  ``prepared``: ``prepare_qdq(plan, x.shape)``, if at hand."""
    result = out if out is not None else np.empty(x.shape, np.float32)
    if result.size == 0:
        return result
    _jitted()
    prepared = prepare_qdq(plan, x.shape) if prepared is None else prepared
    dest, fresh = core.destination(result, x)
    _run(core.flat(np.asarray(x, np.float32)), dest.reshape(-1), prepared)
    if fresh:
        np.copyto(result, dest)
    return result
