"""How one quantized tensor is stored, and reading a range of its rows back as values.

A :class:`Stored` describes a quantized tensor of a checkpoint in either layout — quantspec's
(codes packed flat in ONNX ``raw_data`` order, float32 / float8e8m0 scales) or compressed-tensors'
(int32 words of eight 4-bit codes per row, offsets of 8 and 128, scales in the model's type, 4-bit
zero points packed along the output axis) — by the file, offset and packing of its codes, scale and
zero point.  It is small and picklable: the tasks of ``verify`` carry it to whichever worker reads
the rows.  :meth:`Stored.codes`, :meth:`Stored.scale` and :meth:`Stored.zero_point` give rows
``[r0, r1)`` as values of the tensor's logical types (the scheme's: int4, uint4, int8, uint8,
float8e4m3fn, ...; the scale as float32, bfloat16, float16 or float8e8m0), in the shapes ONNX
QuantizeLinear takes them.

Everything read is checked against the file's size and the declared shapes first (:meth:`Part.check`):
a damaged shard gives a :class:`~quantspec.errors.TensorFileError` naming the tensor and the file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np

from .._semantics.packing import unpack_codes
from ..dtypes import qtype
from ..errors import TensorFileError
from . import sources
from .schemes import onnx_attributes

__all__ = ["Part", "Stored", "ST_DTYPES", "ITEMSIZE"]

#: safetensors dtype code -> numpy dtype of the stored elements (bit patterns for the float8 types)
ST_DTYPES = {"BF16": np.dtype("<u2"), "F16": np.dtype("<f2"), "F32": np.dtype("<f4"), "F64": np.dtype("<f8"),
             "BOOL": np.dtype("?"), "I8": np.dtype("i1"), "U8": np.dtype("u1"), "I16": np.dtype("<i2"),
             "U16": np.dtype("<u2"), "I32": np.dtype("<i4"), "U32": np.dtype("<u4"), "I64": np.dtype("<i8"),
             "U64": np.dtype("<u8"), "F8_E4M3": np.dtype("u1"), "F8_E5M2": np.dtype("u1"), "F8_E8M0": np.dtype("u1")}
ITEMSIZE = {k: v.itemsize for k, v in ST_DTYPES.items()}


@dataclass(frozen=True)
class Part:
    """One stored tensor: ``path``, absolute byte ``offset`` and ``nbytes``, safetensors ``dtype``,
    stored ``shape``, and ``packing``: "none", "onnx" (sub-byte codes flat in ONNX order), "ct-rows"
    (compressed-tensors int32 words, a row at a time) or "ct-cols" (compressed-tensors int32 words
    packed along axis 0, eight rows a word)."""

    name: str
    path: str
    offset: int
    nbytes: int
    dtype: str
    shape: tuple[int, ...]
    packing: str = "none"

    def read(self, start: int, length: int, tensor: str) -> np.ndarray:
        """``length`` bytes of this tensor from byte ``start`` of its data."""
        if start < 0 or start + length > self.nbytes:
            raise TensorFileError("dst", f"tensor {tensor!r} is read beyond its stored bytes ({self.name})", self.path,
                                  detail=f"bytes {start}..{start + length} of {self.nbytes}")
        t = sources.SourceTensor(self.name, self.path, self.path, "uint8", (self.nbytes,), self.offset, self.nbytes, 1,
                                 0)
        try:
            return sources.read_rows(t, start, start + length)
        except TensorFileError as e:          # the checkpoint's file, not a source's
            raise TensorFileError("dst", f"tensor {tensor!r} cannot be read ({self.name})", self.path,
                                  detail=e.rule) from None


@dataclass(frozen=True)
class Stored:
    """A quantized tensor as stored (module docstring).  ``scheme``: the quantspec scheme when the
    checkpoint's manifest names one, else None; ``codes_rule``: the name of its codes rule ("onnx",
    "ort-nbits", "litert", or a registered scheme's: :func:`.schemes.codes_rule`);
    ``granularity``: "tensor", "channel" (axis 0) or "block" (``block`` elements along axis 1)."""

    name: str
    scheme: str | None
    describe: str               # the quantization in words (a scheme name, or compressed-tensors' args)
    layout: str                 # "quantspec" or "compressed-tensors"
    shape: tuple[int, ...]
    codes_type: str             # quantspec type name of the logical codes
    granularity: str
    block: int
    scale_type: str             # "float", "bfloat16", "float16" or "float8e8m0"
    codes_rule: str
    codes_part: Part
    scale_part: Part
    zp_part: Part | None = None

    @property
    def rows(self) -> int:
        return int(self.shape[0]) if self.shape else 1

    @property
    def cols(self) -> int:
        return math.prod(self.shape[1:]) if len(self.shape) > 1 else 1

    @property
    def groups(self) -> int:
        """Scales per row: 1 (per channel), ``cols / block`` rounded up (blocks), 0 (per tensor)."""
        return 0 if self.granularity == "tensor" else 1 if self.granularity == "channel" else -(-self.cols // self.block)

    def attributes(self) -> dict[str, int]:
        return onnx_attributes(self.granularity, self.block)

    def row_step(self) -> int:
        """The fewest rows after which every stored part starts on a byte (or word) boundary."""
        step = 1
        bits = qtype(self.codes_type).bits
        if self.codes_part.packing == "onnx":
            r = 1
            while (r * self.cols * bits) % 8:
                r += 1
            step = r
        if self.zp_part is not None:
            if self.zp_part.packing == "ct-cols":
                step = step * 8 // math.gcd(step, 8)
            elif self.zp_part.packing == "onnx" and self.groups:
                r = 1
                while (r * self.groups * bits) % 8:
                    r += 1
                step = step * r // math.gcd(step, r)
        return step

    def check(self) -> None:
        """Every part's size agrees with the tensor's shape and type (a damaged checkpoint is an
        error here, not a wrong answer later)."""
        bits = qtype(self.codes_type).bits
        n = self.rows * self.cols
        c = self.codes_part
        want = {"onnx": (n * bits + 7) // 8, "ct-rows": self.rows * -(-self.cols * bits // 32) * 4}.get(
            c.packing, n * ITEMSIZE.get(c.dtype, 0))
        problems = []
        if c.nbytes != want:
            problems.append(f"codes {c.name}: {c.nbytes} bytes, {want} expected for shape {self.shape}")
        scales = max(1, self.rows * self.groups)
        if self.scale_part.nbytes != scales * ITEMSIZE.get(self.scale_part.dtype, 0):
            problems.append(f"scale {self.scale_part.name}: {self.scale_part.nbytes} bytes for {scales} scales")
        z = self.zp_part
        if z is not None:
            zbits = qtype(self.codes_type).bits
            zwant = {"onnx": (scales * zbits + 7) // 8, "ct-cols": -(-self.rows // 8) * max(1, self.groups) * 4}.get(
                z.packing, scales * ITEMSIZE.get(z.dtype, 0))
            if z.nbytes != zwant:
                problems.append(f"zero point {z.name}: {z.nbytes} bytes, {zwant} expected")
        if problems:
            raise TensorFileError("dst", f"tensor {self.name!r} is stored with sizes that do not fit its shape",
                                  self.codes_part.path, detail="; ".join(problems))

    # -- values of rows [r0, r1) ------------------------------------------------------------------
    def codes(self, r0: int, r1: int) -> np.ndarray:
        """The codes of rows ``[r0, r1)``, shape ``(r1 - r0, *shape[1:])``, as the logical type."""
        t = qtype(self.codes_type)
        c = self.codes_part
        n = (r1 - r0) * self.cols
        shape = (r1 - r0, *self.shape[1:]) if self.shape else ()
        if c.packing == "onnx":
            start = r0 * self.cols * t.bits
            if start % 8:
                raise AssertionError("rows read from a packed tensor start on a byte boundary")
            raw = c.read(start // 8, (n * t.bits + 7) // 8 if r1 < self.rows else c.nbytes - start // 8, self.name)
            u = unpack_codes(raw, t.bits, n)
            return _typed(u, t).reshape(shape)
        if c.packing == "ct-rows":                      # int32 words, eight 4-bit codes each, per row
            per = -(-self.cols * t.bits // 32) * 4
            raw = c.read(r0 * per, (r1 - r0) * per, self.name).reshape(r1 - r0, per)
            u = np.empty((r1 - r0, per * 2), np.uint8)
            u[:, 0::2], u[:, 1::2] = raw & 15, raw >> 4
            u = u[:, :self.cols]
            v = u.astype(np.int16) - (8 if t.signed else 0)     # compressed-tensors stores code + 8
            return v.astype(t.dtype).reshape(shape)
        item = ITEMSIZE[c.dtype]
        raw = c.read(r0 * self.cols * item, n * item, self.name)
        a = raw.view(ST_DTYPES[c.dtype])
        if self.layout == "compressed-tensors" and t.name == "uint8":
            a = (a.view(np.uint8) ^ np.uint8(0x80))             # stored as code - 128
        return _typed(a, t).reshape(shape)

    def scale(self, r0: int, r1: int) -> np.ndarray:
        """The scales of rows ``[r0, r1)``: ``()`` per tensor, ``(r1 - r0,)`` per channel, ``(r1 - r0,
        groups)`` for blocks; typed as stored (float32, bfloat16, float16, float8e8m0)."""
        return self._params(self.scale_part, self.scale_type, r0, r1)

    def zero_point(self, r0: int, r1: int) -> np.ndarray | None:
        if self.zp_part is None:
            return None
        return self._params(self.zp_part, self.codes_type, r0, r1)

    def _params(self, p: Part, type_: str, r0: int, r1: int) -> np.ndarray:
        t = qtype(type_)
        g = self.groups
        if g == 0:
            n, first = 1, 0
        else:
            n, first = (r1 - r0) * g, r0 * g
        shape = () if g == 0 else (r1 - r0,) if self.granularity == "channel" else (r1 - r0, g)
        if p.packing == "onnx":
            start = first * t.bits
            if start % 8:
                raise AssertionError("rows read from packed parameters start on a byte boundary")
            raw = p.read(start // 8, min((n * t.bits + 7) // 8, p.nbytes - start // 8), self.name)
            return _typed(unpack_codes(raw, t.bits, n), t).reshape(shape)
        if p.packing == "ct-cols":                      # eight rows a word, per group
            w0, w1 = r0 // 8, -(-r1 // 8)
            gg = max(1, g)
            raw = p.read(w0 * gg * 4, (w1 - w0) * gg * 4, self.name).view("<u4").reshape(w1 - w0, gg)
            rows = np.empty(((w1 - w0) * 8, gg), np.uint32)
            for k in range(8):
                rows[k::8] = (raw >> np.uint32(4 * k)) & np.uint32(15)
            v = rows[r0 - w0 * 8:r1 - w0 * 8].astype(np.int16) - (8 if t.signed else 0)
            return v.astype(t.dtype).reshape(shape)
        item = ITEMSIZE[p.dtype]
        raw = p.read(first * item, n * item, self.name).view(ST_DTYPES[p.dtype])
        if p is self.zp_part and self.layout == "compressed-tensors" and t.name == "uint8":
            raw = raw.view(np.uint8) ^ np.uint8(0x80)
        return _typed(raw, t).reshape(shape)


def _typed(a: np.ndarray, t) -> np.ndarray:
    """Stored elements (or unpacked sub-byte codes, one a byte) as values of the quantspec type ``t``."""
    a = np.ascontiguousarray(a)
    if t.is_packed and t.is_int:
        if t.signed:
            half = 1 << (t.bits - 1)
            return ((a.astype(np.int16) & ((1 << t.bits) - 1) ^ half) - half).astype(t.dtype)
        return a.astype(t.dtype)
    if a.dtype == t.dtype:
        return a
    if a.dtype.itemsize == t.dtype.itemsize and (t.kind == "float" or a.dtype.kind == t.dtype.kind or
                                                 t.dtype.kind in "iu"):
        return a.view(t.dtype)
    return a.astype(t.dtype)


def file_size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError as e:
        raise TensorFileError("dst", "could not be read", path, detail=e.strerror or str(e)) from None
