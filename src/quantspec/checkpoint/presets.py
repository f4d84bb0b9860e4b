"""compressed-tensors' preset schemes, as llm-compressor's ``model_free_ptq`` applies them.

A preset (``W4A16``, ``FP8_BLOCK``, ``NVFP4A16``, ...) names the weight arguments that decide the
arithmetic (:class:`quantspec.checkpoint.ctarith.Args`), the compressed-tensors format that stores
them, and the activation arguments the checkpoint declares for its loaders (dynamic activation
quantization, which a data-free conversion has no parameters for).  :data:`PRESETS` is the table, by
upper-case name; :func:`preset` looks one up case-insensitively.  Each preset is also a scheme of
``quantspec convert`` (:mod:`quantspec.checkpoint.schemes` registers them under their lower-case
name, with the compressed-tensors layout as their only layout).

:func:`config_group` is the ``config_groups`` entry a preset writes in ``config.json``'s
``quantization_config``: the same JSON as the tool's (``QuantizationArgs`` with every field), so a
loader reads the same scheme from either checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, TensorFileError
from . import ctarith as ar
from .ctarith import Args

__all__ = ["Preset", "PRESETS", "preset", "is_preset", "config_group", "args_json", "FUSED", "fused_key",
           "group_preset", "codes_of"]


@dataclass(frozen=True)
class Preset:
    """One compressed-tensors preset: its name, weight arguments, format and declared activations."""

    name: str
    weights: Args
    format: str
    inputs: dict | None = None        # input_activations (QuantizationArgs fields), or None (weight-only)
    zp_dtype: str | None = None       # the weights' declared zp_dtype ("torch.int8" for asymmetric int)

    @property
    def scheme_name(self) -> str:
        return self.name.lower()

    @property
    def codes(self) -> str:
        """quantspec's type name of the codes."""
        a = self.weights
        if a.type == "int":
            return f"int{a.bits}" if a.bits in (2, 4, 8) else "int8"
        return "float8e4m3fn" if a.bits == 8 else "float4e2m1"


def _a(**kw) -> dict[str, Any]:
    base = {"actorder": None, "block_structure": None, "dynamic": False, "group_size": None, "num_bits": 8,
            "observer": None, "observer_kwargs": {}, "scale_dtype": None, "strategy": "tensor", "symmetric": True,
            "type": "int", "zp_dtype": None}
    base.update(kw)
    return base


def args_json(p: Preset) -> dict[str, Any]:
    """The weights' ``QuantizationArgs`` as the tool writes them in ``config.json``."""
    a = p.weights
    sd = {None: None, "float8e4m3fn": "torch.float8_e4m3fn", "uint8": "torch.uint8"}[a.scale_dtype]
    return _a(num_bits=a.bits, type=a.type, strategy=a.strategy, symmetric=a.symmetric,
              group_size=a.group if a.strategy in ("group", "tensor_group") else None,
              block_structure=list(a.block) if a.strategy == "block" else None, scale_dtype=sd, zp_dtype=p.zp_dtype)


def config_group(p: Preset, targets: list[str]) -> dict[str, Any]:
    """The ``config_groups`` entry of a preset (``targets``: "Linear", or module names)."""
    return {"format": p.format, "input_activations": p.inputs, "output_activations": None, "targets": targets,
            "weights": args_json(p)}


_TOKEN_INT8 = _a(num_bits=8, type="int", strategy="token", dynamic=True)
_TOKEN_FP8 = _a(num_bits=8, type="float", strategy="token", dynamic=True)


def _intw(bits: int, act: int | None = None) -> Preset:
    name = f"W{bits}A{act or 16}"
    inputs = None if act is None else _a(num_bits=act, type="int", strategy="token", dynamic=True)
    # compressed-tensors stores integer weights with quantized activations unpacked (int-quantized)
    return Preset(name, Args("int", bits, "group", group=128), "pack-quantized" if act is None else "int-quantized",
                  inputs)


