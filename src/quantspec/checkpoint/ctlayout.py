"""The compressed-tensors layout (``convert(..., format="compressed-tensors")``): the checkpoint that
vLLM and Hugging Face transformers load, as the ``compressed-tensors`` library writes it.

Each quantized weight ``M.weight`` (of a module ``M``; ``[out_features, in_features]``) becomes:

- int8 schemes (``int8``, ``int8-tensor``, ``uint8-asym``, ``litert``) — format ``int-quantized``:
  ``M.weight`` (I8 codes; ``uint8-asym``'s codes less 128, with ``M.weight_zero_point`` (I8,
  ``[out, 1]``) its zero point less 128), ``M.weight_scale`` (``[out, 1]``, ``[1]`` per tensor);
- float8 schemes (``fp8-e4m3``, ``fp8-e4m3-channel``) — format ``float-quantized``: ``M.weight``
  (F8_E4M3 codes), ``M.weight_scale`` (``[1]`` or ``[out, 1]``);
- 4-bit groups (``int4-bN``, ``uint4-bN-asym``) — format ``pack-quantized``: ``M.weight_packed``
  (I32 ``[out, in / 8]``: eight codes a word, code ``k`` of a word in bits ``4k..4k+3``, each code
  stored plus 8 as an unsigned nibble), ``M.weight_scale`` (``[out, in / N]``), ``M.weight_shape``
  (I64 ``[2]``) and, for ``uint4-bN-asym``, ``M.weight_zero_point`` (I32 ``[ceil(out / 8), in / N]``:
  the zero points less 8, packed the same way along the output axis, eight rows a word).

Scales are stored in the source's type (bfloat16, float16 or float32), as compressed-tensors keeps
them in the model's type and its loaders read them so: the scheme's float32 scale is rounded to that
type (ties to even), a zero scale (a block of zeros, or a scale that rounds to zero) is replaced by
the type's epsilon (2^-7, 2^-10, 2^-23: compressed-tensors' rule, which keeps ``x / scale`` defined),
and the codes are the scheme's codes of the *stored* scale; DequantizeLinear of
the stored codes, scale and zero point (``(code - zero_point) * scale`` in float32, then rounded to
the scale's type, as compressed-tensors' decompression computes it in that type) is ``dequantize``.
A float32 source keeps the scheme's float32 scales.

``config.json`` holds a ``quantization_config`` (``quant_method: compressed-tensors``, status
``compressed``): one config group per distinct quantization, whose ``targets`` are the quantized
modules' names, and an ``ignore`` list of the modules whose weights are kept.  The int-quantized and
float-quantized groups declare dynamic per-token activation quantization of the same type (what
those formats are: W8A8, as llm-compressor's ``W8A8`` and ``FP8_DYNAMIC`` presets write them); the
pack-quantized groups are weight-only (W4A16).  A ``config.json`` beside the source's shards is copied
with the ``quantization_config`` added.  Shards carry ``{"format": "pt"}`` in their metadata (what
transformers requires) and quantspec's manifest, which ``quantspec.checkpoint.open`` and ``verify``
read; ``quantspec.json`` sits beside them.

Which format holds a scheme is the scheme's own ``ct`` record
(:class:`quantspec.checkpoint.schemes.CTStorage`: format, type, bits, strategy, symmetric), which
:data:`CT_SCHEMES` collects; the bytes of each format follow from it and from the codes' type, and
the scales are rounded as compressed-tensors keeps them by the rules' fast kernels (``sround``) or
by :func:`quantspec.checkpoint.reference.stored_scale`.

Schemes compressed-tensors cannot express (``fp8-e5m2``: it has one float8 type, e4m3; the MX
schemes) are refused.  Tensors it cannot hold are kept (and listed): names not ending in ``.weight``
(compressed-tensors quantizes module weights), tensors other than 2-D, and under 4-bit groups weights
whose ``in_features`` is not a multiple of the group (compressed-tensors requires whole groups).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._semantics.packing import unpack_codes
from ..errors import TensorFileError, UnsupportedError
from ..versions import note_reproducing
from .layout import OutTensor, QuantspecFormat
from .presets import args_json, config_group
from .schemes import KEEP, SCHEMES, CTStorage, Recipe, Scheme
from .sources import Source, SourceTensor

__all__ = ["CompressedTensorsFormat", "CT_SCHEMES", "CT_VERSION", "ct_args"]

#: the compressed-tensors version whose layout is written (and tested against)
CT_VERSION = "0.20.0"

#: the formats, in the order :data:`CT_SCHEMES` lists their schemes
_FORMATS = ("int-quantized", "float-quantized", "pack-quantized")


class _CTSchemes(Mapping):
    """scheme name -> its :class:`~quantspec.checkpoint.schemes.CTStorage` (format, type, bits,
    strategy, symmetric), for every registered scheme compressed-tensors can hold (its ``ct``
    record), grouped by format; groups carry the scheme's block."""

    def _names(self) -> list[str]:
        names = [n for n, s in SCHEMES.items() if s.ct is not None]
        rank = {f: i for i, f in enumerate(_FORMATS)}
        return sorted(names, key=lambda n: rank.get(SCHEMES[n].ct.format, len(_FORMATS)))

    def __getitem__(self, name: str) -> CTStorage:
        s = SCHEMES.get(name) if isinstance(name, str) else None
        if s is None or s.ct is None:
            raise KeyError(name)
        return s.ct

    def __iter__(self):
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return repr(dict(self))


