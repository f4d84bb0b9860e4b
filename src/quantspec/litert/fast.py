"""The fast path of LiteRT's element-wise arithmetic: QUANTIZE, DEQUANTIZE and the requantization that
ends FULLY_CONNECTED, CONV_2D, DEPTHWISE_CONV_2D, ADD, SUB and MUL.

The readable reference path is the numpy code beside each kernel (:func:`quantspec.litert.params.quantize`,
:func:`~quantspec.litert.params.dequantize`, ``requantize_double`` in ``kernels/fully_connected.py``,
``_requantize`` in ``kernels/conv.py``, ``add_sub_compute`` / ``Mul.compute`` in
``kernels/elementwise.py``); the functions here compute the same bytes in one pass, with the generic
kernel of :mod:`quantspec._fastpath.fastmap` (unary operations) or :func:`quantspec.litert._jitted.binary`
(ADD / SUB / MUL over two inputs), and the element functions of :mod:`quantspec.litert._jitted`:

- QUANTIZE: ``clamp(int32(TfLiteRound(x / scale)) + zp)``, a true float32 division, rounding half away
  from zero, NaN and out-of-int32 quotients as x86 converts them (then the zero point wraps);
- DEQUANTIZE: per-tensor ``float(double(scale) * (q - zp))``, per-axis ``scale * float(q - zp)``; both
  in float32 lanes where ``|q - zp| <= 2^24`` whatever the codes (there they are the same product);
- requantization: gemmlowp's ``MultiplyByQuantizedMultiplier`` (double rounding, int64 arithmetic,
  the int32 wrap of the left shift, ``SaturatingRoundingDoublingHighMul``'s saturation), or for REF
  FULLY_CONNECTED ``int32(round(double(acc) * eff))``, then the zero point (int32 wrap) and the
  activation clamp.

Each function returns None when the fast path does not cover the call (numba missing,
``QUANTSPEC_FAST=0``, or an input outside what the kernels implement), and the caller then takes
its reference path.  ``tests/test_litert_fast.py`` proves both paths equal.
"""

from __future__ import annotations

from collections import namedtuple

import math

import numpy as np

from .._fastpath import runner as core
from .._fastpath import jit
from .._semantics.arrays import native

__all__ = ["quantize", "dequantize", "requantize_multiplier", "requantize_double", "depthwise", "add_sub", "mul"]

# records selecting the element function (their class) and carrying its constants
Quantize = namedtuple("Quantize", "lo hi")                 # params: (scale f32, zero point i32)
DequantizeTensor = namedtuple("DequantizeTensor", "mask half")   # params: (scale f64, zero point i64)
DequantizeAxis = namedtuple("DequantizeAxis", "mask half")       # params: (scale f32, zero point i64)
DequantizeSmall = namedtuple("DequantizeSmall", "mask half")     # params: (scale f32, zero point i32); |q-zp| <= 2^24
Requantize = namedtuple("Requantize", "zero_point lo hi")  # params: (multiplier i64, shift i64, bias i64)
RequantizeDouble = namedtuple("RequantizeDouble", "zero_point lo hi")   # params: (effective scale f64,)
AddSub = namedtuple("AddSub", "z1 z2 m1 e1 m2 e2 mo eo zo lo hi left sign")
Mul = namedtuple("Mul", "z1 z2 m e zo lo hi")


def _wanted(n: int) -> bool:
    """Whether an operation on ``n`` elements runs here (the fast path is on, and ``n`` is not below
    the calling thread's ``core.fast_from()``: the interpreter's smallest tensors take the reference
    path); None from a function below sends the caller to the reference path."""
    return jit.enabled() and n >= core.fast_from()


def _jitted():
    return jit.load("quantspec.litert._jitted")     # registers the LiteRT element functions


def resolve_granularity(params, ndim):
    if not params.per_axis:
        return "tensor", None
    return "axis", params.quantized_dimension


def _run(x, y, shape, granularity, axis, params, op):
    lay = core.layout(shape, granularity, axis)
    core.run(core.flat(x), y.reshape(-1), core.flat_params(shape, granularity, axis, lay, *params), lay, op)


# QUANTIZE / DEQUANTIZE calls that repeat (same shape, codes type and QuantParams values) reuse the
# layout, the flat parameters, the operation record and the kernel's entry points (core.run's memo)
_PREPARED: dict = {}
_PREPARED_MAX = 256