_LIST = [
    _intw(4), _intw(8),
    *[_intw(b) for b in (2, 3, 5, 6, 7)],
    _intw(4, 8), _intw(2, 8), _intw(3, 8), _intw(5, 8), _intw(6, 8), _intw(7, 8),
    Preset("W4A16_ASYM", Args("int", 4, "group", group=128, symmetric=False), "pack-quantized", None,
           zp_dtype="torch.int8"),
    Preset("W8A8", Args("int", 8, "channel"), "int-quantized", _TOKEN_INT8),
    Preset("W4AFP8", Args("int", 4, "group", group=128), "int-quantized", _TOKEN_FP8),
    Preset("FP8_DYNAMIC", Args("float", 8, "channel"), "float-quantized", _TOKEN_FP8),
    Preset("FP8_BLOCK", Args("float", 8, "block", block=(128, 128)), "float-quantized",
           _a(num_bits=8, type="float", strategy="group", group_size=128, dynamic=True)),
    Preset("NVFP4A16", Args("float", 4, "tensor_group", group=16, scale_dtype="float8e4m3fn"), "nvfp4-pack-quantized",
           None),
    Preset("MXFP4A16", Args("float", 4, "group", group=32, scale_dtype="uint8"), "mxfp4-pack-quantized", None),
    Preset("MXFP4", Args("float", 4, "group", group=32, scale_dtype="uint8"), "mxfp4-pack-quantized",
           _a(num_bits=4, type="float", strategy="group", group_size=32, dynamic=True, scale_dtype="torch.uint8")),
]
#: the presets, by upper-case name (``INT8`` is the tool's alias of ``W8A8``)
PRESETS: dict[str, Preset] = {p.name: p for p in _LIST}
PRESETS["INT8"] = PRESETS["W8A8"]

#: the presets the tool has that a data-free conversion cannot make, and why
REFUSED = {
    "FP8": "its input activations are static: their scales come from calibration data (llm-compressor's oneshot)",
    "NVFP4": "its input activations have a calibrated global scale (llm-compressor's oneshot)",
    "UNQUANTIZED": "it quantizes nothing",
    "MXFP8A16": "compressed-tensors' MXFP8 layout is not written by quantspec",
    "MXFP8": "compressed-tensors' MXFP8 layout is not written by quantspec",
    "W2A4": "4-bit activations have no dynamic kernel", "W3A4": "4-bit activations have no dynamic kernel",
    "W4A4": "4-bit activations have no dynamic kernel",
}


def is_preset(name: str) -> bool:
    return isinstance(name, str) and name.upper() in PRESETS


def preset(name: str) -> Preset:
    """The preset of this name (any case)."""
    p = PRESETS.get(name.upper()) if isinstance(name, str) else None
    if p is None:
        why = REFUSED.get(name.upper()) if isinstance(name, str) else None
        if why:
            raise InvalidArgumentError("scheme", f"preset {name} cannot be made without data: {why}", name)
        raise InvalidArgumentError("scheme", "must be a compressed-tensors preset: " + ", ".join(sorted(PRESETS)), name)
    return p


# -- fused weights (NVFP4's shared global scales) -------------------------------------------------------
#: the weights whose NVFP4 global scale is shared (vLLM fuses them into one matrix): (suffix of the
#: member, the suffixes of the set).  A member's partners are the names with its prefix and the
#: set's other suffixes.
FUSED = [
    ((".q_proj.weight", ".k_proj.weight", ".v_proj.weight"), ("attn", "attention")),
    ((".wq_a.weight", ".wkv_a_with_mqa.weight"), ("attn", "attention")),
    ((".gate_proj.weight", ".up_proj.weight"), ("mlp",)),
    ((".w1.weight", ".w3.weight"), ("",)),
]


def fused_key(name: str, names: set[str]) -> str | None:
    """The key of the fused set ``name`` belongs to (its prefix and set), or None: the q/k/v projections
    of an attention module (whose name ends in ``attn`` or ``attention``), the gate/up projections of an
    ``mlp``, and ``w1``/``w3``, when the whole set is present in ``names``."""
    for k, (suffixes, parents) in enumerate(FUSED):
        for suf in suffixes:
            if not name.endswith(suf):
                continue
            prefix = name[:-len(suf)]
            if parents != ("",) and not any(prefix.endswith(p) for p in parents):
                continue
            if all(prefix + s in names for s in suffixes):
                return f"{k}:{prefix}"
    return None


