"""The rules of the checkpoint schemes, one object each: every way quantspec computes a rule lives
in that rule's class.

A scheme (:class:`quantspec.checkpoint.schemes.Scheme`) holds a :class:`ParamRule` (how its scales
and zero points are chosen) and a :class:`CodesRule` (how its codes are computed from the stored
scale and zero point).  The callers ask the scheme's rules, never test a rule's name:

- :func:`quantspec.checkpoint.reference.encode` (the numpy reference path) calls
  :meth:`ParamRule.compute` (per tensor: :meth:`ParamRule.tensor`), stores the scale as the layout
  keeps it (:func:`quantspec.checkpoint.reference.stored_scale`), then :meth:`CodesRule.reference`;
- :mod:`quantspec.checkpoint.encode` (the fast path) calls :meth:`ParamRule.fast` (per tensor:
  :meth:`CodesRule.fast_tensor`): the rule's fused kernel of :mod:`quantspec.checkpoint._jitted`,
  parameters and codes in one pass; a rule without a kernel returns None and the slab goes through
  the numpy path (same bytes, slower);
- ``verify(..., params_from_dst=True)`` (:func:`quantspec.checkpoint.rederive.codes`) calls
  :meth:`CodesRule.codes` on the stored parameters;
- :meth:`ParamRule.refuses` (tensors a rule cannot take) and :meth:`ParamRule.check_scale` (scales
  a rule refuses to store) are asked by the planner and by both paths.

Each rule keeps its name (:attr:`ParamRule.name`, :attr:`CodesRule.name`): it is what the manifests
record (``"parameters"``, ``"codes_rule"``) and what reports and docs say.  The arithmetic of the
built-in rules is stated in :mod:`quantspec.checkpoint.schemes`' docstring; the classes below are
that arithmetic, in numpy (``compute``, ``tensor``, ``codes``, ``reference``) and as calls of the
kernels (``fast``), which the tests hold to the same bytes.

Where a scheme's parameters are *stored* is the scheme's data, not a rule's: quantspec's layout
(:meth:`quantspec.checkpoint.layout.QuantspecFormat.outputs`) follows from the scheme's ``codes``,
``scale_type`` and ``granularity``; compressed-tensors' (:mod:`quantspec.checkpoint.ctlayout`) from
its ``ct`` record.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .._fastpath import jit
from .._semantics.packing import packed_size
from .._semantics.rounding import half_away_from_zero
from ..dtypes import qtype
from ..errors import RangeError

#: a :class:`quantspec.checkpoint.schemes.Scheme` (not imported: that module imports this one)
Scheme = Any

__all__ = ["ParamRule", "CodesRule", "Slab", "ORT_INT", "ORT_NBITS", "AMAX", "MX", "LITERT", "ONNX", "ORT_NBITS_CODES",
           "LITERT_CODES", "CT_CODES", "CT_PRESET", "PARAM_RULES", "CODES_RULES", "ort_int_params", "amax_scale", "mx_exponents", "ranges",
           "blocks", "expand"]

_TINY32 = np.finfo(np.float32).tiny


# -- shared helpers ----------------------------------------------------------------------------------
def blocks(x: np.ndarray, block: int, func) -> np.ndarray:
    """``func`` (a ufunc: np.minimum, np.maximum) over each block of ``block`` elements along axis 1."""
    return func.reduceat(x, np.arange(0, x.shape[1], block), axis=1)


def ranges(s: Scheme, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(min, max) of each parameter's elements of the rows ``x``: per row (granularity "channel",
    shape ``[rows]``) or per block along axis 1 (``[rows, blocks]``)."""
    if s.granularity == "channel":
        return x.min(axis=1), x.max(axis=1)
    if s.granularity == "block":
        return blocks(x, s.block, np.minimum), blocks(x, s.block, np.maximum)
    raise ValueError(f"ranges of granularity {s.granularity!r}: per-tensor parameters come from ParamRule.tensor")


def expand(p: np.ndarray, x: np.ndarray, attrs: dict) -> np.ndarray:
    """A parameter broadcast to ``x``'s elements (per tensor, per channel of axis 0, blocks of axis 1)."""
    p = np.asarray(p)
    if p.ndim == 0:
        return np.broadcast_to(p, x.shape)
    if "block_size" in attrs:
        rep = np.repeat(p, attrs["block_size"], axis=1)[:, :x.shape[1]]
        return rep.reshape(rep.shape + (1,) * (x.ndim - 2))
    return p.reshape(p.shape + (1,) * (x.ndim - 1))


