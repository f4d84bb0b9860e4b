"""``quantspec.checkpoint.open``: a quantized checkpoint, read back.

:class:`QuantizedCheckpoint` reads a directory written by :func:`quantspec.checkpoint.convert` in
either layout (quantspec's, or compressed-tensors' — its manifest ``quantspec.json`` says which), or
a compressed-tensors checkpoint written by another tool (``config.json`` with a compressed-tensors
``quantization_config``; no manifest: the quantization of each module comes from the config).  Each
stored tensor is read on demand from its shard, by the offsets of the shard's header: codes unpacked
to their numpy / ml_dtypes type and the source shape, the scale and zero point in the shape ONNX
takes them, and DequantizeLinear of them (:func:`quantspec.onnx.dequantize_linear`).  Where each
quantized tensor lies is a :class:`~quantspec.checkpoint.stored.Stored` (:meth:`QuantizedCheckpoint.stored`).

Damaged input — a manifest or index that is not what it should be, a shard missing or truncated, a
header whose offsets do not fit, sizes that do not fit the shapes — is a
:class:`~quantspec.errors.TensorFileError` naming the file, never another exception.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ..dtypes import qtype
from ..errors import InvalidArgumentError, TensorFileError
from . import sources
from .layout import QuantspecFormat
from .paths import local_path
from .schemes import KEEP, SCHEMES
from .stored import Part, Stored

__all__ = ["QuantizedCheckpoint", "open"]

_MANIFEST = QuantspecFormat.manifest_name
_INDEX = QuantspecFormat.index_name
_CONFIG = "config.json"
_CT_PARAMS = ("weight_scale", "weight_zero_point", "weight_shape", "weight_g_idx", "weight_global_scale",
              "input_scale", "input_zero_point", "input_global_scale", "output_scale", "output_zero_point")


def open(path: str | os.PathLike) -> "QuantizedCheckpoint":  # noqa: A001 - the contract's name
    """The quantized checkpoint in the directory ``path`` (quantspec or compressed-tensors layout)."""
    return QuantizedCheckpoint(path)


def _json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise TensorFileError("path", f"has a {what} that cannot be read", str(path), detail=str(e)) from None


class QuantizedCheckpoint:
    """A quantized checkpoint (module docstring)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(local_path(path, "path"))
        if not self.path.is_dir():
            raise TensorFileError("path", "must be a directory holding a quantized checkpoint", str(self.path))
        mpath, cpath = self.path / _MANIFEST, self.path / _CONFIG
        self.manifest: dict = {}
        self.config: dict = {}
        if mpath.is_file():
            self.manifest = _json(mpath, "manifest")
            ok = (isinstance(self.manifest, dict) and isinstance(self.manifest.get("tensors"), dict)
                  and all(isinstance(k, str) and isinstance(v, dict) for k, v in self.manifest["tensors"].items()))
            if not ok:
                raise TensorFileError("path", "has a damaged manifest (no map of tensors)", str(mpath))
            self.layout = self.manifest.get("format", "quantspec")
            if self.layout not in ("quantspec", "compressed-tensors"):
                raise TensorFileError("path", "has a manifest of an unknown layout", str(mpath), detail=repr(self.layout))
        elif cpath.is_file():
            self.config = _json(cpath, "config.json")
            q = self.config.get("quantization_config") if isinstance(self.config, dict) else None
            if not (isinstance(q, dict) and q.get("quant_method") == "compressed-tensors"):
                raise TensorFileError("path", "is not a quantized checkpoint (no quantspec.json, and its config.json "
                                      "has no compressed-tensors quantization_config)", str(self.path))
            self.layout = "compressed-tensors"
        else:
            raise TensorFileError("path", f"is not a converted checkpoint (no {_MANIFEST}, nor a config.json with a "
                                  "compressed-tensors quantization_config)", str(self.path))
        self.foreign = not self.manifest          # written by another tool: no quantspec manifest
        self._headers: dict[str, dict[str, sources.SourceTensor]] = {}
        self._stored: dict[str, Stored] = {}
        self._where = self._weight_map()
        if self.foreign:
            self._foreign = _ForeignLayout(self)
        self._tensors: dict = self.manifest.get("tensors", {}) if not self.foreign else self._foreign.records

    # -- files ------------------------------------------------------------------------------------
    def _weight_map(self) -> dict[str, str]:
        ipath = self.path / _INDEX
        if ipath.is_file():
            index = _json(ipath, "index")
            wm = index.get("weight_map") if isinstance(index, dict) else None
            if not (isinstance(wm, dict) and all(isinstance(k, str) and isinstance(v, str) and Path(v).name == v
                                                 for k, v in wm.items())):
                raise TensorFileError("path", "has a damaged index (no weight_map of tensor -> shard file)", str(ipath))
            return wm
        files = sorted(self.path.glob("*.safetensors"))
        if not files:
            raise TensorFileError("path", "holds no .safetensors file and no index", str(self.path))
        where: dict[str, str] = {}
        for f in files:
            for name in self._header(f.name):
                where[name] = f.name
        return where

    def _header(self, shard: str) -> dict[str, sources.SourceTensor]:
        hit = self._headers.get(shard)
        if hit is None:
            p = self.path / shard
            if not p.is_file():
                raise TensorFileError("path", "has an index naming a shard that does not exist", str(p))
            hit = self._headers[shard] = {t.name: t for t in sources._safetensors_header(p, self.path, 0, "path")}
        return hit

    def _tensor(self, stored: str) -> sources.SourceTensor:
        shard = self._where.get(stored)
        if shard is None:
            raise TensorFileError("path", f"has no stored tensor {stored!r} in its index", str(self.path))
        t = self._header(shard).get(stored)
        if t is None:
            raise TensorFileError("path", f"has an index naming tensor {stored!r}, which its shard does not hold",
                                  str(self.path / shard))
        return t

    def _part(self, spec: Any, packing: str = "none") -> Part:
        name = spec.get("name") if isinstance(spec, dict) else spec
        if not isinstance(name, str):
            raise TensorFileError("path", "has a damaged manifest (a stored tensor without a name)", str(self.path))
        t = self._tensor(name)
        code = _stored_code(t)
        return Part(name, t.path, t.offset, t.nbytes, code, t.shape, packing)

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
            rec = self._tensors[name]
        except (KeyError, TypeError):
            raise InvalidArgumentError("name", "must name a tensor of the checkpoint", name) from None
        if not isinstance(rec.get("scheme"), str) or (rec["scheme"] != KEEP and not self.foreign
                                                      and rec["scheme"] not in SCHEMES):
            raise TensorFileError("path", f"has a damaged manifest record for tensor {name!r} (scheme)", str(self.path))
        return rec

    def scheme(self, name: str) -> str:
        """The tensor's scheme, ``"keep"`` for a tensor stored as it was (a compressed-tensors
        checkpoint of another tool: its quantization in words, ``compressed-tensors: ...``)."""
        return self._record(name)["scheme"]

    def source(self, name: str) -> dict:
        """The source tensor: ``name``, ``file``, ``dtype``, ``shape`` and the ``digest`` of its bytes
        (None where the checkpoint does not record them)."""
        rec = self._record(name)
        src = rec.get("source")
        if not isinstance(src, dict):
            raise TensorFileError("path", f"has a damaged manifest record for tensor {name!r} (source)", str(self.path))
        src = dict(src)
        try:
            src["shape"] = tuple(int(d) for d in src["shape"])
        except (KeyError, TypeError, ValueError):
            raise TensorFileError("path", f"has a damaged manifest record for tensor {name!r} (shape)",
                                  str(self.path)) from None
        return src

    def stored(self, name: str) -> Stored:
        """Where and how the quantized tensor ``name`` is stored."""
        hit = self._stored.get(name)
        if hit is None:
            rec = self._record(name)
            if rec["scheme"] == KEEP:
                raise InvalidArgumentError("name", "names a tensor kept as it was (it has no quantization parameters)",
                                           name)
            hit = self._foreign.stored(name) if self.foreign else self._from_manifest(name, rec)
            hit.check()
            self._stored[name] = hit
        return hit

    def _from_manifest(self, name: str, rec: dict) -> Stored:
        s = SCHEMES[rec["scheme"]]
        shape = self.source(name)["shape"]
        try:
            codes, scale, zp = rec["codes"], rec["scale"], rec.get("zero_point")
            if self.layout == "compressed-tensors":
                packed = qtype(s.codes).bits == 4
                cpart = self._part(codes, "ct-rows" if packed else "none")
                zpart = None if zp is None else self._part(zp, "ct-cols" if packed else "none")
                scale_type = rec.get("layout", {}).get("scale_type") or _CODES_TYPE.get(self._part(scale).dtype)
            else:
                cpart = self._part(codes, "onnx" if codes.get("packed") else "none")
                zpart = None if zp is None else self._part(zp, "onnx" if zp.get("packed") else "none")
                scale_type = s.scale_type
            spart = self._part(scale)
        except (KeyError, TypeError, AttributeError):
            raise TensorFileError("path", f"has a damaged manifest record for tensor {name!r}", str(self.path)) from None
        if scale_type not in ("float", "bfloat16", "float16", "float8e8m0"):
            raise TensorFileError("path", f"has a damaged manifest record for tensor {name!r} (scale type)",
                                  str(self.path))
        return Stored(name, s.name, s.name, self.layout, tuple(shape), s.codes, s.granularity, s.block, scale_type,
                      s.codes_rule.name, cpart, spart, zpart)

    # -- compressed-tensors' own arithmetic (presets beyond QuantizeLinear's reach) ----------------------
    def _arith(self, name: str):
        """(preset, module) of a tensor stored by compressed-tensors' arithmetic in a form this reader's
        QuantizeLinear view (:meth:`stored`) does not express — quantspec's compressed-tensors presets,
        and other tools' NVFP4, MXFP4, 2-D block, tensor-group or densely packed (not 4-bit) weights —
        else None."""
        rec = self._record(name)
        if rec["scheme"] == KEEP or self.layout != "compressed-tensors":
            return None
        m = name[:-len(".weight")]
        if not self.foreign:
            s = SCHEMES.get(rec["scheme"])
            return (s.preset, m) if s is not None and s.preset is not None else None
        from .presets import group_preset

        g = self._foreign.modules[m]
        w, fmt = self._foreign._args(m)
        bits, type_, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
        plain = ((type_ == "int" and bits in (4, 8) and strategy in ("tensor", "channel", "group")
                  and not (m + ".weight_packed" in self._where and bits != 4))
                 or (type_ == "float" and bits == 8 and strategy in ("tensor", "channel")))
        if plain:
            return None
        return group_preset(g, self._foreign.default_format, str(self.path / _CONFIG)), m

    def _arith_parts(self, name: str):
        """(preset, codes as unpacked values, scale values (float32; MX: the exponent's value), zero point
        (int8) or None, global scale or None, weight type) of :meth:`_arith`'s tensors."""
        import ml_dtypes

        from . import ctarith as ar
        from .presets import codes_of

        p, m = self._arith(name)

        def get(suffix):
            n = f"{m}.{suffix}"
            return self.raw(n) if n in self._where else None

        a = p.weights
        scale = get("weight_scale")
        packed = get("weight_packed")
        codes = packed if packed is not None else get("weight")
        st = self._tensor(f"{m}.weight_scale")
        wt = {"BF16": "bfloat16", "F16": "float16", "F32": "float"}.get(_stored_code(st), "bfloat16")
        if p.format == "pack-quantized":
            shape = tuple(int(v) for v in get("weight_shape").reshape(-1))
        elif p.format in ("nvfp4-pack-quantized", "mxfp4-pack-quantized"):
            shape = (codes.shape[0], codes.shape[1] * 2)
        else:
            shape = tuple(codes.shape)
        if codes.dtype == np.uint16 or _stored_code(self._tensor(f"{m}.weight" if packed is None else
                                                                 f"{m}.weight_packed")) == "F8_E4M3":
            codes = codes.view(ml_dtypes.float8_e4m3fn)
        c = codes_of(p, codes, *shape)
        zp = get("weight_zero_point")
        if zp is not None and p.format == "pack-quantized":
            zp = ar.unpack_ints(zp.astype(np.int32), a.bits, a.param_shape(*shape)[0], axis=0)
        g = get("weight_global_scale")
        g = np.float32(g.reshape(-1)[0]) if g is not None else None
        if a.mx:
            sv = ar.mx_value(scale, "bfloat16")
        elif scale.dtype == np.uint8 and _stored_code(st) == "F8_E4M3":
            sv = scale.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
        else:
            sv = _float_bits(scale, _stored_code(st))
        if p.format in ("nvfp4-pack-quantized", "mxfp4-pack-quantized"):
            wt = "bfloat16"                          # compressed-tensors unpacks float4 codes to bfloat16
        return p, c, sv, zp, g, wt

    def codes(self, name: str) -> np.ndarray:
        """The codes, unpacked, as their numpy / ml_dtypes type, in the source shape (a kept tensor:
        its data)."""
        rec = self._record(name)
        if rec["scheme"] == KEEP:
            return self._kept(name, rec)
        if self._arith(name) is not None:
            import ml_dtypes

            p, c, *_ = self._arith_parts(name)
            if p.weights.type == "int":
                return c.astype(np.int8)
            return c.astype(ml_dtypes.float8_e4m3fn if p.weights.bits == 8 else ml_dtypes.float4_e2m1fn)
        st = self.stored(name)
        return st.codes(0, st.rows).reshape(st.shape)

    def _kept(self, name: str, rec: dict) -> np.ndarray:
        d = rec.get("data", {"name": name})
        stored = d.get("name") if isinstance(d, dict) else None
        if not isinstance(stored, str):
            raise TensorFileError("path", f"has a damaged manifest record for tensor {name!r} (data)", str(self.path))
        t = self._tensor(stored)
        raw = sources.read_rows(t, 0, t.rows)
        shard = self._where[stored]
        typed = self._metadata(shard).get(f"quantspec.dtype.{stored}")
        try:
            q = qtype(typed if typed else t.dtype)
            a = raw.view(q.dtype) if q.dtype.itemsize == t.itemsize else raw.view(np.dtype(t.dtype))
        except Exception:
            a = raw.view(np.dtype(t.dtype))
        return a.reshape(t.shape).copy()

    def _metadata(self, shard: str) -> dict:
        from .writer import read_header

        header = read_header(self.path / shard) or {}
        meta = header.get("__metadata__", {})
        return meta if isinstance(meta, dict) else {}

    def params(self, name: str) -> tuple[np.ndarray, np.ndarray | None, dict[str, int]]:
        """``(scale, zero point or None, attributes)``: the scale (as stored: float32, float8e8m0 for
        the MX schemes, the model's type in the compressed-tensors layout) and zero point in the shape
        ONNX QuantizeLinear takes them, and its ``axis`` and ``block_size`` attributes (empty for
        per-tensor).  A compressed-tensors preset's weight: the scale as float32 values — NVFP4's group
        scale divided by its global scale (what its decompression multiplies by), MX exponents as the
        powers of two they stand for — and for 2-D blocks (FP8_BLOCK) ``{"block_shape": (rows, cols)}``,
        which ONNX does not take."""
        if self._record(name)["scheme"] != KEEP and self._arith(name) is not None:
            p, c, sv, zp, g, wt = self._arith_parts(name)
            a = p.weights
            if g is not None:
                sv = (sv / g).astype(np.float32)
            if a.strategy == "block":
                return sv, zp, {"block_shape": tuple(a.block)}
            if a.strategy == "channel":
                return sv.reshape(-1), zp, {"axis": 0}
            return sv, zp, {"axis": 1, "block_size": a.group}
        st = self.stored(name)
        return st.scale(0, st.rows), st.zero_point(0, st.rows), st.attributes()

    def dequantize(self, name: str) -> np.ndarray:
        """float32: DequantizeLinear of the stored codes, scale and zero point, rounded once to the
        scale's type (float32; float8e8m0 scales give float32; a bfloat16 or float16 scale rounds to
        that type, as compressed-tensors' decompression does) and returned as float32.  A kept float
        tensor: its values as float32; a kept tensor of another type: its data."""
        rec = self._record(name)
        if rec["scheme"] == KEEP:
            data = self._kept(name, rec)
            try:
                return data.astype(np.float32) if qtype(data.dtype).kind == "float" else data
            except Exception:
                return data
        if self._arith(name) is not None:         # compressed-tensors' decompression
            from . import ctarith as ar

            p, c, sv, zp, g, wt = self._arith_parts(name)
            return ar.dequantize(c, sv, zp, p.weights, wt, g)
        from ..onnx import dequantize_linear

        st = self.stored(name)
        scale, zp, attrs = self.params(name)
        out = "float" if st.scale_type in ("float", "float8e8m0") else st.scale_type
        return dequantize_linear(st.codes(0, st.rows), scale, zp, output_dtype=out, **attrs).astype(
            np.float32).reshape(st.shape)

    def __repr__(self) -> str:
        q = sum(1 for r in self._tensors.values() if r.get("scheme") != KEEP)
        return f"QuantizedCheckpoint({str(self.path)!r}: {self.layout} layout, {q} quantized, {len(self._tensors) - q} kept)"

    def raw(self, stored: str) -> np.ndarray:
        """A stored tensor (``stored_names()``) as safetensors holds it: its dtype code's numpy type
        (bit patterns for bfloat16 and the float8 types), its stored shape."""
        from .stored import ST_DTYPES

        t = self._tensor(stored)
        data = sources.read_rows(t, 0, t.rows)
        return data.view(ST_DTYPES[_stored_code(t)]).astype(ST_DTYPES[_stored_code(t)].newbyteorder("="),
                                                           copy=True).reshape(t.shape)

    def stored_names(self) -> list[str]:
        """Every tensor name of the safetensors files (codes, scales, zero points, kept data)."""
        return list(self._where)

    def describe(self, name: str) -> dict[str, Any]:
        """The manifest's record of one tensor."""
        return dict(self._record(name))