def _prepared(kind: str, shape: tuple, dtype: np.dtype, params, make):
    key = (kind, shape, dtype, core.CHUNK, params)  # QuantParams: equal values, equal key
    hit = _PREPARED.get(key)
    if hit is None:
        g, a = resolve_granularity(params, len(shape))
        prm, op = make(g)
        lay = core.layout(shape, g, a)
        hit = (lay, core.flat_params(shape, g, a, lay, *prm), op, {})
        if len(_PREPARED) >= _PREPARED_MAX:
            _PREPARED.clear()
        _PREPARED[key] = hit
    return hit


def _apply(x: np.ndarray, out: np.ndarray, prepared) -> np.ndarray:
    lay, prm, op, memo = prepared
    dest, fresh = core.destination(out, x)
    core.run(core.flat(x), dest.reshape(-1), prm, lay, op, memo=memo)
    if fresh:
        np.copyto(out, dest)
    return out


def quantize(x: np.ndarray, params, out: np.ndarray) -> np.ndarray | None:
    """LiteRT QUANTIZE of float32 ``x`` into the int8 array ``out`` (same shape)."""
    if not _wanted(out.size):
        return None
    _jitted()
    if out.size:
        _apply(np.asarray(x, np.float32), out, quantize_prepared(x.shape, params))
    return out


def quantize_prepared(shape: tuple, params):
    """The prepared state of :func:`quantize` for float32 arrays of ``shape`` (for a caller that runs
    it itself with :func:`run_prepared`, whatever the size: the interpreter's plans)."""
    def make(g):
        return (params.scale.astype(np.float32), params.zero_point.astype(np.int32)), (Quantize(-128, 127), 0)

    return _prepared("q", tuple(shape), np.dtype(np.float32), params, make)


def run_prepared(x: np.ndarray, out: np.ndarray, prepared) -> np.ndarray:
    """:func:`quantize` of float32 ``x`` into ``out`` with the state :func:`quantize_prepared` made for
    their shape, whatever the size (the caller has checked that the fast path is on)."""
    _jitted()
    return _apply(x, out, prepared)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def dequantize(q: np.ndarray, params, out: np.ndarray) -> np.ndarray | None:
    """LiteRT DEQUANTIZE of the integer codes ``q`` into the float32 array ``out``."""
    if not _wanted(out.size):
        return None
    _jitted()
    q = native(q)                            # the kernels read the codes' bytes in this machine's order
    if out.size:
        def make(g):
            bits = q.dtype.itemsize * 8
            mask = (1 << bits) - 1 if bits < 32 else -1
            half = (1 << (bits - 1)) if q.dtype.kind == "i" else 0
            zp = params.zero_point
            codes = (-half, (1 << bits) - 1 - half)
            if bits <= 16 and max(abs(codes[0] - int(zp.max())), abs(codes[1] - int(zp.min()))) <= 1 << 24:
                return (params.scale.astype(np.float32), zp.astype(np.int32)), (DequantizeSmall(mask, half), 0)
            if g == "tensor":
                return (params.scale.astype(np.float64), zp.astype(np.int64)), (DequantizeTensor(mask, half), 0)
            return (params.scale.astype(np.float32), zp.astype(np.int64)), (DequantizeAxis(mask, half), 0)

        codes_u = np.ascontiguousarray(q).view(_UINT[q.dtype.itemsize])
        _apply(codes_u, out, _prepared("dq", q.shape, q.dtype, params, make))
    return out