#: scheme -> (compressed-tensors format, type, bits, strategy, symmetric): the schemes' ``ct`` records
CT_SCHEMES: Mapping[str, CTStorage] = _CTSchemes()

# safetensors dtype codes of stored types
_CODE = {"bfloat16": "BF16", "float16": "F16", "float": "F32", "double": "F64", "bool": "BOOL", "int8": "I8",
         "uint8": "U8", "int16": "I16", "uint16": "U16", "int32": "I32", "int64": "I64", "float8e4m3fn": "F8_E4M3",
         "float8e5m2": "F8_E5M2", "float8e8m0": "F8_E8M0", "<u4": "U32", "<u8": "U64"}
_ITEM = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "BOOL": 1, "I8": 1, "U8": 1, "I16": 2, "U16": 2, "I32": 4, "I64": 8,
         "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "U32": 4, "U64": 8}


def ct_args(scheme: Scheme) -> dict[str, Any]:
    """The compressed-tensors ``QuantizationArgs`` (as JSON) of a scheme's weights."""
    fmt, type_, bits, strategy, symmetric = scheme.ct
    return {"num_bits": bits, "type": type_, "symmetric": symmetric, "group_size": scheme.block if strategy == "group"
            else None, "strategy": strategy, "block_structure": None, "dynamic": False, "actorder": None,
            "observer": "minmax", "observer_kwargs": {}}


def _activations(type_: str) -> dict[str, Any]:
    """Dynamic per-token activation quantization (the W8A8 presets' input activations)."""
    return {"num_bits": 8, "type": type_, "symmetric": True, "group_size": None, "strategy": "token",
            "block_structure": None, "dynamic": True, "actorder": None, "observer": None, "observer_kwargs": {}}


def _module(name: str) -> str:
    return name[:-len(".weight")]


#: the last component of the module names that Hugging Face models give their embedding tables
EMBEDDING_NAMES = frozenset({"embed_tokens", "embed_positions", "embed_in", "wte", "wpe", "word_embeddings",
                             "position_embeddings", "token_type_embeddings", "tok_embeddings", "embeddings",
                             "embedding", "shared", "embed"})


def is_embedding(module: str) -> bool:
    """Whether ``module`` names an embedding table (:data:`EMBEDDING_NAMES`): its weight is indexed by
    token or position ids, which no loader quantizes as a Linear input."""
    return module.rpartition(".")[2] in EMBEDDING_NAMES