_CODES_TYPE = {"BF16": "bfloat16", "F16": "float16", "F32": "float"}


def _float_bits(a: np.ndarray, code: str) -> np.ndarray:
    """float32 values of a stored float tensor read by :meth:`QuantizedCheckpoint.raw` (bfloat16 as its
    bit patterns)."""
    import ml_dtypes

    if code == "BF16":
        return a.view(ml_dtypes.bfloat16).astype(np.float32) if a.dtype != ml_dtypes.bfloat16 else a.astype(np.float32)
    return a.astype(np.float32)


def _stored_code(t: sources.SourceTensor) -> str:
    from .sources import SAFETENSORS_CODES

    for code, name in SAFETENSORS_CODES.items():
        if name == t.dtype:
            return code
    return {"<u4": "U32", "<u8": "U64"}.get(t.dtype, "U8")


# -- compressed-tensors checkpoints written by other tools -------------------------------------------
def _named(target: str, module: str) -> bool:
    """Whether a config group's target (or an ``ignore`` entry) names ``module``: its exact name, or a
    ``re:`` pattern matching it from its start."""
    if target.startswith("re:"):
        try:
            return re.match(target[3:], module) is not None
        except re.error:
            return False
    return target == module


def config_group_of(module: str, groups: list, ignore: list[str]):
    """The value of the ``(targets, value)`` pair of ``groups`` whose targets name ``module`` (by name or
    ``re:`` pattern), as compressed-tensors matches them; else the one group targeting a class (such
    as ``Linear``) when ``ignore`` does not name the module; else None."""
    for targets, value in groups:
        if any(isinstance(t, str) and _named(t, module) for t in targets):
            return value
    classes = [value for targets, value in groups if any(isinstance(t, str) and not t.startswith("re:")
                                                         and "." not in t and t[:1].isupper() for t in targets)]
    if len(classes) == 1 and not any(_named(i, module) for i in ignore):
        return classes[0]
    return None