def as_float32(a) -> np.ndarray:
    return np.asarray(a).astype(np.float32)


def _quantize_linear(x, scale, zp, **attrs):
    """ONNX QuantizeLinear, quantspec's numpy path (the readable one)."""
    from ..onnx import quantize_linear

    with jit.reference_only():
        return quantize_linear(x, scale, zp, **attrs)


class Slab:
    """What a fast kernel works on: one slab of ``rows`` rows of ``cols`` elements, as the source
    stores them (``raw``; ``kind`` 0, 1, 2: float32, float16, bfloat16), and the buffers the kernels
    write (:mod:`quantspec.checkpoint.encode` makes it).  ``k``: the kernel module
    (:mod:`quantspec.checkpoint._jitted`); ``sround``: how the layout stores scales (``k.S_*``);
    ``t``: the codes' type (``qtype(scheme.codes)``); ``fmt``: its narrow-float record; ``codes``: the packed codes; ``stats``: the error sums;
    ``buf`` / ``dq`` / ``cbuf``: a row's scratch; ``scratch(name, n, dtype)``: another reusable
    buffer of this thread."""

    __slots__ = ("k", "raw", "kind", "rows", "cols", "sround", "t", "fmt", "codes", "stats", "buf", "dq", "cbuf",
                 "scratch")

    def __init__(self, k, raw, kind, rows, cols, sround, t, fmt, codes, stats, buf, dq, cbuf,
                 scratch: Callable[..., np.ndarray]):
        self.k, self.raw, self.kind, self.rows, self.cols, self.sround, self.t = k, raw, kind, rows, cols, sround, t
        self.fmt, self.codes, self.stats, self.buf, self.dq, self.cbuf, self.scratch = (fmt, codes, stats, buf, dq,
                                                                                      cbuf, scratch)


# -- parameter rules ---------------------------------------------------------------------------------
class ParamRule:
    """How a scheme chooses its scales (and zero points).  Subclass it, set :attr:`name` and
    :attr:`text`, and define :meth:`compute` (and :meth:`tensor` for per-tensor schemes); the
    rest is optional."""

    #: the rule's name: the manifest's ``"parameters"``, the reports' and docs' word for it
    name: str = ""
    #: the docs table's words for it (:func:`quantspec.checkpoint.schemes.table_markdown`)
    text: str = ""
    #: the docs table says "symmetric" / "asymmetric" after :attr:`text`
    shows_symmetry: bool = False

    def compute(self, s: Scheme, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(scale, zero point) of the float32 rows ``x`` ``[rows, cols]`` (finite) under scheme ``s``,
        one per row (granularity "channel": ``[rows]``) or per block along axis 1 (``[rows,
        blocks]``): the scale as the rule computes it (float32, or float8e8m0 values), before any
        layout rounds it; the zero point as values of the codes' type, or None (the codes rule then
        takes none).  A zero point is stored only when the scheme's ``zero_point`` is set."""
        raise NotImplementedError(f"parameter rule {self.name!r} does not compute per-row or per-block parameters")

    def tensor(self, s: Scheme, mn: float, mx: float) -> tuple[np.floating, int]:
        """(scale, zero point) of a per-tensor scheme from the whole tensor's float32 min and max."""
        raise NotImplementedError(f"parameter rule {self.name!r} does not compute per-tensor parameters")

    def fast(self, s: Scheme, slab: Slab) -> dict[str, np.ndarray] | None:
        """The rule's fused kernel (parameters and codes of ``slab``, in one pass): the outputs
        ``{"scale": ..., "zero_point": ...}`` (the codes go to ``slab.codes``, the error sums to
        ``slab.stats``), or None where it has no kernel for this scheme (its codes rule, type or
        granularity): the slab then takes the numpy path."""
        return None

    def refuses(self, s: Scheme, shape: tuple[int, ...]) -> str | None:
        """None if the rule takes a tensor of this shape, else why not."""
        return None

    def check_scale(self, scale: np.ndarray, name: str, path: str) -> None:
        """Raise if the rule refuses to store these scales (both paths ask, after the slab's codes)."""

    def __repr__(self) -> str:
        return f"<parameter rule {self.name}>"


