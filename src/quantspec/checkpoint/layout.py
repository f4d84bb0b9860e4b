"""The whole output, planned from shapes and schemes before any data moves.

:func:`plan` turns the source's tensors and the recipe into a :class:`Plan`: for each source tensor an
:class:`Entry` (its scheme, the output tensors it becomes, each with its safetensors dtype, shape and
absolute byte offset in its shard), the shards (which entries each holds, its header bytes, its
size) and the slabs of rows each tensor is processed in.  Every byte of every output file has a
known place before the first slab is read, so any slab can be computed, by any worker, and written
at its final offset (:mod:`.encode`, :mod:`.backend`).

The names, dtypes and headers of the files are the output format's (:class:`QuantspecFormat`, the
``"quantspec"`` layout); the planning of offsets, shards and slabs is not.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from .._semantics.packing import packed_size
from ..dtypes import qtype
from ..errors import InvalidArgumentError, TensorFileError
from .report import format_stats
from .schemes import KEEP, SCHEMES, Recipe, Scheme
from .sources import Source, SourceTensor

__all__ = ["OutTensor", "Entry", "Shard", "Plan", "plan", "parse_size", "QuantspecFormat", "SLAB_BYTES",
           "DEFAULT_MAX_SHARD_SIZE", "DIGEST_PLACEHOLDER", "FORMAT_VERSION", "CARRIED"]

#: source bytes per slab (about; a multiple of the rows that keep packed outputs byte-aligned)
SLAB_BYTES = 16 << 20
#: the default largest shard (data bytes), as ``save_pretrained`` writes them
DEFAULT_MAX_SHARD_SIZE = 5 * 10 ** 9
#: the version of the file layout and of the rules the converter follows (part of every plan's fingerprint).
#: 3: bfloat16 and float8 tensors stored as BF16, F8_E4M3, F8_E5M2 (kept float8e8m0: F8_E8M0); version 2 stored
#: them as U16 / U8 bit patterns recorded as ``quantspec.dtype.NAME`` (still read)
FORMAT_VERSION = 3
DIGEST_PLACEHOLDER = "xxh64:" + "0" * 16
STATS_PLACEHOLDER = format_stats((0.0, 0.0, 0.0))

# a quantspec type stored in safetensors as (dtype code, typed view recorded in metadata): the
# safetensors dtype of the type where safetensors, torch and transformers all read it; float8e8m0
# (the MX scales) as U8 bit patterns, since ``safetensors.torch.load``, older safetensors releases and
# many other readers do not know F8_E8M0 (and one tensor they cannot read makes the whole shard
# unreadable to them)
_STORE = {
    "float": ("F32", False), "float16": ("F16", False), "double": ("F64", False), "bool": ("BOOL", False),
    "int8": ("I8", False), "uint8": ("U8", False), "int16": ("I16", False), "uint16": ("U16", False),
    "int32": ("I32", False), "int64": ("I64", False),
    "bfloat16": ("BF16", False), "float8e4m3fn": ("F8_E4M3", False), "float8e5m2": ("F8_E5M2", False),
    "float8e8m0": ("U8", True),
}
#: kept tensors keep their source's safetensors dtype where it has one that ``_STORE`` does not use
_KEPT = {"float8e8m0": "F8_E8M0"}
_EXTRA_CODES = {"<u4": "U32", "<u8": "U64"}
#: the files beside a source's shards that the layouts copy into the output (when the source has them)
CARRIED = ("config.json", "generation_config.json")


@dataclass
class OutTensor:
    """One tensor of the output: ``name``, what it holds (``role``: codes, scale, zero_point, data),
    the quantspec type of its values, how safetensors stores it, and where."""

    name: str
    role: str
    type: str                  # quantspec type name of the values
    dtype: str                 # safetensors dtype code
    shape: tuple[int, ...]     # the stored shape (a packed type: its bytes, 1-D)
    nbytes: int
    packed: bool = False
    typed_view: bool = False   # stored as the bit patterns of ``type`` (recorded in the metadata)
    offset: int = 0            # absolute, in its shard file
    bits: int = 8


@dataclass
class Entry:
    """One source tensor's conversion."""

    index: int
    source: SourceTensor
    scheme: str                # a scheme name or "keep"
    reason: str
    outputs: list[OutTensor]
    slab_rows: int
    shard: int = -1
    format: Any = None         # the output format, when it places bytes itself (``format.place``)

    @property
    def rule(self) -> Scheme | None:
        return None if self.scheme == KEEP else SCHEMES[self.scheme]

    @property
    def cols(self) -> int:
        return self.source.row_bytes // self.source.itemsize if self.source.itemsize else 0

    def output(self, role: str) -> OutTensor | None:
        return next((o for o in self.outputs if o.role == role), None)

    def slabs(self) -> list[tuple[int, int]]:
        rows, step = self.source.rows, self.slab_rows
        return [(r, min(r + step, rows)) for r in range(0, rows, step)] or [(0, 0)]

    @property
    def nbytes_out(self) -> int:
        return sum(o.nbytes for o in self.outputs)


