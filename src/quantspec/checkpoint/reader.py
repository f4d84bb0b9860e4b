"""``quantspec.checkpoint.open``: a converted checkpoint, read back.

:class:`QuantizedCheckpoint` reads the manifest and the index, then each stored tensor on demand from
its shard (by the offsets of the shard's header): codes unpacked to their numpy / ml_dtypes type and
the source shape, the scale and zero point in the shape ONNX takes them, and DequantizeLinear of
them (:func:`quantspec.onnx.dequantize_linear`).
"""

from __future__ import annotations

import builtins
import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from .._core.packing import unpack_codes
from ..dtypes import qtype
from ..errors import InvalidArgumentError, TensorFileError
from .layout import QuantspecFormat
from .paths import local_path
from .schemes import KEEP, SCHEMES
from .sources import SAFETENSORS_CODES

__all__ = ["QuantizedCheckpoint", "open"]

_EXTRA = {"U32": np.dtype("<u4"), "U64": np.dtype("<u8")}


def open(path: str | os.PathLike) -> "QuantizedCheckpoint":  # noqa: A001 - the contract's name
    """The converted checkpoint in the directory ``path``."""
    return QuantizedCheckpoint(path)


class QuantizedCheckpoint:
    """A checkpoint written by :func:`quantspec.checkpoint.convert`."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(local_path(path, "path"))
        fmt = QuantspecFormat()
        mpath = self.path / fmt.manifest_name
        if not mpath.is_file():
            raise TensorFileError("path", f"is not a converted checkpoint (no {fmt.manifest_name})", str(self.path))
        try:
            self.manifest: dict = json.loads(mpath.read_text(encoding="utf-8"))
            self.index: dict = json.loads((self.path / fmt.index_name).read_text(encoding="utf-8"))
            self._tensors: dict = self.manifest["tensors"]
            self._where: dict = self.index["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TensorFileError("path", "has a damaged manifest or index", str(self.path), detail=str(e)) from None
        self._headers: dict[str, tuple[int, dict]] = {}

    # -- what it holds ------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """Every source tensor's name, in source order (quantized and kept)."""
        return list(self._tensors)

    def __contains__(self, name: str) -> bool:
        return name in self._tensors

    def __len__(self) -> int:
        return len(self._tensors)

    def _record(self, name: str) -> dict:
        try:
            return self._tensors[name]
        except (KeyError, TypeError):
            raise InvalidArgumentError("name", "must name a tensor of the checkpoint", name) from None

    def scheme(self, name: str) -> str:
        """The tensor's scheme, ``"keep"`` for a tensor stored as it was."""
        return self._record(name)["scheme"]

    def source(self, name: str) -> dict:
        """The source tensor: ``name``, ``file``, ``dtype``, ``shape`` and the ``digest`` of its bytes."""
        src = dict(self._record(name)["source"])
        src["shape"] = tuple(src["shape"])
        return src

    # -- reading stored tensors -----------------------------------------------------------------------
    def _header(self, shard: str) -> tuple[int, dict]:
        hit = self._headers.get(shard)
        if hit is None:
            p = self.path / shard
            try:
                with builtins.open(p, "rb") as f:
                    (n,) = struct.unpack("<Q", f.read(8))
                    header = json.loads(f.read(n))
            except (OSError, ValueError, struct.error) as e:
                raise TensorFileError("path", "has a shard that cannot be read", str(p), detail=str(e)) from None
            hit = self._headers[shard] = (8 + n, header)
        return hit

    def _stored(self, stored: str) -> np.ndarray:
        """A stored tensor's array as safetensors holds it (its dtype code), little-endian."""
        shard = self._where.get(stored)
        if shard is None:
            raise TensorFileError("path", f"has no stored tensor {stored!r} in its index", str(self.path))
        base, header = self._header(shard)
        info = header[stored]
        code = info["dtype"]
        dtype = _EXTRA.get(code) or np.dtype(qtype(SAFETENSORS_CODES[code]).storage)
        a, b = info["data_offsets"]
        with builtins.open(self.path / shard, "rb") as f:
            f.seek(base + a)
            data = f.read(b - a)
        return np.frombuffer(data, dtype.newbyteorder("<")).astype(dtype.newbyteorder("="), copy=True).reshape(
            info["shape"])

    def _typed(self, spec: dict, shape) -> np.ndarray:
        """A stored codes / parameter tensor as values of its quantspec type and ``shape``."""
        t = qtype(spec["type"])
        raw = self._stored(spec["name"])
        n = math.prod(shape)
        if spec.get("packed"):
            u = unpack_codes(raw, t.bits, n)
            if t.is_int and t.signed:
                half = 1 << (t.bits - 1)
                u = ((u.astype(np.int16) ^ half) - half).astype(np.int8)
                return u.astype(t.dtype).reshape(shape)
            return u.view(t.dtype).reshape(shape)
        if raw.dtype != t.dtype:
            raw = raw.view(t.dtype) if raw.dtype.itemsize == t.dtype.itemsize and t.kind == "float" else raw.astype(t.dtype)
        return raw.reshape(shape)

    def codes(self, name: str) -> np.ndarray:
        """The codes, unpacked, as their numpy / ml_dtypes type, in the source shape (a kept tensor:
        its data)."""
        rec = self._record(name)
        if rec["scheme"] == KEEP:
            return self._kept(rec)
        return self._typed(rec["codes"], tuple(rec["source"]["shape"]))

    def _kept(self, rec: dict) -> np.ndarray:
        d = rec["data"]
        raw = self._stored(d["name"])
        try:
            t = qtype(d["type"])
        except Exception:
            return raw
        return raw.view(t.dtype) if raw.dtype != t.dtype and raw.dtype.itemsize == t.dtype.itemsize else raw

    def params(self, name: str) -> tuple[np.ndarray, np.ndarray | None, dict[str, int]]:
        """``(scale, zero point or None, attributes)``: the scale (float32, or float8e8m0 for the MX
        schemes) and zero point in the shape ONNX QuantizeLinear takes them, and its ``axis`` and
        ``block_size`` attributes (empty for per-tensor)."""
        rec = self._record(name)
        if rec["scheme"] == KEEP:
            raise InvalidArgumentError("name", "names a tensor kept as it was (it has no quantization parameters)", name)
        scale = self._typed(rec["scale"], tuple(rec["scale"]["shape"]))
        zp = None if rec["zero_point"] is None else self._typed(rec["zero_point"], tuple(rec["zero_point"]["shape"]))
        return scale, zp, dict(SCHEMES[rec["scheme"]].attributes())

    def dequantize(self, name: str) -> np.ndarray:
        """float32: DequantizeLinear of the stored codes, scale and zero point (a kept float tensor:
        its values as float32; a kept tensor of another type: its data)."""
        rec = self._record(name)
        if rec["scheme"] == KEEP:
            data = self._kept(rec)
            try:
                return data.astype(np.float32) if qtype(data.dtype).kind == "float" else data
            except Exception:
                return data
        from ..onnx import dequantize_linear

        scale, zp, attrs = self.params(name)
        return dequantize_linear(self.codes(name), scale, zp, output_dtype="float", **attrs)

    def __repr__(self) -> str:
        q = sum(1 for r in self._tensors.values() if r["scheme"] != KEEP)
        return f"QuantizedCheckpoint({str(self.path)!r}: {q} quantized, {len(self._tensors) - q} kept)"

    def stored_names(self) -> list[str]:
        """Every tensor name of the safetensors files (codes, ``_scale``, ``_zero_point``, kept data)."""
        return list(self._where)

    def describe(self, name: str) -> dict[str, Any]:
        """The manifest's record of one tensor."""
        return dict(self._record(name))