def ort_int_params(rmin: np.ndarray, rmax: np.ndarray, symmetric: bool) -> tuple[np.ndarray, np.ndarray]:
    """onnxruntime.quantization's ``compute_scale_zp`` (weights: int8 symmetric in [-127, 127], uint8
    asymmetric in [0, 255]) for float32 ranges: (float32 scale, int64 zero point)."""
    rmin = np.minimum(np.asarray(rmin, np.float32), np.float32(0))
    rmax = np.maximum(np.asarray(rmax, np.float32), np.float32(0))
    if symmetric:
        a = np.maximum(np.abs(rmin), np.abs(rmax))
        rmin, rmax = -a, a
        s64 = (rmax.astype(np.float64) - rmin.astype(np.float64)) / np.float64(254)
        zp = np.zeros(s64.shape, np.int64)
    else:
        s64 = (rmax.astype(np.float64) - rmin.astype(np.float64)) / np.float64(255)
        with np.errstate(divide="ignore", invalid="ignore"):
            zp = np.rint(np.float64(0) - rmin.astype(np.float64) / s64)
    small = s64 < _TINY32
    scale = np.where(small, np.float32(1), s64.astype(np.float32)).astype(np.float32)
    zp = np.where(small, 0, zp).astype(np.int64)
    return scale, zp


def amax_scale(amax: np.ndarray, t: str) -> np.ndarray:
    """float32(amax) / float32(max finite of ``t``), one division; 1.0 where amax or the quotient is 0."""
    amax = np.asarray(amax, np.float32)
    s = amax / np.float32(qtype(t).qmax)
    return np.where((amax == 0) | (s == 0), np.float32(1), s).astype(np.float32)


def mx_exponents(amax: np.ndarray, s: Scheme) -> np.ndarray:
    """The stored exponent of each block: floor(log2(amax)) - emax (clamped to [-127, 127]; a zero
    amax: -127), plus the scheme's shift, clamped at -127."""
    amax = np.asarray(amax, np.float32)
    _, k = np.frexp(amax.astype(np.float64))      # amax = f * 2**k, f in [0.5, 1): floor(log2) = k - 1
    e = np.where(amax > 0, k.astype(np.int64) - 1 - s.emax, -127)
    e = np.clip(e, -127, 127)
    return np.maximum(e + s.scale_shift, -127)


def _fast_channel(s: Scheme, slab: Slab, mode: int) -> dict[str, np.ndarray]:
    """The per-channel kernel (``_jitted.channel``) in ``mode``."""
    t = slab.t
    scale = slab.scratch("scale", slab.rows, np.float32)
    zp = slab.scratch("zp", slab.rows if s.zero_point else 0)
    slab.k.channel(slab.raw, slab.kind, slab.rows, slab.cols, mode, slab.fmt, np.float32(t.qmax if t.is_float else 0),
                   slab.codes, scale, zp, slab.stats, slab.buf, slab.dq, slab.sround)
    return {"scale": scale, "zero_point": zp} if s.zero_point else {"scale": scale}


class OrtInt(ParamRule):
    """``ort-int``: onnxruntime.quantization's weight parameters (``quantize_data``), int8 symmetric
    or uint8 asymmetric, per tensor or per channel."""

    name, text, shows_symmetry = "ort-int", "onnxruntime", True

    def compute(self, s, x):
        mn, mx = ranges(s, x)
        scale, zp = ort_int_params(mn, mx, not s.zero_point)
        return scale, zp.astype(qtype(s.codes).dtype)

    def tensor(self, s, mn, mx):
        scale, zp = ort_int_params(np.float32(mn), np.float32(mx), not s.zero_point)
        return np.float32(scale), int(zp)

    def fast(self, s, slab):
        if (s.granularity != "channel" or s.codes_rule is not ONNX
                or s.codes != ("uint8" if s.zero_point else "int8")):
            return None
        return _fast_channel(s, slab, slab.k.CH_ORT_ASYM if s.zero_point else slab.k.CH_ORT_SYM)