@dataclass
class Shard:
    index: int
    name: str
    entries: list[int]
    header_len: int = 0        # bytes of the JSON header (padded)
    data_bytes: int = 0

    @property
    def size(self) -> int:
        return 8 + self.header_len + self.data_bytes


@dataclass
class Plan:
    source: Source
    recipe: Recipe
    entries: list[Entry]
    shards: list[Shard]
    format: "QuantspecFormat"
    slab_bytes: int
    max_shard_size: int
    fingerprint: str = ""
    shard_fingerprints: list[str] = field(default_factory=list)
    #: the source's files copied beside the shards (:data:`CARRIED`): name -> bytes
    carried: dict[str, bytes] = field(default_factory=dict)

    @property
    def bytes_in(self) -> int:
        return sum(e.source.nbytes for e in self.entries)

    @property
    def bytes_out(self) -> int:
        return sum(s.size for s in self.shards)

    def header(self, shard: Shard, done: dict[int, tuple[str, str | None]] | None = None) -> bytes:
        return self.format.header(self, shard, done)


# -- sizes ----------------------------------------------------------------------------------------
_UNITS = {"": 1, "B": 1, "KB": 10 ** 3, "MB": 10 ** 6, "GB": 10 ** 9, "TB": 10 ** 12,
          "KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40}


def parse_size(value: Any, argument: str = "max_shard_size") -> int:
    """Bytes from ``2GB`` (10^9), ``500MiB`` (2^20), ``1.5GB`` or a plain integer."""
    if value is None:
        return DEFAULT_MAX_SHARD_SIZE
    if isinstance(value, bool):
        raise InvalidArgumentError(argument, "must be a size such as 2GB, 500MiB or a number of bytes", value)
    if isinstance(value, int):
        n = value
    else:
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([KMGT]i?B|B)?\s*", str(value), re.I)
        if not m:
            raise InvalidArgumentError(argument, "must be a size such as 2GB, 500MiB or a number of bytes", value)
        n = int(float(m[1]) * _UNITS[(m[2] or "").upper()])
    if n <= 0:
        raise InvalidArgumentError(argument, "must be a positive size", value)
    return n


# -- the "quantspec" layout -----------------------------------------------------------------------
class QuantspecFormat:
    """The ``"quantspec"`` layout: codes under the source tensor's name, ``NAME_scale`` and
    ``NAME_zero_point`` beside them; sub-byte codes packed in ONNX ``raw_data`` order, stored as U8
    bytes (1-D); bfloat16 and float8 tensors (kept tensors, float8 codes) as BF16, F8_E4M3 and F8_E5M2,
    float8e8m0 scales as U8 bit patterns (recorded as ``quantspec.dtype.NAME`` in the shard's
    metadata); shards ``model-00001-of-0000N.safetensors``, the index ``model.safetensors.index.json``,
    the manifest ``quantspec.json``, and the source's ``config.json`` and ``generation_config.json``
    copied unchanged (:meth:`extra_files`)."""

    name = "quantspec"
    index_name = "model.safetensors.index.json"
    manifest_name = "quantspec.json"
    #: files beside the shards that the format may write (besides the index and the manifest)
    extra_names: tuple[str, ...] = CARRIED

    def check(self, recipe: Recipe, source: Source) -> None:
        """Refuse, before planning, what this format cannot write (every scheme is written here)."""

    def refuses(self, t: SourceTensor, scheme: Scheme) -> str | None:
        """Why this format cannot store ``t`` under ``scheme`` (None: it can)."""
        return None

    def row_step(self, outputs: list[OutTensor], t: SourceTensor) -> int:
        """The fewest rows after which every output of the tensor starts on a byte boundary."""
        return _row_step(outputs, t)

    def metadata(self) -> dict[str, str]:
        """The fixed part of each shard's ``__metadata__``."""
        return {"format": "quantspec"}

    def is_ours(self, header: dict) -> bool:
        """Whether a safetensors header is one this format wrote (an earlier conversion's shard)."""
        meta = header.get("__metadata__", {})
        return isinstance(meta, dict) and meta.get("format") == "quantspec"

    def extra_files(self, plan: "Plan") -> dict[str, dict | bytes]:
        """The files beside the shards besides the index and the manifest: name -> content (a dict:
        written as JSON; bytes: written as they are).  Here the files of :data:`CARRIED` the source
        has beside its shards, unchanged (read when the plan was made: :attr:`Plan.carried`); a
        layout that rewrites one of them starts from this (``super().extra_files(plan)``) and
        replaces its entry."""
        return dict(plan.carried)

    def carried(self, source: Source) -> dict[str, bytes]:
        """The files of :data:`CARRIED` beside the shards of a safetensors ``source``: name -> bytes."""
        out: dict[str, bytes] = {}
        if source.kind != "safetensors":
            return out
        for name in CARRIED:
            path = Path(source.root) / name
            if not path.is_file():
                continue
            try:
                out[name] = path.read_bytes()
            except OSError as e:
                raise TensorFileError("src", f"has a {name} that cannot be read", str(path),
                                      detail=e.strerror or str(e)) from None
        return out

    @staticmethod
    def shard_name(i: int, n: int) -> str:
        return f"model-{i + 1:05d}-of-{n:05d}.safetensors"

    def outputs(self, t: SourceTensor, scheme: str) -> list[OutTensor]:
        if scheme == KEEP:
            return [self._stored(t.name, "data", t.dtype, t.shape, t)]
        s = SCHEMES[scheme]
        rows = t.shape[0]
        n = math.prod(t.shape)
        out = [self._stored(t.name, "codes", s.codes, t.shape, t)]
        if s.granularity == "tensor":
            pshape: tuple[int, ...] = ()
        elif s.granularity == "channel":
            pshape = (rows,)
        else:
            pshape = (rows, -(-t.shape[1] // s.block))
        out.append(self._stored(t.name + "_scale", "scale", s.scale_type, pshape, t))
        if s.zero_point:
            out.append(self._stored(t.name + "_zero_point", "zero_point", s.codes, pshape, t))
        assert out[0].nbytes == (packed_size(n, out[0].bits) if out[0].packed else n * qtype(s.codes).dtype.itemsize)
        return out

    @staticmethod
    def _stored(name: str, role: str, type_: str, shape: tuple[int, ...], t: SourceTensor) -> OutTensor:
        count = math.prod(shape)
        try:
            q = qtype(type_)
        except Exception:
            q = None
        if q is not None and q.is_packed:
            nbytes = packed_size(count, q.bits)
            return OutTensor(name, role, type_, "U8", (nbytes,), nbytes, True, False, bits=q.bits)
        if q is not None and role == "data" and q.name in _KEPT:
            return OutTensor(name, role, type_, _KEPT[q.name], tuple(shape), count * q.dtype.itemsize, bits=q.bits)
        if q is not None and q.name in _STORE:
            code, typed = _STORE[q.name]
            return OutTensor(name, role, type_, code, tuple(shape), count * q.dtype.itemsize, False, typed, bits=q.bits)
        if type_ in _EXTRA_CODES:
            return OutTensor(name, role, type_, _EXTRA_CODES[type_], tuple(shape), count * t.itemsize)
        raise TensorFileError("src", f"tensor {t.name!r} has a type a safetensors checkpoint cannot hold", t.path,
                              detail=f"type {type_}")

    def entry_manifest(self, e: Entry, digest: str, stats: str | None = None) -> dict:
        """The manifest's record of one source tensor (``digest``: of its source bytes; ``stats``: its
        error sums as fixed-width text, :func:`.report.format_stats`)."""
        t = e.source
        src = {"name": t.name, "file": t.file, "dtype": t.dtype, "shape": list(t.shape), "digest": digest,
               "digest_rows": e.slab_rows}
        if e.scheme == KEEP:
            o = e.outputs[0]
            return {"scheme": KEEP, "reason": e.reason, "source": src,
                    "data": {"name": o.name, "type": o.type, "stored": o.dtype}}
        s = SCHEMES[e.scheme]
        codes, scale, zp = e.output("codes"), e.output("scale"), e.output("zero_point")
        attrs = s.attributes()
        dq_attrs = dict(attrs)
        if s.scale_type == "float8e8m0":      # DequantizeLinear's output type is the scale's unless given
            dq_attrs["output_dtype"] = qtype("float").onnx
        q_attrs = dict(attrs)
        if qtype(s.codes).kind == "float":
            q_attrs["saturate"] = 1
        return {
            "scheme": s.name, "source": src,
            "codes": {"name": codes.name, "type": s.codes, "shape": list(t.shape), "stored": codes.dtype,
                      "packed": codes.packed},
            "scale": {"name": scale.name, "type": scale.type, "shape": list(_logical(scale, e)), "stored": scale.dtype},
            "zero_point": None if zp is None else {"name": zp.name, "type": zp.type, "shape": list(_logical(zp, e)),
                                                   "stored": zp.dtype, "packed": zp.packed},
            "spec": s.spec, "parameters": s.param_rule.name, "codes_rule": s.codes_rule.name, "tool": s.tool,
            "dequantize": {"operator": "DequantizeLinear", "opset": s.opset, "attributes": dq_attrs},
            # without a zero point, QuantizeLinear's output type is given by a zero point of zeros of
            # the codes' type (or by output_dtype, from opset 21)
            "quantize": {"operator": "QuantizeLinear", "opset": s.opset, "attributes": q_attrs,
                         "output_type": s.codes},
            "stats": stats or STATS_PLACEHOLDER,
        }

    def header(self, plan: Plan, shard: Shard, done: dict[int, tuple[str, str | None]] | None) -> bytes:
        """The shard's safetensors header (padded to ``shard.header_len`` once planned); ``done``:
        entry index -> (source digest, error statistics text); placeholders of the same length when
        None."""
        tensors: dict[str, Any] = {}
        meta: dict[str, str] = self.metadata()
        records = {}
        pos = 0
        for i in shard.entries:
            e = plan.entries[i]
            for o in e.outputs:
                tensors[o.name] = {"dtype": o.dtype, "shape": list(o.shape), "data_offsets": [pos, pos + o.nbytes]}
                pos += o.nbytes
                if o.typed_view:
                    meta[f"quantspec.dtype.{o.name}"] = o.type
            digest, stats = (done or {}).get(i, (DIGEST_PLACEHOLDER, None))
            records[e.source.name] = self.entry_manifest(e, digest, stats)
        meta["quantspec.manifest"] = json.dumps({"format": "quantspec", "version": FORMAT_VERSION,
                                                 "tensors": records}, separators=(",", ":"))
        if plan.shard_fingerprints:
            meta["quantspec.plan"] = plan.shard_fingerprints[shard.index]
        body = json.dumps({"__metadata__": meta, **tensors}, separators=(",", ":")).encode()
        if shard.header_len:
            if len(body) > shard.header_len:  # cannot happen: digests have a fixed length
                raise AssertionError("a shard header outgrew its planned size")
            return body + b" " * (shard.header_len - len(body))
        return body + b" " * (-len(body) % 8)

    def index(self, plan: Plan) -> dict:
        weight_map = {}
        for sh in plan.shards:
            for i in sh.entries:
                for o in plan.entries[i].outputs:
                    weight_map[o.name] = sh.name
        return {"metadata": {"total_size": sum(sh.data_bytes for sh in plan.shards), "format": "quantspec",
                             "quantspec_manifest": self.manifest_name},
                "weight_map": weight_map}


def _logical(o: OutTensor, e: Entry) -> tuple[int, ...]:
    """The shape of a parameter tensor as ONNX takes it (a packed zero point's, unpacked)."""
    s = SCHEMES[e.scheme]
    if s.granularity == "tensor":
        return ()
    if s.granularity == "channel":
        return (e.source.shape[0],)
    return (e.source.shape[0], -(-e.source.shape[1] // s.block))


def _row_step(e_outputs: list[OutTensor], t: SourceTensor) -> int:
    """The fewest rows after which every packed output of the tensor ends on a byte boundary."""
    step = 1
    rows = t.rows
    for o in e_outputs:
        if not o.packed or not rows:
            continue
        per_row = (math.prod(t.shape) if o.role == "codes" else _count(o, t)) // rows
        r = 1
        while (r * per_row * o.bits) % 8:
            r += 1
        step = step * r // math.gcd(step, r)
    return step


def _count(o: OutTensor, t: SourceTensor) -> int:
    return (o.nbytes * 8) // o.bits if o.packed else math.prod(o.shape)


def plan(source: Source, recipe: Recipe, max_shard_size: int, fmt: QuantspecFormat | None = None,
         slab_bytes: int | None = None) -> Plan:
    """Plan the conversion of every tensor of ``source`` (see the module docstring).  Every error
    about the tensors (a scheme a tensor was explicitly given but cannot take, two outputs of one
    name, a type the format cannot hold) is raised here, before anything is written."""
    fmt = fmt or QuantspecFormat()
    slab_bytes = slab_bytes or SLAB_BYTES
    fmt.check(recipe, source)
    places = fmt if hasattr(fmt, "place") else None
    entries: list[Entry] = []
    for i, t in enumerate(source.tensors):
        a = recipe.assign(t.name, t.dtype, t.shape)
        if a.scheme != KEEP and a.explicit and SCHEMES[a.scheme].takes(t.dtype, t.shape) is not None:
            raise InvalidArgumentError("recipe", f"asks for scheme {a.scheme} on tensor {t.name!r}, which it cannot "
                                       f"take: {a.reason}", t.path)
        scheme, reason = a.scheme, a.reason
        if scheme != KEEP:
            why = fmt.refuses(t, SCHEMES[scheme])
            if why is not None:
                if a.explicit:
                    raise InvalidArgumentError("recipe", f"asks for scheme {scheme} on tensor {t.name!r}, which the "
                                               f"{fmt.name} layout cannot store: {why}", t.path)
                scheme, reason = KEEP, why
        outs = fmt.outputs(t, scheme)
        step = fmt.row_step(outs, t)
        per = max(1, slab_bytes // max(t.row_bytes, 1))
        slab = max(step, per - per % step)
        entries.append(Entry(i, t, scheme, reason, outs, slab, format=places))
    owner: dict[str, str] = {}
    for e in entries:
        for o in e.outputs:
            if o.name in owner:
                raise TensorFileError("src", f"the output would hold two tensors named {o.name!r}: from source tensors "
                                      f"{owner[o.name]!r} and {e.source.name!r}", e.source.path,
                                      detail="rename one, or keep one of them with a recipe rule")
            owner[o.name] = e.source.name
    # shards: whole entries, in source order, each shard up to max_shard_size data bytes
    groups: list[list[int]] = [[]]
    size = 0
    for e in entries:
        n = e.nbytes_out
        if groups[-1] and size + n > max_shard_size:
            groups.append([])
            size = 0
        groups[-1].append(e.index)
        size += n
    shards = [Shard(k, fmt.shard_name(k, len(groups)), g) for k, g in enumerate(groups)]
    p = Plan(source, recipe, entries, shards, fmt, slab_bytes, max_shard_size, carried=fmt.carried(source))
    for sh in shards:
        for i in sh.entries:
            entries[i].shard = sh.index
    # fingerprints: everything the bytes of a shard depend on except the source data itself
    common = {"quantspec": __version__, "format": fmt.name, "version": FORMAT_VERSION, "slab_bytes": slab_bytes}
    prints = []
    for sh in shards:
        base = fmt.header(p, sh, None)
        prints.append(hashlib.sha256(json.dumps(common).encode() + base).hexdigest())
    p.shard_fingerprints = prints
    p.fingerprint = hashlib.sha256("".join(p.shard_fingerprints).encode()).hexdigest()
    for sh in shards:
        sh.header_len = len(fmt.header(p, sh, None))
        sh.data_bytes = sum(entries[i].nbytes_out for i in sh.entries)
        pos = 8 + sh.header_len
        for i in sh.entries:
            for o in entries[i].outputs:
                o.offset = pos
                pos += o.nbytes
    return p