class CompressedTensorsFormat(QuantspecFormat):
    """The ``"compressed-tensors"`` layout (module docstring)."""

    name = "compressed-tensors"
    config_name = "config.json"
    ct_scales = True            # scales stored as compressed-tensors keeps them (encode's ``sround``)

    def __init__(self):
        self._config: dict | None = None
        self._steps: dict[str, int] = {}         # a preset's tensor -> the rows its slabs are a multiple of
        note_reproducing("compressed-tensors")

    # -- planning --------------------------------------------------------------------------------
    def check(self, recipe: Recipe, source: Source) -> None:
        names = {recipe.default} | {s for _, s in recipe.rules}
        for n in sorted(x for x in names if x not in (None, KEEP)):
            if SCHEMES[n].ct is None and SCHEMES[n].preset is None:
                s = SCHEMES[n]
                why = ("its MX formats are not written by quantspec" if s.scale_type == "float8e8m0"
                       else "compressed-tensors has one float8 type, e4m3 (fp8-e4m3, fp8-e4m3-channel)"
                       if s.codes == "float8e5m2" else "no compressed-tensors format holds it")
                raise UnsupportedError("format", f"compressed-tensors cannot express scheme {n}: {why}; it takes "
                                       + ", ".join(CT_SCHEMES), "compressed-tensors")
        self._config = None
        if source.kind == "safetensors":
            path = Path(source.root) / self.config_name
            if path.is_file():
                try:
                    config = json.loads(path.read_text(encoding="utf-8"))
                    assert isinstance(config, dict)
                except Exception:
                    raise TensorFileError("src", "has a config.json that is not a JSON object", str(path)) from None
                self._config = config

    def refuses(self, t: SourceTensor, scheme: Scheme) -> str | None:
        if not t.name.endswith(".weight") or t.name == ".weight":
            return "compressed-tensors quantizes module weights (tensors named MODULE.weight)"
        if is_embedding(_module(t.name)):
            return ("an embedding's weight is a lookup table of token (or position) ids, not a Linear weight: "
                    "compressed-tensors loaders quantize Linear layers")
        if _module(t.name).rpartition(".")[2].endswith("norm"):
            return "a normalization layer's weight (compressed-tensors quantizes Linear layers)"
        if len(t.shape) != 2:
            return f"compressed-tensors quantizes 2-D weights (got {len(t.shape)}-D)"
        if scheme.granularity == "block" and t.shape[1] % scheme.block:
            return (f"compressed-tensors needs whole groups: in_features {t.shape[1]} is not a multiple of "
                    f"{scheme.block}")
        return None

    def outputs(self, t: SourceTensor, scheme: str) -> list[OutTensor]:
        if scheme != KEEP and SCHEMES[scheme].preset is not None:
            out, self._steps[t.name] = _preset_outputs(t, SCHEMES[scheme].preset)
            return out
        if scheme == KEEP:
            code = _CODE.get(t.dtype)
            if code is None:
                raise TensorFileError("src", f"tensor {t.name!r} has a type a safetensors checkpoint cannot hold",
                                      t.path, detail=f"type {t.dtype}")
            n = math.prod(t.shape)
            return [OutTensor(t.name, "data", t.dtype, code, tuple(t.shape), n * _ITEM[code])]
        s = SCHEMES[scheme]
        _, _, bits, strategy, symmetric = s.ct
        m = _module(t.name)
        rows, cols = t.shape
        scode = _CODE[t.dtype]                       # the scale in the model's type
        sitem = _ITEM[scode]
        if bits == 4:
            nb = cols // s.block
            out = [OutTensor(m + ".weight_packed", "codes", s.codes, "I32", (rows, cols // 8), rows * cols // 2,
                             packed=True, bits=4),
                   OutTensor(m + ".weight_scale", "scale", t.dtype, scode, (rows, nb), rows * nb * sitem)]
            if not symmetric:
                w = -(-rows // 8)
                out.append(OutTensor(m + ".weight_zero_point", "zero_point", s.codes, "I32", (w, nb), w * nb * 4,
                                     packed=True, bits=4))
            out.append(OutTensor(m + ".weight_shape", "shape", "int64", "I64", (2,), 16))
            return out
        ccode = "F8_E4M3" if s.codes == "float8e4m3fn" else "I8"
        pshape = (1,) if strategy == "tensor" else (rows, 1)
        out = [OutTensor(m + ".weight", "codes", s.codes, ccode, (rows, cols), rows * cols),
               OutTensor(m + ".weight_scale", "scale", t.dtype, scode, pshape, math.prod(pshape) * sitem)]
        if not symmetric:
            out.append(OutTensor(m + ".weight_zero_point", "zero_point", s.codes, "I8", pshape, math.prod(pshape)))
        return out

    def row_step(self, outputs: list[OutTensor], t: SourceTensor) -> int:
        step = self._steps.get(t.name)
        if step is not None:                             # a preset's: whole blocks, whole packed words
            return step
        zp = next((o for o in outputs if o.role == "zero_point"), None)
        return 8 if zp is not None and zp.packed else 1       # zero points packed eight rows a word

    # -- the bytes of a slab ----------------------------------------------------------------------
    def place(self, e, r0: int, r1: int, arrays: dict[str, np.ndarray]) -> list[tuple[str, int, np.ndarray]]:
        """(role, offset in the file, bytes) of each output of rows ``[r0, r1)``, from the arrays the kernels
        (or the numpy path) give for the "quantspec" layout: packed codes in ONNX order, the scale
        as float32 (or already as its stored bytes), zero points as stored there."""
        s = SCHEMES[e.scheme]
        if s.preset is not None:
            return _preset_place(e, s.preset, r0, r1, arrays)
        rows, cols = e.source.shape
        n = r1 - r0
        out = []
        codes = e.output("codes")
        raw = np.ascontiguousarray(arrays["codes"]).reshape(-1).view(np.uint8)
        if codes.bits == 4:
            nbytes = n * cols // 2
            data = raw[:nbytes] ^ np.uint8(0x88) if s.codes == "int4" else raw[:nbytes]
            out.append(("codes", codes.offset + r0 * cols // 2, data))
        else:
            data = raw[:n * cols] ^ np.uint8(0x80) if s.codes == "uint8" else raw[:n * cols]
            out.append(("codes", codes.offset + r0 * cols, data))
        scale = e.output("scale")
        per_row = 0 if s.granularity == "tensor" else 1 if s.granularity == "channel" else cols // s.block
        if per_row or r0 == 0:
            count = per_row * n if per_row else 1
            out.append(("scale", scale.offset + r0 * per_row * _ITEM[scale.dtype], _scale_bytes(arrays["scale"], scale, count)))
        zp = e.output("zero_point")
        if zp is not None:
            z = np.ascontiguousarray(arrays["zero_point"]).reshape(-1).view(np.uint8)
            if zp.packed:                                # uint4 zero points: eight rows a word
                nb = per_row
                u = unpack_codes(z, 4, n * nb).reshape(n, nb).astype(np.uint32)
                w = -(-n // 8)
                pad = np.zeros((w * 8, nb), np.uint32)
                pad[:n] = u
                words = np.zeros((w, nb), np.uint32)
                for k in range(8):
                    words |= pad[k::8] << np.uint32(4 * k)
                out.append(("zero_point", zp.offset + (r0 // 8) * nb * 4, words.view(np.uint8).reshape(-1)))
            else:
                out.append(("zero_point", zp.offset + r0 * per_row, z[:n * per_row] ^ np.uint8(0x80)))
        shape = e.output("shape")
        if shape is not None and r0 == 0:
            out.append(("shape", shape.offset, np.array([rows, cols], "<i8").view(np.uint8)))
        return out

    # -- files -----------------------------------------------------------------------------------
    def metadata(self) -> dict[str, str]:
        return {"format": "pt", "quantspec.format": "compressed-tensors"}

    def is_ours(self, header: dict) -> bool:
        meta = header.get("__metadata__", {})
        return isinstance(meta, dict) and meta.get("quantspec.format") == "compressed-tensors"

    def entry_manifest(self, e, digest: str, stats: str | None = None) -> dict:
        rec = super().entry_manifest(e, digest, stats)
        if e.scheme != KEEP and SCHEMES[e.scheme].preset is not None:
            p = SCHEMES[e.scheme].preset
            rec["layout"] = {"format": p.format, "preset": p.name, "args": args_json(p),
                             "module": _module(e.source.name),
                             "tensors": {o.role: o.name for o in e.outputs}}
            return rec
        if e.scheme != KEEP:
            s = SCHEMES[e.scheme]
            rec["layout"] = {"format": s.ct.format, "args": ct_args(s), "module": _module(e.source.name),
                             "scale_type": e.output("scale").type}
        return rec

    def quantization_config(self, plan) -> dict:
        groups: dict[str, dict] = {}
        order: list[str] = []
        ignore: list[str] = []
        presets: dict[str, list[str]] = {}
        for e in plan.entries:
            if e.scheme == KEEP:
                if e.source.name.endswith(".weight") and len(e.source.shape) == 2:
                    ignore.append(_module(e.source.name))
                continue
            s = SCHEMES[e.scheme]
            if s.preset is not None:
                presets.setdefault(s.preset.name, []).append(_module(e.source.name))
                continue
            fmt, type_, _, _, _ = s.ct
            args = ct_args(s)
            key = json.dumps([fmt, args], sort_keys=True)
            if key not in groups:
                groups[key] = {"targets": [], "weights": args, "input_activations":
                               None if fmt == "pack-quantized" else _activations(type_),
                               "output_activations": None, "format": fmt}
                order.append(key)
            groups[key]["targets"].append(_module(e.source.name))
        config_groups = {f"group_{i}": groups[k] for i, k in enumerate(order)}
        for name, modules in presets.items():
            # one preset alone targets every Linear layer but the ignored ones, as llm-compressor writes
            # it; beside other groups, each group names its modules
            only = len(presets) == 1 and not order
            config_groups[name] = config_group(SCHEMES[name].preset, ["Linear"] if only else modules)
        formats = sorted({g["format"] for g in config_groups.values()})
        return {
            "quant_method": "compressed-tensors", "format": formats[0] if len(formats) == 1 else "mixed-precision",
            "quantization_status": "compressed", "version": CT_VERSION,
            "config_groups": config_groups,
            "ignore": ignore, "kv_cache_scheme": None, "global_compression_ratio": None, "transform_config": {},
        }

    def extra_files(self, plan) -> dict[str, dict | bytes]:
        files = super().extra_files(plan)               # config.json and generation_config.json, as they are
        config = dict(self._config or {})
        config["quantization_config"] = self.quantization_config(plan)
        files[self.config_name] = config
        return files


# -- the presets' outputs ---------------------------------------------------------------------------------
def _preset_outputs(t: SourceTensor, p) -> tuple[list[OutTensor], int]:
    """The stored tensors of a preset's weight (:func:`quantspec.checkpoint.presets.encode_weight`), and
    the number of rows its slabs must be a multiple of (whole 2-D blocks, whole packed words)."""
    a = p.weights
    rows, cols = t.shape
    m = _module(t.name)
    scode = _CODE[t.dtype]
    pr, pc = a.param_shape(rows, cols)
    step = 1
    out: list[OutTensor] = []
    if p.format == "pack-quantized":
        words = math.ceil(cols * a.bits / 32)
        out.append(OutTensor(m + ".weight_packed", "codes", p.codes, "I32", (rows, words), rows * words * 4))
        out.append(OutTensor(m + ".weight_scale", "scale", t.dtype, scode, (pr, pc), pr * pc * _ITEM[scode]))
        if not a.symmetric:
            zr = math.ceil(rows * a.bits / 32)
            out.append(OutTensor(m + ".weight_zero_point", "zero_point", "int32", "I32", (zr, pc), zr * pc * 4))
            step = 32 // math.gcd(32, a.bits)        # zero points pack whole words along the rows
        out.append(OutTensor(m + ".weight_shape", "shape", "int64", "I64", (2,), 16))
    elif p.format in ("int-quantized", "float-quantized"):
        code = "I8" if a.type == "int" else "F8_E4M3"
        out.append(OutTensor(m + ".weight", "codes", p.codes, code, (rows, cols), rows * cols))
        out.append(OutTensor(m + ".weight_scale", "scale", t.dtype, scode, (pr, pc), pr * pc * _ITEM[scode]))
        if a.strategy == "block":
            step = a.block[0]
    else:                                            # the float4 formats
        out.append(OutTensor(m + ".weight_packed", "codes", p.codes, "U8", (rows, cols // 2), rows * cols // 2))
        if p.format == "nvfp4-pack-quantized":
            out.append(OutTensor(m + ".weight_scale", "scale", "float8e4m3fn", "F8_E4M3", (pr, pc), pr * pc))
            out.append(OutTensor(m + ".weight_global_scale", "global_scale", "float", "F32", (1,), 4))
        else:
            out.append(OutTensor(m + ".weight_scale", "scale", "uint8", "U8", (pr, pc), pr * pc))
    return out, step


def _preset_place(e, p, r0: int, r1: int, arrays: dict[str, np.ndarray]) -> list[tuple[str, int, np.ndarray]]:
    """(role, offset in the file, bytes) of each of a preset's outputs for rows ``[r0, r1)``: ``arrays``
    holds the slab's stored tensors by role (:func:`quantspec.checkpoint.presets.encode_weight`)."""
    a = p.weights
    out = []
    for o in e.outputs:
        if o.role not in arrays:
            continue
        data = np.ascontiguousarray(arrays[o.role]).reshape(-1).view(np.uint8)
        if o.role == "shape":                           # the whole weight's shape, not the slab's
            data = np.array(e.source.shape, "<i8").view(np.uint8)
        if o.role in ("shape", "global_scale"):
            if r0 == 0:
                out.append((o.role, o.offset, data))
            continue
        if o.role == "scale" and a.strategy == "block":
            first = r0 // a.block[0]
        elif o.role == "zero_point":
            first = r0 * a.bits // 32
        else:
            first = r0
        row_bytes = o.nbytes // o.shape[0]
        out.append((o.role, o.offset + first * row_bytes, data))
    return out


def _scale_bytes(data: np.ndarray, o: OutTensor, count: int) -> np.ndarray:
    """The stored bytes of ``count`` scales: float32 values (already exact in the stored type)
    converted, or bytes already in the stored type."""
    a = np.ascontiguousarray(data).reshape(-1)
    if a.dtype == np.float32 and o.dtype != "F32":
        a = a[:count]
        if o.dtype == "BF16":
            return (a.view(np.uint32) >> np.uint32(16)).astype("<u2").view(np.uint8)
        return a.astype("<f2").view(np.uint8)
    return a.view(np.uint8)[:count * _ITEM[o.dtype]]