class Amax(ParamRule):
    """``amax``: ``scale = float32(amax) / float32(largest finite value of the codes' type)``."""

    name, text = "amax", "amax"

    def compute(self, s, x):
        if s.granularity == "channel":
            a = np.maximum(np.abs(x.min(axis=1)), np.abs(x.max(axis=1)))
        else:
            a = blocks(np.abs(x), s.block, np.maximum)
        return amax_scale(a, s.codes), None

    def tensor(self, s, mn, mx):
        a = np.maximum(np.abs(np.float32(mn)), np.abs(np.float32(mx)))
        return np.float32(amax_scale(a, s.codes)), 0

    def fast(self, s, slab):
        if s.granularity != "channel" or s.codes_rule is not ONNX or not slab.t.is_float:
            return None
        return _fast_channel(s, slab, slab.k.CH_FP8)


class MXRule(ParamRule):
    """``mx``: the OCP Microscaling v1.0 shared exponent of each block (the scheme's ``emax`` and
    ``scale_shift``), stored as float8e8m0."""

    name, text = "mx", "OCP MX"

    def compute(self, s, x):
        e = mx_exponents(blocks(np.abs(x), s.block, np.maximum), s)
        return (e + 127).astype(np.uint8).view(qtype("float8e8m0").dtype), None

    def fast(self, s, slab):
        if s.granularity != "block" or s.codes_rule is not ONNX or s.scale_type != "float8e8m0":
            return None
        t = slab.t
        nb = -(-slab.cols // s.block)
        scale = slab.scratch("scale8", slab.rows * nb)
        slab.k.mx(slab.raw, slab.kind, slab.rows, slab.cols, s.emax, s.scale_shift, t.is_int, slab.fmt, t.bits,
                  slab.codes, scale, slab.stats, slab.buf, slab.dq, slab.cbuf, slab.scratch("blkz", nb, np.int32))
        return {"scale": scale}


class OrtNBits(ParamRule):
    """``ort-nbits``: onnxruntime's MatMulNBitsQuantizer (MLAS ``QuantizeColumnWise``), 4-bit blocks."""

    name, text, shows_symmetry = "ort-nbits", "MatMulNBits", True

    def compute(self, s, x):
        mn, mx = ranges(s, x)
        # MLAS scans a block in order with std::min / std::max, which keep the first of equal values: in
        # an all-zero block both are its first element (the sign of that zero reaches the scale)
        zeros = (mn == 0) & (mx == 0)
        first = x[:, ::s.block]
        mn, mx = np.where(zeros, first, mn), np.where(zeros, first, mx)
        f0 = np.float32(0)
        if s.zero_point:
            mn = np.where(f0 < mn, f0, mn)
            mx = np.where(mx < f0, f0, mx)
            scale = ((mx - mn) / np.float32(15)).astype(np.float32)
            with np.errstate(divide="ignore", invalid="ignore"):
                zf = np.where(scale != 0, f0 - mn / scale, mn).astype(np.float32)
            zp = np.where(zf < 0, 0, np.where(zf > 15, 15, half_away_from_zero(zf))).astype(np.int64)
            return scale, zp.astype(qtype(s.codes).dtype)
        m = np.where(np.abs(mx) > np.abs(mn), mx, mn)
        return (-m / np.float32(8)).astype(np.float32), None

    def fast(self, s, slab):
        if s.granularity != "block" or s.codes_rule is not ORT_NBITS_CODES or slab.t.bits != 4:
            return None
        nb = -(-slab.cols // s.block)
        scale = slab.scratch("scale", slab.rows * nb, np.float32)
        zp = slab.scratch("zp", packed_size(slab.rows * nb, 4) if s.zero_point else 0)
        zp[:] = 0
        blk = [slab.scratch(f"blk{i}", nb, np.float32) for i in range(4)]
        slab.k.nbits(slab.raw, slab.kind, slab.rows, slab.cols, s.block, not s.zero_point, slab.codes, scale, zp,
                     slab.stats, slab.buf, slab.dq, slab.cbuf, *blk, slab.scratch("blkz", nb, np.int32), slab.sround)
        return {"scale": scale, "zero_point": zp} if s.zero_point else {"scale": scale}


class LiteRT(ParamRule):
    """``litert``: :func:`quantspec.litert.weight_params` (the TFLite converter), per output channel."""

    name, text = "litert", "TFLite converter"

    def compute(self, s, x):
        from ..litert.params import weight_params

        # a one-row slab of a per-channel tensor is computed on two copies of the row (the per-axis
        # formula; the converter takes one scale as per-tensor)
        rows = x.shape[0]
        p = weight_params(np.concatenate([x, x]) if rows == 1 else x, axis=0)
        return p.scale[:rows].astype(np.float32), None

    def fast(self, s, slab):
        if s.granularity != "channel" or s.codes_rule is not LITERT_CODES or s.codes != "int8":
            return None
        return _fast_channel(s, slab, slab.k.CH_LITERT)

    def refuses(self, s, shape):
        if shape[0] < 2:
            return "litert per-channel weights need 2 or more output channels (LiteRT takes one scale as per-tensor)"
        return None

    def check_scale(self, scale, name, path):
        if not np.all(np.isfinite(scale)):
            raise RangeError("src", f"tensor {name!r} has values too large for a float32 LiteRT scale", path)


ORT_INT, AMAX, MX, ORT_NBITS, LITERT = OrtInt(), Amax(), MXRule(), OrtNBits(), LiteRT()
#: the built-in parameter rules, by name
PARAM_RULES: dict[str, ParamRule] = {r.name: r for r in (ORT_INT, ORT_NBITS, AMAX, MX, LITERT)}


# -- codes rules ---------------------------------------------------------------------------------------
class CodesRule:
    """How a scheme's codes follow from the stored scale and zero point.  Subclass it, set
    :attr:`name`, :attr:`text` and :attr:`spec`, and define :meth:`codes`."""

    #: the rule's name: the manifest's ``"codes_rule"``
    name: str = ""
    #: the docs table's words for it
    text: str = ""
    #: the spec whose operator it is: the manifest's ``"spec"`` ("onnx" or "litert")
    spec: str = "onnx"
    #: codes under a zero scale are undefined (``x / 0``): ``verify --params-from-dst`` skips them
    divides: bool = False

    def codes(self, codes_type: str, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None,
              attrs: dict) -> np.ndarray:
        """The codes of ``x`` (float32) for the stored ``scale`` / ``zero_point`` (None: zero) with the
        ONNX attributes ``attrs`` (per tensor ``{}``, ``{"axis": 0}``, ``{"axis": 1, "block_size": N}``),
        as values of ``codes_type``."""
        raise NotImplementedError

    def reference(self, s: Scheme, x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray | None) -> np.ndarray:
        """The codes of the rows ``x`` on the reference path (quantspec's readable implementation of
        the operator the rule names); :meth:`codes` unless a rule says otherwise."""
        return self.codes(s.codes, x, scale, zero_point, s.attributes())

    def fast_tensor(self, s: Scheme, slab: Slab, scale: float, zero_point: int) -> dict[str, np.ndarray] | None:
        """A per-tensor scheme's codes of ``slab`` by a kernel, or None (the numpy path)."""
        return None

    def __repr__(self) -> str:
        return f"<codes rule {self.name}>"


class OnnxCodes(CodesRule):
    """``onnx``: ONNX QuantizeLinear of the stored scale and zero point (saturating for float types)."""

    name, text, spec, divides = "onnx", "QuantizeLinear", "onnx", True

    def codes(self, codes_type, x, scale, zero_point, attrs):
        from ..onnx import quantize_linear

        t = qtype(codes_type)
        s32 = as_float32(scale)
        if t.is_float:
            return quantize_linear(x, s32, None, output_dtype=t.name, **attrs)
        zp = zero_point if zero_point is not None else np.zeros(s32.shape, t.dtype)
        return quantize_linear(x, s32, zp, **attrs)

    def reference(self, s, x, scale, zero_point):
        attrs = s.attributes()
        if zero_point is None:
            return _quantize_linear(x, scale, None, output_dtype=qtype(s.codes).name, **attrs)
        return _quantize_linear(x, scale, zero_point, **attrs)

    def fast_tensor(self, s, slab, scale, zero_point):
        t = slab.t
        if zero_point != 0 or not (t.name == "int8" or (t.is_float and t.bits == 8)):
            return None
        k = slab.k
        slab.k.tensor(slab.raw, slab.kind, slab.rows, slab.cols, k.T_INT8 if t.is_int else k.T_FP8, np.float32(scale),
                      slab.fmt, slab.codes, slab.stats, slab.buf, slab.dq)
        return {"scale": np.array([scale], np.float32)}


class NBitsCodes(CodesRule):
    """``ort-nbits``: MLAS's ``clamp(int(roundf(x * (1 / scale))) + zero_point)`` (a reciprocal
    multiply in float32, 0 for a zero scale, rounding half away from zero)."""

    name, text = "ort-nbits", "MatMulNBits (`x * (1/scale)`, ties away)"

    def codes(self, codes_type, x, scale, zero_point, attrs):
        t = qtype(codes_type)
        z = 0 if zero_point is None else expand(np.asarray(zero_point).astype(np.int64), x, attrs)
        s = expand(as_float32(scale), x, attrs)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            inv = np.where(s != 0, np.float32(1) / np.where(s != 0, s, np.float32(1)), np.float32(0)).astype(np.float32)
            r = half_away_from_zero((x * inv).astype(np.float32))
            wild = ~(np.abs(r) < np.float32(2 ** 31))           # x86 cvttss2si: out of range -> INT32_MIN
            q = np.where(wild, np.int64(-2 ** 31), np.where(wild, 0, r).astype(np.int64)) + z
        return np.clip(q, t.qmin, t.qmax).astype(t.dtype)


class LiteRTCodes(CodesRule):
    """``litert``: the TFLite converter's ``clamp(round_half_away(x * float32(1 / float64(scale))),
    -127, 127)``; the reference path calls :func:`quantspec.litert.quantize_weights`."""

    name, text, spec = "litert", "TFLite converter (`x * (1/scale)`, ties away)", "litert"

    def codes(self, codes_type, x, scale, zero_point, attrs):
        t = qtype(codes_type)
        s = expand(as_float32(scale), x, attrs)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            inv = (1.0 / s.astype(np.float64)).astype(np.float32)
            q = half_away_from_zero((x * inv).astype(np.float32)).astype(np.int64)
        return np.clip(q, -127, 127).astype(t.dtype)

    def reference(self, s, x, scale, zero_point):
        from ..litert.params import QuantParams, quantize_weights

        # quantize_weights takes one (scale, zero point) pair as per-tensor weights: a one-row slab of
        # a per-channel tensor is computed on two copies of the row (the per-axis formula)
        rows = x.shape[0]
        if rows == 1:
            x, scale = np.concatenate([x, x]), np.concatenate([scale, scale])
        return quantize_weights(x, QuantParams(scale, np.zeros(scale.size, np.int64), 0))[:rows]


class CTCodes(CodesRule):
    """``compressed-tensors``: compressed-tensors' ``quantize`` (:mod:`quantspec.checkpoint.ctarith`):
    the quotient rounded to the weight's type, then rounded half to even (int) or converted (float)."""

    name, text, spec, divides = "compressed-tensors", "compressed-tensors (`x / scale` in the weight's type)", "onnx", True

    def codes(self, codes_type, x, scale, zero_point, attrs):
        raise NotImplementedError("compressed-tensors presets compute their codes with their parameters "
                                  "(quantspec.checkpoint.ctarith)")


ONNX, ORT_NBITS_CODES, LITERT_CODES, CT_CODES = OnnxCodes(), NBitsCodes(), LiteRTCodes(), CTCodes()
#: the built-in codes rules, by name
CODES_RULES: dict[str, CodesRule] = {r.name: r for r in (ONNX, ORT_NBITS_CODES, LITERT_CODES, CT_CODES)}


class CTPreset(ParamRule):
    """``compressed-tensors``: a compressed-tensors preset's parameters as llm-compressor's min-max
    observer computes them (:mod:`quantspec.checkpoint.ctarith`; the preset is the scheme's
    ``preset``).  Presets encode whole slabs themselves (:func:`quantspec.checkpoint.presets.encode_weight`),
    not through :meth:`compute`."""

    name, text = "compressed-tensors", "compressed-tensors / llm-compressor"

    def compute(self, s, x):
        raise NotImplementedError("compressed-tensors presets compute their parameters with their codes")

    def refuses(self, s, shape):
        if len(shape) != 2:
            return f"{s.name} takes 2-D weights (got {len(shape)}-D)"
        return s.preset.weights.takes(*shape)


CT_PRESET = CTPreset()
PARAM_RULES[CT_PRESET.name] = CT_PRESET
