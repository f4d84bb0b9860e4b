"""compressed-tensors' weight arithmetic, in numpy: the parameters, codes and stored bytes that
llm-compressor's data-free presets (``model_free_ptq``) write, bit for bit.

The arithmetic is that of compressed-tensors' ``calculate_qparams`` / ``quantize`` as llm-compressor
calls them (its min-max weight observer), and of the compressors that store the result.  Every
step is a PyTorch operation on the weight's own type (bfloat16, float16 or float32): PyTorch
computes a bfloat16 or float16 operation in float32 and rounds the result to the type (ties to
even), so each step here is a float32 operation followed by :func:`rnd`.  The steps, for a weight
``W`` of type ``T`` and a parameter group ``G`` (a row, a group of columns, a 2-D block):

1. ``lo = min(min(G), 0)``, ``hi = max(max(G), 0)`` (exact);
2. symmetric: ``a = max(|lo|, |hi|)``, ``scale = T(a / T(range / 2))`` with ``range = qmax - qmin``
   (int b-bit: ``2^b - 1``; float8 e4m3: 896; float4 e2m1: 12), so int8 divides by 127.5 and int4
   by 7.5; asymmetric: ``scale = T(T(hi - lo) / range)`` and ``zero_point = round_half_even(clamp(
   T(qmin - T(lo / scale)), qmin, qmax))``;
   MX (group 32, uint8 scale): ``a`` rounded to a power of two (its bits plus a carry that rounds a
   mantissa of 0.75 or more up, the sign and exponent kept), ``e = 127 + log2(that) - emax_elem``
   (emax_elem: 2 for float4, 8 for float8), clamped to [0, 255]: the scale is ``2^(e - 127)``;
3. NVFP4 (tensor_group): a global scale ``g = float32(T(T(1 / A) * 2688))`` from the absolute
   maximum ``A`` over the tensor and its fused partners (q/k/v, gate/up; ``1 / A`` is PyTorch's
   ``2688 / tensor``, a reciprocal then a product), and the group scale ``fp8_e4m3(clamp(float32(g) *
   scale, ±448))``;
4. a scale of 0 becomes the epsilon of its stored type (bfloat16 2^-7, float16 2^-10, float32
   2^-23, float8 0.125, uint8 exponents 1);
5. codes: ``q = T(W / scale)`` (NVFP4: ``float32(W / float32(scale / g))``), asymmetric ``q = T(q +
   zero_point)``, clamped to [qmin, qmax], then rounded half to even (int), converted to float8
   e4m3 (ties to even), or to float4 e2m1 by compressed-tensors' thresholds (ties to even; a value
   that rounds to zero keeps its sign).

The stored forms: ``pack-quantized`` packs b-bit integer codes densely, 32 codes into ``b`` int32
words, code ``k`` at bits ``k*b`` of the group's little-endian bit string, each code plus
``2^(b-1)``; zero points are packed the same way along the output axis.  ``int-quantized`` and
``float-quantized`` store codes as I8 / F8_E4M3; the float4 formats pack two codes a byte (the
first in the low nibble; sign bit 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = ["Args", "WT", "rnd", "params", "codes", "dequantize", "pack_ints", "unpack_ints", "pack_fp4",
           "unpack_fp4", "global_scale", "FP4_VALUES", "mx_scale", "mx_stored", "mx_value", "absmax"]

#: numpy types of the weight types
WT = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float": np.float32}
_EPS = {"bfloat16": 2.0 ** -7, "float16": 2.0 ** -10, "float": 2.0 ** -23, "float8e4m3fn": 0.125, "uint8": 1.0}
FP8_MAX = 448.0
FP4_MAX = 6.0
#: the float4 e2m1 magnitudes, by code
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)


@dataclass(frozen=True)
class Args:
    """A preset's weight arguments (compressed-tensors ``QuantizationArgs``, the fields that decide the
    arithmetic): ``type`` "int" / "float", ``bits``, ``strategy`` ("channel", "group", "block",
    "tensor_group", "tensor"), ``group`` (group / tensor_group), ``block`` (rows, cols), ``symmetric``,
    ``scale_dtype`` (None: the weight's type; "float8e4m3fn"; "uint8": MX exponents)."""

    type: str
    bits: int
    strategy: str
    group: int = 0
    block: tuple[int, int] = (0, 0)
    symmetric: bool = True
    scale_dtype: str | None = None

    @property
    def qrange(self) -> tuple[float, float]:
        if self.type == "int":
            return -float(2 ** (self.bits - 1)), float(2 ** (self.bits - 1) - 1)
        m = FP8_MAX if self.bits == 8 else FP4_MAX
        return -m, m

    @property
    def mx(self) -> bool:
        return self.type == "float" and self.group == 32 and self.scale_dtype == "uint8"

    def param_shape(self, rows: int, cols: int) -> tuple[int, int]:
        if self.strategy == "channel":
            return rows, 1
        if self.strategy in ("group", "tensor_group"):
            return rows, cols // self.group
        if self.strategy == "block":
            return -(-rows // self.block[0]), -(-cols // self.block[1])
        return 1, 1

    def takes(self, rows: int, cols: int) -> str | None:
        """None if a ``[rows, cols]`` weight can take these arguments, else why not (the tool refuses it)."""
        if self.strategy in ("group", "tensor_group") and cols % self.group:
            return f"in_features {cols} is not a multiple of the group size {self.group}"
        if self.type == "float" and self.bits == 4 and cols % 2:
            return f"in_features {cols} is odd (float4 codes are packed two a byte)"
        return None


def rnd(a: np.ndarray, wt: str) -> np.ndarray:
    """float32 values rounded to the type ``wt`` (ties to even), as float32."""
    a = np.asarray(a, np.float32)
    if wt == "float":
        return a
    return a.astype(WT[wt]).astype(np.float32)


def _grouped(x: np.ndarray, a: Args) -> np.ndarray:
    """``x`` [rows, cols] as [prows, pcols, n]: each parameter's elements (blocks zero-padded)."""
    rows, cols = x.shape
    if a.strategy == "channel":
        return x.reshape(rows, 1, cols)
    if a.strategy in ("group", "tensor_group"):
        return x.reshape(rows, cols // a.group, a.group)
    if a.strategy == "block":
        bh, bw = a.block
        pr, pc = -(-rows // bh), -(-cols // bw)
        p = np.zeros((pr * bh, pc * bw), np.float32)
        p[:rows, :cols] = x
        return p.reshape(pr, bh, pc, bw).transpose(0, 2, 1, 3).reshape(pr, pc, bh * bw)
    return x.reshape(1, 1, -1)


def _expand(p: np.ndarray, a: Args, rows: int, cols: int) -> np.ndarray:
    """A parameter array [prows, pcols] broadcast to the weight's elements [rows, cols]."""
    if a.strategy == "channel":
        return np.broadcast_to(p.reshape(rows, 1), (rows, cols))
    if a.strategy in ("group", "tensor_group"):
        return np.repeat(p, a.group, axis=1)
    if a.strategy == "block":
        bh, bw = a.block
        return np.repeat(np.repeat(p, bh, axis=0), bw, axis=1)[:rows, :cols]
    return np.broadcast_to(p.reshape(1, 1), (rows, cols))


def absmax(x: np.ndarray) -> np.float32:
    """``max(|min(x, 0)|, max(x, 0))`` over the whole weight (what a global scale starts from)."""
    if x.size == 0:
        return np.float32(0)
    return np.float32(max(-min(float(x.min()), 0.0), max(float(x.max()), 0.0)))


def global_scale(amax: float, wt: str) -> np.float32:
    """NVFP4's global scale of a weight (and its fused partners) whose absolute maximum is ``amax``
    (exact in ``wt``): ``T(T(1 / a) * 2688)`` with ``a = max(amax, smallest normal of T)``, NaN or
    infinity replaced by 1, as float32."""
    tiny = np.float32(np.finfo(WT[wt]).tiny) if wt != "bfloat16" else np.float32(2.0 ** -126)
    a = max(np.float32(amax), tiny)
    with np.errstate(over="ignore", divide="ignore"):
        r = rnd(np.float32(1) / np.float32(a), wt)
        g = rnd(r * np.float32(FP8_MAX * FP4_MAX), wt)
    g = np.float32(g)
    return np.float32(1) if not np.isfinite(g) else g


def mx_scale(amax: np.ndarray, bits: int, wt: str) -> np.ndarray:
    """The stored uint8 exponent of MX groups of absolute maximum ``amax`` (values of ``wt``)."""
    a = np.asarray(amax, np.float32)
    if wt == "float":
        u = a.view(np.uint32).astype(np.int64)
        mant, expo = 23, 8
    else:
        u = a.astype(WT[wt]).view(np.uint16).astype(np.int64)
        mant, expo = (7, 8) if wt == "bfloat16" else (10, 5)
    carry = 1 << (mant - 1 - 1)                      # mantissa bits of float4 e2m1: 1
    mask = ((1 << (expo + 1)) - 1) << mant
    p2 = (u + carry) & mask                          # sign and exponent kept, rounded by the carry
    if wt == "float":
        v = (p2 & 0xFFFFFFFF).astype(np.uint32).view(np.float32)
    else:
        v = (p2 & 0xFFFF).astype(np.uint16).view(WT[wt]).astype(np.float32)
    offset = 2 if bits == 4 else 8
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.float32(127) + np.floor(np.log2(v)) - np.float32(offset)
    e = rnd(e, wt)
    e = np.clip(e, 0, 255)
    return np.where(np.isnan(e), 0, np.rint(e)).astype(np.uint8)


def params(x: np.ndarray, a: Args, wt: str, gscale: np.float32 | None = None
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """(scale, zero point or None) of the weight ``x`` (float32 [rows, cols], values of ``wt``) as
    compressed-tensors computes them: the scale as float32 values of its stored type (MX: the uint8
    exponents), shape :meth:`Args.param_shape`; the zero point as int8 values."""
    g = _grouped(x, a)
    lo = np.minimum(g.min(axis=2), np.float32(0))
    hi = np.maximum(g.max(axis=2), np.float32(0))
    qmin, qmax = a.qrange
    zp = None
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if a.symmetric:
            amax = np.maximum(np.abs(lo), np.abs(hi))
            if a.mx:
                # the exponent's value in the weight's type (float16 flushes 2^-25 and below to 0 and
                # overflows above 2^15); a zero becomes uint8's epsilon, 1
                v = rnd(np.ldexp(np.float32(1), mx_scale(amax, a.bits, wt).astype(np.int32) - 127), wt)
                return np.where(v == 0, np.float32(1), v).astype(np.float32), None
            half = rnd(np.float32((qmax - qmin) / 2), wt)
            scale = rnd(amax / half, wt)
        else:
            scale = rnd(rnd(hi - lo, wt) / rnd(np.float32(qmax - qmin), wt), wt)
            z = rnd(np.float32(qmin) - rnd(lo / scale, wt), wt)
            z = np.clip(z, qmin, qmax)
            zp = np.where(np.isnan(z), 0, np.rint(z)).astype(np.int8)
        if gscale is not None:
            scale = (np.float32(gscale) * scale).astype(np.float32)
        if a.scale_dtype == "float8e4m3fn":
            scale = np.clip(scale, -FP8_MAX, FP8_MAX).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
        eps = _EPS[a.scale_dtype or wt]
        scale = np.where(scale == 0, np.float32(eps), scale).astype(np.float32)
    return scale, zp


def mx_stored(v: np.ndarray) -> np.ndarray:
    """The stored uint8 exponent of MX scale values: ``127 + floor(log2(v))`` as int32, to uint8 (an
    infinite scale's int32 is INT32_MIN, as x86 converts it: its low byte gives 127)."""
    v = np.asarray(v, np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.floor(np.log2(np.where(np.isfinite(v), v, np.float32(1))))
    i = np.where(np.isfinite(v), lg, -2.0 ** 31).astype(np.int64) + 127
    return (i & 0xFF).astype(np.uint8)


def mx_value(e: np.ndarray, wt: str) -> np.ndarray:
    """The scale value compressed-tensors decompresses a stored MX exponent to: ``2^(e - 127)`` as
    bfloat16, then as the weight's type."""
    with np.errstate(over="ignore"):
        return rnd(rnd(np.ldexp(np.float32(1), np.asarray(e).astype(np.int32) - 127), "bfloat16"), wt)


def _scale_value(scale: np.ndarray, a: Args) -> np.ndarray:
    """The float32 value of computed scales (MX: already the value)."""
    return scale


def _cast_fp4(q: np.ndarray) -> np.ndarray:
    """compressed-tensors' float4 e2m1 rounding of float32 values in [-6, 6]: ties to even; a value
    that rounds to zero keeps its sign (its ``sign(x) * round(|x|)``)."""
    m = np.abs(q)
    r = np.select([m <= 0.25, m < 0.75, m <= 1.25, m < 1.75, m <= 2.5, m < 3.5, m <= 5.0],
                  [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0], 6.0).astype(np.float32)
    sign = np.sign(q).astype(np.float32)             # sign(±0) is +0: -0 gives +0
    return (r * sign).astype(np.float32)


def codes(x: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, a: Args, wt: str,
          gscale: np.float32 | None = None) -> np.ndarray:
    """The codes of ``x`` for stored parameters: int8 values (int types) or float32 values of the
    float type (float8 e4m3, float4 e2m1 with signed zeros)."""
    rows, cols = x.shape
    s = _expand(_scale_value(scale, a), a, rows, cols)
    qmin, qmax = a.qrange
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if gscale is not None:
            s = (s / np.float32(gscale)).astype(np.float32)
            q = (x / s).astype(np.float32)
        else:
            q = rnd(x / s, wt)
        if zp is not None:
            q = rnd(q + _expand(zp.astype(np.float32), a, rows, cols), wt)
    q = np.clip(q, qmin, qmax)
    if a.type == "int":
        return np.where(np.isnan(q), 0, np.rint(q)).astype(np.int8)
    if a.bits == 8:
        return q.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    return _cast_fp4(q)


def dequantize(c: np.ndarray, scale: np.ndarray, zp: np.ndarray | None, a: Args, wt: str,
               gscale: np.float32 | None = None) -> np.ndarray:
    """compressed-tensors' decompression, float32 values of ``wt``: ``T((code - zero_point) * scale)``
    (NVFP4: the scale ``scale / g`` in float32)."""
    rows, cols = c.shape
    s = _expand(_scale_value(scale, a), a, rows, cols)
    if gscale is not None:
        s = (s / np.float32(gscale)).astype(np.float32)
    v = c.astype(np.float32)
    if zp is not None:
        v = v - _expand(zp.astype(np.float32), a, rows, cols)
    return rnd(v * s, wt)


# -- stored forms ---------------------------------------------------------------------------------------
def pack_ints(v: np.ndarray, bits: int, axis: int = 1) -> np.ndarray:
    """compressed-tensors' ``pack_to_int32``: int8 values of ``bits`` bits, plus ``2^(bits-1)``, packed
    densely along ``axis`` (32 values in ``bits`` int32 words, little-endian bit order), as int32."""
    if axis == 0:
        return pack_ints(v.T, bits, 1).T.copy()
    rows, cols = v.shape
    u = (v.astype(np.int32) + (1 << (bits - 1))).astype(np.uint8)
    groups = -(-cols // 32)
    p = np.zeros((rows, groups * 32), np.uint8)
    p[:, :cols] = u
    bitv = np.unpackbits(p[:, :, None], axis=2, bitorder="little")[:, :, :bits]   # [rows, n, bits]
    words = np.packbits(bitv.reshape(rows, groups, 32 * bits), axis=2, bitorder="little")
    out = words.reshape(rows, groups * bits * 4).view("<i4")
    return np.ascontiguousarray(out[:, :math.ceil(cols * bits / 32)])


def unpack_ints(w: np.ndarray, bits: int, count: int, axis: int = 1) -> np.ndarray:
    """The inverse of :func:`pack_ints`: ``count`` int8 values per row (``axis`` 1) or column."""
    if axis == 0:
        return unpack_ints(np.ascontiguousarray(w.T), bits, count, 1).T.copy()
    rows, n = w.shape
    groups = -(-count // 32)
    full = np.zeros((rows, groups * bits), "<i4")
    full[:, :n] = w
    b = np.unpackbits(full.view(np.uint8).reshape(rows, groups, bits * 4), axis=2, bitorder="little")
    vals = b.reshape(rows, groups * 32, bits)
    u = np.packbits(vals, axis=2, bitorder="little")[:, :, 0].astype(np.int32)
    return (u[:, :count] - (1 << (bits - 1))).astype(np.int8)


def pack_fp4(c: np.ndarray) -> np.ndarray:
    """Float4 e2m1 values (float32, signed zeros) as compressed-tensors packs them: the code (index of
    the magnitude, sign in bit 3) of element ``2k`` in the low nibble of byte ``k``, ``2k+1`` in the high."""
    mag = np.searchsorted(FP4_VALUES, np.abs(c)).astype(np.uint8)
    code = mag | (np.signbit(c).astype(np.uint8) << 3)
    rows, cols = c.shape
    code = code.reshape(rows, cols // 2, 2)
    return (code[:, :, 0] | (code[:, :, 1] << 4)).astype(np.uint8)


def unpack_fp4(p: np.ndarray) -> np.ndarray:
    """The float32 values of packed float4 codes [rows, cols / 2] -> [rows, cols]."""
    lo, hi = p & 0x0F, p >> 4
    code = np.stack([lo, hi], axis=2).reshape(p.shape[0], -1)
    v = FP4_VALUES[code & 7]
    return np.where(code & 8, -v, v).astype(np.float32)