# -- one weight, whole (the readable path) ----------------------------------------------------------------
def encode_weight(p: Preset, x, wt: str, gscale=None, *, parts: bool = False) -> Any:
    """The tensors a preset stores for one weight ``x`` (float32 [out, in], values of ``wt``), by the
    suffix that replaces ``weight`` in its name: ``{"weight_packed": array, "weight_scale": array, ...}``
    with the arrays as numpy arrays of their stored types (int32, uint8, int8, int64, ml_dtypes float8,
    float32, or the weight's type for scales).  ``gscale``: NVFP4's global scale
    (:func:`quantspec.checkpoint.ctarith.global_scale` of the weight's, or its fused set's, absolute
    maximum).  ``parts``: return ``(tensors, (codes, scale, zero point))``, the unpacked codes and
    parameters beside them (:func:`quantspec.checkpoint.ctarith.codes` / ``params``)."""
    import ml_dtypes
    import numpy as np

    from . import ctarith as ar

    a = p.weights
    rows, cols = x.shape
    if a.strategy == "tensor_group" and gscale is None:
        gscale = ar.global_scale(ar.absmax(x), wt)
    scale, zp = ar.params(x, a, wt, gscale)
    c = ar.codes(x, scale, zp, a, wt, gscale)
    out: dict[str, Any] = {}
    if p.format == "pack-quantized":
        out["weight_packed"] = ar.pack_ints(c, a.bits)
        out["weight_scale"] = scale.astype(ar.WT[wt])
        if zp is not None:
            out["weight_zero_point"] = ar.pack_ints(zp, a.bits, axis=0)
        out["weight_shape"] = np.array([rows, cols], np.int64)
    elif p.format == "int-quantized":
        out["weight"] = c.astype(np.int8)
        out["weight_scale"] = scale.astype(ar.WT[wt])
        if zp is not None:
            out["weight_zero_point"] = zp
    elif p.format == "float-quantized":
        out["weight"] = c.astype(ml_dtypes.float8_e4m3fn)
        out["weight_scale"] = scale.astype(ar.WT[wt])
    elif p.format == "nvfp4-pack-quantized":
        out["weight_packed"] = ar.pack_fp4(c)
        out["weight_scale"] = scale.astype(ml_dtypes.float8_e4m3fn)
        out["weight_global_scale"] = np.array([gscale], np.float32)
    elif p.format == "mxfp4-pack-quantized":
        out["weight_packed"] = ar.pack_fp4(c)
        out["weight_scale"] = ar.mx_stored(scale)
    else:                                            # pragma: no cover - the table's formats
        raise AssertionError(p.format)
    return (out, (c, scale, zp)) if parts else out


# -- reading what a preset stored ----------------------------------------------------------------------------
_SD = {None: None, "torch.float8_e4m3fn": "float8e4m3fn", "torch.uint8": "uint8"}


def group_preset(group: dict, default_format: str | None, where: str) -> Preset:
    """The :class:`~quantspec.checkpoint.presets.Preset` of a config group: the preset whose weight
    arguments and format these are, or one made of them (a preset's arithmetic with other group sizes)."""
    w = group.get("weights") or {}
    fmt = group.get("format") or default_format or ""
    try:
        strategy = w["strategy"]
        bits = int(w["num_bits"])
        type_ = w["type"]
        sym = bool(w.get("symmetric", True))
        gs = int(w.get("group_size") or 0)
        bs = tuple(int(v) for v in (w.get("block_structure") or (0, 0)))
        sd = _SD[w.get("scale_dtype")]
    except (KeyError, TypeError, ValueError):
        raise TensorFileError("dst", "has a config group whose weights compressed-tensors' arithmetic does not take",
                              where, detail=json.dumps(w)[:300]) from None
    args = Args(type_, bits, strategy, group=gs, block=bs if len(bs) == 2 else (0, 0), symmetric=sym,
                   scale_dtype=sd)
    known = ("pack-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized", "mxfp4-pack-quantized")
    ok = (fmt in known and strategy in ("channel", "group", "block", "tensor_group")
          and ((type_ == "int" and 2 <= bits <= 8) or (type_ == "float" and bits in (4, 8))))
    if not ok:
        raise TensorFileError("dst", f"has a config group ({fmt or 'no format'}: {type_}{bits}, strategy {strategy}) "
                              "that quantspec does not recompute by compressed-tensors' arithmetic", where)
    for p in PRESETS.values():
        if p.weights == args and p.format == fmt:
            return p
    return Preset(f"{type_}{bits}-{strategy}", args, fmt, group.get("input_activations"),
                  w.get("zp_dtype"))


def codes_of(p: Preset, arr: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Unpacked codes (int8 values, or float32 values of the float type) of a stored codes tensor."""
    a = p.weights
    if p.format == "pack-quantized":
        return ar.unpack_ints(arr.astype(np.int32), a.bits, cols).astype(np.int16)
    if p.format in ("nvfp4-pack-quantized", "mxfp4-pack-quantized"):
        return ar.unpack_fp4(arr.astype(np.uint8))
    return arr.astype(np.float32) if a.type == "float" else arr.astype(np.int16)