class _ForeignLayout:
    """The quantized modules of a compressed-tensors checkpoint, from its config.json: a module whose
    ``weight_scale`` is stored is quantized by the config group whose targets name it (an exact name
    or a ``re:`` pattern; a group targeting a class, such as ``Linear``, takes every module no other
    group names and the ``ignore`` list leaves out)."""

    _FORMATS = ("pack-quantized", "int-quantized", "float-quantized", "naive-quantized")

    def __init__(self, ck: QuantizedCheckpoint):
        self.ck = ck
        q = ck.config["quantization_config"]
        groups = q.get("config_groups")
        if not isinstance(groups, dict) or not groups:
            raise TensorFileError("path", "has a compressed-tensors quantization_config without config_groups",
                                  str(ck.path / _CONFIG))
        self.groups = []
        for gname, g in groups.items():
            if not isinstance(g, dict) or not isinstance(g.get("weights"), dict) or not isinstance(g.get("targets"), list):
                raise TensorFileError("path", f"has a config group {gname!r} without weights and targets",
                                      str(ck.path / _CONFIG))
            self.groups.append((gname, g))
        self.ignore = [x for x in q.get("ignore", []) or [] if isinstance(x, str)]
        self.default_format = q.get("format")
        names = list(ck._where)
        stored = set(names)
        modules = []
        for n in names:
            m, _, p = n.rpartition(".")
            if p == "weight_scale" and (m + ".weight" in stored or m + ".weight_packed" in stored):
                modules.append(m)
        self.modules = {m: self._group(m) for m in modules}
        skip = {f"{m}.{p}" for m in self.modules for p in _CT_PARAMS + ("weight", "weight_packed")}
        self.records: dict[str, dict] = {}
        for n in names:
            m, _, p = n.rpartition(".")
            if p in ("weight", "weight_packed") and m in self.modules:
                name = m + ".weight"
                self.records[name] = {"scheme": self._describe(m), "source": {"name": name, "file": ck._where[n],
                                                                             "dtype": None, "shape": [],
                                                                             "digest": None}}
            elif n not in skip:
                self.records[n] = {"scheme": KEEP, "data": {"name": n},
                                   "source": {"name": n, "file": ck._where[n], "dtype": None, "shape": [], "digest": None}}
        for name, rec in self.records.items():
            stored_name = name if rec["scheme"] == KEEP or name in stored else name[:-len(".weight")] + ".weight"
            if rec["scheme"] == KEEP:
                t = ck._tensor(stored_name)
                rec["source"]["shape"], rec["source"]["dtype"] = list(t.shape), t.dtype

    def _group(self, module: str) -> dict:
        g = config_group_of(module, [(g["targets"], g) for _, g in self.groups], self.ignore)
        if g is None:
            raise TensorFileError("path", f"stores quantization parameters for module {module!r}, which no config "
                                  "group names (by name or re: pattern)", str(self.ck.path / _CONFIG))
        return g

    def _args(self, module: str) -> tuple[dict, str]:
        g = self.modules[module]
        return g["weights"], g.get("format") or self.default_format or ""

    def _describe(self, module: str) -> str:
        w, fmt = self._args(module)
        how = {"group": f"group {w.get('group_size')}", "channel": "channel", "tensor": "tensor"}.get(
            w.get("strategy"), str(w.get("strategy")))
        return (f"compressed-tensors: {fmt} {w.get('type')}{w.get('num_bits')} {how} "
                f"{'symmetric' if w.get('symmetric', True) else 'asymmetric'}")

    def stored(self, name: str) -> Stored:
        ck = self.ck
        m = name[:-len(".weight")]
        w, fmt = self._args(m)
        bits, type_, strategy = w.get("num_bits"), w.get("type"), w.get("strategy")
        sym = w.get("symmetric", True)
        where = str(ck.path / _CONFIG)
        if type_ == "int" and bits in (4, 8) and strategy in ("tensor", "channel", "group"):
            codes_type = "int4" if bits == 4 else "int8"
        elif type_ == "float" and bits == 8 and strategy in ("tensor", "channel"):
            codes_type = "float8e4m3fn"
        else:
            raise TensorFileError("path", f"quantizes module {m!r} in a way quantspec does not read (num_bits {bits}, "
                                  f"type {type_}, strategy {strategy})", where)
        packed = m + ".weight_packed" in ck._where
        if packed and (fmt != "pack-quantized" or bits != 4):
            raise TensorFileError("path", f"packs module {m!r} in a way quantspec does not read ({fmt}, {bits} bits)",
                                  where)
        cpart = ck._part(m + (".weight_packed" if packed else ".weight"), "ct-rows" if packed else "none")
        if packed:
            shape_t = ck._tensor(m + ".weight_shape")
            raw = sources.read_rows(shape_t, 0, shape_t.rows).view(np.dtype(shape_t.dtype).newbyteorder("<"))
            shape = tuple(int(v) for v in raw.reshape(-1))
            if len(shape) != 2 or min(shape) < 0:
                raise TensorFileError("path", f"has a weight_shape for module {m!r} that is not a 2-D shape", where)
        else:
            shape = cpart.shape
        spart = ck._part(m + ".weight_scale")
        scale_type = _CODES_TYPE.get(spart.dtype)
        if scale_type is None:
            raise TensorFileError("path", f"stores the scale of module {m!r} as {spart.dtype} (quantspec reads BF16, "
                                  "F16 and F32 scales)", where)
        zpart = None
        if not sym:
            zpart = ck._part(m + ".weight_zero_point", "ct-cols" if packed else "none")
        block = int(w.get("group_size") or 0) if strategy == "group" else 0
        if strategy == "group" and (block <= 0 or len(shape) != 2):
            raise TensorFileError("path", f"has a group strategy without a group size for module {m!r}", where)
        gran = "block" if strategy == "group" else strategy
        return Stored(name, None, self._describe(m), "compressed-tensors", shape, codes_type, gran, block, scale_type,
                      "onnx", cpart, spart, zpart)