def requantize_multiplier(acc: np.ndarray, multiplier, shift, zero_point: int, lo: int, hi: int,
                          bias: np.ndarray | None = None) -> np.ndarray | None:
    """``clamp(MultiplyByQuantizedMultiplier(int32(acc + bias[c]), M[c], e[c]) + zero_point, lo, hi)``
    as int8, for an accumulator (int32, or int64 holding the exact sum that the C++ int32
    accumulator holds modulo 2^32) whose last axis is the channel ``c`` (CONV_2D, DEPTHWISE_CONV_2D)."""
    if not _wanted(acc.size):
        return None
    _jitted()
    out = np.empty(acc.shape, np.int8)
    if out.size:
        channels = acc.shape[-1]
        b = np.zeros(channels, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(channels)
        prm = (np.broadcast_to(np.asarray(multiplier, np.int64), (channels,)),
               np.broadcast_to(np.asarray(shift, np.int64), (channels,)), b)
        x = acc if acc.dtype in (np.int32, np.int64) else acc.astype(np.int64)
        _run(np.ascontiguousarray(x), out, acc.shape, "axis", acc.ndim - 1, prm,
             (Requantize(int(zero_point), int(lo), int(hi)), 0))
    return out


def depthwise(x: np.ndarray, filt: np.ndarray, bias: np.ndarray | None, p) -> np.ndarray | None:
    """DEPTHWISE_CONV_2D in one kernel (``ConvPrepared`` ``p``; ``filt`` int32 (KH, KW, I, M)): the
    taps inside the image accumulated per output pixel and channel, the bias added, the int32 wrap,
    and the requantization; the same integers as the reference path's per-tap numpy passes."""
    if not _wanted(math.prod(p.output_shape)):
        return None
    n, oh, ow, oc = p.output_shape
    out = np.empty((n, oh, ow, oc), np.int8)
    if out.size:
        k = _jitted()
        b = np.zeros(oc, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(oc)
        _, h, w, c = p.input_shape
        kh, kw = p.filter_hw
        geometry = np.array([h, w, c, kh, kw, oc // c, oh, ow, *p.stride, *p.dilation, *p.pad], np.int64)
        core.launch(k.depthwise, (
            core.flat(x, np.int8), core.flat(np.asarray(filt, np.int32)), b,
            np.broadcast_to(np.asarray(p.multiplier, np.int64), (oc,)).copy(),
            np.broadcast_to(np.asarray(p.shift, np.int64), (oc,)).copy(), geometry,
            Requantize(int(p.output_zero_point), int(p.act_min), int(p.act_max)), int(p.input_zero_point),
            out.reshape(-1)), n * oh, out.size)
    return out


def requantize_double(acc32: np.ndarray, effective_scale: np.ndarray, zero_point: int, lo: int,
                      hi: int) -> np.ndarray | None:
    """REF FULLY_CONNECTED: ``clamp(int32(round(double(acc) * eff[c])) + zero_point)`` as int8, the
    channel ``c`` on the last axis (``eff`` has one entry per channel, or one for all)."""
    if not _wanted(acc32.size):
        return None
    _jitted()
    out = np.empty(acc32.shape, np.int8)
    if out.size:
        eff = np.broadcast_to(np.asarray(effective_scale, np.float64).reshape(-1), (acc32.shape[-1],))
        _run(np.ascontiguousarray(acc32, np.int32), out, acc32.shape, "axis", acc32.ndim - 1, (eff,),
             (RequantizeDouble(int(zero_point), int(lo), int(hi)), 0))
    return out


def _binary(x: np.ndarray, y: np.ndarray, shape: tuple[int, ...], op) -> np.ndarray:
    out = np.empty(shape, np.int8)
    if out.size:
        xb = np.ascontiguousarray(np.broadcast_to(x, shape)).reshape(-1)
        yb = np.ascontiguousarray(np.broadcast_to(y, shape)).reshape(-1)
        k = _jitted()
        core.launch(k.binary, (xb, yb, out.reshape(-1), op, core.CHUNK), -(-out.size // core.CHUNK), out.size)
    return out


def add_sub(p, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """int8 ADD / SUB as the reference kernel computes them (``AddSubParams`` ``p``); None where the
    output multiplier needs the undefined negative-exponent rounding (SUB with a multiplier > 1)."""
    if not _wanted(math.prod(p.output_shape)) or p.shifts[2] > 0:
        return None
    (z1, z2), (m1, m2, mo), (e1, e2, eo) = p.offsets, p.multipliers, p.shifts
    op = AddSub(z1, z2, m1, e1, m2, e2, mo, eo, p.output_zero_point, p.act_min, p.act_max, p.left_shift,
                1 if p.op == "ADD" else -1)
    return _binary(x, y, p.output_shape, op)


def mul(p, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """int8 MUL as the reference kernel computes it (``MulParams`` ``p``)."""
    if not _wanted(math.prod(p.output_shape)):
        return None
    op = Mul(p.offsets[0], p.offsets[1], p.multiplier, p.shift, p.output_zero_point, p.act_min, p.act_max)
    return _binary(x, y, p.output_shape, op)
